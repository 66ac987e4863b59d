// `mgt-plan inspect MODEL [--seq-len S] [--json]`: parameters, FLOPs per token, per-block breakdown.
#include "subcommand.hpp"

#include <memory>

namespace mgt::cli {

Subcommand add_inspect_cli(CLI::App& app) {
  struct Flags {
    std::string model, seq_len;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  auto* inspect = app.add_subcommand("inspect", "parameters, FLOPs per token and a per-block breakdown");
  inspect->add_option("model", f->model, "model file")->required();
  inspect->add_option("--seq-len", f->seq_len, "sequence length for attention FLOPs (default as the search)");
  inspect->add_flag("--json", f->json, "print JSON");
  return {inspect, [inspect, f] {
            std::optional<std::string> seq;
            if (inspect->get_option("--seq-len")->count() > 0) seq = f->seq_len;
            return run_inspect(f->model, seq, f->json);
          }};
}

}  // namespace mgt::cli
