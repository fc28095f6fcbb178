// circuits.cpp: optical circuits and topology changes of the Network.
// A port that faces an optical device is the sending end of whatever channel its circuit
// chain forms: following circuits through OCSes and patch panels (which pass light, with no
// queue or transceiver) it reaches one electrical endpoint, and the channel has the chain's
// summed propagation delay and slowest rate. A change of circuits, or a link failure,
// re-resolves channels, rebuilds the forwarding tables, re-forwards (lossless) or drops
// (lossy) frames queued behind channels that went away, and re-homes flows whose first hop
// vanished. INVARIANT: a frame never completes a hop over a channel whose generation changed
// while it was on the wire (arrive() checks the generation it was sent with).
#include <algorithm>
#include <set>
#include <tuple>

#include "engine/check.hpp"
#include "packet/network.hpp"

namespace rfabric::net {

using engine::kNever;

void Network::resolve_channel(uint32_t port) {
  // The port takes its channel as forwarding resolved it (update_channels).
  Port& pt = ports_[port];
  const Channel& c = fwd_.channel(port);
  const bool changed = c.peer != pt.peer || c.up != is_up(pt);
  set_peer(pt, c.peer);
  PortInfo& info = port_info_[port];
  info.prop_ps = c.prop_ps;
  pt.delay_ps = c.prop_ps + nodes()[c.peer].latency_ps;
  set_rate(pt, info, c.rate_bps);
  if (changed) new_channel(pt, c.up);
  if (built_) set_thresholds(port);
}

void Network::hold(uint32_t node, uint32_t pkt, bool fresh) {
  if (held_head_.empty()) held_head_.assign(nodes().size(), kNone), held_tail_.assign(nodes().size(), kNone);
  pool_[pkt].next = kNone;
  if (held_tail_[node] == kNone) {
    held_head_[node] = pkt;
  } else {
    pool_[held_tail_[node]].next = pkt;
  }
  held_tail_[node] = pkt;
  ++held_now_;
  if (fresh) ++counters_.held;
}

void Network::hold_or_resend(uint32_t node, uint32_t pkt, bool fresh) {
  if (nodes()[node].gpu < 0 && eng_.now() >= dark_until_) {
    resend_from_source(pkt);
  } else {
    hold(node, pkt, fresh);  // wait here for the topology to change
  }
}

void Network::resend_from_source(uint32_t pkt) {
  Packet& p = pool_[pkt];
  if (p.port != kNone) release_ingress(p.port, p.size_bytes);
  p.port = kNone;
  p.hops = 0;
  ++counters_.circuit_reroutes;
  const uint32_t hash = flows_.hash[p.flow], from = src_of(p);
  const uint32_t src = fwd_.gpu_node(from), out = first_port_for(from, p.dst, hash);
  const auto path = fwd_.path(from, p.dst, hash);
  const bool reaches = !path.empty() && fwd_.channel(path.back()).peer == fwd_.gpu_node(p.dst);
  if (out == kNone || !is_up(ports_[out]) || !reaches) {
    hold(src, pkt, false);  // (not from a switch again until a change gives it a way)
  } else {
    enqueue_cold(out, pkt);
  }
}

void Network::release_held() {
  if (held_now_ == 0) return;
  for (uint32_t node = 0; node < held_head_.size(); ++node) {
    uint32_t pkt = held_head_[node];
    held_head_[node] = held_tail_[node] = kNone;
    while (pkt != kNone) {
      const uint32_t next = pool_[pkt].next;
      --held_now_;
      const uint32_t out = route_cold(node, pool_[pkt]);
      if (out == kNone || !is_up(ports_[out])) {
        hold_or_resend(node, pkt, false);  // still no way on
      } else {
        enqueue_cold(out, pkt);
      }
      pkt = next;
    }
  }
}

void Network::topology_changed() {
  std::vector<uint32_t> gone, back;
  fwd_.update_channels(eng_.now());
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    Port& pt = ports_[p];
    if (port_info_[p].inert) continue;
    const bool was_up = is_up(pt);
    const uint32_t old_peer = pt.peer;
    if (port_info_[p].optical) {
      resolve_channel(p);
    } else if (is_up(pt) != fwd_.channel(p).up) {
      new_channel(pt, fwd_.channel(p).up);
    }
    if (was_up && (!is_up(pt) || pt.peer != old_peer)) {
      set_paused(pt, false);  // a PAUSE from the old peer no longer applies
      gone.push_back(p);
    }
    if (is_up(pt) && (!was_up || pt.peer != old_peer)) back.push_back(p);
  }
  fwd_.rebuild();
  take_hop_keys();
  dark_until_ = fwd_.last_lit_at();
  for (const uint32_t p : gone) evacuate(p);
  release_held();
  rehome_flows();
  for (const uint32_t p : back) try_transmit(p);
}

void Network::evacuate(uint32_t port) {
  // Frames queued behind a channel that went away: lossless fabrics re-forward them from the
  // same node along the rebuilt tables; lossy ones drop them.
  Port& pt = ports_[port];
  PortInfo& info = port_info_[port];
  while (pt.head != kNone) {
    const uint32_t pkt = pop_queue_cold(pt);
    Packet& p = pool_[pkt];
    const bool lossless = lossless_ && !pt.lossy;  // (a long link's queue drops)
    const uint32_t out = lossless ? route_cold(info.node, p) : kNone;
    if (lossless && (out == kNone || out == port || !is_up(ports_[out]))) {
      hold_or_resend(info.node, pkt, true);  // no way on now
    } else if (out == kNone || out == port || !is_up(ports_[out])) {
      if (p.port != kNone) ports_[p.port].ingress_bytes -= p.size_bytes;
      ++info.drops;
      drop(pkt, info.optical ? counters_.circuit_drops : counters_.link_down_drops);
    } else {
      ++counters_.circuit_reroutes;
      enqueue_cold(out, pkt);
    }
  }
}

std::vector<uint32_t> Network::current_circuits() const { return fwd_.current_circuits(); }

void Network::topology_change_due(uint32_t index) {
  changes_.apply(index, [this] { topology_changed(); });
}

void Network::apply_due_changes() {
  changes_.apply_due([this] { topology_changed(); });
}

}  // namespace rfabric::net
