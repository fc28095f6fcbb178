#include "net/network.hpp"

#include <algorithm>
#include <limits>
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
  RF_CHECK(spec.link_dst.size() == m && spec.link_rate_bps.size() == m && spec.link_latency_ps.size() == m &&
               spec.link_buffer_bytes.size() == m,
           "link arrays have different lengths");
  RF_CHECK(n < kNone && 2 * m < kNone, "network too large");
  RF_CHECK(cfg.mtu_bytes >= 256 && cfg.mtu_bytes <= 65536, "mtu_bytes ", cfg.mtu_bytes,
           " is outside [256, 65536]");
  RF_CHECK(cfg.pfc_xoff_ps > 0, "pfc_xoff_ps must be positive");
  RF_CHECK(cfg.control_bytes > 0 && cfg.control_bytes <= cfg.mtu_bytes, "control_bytes ", cfg.control_bytes,
           " must be in (0, mtu_bytes]");

  host_forwarding_ = spec.host_forwarding;  // (before ports: set_peer reads it)
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
  std::vector<uint32_t> degree(n + 1, 0);
  for (size_t l = 0; l < m; ++l) {
    const uint32_t a = spec.link_src[l], b = spec.link_dst[l];
    RF_CHECK(a < n && b < n, "link ", l, ": endpoint out of range (", a, ", ", b, ")");
    RF_CHECK(a != b, "link ", l, ": connects node ", a, " to itself");
    RF_CHECK(spec.link_rate_bps[l] > 0, "link ", l, ": rate must be positive");
    RF_CHECK(spec.link_latency_ps[l] >= 0, "link ", l, ": negative latency");
    RF_CHECK(spec.link_buffer_bytes[l] >= cfg.mtu_bytes, "link ", l, ": buffer ", spec.link_buffer_bytes[l],
             " B is smaller than one MTU (", cfg.mtu_bytes, " B)");
    for (int dir = 0; dir < 2; ++dir) {
      const uint32_t id = static_cast<uint32_t>(2 * l + dir);
      Port& p = ports_[id];
      p.node = dir ? b : a;
      set_peer(p, dir ? a : b);
      p.wire_peer = p.peer;
      p.reverse = static_cast<uint32_t>(2 * l + 1 - dir);
      p.link = static_cast<uint32_t>(l);
      set_rate(p, spec.link_rate_bps[l]);
      p.prop_ps = spec.link_latency_ps[l];
      p.delay_ps = p.prop_ps + nodes_[p.peer].latency_ps;
      p.buffer_bytes = spec.link_buffer_bytes[l];
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
  pxn_ = spec.pxn;
  routing_in_.updown = spec.deadlock_free;
  routing_in_.keep_distances = host_forwarding_ && cfg_.ecmp_multipath && !spec.deadlock_free;
  auto optical_node = [&](uint32_t v) {
    return nodes_[v].kind == NodeKind::Ocs || nodes_[v].kind == NodeKind::PatchPanel;
  };
  for (Port& p : ports_) {
    p.inert = optical_node(p.node);
    p.optical = !p.inert && optical_node(p.wire_peer);
  }
  routing_in_.transit.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const NodeKind k = nodes_[i].kind;
    routing_in_.transit[i] =
        k == NodeKind::Eps || (host_forwarding_ && (k == NodeKind::Gpu || k == NodeKind::NvSwitch));
  }

  // GPUs: one NIC link (to a packet switch or an optical device) and at most one NVLink.
  const size_t g = gpu_node_.size();
  gpu_nic_port_.assign(g, kNone);
  gpu_nvl_port_.assign(g, kNone);
  gpu_attach_.assign(g, kNone);
  gpu_attach_in_.assign(g, kNone);
  gpu_nvs_.assign(g, kNone);
  gpu_nvs_in_.assign(g, kNone);
  gpu_key_.assign(g, kNone);
  gpu_local_.assign(g, 0);
  std::vector<uint32_t> key_of_node(n, kNone);
  for (uint32_t gpu = 0; gpu < g; ++gpu) {
    const Node& nd = nodes_[gpu_node_[gpu]];
    for (uint32_t a = nd.port_begin; a < nd.port_end; ++a) {
      const uint32_t p = routing_in_.adj_ports[a];
      const uint32_t peer = ports_[p].wire_peer;
      if (nodes_[peer].kind == NodeKind::NvSwitch) {
        RF_CHECK(gpu_nvl_port_[gpu] == kNone, "gpu ", gpu, " (node ", gpu_node_[gpu],
                 ") has more than one NVLink link");
        gpu_nvl_port_[gpu] = p;
        gpu_nvs_[gpu] = peer;
        gpu_nvs_in_[gpu] = ports_[p].reverse;
        continue;
      }
      RF_CHECK(gpu_nic_port_[gpu] == kNone, "gpu ", gpu, " (node ", gpu_node_[gpu],
               ") has more than one NIC link; rfabric models one NIC per GPU");
      RF_CHECK(nodes_[peer].kind == NodeKind::Eps || (optical_node(peer) && host_forwarding_), "gpu ", gpu,
               " (node ", gpu_node_[gpu], "): its NIC connects to node ", peer,
               "; a NIC connects to a packet switch, or to an optical device in a host-forwarding fabric");
      gpu_nic_port_[gpu] = p;
      if (nodes_[peer].kind == NodeKind::Eps) {
        gpu_attach_[gpu] = peer;
        gpu_attach_in_[gpu] = ports_[p].reverse;
      }
    }
    RF_CHECK(gpu_nic_port_[gpu] != kNone || gpu_nvl_port_[gpu] != kNone, "gpu ", gpu, " (node ",
             gpu_node_[gpu], ") has no links");
    // routing keys: the GPU itself when hosts forward, else the switch its NIC attaches to
    const uint32_t key_node = host_forwarding_ ? gpu_node_[gpu] : gpu_attach_[gpu];
    if (key_node != kNone) {
      if (key_of_node[key_node] == kNone) {
        key_of_node[key_node] = static_cast<uint32_t>(routing_in_.keys.size());
        routing_in_.keys.push_back(key_node);
      }
      gpu_key_[gpu] = key_of_node[key_node];
    }
    if (nd.server >= 0) {
      if (server_gpus_.size() <= static_cast<size_t>(nd.server)) server_gpus_.resize(nd.server + 1);
      gpu_local_[gpu] = static_cast<uint32_t>(server_gpus_[nd.server].size());
      server_gpus_[nd.server].push_back(gpu);
    }
  }
  build_circuits(spec);
  build_dmodk();
  leaf_gpus_.assign(n, {});
  for (uint32_t gpu = 0; gpu < g; ++gpu)
    if (gpu_attach_[gpu] != kNone) leaf_gpus_[gpu_attach_[gpu]].push_back(gpu);
  // one NIC scheduler per GPU egress port
  for (uint32_t gpu = 0; gpu < g; ++gpu) {
    for (const uint32_t p : {gpu_nic_port_[gpu], gpu_nvl_port_[gpu]}) {
      if (p == kNone) continue;
      ports_[p].nic = static_cast<int32_t>(nics_.size());
      nics_.emplace_back();
    }
  }

  // Arrivals and transmit completions, nearly every event, get handlers of their own so the
  // engine's one indirect call reaches them without the switch in on_event.
  kind_base_ = eng_.register_handler(&arrive_handler_);
  eng_.register_handler(&tx_done_handler_);
  for (uint32_t k = kTxDone + 1; k < kNumSub; ++k) eng_.register_handler(this);

  transport_ = make_transport(*this);
  header_ = cfg_.header_bytes >= 0 ? cfg_.header_bytes : transport_->header_bytes();
  RF_CHECK(header_ >= 0 && header_ < cfg_.mtu_bytes, "header_bytes ", header_,
           " must be smaller than mtu_bytes ", cfg_.mtu_bytes);
  mtu_ = cfg_.mtu_bytes;
  lossless_ = cfg_.lossless >= 0 ? cfg_.lossless != 0 : transport_->lossless();
  const Transport::EcnDefaults ecn = transport_->ecn_defaults();
  if (cfg_.ecn_kmin_ps == -1) cfg_.ecn_kmin_ps = ecn.kmin_ps;
  if (cfg_.ecn_kmax_ps == -1) cfg_.ecn_kmax_ps = ecn.kmax_ps;
  if (cfg_.ecn_pmax == -1) cfg_.ecn_pmax = ecn.pmax;
  RF_CHECK(cfg_.ecn_kmin_ps >= 0, "ecn_kmin_ps ", cfg_.ecn_kmin_ps, " is negative");
  RF_CHECK(cfg_.ecn_kmax_ps >= cfg_.ecn_kmin_ps, "ecn_kmax_ps ", cfg_.ecn_kmax_ps, " is below ecn_kmin_ps ",
           cfg_.ecn_kmin_ps, " (a threshold left at -1 is ", cfg_.transport, "'s default)");
  RF_CHECK(cfg_.ecn_pmax >= 0 && cfg_.ecn_pmax <= 1, "ecn_pmax ", cfg_.ecn_pmax, " is outside [0, 1]");
  ecn_pmax_ = cfg_.ecn_pmax;
  for (uint32_t p = 0; p < ports_.size(); ++p) set_thresholds(p);
  built_ = true;
  rebuild_routes();
}

void Network::build_dmodk() {
  const uint32_t g = num_gpus();
  dmodk_index_.assign(g, 0);
  dmodk_div_.assign(256, 1);
  // A GPU's leaf: the switch its NIC attaches to (the GPU itself when hosts forward, or when
  // its NIC ends at an optical device).
  auto leaf_of = [&](uint32_t gpu) {
    return host_forwarding_ || gpu_attach_[gpu] == kNone ? gpu_node_[gpu] : gpu_attach_[gpu];
  };
  // Leaves in the order a subnet manager numbers them: those under the same upper switches
  // (or optical devices) together, as a fat-tree's pods or a rail-aligned pod's ToRs, then
  // by their first GPU. Each leaf's GPUs in id order give their positions under it.
  std::vector<uint32_t> leaves;
  std::vector<std::vector<uint32_t>> under(nodes_.size());
  for (uint32_t gpu = 0; gpu < g; ++gpu) {
    const uint32_t l = leaf_of(gpu);
    if (under[l].empty()) leaves.push_back(l);
    under[l].push_back(gpu);
  }
  std::vector<std::vector<uint32_t>> above(nodes_.size());
  uint32_t per_leaf = 1, up = 1;
  for (const uint32_t l : leaves) {
    per_leaf = std::max<uint32_t>(per_leaf, static_cast<uint32_t>(under[l].size()));
    uint32_t links_up = 0;
    for (uint32_t a = nodes_[l].port_begin; a < nodes_[l].port_end; ++a) {
      const uint32_t w = ports_[routing_in_.adj_ports[a]].wire_peer;
      if (nodes_[w].kind == NodeKind::Gpu || nodes_[w].kind == NodeKind::NvSwitch) continue;
      above[l].push_back(w);
      ++links_up;
    }
    std::sort(above[l].begin(), above[l].end());
    above[l].erase(std::unique(above[l].begin(), above[l].end()), above[l].end());
    up = std::max(up, links_up);
  }
  std::stable_sort(leaves.begin(), leaves.end(), [&](uint32_t a, uint32_t b) {
    return above[a] != above[b] ? above[a] < above[b] : under[a].front() < under[b].front();
  });
  // (a host-forwarding fabric keys every GPU on its own: one GPU per leaf, and the next digit
  // divides by the widest fan-out instead)
  const uint32_t first = host_forwarding_ ? up : per_leaf;
  for (uint32_t r = 0; r < leaves.size(); ++r) {
    const auto& gpus = under[leaves[r]];
    for (uint32_t i = 0; i < gpus.size(); ++i) dmodk_index_[gpus[i]] = r * per_leaf + i;
  }
  // hop 0 (before any switch) and hop 1: the position under the leaf; then the leaf's rank,
  // then its rank's higher digits. Past 2^40 every digit is 0.
  for (size_t h = 2; h < dmodk_div_.size(); ++h) {
    const uint64_t d = h == 2 ? first : dmodk_div_[h - 1] * up;
    dmodk_div_[h] = std::min<uint64_t>(d, uint64_t{1} << 40);
  }
}

void Network::set_thresholds(uint32_t port) {
  Port& p = ports_[port];
  // ECN thresholds are queueing delays at the port's rate, so one setting fits all speeds.
  p.ecn_kmin =
      static_cast<Bytes>(static_cast<__int128>(cfg_.ecn_kmin_ps) * p.rate_bps / 8 / engine::kPsPerSec);
  p.ecn_kmax =
      static_cast<Bytes>(static_cast<__int128>(cfg_.ecn_kmax_ps) * p.rate_bps / 8 / engine::kPsPerSec);
  if (!lossless_ || p.inert) return;
  // PFC headroom: bytes that can still arrive after XOFF is decided: the pause frame's
  // flight, the wire in both directions, the peer's latency and one frame in service at
  // each end.
  const SimTime reaction = 2 * p.prop_ps + nodes_[p.peer].latency_ps;
  const Bytes headroom =
      static_cast<Bytes>(static_cast<__int128>(reaction) * p.rate_bps / 8 / engine::kPsPerSec) + 2 * mtu_;
  const Bytes xoff = std::max<Bytes>(
      mtu_, static_cast<Bytes>(static_cast<__int128>(cfg_.pfc_xoff_ps) * p.rate_bps / 8 / engine::kPsPerSec));
  p.xoff = std::min(xoff, p.buffer_bytes - headroom);
  RF_CHECK(p.xoff >= mtu_ || nodes_[p.peer].kind == NodeKind::Gpu, "link ", p.link, ": buffer ",
           p.buffer_bytes, " B leaves no room for PFC headroom of ", headroom,
           " B at this rate and latency; raise buffer_bytes or", " run lossy");
  p.xon = std::max<Bytes>(0, p.xoff - 2 * mtu_);
}

void Network::rebuild_routes() {
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    routing_in_.port_up[p] = ports_[p].up && !ports_[p].inert;
    routing_in_.port_peer[p] = ports_[p].peer;
    routing_in_.port_reverse[p] = ports_[p].reverse;
  }
  routing_in_.keep_order = !circuits_changed_;  // (a failure or repair keeps up*/down*'s order)
  circuits_changed_ = false;
  routes_.build(routing_in_);
  // Fast path per destination whose NIC works; traffic to a failed NIC takes route_with,
  // which spreads it over its server's other NICs frame by frame (relay_ends).
  fast_route_.assign(gpu_node_.size(), FastRoute{});
  if (host_forwarding_ || routing_in_.updown) return;
  for (uint32_t g = 0; g < gpu_node_.size(); ++g) {
    if (gpu_key_[g] == kNone || !nic_usable(g)) continue;
    fast_route_[g] = FastRoute{dmodk_index_[g], gpu_attach_[g], gpu_attach_in_[g], gpu_key_[g]};
  }
}

bool Network::nic_usable(uint32_t gpu) const {
  const uint32_t p = gpu_nic_port_[gpu];
  return p != kNone && ports_[p].up;
}

uint32_t Network::spread_nic(int32_t server, uint64_t key) const {
  if (server < 0 || static_cast<size_t>(server) >= server_gpus_.size()) return kNone;
  const auto& gpus = server_gpus_[static_cast<size_t>(server)];
  uint32_t n = 0;
  for (const uint32_t g : gpus) n += nic_usable(g);
  if (n == 0) return kNone;
  uint64_t k = key % n;
  for (const uint32_t g : gpus)
    if (nic_usable(g) && k-- == 0) return g;
  return kNone;
}

bool Network::relay_reaches(uint32_t a, uint32_t b) const {
  const uint32_t from = gpu_attach_[a];
  if (from == kNone || b == kNone || gpu_key_[b] == kNone) return false;
  if (from == gpu_attach_[b]) return true;
  uint32_t count = 0;
  routes_.next_hops(from, gpu_key_[b], &count, false);
  return count > 0;
}

uint32_t Network::pxn_gpu(uint32_t src, uint32_t dst) const {
  const int32_t ss = nodes_[gpu_node_[src]].server;
  if (ss < 0 || static_cast<size_t>(ss) >= server_gpus_.size()) return src;
  const auto& sg = server_gpus_[static_cast<size_t>(ss)];
  return sg[gpu_local_[dst] % sg.size()];
}

Network::Ends Network::relay_ends(uint32_t src, uint32_t dst, uint64_t key) const {
  const int32_t ss = nodes_[gpu_node_[src]].server, ds = nodes_[gpu_node_[dst]].server;
  if (pxn_ && ss >= 0 && ds >= 0 && static_cast<size_t>(std::max(ss, ds)) < server_gpus_.size()) {
    const auto& sg = server_gpus_[static_cast<size_t>(ss)];
    const auto& dg = server_gpus_[static_cast<size_t>(ds)];
    const uint32_t a = pxn_gpu(src, dst);
    if (nic_usable(a) && nic_usable(dst) && relay_reaches(a, dst)) return {a, dst};
    // One rail at both ends, so a fabric whose rails meet only inside servers (RFabric's
    // circuits join same-rail ToRs) still carries it: per frame, a rail whose NICs work in
    // both servers and whose switches still reach each other.
    const size_t rails = std::min(sg.size(), dg.size());
    auto ok = [&](size_t r) { return nic_usable(sg[r]) && nic_usable(dg[r]) && relay_reaches(sg[r], dg[r]); };
    uint32_t n = 0;
    for (size_t r = 0; r < rails; ++r) n += ok(r);
    if (n > 0) {
      uint64_t k = key % n;
      for (size_t r = 0; r < rails; ++r)
        if (ok(r) && k-- == 0) return {sg[r], dg[r]};
    }
  }
  // (the destination end starts from another offset, so the two ends do not move in step)
  const Ends e{nic_usable(src) ? src : spread_nic(ss, key),
               nic_usable(dst) ? dst : spread_nic(ds, key + (key >> 32))};
  if (e.a == kNone || e.b == kNone || relay_reaches(e.a, e.b)) return e;
  // Those NICs' switches no longer reach each other (a ToR cut off from the fabric): per
  // frame, a pair of working NICs of the two servers whose switches do.
  if (ss < 0 || ds < 0 || static_cast<size_t>(std::max(ss, ds)) >= server_gpus_.size()) return e;
  const auto& sg = server_gpus_[static_cast<size_t>(ss)];
  const auto& dg = server_gpus_[static_cast<size_t>(ds)];
  uint32_t n = 0;
  for (const uint32_t a : sg)
    for (const uint32_t b : dg) n += nic_usable(a) && nic_usable(b) && relay_reaches(a, b);
  if (n == 0) return e;
  uint64_t k = key % n;
  for (const uint32_t a : sg)
    for (const uint32_t b : dg)
      if (nic_usable(a) && nic_usable(b) && relay_reaches(a, b) && k-- == 0) return {a, b};
  return e;
}

uint32_t Network::first_port_for(uint32_t src, uint32_t dst, uint32_t hash) const {
  const bool same_server = gpu_nvl_port_[src] != kNone && gpu_nvs_[src] == gpu_nvs_[dst];
  if (same_server) return gpu_nvl_port_[src];
  if (host_forwarding_) {
    uint32_t count = 0;
    const uint32_t* hops = routes_.next_hops(gpu_node_[src], gpu_key_[dst], &count);
    if (count == 0) return kNone;
    return hops[((static_cast<uint64_t>(hash) & 0xffffffffULL) * count) >> 32];
  }
  // Its own NIC when every frame leaves through it (relay_ends gives a = src whatever the
  // frame), and when nothing reaches the destination (its frames wait there, unroutable,
  // instead of circling through the server); otherwise over NVLink, where the NVSwitch picks
  // each frame's NIC.
  const bool own_nic = nic_usable(src);
  if (own_nic) {
    const Ends e = relay_ends(src, dst, 0);
    const bool always =
        pxn_ ? nic_usable(dst) && pxn_gpu(src, dst) == src && relay_reaches(src, dst) : e.a == src;
    if (always || e.a == kNone || e.b == kNone || !relay_reaches(e.a, e.b)) return gpu_nic_port_[src];
  }
  if (gpu_nvl_port_[src] == kNone || spread_nic(nodes_[gpu_node_[src]].server, 0) == kNone)
    return own_nic ? gpu_nic_port_[src] : kNone;
  return gpu_nvl_port_[src];  // over NVLink to the relays' NICs (PXN, or a failed NIC)
}

uint32_t Network::append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start) {
  const uint32_t i = static_cast<uint32_t>(flows_.size());
  const uint32_t g = num_gpus();
  RF_CHECK(src < g, "flow ", i, ": src ", src, " is not a GPU (the fabric has ", g, ")");
  RF_CHECK(dst < g, "flow ", i, ": dst ", dst, " is not a GPU (the fabric has ", g, ")");
  RF_CHECK(src != dst, "flow ", i, ": src and dst are both GPU ", src);
  RF_CHECK(size >= 0, "flow ", i, ": negative size_bytes ", size);
  RF_CHECK(start >= eng_.now(), "flow ", i, ": start_ps ", start, " is in the past");
  const uint32_t hash = static_cast<uint32_t>(engine::mix64(cfg_.seed * 0x9e3779b97f4a7c15ULL + i) >> 32);
  const uint32_t fp = first_port_for(src, dst, hash);
  RF_CHECK(fp != kNone, "flow ", i, ": GPU ", dst, " is unreachable from GPU ", src);
  flows_.src.push_back(src);
  flows_.dst.push_back(dst);
  flows_.size_bytes.push_back(size);
  flows_.start_ps.push_back(start);
  flows_.end_ps.push_back(-1);
  flows_.delivered_bytes.push_back(0);
  flows_.sent_bytes.push_back(0);
  flows_.resent_bytes.push_back(0);
  flows_.duplicate_bytes.push_back(0);
  flows_.dropped_bytes.push_back(0);
  flows_.retransmits.push_back(0);
  flows_.nic_ready.push_back(kNever);
  flows_.sent_notified.push_back(0);
  flows_.first_port.push_back(fp);
  flows_.hash.push_back(hash);
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
  if (ecmp_key != 0) {
    flows_.hash[f] = static_cast<uint32_t>(engine::mix64(cfg_.seed ^ engine::mix64(ecmp_key)) >> 32);
    if (host_forwarding_) flows_.first_port[f] = first_port_for(src, dst, flows_.hash[f]);
  }
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
  std::push_heap(s.heap.begin(), s.heap.end(), NicScheduler::later);
  // Re-paced from inside this NIC's own pull (DCQCN's rate increase): the frame being pulled
  // is not on the wire yet, so the port only looks idle. try_transmit() schedules the next
  // pull from the heap once that frame is out.
  if (port == pulling_port_) return;
  try_transmit(port);
}

namespace {
/// The heap's top is still the entry we served (the transport may have pushed another).
bool h_top_is(const NicScheduler& s, const NicScheduler::Entry& e) {
  return !s.heap.empty() && s.heap.front().seq == e.seq;
}
}  // namespace

uint32_t Network::pull_nic(uint32_t port) {
  NicScheduler& s = nics_[ports_[port].nic];
  if (s.heap.empty()) return kNone;
  const auto later = NicScheduler::later;
  const SimTime now = eng_.now();
  // Skip slots superseded by a later activate() of the same flow. (A flow moved to another
  // port leaves no entry here: rehome_flows() takes them out.)
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
  pulling_port_ = port;
  const SimTime next = transport_->next_packet(top.flow, p);
  pulling_port_ = kNone;
  ++counters_.packets;
  if (next != kNever && flows_.nic_ready[top.flow] == kNever) {
    // The flow goes back in with its next slot: replace the top in place and sift it down
    // (one heap pass instead of a pop and a push).
    flows_.nic_ready[top.flow] = std::max(next, now);
    auto& h = s.heap;
    const NicScheduler::Entry e{flows_.nic_ready[top.flow], nic_seq_++, top.flow};
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
  } else {
    // Done, window-limited, or re-paced by the transport (a newer slot was pushed): the
    // entry we served leaves the heap.
    if (h_top_is(s, top)) {
      std::pop_heap(s.heap.begin(), s.heap.end(), later);
      s.heap.pop_back();
    }
  }
  if (!flows_.sent_notified[top.flow] && flows_.sent_bytes[top.flow] >= flows_.size_bytes[top.flow]) {
    flows_.sent_notified[top.flow] = 1;  // its last new byte is in the frame leaving now
    if (observer_ != nullptr) observer_->on_flow_sent(top.flow);
  }
  return pkt;
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

void Network::try_transmit(uint32_t port) {
  Port& pt = ports_[port];
  if (pt.stopped) return;  // paused or down
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
  if (pt.head != kNone) {
    schedule_tx_done(port);
  } else if (pt.nic >= 0) {
    schedule_nic_pull(port);
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
  const NicScheduler& s = nics_[pt.nic];
  if (s.heap.empty()) return;
  schedule_tx_done(port, std::max(pt.busy_until, s.heap.front().ready));
}

void Network::transmit(uint32_t port, uint32_t pkt) {
  const Packet& p = pool_[pkt];
  if (p.port != kNone) {
    // The frame leaves the node it arrived at: release its ingress (PFC) accounting.
    Port& in = ports_[p.port];
    in.ingress_bytes -= p.size_bytes;
    RF_DCHECK(in.ingress_bytes >= 0);
    if (in.pause_sent && in.ingress_bytes <= in.xon) {
      in.pause_sent = false;
      eng_.schedule(eng_.now() + in.prop_ps, p.port, kind_base_ + kResume);
    }
  }
  put_on_wire(port, pkt);
}

void Network::put_on_wire(uint32_t port, uint32_t pkt) {
  Port& pt = ports_[port];
  Packet& p = pool_[pkt];
  const SimTime now = eng_.now();
  // INVARIANT: nothing is put on a channel that is down or dark (a failed link, or a circuit
  // chain without light). The frame carries the channel's generation, odd only while it is
  // up; arrive() counts even ones (dark_transmits, tested to stay zero).
  // (exact either way: a whole number of ps per byte, or the rounded-up division)
  const SimTime ser =
      pt.ps_per_byte ? p.size_bytes * pt.ps_per_byte : serialization_time(p.size_bytes, pt.rate_bps);
  p.port = port;
  p.chan_gen = pt.gen;
  counters_.busy_starts += pt.busy_until > now;  // INVARIANT: one frame at a time per port
  RF_DCHECK(pt.busy_until <= now && !pt.inert && p.size_bytes > 0);
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
    const double prob =
        ecn_pmax_ * static_cast<double>(q - pt.ecn_kmin) / static_cast<double>(pt.ecn_kmax - pt.ecn_kmin);
    mark = rng_.uniform() < prob;
  }
  if (mark) {
    p.ecn = 1;
    ++pt.ecn_marks;
    ++counters_.ecn_marks;
  }
}

uint32_t Network::route_cold(uint32_t node, const Packet& p) const { return route(node, p); }

void Network::enqueue_cold(uint32_t port, uint32_t pkt) { enqueue(port, pkt); }
uint32_t Network::pop_queue_cold(Port& pt) { return pop_queue(pt); }

void Network::drop(uint32_t pkt, uint64_t& reason) {
  const Packet& p = pool_[pkt];
  flows_.dropped_bytes[p.flow] += p.payload_bytes;
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
  if (pt.head == kNone && !pt.stopped && pt.busy_until <= eng_.now()) {
    // Idle port, empty queue: the frame goes straight onto the wire (what try_transmit would
    // do after queueing it), without waiting in the queue.
    transmit(port, pkt);
    if (pt.nic >= 0) schedule_nic_pull(port);
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
  return route(node, nodes_[node].kind == NodeKind::Eps, p);
}

uint32_t Network::route(uint32_t node, bool eps, const Packet& p) const {
  // Fast path: a packet switch of a fabric without host forwarding or up*/down*, toward a
  // GPU whose delivery GPU (itself, or a relay when its NIC failed) was set at the last
  // topology change. Everything else takes route_with.
  const FastRoute& fr = fast_route_[p.dst];
  if (fr.index != kNone && eps) {
    if (node == fr.attach) return fr.attach_in;
    uint32_t count = 0;
    const uint32_t* hops = routes_.shortest_hops(node, fr.key, &count);
    if (count <= 1) return count ? hops[0] : kNone;
    if (cfg_.ecmp_dmodk) return hops[(fr.index / dmodk_div_[p.hops]) % count];
  }
  const bool descending =
      routing_in_.updown && p.port != kNone && routes_.descends(ports_[p.port].node, node);
  return route_with(node, p.src, p.dst, flows_.hash[p.flow], p.seq, p.hops, p.flow, descending,
                    p.port != kNone ? ports_[p.port].node : kNone);
}

uint32_t Network::route_with(uint32_t node, uint32_t src, uint32_t d, uint32_t hash, uint32_t seq,
                             uint32_t hops_so_far, uint32_t flow, bool descending, uint32_t from) const {
  if (node == gpu_nvs_[d]) return gpu_nvs_in_[d];  // the destination's own NVSwitch
  const uint32_t dst = d;
  uint32_t count = 0;
  const uint32_t* hops = nullptr;
  if (!host_forwarding_) {
    if (node == gpu_attach_[d] && ports_[gpu_attach_in_[d]].up) return gpu_attach_in_[d];
    const Node& nd = nodes_[node];
    if (nd.gpu >= 0) {
      // A relay GPU: a frame from its NVSwitch leaves through its NIC; one from the network
      // (into the destination's server, or escaping a rail that no longer reaches it) goes
      // into the server. (Back into the server too when its NIC has just failed.)
      const uint32_t g = static_cast<uint32_t>(nd.gpu);
      const bool from_server = from != kNone && from == gpu_nvs_[g];
      if (gpu_nvs_[g] == gpu_nvs_[d] || !nic_usable(g) || !from_server) return gpu_nvl_port_[g];
      return gpu_nic_port_[g];
    }
    // Which NICs this frame leaves and enters servers by: every node computes the same. Frame
    // by frame under PFC (RoCE NICs take frames of a message in any order), round-robin by
    // sequence number from a per-flow offset, so even a 29-frame message spreads evenly
    // (hashing each frame left the same lumps on the same NICs at every step of a ring: a
    // connection keeps its hash); per flow on a lossy fabric, whose TCP-like transport would
    // read the reordering as loss.
    const uint64_t key = engine::mix64(hash) + (lossless_ ? seq : 0u);
    const Ends e = relay_ends(src, d, key);
    if (nd.kind == NodeKind::NvSwitch) {
      if (node == gpu_nvs_[src]) return e.a == kNone ? kNone : gpu_nvs_in_[e.a];
      // a third server, where a frame escaped a switch that no longer reaches b: out again
      // on b's rail (PXN), else through any NIC whose switch reaches b
      const int32_t x = nd.server;
      if (e.b == kNone || x < 0 || static_cast<size_t>(x) >= server_gpus_.size()) return kNone;
      const auto& xg = server_gpus_[static_cast<size_t>(x)];
      const uint32_t rail = xg[gpu_local_[e.b] % xg.size()];
      if (pxn_ && nic_usable(rail) && relay_reaches(rail, e.b)) return gpu_nvs_in_[rail];
      uint32_t n = 0;
      for (const uint32_t g : xg) n += nic_usable(g) && relay_reaches(g, e.b);
      if (n == 0) return kNone;
      uint64_t k = key % n;
      for (const uint32_t g : xg)
        if (nic_usable(g) && relay_reaches(g, e.b) && k-- == 0) return gpu_nvs_in_[g];
      return kNone;
    }
    if (e.b == kNone || gpu_key_[e.b] == kNone) return kNone;
    if (e.b != d) {  // into the destination's server through another GPU's NIC, then NVLink
      if (node == gpu_attach_[e.b]) return gpu_attach_in_[e.b];
      d = e.b;
    }
    hops = routes_.next_hops(node, gpu_key_[d], &count, descending);
    if (count == 0) {
      // No way on to b from here: this part of the fabric no longer reaches it (with PXN, a
      // rail whose NIC failed at the destination: RFabric's circuits join no other rail), or,
      // under up*/down*, no way further down after the tables changed under the frame.
      const bool way = e.a != kNone && relay_reaches(e.a, e.b);
      // Back to the source server's GPU that put it on this rail, which relays it again over
      // `a`, whose switch does reach b (with no such `a` it waits here: no frame circles).
      if (way)
        for (const uint32_t x : {pxn_ ? pxn_gpu(src, dst) : src, src}) {
          if (!nic_usable(x) || gpu_key_[x] == kNone) continue;
          if (node == gpu_attach_[x]) return gpu_attach_in_[x];
          hops = routes_.next_hops(node, gpu_key_[x], &count, descending);
          if (count > 0) {
            d = x;
            break;
          }
        }
      // Else into a server below this switch, whose NVSwitch sends it on through a NIC whose
      // switch reaches b. Servers relay without PFC, so the detour closes no buffer cycle.
      if (count == 0 && way)
        for (const uint32_t g : leaf_gpus_[node])
          if (gpu_nvl_port_[g] != kNone && ports_[gpu_attach_in_[g]].up) return gpu_attach_in_[g];
      // Else (no server below) climb again: the one turn up*/down* forbids, taken only by
      // frames caught by a change.
      if (count == 0 && descending) hops = routes_.next_hops(node, gpu_key_[d], &count, false);
    }
  } else {
    if (cfg_.ecmp_multipath) {
      const uint32_t out = route_multipath(node, src, d, hops_so_far, flow, seq, from);
      if (out != kNone) return out;
    }
    hops = routes_.next_hops(node, gpu_key_[d], &count, descending);
  }
  if (count <= 1) return count ? hops[0] : kNone;
  if (cfg_.ecmp_dmodk) return hops[(dmodk_index_[d] / dmodk_div_[hops_so_far & 0xff]) % count];
  if (cfg_.ecmp_adaptive) {
    // least loaded eligible port: bytes queued plus the frame in service; ties by a
    // per-packet rotation so equal ports share the load
    const uint32_t start = static_cast<uint32_t>(engine::mix64((uint64_t{flow} << 32) ^ seq ^ node)) % count;
    uint32_t best = hops[start];
    Bytes best_load = ports_[best].queued_bytes + (ports_[best].busy_until > eng_.now() ? 1 : 0) +
                      (ports_[best].paused ? (Bytes{1} << 40) : 0);
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
    h = engine::mix64(static_cast<uint64_t>(hash) << 32 ^ seq ^ (uint64_t{node} << 20));
  } else {
    h = engine::mix64((static_cast<uint64_t>(hash) << 32) | node);
  }
  return hops[((h & 0xffffffffULL) * count) >> 32];
}

uint32_t Network::route_multipath(uint32_t node, uint32_t src, uint32_t d, uint32_t hops, uint32_t flow,
                                  uint32_t seq, uint32_t from) const {
  // Loop-free by budget: a frame may take at most kMultipathSlack hops more than the shortest
  // path from its source; a longer hop spends budget, a shortest-path hop keeps it, so every
  // frame arrives within d0 + slack hops.
  const uint32_t key = gpu_key_[d];
  const uint32_t d0 = routes_.distance(gpu_node_[src], key);
  if (d0 == RoutingTable::kUnreachable) return kNone;
  const uint32_t budget = d0 + kMultipathSlack;
  const Node& nd = nodes_[node];
  if (nd.gpu >= 0) {
    // sent here by its NVSwitch: out of its NIC while that fits the budget
    const uint32_t g = static_cast<uint32_t>(nd.gpu);
    if (from != gpu_nvs_[g] || !nic_usable(g)) return kNone;
    const uint32_t dm = routes_.distance(ports_[gpu_nic_port_[g]].peer, key);
    return dm != RoutingTable::kUnreachable && hops + 1 + dm <= budget ? gpu_nic_port_[g] : kNone;
  }
  if (nd.kind != NodeKind::NvSwitch || nd.server < 0) return kNone;
  // The NVSwitch spreads over its server's NICs whose paths fit the budget: the least loaded
  // NIC (queued bytes, the frame in service, a PAUSE) weighted by the hops left, UGAL-style,
  // so a longer path must be that much less loaded; the load counts from 8 frames, so a NIC
  // busy with a frame or two does not send traffic the long way round.
  const auto& gpus = server_gpus_[static_cast<size_t>(nd.server)];
  const uint32_t m = static_cast<uint32_t>(gpus.size());
  const uint32_t start = static_cast<uint32_t>(engine::mix64((uint64_t{flow} << 32) ^ seq ^ node) % m);
  const SimTime now = eng_.now();
  uint32_t best = kNone;
  __int128 best_score = 0;
  for (uint32_t i = 0; i < m; ++i) {
    const uint32_t g = gpus[(start + i) % m];
    if (!nic_usable(g)) continue;
    const Port& nic = ports_[gpu_nic_port_[g]];
    const uint32_t dm = routes_.distance(nic.peer, key);
    if (dm == RoutingTable::kUnreachable || hops + 2 + dm > budget) continue;
    const Bytes load = ports_[gpu_nvs_in_[g]].queued_bytes + nic.queued_bytes +
                       (nic.busy_until > now ? mtu_ : 0) + (nic.paused ? (Bytes{1} << 40) : 0) + 8 * mtu_;
    const __int128 score = static_cast<__int128>(load) * (2 + dm);
    if (best == kNone || score < best_score) best = g, best_score = score;
  }
  return best == kNone ? kNone : gpu_nvs_in_[best];
}

void Network::arrive(uint32_t pkt) {
  Packet& p = pool_[pkt];
  Port& in = ports_[p.port];
  p.hops += in.hop_step;
  if (p.chan_gen != in.live_gen) [[unlikely]] {
    arrive_on_changed_channel(pkt);
    return;
  }
  const uint32_t node = in.peer;
  if (static_cast<uint32_t>(in.peer_gpu) == p.dst) {  // (-1 for non-GPU nodes never matches)
    ++counters_.packets_delivered;
    transport_->receive(p);
    pool_.release(pkt);
    return;
  }
  // (After a change of tables a frame may be sent back the way it came: that is its new
  // path, not a loop, since one consistent table set has none.)
  const uint32_t out = route(node, in.peer_eps, p);
  if (out == kNone) [[unlikely]] {
    arrive_without_route(pkt, node);
    return;
  }
  const Bytes ingress = count_ingress(in, p);
  Port& o = ports_[out];
  if (o.head == kNone && !o.stopped && o.busy_until <= eng_.now()) {
    // Straight through an idle port: the frame's ingress bytes come and go in the same
    // instant, so they are counted (peak, PAUSE) but never stored and released. (A RESUME
    // cannot be due: while PAUSE is on, ingress stays above XON.)
    put_on_wire(out, pkt);
    if (o.nic >= 0) schedule_nic_pull(out);
    return;
  }
  in.ingress_bytes = ingress;
  enqueue(out, pkt);
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
  hold(node, pkt);  // lossless and no route now: wait here for the topology to change
}

void Network::send_pause(uint32_t port) {
  Port& in = ports_[port];
  in.pause_sent = true;
  ++in.pauses;
  ++counters_.pauses;
  eng_.schedule(eng_.now() + in.prop_ps, port, kind_base_ + kPause);
}

void Network::arrive_on_changed_channel(uint32_t pkt) {
  // The channel changed while the frame was on it: a failed link or a circuit gone dark.
  Packet& p = pool_[pkt];
  const Port& in = ports_[p.port];
  if ((p.chan_gen & 1u) == 0) ++counters_.dark_transmits;  // sent while its channel was down
  if (!lossless_ || in.inert) {
    drop(pkt, in.optical ? counters_.circuit_drops : counters_.link_down_drops);
    return;
  }
  // Lossless: held back at the sender and re-forwarded along the current tables.
  ++counters_.circuit_reroutes;
  const uint32_t back = in.node;
  p.port = kNone;  // it left the sender's ingress accounting when it was sent
  p.hops -= in.hop_step;
  const uint32_t out = nodes_[back].gpu >= 0 && static_cast<uint32_t>(nodes_[back].gpu) == p.src
                           ? first_port_for(p.src, p.dst, flows_.hash[p.flow])
                           : route(back, p);
  if (out == kNone || !ports_[out].up) {
    hold(back, pkt);  // no way on yet: wait at the sender for the next change
    return;
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
  p.chan_gen = 0;
  p.hdr = 0;
  p.sent_ps = eng_.now();
  ++counters_.packets;
  return pkt;
}

void Network::send_packet(uint32_t pkt) {
  const Packet& p = pool_[pkt];
  const uint32_t port = first_port_for(p.src, p.dst, flows_.hash[p.flow]);
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
  if (ports_[a].link_up == up) return;
  ports_[a].link_up = ports_[b].link_up = up;
  topology_changed();
}

void Network::on_event(const engine::Event& ev) {
  switch (ev.kind - kind_base_) {
    // (kArrive and kTxDone reach arrive_handler_ and tx_done_handler_, not this switch)
    case kPause:
      set_paused(ports_[ev.target], true);
      break;
    case kResume:
      set_paused(ports_[ev.target], false);
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
    case kPlan:
      apply_plan(ev.target);
      break;
    case kLight:
      light(ev.target);
      break;
    default:
      break;
  }
}

std::vector<Bytes> Network::payload_in_flight() const {
  std::vector<Bytes> out(flows_.size(), 0);
  pool_.for_each_live([&](const Packet& p) { out[p.flow] += p.payload_bytes; });
  return out;
}

std::pair<SimTime, BitsPerSec> Network::path_cost(uint32_t src, uint32_t dst) const {
  SimTime latency = 0;
  BitsPerSec rate = std::numeric_limits<BitsPerSec>::max();
  for (const uint32_t p : trace_path(src, dst, 0)) {
    latency += ports_[p].delay_ps;
    rate = std::min(rate, ports_[p].rate_bps);
  }
  return {latency, rate};
}

std::vector<uint32_t> Network::trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const {
  RF_CHECK(src < num_gpus() && dst < num_gpus() && src != dst, "trace_path: bad GPU pair ", src, ", ", dst);
  std::vector<uint32_t> path;
  uint32_t port = first_port_for(src, dst, flow_hash);
  uint32_t hops = 0;
  while (port != kNone && path.size() < 64) {
    path.push_back(port);
    hops += ports_[port].hop_step;
    const uint32_t node = ports_[port].peer;
    if (nodes_[node].gpu >= 0 && static_cast<uint32_t>(nodes_[node].gpu) == dst) break;
    const bool descending = routing_in_.updown && routes_.descends(ports_[port].node, node);
    const uint32_t next = route_with(node, src, dst, flow_hash, 0, hops, 0, descending, ports_[port].node);
    if (next == kNone || next == ports_[port].reverse) break;
    port = next;
  }
  return path;
}

}  // namespace rfabric::net
