// flows.cpp: flows and NIC scheduling: creating and starting flows, a flow's slot in its
// first-hop NIC's heap (activate), completion, and moving flows to another first hop when the
// topology changes. The per-frame pull from a NIC's heap (pull_nic) stays with the hot path in
// network.cpp, where the compiler inlines it into the transmit loop.
#include <algorithm>
#include <numeric>

#include "engine/check.hpp"
#include "fabric/ecmp.hpp"
#include "packet/network.hpp"

namespace rfabric::net {

using engine::kNever;

uint32_t Network::append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start, int64_t owner) {
  const uint64_t i = flows_.next_id();
  net::check_flow(i, num_gpus(), src, dst, size, start, eng_.now());
  const uint32_t hash = flow_hash(cfg_.seed, i);
  const uint32_t fp = first_port_for(src, dst, hash);
  RF_CHECK(fp != kNone, "flow ", i, ": GPU ", dst, " is unreachable from GPU ", src);
  FlowTable& t = flows_;
  const uint32_t f = t.acquire(1, owner, src, dst, size, start, hash);
  t.delivered_bytes[f] = t.sent_bytes[f] = t.resent_bytes[f] = t.duplicate_bytes[f] = t.dropped_bytes[f] = 0;
  t.retransmits[f] = 0;
  t.packets[f] = 0;
  t.nic_ready[f] = kNever;
  t.sent_notified[f] = 0;
  t.first_port[f] = fp;
  t.proto[f] = ft_.of(src, dst);
  return f;
}

void FlowLog::append(const FlowTable& t, uint32_t f) {
  id.push_back(static_cast<int64_t>(t.id[f]));
  owner.push_back(t.owner[f]);
  src.push_back(t.src[f]);
  dst.push_back(t.dst[f]);
  size_bytes.push_back(t.size_bytes[f]);
  sent_bytes.push_back(t.sent_bytes[f]);
  delivered_bytes.push_back(t.delivered_bytes[f]);
  resent_bytes.push_back(t.resent_bytes[f]);
  duplicate_bytes.push_back(t.duplicate_bytes[f]);
  dropped_bytes.push_back(t.dropped_bytes[f]);
  start_ps.push_back(t.start_ps[f]);
  end_ps.push_back(t.end_ps[f]);
  retransmits.push_back(t.retransmits[f]);
  hash.push_back(t.hash[f]);
  in_flight.push_back(0);
}

void Network::retire_if_quiet(uint32_t f) {
  if (!transport_of(f).quiet(f)) return;  // its timer fires later and calls maybe_retire again
  // (a flow that still holds a NIC slot sends again: its frames bring it back here)
  if (flows_.nic_ready[f] != kNever) return;
  FlowTable& t = flows_;
  if (OwnerStats* s = owners_.fold(t.owner[f], 1, t.delivered_bytes[f], t.end_ps[f] - t.start_ps[f])) {
    s->retransmits += t.retransmits[f];
    s->resent_bytes += t.resent_bytes[f];
    s->duplicate_bytes += t.duplicate_bytes[f];
    s->dropped_bytes += t.dropped_bytes[f];
  }
  if (record_) log_.append(t, f);
  t.release(f);
  transport_of(f).recycle(f);  // (release keeps the slot's transport until it is reused)
}

FlowLog Network::flow_records() const {
  FlowLog all = log_;
  std::vector<uint32_t> slot_row(flows_.size(), kNone);
  for (uint32_t f = 0; f < flows_.size(); ++f) {
    if (!flows_.live[f]) continue;
    slot_row[f] = static_cast<uint32_t>(all.size());
    all.append(flows_, f);
  }
  pool_.for_each_live([&](const Packet& p) {
    if (slot_row[p.flow] != kNone) all.in_flight[slot_row[p.flow]] += payload_of(p);
  });
  // sorted by id (rows taken out for streaming are not here)
  std::vector<uint32_t> order(all.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return all.id[a] < all.id[b]; });
  auto permute = [&](auto& v) {
    auto old = v;
    for (size_t k = 0; k < order.size(); ++k) v[k] = old[order[k]];
  };
  permute(all.id);
  permute(all.owner);
  permute(all.src);
  permute(all.dst);
  permute(all.size_bytes);
  permute(all.sent_bytes);
  permute(all.delivered_bytes);
  permute(all.resent_bytes);
  permute(all.duplicate_bytes);
  permute(all.dropped_bytes);
  permute(all.start_ps);
  permute(all.end_ps);
  permute(all.retransmits);
  permute(all.hash);
  permute(all.in_flight);
  return all;
}

void Network::add_flows(const std::vector<uint32_t>& src, const std::vector<uint32_t>& dst,
                        const std::vector<Bytes>& size, const std::vector<SimTime>& start) {
  check_flow_set(flows_.size(), src, dst, size, start);
  const size_t f = src.size();
  for (size_t i = 0; i < f; ++i) append_flow(src[i], dst[i], size[i], start[i], -1);
  transport_->prepare(static_cast<uint32_t>(f));
  if (two_) cross_transport_->prepare(static_cast<uint32_t>(f));
  start_order_.resize(f);
  std::iota(start_order_.begin(), start_order_.end(), 0u);
  std::stable_sort(start_order_.begin(), start_order_.end(),
                   [&](uint32_t a, uint32_t b) { return start[a] < start[b]; });
  next_start_ = 0;
  if (f > 0) eng_.schedule(start[start_order_[0]], 0, kind_base_ + kFlowStart);
}

uint32_t Network::create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key,
                              int64_t owner, uint32_t copies) {
  RF_CHECK(copies == 1, "the packet network moves every message as its own flow (copies ", copies, ")");
  const uint32_t f = append_flow(src, dst, size, start_ps, owner);
  if (ecmp_key != 0) {
    flows_.hash[f] = connection_hash(cfg_.seed, ecmp_key);
    if (fwd_.host_forwarding()) flows_.first_port[f] = first_port_for(src, dst, flows_.hash[f]);
  }
  transport_->prepare(static_cast<uint32_t>(flows_.size()));
  if (two_) cross_transport_->prepare(static_cast<uint32_t>(flows_.size()));
  eng_.schedule(start_ps, f, kind_base_ + kStartOne);
  return f;
}

void Network::start_one(uint32_t f) {
  // A link change, circuit plan or end of dark time at this instant applies to the flow even if
  // it was scheduled after the flow (equal times otherwise go by call order): its first frame
  // takes the new topology.
  apply_due_changes();
  if (flows_.size_bytes[f] == 0) {
    complete_flow(f);
  } else {
    transport_of(f).start_flow(f);
  }
}

void Network::start_flows() {
  const SimTime now = eng_.now();
  while (next_start_ < start_order_.size() && flows_.start_ps[start_order_[next_start_]] <= now) {
    start_one(start_order_[next_start_++]);
  }
  if (next_start_ < start_order_.size())
    eng_.schedule(flows_.start_ps[start_order_[next_start_]], 0, kind_base_ + kFlowStart);
}

BitsPerSec Network::line_rate(uint32_t flow) const {
  const BitsPerSec first = port_info_[flows_.first_port[flow]].rate_bps;
  const uint32_t src = flows_.src[flow], nic = fwd_.gpu_nic_port(src);
  if (nic == kNone || fwd_.nic_usable(src) || fwd_.gpu_server(src) == fwd_.gpu_server(flows_.dst[flow]))
    return first;
  return std::min(first, fwd_.link_rate_bps(fwd_.channel(nic).link));
}

void Network::activate(uint32_t flow, SimTime t) {
  const uint32_t port = flows_.first_port[flow];
  NicScheduler& s = nics_[port_nic_[port]];
  if (flows_.nic_ready[flow] == t) return;
  flows_.nic_ready[flow] = t;
  s.heap.push_back({t, nic_seq_++, flow, static_cast<uint32_t>(flows_.id[flow])});
  std::push_heap(s.heap.begin(), s.heap.end(), NicScheduler::later);
  // Re-paced from inside this NIC's own pull (DCQCN's rate increase): the frame being pulled
  // is not on the wire yet, so the port only looks idle. try_transmit() schedules the next
  // pull from the heap once that frame is out.
  if (port == pulling_port_) return;
  try_transmit(port);
}

void Network::complete_flow(uint32_t flow) {
  flows_.end_ps[flow] = eng_.now();
  ++counters_.flows_done;
  counters_.last_flow_end_ps = eng_.now();
  if (!flows_.sent_notified[flow]) {
    flows_.sent_notified[flow] = 1;
    if (observer_ != nullptr) observer_->on_flow_sent(flow);
  }
  if (observer_ != nullptr) observer_->on_flow_done(flow);
  maybe_retire(flow);  // (a flow with no frame in the fabric: empty, or its last ACK is back)
}

void Network::drop_nic_entries(uint32_t port, uint32_t flow) {
  // (so the NIC scheduler need not check, per frame, that an entry's flow still starts here)
  auto& h = nics_[port_nic_[port]].heap;
  const auto n = std::erase_if(h, [flow](const NicScheduler::Entry& e) { return e.flow == flow; });
  if (n > 0) std::make_heap(h.begin(), h.end(), NicScheduler::later);
}

void Network::rehome_flows() {
  // The flows alive, in creation order (the order in which they take new NIC slots).
  std::vector<uint32_t> alive;
  alive.reserve(flows_.live_flows());
  for (uint32_t f = 0; f < flows_.size(); ++f)
    if (flows_.live[f] && flows_.end_ps[f] < 0) alive.push_back(f);
  std::sort(alive.begin(), alive.end(), [&](uint32_t a, uint32_t b) { return flows_.id[a] < flows_.id[b]; });
  for (const uint32_t f : alive) {
    // (a flow that sent everything may still retransmit)
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

}  // namespace rfabric::net
