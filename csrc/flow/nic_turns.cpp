// nic_turns.cpp: under PFC a NIC sends its flows at one pace (see flow_network.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "flow/flow_network.hpp"

namespace rfabric::flow {

void FlowNetwork::pace_by_sender(const std::vector<uint32_t>& subs, const std::vector<uint32_t>& ports) {
  // A NIC (a GPU's port into a packet switch) pulls a frame of each of its flows in turn,
  // and PFC pauses it as a whole: once a flow's frames back up at a switch port downstream
  // (its bottleneck, every hop before it a link the next switch can pause), the pauses climb
  // the path to the NIC, which then stops for every flow on it and resumes for all. So it
  // sends each flow a frame per turn at the pace the held-back flow drains, and a flow whose
  // own path has room (the fill gave it the NIC's leftover) moves no faster than the slowest
  // held-back flow beside it. FT-OS(128), one training all_to_all of 8 GPUs two to a
  // server on four ToRs: in packets each GPU's six network flows end within 21 us of each
  // other, in the fill 102-437 us apart. Here: every flow crossing a NIC where a flow is held
  // back is capped at the slowest such flow's level (per copy), unless it is held back at
  // that level itself, and the component is filled again while the caps move (at most
  // kRounds fills).
  //
  // Where PFC comes first, from the packet engine's thresholds:
  // * The first switch pauses the NIC once the NIC's bytes in it pass XOFF (pfc_xoff_ps at
  //   the link's rate: 125 KB at 200 Gb/s). A flow can back up no more than the bytes it
  //   has, so a NIC is paced only where its held-back flows' messages together reach XOFF:
  //   a pipeline's 64 KiB chunks, each a message that starts when the one before has left,
  //   never pause their NIC alone, and the NIC keeps sending its other flows.
  // * A NIC's own frames never queue at its port (it pulls one when the port is free), but
  //   the frames it relays for another GPU do, and NVLink is never paused: while the switch
  //   pauses it, its relay queue grows past ECN's Kmax, every frame is marked and DCQCN slows
  //   those flows at their senders (RFabric's 128-GPU iteration: 321,534 of 322,041 marks at
  //   the NICs' relay queues). A NIC that relays a flow of the component is not paced.
  // Flows spread over several paths are left as they are (no one path to pause) and their
  // NICs taken as relaying; share_by_input has set single_. An NVSwitch never pauses.
  Fill& w = fill_;
  const size_t ns = subs.size(), np = ports.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kTol = 1e-9;
  const auto& nodes = fwd_.nodes();
  auto leaves_eps = [&](uint32_t lp) {
    return nodes[fwd_.channel(ports[lp]).node].kind == net::NodeKind::Eps;
  };
  // Any flow held back at a switch port at all? (Most components under PFC have none.)
  bool candidate = false;
  for (size_t i = 0; i < ns && !candidate; ++i)
    candidate = single_[i] && w.bneck[i] != kNone && w.rate[i] > 0 && leaves_eps(w.bneck[i]);
  if (!candidate) return;
  // per local port: 1 a link an Eps switch can pause, 2 that and leaving a GPU (a NIC)
  port_kind_.resize(np);
  for (size_t lp = 0; lp < np; ++lp) {
    const net::Channel& c = fwd_.channel(ports[lp]);
    const bool pausable = nodes[c.peer].kind == net::NodeKind::Eps;
    port_kind_[lp] = pausable ? (nodes[c.node].kind == net::NodeKind::Gpu ? 2 : 1) : 0;
  }
  // NICs relaying a flow (one that reached the port by another hop), or crossed by a spread one
  relays_.assign(np, 0);
  for (size_t i = 0; i < ns; ++i) {
    const uint32_t lo = i ? w.sub_end[i - 1] : 0, hi = w.sub_end[i];
    for (uint32_t k = single_[i] ? lo + 1 : lo; k < hi; ++k)
      if (port_kind_[w.sub_port[k]] == 2) relays_[w.sub_port[k]] = 1;
  }
  const double xoff_ps = static_cast<double>(cfg_.pfc_xoff_ps);
  base_cap_.assign(w.cap.begin(), w.cap.begin() + static_cast<std::ptrdiff_t>(ns));
  sender_min_.resize(np);
  held_bytes_.resize(np);
  held_.resize(ns);
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    std::fill(sender_min_.begin(), sender_min_.end(), kInf);
    std::fill(held_bytes_.begin(), held_bytes_.end(), 0.0);
    for (size_t i = 0; i < ns; ++i) {
      held_[i] = 0;
      if (!single_[i]) continue;
      const uint32_t lo = i ? w.sub_end[i - 1] : 0, hi = w.sub_end[i];
      const uint32_t b = w.bneck[i];
      if (b == kNone || !leaves_eps(b) || w.rate[i] <= 0) continue;
      uint32_t kb = lo;
      while (kb < hi && w.sub_port[kb] != b) ++kb;
      // the NIC from which every hop up to the bottleneck can be paused
      const double level = w.rate[i] / w.weight[i];
      for (uint32_t k = kb; k-- > lo;) {
        const uint32_t lp = w.sub_port[k];
        if (port_kind_[lp] == 0) break;
        if (port_kind_[lp] == 2 && !relays_[lp]) {
          sender_min_[lp] = std::min(sender_min_[lp], level);
          {
            const uint32_t f = subs_[subs[i]].flow;
            held_bytes_[lp] = std::max(held_bytes_[lp], wire_bytes(f) / flows_.copies[f]);
          }
          held_[i] = 1;
        }
      }
    }
    // only NICs whose held-back messages can fill their XOFF are paused
    bool any = false;
    for (size_t lp = 0; lp < np; ++lp) {
      if (sender_min_[lp] == kInf) continue;
      const double rate = static_cast<double>(fwd_.channel(ports[lp]).rate_bps);
      const double xoff = std::max(static_cast<double>(mtu_), std::floor(xoff_ps * rate / kBitsPsPerByte));
      if (held_bytes_[lp] < xoff)
        sender_min_[lp] = kInf;
      else
        any = true;
    }
    if (!any) return;
    bool changed = false;
    for (size_t i = 0; i < ns; ++i) {
      if (!single_[i]) continue;
      const uint32_t lo = i ? w.sub_end[i - 1] : 0, hi = w.sub_end[i];
      double m = kInf;
      for (uint32_t k = lo; k < hi; ++k)
        if (port_kind_[w.sub_port[k]] == 2) m = std::min(m, sender_min_[w.sub_port[k]]);
      double cap = base_cap_[i];
      if (m < kInf && (!held_[i] || w.rate[i] / w.weight[i] > m * (1 + kTol))) {
        const double pace = m * w.weight[i];
        cap = cap > 0 ? std::min(cap, pace) : pace;
      }
      if (cap != w.cap[i]) {
        w.cap[i] = cap;
        changed = true;
      }
    }
    if (!changed) return;
    water_fill(subs, ports);
  }
}

}  // namespace rfabric::flow
