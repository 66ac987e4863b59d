// MLIR interop commands (mlir_command.hpp). The MLIR work happens in mgt_mlir; without MLIR its calls
// throw NotBuiltIn, which main() turns into exit 1.
#include "mlir_command.hpp"

#include "report.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/model_loader.hpp"
#include "mgt/mlir/mlir_interop.hpp"
#include "mgt/planner/spmd.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <fstream>
#include <iostream>

namespace mgt::cli {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

ir::Graph load_roleless(const std::string& path, const std::vector<std::string>& params) {
  ir::Graph g = ends_with(path, ".mlir") ? mlirio::import_mlir(path, {params}) : ir::load_model(path);
  if (g.blocks.size() != 1)
    throw ir::InputError(path, "blocks", "role-less plans and export-mlir need a graph of one block, got " +
                                             std::to_string(g.blocks.size()),
                         "give a .mlir model or a graph written by mgt-plan import");
  return g;
}

// The lowering's shardings in the exporter's terms.
mlirio::MeshAnnotations annotations(const plan::SpmdLowering& low) {
  mlirio::MeshAnnotations a{low.mesh, low.inputs, {}};
  for (const auto& op : low.ops) a.ops.push_back({op.operands, op.raw_result, op.result});
  return a;
}

plan::SpmdPlan parse_spmd_plan(const std::string& text) {
  const bool inline_json = !text.empty() && text.front() == '{';
  const nlohmann::json doc = inline_json ? ir::parse_json_text(text, "--plan") : ir::read_json_file(text);
  return plan::spmd_plan_from_json(doc, inline_json ? "--plan" : text);
}

const char* activation_name(ir::ActivationKind k) {
  switch (k) {
    case ir::ActivationKind::silu: return "silu";
    case ir::ActivationKind::gelu: return "gelu";
    case ir::ActivationKind::relu: return "relu";
    case ir::ActivationKind::silu_glu: return "silu_glu";
    case ir::ActivationKind::gelu_glu: return "gelu_glu";
  }
  return "?";
}

std::string fmt_ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s * 1e3);
  return buf;
}

}  // namespace

bool is_roleless_model(const std::string& path) {
  if (ends_with(path, ".mlir")) return true;
  if (!ends_with(path, ".json")) return false;
  try {
    const nlohmann::json doc = ir::read_json_file(path);
    return doc.is_object() && doc.contains("model") && doc["model"].is_object() &&
           doc["model"].value("architecture", "") == "mlir";
  } catch (const ir::InputError&) {
    return false;  // the regular loader reports it
  }
}

int run_import(const std::string& path, const std::vector<std::string>& params, bool json) {
  const ir::Graph g = mlirio::import_mlir(path, {params});
  if (json) {
    std::cout << ir::to_json(g).dump(2) << "\n";
    return 0;
  }
  const ir::Block& b = g.blocks[0];
  std::printf("%s: %zu tensors, %zu ops (one block)\n", path.c_str(), b.tensors.size(), b.ops.size());
  for (const auto& t : b.tensors) {
    std::string dims;
    for (const auto& d : t.dims) dims += std::string(dims.empty() ? "" : " ") + d.name + "=" + std::to_string(d.size);
    std::printf("  %-10s %-9s %s\n", t.name.c_str(), t.is_parameter ? "parameter" : "activation", dims.c_str());
  }
  for (const auto& op : b.ops)
    std::printf("  %-12s %-12s %s\n", op.name.c_str(), ir::to_string(op.kind).c_str(),
                op.kind == ir::OpKind::contraction ? op.einsum.c_str()
                : op.kind == ir::OpKind::activation ? activation_name(op.activation)
                                                     : "");
  return 0;
}

int run_roleless_search(const std::string& path, const std::vector<std::string>& params, int64_t gpus,
                        const std::string& cluster_arg, int64_t top, bool json) {
  if (top <= 0) throw ir::InputError("--top", "", "must be positive, got " + std::to_string(top));
  const ir::Graph g = load_roleless(path, params);
  const ir::ClusterSpec cluster = ir::load_cluster(cluster_arg);
  const plan::SpmdSearchResult r = plan::search_spmd(g, cluster, gpus, ir::DType::bf16, top);
  if (json) {
    std::cout << plan::to_json(plan::SpmdPlansReport{path, gpus, cluster.gpu.name, r}).dump(2) << "\n";
    return r.plans.empty() ? 1 : 0;
  }
  std::printf("%s: role-less sharding search on %lld x %s (bf16; each mesh axis splits one input dim)\n",
              g.info.name.c_str(), (long long)gpus, cluster.gpu.name.c_str());
  std::printf("evaluated %lld plans, %lld feasible\n", (long long)r.evaluated, (long long)r.feasible);
  std::printf("%4s  %-40s %10s %12s %10s %9s\n", "rank", "plan (tensor[dim]@axis)", "step(ms)", "compute(ms)",
              "comm(ms)", "mem(GiB)");
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const auto& e = r.plans[i];
    std::printf("%4zu  %-40s %10s %12s %10s %9s\n", i + 1, plan::to_string(e.plan).c_str(), fmt_ms(e.step_s).c_str(),
                fmt_ms(e.compute_s).c_str(), fmt_ms(e.comm_s).c_str(), format_gib(e.peak_bytes).c_str());
  }
  for (const auto& [reason, count] : r.rejected) std::printf("rejected %lld: %s\n", (long long)count, reason.c_str());
  if (r.plans.empty()) {
    std::cerr << "mgt-plan: no role-less plan for " << gpus << " GPUs (reasons above) (hint: change --gpus)\n";
    return 1;
  }
  std::cout << "\nbest: " << plan::to_json(r.plans[0].plan).dump() << "\n";
  return 0;
}

namespace {

// `--check`: upstream sharding-propagation + mesh-spmdization on the exported module against mgt's
// lowering (docs/mlir.md "Cross-check"). Prints one summary line, or each difference; returns 0 when
// they agree, 1 otherwise (including plans that hit a known MLIR 19 gap, which are not run: some crash).
int check_against_upstream(const plan::SpmdLowering& low, const std::string& text, const std::vector<std::string>& gaps) {
  if (!gaps.empty()) {
    std::cerr << "check: not run: MLIR 19 cannot lower this plan (" << gaps[0] << ")\n";
    return 1;
  }
  using Key = std::tuple<std::string, std::vector<int>, std::vector<int64_t>, std::vector<int64_t>>;
  std::vector<Key> mine, theirs;
  for (const auto& c : low.collectives) mine.emplace_back(plan::to_string(c.kind), c.axes, c.input_shape, c.output_shape);
  const mlirio::UpstreamResult up = mlirio::run_upstream_spmdization(text);
  for (const auto& c : up.collectives) theirs.emplace_back(c.kind, c.axes, c.input_shape, c.output_shape);
  std::sort(mine.begin(), mine.end());
  std::sort(theirs.begin(), theirs.end());
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& op : low.ops) shapes.push_back(op.result_shape);
  auto describe = [](const Key& k) {
    std::string s = std::get<0>(k) + " axes";
    for (int a : std::get<1>(k)) s += " " + std::to_string(a);
    auto shape = [](const std::vector<int64_t>& v) {
      std::string t;
      for (int64_t x : v) t += (t.empty() ? "" : "x") + std::to_string(x);
      return t;
    };
    return s + " " + shape(std::get<2>(k)) + " -> " + shape(std::get<3>(k));
  };
  if (mine == theirs && shapes == up.op_result_shapes) {
    std::cerr << "check: upstream mesh-spmdization agrees: " << mine.size() << " collectives, per-device shapes of "
              << shapes.size() << " ops\n";
    return 0;
  }
  for (const auto& k : mine)
    if (std::find(theirs.begin(), theirs.end(), k) == theirs.end()) std::cerr << "check: only mgt: " << describe(k) << "\n";
  for (const auto& k : theirs)
    if (std::find(mine.begin(), mine.end(), k) == mine.end()) std::cerr << "check: only MLIR: " << describe(k) << "\n";
  if (shapes != up.op_result_shapes) std::cerr << "check: per-device op shapes differ\n";
  return 1;
}

}  // namespace

int run_export_mlir(const std::string& path, const std::vector<std::string>& params, int64_t gpus,
                    const std::string& cluster_arg, const std::optional<std::string>& plan_text,
                    const std::string& out_path, bool check) {
  if (!mlirio::built_in()) throw mlirio::NotBuiltIn();
  const ir::Graph g = load_roleless(path, params);
  plan::SpmdPlan p;
  if (plan_text) {
    p = parse_spmd_plan(*plan_text);
  } else {
    const auto r = plan::search_spmd(g, ir::load_cluster(cluster_arg), gpus, ir::DType::bf16, 1);
    if (r.plans.empty()) {
      std::cerr << "mgt-plan: no role-less plan for " << gpus << " GPUs to export (hint: give --plan)\n";
      return 1;
    }
    p = r.plans[0].plan;
    std::cerr << "export-mlir: the search's best plan: " << plan::to_json(p).dump() << "\n";
  }
  int64_t devices = 1;
  for (int64_t n : p.mesh) devices *= n;
  if (devices != gpus)
    throw ir::InputError(plan_text ? "--plan" : "search", "mesh", "the mesh has " + std::to_string(devices) +
                                                                      " devices but --gpus is " + std::to_string(gpus),
                         "make the product of the mesh axes equal --gpus");
  const plan::SpmdLowering low = plan::lower_spmd(g, p, plan_text ? "--plan" : "search");
  const mlirio::MeshAnnotations ann = annotations(low);
  const std::string text = mlirio::export_mlir(g, ann);
  // The module is valid either way; say when MLIR 19's own lowering of it is known to fail.
  const std::vector<std::string> gaps = mlirio::upstream_gaps(g, ann);
  for (const std::string& gap : gaps)
    std::cerr << "export-mlir: note: MLIR 19's mesh-spmdization cannot lower this plan: " << gap
              << " (docs/mlir.md, \"Differences\")\n";
  if (!write_output(out_path, text))
    throw ir::InputError(out_path, "", "cannot write the module", "check the directory exists and is writable");
  return check ? check_against_upstream(low, text, gaps) : 0;
}

}  // namespace mgt::cli
