// Text and JSON output of mgt-plan.
#include "report.hpp"

#include "mgt/cost_model/breakdown_json.hpp"
#include "mgt/ir/plan.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace mgt::cli {

std::string format_number(const char* format, double value) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

bool write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return true;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

namespace {
const auto fmt = format_number;

// 4194304 -> "4,194,304"
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string billions(int64_t n) { return fmt("%.2fB", double(n) / 1e9); }
}  // namespace

std::string format_gib(int64_t bytes) { return fmt("%.1f", double(bytes) / double(1ll << 30)); }

std::string format_header(const RunContext& run) {
  const auto& info = run.graph->info;
  const auto counts = ir::count_parameters(*run.graph);
  const int64_t nodes = (run.num_gpus + run.cluster->gpus_per_node - 1) / run.cluster->gpus_per_node;
  std::string out = "model:    " + info.name + " (" + info.architecture + ", " + billions(counts.total) + " params";
  if (info.num_experts > 0)
    out += ", " + billions(counts.active) + " active per token";
  out += ")\n";
  out += "cluster:  " + std::to_string(run.num_gpus) + " x " + run.cluster->gpu.name + ", " + format_gib(run.cluster->gpu.hbm_bytes) +
         " GiB HBM each (" + run.cluster_arg + (run.cluster_arg == "h100-sxm" ? ", the default" : "") + "; " +
         std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") + " of " + std::to_string(run.cluster->gpus_per_node) + ")\n";
  out += "settings: seq_len " + std::to_string(run.settings.seq_len) + (run.seq_len_defaulted ? " (default)" : "") +
         ", global batch " + with_commas(run.settings.global_batch_tokens) + " tokens = " +
         with_commas(run.settings.global_batch_seqs()) + " sequences" + (run.batch_defaulted ? " (default)" : "") +
         (run.settings.document_tokens > 0
              ? ", packed: documents of " + std::to_string(run.settings.document_tokens) + " tokens (attention within each)"
              : "") +
         "\n";
  const ir::TrainingSettings& st = run.settings;
  const std::string compute = st.compute_dtype == ir::DType::f16   ? "fp16"
                              : st.compute_dtype == ir::DType::f32 ? "fp32"
                                                                   : "bf16";
  const std::string linears = st.fp8_linears ? ir::to_string(st.linear_gemm_format()) + " linears, " : "";
  if (st.frozen_base()) {
    std::string targets;
    for (const auto& t : st.lora.targets) targets += (targets.empty() ? "" : ",") + t;
    out += "          " + ir::to_string(st.task) + " rank " + std::to_string(st.lora.rank) + " on " + targets +
           ": frozen base in " + (st.task == ir::Task::qlora ? "NF4 (bf16 embeddings, head, norms)" : "bf16") + "; " +
           linears + compute + " compute, adapters with fp32 master, grads and AdamW states; FSDP shards over dp_shard x cp;\n";
  } else {
    out += "          " + (st.task == ir::Task::sft ? std::string("sft (costs as pretraining), ") : std::string()) +
           linears + compute + " compute, fp32 master weights, fp32 grads and AdamW states; FSDP shards over dp_shard x cp;\n";
  }
  if (st.fsdp_gathers_once_under_pipeline)
    out += "          under a pipeline this framework gathers FSDP parameters once per step and reduce-scatters once:\n"
           "          such plans (zero 2 or 3, pp > 1) are priced and scheduled as ZeRO-1 over dp_shard x cp;\n";
  out +=
         "          mesh order pp, dp_replicate, dp_shard, cp, tp (tp innermost); "
         "ep from cp, dp_shard, then dp_replicate;\n"
         "          pipeline 1F1B, interleaved when vpp > 1 (pp column: pp x vpp); ep column: ep/etp where etp != tp;\n"
         "          recompute full:N = the first N layers of each (virtual) stage (Megatron --recompute-method block)\n";
  return out;
}

std::string format_table(const std::vector<cost::Estimate>& plans, int64_t hbm_bytes) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%4s %6s %8s %6s %3s %6s %6s %4s %4s %-9s %18s %8s %10s %5s  %s\n", "rank", "dp_rep",
                "dp_shard", "tp", "cp", "pp", "ep", "mbs", "ga", "recompute", "mem GiB (headroom)", "step s", "tok/s/GPU",
                "MFU", "bottleneck");
  out += line;
  int rank = 1;
  for (const auto& e : plans) {
    const auto& p = e.plan;
    const std::string tp = std::to_string(p.tp) + (ir::sequence_parallel(p) ? "+sp" : "");
    const std::string mem = format_gib(e.memory.peak_bytes) + " (" + format_gib(hbm_bytes - e.memory.peak_bytes) + ")";
    const std::string pp = std::to_string(p.pp) + (p.vpp > 1 ? "x" + std::to_string(p.vpp) : "");
    // Expert tensor parallel is shown only where it differs from tp (Megatron's default): "ep/etp".
    const std::string ep = std::to_string(p.ep) + (ir::expert_tp(p) != p.tp ? "/" + std::to_string(ir::expert_tp(p)) : "");
    // Block recompute: "full:N", N layers of each (virtual) stage recomputed.
    const std::string recompute =
        ir::to_string(p.recompute) + (p.recompute_layers ? ":" + std::to_string(*p.recompute_layers) : "");
    std::snprintf(line, sizeof line, "%4d %6lld %8lld %6s %3lld %6s %6s %4lld %4lld %-9s %18s %8.2f %10.0f %5.3f  %s\n",
                  rank++, (long long)p.dp_replicate, (long long)p.dp_shard, tp.c_str(), (long long)p.cp, pp.c_str(),
                  ep.c_str(), (long long)p.micro_batch, (long long)p.grad_accum.value_or(0), recompute.c_str(),
                  mem.c_str(), e.step_time_s, e.tokens_per_s_per_gpu, e.mfu, e.bottleneck.c_str());
    out += line;
  }
  return out;
}

std::string format_rejections(const plan::SearchResult& result) {
  int64_t rejected = 0;
  for (const auto& [_, n] : result.rejected) rejected += n;
  std::string out = "evaluated " + with_commas(result.evaluated) + " candidates: " + with_commas(result.feasible) +
                    " valid, " + with_commas(rejected) + " rejected\n";
  // Most frequent reason first; ties by text, so output is stable.
  std::vector<std::pair<std::string, int64_t>> reasons(result.rejected.begin(), result.rejected.end());
  std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  // The text lists the most frequent reasons; --json carries all of them.
  constexpr size_t kShown = 12;
  if (reasons.size() > kShown) {
    int64_t rest = 0;
    for (size_t i = kShown; i < reasons.size(); ++i) rest += reasons[i].second;
    const size_t hidden = reasons.size() - kShown;
    reasons.resize(kShown);
    reasons.emplace_back("... " + std::to_string(hidden) + " more reasons (see --json)", rest);
  }
  for (const auto& [reason, n] : reasons) {
    char line[64];
    std::snprintf(line, sizeof line, "  %8lld  ", (long long)n);
    out += line + reason + "\n";
  }
  return out;
}

std::string format_recommendation(const cost::Estimate& best, int64_t hbm_bytes) {
  return "recommended: " + ir::to_string(best.plan) + " -- " + format_gib(best.memory.peak_bytes) + " of " +
         format_gib(hbm_bytes) + " GiB per GPU, " + fmt("%.2f", best.step_time_s) + " s/step, " +
         fmt("%.0f", best.tokens_per_s_per_gpu) + " tokens/s/GPU, MFU " + fmt("%.3f", best.mfu) + "\n";
}

std::string format_breakdown(const cost::Estimate& e, int64_t hbm_bytes) {
  const auto& m = e.memory;
  const auto& t = e.time;
  std::string out = "plan: " + ir::to_string(e.plan) + "\n";
  out += "memory per GPU: " + format_gib(m.peak_bytes) + " GiB of " + format_gib(hbm_bytes) + " GiB (headroom " +
         format_gib(hbm_bytes - m.peak_bytes) + ")\n";
  for (const auto& term : cost::kMemoryTerms) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-16s%s GiB\n", term.label, format_gib(m.*term.field).c_str());
    out += line;
  }
  out += "step time: " + fmt("%.3f", e.step_time_s) + " s, " + fmt("%.0f", e.tokens_per_s_per_gpu) + " tokens/s/GPU, MFU " +
         fmt("%.3f", e.mfu) + ", bottleneck: " + e.bottleneck + "\n";
  for (const auto& term : cost::kTimeTerms) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-16s%.3f s\n", term.label, t.*term.field);
    out += line;
    if (term.field == &cost::TimeBreakdown::compute_s && e.host_wait_s > 0)
      out += "    of which " + fmt("%.3f", e.host_wait_s) +
             " s waits for the host's eager kernel launches (CUDA graphs or torch.compile shorten it)\n";
  }
  return out;
}

}  // namespace mgt::cli
