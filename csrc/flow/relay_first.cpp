// relay_first.cpp: a GPU's port sends the frames it relays before its own flows' frames.
#include <algorithm>

#include "flow/flow_network.hpp"

namespace rfabric::flow {

void FlowNetwork::relay_first(const std::vector<uint32_t>& subs, const std::vector<uint32_t>& ports) {
  // The packet NIC pops its queue (frames it relays for another GPU of its server: PXN, host
  // forwarding) before it pulls a frame of its own flows (Network::transmit_next), whatever
  // ECN marks that queue gets: a NIC's own flows take what the relayed ones leave. As a fill
  // in two passes: the component without the flows that leave by such a port, then those
  // flows filled into what the first pass left, every other flow held to its first-pass
  // rate. A per-flow weight cannot say this: it would hold the own flows back at every port
  // of their paths, and the bottleneck it is chosen by moves with it.
  Fill& w = fill_;
  const size_t ns = subs.size(), np = ports.size();
  relay_gpu_.resize(np);
  relay_port_.assign(np, 0);
  for (size_t lp = 0; lp < np; ++lp) relay_gpu_[lp] = fwd_.nodes()[fwd_.channel(ports[lp]).node].gpu;
  auto src_of = [&](size_t i) { return static_cast<int32_t>(flows_.src[subs_[subs[i]].flow]); };
  // a GPU's port into a packet switch: PFC pauses it (NVLink is never paused)
  auto into_switch = [&](uint32_t lp) {
    return fwd_.nodes()[fwd_.channel(ports[lp]).peer].kind == net::NodeKind::Eps;
  };
  for (size_t i = 0; i < ns; ++i) {
    const int32_t src = src_of(i);
    for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) {
      const uint32_t lp = w.sub_port[k];
      if (relay_gpu_[lp] >= 0 && relay_gpu_[lp] != src) relay_port_[lp] = 1;
    }
  }
  behind_.assign(ns, 0);
  bool any = false;
  for (size_t i = 0; i < ns; ++i) {
    const int32_t src = src_of(i);
    for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) {
      const uint32_t lp = w.sub_port[k];
      if (relay_port_[lp] && relay_gpu_[lp] == src) {
        behind_[i] = 1;
        any = true;
        break;
      }
    }
  }
  if (!any) return;
  relay_cap_.assign(w.cap.begin(), w.cap.begin() + static_cast<std::ptrdiff_t>(ns));
  relay_weight_.assign(w.weight.begin(), w.weight.begin() + static_cast<std::ptrdiff_t>(ns));
  // (a cap of 1 b/s takes a flow out of the fill: 0 would mean no cap)
  constexpr double kOut = 1.0;
  constexpr double kAhead = 1e6;  // the first pass's flows reach their rates this much sooner
  for (size_t i = 0; i < ns; ++i)
    if (behind_[i]) w.cap[i] = kOut;
  water_fill(subs, ports);
  relay_bneck_.assign(w.bneck.begin(), w.bneck.begin() + static_cast<std::ptrdiff_t>(ns));
  // Under PFC a relayed flow held back past the NIC (its bottleneck a switch port after it)
  // keeps the NIC's queue from emptying: the switch pauses the NIC's link as a whole, NVLink
  // is never paused and so refills the queue, and a resumed NIC drains the queue before it
  // pulls a frame of its own. Its own flows then wait for the relayed ones to end, whatever
  // room the fill leaves (MixNet: a 321 KB ring flow beside two weight-sync sends held at
  // the receiving server's NICs).
  relay_held_.assign(np, 0);
  if (lossless_) {
    for (size_t i = 0; i < ns; ++i) {
      if (behind_[i] || relay_bneck_[i] == kNone) continue;
      const int32_t src = src_of(i);
      uint32_t at = kNone;  // the last relaying NIC port before the bottleneck
      for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) {
        const uint32_t lp = w.sub_port[k];
        if (lp == relay_bneck_[i]) {
          if (at != kNone && at != lp) relay_held_[at] = 1;
          break;
        }
        if (relay_port_[lp] && relay_gpu_[lp] != src && into_switch(lp)) at = lp;
      }
    }
  }
  for (size_t i = 0; i < ns; ++i) {
    if (behind_[i]) {
      w.cap[i] = relay_cap_[i];
      for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) {
        const uint32_t lp = w.sub_port[k];
        if (relay_held_[lp] && relay_gpu_[lp] == src_of(i)) {
          w.cap[i] = kOut;
          behind_[i] = 2;
          relay_bneck_[i] = lp;
          break;
        }
      }
    } else {
      w.cap[i] = std::max(w.rate[i], kOut);
      w.weight[i] *= kAhead;
    }
  }
  water_fill(subs, ports);
  // a flow held to its first-pass rate keeps that pass's bottleneck (where it ending frees
  // room); an own flow held behind relayed ones, their NIC port (a relayed flow ending there
  // frees it)
  for (size_t i = 0; i < ns; ++i)
    if (behind_[i] != 1) w.bneck[i] = relay_bneck_[i];
  std::copy(relay_cap_.begin(), relay_cap_.end(), w.cap.begin());
  std::copy(relay_weight_.begin(), relay_weight_.end(), w.weight.begin());
}

}  // namespace rfabric::flow
