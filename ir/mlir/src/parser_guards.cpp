// Guards against known memory-safety bugs in MLIR 19's own parser (docs/hardening.md, the `.mlir`
// findings). MLIR-free: it reads the source text before MLIR does.
//
// Nesting: see check_nesting.
//
// linalg.generic's custom parser (LinalgOps.cpp, GenericOp::parse) walks `iterator_types` with
// ArrayAttr::getAsValueRange<StringAttr>(), an unchecked cast. An element that is not a string
// (`24`, `#linalg.iterator_type<parallel>`, `[]`) is then read as a StringAttr: its "length" is
// whatever lies in that attribute's storage, and the error message MLIR builds from it allocates that
// many bytes or reads out of bounds (libFuzzer found it: tests/fuzz/findings/). The generic form
// ("linalg.generic"(...) <{...}>) converts properties with checked casts and is not affected, so
// only the custom form is checked, and only this one attribute.
#include "mlir_private.hpp"

#include "mgt/ir/error.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

namespace mgt::mlirio {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.'; }

// A cursor over MLIR source that steps over whitespace, `//` comments and string literals the way
// MLIR's lexer does, so that text inside comments and strings is never mistaken for syntax.
class Cursor {
 public:
  Cursor(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  bool done() const { return pos_ >= text_.size(); }
  char peek() const { return done() ? '\0' : text_[pos_]; }
  size_t pos() const { return pos_; }
  void advance() { ++pos_; }

  void skip_trivia() {
    while (!done()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (!done() && text_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  // At a '"': steps past the literal (backslash escapes included; an unterminated literal ends at
  // the end of the line, where MLIR's lexer reports it).
  void skip_string() {
    ++pos_;
    while (!done() && text_[pos_] != '"' && text_[pos_] != '\n') pos_ += text_[pos_] == '\\' ? 2 : 1;
    if (!done() && text_[pos_] == '"') ++pos_;
  }

  std::string_view read_ident() {
    const size_t start = pos_;
    while (!done() && ident_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // The string literal's contents at a '"', without the quotes (escapes left as written).
  std::string_view read_string() {
    const size_t start = pos_ + 1;
    skip_string();
    const size_t end = pos_ > start && text_[pos_ - 1] == '"' ? pos_ - 1 : pos_;
    return text_.substr(start, end - start);
  }

  // file:line:col of byte `at`, 1-based like MLIR's diagnostics.
  std::string where(size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return name_ + ":" + std::to_string(line) + ":" + std::to_string(col);
  }

  // Skips one attribute value or type up to (not including) the next ',' or closing bracket at this
  // nesting level; `->` is an arrow, not a closing '>'.
  void skip_value() {
    int depth = 0;
    while (!done()) {
      skip_trivia();
      const char c = peek();
      if (c == '"') {
        skip_string();
        continue;
      }
      if (c == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
        pos_ += 2;
        continue;
      }
      if (c == '{' || c == '[' || c == '(' || c == '<') ++depth;
      if (c == '}' || c == ']' || c == ')' || c == '>') {
        if (depth == 0) return;
        --depth;
      }
      if (c == ',' && depth == 0) return;
      ++pos_;
    }
  }

 private:
  std::string_view text_;
  const std::string& name_;
  size_t pos_ = 0;
};

// At the '[' of `iterator_types = [...]`: every element must be a string literal, optionally typed
// (`"parallel" : none` is still a StringAttr).
void check_iterator_types(Cursor& c) {
  c.advance();  // '['
  for (int index = 0;; ++index) {
    c.skip_trivia();
    if (c.done() || c.peek() == ']') return;
    const size_t at = c.pos();
    if (c.peek() != '"') {
      throw ir::InputError(c.where(at), "",
                           "error: linalg.generic iterator_types element " + std::to_string(index) +
                               " is not a string literal",
                           "write each iterator type as a string, e.g. iterator_types = [\"parallel\", "
                           "\"reduction\"]; MLIR 19's linalg.generic parser reads any other element out "
                           "of bounds, so mgt refuses it before parsing (docs/hardening.md)");
    }
    c.skip_string();
    c.skip_trivia();
    if (c.peek() == ':') {
      c.advance();
      c.skip_value();
    }
    c.skip_trivia();
    if (c.peek() != ',') return;  // ']' or a syntax error MLIR will report
    c.advance();
  }
}

// At the '{' after a custom-form `linalg.generic`: finds the top-level iterator_types key.
void check_generic_dict(Cursor& c) {
  c.advance();  // '{'
  int depth = 1;
  bool expect_key = true;
  while (!c.done() && depth > 0) {
    c.skip_trivia();
    const char ch = c.peek();
    if (depth == 1 && expect_key && (ident_start(ch) || ch == '"')) {
      const std::string_view key = ch == '"' ? c.read_string() : c.read_ident();
      expect_key = false;
      if (key != "iterator_types") continue;
      c.skip_trivia();
      if (c.peek() != '=') continue;
      c.advance();
      c.skip_trivia();
      if (c.peek() == '[') check_iterator_types(c);
      continue;  // anything else is not an ArrayAttr, which MLIR 19 checks itself
    }
    if (ch == '"') {
      c.skip_string();
      continue;
    }
    if (ch == '-') {  // `->` inside affine maps is not a closing '>'
      c.advance();
      if (c.peek() == '>') c.advance();
      continue;
    }
    if (ch == '{' || ch == '[' || ch == '(' || ch == '<') ++depth;
    if (ch == '}' || ch == ']' || ch == ')' || ch == '>') --depth;
    if (ch == ',' && depth == 1) expect_key = true;
    c.advance();
  }
}

// MLIR's parser is recursive descent without a depth limit: every nested bracket of a type,
// attribute or region costs a few stack frames, and ~20,000 nested '(' overflow an 8 MiB stack
// (mlir-opt-19 segfaults too; a libFuzzer finding). No model nests brackets anywhere near this deep;
// the limit matches the JSON readers' (docs/hardening.md).
constexpr int kMaxNesting = 256;

void check_nesting(std::string_view text, const std::string& name) {
  Cursor c(text, name);
  int depth = 0;
  while (!c.done()) {
    c.skip_trivia();
    if (c.done()) return;
    const char ch = c.peek();
    if (ch == '"') {
      c.skip_string();
      continue;
    }
    if (ch == '-') {  // `->` is an arrow, not a closing '>'
      c.advance();
      if (c.peek() == '>') c.advance();
      continue;
    }
    if (ch == '(' || ch == '[' || ch == '{' || ch == '<') {
      if (++depth > kMaxNesting) {
        throw ir::InputError(c.where(c.pos()), "",
                             "error: brackets nested deeper than " + std::to_string(kMaxNesting) + " levels",
                             "flatten the type or attribute; MLIR 19's parser recurses once per level and "
                             "overflows the stack on deep nesting, so mgt refuses it before parsing "
                             "(docs/hardening.md)");
      }
    } else if (ch == ')' || ch == ']' || ch == '}' || ch == '>') {
      depth = std::max(0, depth - 1);
    }
    c.advance();
  }
}

}  // namespace

void guard_upstream_parser_bugs(std::string_view text, const std::string& name) {
  check_nesting(text, name);
  Cursor c(text, name);
  char previous = '\0';
  while (!c.done()) {
    const size_t before = c.pos();
    c.skip_trivia();
    if (c.pos() != before) previous = ' ';
    if (c.done()) return;
    const char ch = c.peek();
    if (ch == '"') {
      c.skip_string();
      previous = '"';
      continue;
    }
    // A bare identifier; after %, ^, @, #, ! or an identifier character it is part of a name.
    if (ident_start(ch) && !ident_char(previous) && previous != '%' && previous != '^' && previous != '@' &&
        previous != '#' && previous != '!') {
      const std::string_view ident = c.read_ident();
      previous = 'a';
      if (ident != "linalg.generic") continue;
      c.skip_trivia();
      if (c.peek() == '{') check_generic_dict(c);
      continue;
    }
    previous = ch;
    c.advance();
  }
}

}  // namespace mgt::mlirio
