// network.cpp: the per-frame hot path of the packet plane: enqueue, transmit, the wire,
// arrivals, forwarding's fast path, PFC pause/resume, NIC pulls, and the event dispatch. The
// RF_HOT functions are defined here and inlined into their callers in this file only; cold code
// elsewhere reaches them through the *_cold wrappers.
#include "packet/network.hpp"

#include <algorithm>

#include "engine/check.hpp"
#include "packet/transports/roce.hpp"

namespace rfabric::net {

using engine::kNever;
using engine::serialization_time;

namespace {
/// The heap's top is still the entry we served (the transport may have pushed another).
bool h_top_is(const NicScheduler& s, const NicScheduler::Entry& e) {
  return !s.heap.empty() && s.heap.front().seq == e.seq;
}
}  // namespace

Network::NicPull Network::pull_nic(uint32_t port) {
  NicScheduler& s = nics_[port_nic_[port]];
  const auto later = NicScheduler::later;
  // Skip slots superseded by a later activate() of the same flow. (A flow moved to another
  // port leaves no entry here: rehome_flows() takes them out.)
  // An entry of a slot's earlier flow (retired since) is stale too: its gen is that flow's.
  for (;;) {
    if (s.heap.empty()) return {kNever, kNone};
    const NicScheduler::Entry& e = s.heap.front();
    if (e.ready == flows_.nic_ready[e.flow] && e.gen == static_cast<uint32_t>(flows_.id[e.flow])) break;
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    s.heap.pop_back();
  }
  const SimTime now = eng_.now();
  const NicScheduler::Entry top = s.heap.front();
  if (top.ready > now) {
    if (top.ready < s.wake_at) {
      s.wake_at = top.ready;
      eng_.schedule(top.ready, port, kind_base_ + kWake);
    }
    return {top.ready, kNone};
  }
  const uint32_t pkt = pool_.alloc();
  Packet& p = pool_[pkt];
  p.flow = top.flow;
  p.dst = flows_.dst[top.flow];
  p.port = kNone;
  p.control = false;
  p.type = 0;  // (the transport sets it: written here, the four flag bytes are one store)
  p.ecn = 0;
  p.hops = 0;
  ++flows_.packets[top.flow];
  flows_.nic_ready[top.flow] = kNever;
  pulling_port_ = port;
  SimTime next;
  bool last;  // the frame carries its flow's last new byte
  if (roce_ != nullptr) {
    next = roce_->next_packet(top.flow, p, pool_.ends(pkt));
    last = next == kNever;  // (RoCE's next_packet: kNever exactly when no new byte is left)
  } else {
    next = transport_of(top.flow).next_packet(top.flow, p, pool_.ends(pkt));
    last = flows_.sent_bytes[top.flow] >= flows_.size_bytes[top.flow];
  }
  pulling_port_ = kNone;
  ++counters_.packets;
  if (next != kNever && flows_.nic_ready[top.flow] == kNever) {
    // The flow goes back in with its next slot: replace the top in place and sift it down
    // (one heap pass instead of a pop and a push).
    flows_.nic_ready[top.flow] = std::max(next, now);
    auto& h = s.heap;
    const NicScheduler::Entry e{flows_.nic_ready[top.flow], nic_seq_++, top.flow, top.gen};
    if (&h.back() == &h.front()) {
      h.front() = e;  // (the NIC's only flow: nothing to sift, and no division for the size)
    } else {
      size_t i = 0;
      const size_t n = h.size();
      for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && later(h[c], h[c + 1])) ++c;  // the earlier child
        if (!later(e, h[c])) break;
        h[i] = h[c];
        i = c;
      }
      h[i] = e;
    }
  } else {
    // Done, window-limited, or re-paced by the transport (a newer slot was pushed): the
    // entry we served leaves the heap.
    if (h_top_is(s, top)) {
      std::pop_heap(s.heap.begin(), s.heap.end(), later);
      s.heap.pop_back();
    }
  }
  // (last first: nearly every frame is not its flow's last, one test then)
  if (last && !flows_.sent_notified[top.flow]) {
    flows_.sent_notified[top.flow] = 1;  // its last new byte is in the frame leaving now
    if (observer_ != nullptr) observer_->on_flow_sent(top.flow);
  }
  return {s.heap.empty() ? kNever : s.heap.front().ready, pkt};
}

uint32_t Network::pop_queue(Port& pt) {
  const uint32_t pkt = pt.head;
  RF_DCHECK(pkt != kNone);
  Packet& p = pool_[pkt];
  pt.head = p.next;
  if (pt.head == kNone) pt.tail = kNone;
  pt.queued_bytes -= p.size_bytes;
  RF_DCHECK(pt.queued_bytes >= 0 && (pt.head != kNone || pt.queued_bytes == 0));
  return pkt;
}

void Network::try_transmit(uint32_t port) { transmit_next(port); }

void Network::on_tx_done(void* self, SimTime time, uint32_t port, uint32_t) {
  Hot{static_cast<Network*>(self)}.tx_done(time, port);
}

void Network::transmit_next(uint32_t port) {
  Port& pt = ports_[port];
  if (pt.stopped) return;  // paused or down
  const SimTime now = eng_.now();
  if (pt.busy_until > now) {
    schedule_tx_done(port);
    return;
  }
  if (pt.head != kNone) {
    const uint32_t pkt = pop_queue(pt);
    mark_ecn(pt, port, pool_[pkt]);
    transmit(port, pkt);
    if (pt.head != kNone) {
      schedule_tx_done(port);
    } else if (pt.nic) {
      schedule_nic_pull(port);
    }
    return;
  }
  if (!pt.nic) return;
  // A fresh frame from the NIC's flows (no ingress to release); the pull says when the next
  // one is due at the soonest (schedule_nic_pull's bound, without looking at the heap again).
  const NicPull r = pull_nic(port);
  if (r.pkt == kNone) return;
  put_on_wire(port, r.pkt);
  if (pt.head != kNone) {
    schedule_tx_done(port);
  } else if (r.next_slot != kNever) {
    schedule_tx_done(port, std::max(pt.busy_until, r.next_slot));
  }
}

void Network::schedule_tx_done(uint32_t port) { schedule_tx_done(port, ports_[port].busy_until); }

void Network::schedule_tx_done(uint32_t port, SimTime at) {
  Port& pt = ports_[port];
  if (pt.tx_event_at == at) return;  // already pending
  pt.tx_event_at = at;
  eng_.schedule(at, port, kind_base_ + kTxDone);
}

void Network::schedule_nic_pull(uint32_t port) {
  // The NIC looks for its next frame when this one is out, and not before the earliest
  // slot in its heap: the top is the earliest of all entries, valid ones included, so no
  // valid slot comes sooner. A paced flow then costs one event per frame, not a
  // transmit-done and then a wake; an earlier slot added later (activate) reschedules.
  const Port& pt = ports_[port];
  const NicScheduler& s = nics_[port_nic_[port]];
  if (s.heap.empty()) return;
  schedule_tx_done(port, std::max(pt.busy_until, s.heap.front().ready));
}

void Network::transmit(uint32_t port, uint32_t pkt) {
  const Packet& p = pool_[pkt];
  if (p.port != kNone) release_ingress(p.port, p.size_bytes);  // it leaves the node it arrived at
  put_on_wire(port, pkt, true);                                // (both callers have just found the port idle)
}

void Network::put_on_wire(uint32_t port, uint32_t pkt) { put_on_wire(port, pkt, false); }

void Network::put_on_wire(uint32_t port, uint32_t pkt, bool found_idle) {
  Port& pt = ports_[port];
  Packet& p = pool_[pkt];
  const SimTime now = eng_.now();
  // INVARIANT: nothing is put on a channel that is down or dark (a failed link, or a circuit
  // chain without light). The frame carries the channel's generation, odd only while it is
  // up; arrive() counts even ones (dark_transmits, tested to stay zero).
  // (exact either way: a whole number of ps per byte, or the rounded-up division; busy time
  // at the former is busy_ps()'s to count from tx_bytes)
  SimTime ser;
  if (pt.ps_per_byte) [[likely]] {
    ser = SimTime{p.size_bytes} * pt.ps_per_byte;
  } else {
    PortInfo& info = port_info_[port];
    ser = serialization_time(p.size_bytes, info.rate_bps);
    info.busy_base_ps += ser;
  }
  p.port = port;
  p.chan_gen = pt.gen;
  // INVARIANT: one frame at a time per port (a caller that has just found the port idle, with
  // nothing run since that could start a frame, says so and is not tested again)
  if (!found_idle) counters_.busy_starts += pt.busy_until > now;
  RF_DCHECK(pt.busy_until <= now && !port_info_[port].inert && p.size_bytes > 0);
  pt.busy_until = now + ser;
  pt.tx_bytes += p.size_bytes;
  if (++pt.tx_packets_low == 0) [[unlikely]]
    port_info_[port].tx_packets_high += int64_t{1} << 32;
  eng_.schedule(now + ser + pt.delay_ps, pkt, kind_base_ + kArrive);
}

void Network::mark_ecn(Port& pt, uint32_t port, Packet& p) {
  // RED-style marking on dequeue, on the bytes still queued behind the departing frame:
  // the mark then reflects the queue now, not the queue the frame joined, so feedback is
  // not delayed by the queueing itself (as in DCQCN switches and HPCC's ns-3 model).
  const Bytes q = pt.queued_bytes;
  if (q <= pt.ecn_kmin || p.ecn) return;
  bool mark = q >= pt.ecn_kmax;
  if (!mark) {
    const double prob =
        ecn_pmax_ * static_cast<double>(q - pt.ecn_kmin) / static_cast<double>(pt.ecn_kmax - pt.ecn_kmin);
    mark = rng_.uniform() < prob;
  }
  if (mark) {
    p.ecn = 1;
    ++port_info_[port].ecn_marks;
    ++counters_.ecn_marks;
  }
}

uint32_t Network::route_cold(uint32_t node, const Packet& p) const { return route(node, p); }

void Network::enqueue_cold(uint32_t port, uint32_t pkt) {
  if (ports_[port].lossy) [[unlikely]] {
    // A long link's port in a lossless run: the frame leaves its ingress accounting, and a
    // full queue drops it. (The per-frame path does this in arrive_lossy.)
    Packet& p = pool_[pkt];
    leave_ingress(p);
    if (ports_[port].queued_bytes + p.size_bytes > port_info_[port].buffer_bytes) {
      ++port_info_[port].drops;
      drop(pkt, counters_.overflow_drops);
      return;
    }
  }
  enqueue(port, pkt);
}

void Network::arrive_lossy(uint32_t pkt, uint32_t out, Bytes ingress) {
  Packet& p = pool_[pkt];
  Port& in = ports_[p.port];
  const Port& o = ports_[out];
  // Queued for a lossy port (the long link), or come over one, which nothing can PAUSE: a
  // full queue drops the frame, as a lossy port would.
  if (o.queued_bytes + p.size_bytes > port_info_[out].buffer_bytes) {
    ++port_info_[out].drops;
    drop(pkt, counters_.overflow_drops);
    return;
  }
  if (o.lossy) {
    p.port = kNone;  // it leaves the ingress accounting now: the long queue never PAUSEs a site
  } else {
    in.ingress_bytes = ingress;
  }
  enqueue(out, pkt);
}

uint32_t Network::pop_queue_cold(Port& pt) { return pop_queue(pt); }

void Network::leave_ingress(Packet& p) {
  if (p.port == kNone) return;
  release_ingress(p.port, p.size_bytes);
  p.port = kNone;
}

void Network::drop(uint32_t pkt, uint64_t& reason) {
  const Packet& p = pool_[pkt];
  flows_.dropped_bytes[p.flow] += payload_of(p);
  ++reason;
  ++counters_.drops;
  release_packet(pkt);
}

void Network::enqueue(uint32_t port, uint32_t pkt) { enqueue(port, pkt, true); }

void Network::enqueue(uint32_t port, uint32_t pkt, bool may_be_idle) {
  Port& pt = ports_[port];
  Packet& p = pool_[pkt];
  if (!is_up(pt)) {
    ++port_info_[port].drops;
    drop(pkt, counters_.link_down_drops);
    return;
  }
  if (!lossless_ && pt.queued_bytes + p.size_bytes > port_info_[port].buffer_bytes) {
    ++port_info_[port].drops;
    drop(pkt, counters_.overflow_drops);
    return;
  }
  if (may_be_idle && pt.head == kNone && !pt.stopped && pt.busy_until <= eng_.now()) {
    // Idle port, empty queue: the frame goes straight onto the wire (what try_transmit would
    // do after queueing it), without waiting in the queue.
    transmit(port, pkt);
    if (pt.nic) schedule_nic_pull(port);
    return;
  }
  p.next = kNone;
  if (pt.tail == kNone) {
    pt.head = pkt;
  } else {
    pool_[pt.tail].next = pkt;
  }
  pt.tail = pkt;
  pt.queued_bytes += p.size_bytes;
  if (pt.queued_bytes > pt.max_queue_bytes) pt.max_queue_bytes = pt.queued_bytes;
  if (pt.paused) return;  // the RESUME restarts the port
  if (pt.busy_until > eng_.now()) {
    schedule_tx_done(port);  // what try_transmit would do, without the call
    return;
  }
  try_transmit(port);
}

uint32_t Network::route(uint32_t node, const Packet& p) const {
  return route(node, nodes()[node].kind == NodeKind::Eps, p);
}

uint32_t Network::route(uint32_t node, bool eps, const Packet& p) const {
  // Fast path: a packet switch of a fabric without host forwarding or up*/down*, toward a
  // GPU whose NIC works. Everything else takes route_with.
  uint32_t out;
  if (fwd_.fast_next_hop(node, eps, p.dst, p.hops, out)) return out;
  const bool descending = p.port != kNone && fwd_.descends(port_info_[p.port].node, node);
  // (adaptive tie-breaks rotate by the flow's id, not its slot, which a later flow reuses)
  return route_with(node, src_of(p), p.dst, flows_.hash[p.flow], p.seq, p.hops,
                    static_cast<uint32_t>(flows_.id[p.flow]), descending,
                    p.port != kNone ? port_info_[p.port].node : kNone, p.port);
}

uint32_t Network::route_with(uint32_t node, uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq,
                             uint32_t hops, uint32_t flow, bool descending, uint32_t from,
                             uint32_t in) const {
  return fwd_.route_with(node, src, dst, hash, seq, hops, flow, descending, from, QueueLoad{this}, in);
}

void Network::arrive(uint32_t pkt) {
  Packet& p = pool_[pkt];
  Port& in = ports_[p.port];
  p.hops += in.hop_step;
  if (p.chan_gen != in.live_gen) [[unlikely]] {
    arrive_on_changed_channel(pkt);
    return;
  }
  const uint32_t key = in.peer_key;
  if (key == p.dst) {  // (the key of a node that is not a GPU is never a GPU's id)
    deliver(pkt);
    return;
  }
  // (After a change of tables a frame may be sent back the way it came: that is its new
  // path, not a loop, since one consistent table set has none.)
  uint32_t out;
  // (the cache when it is on, a miss filled out of line, so the hit reads nothing of the
  // node but its key; the fast route itself when its table would be too large)
  if (fwd_.hop_cache_on()) [[likely]] {
    if (!fwd_.hop_cache_hit(key, p.dst, p.hops, out)) [[unlikely]] {
      arrive_missed(pkt);
      return;
    }
  } else if (!fwd_.fast_next_hop(in.peer, in.peer_eps, p.dst, p.hops, out)) [[unlikely]] {
    arrive_routed(pkt);
    return;
  }
  forward(pkt, out);
}

void Network::arrive_missed(uint32_t pkt) {
  const Packet& p = pool_[pkt];
  const Port& in = ports_[p.port];
  uint32_t out;
  if (!fwd_.cached_next_hop_at(in.peer_key, in.peer, p.dst, p.hops, out)) {
    arrive_routed(pkt);
    return;
  }
  forward(pkt, out);
}

void Network::arrive_routed(uint32_t pkt) {
  const Packet& p = pool_[pkt];
  const Port& in = ports_[p.port];
  forward(pkt, route(in.peer, in.peer_eps, p));
}

void Network::forward(uint32_t pkt, uint32_t out) {
  Packet& p = pool_[pkt];
  Port& in = ports_[p.port];
  if (out == kNone) [[unlikely]] {
    arrive_without_route(pkt, in.peer);
    return;
  }
  // count_ingress(), with its PAUSE out of line (forward_pausing) so that this path makes
  // no call but tail calls
  const Bytes ingress = in.ingress_bytes + p.size_bytes;
  if (ingress > in.max_ingress_bytes) in.max_ingress_bytes = ingress;
  if (ingress > in.xoff && lossless_ && !in.pause_sent && in.peer_eps) [[unlikely]] {
    forward_pausing(pkt, out, ingress);
    return;
  }
  forward_counted(pkt, in, out, ingress);
}

void Network::forward_pausing(uint32_t pkt, uint32_t out, Bytes ingress) {
  const uint32_t in_port = pool_[pkt].port;
  send_pause(in_port);
  forward_counted(pkt, ports_[in_port], out, ingress);
}

void Network::forward_counted(uint32_t pkt, Port& in, uint32_t out, Bytes ingress) {
  Port& o = ports_[out];
  if (o.head == kNone && !o.stopped && o.busy_until <= eng_.now()) {
    // Straight through an idle port: the frame's ingress bytes come and go in the same
    // instant, so they are counted (peak, PAUSE) but never stored and released. (A RESUME
    // cannot be due: while PAUSE is on, ingress stays above XON.)
    if (o.cold_wire) [[unlikely]] {
      straight_through_cold(out, pkt);
      return;
    }
    put_on_wire(out, pkt);  // (ends in the event push: no call on the way)
    return;
  }
  if (in.lossy | o.lossy) [[unlikely]] {
    arrive_lossy(pkt, out, ingress);
    return;
  }
  in.ingress_bytes = ingress;
  enqueue_busy(out, pkt);
}

void Network::straight_through_cold(uint32_t out, uint32_t pkt) {
  put_on_wire(out, pkt);
  if (ports_[out].nic) schedule_nic_pull(out);
}

void Network::deliver(uint32_t pkt) {
  Packet& p = pool_[pkt];
  ++counters_.packets_delivered;
  if (roce_ != nullptr) {
    roce_->receive(p, pool_.ends(pkt));
  } else {
    transport_of(p.flow).receive(p, pool_.ends(pkt));
  }
  release_packet(pkt);
}

void Network::enqueue_busy(uint32_t port, uint32_t pkt) {
  enqueue(port, pkt, false);  // (forward_counted found the port busy, stopped or queueing)
}

void Network::Hot::arrive(uint32_t pkt) { net->arrive(pkt); }

void Network::Hot::tx_done(SimTime time, uint32_t port) {
  // Superseded unless it is the port's one pending transmit-done. (tx_event_at keeps this
  // event's time after it fires: every later one is scheduled strictly after now.)
  if (net->ports_[port].tx_event_at == time) net->transmit_next(port);
}

uint64_t Network::run(SimTime until, uint64_t max_events) {
  return eng_.run_hot(until, max_events, Hot{this});
}

void Network::on_arrive(void* self, SimTime, uint32_t pkt, uint32_t) {
  static_cast<Network*>(self)->arrive(pkt);
}

Bytes Network::count_ingress(Port& in, const Packet& p) {
  const Bytes ingress = in.ingress_bytes + p.size_bytes;
  if (ingress > in.max_ingress_bytes) in.max_ingress_bytes = ingress;
  // PFC is a packet switch's: relaying GPUs and NVSwitches (PXN, host forwarding) stage
  // frames in GPU memory under the collective library's own credits and never PAUSE, so no
  // buffer dependency cycle runs through a server.
  if (ingress > in.xoff && lossless_ && !in.pause_sent && in.peer_eps) [[unlikely]] {
    send_pause(p.port);
  }
  return ingress;
}

void Network::arrive_without_route(uint32_t pkt, uint32_t node) {
  if (!lossless_) {
    drop(pkt, counters_.no_route_drops);
    return;
  }
  Packet& p = pool_[pkt];
  Port& in = ports_[p.port];
  in.ingress_bytes = count_ingress(in, p);
  hold_or_resend(node, pkt, true);  // lossless and no route now
}

void Network::send_pause(uint32_t port) {
  Port& in = ports_[port];
  in.pause_sent = true;
  ++port_info_[port].pauses;
  ++counters_.pauses;
  eng_.schedule(eng_.now() + port_info_[port].prop_ps, port, kind_base_ + kPause);
}

void Network::arrive_on_changed_channel(uint32_t pkt) {
  // The channel changed while the frame was on it: a failed link or a circuit gone dark.
  Packet& p = pool_[pkt];
  const Port& in = ports_[p.port];
  const PortInfo& info = port_info_[p.port];
  if ((p.chan_gen & 1u) == 0) ++counters_.dark_transmits;  // sent while its channel was down
  if (!lossless_ || info.inert || in.lossy) {
    drop(pkt, info.optical ? counters_.circuit_drops : counters_.link_down_drops);
    return;
  }
  // Lossless: held back at the sender and re-forwarded along the current tables.
  ++counters_.circuit_reroutes;
  const uint32_t back = info.node;
  p.port = kNone;  // it left the sender's ingress accounting when it was sent
  p.hops -= in.hop_step;
  const uint32_t src = src_of(p);
  const uint32_t out = nodes()[back].gpu >= 0 && static_cast<uint32_t>(nodes()[back].gpu) == src
                           ? first_port_for(src, p.dst, flows_.hash[p.flow])
                           : route(back, p);
  if (out == kNone || !is_up(ports_[out])) {
    hold(back, pkt);  // no way on yet: wait at the sender for the next change
    return;
  }
  enqueue_cold(out, pkt);  // (onto a long link: its lossy rules)
}

uint32_t Network::send_control(uint32_t flow, uint8_t type) {
  const uint32_t pkt = pool_.alloc();
  Packet& p = pool_[pkt];
  PacketEnds& e = pool_.ends(pkt);
  p.flow = flow;
  ++flows_.packets[flow];
  p.dst = flows_.src[flow];
  p.size_bytes = static_cast<uint32_t>(cfg_.control_bytes);
  p.port = kNone;
  p.seq = 0;
  p.control = true;
  p.type = type;
  p.ecn = 0;
  p.hops = 0;
  e.aux = 0;
  p.chan_gen = 0;
  e.hdr = 0;
  e.sent_ps = eng_.now();
  ++counters_.packets;
  return pkt;
}

void Network::send_packet(uint32_t pkt) {
  const Packet& p = pool_[pkt];
  const uint32_t port = first_port_for(src_of(p), p.dst, flows_.hash[p.flow]);
  if (port == kNone) {
    drop(pkt, counters_.no_route_drops);
    return;
  }
  enqueue(port, pkt);
}

void Network::on_event(const engine::Event& ev) {
  switch (ev.kind - kind_base_) {
    // (kArrive and kTxDone reach on_arrive and on_tx_done, not this switch)
    case kPause:
      set_paused(ports_[ev.target], true);
      break;
    case kResume:
      set_paused(ports_[ev.target], false);
      try_transmit(ev.target);
      break;
    case kWake: {
      NicScheduler& s = nics_[port_nic_[ev.target]];
      if (s.wake_at != ev.time) break;  // superseded by an earlier wake
      s.wake_at = kNever;
      try_transmit(ev.target);
      break;
    }
    case kFlowStart:
      start_flows();
      break;
    case kStartOne:
      start_one(ev.target);
      break;
    case kTopologyChange:
      topology_change_due(ev.target);  // (nothing if a flow starting at this instant applied it)
      break;
    default:
      break;
  }
}

std::pair<SimTime, BitsPerSec> Network::path_cost(uint32_t src, uint32_t dst) const {
  return fwd_.path_cost(trace_path(src, dst, 0));
}

std::vector<uint32_t> Network::trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const {
  return fwd_.path(src, dst, flow_hash, QueueLoad{this});
}

}  // namespace rfabric::net
