// Pipeline transfers (impl.hpp): block boundary tensors (an activation forward, its gradient
// backward) sent to and received from the neighbouring stage; batched sends / recvs issued together.
#include "impl.hpp"

#include <string>

namespace mgt::rt {

/// "y[v]m3" / "dx[v]m3" (send), "x[v]m3" / "dy[v]m3" (recv): forward or backward, micro-batch.
std::pair<bool, int64_t> Executor::Impl::boundary_of(const ir::Instruction& instr, const std::string& buffer) const {
  const auto br = buffer.find('[');
  const auto m = buffer.rfind("]m");
  if (br == std::string::npos || m == std::string::npos) fail(instr, "buffer '" + buffer + "' names no boundary tensor");
  const std::string kind = buffer.substr(0, br);
  const bool fwd = kind == "x" || kind == "y";
  if (!fwd && kind != "dx" && kind != "dy") fail(instr, "buffer '" + buffer + "' names no boundary tensor");
  return {fwd, std::stoll(buffer.substr(m + 2))};
}

template <typename P>
void Executor::Impl::run_p2p(const ir::Instruction& instr, const P& p, bool is_send) {
  if (!comm) fail(instr, "a send/recv needs a communicator");
  const auto [fwd, mb] = boundary_of(instr, p.buffer);
  PendingP2P t;
  t.to_fwd = fwd;
  t.micro_batch = mb;
  t.transfer.kind = is_send ? PointToPoint::Kind::send : PointToPoint::Kind::recv;
  t.transfer.axis = p.axis;
  t.transfer.offset = p.offset;
  t.transfer.tag = p.tag;
  auto& handoff = fwd ? fwd_handoff : bwd_handoff;
  if (is_send) {
    auto h = handoff.find(mb);
    if (h == handoff.end()) fail(instr, "nothing to send: the boundary tensor of micro-batch " + std::to_string(mb) + " is not there");
    t.tensor = std::move(h->second);
    handoff.erase(h);
  } else {
    t.tensor = Tensor(&tracker, schedule.plan.micro_batch * T_sp * graph.info.hidden_size);
  }
  t.transfer.buffer = t.tensor.data();
  t.transfer.count = t.tensor.size();
  pending.push_back(std::move(t));
  if (p.batch_with_next) return;
  std::vector<PointToPoint> transfers;
  for (const auto& q : pending) transfers.push_back(q.transfer);
  if (transfers.size() == 1 && is_send) comm->send(transfers[0].buffer, transfers[0].count, transfers[0].axis, transfers[0].offset, transfers[0].tag);
  else if (transfers.size() == 1) comm->recv(transfers[0].buffer, transfers[0].count, transfers[0].axis, transfers[0].offset, transfers[0].tag);
  else comm->batch(transfers);
  for (auto& q : pending) {
    if (q.transfer.kind != PointToPoint::Kind::recv) continue;
    auto& into = q.to_fwd ? fwd_handoff : bwd_handoff;
    if (into.count(q.micro_batch)) fail(instr, "a boundary tensor of micro-batch " + std::to_string(q.micro_batch) + " arrived twice");
    into[q.micro_batch] = std::move(q.tensor);
  }
  pending.clear();
}

template void Executor::Impl::run_p2p<ir::Send>(const ir::Instruction&, const ir::Send&, bool);
template void Executor::Impl::run_p2p<ir::Recv>(const ir::Instruction&, const ir::Recv&, bool);

}  // namespace mgt::rt
