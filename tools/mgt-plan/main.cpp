// mgt-plan: the command line. Thin: parse flags (CLI11), call the libraries, print.
#include "commands.hpp"
#include "mlir_command.hpp"
#include "probe_command.hpp"
#include "run_command.hpp"
#include "validate_command.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/mlir/mlir_interop.hpp"
#include "mgt/runtime/cuda/device.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <vector>

namespace {
constexpr const char* kFooter = R"(
MFU counts model FLOPs = 6 x (parameters that take part in matmuls, active experts only) x tokens
plus causal attention (fwd + bwd = 3 x 2 x b x s x s/2 x heads x (d_qk + d_v) per layer), divided by
step time x GPUs x dense bf16 peak. Recompute FLOPs are not model FLOPs.
Exit status: 0 done, 1 no valid plan, 2 bad input. Docs: README.md, docs/planner.md, docs/cost-model.md.)";

// Flag values as typed; converted and validated after parsing so errors name the flag and the fix.
struct RawPlanFlags {
  std::string gpus, seq_len, global_batch_tokens;
};

void add_plan_options(CLI::App& app, mgt::cli::PlanOptions& o, RawPlanFlags& raw) {
  app.add_option("model", o.model_path, "model: Hugging Face config.json, mgt.graph/1 JSON, or .mlir (docs/mlir.md)")->required();
  app.add_option("--gpus", raw.gpus, "number of GPUs (may span many nodes; at most 1048576)")->required();
  app.add_option("--cluster", o.cluster, "cluster preset name or mgt.cluster/1 file (default h100-sxm; presets: "
                                         "h100-sxm a100-80g-sxm h200-sxm b200 gb200-nvl72 rtx4090-pcie)");
  app.add_option("--seq-len", raw.seq_len, "training sequence length (default min(8192, max_position_embeddings))");
  app.add_option("--global-batch-tokens", raw.global_batch_tokens,
                 "tokens per optimizer step, K/M/G suffixes are powers of 2 (default: the largest power-of-two number of sequences within 4M = 4194304 tokens)");
  app.add_option("--precision", o.precision,
                 "bf16 (default on GPUs), fp16 (both mixed with fp32 master weights), fp8 (linear layers in fp8, "
                 "the rest bf16; MFU stays relative to the bf16 peak), or fp32 (default on a CPU cluster from probe)");
  app.add_flag("--json", o.json, "print JSON (mgt.plans/1, or one plan entry for estimate)");
  app.add_flag("--allow-cross-node-tp", o.allow_cross_node_tp, "allow tensor parallel groups to span nodes");
}
// Copies the raw flag text into `o`: a flag given (even as "") is a value to validate, never the default.
void resolve_plan_flags(const CLI::App& app, const RawPlanFlags& raw, mgt::cli::PlanOptions& o) {
  if (app.get_option("--gpus")->count() > 0) o.gpus = mgt::cli::parse_gpu_count(raw.gpus);
  if (app.get_option("--seq-len")->count() > 0) o.seq_len = raw.seq_len;
  if (app.get_option("--global-batch-tokens")->count() > 0) o.global_batch_tokens = raw.global_batch_tokens;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mgt-plan: how to train this model on these GPUs. Ranks data parallel (replicate / FSDP shard),\n"
               "tensor (+ sequence), context, pipeline (+ interleaving) and expert parallel plans by predicted\n"
               "throughput, with memory per GPU, step time, tokens/s and MFU.",
               "mgt-plan"};
  app.footer(kFooter);
  app.require_subcommand(0, 1);
  app.fallthrough(false);
  app.set_version_flag("--version", [] {
    return std::string("mgt-plan " MGT_VERSION "\nbackends: ") + mgt::rt::cuda::backends_description();
  }, "print the version and the backends compiled in (cpu; cuda+nccl when built with CUDA)");

  mgt::cli::PlanOptions search;
  RawPlanFlags search_raw;
  int64_t top = 5;
  std::string emit;
  add_plan_options(app, search, search_raw);
  app.add_option("--top", top, "plans to show (default 5)");
  app.add_option("--emit", emit, "print the top plan as a framework config instead of the table: "
                                 "accelerate, axolotl, torchtitan, megatron, deepspeed, torchtitan@0.2");

  auto* inspect = app.add_subcommand("inspect", "parameters, FLOPs per token and a per-block breakdown");
  std::string inspect_model, inspect_seq;
  bool inspect_json = false;
  inspect->add_option("model", inspect_model, "model file")->required();
  inspect->add_option("--seq-len", inspect_seq, "sequence length for attention FLOPs (default as the search)");
  inspect->add_flag("--json", inspect_json, "print JSON");

  auto* estimate = app.add_subcommand("estimate", "estimate one given plan, no search");
  mgt::cli::PlanOptions estimate_options;
  RawPlanFlags estimate_raw;
  std::string plan_text;
  add_plan_options(*estimate, estimate_options, estimate_raw);
  estimate->add_option("--plan", plan_text, "plan as inline JSON ('{\"dp_shard\":4,\"tp\":2}') or a mgt.plan/1 file")
      ->required();
  std::string estimate_emit;
  estimate->add_option("--emit", estimate_emit, "print this plan as a framework config (formats as for the search)");

  auto* simulate = app.add_subcommand("simulate", "one plan in detail: the compiled schedule simulated, step "
                                                  "breakdown, memory over time, Chrome trace and SVG");
  mgt::cli::PlanOptions simulate_options;
  RawPlanFlags simulate_raw;
  std::string simulate_plan, trace_path, svg_path;
  add_plan_options(*simulate, simulate_options, simulate_raw);
  simulate->add_option("--plan", simulate_plan, "plan as inline JSON or a mgt.plan/1 file")->required();
  simulate->add_option("--trace", trace_path, "write a Chrome-trace JSON (open in Perfetto)");
  simulate->add_option("--svg", svg_path, "write an SVG with the step breakdown and memory over time");

  auto* compile = app.add_subcommand("compile", "the schedule every rank class runs (mgt.schedule/1)");
  mgt::cli::PlanOptions compile_options;
  RawPlanFlags compile_raw;
  std::string compile_plan, compile_out = "-";
  bool compile_text = false;
  add_plan_options(*compile, compile_options, compile_raw);
  compile->add_option("--plan", compile_plan, "plan as inline JSON or a mgt.plan/1 file")->required();
  compile->add_option("--out", compile_out, "output file (default - = stdout)");
  compile->add_flag("--text", compile_text, "write the human-readable text form instead of JSON");

  auto* probe = app.add_subcommand(
      "probe", "measure this machine (GEMM rates, memory bandwidth, MPI collectives under mpirun) and write a "
               "mgt.cluster/1 file for --cluster");
  std::string probe_backend = "cpu", probe_out;
  bool probe_quick = false;
  probe->add_option("--backend", probe_backend, "cpu (default) or cuda (one GPU per rank under mpirun)");
  probe->add_option("--out", probe_out, "mgt.cluster/1 file to write")->required();
  probe->add_flag("--quick", probe_quick, "a few small shapes and sizes (~0.5 s), for tests");

  mgt::cli::RunOptions run_options;
  auto* run = mgt::cli::add_run_command(app, run_options);

  auto* validate = app.add_subcommand(
      "validate", "predicted vs measured on published training runs (shared/validation format): per source "
                  "median and p90 error, the worst rows");
  std::vector<std::string> validate_files;
  bool validate_json = false;
  validate->add_option("files", validate_files, "validation JSON files")->required();
  validate->add_flag("--json", validate_json, "print mgt.validation/1");

  auto* import = app.add_subcommand("import", "MLIR (linalg / tosa / arith / tensor on tensors) -> mgt.graph/1 "
                                              "(docs/mlir.md)");
  std::string import_path;
  std::vector<std::string> import_params;
  bool import_json = false;
  import->add_option("model", import_path, "model.mlir")->required();
  import->add_option("--params", import_params, "arguments that are parameters (mgt.name or arg<i>), besides "
                                                "those with the {mgt.param} attribute")->delimiter(',');
  import->add_flag("--json", import_json, "print mgt.graph/1");

  auto* export_mlir = app.add_subcommand("export-mlir", "a role-less graph and plan as linalg + mesh.shard "
                                                        "annotations (docs/mlir.md)");
  std::string export_path, export_gpus, export_plan, export_out = "-", export_cluster = "h100-sxm";
  std::vector<std::string> export_params;
  export_mlir->add_option("model", export_path, "model.mlir or a mgt.graph/1 JSON imported from MLIR")->required();
  export_mlir->add_option("--gpus", export_gpus, "number of GPUs: the product of the plan's mesh axes")->required();
  export_mlir->add_option("--plan", export_plan, "mgt.spmd_plan/1 inline or a file (default: the search's best plan)");
  export_mlir->add_option("--cluster", export_cluster, "cluster for the search when --plan is absent");
  export_mlir->add_option("--params", export_params, "as for import")->delimiter(',');
  export_mlir->add_option("--out", export_out, "output file (default - = stdout)");
  bool export_check = false;
  export_mlir->add_flag("--check", export_check, "also run upstream sharding-propagation + mesh-spmdization on it and "
                                                 "compare the collectives and per-device shapes with mgt's (exit 1 if "
                                                 "they differ)");

  std::vector<std::string> search_params;
  app.add_option("--params", search_params, "for .mlir models: arguments that are parameters (as for import)")
      ->delimiter(',');

  // Subcommands carry their own required options: the top-level ones apply only without one.
  for (const char* name : {"model", "--gpus"}) app.get_option(name)->required(false);
  try {
    app.parse(argc, argv);
    if (*inspect) {
      std::optional<std::string> seq;
      if (inspect->get_option("--seq-len")->count() > 0) seq = inspect_seq;
      return mgt::cli::run_inspect(inspect_model, seq, inspect_json);
    }
    if (*validate) return mgt::cli::run_validate(validate_files, validate_json);
    if (*probe) return mgt::cli::run_probe(probe_backend, probe_out, probe_quick);
    if (*import) return mgt::cli::run_import(import_path, import_params, import_json);
    if (*export_mlir) {
      std::optional<std::string> plan;
      if (export_mlir->get_option("--plan")->count() > 0) plan = export_plan;
      return mgt::cli::run_export_mlir(export_path, export_params, mgt::cli::parse_gpu_count(export_gpus),
                                       export_cluster, plan, export_out, export_check);
    }
    if (*run) return mgt::cli::run_training(run_options);
    if (*simulate) {
      resolve_plan_flags(*simulate, simulate_raw, simulate_options);
      return mgt::cli::run_simulate(simulate_options, simulate_plan, trace_path, svg_path);
    }
    if (*compile) {
      resolve_plan_flags(*compile, compile_raw, compile_options);
      return mgt::cli::run_compile(compile_options, compile_plan, compile_out, compile_text);
    }
    if (*estimate) {
      resolve_plan_flags(*estimate, estimate_raw, estimate_options);
      return mgt::cli::run_estimate(estimate_options, plan_text, estimate_emit);
    }
    resolve_plan_flags(app, search_raw, search);
    if (search.model_path.empty()) throw CLI::RequiredError("model");
    if (app.get_option("--gpus")->count() == 0) throw CLI::RequiredError("--gpus");
    if (mgt::cli::is_roleless_model(search.model_path)) {
      // The role-less search has no sequence, batch or framework export: such flags are errors, not ignored.
      for (const char* flag : {"--seq-len", "--global-batch-tokens", "--precision", "--emit", "--allow-cross-node-tp"})
        if (app.get_option(flag)->count() > 0)
          throw mgt::ir::InputError(flag, "", "does not apply to role-less models (.mlir or graphs imported from MLIR)",
                                    "drop it; the sizes come from the model's tensors (docs/mlir.md)");
      return mgt::cli::run_roleless_search(search.model_path, search_params, search.gpus, search.cluster, top, search.json);
    }
    return mgt::cli::run_search(search, top, emit);
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "mgt-plan: " << e.what() << " (hint: mgt-plan --help)\n";
    return 2;
  } catch (const mgt::mlirio::NotBuiltIn& e) {
    std::cerr << "mgt-plan: " << e.what() << "\n";
    return 1;
  } catch (const mgt::ir::InputError& e) {
    std::cerr << "mgt-plan: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mgt-plan: internal error: " << e.what() << "\n";
    return 3;
  }
}
