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
#include "net/network.hpp"

namespace rfabric::net {

using engine::kNever;

namespace {
bool is_optical(NodeKind k) { return k == NodeKind::Ocs || k == NodeKind::PatchPanel; }
}  // namespace

void Network::build_circuits(const NetworkSpec& spec) {
  const size_t np = ports_.size();
  circuit_next_.assign(np, kNone);
  lit_at_.assign(np, 0);
  link_prop_.resize(np / 2);
  link_rate_.resize(np / 2);
  for (size_t l = 0; l < np / 2; ++l) {
    link_prop_[l] = ports_[2 * l].prop_ps;
    link_rate_[l] = ports_[2 * l].rate_bps;
  }
  const size_t c = spec.circuit_ocs.size();
  RF_CHECK(spec.circuit_a.size() == c && spec.circuit_b.size() == c, "circuit arrays have different lengths");
  Plan initial{spec.circuit_ocs, spec.circuit_a, spec.circuit_b, 0};
  check_plan(initial);
  set_circuits(initial, 0);
  for (uint32_t p = 0; p < np; ++p)
    if (ports_[p].optical) optical_ports_.push_back(p);
  for (const uint32_t p : optical_ports_) resolve_channel(p);
}

uint32_t Network::port_into(uint32_t link, uint32_t node) const {
  return ports_[2 * link].wire_peer == node ? 2 * link : 2 * link + 1;
}

void Network::check_plan(const Plan& plan) const {
  const size_t n = plan.ocs.size();
  RF_CHECK(plan.a.size() == n && plan.b.size() == n, "circuit plan: arrays have different lengths");
  std::set<std::pair<uint32_t, uint32_t>> used;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t o = plan.ocs[i];
    RF_CHECK(o < nodes_.size() && is_optical(nodes_[o].kind), "circuit ", i, ": node ", o,
             " is not an optical device");
    for (const uint32_t l : {plan.a[i], plan.b[i]}) {
      RF_CHECK(l < num_links(), "circuit ", i, ": link ", l, " does not exist");
      RF_CHECK(ports_[2 * l].node == o || ports_[2 * l].wire_peer == o, "circuit ", i, ": link ", l,
               " does not end at device ", o);
      RF_CHECK(used.insert({o, l}).second, "circuit ", i, ": the port of link ", l, " at device ", o,
               " is used by two circuits");
    }
    RF_CHECK(plan.a[i] != plan.b[i], "circuit ", i, ": joins link ", plan.a[i], " to itself");
  }
}

void Network::set_circuits(const Plan& plan, SimTime lit_at) {
  for (size_t i = 0; i < plan.ocs.size(); ++i) {
    const uint32_t o = plan.ocs[i], a = plan.a[i], b = plan.b[i];
    const uint32_t a_in = port_into(a, o), b_in = port_into(b, o);
    circuit_next_[a_in] = b_in ^ 1;  // enter o along a, leave along b
    circuit_next_[b_in] = a_in ^ 1;  // and the other way
    lit_at_[a_in] = lit_at_[b_in] = lit_at;
  }
}

void Network::resolve_channel(uint32_t port) {
  Port& pt = ports_[port];
  const SimTime now = eng_.now();
  uint32_t q = port;
  SimTime prop = link_prop_[pt.link];
  BitsPerSec rate = link_rate_[pt.link];
  bool ok = pt.link_up, lit = true;
  for (int steps = 0; is_optical(nodes_[ports_[q].wire_peer].kind); ++steps) {
    const uint32_t next = circuit_next_[q];
    if (next == kNone || steps > 64) {
      ok = false;
      break;
    }
    if (lit_at_[q] > now) lit = false;
    q = next;
    prop += link_prop_[ports_[q].link];
    rate = std::min(rate, link_rate_[ports_[q].link]);
    ok = ok && ports_[q].link_up;
  }
  const uint32_t peer = ok ? ports_[q].wire_peer : pt.wire_peer;
  const bool up = ok && lit;
  const bool changed = peer != pt.peer || up != pt.up;
  set_peer(pt, peer);
  pt.reverse = ok ? ports_[q].reverse : (port ^ 1);
  pt.prop_ps = prop;
  pt.delay_ps = prop + nodes_[peer].latency_ps;
  set_rate(pt, rate);
  if (changed) new_channel(pt, up);
  if (built_) set_thresholds(port);
}

void Network::hold(uint32_t node, uint32_t pkt, bool fresh) {
  if (held_head_.empty()) held_head_.assign(nodes_.size(), kNone), held_tail_.assign(nodes_.size(), kNone);
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

void Network::release_held() {
  if (held_now_ == 0) return;
  for (uint32_t node = 0; node < held_head_.size(); ++node) {
    uint32_t pkt = held_head_[node];
    held_head_[node] = held_tail_[node] = kNone;
    while (pkt != kNone) {
      const uint32_t next = pool_[pkt].next;
      --held_now_;
      const uint32_t out = route_cold(node, pool_[pkt]);
      if (out == kNone || !ports_[out].up) {
        hold(node, pkt, false);  // still no way on
      } else {
        enqueue_cold(out, pkt);
      }
      pkt = next;
    }
  }
}

void Network::topology_changed() {
  std::vector<uint32_t> gone, back;
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    Port& pt = ports_[p];
    if (pt.inert) continue;
    const bool was_up = pt.up;
    const uint32_t old_peer = pt.peer;
    if (pt.optical) {
      resolve_channel(p);
    } else if (pt.up != pt.link_up) {
      new_channel(pt, pt.link_up);
    }
    if (was_up && (!pt.up || pt.peer != old_peer)) {
      set_paused(pt, false);  // a PAUSE from the old peer no longer applies
      gone.push_back(p);
    }
    if (pt.up && (!was_up || pt.peer != old_peer)) back.push_back(p);
  }
  rebuild_routes();
  for (const uint32_t p : gone) evacuate(p);
  release_held();
  rehome_flows();
  for (const uint32_t p : back) try_transmit(p);
}

void Network::evacuate(uint32_t port) {
  // Frames queued behind a channel that went away: lossless fabrics re-forward them from the
  // same node along the rebuilt tables; lossy ones drop them.
  Port& pt = ports_[port];
  while (pt.head != kNone) {
    const uint32_t pkt = pop_queue_cold(pt);
    Packet& p = pool_[pkt];
    const uint32_t out = lossless_ ? route_cold(pt.node, p) : kNone;
    if (lossless_ && (out == kNone || out == port || !ports_[out].up)) {
      hold(pt.node, pkt);  // no way on now: wait at this node for the next change
    } else if (out == kNone || out == port || !ports_[out].up) {
      if (p.port != kNone) ports_[p.port].ingress_bytes -= p.size_bytes;
      ++pt.drops;
      drop(pkt, pt.optical ? counters_.circuit_drops : counters_.link_down_drops);
    } else {
      ++counters_.circuit_reroutes;
      enqueue_cold(out, pkt);
    }
  }
}

void Network::drop_nic_entries(uint32_t port, uint32_t flow) {
  // (so the NIC scheduler need not check, per frame, that an entry's flow still starts here)
  auto& h = nics_[ports_[port].nic].heap;
  const auto n = std::erase_if(h, [flow](const NicScheduler::Entry& e) { return e.flow == flow; });
  if (n > 0) std::make_heap(h.begin(), h.end(), NicScheduler::later);
}

void Network::rehome_flows() {
  for (uint32_t f = 0; f < flows_.size(); ++f) {
    if (flows_.end_ps[f] >= 0) continue;  // (a flow that sent everything may still retransmit)
    const uint32_t old = flows_.first_port[f];
    // (Every flow is re-evaluated: one on its own NIC moves over NVLink when that NIC's switch
    // is cut off from the destination's; one relayed around a failed NIC returns when it is
    // repaired.)
    const uint32_t fp = first_port_for(flows_.src[f], flows_.dst[f], flows_.hash[f]);
    if (fp == kNone || fp == old) continue;
    flows_.first_port[f] = fp;
    const SimTime pending = flows_.nic_ready[f];
    if (pending != kNever) {  // move its NIC slot: out of the old port's heap, into the new
      drop_nic_entries(old, f);
      flows_.nic_ready[f] = kNever;
      activate(f, std::max(pending, eng_.now()));
    }
  }
}

void Network::schedule_plan(SimTime t, std::vector<uint32_t> ocs, std::vector<uint32_t> a,
                            std::vector<uint32_t> b, SimTime dark_ps) {
  RF_CHECK(t >= eng_.now(), "circuit plan at ", t, " ps is in the past (now ", eng_.now(), " ps)");
  RF_CHECK(dark_ps >= 0, "circuit plan: negative reconfiguration time");
  Plan plan{std::move(ocs), std::move(a), std::move(b), dark_ps};
  check_plan(plan);
  plans_.push_back(std::move(plan));
  eng_.schedule(t, static_cast<uint32_t>(plans_.size() - 1), kind_base_ + kPlan);
}

void Network::apply_plan(uint32_t index) {
  const Plan& plan = plans_[index];
  const SimTime now = eng_.now();
  // circuits as (device, entering port of a, entering port of b) with a's port < b's
  using Key = std::tuple<uint32_t, uint32_t, uint32_t>;
  std::set<Key> current, wanted;
  for (uint32_t p = 0; p < circuit_next_.size(); ++p) {
    if (circuit_next_[p] == kNone) continue;
    const uint32_t other_in = circuit_next_[p] ^ 1;
    if (p < other_in) current.insert({ports_[p].wire_peer, p, other_in});
  }
  for (size_t i = 0; i < plan.ocs.size(); ++i) {
    uint32_t x = port_into(plan.a[i], plan.ocs[i]), y = port_into(plan.b[i], plan.ocs[i]);
    if (x > y) std::swap(x, y);
    wanted.insert({plan.ocs[i], x, y});
  }
  uint32_t removed = 0, added = 0;
  for (const Key& k : current) {
    if (wanted.count(k)) continue;
    circuit_next_[std::get<1>(k)] = circuit_next_[std::get<2>(k)] = kNone;
    ++removed;
  }
  for (const Key& k : wanted) {
    if (current.count(k)) continue;
    const uint32_t x = std::get<1>(k), y = std::get<2>(k);
    circuit_next_[x] = y ^ 1;
    circuit_next_[y] = x ^ 1;
    lit_at_[x] = lit_at_[y] = now + plan.dark_ps;
    ++added;
  }
  circuit_log_.push_back({now, index, added, removed, plan.dark_ps});
  circuits_changed_ = true;
  topology_changed();
  if (added > 0 && plan.dark_ps > 0) eng_.schedule(now + plan.dark_ps, index, kind_base_ + kLight);
}

void Network::light(uint32_t /*index*/) {
  circuits_changed_ = true;
  topology_changed();
}

std::vector<uint32_t> Network::current_circuits() const {
  std::vector<uint32_t> out;
  for (uint32_t p = 0; p < circuit_next_.size(); ++p) {
    if (circuit_next_[p] == kNone) continue;
    const uint32_t other_in = circuit_next_[p] ^ 1;
    if (p > other_in) continue;
    out.push_back(ports_[p].wire_peer);
    out.push_back(ports_[p].link);
    out.push_back(ports_[other_in].link);
  }
  return out;
}

}  // namespace rfabric::net
