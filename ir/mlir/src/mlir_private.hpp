// Helpers shared by the mgt_mlir sources; MLIR-free so export.cpp needs no MLIR headers.
#pragma once

#include <string>
#include <string_view>

namespace mlir {
class MLIRContext;
}

namespace mgt::mlirio {

/// The context with every dialect and interface model mgt uses (shared/STACK.md §2.2), made once.
mlir::MLIRContext& shared_context();

/// Parses and verifies `text`; throws ir::InputError with MLIR's first error, located in `name`.
void check_module_text(const std::string& text, const std::string& name);

/// Refuses, with an ir::InputError at file:line:col, source text that would trip a known memory-safety
/// bug in MLIR 19's own parser (parser_guards.cpp, docs/hardening.md). Runs before MLIR sees `text`.
void guard_upstream_parser_bugs(std::string_view text, const std::string& name);

}  // namespace mgt::mlirio
