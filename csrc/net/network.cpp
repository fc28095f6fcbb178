#include "net/network.hpp"

#include <algorithm>
#include <numeric>

#include "engine/check.hpp"

namespace rfabric::net {

using engine::kNever;
using engine::serialization_time;

Network::~Network() = default;

Network::Network(engine::Engine& eng, const NetworkSpec& spec, const EngineConfig& cfg,
                 TransportFactory make_transport)
    : eng_(eng), cfg_(cfg), rng_(cfg.seed, 0x6e6574776f726bULL) {
  const size_t n = spec.node_kind.size();
  const size_t m = spec.link_src.size();
  RF_CHECK(spec.node_server.size() == n && spec.node_latency_ps.size() == n,
           "node arrays have different lengths");
  RF_CHECK(spec.link_dst.size() == m && spec.link_rate_bps.size() == m &&
               spec.link_latency_ps.size() == m && spec.link_buffer_bytes.size() == m,
           "link arrays have different lengths");
  RF_CHECK(n < kNone && 2 * m < kNone, "network too large");
  RF_CHECK(cfg.mtu_bytes >= 256 && cfg.mtu_bytes <= 65536, "mtu_bytes ", cfg.mtu_bytes,
           " is outside [256, 65536]");
  RF_CHECK(cfg.pfc_xoff_ps > 0, "pfc_xoff_ps must be positive");
  RF_CHECK(cfg.control_bytes > 0 && cfg.control_bytes <= cfg.mtu_bytes, "control_bytes ",
           cfg.control_bytes, " must be in (0, mtu_bytes]");

  nodes_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    RF_CHECK(spec.node_kind[i] <= static_cast<uint8_t>(NodeKind::PatchPanel), "node ", i,
             ": unknown kind code ", int(spec.node_kind[i]));
    RF_CHECK(spec.node_latency_ps[i] >= 0, "node ", i, ": negative latency");
    Node& nd = nodes_[i];
    nd.kind = static_cast<NodeKind>(spec.node_kind[i]);
    nd.server = spec.node_server[i];
    nd.latency_ps = spec.node_latency_ps[i];
    nd.gpu = -1;
    if (nd.kind == NodeKind::Gpu) {
      nd.gpu = static_cast<int32_t>(gpu_node_.size());
      gpu_node_.push_back(static_cast<uint32_t>(i));
    }
  }

  ports_.resize(2 * m);
  link_ports_.resize(2 * m);
  std::vector<uint32_t> degree(n + 1, 0);
  for (size_t l = 0; l < m; ++l) {
    const uint32_t a = spec.link_src[l], b = spec.link_dst[l];
    RF_CHECK(a < n && b < n, "link ", l, ": endpoint out of range (", a, ", ", b, ")");
    RF_CHECK(a != b, "link ", l, ": connects node ", a, " to itself");
    RF_CHECK(spec.link_rate_bps[l] > 0, "link ", l, ": rate must be positive");
    RF_CHECK(spec.link_latency_ps[l] >= 0, "link ", l, ": negative latency");
    RF_CHECK(spec.link_buffer_bytes[l] >= cfg.mtu_bytes, "link ", l, ": buffer ",
             spec.link_buffer_bytes[l], " B is smaller than one MTU (", cfg.mtu_bytes, " B)");
    for (int dir = 0; dir < 2; ++dir) {
      const uint32_t id = static_cast<uint32_t>(2 * l + dir);
      Port& p = ports_[id];
      p.node = dir ? b : a;
      p.peer = dir ? a : b;
      p.reverse = static_cast<uint32_t>(2 * l + 1 - dir);
      p.link = static_cast<uint32_t>(l);
      p.rate_bps = spec.link_rate_bps[l];
      p.prop_ps = spec.link_latency_ps[l];
      p.delay_ps = p.prop_ps + nodes_[p.peer].latency_ps;
      p.buffer_bytes = spec.link_buffer_bytes[l];
      link_ports_[id] = id;
      ++degree[p.node];
    }
  }

  // adjacency (CSR) for routing
  routing_in_.num_nodes = static_cast<uint32_t>(n);
  routing_in_.adj_begin.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) routing_in_.adj_begin[i + 1] = routing_in_.adj_begin[i] + degree[i];
  routing_in_.adj_ports.resize(2 * m);
  {
    std::vector<uint32_t> fill(routing_in_.adj_begin.begin(), routing_in_.adj_begin.end() - 1);
    for (uint32_t p = 0; p < 2 * m; ++p) routing_in_.adj_ports[fill[ports_[p].node]++] = p;
  }
  for (size_t i = 0; i < n; ++i) {
    nodes_[i].port_begin = routing_in_.adj_begin[i];
    nodes_[i].port_end = routing_in_.adj_begin[i + 1];
  }
  routing_in_.port_peer.resize(2 * m);
  routing_in_.port_reverse.resize(2 * m);
  routing_in_.port_up.assign(2 * m, 1);
  for (uint32_t p = 0; p < 2 * m; ++p) {
    routing_in_.port_peer[p] = ports_[p].peer;
    routing_in_.port_reverse[p] = ports_[p].reverse;
  }
  routing_in_.transit.assign(n, 0);
  for (size_t i = 0; i < n; ++i) routing_in_.transit[i] = nodes_[i].kind == NodeKind::Eps;

  // GPUs: one NIC link (to anything but an NVSwitch) and at most one NVLink.
  const size_t g = gpu_node_.size();
  gpu_nic_port_.assign(g, kNone);
  gpu_nvl_port_.assign(g, kNone);
  gpu_attach_.assign(g, kNone);
  gpu_attach_in_.assign(g, kNone);
  gpu_nvs_.assign(g, kNone);
  gpu_nvs_in_.assign(g, kNone);
  gpu_key_.assign(g, kNone);
  std::vector<uint32_t> key_of_node(n, kNone);
  for (uint32_t gpu = 0; gpu < g; ++gpu) {
    const Node& nd = nodes_[gpu_node_[gpu]];
    for (uint32_t a = nd.port_begin; a < nd.port_end; ++a) {
      const uint32_t p = routing_in_.adj_ports[a];
      const uint32_t peer = ports_[p].peer;
      if (nodes_[peer].kind == NodeKind::NvSwitch) {
        RF_CHECK(gpu_nvl_port_[gpu] == kNone, "gpu ", gpu, " (node ", gpu_node_[gpu],
                 ") has more than one NVLink link");
        gpu_nvl_port_[gpu] = p;
        gpu_nvs_[gpu] = peer;
        gpu_nvs_in_[gpu] = ports_[p].reverse;
      } else {
        RF_CHECK(gpu_nic_port_[gpu] == kNone, "gpu ", gpu, " (node ", gpu_node_[gpu],
                 ") has more than one NIC link; rfabric models one NIC per GPU");
        RF_CHECK(nodes_[peer].kind == NodeKind::Eps, "gpu ", gpu, " (node ", gpu_node_[gpu],
                 "): its NIC must connect to a packet switch (eps), not node ", peer);
        gpu_nic_port_[gpu] = p;
        gpu_attach_[gpu] = peer;
        gpu_attach_in_[gpu] = ports_[p].reverse;
        if (key_of_node[peer] == kNone) {
          key_of_node[peer] = static_cast<uint32_t>(routing_in_.keys.size());
          routing_in_.keys.push_back(peer);
        }
        gpu_key_[gpu] = key_of_node[peer];
      }
    }
    RF_CHECK(gpu_nic_port_[gpu] != kNone || gpu_nvl_port_[gpu] != kNone, "gpu ", gpu,
             " (node ", gpu_node_[gpu], ") has no links");
  }
  rebuild_routes();

  // one NIC scheduler per GPU egress port
  for (uint32_t gpu = 0; gpu < g; ++gpu) {
    for (const uint32_t p : {gpu_nic_port_[gpu], gpu_nvl_port_[gpu]}) {
      if (p == kNone) continue;
      ports_[p].nic = static_cast<int32_t>(nics_.size());
      nics_.emplace_back();
    }
  }

  kind_base_ = eng_.register_handler(this);
  for (uint32_t k = 1; k < kNumSub; ++k) eng_.register_handler(this);

  transport_ = make_transport(*this);
  header_ = cfg_.header_bytes >= 0 ? cfg_.header_bytes : transport_->header_bytes();
  RF_CHECK(header_ >= 0 && header_ < cfg_.mtu_bytes, "header_bytes ", header_,
           " must be smaller than mtu_bytes ", cfg_.mtu_bytes);
  mtu_ = cfg_.mtu_bytes;
  lossless_ = cfg_.lossless >= 0 ? cfg_.lossless != 0 : transport_->lossless();
  RF_CHECK(cfg_.ecn_kmin_ps >= 0 && cfg_.ecn_kmax_ps >= cfg_.ecn_kmin_ps, "ECN thresholds: need 0 <= kmin <= kmax");
  RF_CHECK(cfg_.ecn_pmax >= 0 && cfg_.ecn_pmax <= 1, "ecn_pmax ", cfg_.ecn_pmax, " is outside [0, 1]");
  ecn_pmax_ = cfg_.ecn_pmax;
  for (Port& p : ports_) {
    // ECN thresholds are queueing delays at the port's rate, so one setting fits all speeds.
    p.ecn_kmin = static_cast<Bytes>(static_cast<__int128>(cfg_.ecn_kmin_ps) * p.rate_bps / 8 / engine::kPsPerSec);
    p.ecn_kmax = static_cast<Bytes>(static_cast<__int128>(cfg_.ecn_kmax_ps) * p.rate_bps / 8 / engine::kPsPerSec);
    if (lossless_) {
      // PFC headroom: bytes that can still arrive after XOFF is decided: the pause frame's
      // flight, the wire in both directions, the peer's latency and one frame in service at
      // each end.
      const SimTime reaction = 2 * p.prop_ps + nodes_[p.peer].latency_ps;
      const Bytes headroom = static_cast<Bytes>(static_cast<__int128>(reaction) * p.rate_bps / 8 / engine::kPsPerSec) + 2 * mtu_;
      const Bytes xoff = std::max<Bytes>(
          mtu_, static_cast<Bytes>(static_cast<__int128>(cfg_.pfc_xoff_ps) * p.rate_bps / 8 / engine::kPsPerSec));
      p.xoff = std::min(xoff, p.buffer_bytes - headroom);
      RF_CHECK(p.xoff >= mtu_ || nodes_[p.peer].kind == NodeKind::Gpu, "link ", p.link, ": buffer ",
               p.buffer_bytes, " B leaves no room for PFC headroom of ", headroom,
               " B at this rate and latency; raise buffer_bytes or run lossy");
      p.xon = std::max<Bytes>(0, p.xoff - 2 * mtu_);
    }
  }
}

void Network::rebuild_routes() {
  for (uint32_t p = 0; p < ports_.size(); ++p) routing_in_.port_up[p] = ports_[p].up;
  routes_.build(routing_in_);
}

uint32_t Network::first_port_for(uint32_t src, uint32_t dst) const {
  if (gpu_nvl_port_[src] != kNone && gpu_nvs_[src] == gpu_nvs_[dst]) return gpu_nvl_port_[src];
  return gpu_nic_port_[src];
}

uint32_t Network::append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start) {
  const uint32_t i = static_cast<uint32_t>(flows_.size());
  const uint32_t g = num_gpus();
  RF_CHECK(src < g, "flow ", i, ": src ", src, " is not a GPU (the fabric has ", g, ")");
  RF_CHECK(dst < g, "flow ", i, ": dst ", dst, " is not a GPU (the fabric has ", g, ")");
  RF_CHECK(src != dst, "flow ", i, ": src and dst are both GPU ", src);
  RF_CHECK(size >= 0, "flow ", i, ": negative size_bytes ", size);
  RF_CHECK(start >= eng_.now(), "flow ", i, ": start_ps ", start, " is in the past");
  const uint32_t fp = first_port_for(src, dst);
  RF_CHECK(fp != kNone, "flow ", i, ": GPU ", src, " has no NIC to reach GPU ", dst);
  if (fp == gpu_nic_port_[src] && gpu_attach_[src] != gpu_attach_[dst]) {
    RF_CHECK(gpu_nic_port_[dst] != kNone &&
                 routes_.distance(gpu_attach_[src], gpu_key_[dst]) != RoutingTable::kUnreachable,
             "flow ", i, ": GPU ", dst, " is unreachable from GPU ", src);
  }
  flows_.src.push_back(src);
  flows_.dst.push_back(dst);
  flows_.size_bytes.push_back(size);
  flows_.start_ps.push_back(start);
  flows_.end_ps.push_back(-1);
  flows_.delivered_bytes.push_back(0);
  flows_.sent_bytes.push_back(0);
  flows_.retransmits.push_back(0);
  flows_.nic_ready.push_back(kNever);
  flows_.sent_notified.push_back(0);
  flows_.first_port.push_back(fp);
  flows_.hash.push_back(static_cast<uint32_t>(engine::mix64(cfg_.seed * 0x9e3779b97f4a7c15ULL + i) >> 32));
  return i;
}

void Network::add_flows(const std::vector<uint32_t>& src, const std::vector<uint32_t>& dst,
                        const std::vector<Bytes>& size, const std::vector<SimTime>& start) {
  RF_CHECK(flows_.size() == 0, "flows were already added");
  const size_t f = src.size();
  RF_CHECK(dst.size() == f && size.size() == f && start.size() == f, "flow arrays have different lengths");
  for (size_t i = 0; i < f; ++i) append_flow(src[i], dst[i], size[i], start[i]);
  transport_->prepare(static_cast<uint32_t>(f));
  start_order_.resize(f);
  std::iota(start_order_.begin(), start_order_.end(), 0u);
  std::stable_sort(start_order_.begin(), start_order_.end(),
                   [&](uint32_t a, uint32_t b) { return start[a] < start[b]; });
  next_start_ = 0;
  if (f > 0) eng_.schedule(start[start_order_[0]], 0, kind_base_ + kFlowStart);
}

uint32_t Network::create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key) {
  const uint32_t f = append_flow(src, dst, size, start_ps);
  if (ecmp_key != 0) flows_.hash[f] = static_cast<uint32_t>(engine::mix64(cfg_.seed ^ engine::mix64(ecmp_key)) >> 32);
  transport_->prepare(static_cast<uint32_t>(flows_.size()));
  eng_.schedule(start_ps, f, kind_base_ + kStartOne);
  return f;
}

void Network::start_one(uint32_t f) {
  if (flows_.size_bytes[f] == 0) {
    complete_flow(f);
  } else {
    transport_->start_flow(f);
  }
}

void Network::schedule_link_state(uint32_t link, SimTime t, bool up) {
  RF_CHECK(link < num_links(), "link ", link, " does not exist (the fabric has ", num_links(), ")");
  RF_CHECK(t >= eng_.now(), "link ", link, ": change at ", t, " ps is in the past (now ", eng_.now(), ")");
  link_changes_.push_back({t, link, up});
  eng_.schedule(t, static_cast<uint32_t>(link_changes_.size() - 1), kind_base_ + kLinkState);
}

void Network::start_flows() {
  const SimTime now = eng_.now();
  while (next_start_ < start_order_.size() && flows_.start_ps[start_order_[next_start_]] <= now) {
    start_one(start_order_[next_start_++]);
  }
  if (next_start_ < start_order_.size())
    eng_.schedule(flows_.start_ps[start_order_[next_start_]], 0, kind_base_ + kFlowStart);
}

void Network::activate(uint32_t flow, SimTime t) {
  const uint32_t port = flows_.first_port[flow];
  NicScheduler& s = nics_[ports_[port].nic];
  if (flows_.nic_ready[flow] == t) return;
  flows_.nic_ready[flow] = t;
  s.heap.push_back({t, nic_seq_++, flow});
  std::push_heap(s.heap.begin(), s.heap.end(), [](const auto& a, const auto& b) {
    return a.ready > b.ready || (a.ready == b.ready && a.seq > b.seq);
  });
  try_transmit(port);
}

uint32_t Network::pull_nic(uint32_t port) {
  NicScheduler& s = nics_[ports_[port].nic];
  if (s.heap.empty()) return kNone;
  const auto later = [](const NicScheduler::Entry& a, const NicScheduler::Entry& b) {
    return a.ready > b.ready || (a.ready == b.ready && a.seq > b.seq);
  };
  const SimTime now = eng_.now();
  // Skip slots superseded by a later activate() of the same flow.
  while (!s.heap.empty() && s.heap.front().ready != flows_.nic_ready[s.heap.front().flow]) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    s.heap.pop_back();
  }
  if (s.heap.empty()) return kNone;
  const NicScheduler::Entry top = s.heap.front();
  if (top.ready > now) {
    if (top.ready < s.wake_at) {
      s.wake_at = top.ready;
      eng_.schedule(top.ready, port, kind_base_ + kWake);
    }
    return kNone;
  }
  std::pop_heap(s.heap.begin(), s.heap.end(), later);
  s.heap.pop_back();
  const uint32_t pkt = pool_.alloc();
  Packet& p = pool_[pkt];
  p.flow = top.flow;
  p.src = flows_.src[top.flow];
  p.dst = flows_.dst[top.flow];
  p.port = kNone;
  p.proto = 0;
  p.ecn = 0;
  p.hops = 0;
  p.sent_ps = now;
  flows_.nic_ready[top.flow] = kNever;
  const SimTime next = transport_->next_packet(top.flow, p);
  ++counters_.packets;
  if (next != kNever && flows_.nic_ready[top.flow] == kNever) {
    flows_.nic_ready[top.flow] = std::max(next, now);
    s.heap.push_back({flows_.nic_ready[top.flow], nic_seq_++, top.flow});
    std::push_heap(s.heap.begin(), s.heap.end(), later);
  }
  if (!flows_.sent_notified[top.flow] && flows_.sent_bytes[top.flow] >= flows_.size_bytes[top.flow]) {
    flows_.sent_notified[top.flow] = 1;  // its last new byte is in the frame leaving now
    if (observer_ != nullptr) observer_->on_flow_sent(top.flow);
  }
  return pkt;
}

uint32_t Network::pop_queue(Port& pt) {
  const uint32_t pkt = pt.head;
  Packet& p = pool_[pkt];
  pt.head = p.next;
  if (pt.head == kNone) pt.tail = kNone;
  pt.queued_bytes -= p.size_bytes;
  return pkt;
}

void Network::try_transmit(uint32_t port) {
  Port& pt = ports_[port];
  if (pt.paused || !pt.up) return;
  const SimTime now = eng_.now();
  if (pt.busy_until > now) {
    schedule_tx_done(port);
    return;
  }
  uint32_t pkt = kNone;
  if (pt.head != kNone) {
    pkt = pop_queue(pt);
    mark_ecn(pt, pool_[pkt]);
  } else if (pt.nic >= 0) {
    pkt = pull_nic(port);
  }
  if (pkt == kNone) return;
  transmit(port, pkt);
  if (pt.head != kNone || (pt.nic >= 0 && !nics_[pt.nic].heap.empty())) schedule_tx_done(port);
}

void Network::schedule_tx_done(uint32_t port) {
  Port& pt = ports_[port];
  if (pt.tx_event_at == pt.busy_until) return;  // already pending for this frame
  pt.tx_event_at = pt.busy_until;
  eng_.schedule(pt.busy_until, port, kind_base_ + kTxDone);
}

void Network::transmit(uint32_t port, uint32_t pkt) {
  Port& pt = ports_[port];
  Packet& p = pool_[pkt];
  const SimTime now = eng_.now();
  if (p.port != kNone) {
    // The frame leaves the node it arrived at: release its ingress (PFC) accounting.
    Port& in = ports_[p.port];
    in.ingress_bytes -= p.size_bytes;
    if (in.pause_sent && in.ingress_bytes <= in.xon) {
      in.pause_sent = false;
      eng_.schedule(now + in.prop_ps, p.port, kind_base_ + kResume);
    }
  }
  const SimTime ser = serialization_time(p.size_bytes, pt.rate_bps);
  p.port = port;
  pt.busy_until = now + ser;
  pt.busy_ps += ser;
  pt.tx_bytes += p.size_bytes;
  ++pt.tx_packets;
  eng_.schedule(now + ser + pt.delay_ps, pkt, kind_base_ + kArrive);
}

void Network::mark_ecn(Port& pt, Packet& p) {
  // RED-style marking on dequeue, on the bytes still queued behind the departing frame:
  // the mark then reflects the queue now, not the queue the frame joined, so feedback is
  // not delayed by the queueing itself (as in DCQCN switches and HPCC's ns-3 model).
  const Bytes q = pt.queued_bytes;
  if (q <= pt.ecn_kmin || p.ecn) return;
  bool mark = q >= pt.ecn_kmax;
  if (!mark) {
    const double prob = ecn_pmax_ * static_cast<double>(q - pt.ecn_kmin) /
                        static_cast<double>(pt.ecn_kmax - pt.ecn_kmin);
    mark = rng_.uniform() < prob;
  }
  if (mark) {
    p.ecn = 1;
    ++pt.ecn_marks;
    ++counters_.ecn_marks;
  }
}

void Network::drop(uint32_t pkt, uint64_t& reason) {
  ++reason;
  ++counters_.drops;
  pool_.release(pkt);
}

void Network::enqueue(uint32_t port, uint32_t pkt) {
  Port& pt = ports_[port];
  Packet& p = pool_[pkt];
  if (!pt.up) {
    ++pt.drops;
    drop(pkt, counters_.link_down_drops);
    return;
  }
  if (!lossless_ && pt.queued_bytes + p.size_bytes > pt.buffer_bytes) {
    ++pt.drops;
    drop(pkt, counters_.overflow_drops);
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
  try_transmit(port);
}

uint32_t Network::route(uint32_t node, const Packet& p) const {
  const uint32_t d = p.dst;
  if (node == gpu_attach_[d]) return gpu_attach_in_[d];
  if (node == gpu_nvs_[d]) return gpu_nvs_in_[d];
  if (gpu_key_[d] == kNone) return kNone;
  uint32_t count = 0;
  const uint32_t* hops = routes_.next_hops(node, gpu_key_[d], &count);
  if (count <= 1) return count ? hops[0] : kNone;
  if (cfg_.ecmp_dmodk) {
    uint64_t digit = p.dst;
    for (uint32_t h = 1; h < p.hops; ++h) digit /= count;
    return hops[digit % count];
  }
  if (cfg_.ecmp_adaptive) {
    // least loaded eligible port: bytes queued plus the frame in service; ties by a
    // per-packet rotation so equal ports share the load
    const uint32_t start = static_cast<uint32_t>(engine::mix64((uint64_t{p.flow} << 32) ^ p.seq ^ node)) % count;
    uint32_t best = hops[start];
    Bytes best_load = ports_[best].queued_bytes + (ports_[best].busy_until > eng_.now() ? 1 : 0);
    for (uint32_t k = 1; k < count; ++k) {
      const uint32_t cand = hops[(start + k) % count];
      const Bytes load = ports_[cand].queued_bytes + (ports_[cand].busy_until > eng_.now() ? 1 : 0) +
                         (ports_[cand].paused ? (Bytes{1} << 40) : 0);
      if (load < best_load) {
        best = cand;
        best_load = load;
      }
    }
    return best;
  }
  uint64_t h;
  if (cfg_.ecmp_per_packet) {
    h = engine::mix64(static_cast<uint64_t>(flows_.hash[p.flow]) << 32 ^ p.seq ^ (uint64_t{node} << 20));
  } else {
    h = engine::mix64((static_cast<uint64_t>(flows_.hash[p.flow]) << 32) | node);
  }
  return hops[((h & 0xffffffffULL) * count) >> 32];
}

void Network::arrive(uint32_t pkt) {
  Packet& p = pool_[pkt];
  Port& in = ports_[p.port];
  ++counters_.packet_hops;
  ++p.hops;
  if (!in.up) {
    drop(pkt, counters_.link_down_drops);
    return;
  }
  const uint32_t node = in.peer;
  const Node& nd = nodes_[node];
  if (nd.gpu >= 0) {
    if (static_cast<uint32_t>(nd.gpu) == p.dst) {
      ++counters_.packets_delivered;
      transport_->receive(p);
      pool_.release(pkt);
    } else {
      drop(pkt, counters_.no_route_drops);
    }
    return;
  }
  const uint32_t out = route(node, p);
  if (out == kNone) {
    drop(pkt, counters_.no_route_drops);
    return;
  }
  in.ingress_bytes += p.size_bytes;
  if (in.ingress_bytes > in.max_ingress_bytes) in.max_ingress_bytes = in.ingress_bytes;
  if (lossless_ && !in.pause_sent && in.ingress_bytes > in.xoff) {
    in.pause_sent = true;
    ++in.pauses;
    ++counters_.pauses;
    eng_.schedule(eng_.now() + in.prop_ps, p.port, kind_base_ + kPause);
  }
  enqueue(out, pkt);
}

uint32_t Network::send_control(uint32_t flow, uint32_t src, uint32_t dst, uint8_t type) {
  const uint32_t pkt = pool_.alloc();
  Packet& p = pool_[pkt];
  p.flow = flow;
  p.src = src;
  p.dst = dst;
  p.size_bytes = static_cast<uint32_t>(cfg_.control_bytes);
  p.payload_bytes = 0;
  p.port = kNone;
  p.seq = 0;
  p.proto = 0;
  p.type = type;
  p.ecn = 0;
  p.hops = 0;
  p.aux = 0;
  p.hdr = 0;
  p.sent_ps = eng_.now();
  ++counters_.packets;
  return pkt;
}

void Network::send_packet(uint32_t pkt) {
  const Packet& p = pool_[pkt];
  const uint32_t port = first_port_for(p.src, p.dst);
  if (port == kNone) {
    drop(pkt, counters_.no_route_drops);
    return;
  }
  enqueue(port, pkt);
}

void Network::complete_flow(uint32_t flow) {
  flows_.end_ps[flow] = eng_.now();
  ++counters_.flows_done;
  if (!flows_.sent_notified[flow]) {
    flows_.sent_notified[flow] = 1;
    if (observer_ != nullptr) observer_->on_flow_sent(flow);
  }
  if (observer_ != nullptr) observer_->on_flow_done(flow);
}

void Network::set_link_state(uint32_t link, bool up) {
  const uint32_t a = 2 * link, b = 2 * link + 1;
  if (ports_[a].up == up) return;
  for (const uint32_t p : {a, b}) {
    ports_[p].up = up;
    if (!up) ports_[p].paused = false;
  }
  rebuild_routes();
  if (up) {
    try_transmit(a);
    try_transmit(b);
    return;
  }
  // Frames queued behind a dead port: lossy fabrics drop them, lossless ones re-forward
  // them from the same node along the rebuilt tables.
  for (const uint32_t port : {a, b}) {
    Port& pt = ports_[port];
    while (pt.head != kNone) {
      const uint32_t pkt = pop_queue(pt);
      const uint32_t node = pt.node;
      const uint32_t out = nodes_[node].gpu >= 0 ? kNone : route(node, pool_[pkt]);
      if (!lossless_ || out == kNone) {
        Packet& p = pool_[pkt];
        if (p.port != kNone) ports_[p.port].ingress_bytes -= p.size_bytes;
        ++pt.drops;
        drop(pkt, counters_.link_down_drops);
      } else {
        enqueue(out, pkt);
      }
    }
  }
}

void Network::on_event(const engine::Event& ev) {
  switch (ev.kind - kind_base_) {
    case kArrive:
      arrive(ev.target);
      break;
    case kTxDone:
      if (ports_[ev.target].tx_event_at != ev.time) break;  // superseded
      ports_[ev.target].tx_event_at = -1;
      try_transmit(ev.target);
      break;
    case kPause:
      ports_[ev.target].paused = true;
      break;
    case kResume:
      ports_[ev.target].paused = false;
      try_transmit(ev.target);
      break;
    case kWake: {
      NicScheduler& s = nics_[ports_[ev.target].nic];
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
    case kLinkState: {
      const LinkChange& c = link_changes_[ev.target];
      set_link_state(c.link, c.up);
      break;
    }
    default:
      break;
  }
}

std::vector<uint32_t> Network::trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const {
  RF_CHECK(src < num_gpus() && dst < num_gpus() && src != dst, "trace_path: bad GPU pair ", src, ", ", dst);
  std::vector<uint32_t> path;
  uint32_t port = first_port_for(src, dst);
  while (port != kNone && path.size() < 64) {
    path.push_back(port);
    const uint32_t node = ports_[port].peer;
    if (nodes_[node].gpu >= 0) break;
    if (node == gpu_attach_[dst]) {
      port = gpu_attach_in_[dst];
      continue;
    }
    if (node == gpu_nvs_[dst]) {
      port = gpu_nvs_in_[dst];
      continue;
    }
    uint32_t count = 0;
    const uint32_t* hops = routes_.next_hops(node, gpu_key_[dst], &count);
    if (count == 0) {
      port = kNone;
      break;
    }
    const uint64_t h = engine::mix64((static_cast<uint64_t>(flow_hash) << 32) | node);
    port = hops[((h & 0xffffffffULL) * count) >> 32];
  }
  return path;
}

}  // namespace rfabric::net
