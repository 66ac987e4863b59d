// One line naming an instruction, for traces and the simulator's reports (simulator.hpp): kept apart
// from the event loop, which never needs it.
#include "mgt/cost_model/simulator.hpp"

#include <string>
#include <variant>

namespace mgt::cost {

std::string instruction_label(const ir::Instruction& instr) {
  struct Label {
    std::string operator()(const ir::Compute& c) const {
      return ir::to_string(c.phase) + " " + c.op + " layer" + std::to_string(c.layer) + " mb" +
             std::to_string(c.micro_batch);
    }
    std::string operator()(const ir::Collective& c) const {
      std::string axes;
      for (const auto& a : c.axes) axes += (axes.empty() ? "" : ",") + a;
      return ir::to_string(c.kind) + " " + c.buffer + " " + axes;
    }
    std::string operator()(const ir::Send& s) const {
      return "send " + s.buffer + " " + s.axis + (s.offset >= 0 ? "+" : "") + std::to_string(s.offset);
    }
    std::string operator()(const ir::Recv& s) const {
      return "recv " + s.buffer + " " + s.axis + (s.offset >= 0 ? "+" : "") + std::to_string(s.offset);
    }
    std::string operator()(const ir::Alloc& a) const { return "alloc " + a.buffer; }
    std::string operator()(const ir::Free& f) const { return "free " + f.buffer; }
    std::string operator()(const ir::OptimizerStep&) const { return "optimizer_step"; }
    std::string operator()(const ir::Wait& w) const { return "wait #" + std::to_string(w.on); }
  };
  return std::visit(Label{}, instr.op);
}

}  // namespace mgt::cost
