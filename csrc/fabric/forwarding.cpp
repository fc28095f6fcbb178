// forwarding.cpp: building the topology a Forwarding answers from, resolving channels
// through circuit chains, and the relay and first-hop choices (see forwarding.hpp).
#include "fabric/forwarding.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

namespace rfabric::net {

namespace {
bool is_optical(NodeKind k) { return k == NodeKind::Ocs || k == NodeKind::PatchPanel; }
}  // namespace

Forwarding::Forwarding(const NetworkSpec& spec, const EngineConfig& cfg)
    : host_forwarding_(spec.host_forwarding),
      pxn_(spec.pxn),
      dmodk_(cfg.ecmp_dmodk),
      adaptive_(cfg.ecmp_adaptive),
      per_packet_(cfg.ecmp_per_packet),
      multipath_(cfg.ecmp_multipath),
      per_frame_relays_(cfg.lossless != 0),
      mtu_(cfg.mtu_bytes) {
  const size_t n = spec.node_kind.size();
  const size_t m = spec.link_src.size();
  RF_CHECK(spec.node_server.size() == n && spec.node_latency_ps.size() == n,
           "node arrays have different lengths");
  RF_CHECK(spec.link_dst.size() == m && spec.link_rate_bps.size() == m && spec.link_latency_ps.size() == m &&
               spec.link_buffer_bytes.size() == m,
           "link arrays have different lengths");
  RF_CHECK(n < kNone && 2 * m < kNone, "network too large");

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

  channels_.resize(2 * m);
  link_up_.assign(m, 1);
  link_prop_.resize(m);
  link_rate_.resize(m);
  std::vector<uint32_t> degree(n + 1, 0);
  for (size_t l = 0; l < m; ++l) {
    const uint32_t a = spec.link_src[l], b = spec.link_dst[l];
    RF_CHECK(a < n && b < n, "link ", l, ": endpoint out of range (", a, ", ", b, ")");
    RF_CHECK(a != b, "link ", l, ": connects node ", a, " to itself");
    RF_CHECK(spec.link_rate_bps[l] > 0, "link ", l, ": rate must be positive");
    RF_CHECK(spec.link_latency_ps[l] >= 0, "link ", l, ": negative latency");
    link_prop_[l] = spec.link_latency_ps[l];
    link_rate_[l] = spec.link_rate_bps[l];
    for (int dir = 0; dir < 2; ++dir) {
      const uint32_t id = static_cast<uint32_t>(2 * l + dir);
      Channel& c = channels_[id];
      c.node = dir ? b : a;
      c.wire_peer = c.peer = dir ? a : b;
      c.reverse = static_cast<uint32_t>(2 * l + 1 - dir);
      c.link = static_cast<uint32_t>(l);
      c.prop_ps = spec.link_latency_ps[l];
      c.rate_bps = spec.link_rate_bps[l];
      ++degree[c.node];
    }
  }

  // adjacency (CSR) for routing
  routing_in_.num_nodes = static_cast<uint32_t>(n);
  routing_in_.adj_begin.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) routing_in_.adj_begin[i + 1] = routing_in_.adj_begin[i] + degree[i];
  routing_in_.adj_ports.resize(2 * m);
  {
    std::vector<uint32_t> fill(routing_in_.adj_begin.begin(), routing_in_.adj_begin.end() - 1);
    for (uint32_t p = 0; p < 2 * m; ++p) routing_in_.adj_ports[fill[channels_[p].node]++] = p;
  }
  for (size_t i = 0; i < n; ++i) {
    nodes_[i].port_begin = routing_in_.adj_begin[i];
    nodes_[i].port_end = routing_in_.adj_begin[i + 1];
  }
  routing_in_.port_peer.resize(2 * m);
  routing_in_.port_reverse.resize(2 * m);
  routing_in_.port_up.assign(2 * m, 1);
  routing_in_.updown = spec.deadlock_free;
  routing_in_.keep_distances = host_forwarding_ && cfg.ecmp_multipath && !spec.deadlock_free;
  for (Channel& c : channels_) {
    c.inert = is_optical(nodes_[c.node].kind);
    c.optical = !c.inert && is_optical(nodes_[c.wire_peer].kind);
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
      const uint32_t peer = channels_[p].wire_peer;
      if (nodes_[peer].kind == NodeKind::NvSwitch) {
        RF_CHECK(gpu_nvl_port_[gpu] == kNone, "gpu ", gpu, " (node ", gpu_node_[gpu],
                 ") has more than one NVLink link");
        gpu_nvl_port_[gpu] = p;
        gpu_nvs_[gpu] = peer;
        gpu_nvs_in_[gpu] = channels_[p].reverse;
        continue;
      }
      RF_CHECK(gpu_nic_port_[gpu] == kNone, "gpu ", gpu, " (node ", gpu_node_[gpu],
               ") has more than one NIC link; rfabric models one NIC per GPU");
      RF_CHECK(nodes_[peer].kind == NodeKind::Eps || (is_optical(nodes_[peer].kind) && host_forwarding_),
               "gpu ", gpu, " (node ", gpu_node_[gpu], "): its NIC connects to node ", peer,
               "; a NIC connects to a packet switch, or to an optical device in a host-forwarding fabric");
      gpu_nic_port_[gpu] = p;
      if (nodes_[peer].kind == NodeKind::Eps) {
        gpu_attach_[gpu] = peer;
        gpu_attach_in_[gpu] = channels_[p].reverse;
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

  // the spec's circuits, lit from the start
  circuit_next_.assign(channels_.size(), kNone);
  lit_at_.assign(channels_.size(), 0);
  const size_t c = spec.circuit_ocs.size();
  RF_CHECK(spec.circuit_a.size() == c && spec.circuit_b.size() == c, "circuit arrays have different lengths");
  const Plan initial{spec.circuit_ocs, spec.circuit_a, spec.circuit_b};
  check_plan(initial);
  set_plan(initial, 0);
  update_channels(0);
  build_dmodk();
  leaf_gpus_.assign(n, {});
  for (uint32_t gpu = 0; gpu < g; ++gpu)
    if (gpu_attach_[gpu] != kNone) leaf_gpus_[gpu_attach_[gpu]].push_back(gpu);
  rebuild();
}

void Forwarding::build_dmodk() {
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
      const uint32_t w = channels_[routing_in_.adj_ports[a]].wire_peer;
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

void Forwarding::rebuild() {
  ++rebuilds_;
  for (uint32_t p = 0; p < channels_.size(); ++p) {
    routing_in_.port_up[p] = channels_[p].up && !channels_[p].inert;
    routing_in_.port_peer[p] = channels_[p].peer;
    routing_in_.port_reverse[p] = channels_[p].reverse;
  }
  routing_in_.keep_order = !circuits_changed_;  // (a failure or repair keeps up*/down*'s order)
  circuits_changed_ = false;
  routes_.build(routing_in_);
  // Bundles: each working port's place among its node's working ports to the same far end.
  bundle_slot_.assign(channels_.size(), 0);
  bundle_size_.assign(channels_.size(), 1);
  std::vector<std::pair<uint32_t, uint32_t>> ends;  // (far end, port) of a node's working ports
  for (const Node& nd : nodes_) {
    ends.clear();
    for (uint32_t a = nd.port_begin; a < nd.port_end; ++a) {
      const uint32_t p = routing_in_.adj_ports[a];
      if (routing_in_.port_up[p]) ends.emplace_back(channels_[p].peer, p);
    }
    std::sort(ends.begin(), ends.end());  // by far end, then port (the tables' order)
    for (size_t i = 0; i < ends.size();) {
      size_t j = i;
      while (j < ends.size() && ends[j].first == ends[i].first) ++j;
      for (size_t k = i; k < j; ++k) {
        bundle_slot_[ends[k].second] = static_cast<uint32_t>(k - i);
        bundle_size_[ends[k].second] = static_cast<uint32_t>(j - i);
      }
      i = j;
    }
  }
  // Fast path per destination whose NIC works; traffic to a failed NIC takes route_with,
  // which spreads it over its server's other NICs frame by frame (relay_ends).
  fast_route_.assign(gpu_node_.size(), FastRoute{});
  // (parallel links: route_with, whose choice among them reads the port a frame came by)
  hop_row_.assign(nodes_.size(), 0);
  hop_cache_.assign(2 * gpu_node_.size(), 0xffffffffu);  // the empty rows
  hop_cache_pending_ = hop_cache_on_ = false;
  if (host_forwarding_ || routing_in_.updown || routes_.bundles()) return;
  for (uint32_t g = 0; g < gpu_node_.size(); ++g) {
    if (gpu_key_[g] == kNone || !nic_usable(g)) continue;
    fast_route_[g] = FastRoute{dmodk_index_[g], gpu_attach_[g], gpu_attach_in_[g], gpu_key_[g]};
  }
  hop_cache_pending_ = hop_cache_on_ = true;  // (made at the first miss: a flow backend never asks)
}

void Forwarding::make_hop_cache() const {
  hop_cache_pending_ = false;
  // A row per packet switch with routing cells after the two empty ones, when the table stays
  // small (a fat-tree of 1,024 GPUs: 320 switches, 1.3 MB) and its ports fit an entry.
  std::vector<uint32_t> switches;
  for (uint32_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].kind == NodeKind::Eps && routes_.has_row(n)) switches.push_back(n);
  const size_t g = gpu_node_.size();
  if ((switches.size() + 2) * g > kHopCacheMax || channels_.size() > kHopPortMask) {
    hop_cache_on_ = false;
    return;
  }
  hop_cache_.assign((switches.size() + 2) * g, 0xffffffffu);
  for (size_t i = 0; i < switches.size(); ++i) hop_row_[switches[i]] = static_cast<uint32_t>((i + 2) * g);
}

uint64_t Forwarding::fill_next_hop(uint32_t node, uint32_t dst, uint32_t hops) const {
  if (hop_cache_pending_) make_hop_cache();
  const bool eps = nodes_[node].kind == NodeKind::Eps;
  uint32_t out = kNone;
  if (!fast_next_hop(node, eps, dst, hops, out)) return out;
  const uint64_t decided = (uint64_t{1} << 32) | out;
  const uint32_t row = hop_row_[node];
  if (row == 0 || out == kNone) return decided;
  // Does the answer read the hop count? Only a D-mod-K pick among two or more next hops.
  const FastRoute& fr = fast_route_[dst];
  uint32_t count = 0;
  if (node != fr.attach) routes_.shortest_hops(node, fr.key, &count);
  const uint32_t tag = node != fr.attach && count > 1 ? hops + 1 : 0;
  hop_cache_[static_cast<size_t>(row) + dst] = (tag << kHopTagShift) | out;
  return decided;
}

uint32_t Forwarding::spread_nic(int32_t server, uint64_t key) const {
  if (server < 0 || static_cast<size_t>(server) >= server_gpus_.size()) return kNone;
  const auto& gpus = server_gpus_[static_cast<size_t>(server)];
  uint32_t n = 0;
  for (const uint32_t g : gpus) n += relay_usable(g, kNone);
  if (n == 0) return kNone;
  uint64_t k = key % n;
  for (const uint32_t g : gpus)
    if (relay_usable(g, kNone) && k-- == 0) return g;
  return kNone;
}

bool Forwarding::relay_reaches(uint32_t a, uint32_t b) const {
  const uint32_t from = gpu_attach_[a];
  if (from == kNone || b == kNone || gpu_key_[b] == kNone) return false;
  if (from == gpu_attach_[b]) return true;
  uint32_t count = 0;
  routes_.next_hops(from, gpu_key_[b], &count, false);
  return count > 0;
}

uint32_t Forwarding::pxn_gpu(uint32_t src, uint32_t dst) const {
  const int32_t ss = nodes_[gpu_node_[src]].server;
  if (ss < 0 || static_cast<size_t>(ss) >= server_gpus_.size()) return src;
  const auto& sg = server_gpus_[static_cast<size_t>(ss)];
  return sg[gpu_local_[dst] % sg.size()];
}

Forwarding::Ends Forwarding::relay_ends(uint32_t src, uint32_t dst, uint64_t key) const {
  const int32_t ss = nodes_[gpu_node_[src]].server, ds = nodes_[gpu_node_[dst]].server;
  if (pxn_ && ss >= 0 && ds >= 0 && static_cast<size_t>(std::max(ss, ds)) < server_gpus_.size()) {
    const auto& sg = server_gpus_[static_cast<size_t>(ss)];
    const auto& dg = server_gpus_[static_cast<size_t>(ds)];
    const uint32_t a = pxn_gpu(src, dst);
    if (relay_usable(a, src) && nic_usable(dst) && relay_reaches(a, dst)) return {a, dst};
    // One rail at both ends, so a fabric whose rails meet only inside servers (RFabric's
    // circuits join same-rail ToRs) still carries it: per frame, a rail whose NICs work in
    // both servers and whose switches still reach each other.
    const size_t rails = std::min(sg.size(), dg.size());
    auto ok = [&](size_t r) {
      return relay_usable(sg[r], src) && relay_usable(dg[r], dst) && relay_reaches(sg[r], dg[r]);
    };
    uint32_t n = 0;
    for (size_t r = 0; r < rails; ++r) n += ok(r);
    if (n > 0) {
      uint64_t k = key % n;
      for (size_t r = 0; r < rails; ++r)
        if (ok(r) && k-- == 0) return {sg[r], dg[r]};
    }
  }
  // (the destination end starts from another offset, so the two ends do not move in step)
  // (a GPU whose NIC and NVLink both failed is cut off: no end, its frames wait unroutable)
  const Ends e{nic_usable(src)   ? src
               : nvl_usable(src) ? spread_nic(ss, key)
                                 : kNone,
               nic_usable(dst)   ? dst
               : nvl_usable(dst) ? spread_nic(ds, key + (key >> 32))
                                 : kNone};
  if (e.a == kNone || e.b == kNone || relay_reaches(e.a, e.b)) return e;
  // Those NICs' switches no longer reach each other (a ToR cut off from the fabric): per
  // frame, a pair of working NICs of the two servers whose switches do.
  if (ss < 0 || ds < 0 || static_cast<size_t>(std::max(ss, ds)) >= server_gpus_.size()) return e;
  const auto& sg = server_gpus_[static_cast<size_t>(ss)];
  const auto& dg = server_gpus_[static_cast<size_t>(ds)];
  uint32_t n = 0;
  auto ok = [&](uint32_t a, uint32_t b) {
    return relay_usable(a, src) && relay_usable(b, dst) && relay_reaches(a, b);
  };
  for (const uint32_t a : sg)
    for (const uint32_t b : dg) n += ok(a, b);
  if (n == 0) return e;
  uint64_t k = key % n;
  for (const uint32_t a : sg)
    for (const uint32_t b : dg)
      if (ok(a, b) && k-- == 0) return {a, b};
  return e;
}

uint32_t Forwarding::first_port(uint32_t src, uint32_t dst, uint32_t hash) const {
  const bool same_server = gpu_nvl_port_[src] != kNone && gpu_nvs_[src] == gpu_nvs_[dst];
  if (same_server && nvl_usable(src) && nvl_usable(dst)) return gpu_nvl_port_[src];
  // an NVLink of the two failed: out of src's NIC and in by dst's (host-forwarding fabrics:
  // their tables, which route around the failed NVLink)
  if (same_server && !host_forwarding_)
    return nic_usable(src) && nic_usable(dst) ? gpu_nic_port_[src] : kNone;
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
  if (!nvl_usable(src) || spread_nic(nodes_[gpu_node_[src]].server, 0) == kNone)
    return own_nic ? gpu_nic_port_[src] : kNone;
  return gpu_nvl_port_[src];  // over NVLink to the relays' NICs (PXN, or a failed NIC)
}

std::pair<SimTime, BitsPerSec> Forwarding::path_cost(const std::vector<uint32_t>& path) const {
  SimTime latency = 0;
  BitsPerSec rate = std::numeric_limits<BitsPerSec>::max();
  for (const uint32_t p : path) {
    latency += channels_[p].prop_ps + nodes_[channels_[p].peer].latency_ps;
    rate = std::min(rate, channels_[p].rate_bps);
  }
  return {latency, rate};
}

SimTime Forwarding::lone_delay_ps(const std::vector<uint32_t>& path, Bytes size, Bytes payload,
                                  Bytes header) const {
  constexpr double kBitsPsPerByte = 8e12;  // bytes * 8e12 / rate_bps = ps
  const double first = static_cast<double>(std::min(size, payload) + header);
  const double last = static_cast<double>((size % payload == 0 ? payload : size % payload) + header);
  size_t b = 0;
  for (size_t h = 1; h < path.size(); ++h)
    if (channels_[path[h]].rate_bps < channels_[path[b]].rate_bps) b = h;
  SimTime d = 0;
  for (size_t h = 0; h < path.size(); ++h) {
    const Channel& c = channels_[path[h]];
    d += c.prop_ps + nodes_[c.peer].latency_ps;
    if (h == b || c.rate_bps <= 0) continue;
    const double frame = h < b ? first : last;
    d += static_cast<SimTime>(std::ceil(frame * kBitsPsPerByte / static_cast<double>(c.rate_bps)));
  }
  return d;
}

SimTime Forwarding::lone_packet_fct_ps(const std::vector<uint32_t>& path, Bytes size, Bytes payload,
                                       Bytes header) const {
  if (size <= 0 || path.empty()) return 0;
  const Bytes frames = (size + payload - 1) / payload;
  const Bytes full = payload + header, last = size - payload * (frames - 1) + header;
  auto ser = [](Bytes bytes, BitsPerSec rate) {  // whole-ps ceiling, in 128 bits
    const auto bits_ps = static_cast<unsigned __int128>(bytes) * 8'000'000'000'000ULL;
    const auto r = static_cast<unsigned __int128>(rate);
    return static_cast<SimTime>((bits_ps + r - 1) / r);
  };
  SimTime first = 0;    // when the first full frame leaves this hop (before its delay)
  SimTime slowest = 0;  // the slowest full-frame serialization up to this hop
  SimTime arrive = 0;   // when the last frame reaches this hop
  for (const uint32_t p : path) {
    const Channel& c = channels_[p];
    if (c.rate_bps <= 0) return 0;
    SimTime start = arrive;
    if (frames > 1) {
      first += ser(full, c.rate_bps);
      slowest = std::max(slowest, ser(full, c.rate_bps));
      start = std::max(start, first + (frames - 2) * slowest);  // behind the last full frame
    }
    const SimTime delay = c.prop_ps + nodes_[c.peer].latency_ps;
    arrive = start + ser(last, c.rate_bps) + delay;
    first += delay;
  }
  return arrive;
}

SimTime Forwarding::lone_packet_delay_ps(const std::vector<uint32_t>& path, Bytes size, Bytes payload,
                                         Bytes header) const {
  const SimTime lone = lone_packet_fct_ps(path, size, payload, header);
  const BitsPerSec rate = path.empty() ? 0 : path_cost(path).second;
  if (lone <= 0 || rate <= 0) return lone_delay_ps(path, size, payload, header);
  const Bytes wire = size + (size + payload - 1) / payload * header;
  const auto bits_ps = static_cast<unsigned __int128>(wire) * 8'000'000'000'000ULL;
  const auto r = static_cast<unsigned __int128>(rate);
  return std::max<SimTime>(0, lone - static_cast<SimTime>((bits_ps + r - 1) / r));
}

// ---- circuits and channels ----

uint32_t Forwarding::port_into(uint32_t link, uint32_t node) const {
  return channels_[2 * link].wire_peer == node ? 2 * link : 2 * link + 1;
}

void Forwarding::check_plan(const Plan& plan) const {
  const size_t n = plan.ocs.size();
  RF_CHECK(plan.a.size() == n && plan.b.size() == n, "circuit plan: arrays have different lengths");
  std::set<std::pair<uint32_t, uint32_t>> used;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t o = plan.ocs[i];
    RF_CHECK(o < nodes_.size() && is_optical(nodes_[o].kind), "circuit ", i, ": node ", o,
             " is not an optical device");
    for (const uint32_t l : {plan.a[i], plan.b[i]}) {
      RF_CHECK(l < num_links(), "circuit ", i, ": link ", l, " does not exist");
      RF_CHECK(channels_[2 * l].node == o || channels_[2 * l].wire_peer == o, "circuit ", i, ": link ", l,
               " does not end at device ", o);
      RF_CHECK(used.insert({o, l}).second, "circuit ", i, ": the port of link ", l, " at device ", o,
               " is used by two circuits");
    }
    RF_CHECK(plan.a[i] != plan.b[i], "circuit ", i, ": joins link ", plan.a[i], " to itself");
  }
}

std::pair<uint32_t, uint32_t> Forwarding::set_plan(const Plan& plan, SimTime lit_at_ps) {
  // circuits as (device, entering port of a, entering port of b) with a's port < b's
  using Key = std::tuple<uint32_t, uint32_t, uint32_t>;
  std::set<Key> current, wanted;
  for (uint32_t p = 0; p < circuit_next_.size(); ++p) {
    if (circuit_next_[p] == kNone) continue;
    const uint32_t other_in = circuit_next_[p] ^ 1;
    if (p < other_in) current.insert({channels_[p].wire_peer, p, other_in});
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
    circuit_next_[x] = y ^ 1;  // enter the device along one link, leave along the other
    circuit_next_[y] = x ^ 1;
    lit_at_[x] = lit_at_[y] = lit_at_ps;
    ++added;
  }
  circuits_changed_ = true;
  return {added, removed};
}

std::vector<uint32_t> Forwarding::current_circuits() const {
  std::vector<uint32_t> out;
  for (uint32_t p = 0; p < circuit_next_.size(); ++p) {
    if (circuit_next_[p] == kNone) continue;
    const uint32_t other_in = circuit_next_[p] ^ 1;
    if (p > other_in) continue;
    out.push_back(channels_[p].wire_peer);
    out.push_back(channels_[p].link);
    out.push_back(channels_[other_in].link);
  }
  return out;
}

SimTime Forwarding::last_lit_at() const {
  SimTime last = -1;
  for (uint32_t p = 0; p < circuit_next_.size(); ++p)
    if (circuit_next_[p] != kNone) last = std::max(last, lit_at_[p]);
  return last;
}

std::vector<SimTime> Forwarding::current_circuits_lit_at() const {
  std::vector<SimTime> out;
  for (uint32_t p = 0; p < circuit_next_.size(); ++p) {
    if (circuit_next_[p] == kNone || p > (circuit_next_[p] ^ 1)) continue;
    out.push_back(lit_at_[p]);
  }
  return out;
}

void Forwarding::resolve(uint32_t port, SimTime now_ps) {
  // Following circuits through OCSes and patch panels (which pass light, with no queue or
  // transceiver) the port reaches one electrical endpoint; the channel has the chain's summed
  // propagation delay and slowest rate, and is up while every link is and every circuit lit.
  Channel& c = channels_[port];
  uint32_t q = port;
  SimTime prop = link_prop_[c.link];
  BitsPerSec rate = link_rate_[c.link];
  bool ok = link_up_[c.link] != 0, lit = true;
  for (int steps = 0; is_optical(nodes_[channels_[q].wire_peer].kind); ++steps) {
    const uint32_t next = circuit_next_[q];
    if (next == kNone || steps > 64) {
      ok = false;
      break;
    }
    if (lit_at_[q] > now_ps) lit = false;
    q = next;
    prop += link_prop_[channels_[q].link];
    rate = std::min(rate, link_rate_[channels_[q].link]);
    ok = ok && link_up_[channels_[q].link];
  }
  c.peer = ok ? channels_[q].wire_peer : c.wire_peer;
  c.up = ok && lit;
  c.reverse = ok ? channels_[q].reverse : (port ^ 1);
  c.prop_ps = prop;
  c.rate_bps = rate;
}

void Forwarding::update_channels(SimTime now_ps) {
  for (uint32_t p = 0; p < channels_.size(); ++p) {
    Channel& c = channels_[p];
    if (c.inert) continue;
    if (c.optical) {
      resolve(p, now_ps);
    } else {
      c.up = link_up_[c.link] != 0;
    }
  }
}

}  // namespace rfabric::net
