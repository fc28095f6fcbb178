// forwarding.hpp: where a frame goes, from the topology and its channels' state (links up or
// down, circuits lit or dark) alone: nodes, channels, circuits, routing tables, D-mod-K, fast
// routes, relays around failed NICs. INVARIANT: no answer depends on anything else; adaptive
// choices read port load through the caller's `Load`. Knows nothing of packets, queues, flows
// or the event engine; the packet network owns one by value, and a flow backend can own one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/check.hpp"
#include "engine/event_queue.hpp"  // RF_HOT
#include "engine/rng.hpp"
#include "fabric/routing.hpp"
#include "fabric/spec.hpp"

namespace rfabric::net {

struct Node {
  NodeKind kind;
  int32_t server;
  int32_t gpu;  ///< GPU id for gpu nodes, -1 otherwise
  SimTime latency_ps;
  uint32_t port_begin, port_end;
};

/// One direction of a link as forwarding sees it. For a port facing an optical device
/// (`optical`), peer/reverse/prop/rate are those of the end-to-end channel its circuit chain
/// forms (re-resolved by update_channels); otherwise those of the link.
struct Channel {
  uint32_t node = 0, wire_peer = 0, link = 0;  ///< fixed wiring
  uint32_t peer = 0, reverse = 0;              ///< current far end and opposite direction
  SimTime prop_ps = 0;
  BitsPerSec rate_bps = 0;
  bool up = true;        ///< carries traffic now (link up and, through optics, a lit circuit)
  bool optical = false;  ///< wire_peer is an optical device (OCS or patch panel)
  bool inert = false;    ///< owned by an optical device: never transmits
};

/// What adaptive and multi-path choices read of a port (a `Load`): bytes queued, a frame in
/// service, a PAUSE in force. The packet plane passes its queues; this one is always idle, so
/// those choices fall to their tie-breaks (what a controller or a flow backend without queues
/// sees).
struct IdleLoad {
  Bytes queued(uint32_t) const { return 0; }
  bool busy(uint32_t) const { return false; }
  bool paused(uint32_t) const { return false; }
};

class Forwarding {
 public:
  /// Validate and build the topology from the spec; channels resolved with the spec's
  /// circuits lit, tables built. `cfg`: the ecmp_* switches and the MTU (multi-path load).
  Forwarding(const NetworkSpec& spec, const EngineConfig& cfg);

  // ---- topology ----
  const std::vector<Node>& nodes() const { return nodes_; }
  const Channel& channel(uint32_t port) const { return channels_[port]; }
  uint32_t num_ports() const { return static_cast<uint32_t>(channels_.size()); }
  uint32_t num_links() const { return static_cast<uint32_t>(channels_.size() / 2); }
  uint32_t num_gpus() const { return static_cast<uint32_t>(gpu_node_.size()); }
  uint32_t gpu_node(uint32_t gpu) const { return gpu_node_[gpu]; }
  uint32_t gpu_nic_port(uint32_t gpu) const { return gpu_nic_port_[gpu]; }
  uint32_t gpu_nvl_port(uint32_t gpu) const { return gpu_nvl_port_[gpu]; }
  int32_t gpu_server(uint32_t gpu) const { return nodes_[gpu_node_[gpu]].server; }
  bool host_forwarding() const { return host_forwarding_; }
  bool pxn() const { return pxn_; }
  bool updown() const { return routing_in_.updown; }
  /// What an arrival over a channel ending at `peer` adds to a frame's hop count: 1 at a packet
  /// switch (or a forwarding host), 0 at a GPU or NVSwitch only relaying or receiving.
  uint8_t hop_step(uint32_t peer) const {
    const NodeKind k = nodes_[peer].kind;
    return k == NodeKind::Eps || (host_forwarding_ && k != NodeKind::Ocs && k != NodeKind::PatchPanel);
  }
  /// Relay choice: frame by frame (lossless fabrics, whose RDMA NICs accept frames of a message
  /// in any order) or per flow (lossy ones). Default: per frame unless cfg.lossless is 0.
  void set_per_frame_relays(bool per_frame) { per_frame_relays_ = per_frame; }

  // ---- channel state: links and circuits ----
  bool link_up(uint32_t link) const { return link_up_[link] != 0; }
  SimTime link_prop_ps(uint32_t link) const { return link_prop_[link]; }  ///< as built
  BitsPerSec link_rate_bps(uint32_t link) const { return link_rate_[link]; }
  void set_link_up(uint32_t link, bool up) { link_up_[link] = up; }
  /// A circuit plan: circuit i joins links a[i] and b[i] inside optical device ocs[i].
  struct Plan {
    std::vector<uint32_t> ocs, a, b;
  };
  /// SpecError naming the first bad circuit.
  void check_plan(const Plan& plan) const;
  /// A plan waiting for its instant: the circuits and the dark time of the change
  /// (TopologyChanges keeps them, fabric/topology_changes.hpp).
  struct PendingPlan {
    Plan circuits;
    SimTime dark_ps;
  };
  /// Replace the circuits: those not in `plan` are gone, those new in it carry light from
  /// `lit_at_ps` on, those in both are untouched. Returns (added, removed). Call
  /// update_channels() and rebuild() after (at lit_at_ps again for the new ones to carry).
  std::pair<uint32_t, uint32_t> set_plan(const Plan& plan, SimTime lit_at_ps);
  /// Circuits in place as (device, link a, link b) triples, lit or not.
  std::vector<uint32_t> current_circuits() const;
  /// When each circuit of current_circuits() (same order) carries light (ps).
  std::vector<SimTime> current_circuits_lit_at() const;
  /// When the last of the current circuits carries light (-1: no circuit): until then a
  /// route may still appear without another change.
  SimTime last_lit_at() const;
  /// Circuits came up (lit) since the last rebuild: up*/down* takes a new order then. (A
  /// link failure or repair keeps the order; set_plan marks its own change.)
  void circuits_lit() { circuits_changed_ = true; }
  /// Re-resolve every channel from link states and circuits lit by `now_ps`.
  void update_channels(SimTime now_ps);
  /// Rebuild the routing tables and fast routes from the channels as they are.
  void rebuild();
  /// Rebuilds so far: paths and port rates read before the last one may be stale.
  uint64_t rebuilds() const { return rebuilds_; }

  // ---- queries ----
  /// A working NIC: the GPU has one and its channel is up.
  bool nic_usable(uint32_t gpu) const {
    const uint32_t p = gpu_nic_port_[gpu];
    return p != kNone && channels_[p].up;
  }
  /// A working NVLink: the GPU has one and its channel is up.
  bool nvl_usable(uint32_t gpu) const {
    const uint32_t p = gpu_nvl_port_[gpu];
    return p != kNone && channels_[p].up;
  }
  /// GPU `gpu` can carry traffic of GPU `self` of its server (kNone: of any) through its NIC:
  /// its NIC works and, unless it is `self`, the NVLinks of both work (a relay is reached
  /// over the NVSwitch).
  bool relay_usable(uint32_t gpu, uint32_t self) const {
    return nic_usable(gpu) && (gpu == self || (nvl_usable(gpu) && (self == kNone || nvl_usable(self))));
  }
  /// The port a frame from GPU src to GPU dst leaves src by (kNone: unreachable).
  uint32_t first_port(uint32_t src, uint32_t dst, uint32_t hash) const;
  /// The fast path of a packet switch (no host forwarding, no up*/down*, no parallel links)
  /// toward `dst` at the frame's `hops`-th switch hop: true with `out` set when it decides,
  /// false when route_with must (multi-hop ECMP without D-mod-K, relays, ...).
  RF_HOT bool fast_next_hop(uint32_t node, bool eps, uint32_t dst, uint32_t hops, uint32_t& out) const {
    const FastRoute& fr = fast_route_[dst];
    if (fr.index != kNone && eps) {
      if (node == fr.attach) {
        out = fr.attach_in;
        return true;
      }
      uint32_t count = 0;
      const uint32_t* next = routes_.shortest_hops(node, fr.key, &count);
      if (count <= 1) {
        out = count ? next[0] : kNone;
        return true;
      }
      if (dmodk_) {
        out = next[(fr.index / dmodk_div_[hops]) % count];
        return true;
      }
    }
    return false;
  }
  /// fast_next_hop() through a per-(packet switch, destination GPU) cache of its answers,
  /// filled as frames ask and cleared at every rebuild: a hit is one table read instead of
  /// the destination's fast route, the routing cell and D-mod-K's two divisions. An answer
  /// that depends on the frame's hop count (a D-mod-K pick among two or more next hops) is
  /// kept with that count and holds only for it; the others hold for any count.
  RF_HOT bool cached_next_hop(uint32_t node, uint32_t dst, uint32_t hops, uint32_t& out) const {
    // (a node without a row of its own reads the empty row: every read misses)
    return cached_next_hop_at(hop_row_[node], node, dst, hops, out);
  }
  /// cached_next_hop() from the node's hop_key() (kept by the caller beside the node: the
  /// packet ports keep their far end's, so an arrival reads no row table).
  RF_HOT bool cached_next_hop_at(uint32_t key, uint32_t node, uint32_t dst, uint32_t hops,
                                 uint32_t& out) const {
    if (hop_cache_hit(key, dst, hops, out)) [[likely]]
      return true;
    const uint64_t r = fill_next_hop(node, dst, hops);  // (by value: `out` stays in a register)
    out = static_cast<uint32_t>(r);
    return (r >> 32) != 0;
  }
  /// The cache's answer for the node of `key` alone, with no fill on a miss (false: ask
  /// cached_next_hop_at(), which fills the entry, or fast_next_hop()).
  RF_HOT bool hop_cache_hit(uint32_t key, uint32_t dst, uint32_t hops, uint32_t& out) const {
    // (a 32-bit sum: the table stays within kHopCacheMax entries, and the index needs no
    // widening of its own)
    const uint32_t e = hop_cache_[key + dst];
    const uint32_t tag = e >> kHopTagShift;
    if (tag == 0 || tag == hops + 1) [[likely]] {
      out = e & kHopPortMask;
      return true;
    }
    return false;
  }
  /// cached_next_hop() may answer: its rows are made, or will be at the next miss. False
  /// when the table would be too large (or the fast route is off): fast_next_hop() then.
  bool hop_cache_on() const { return hop_cache_on_; }
  /// What cached_next_hop_at() takes for `node`, and, for a GPU, what a frame's destination
  /// is compared with at its arrival: the GPU's id for a GPU (below num_gpus(), inside the
  /// empty rows: every read misses); the offset of its row for a packet switch with one (at
  /// least 2 num_gpus(), so it never equals a destination); num_gpus() for any other node
  /// (the second empty row). Makes the rows if they are pending; valid until the next
  /// rebuild(), after which a holder takes the keys again.
  uint32_t hop_key(uint32_t node) const {
    if (hop_cache_pending_) make_hop_cache();
    if (nodes_[node].gpu >= 0) return static_cast<uint32_t>(nodes_[node].gpu);
    return hop_row_[node] != 0 ? hop_row_[node] : num_gpus();
  }
  /// Up*/down*: the hop from node `from` to `to` descends.
  bool descends(uint32_t from, uint32_t to) const { return routing_in_.updown && routes_.descends(from, to); }
  /// The general next hop: relays, host forwarding, up*/down*, every ECMP mode. `from`: the
  /// node the frame came from (kNone at its source); `seq`: the frame's sequence number (per-
  /// frame spreading); `hops`: switch hops so far; `load`: port loads for adaptive choices;
  /// `in`: the port the frame arrived by (kNone: unknown), whose place in a bundle of parallel
  /// links picks the link of the next bundle (see bundle_pick).
  template <class Load>
  uint32_t route_with(uint32_t node, uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq, uint32_t hops,
                      uint32_t flow, bool descending, uint32_t from, const Load& load,
                      uint32_t in = kNone) const;
  /// A walk along `path` that would take `port` next goes round a loop: it crossed that port
  /// already. (Going back the way it came is no loop: an NVSwitch hands a PXN frame back to
  /// its source GPU when that GPU's own NIC is the frame's relay, and a switch whose rail no
  /// longer reaches the destination sends a frame back to the GPU that put it there.)
  static bool revisits(const std::vector<uint32_t>& path, uint32_t port) {
    return std::find(path.begin(), path.end(), port) != path.end();
  }
  /// The most ports a walk crosses: every port once. A walk that ends loops (revisits) never
  /// reaches it; one that does not (a multipath frame under load) is bounded by its hop
  /// budget long before. The packet engine's frames have no hop limit, so neither may a walk
  /// have one short of this: the up*/down* route of a circuit plan that leaves a chain of
  /// ToR-ToR circuits can cross more than 64 ports.
  size_t max_walk_ports() const { return channels_.size(); }
  /// The ports the frame with sequence number `seq` of a flow (ECMP hash `hash`) from GPU src
  /// to GPU dst crosses under `load` (the choices that spread a flow's frames read seq),
  /// stopping at a channel that is down or where it has no way on; `reached`: it
  /// gets to dst. `loops_end`: a port crossed a second time ends it (on an idle fabric a
  /// frame going round a loop); without it a frame may cross a port twice, as a multipath
  /// frame under load does in the packet engine (its hop budget bounds the detour). The flow
  /// backend's paths (both of its models) are these walks.
  template <class Load>
  std::vector<uint32_t> walk_frame(uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq, const Load& load,
                                   bool loops_end, bool& reached) const;
  /// Parallel links: the place of port `p` among its node's working ports to the same far
  /// end (0 ..) and how many there are (1: no parallel link).
  uint32_t bundle_slot(uint32_t p) const { return bundle_slot_[p]; }
  uint32_t bundle_size(uint32_t p) const { return bundle_size_[p]; }
  /// Ports a frame from GPU src to GPU dst crosses, following the choices of a flow with
  /// ECMP hash `flow_hash` and sequence number 0 (it stops where the frame would have no way
  /// on, or would cross a port a second time).
  template <class Load>
  std::vector<uint32_t> path(uint32_t src, uint32_t dst, uint32_t flow_hash, const Load& load) const;
  std::vector<uint32_t> path(uint32_t src, uint32_t dst, uint32_t flow_hash = 0) const {
    return path(src, dst, flow_hash, IdleLoad{});
  }
  /// Latency (ps: propagation plus per-hop processing) and slowest rate (bit/s) of `path`.
  std::pair<SimTime, BitsPerSec> path_cost(const std::vector<uint32_t>& path) const;
  /// What a lone message of `size` payload bytes adds to its bottleneck time on `path` (the
  /// slowest port, b): each hop's propagation and the next node's latency, the first frame's
  /// serialization on every hop before b (pipeline fill) and the last frame's on every hop
  /// after it (drain). Frames carry `payload` bytes each plus `header` bytes.
  SimTime lone_delay_ps(const std::vector<uint32_t>& path, Bytes size, Bytes payload, Bytes header) const;
  /// The completion time of a lone message on an idle `path` (0 for an empty message or
  /// path), frame by frame as the packet engine moves it sent at line rate: store-and-
  /// forward at every hop, each frame's serialization rounded up to whole ps. The full
  /// frames pipeline (the k-th leaves hop h at the first frame's time plus k times the
  /// slowest serialization up to h); a short last frame then waits behind the one before it
  /// wherever that one is slower. Exact: the packet engine's lone-flow oracle.
  SimTime lone_packet_fct_ps(const std::vector<uint32_t>& path, Bytes size, Bytes payload,
                             Bytes header) const;
  /// What a lone message takes frame by frame (lone_packet_fct_ps) beyond all its wire bytes
  /// at the path's slowest rate: the delay a fluid that moves the bytes at that rate adds
  /// after its last byte, so that a lone flow ends as the packet engine's does
  /// (lone_delay_ps where the path has no rate).
  SimTime lone_packet_delay_ps(const std::vector<uint32_t>& path, Bytes size, Bytes payload,
                               Bytes header) const;

 private:
  struct Ends {
    uint32_t a, b;
  };
  /// The GPUs through whose NICs a frame from `src` to `dst` leaves the source server (`a`)
  /// and enters the destination's (`b`): src and dst while their NICs work, or with PXN the
  /// source server's GPU on dst's rail. A failed NIC's traffic spreads frame by frame
  /// (round-robin in `key`) over its server's working NICs, so a relayed GPU costs each of
  /// them its share (1/7 more on an 8-NIC server), not one of them double; with PXN both
  /// ends stay on one rail. kNone: no working NIC in that server.
  Ends relay_ends(uint32_t src, uint32_t dst, uint64_t key) const;
  /// Multi-path routing of a host-forwarding fabric (EngineConfig::ecmp_multipath): the
  /// port an NVSwitch or a relaying GPU takes for paths up to kMultipathSlack hops longer than
  /// the shortest; kNone: take the shortest-path tables.
  template <class Load>
  uint32_t route_multipath(uint32_t node, uint32_t src, uint32_t d, uint32_t hops, uint32_t flow,
                           uint32_t seq, uint32_t from, const Load& load) const;
  /// Extra hops a multi-path frame may take: 4 = one more server crossed (two circuits
  /// instead of one; a server crossing is GPU -> NVSwitch -> GPU).
  static constexpr uint32_t kMultipathSlack = 4;
  /// The switch a's NIC attaches to has a route to b's (non-host-forwarding fabrics).
  bool relay_reaches(uint32_t a, uint32_t b) const;
  /// PXN: the GPU of src's server on dst's rail (same position in its server).
  uint32_t pxn_gpu(uint32_t src, uint32_t dst) const;
  /// A GPU of `server` with a working NIC, by `key` (kNone: none, or not in a server).
  uint32_t spread_nic(int32_t server, uint64_t key) const;
  void build_dmodk();
  /// cached_next_hop() on a miss: fast_next_hop() (its `out` in the low 32 bits, whether it
  /// decides in the high ones), its answer kept when the node has a row.
  [[gnu::noinline]] uint64_t fill_next_hop(uint32_t node, uint32_t dst, uint32_t hops) const;
  /// The next-hop cache (cached_next_hop): per (row, destination GPU) an entry, the port in
  /// the low bits and above them a tag: 0 for an answer that holds at any hop count, h + 1
  /// for one that holds at hop count h only, kHopTagEmpty (never h + 1: hop counts are below
  /// 256) for none yet. Rows 0 and 1 stay empty: row 0 is the row of every node without one
  /// of its own (a node that is no packet switch, or every node while the table would exceed
  /// kHopCacheMax entries), and a hop_key() below 2 num_gpus() reads within the two. Rows are
  /// made at the first miss or hop_key() after a rebuild (a flow backend never asks); per
  /// node, its row's first entry.
  static constexpr uint32_t kHopTagShift = 23, kHopPortMask = (1u << kHopTagShift) - 1;
  static constexpr uint32_t kHopTagEmpty = 0xffffffffu >> kHopTagShift;
  static constexpr size_t kHopCacheMax = size_t{1} << 21;  ///< entries (8 MB)
  mutable std::vector<uint32_t> hop_row_;
  mutable std::vector<uint32_t> hop_cache_;
  mutable bool hop_cache_pending_ = false;  ///< rebuilt since the rows were made
  mutable bool hop_cache_on_ = false;       ///< hop_cache_on()
  void make_hop_cache() const;
  void resolve(uint32_t port, SimTime now_ps);
  uint32_t port_into(uint32_t link, uint32_t node) const;

  bool host_forwarding_ = false, pxn_ = false;
  bool dmodk_ = true, adaptive_ = false, per_packet_ = false, multipath_ = false;
  bool per_frame_relays_ = true;
  Bytes mtu_ = 0;

  std::vector<Node> nodes_;
  std::vector<Channel> channels_;
  std::vector<uint8_t> link_up_;
  std::vector<SimTime> link_prop_;  ///< per link, as built (channels hold chain values)
  std::vector<BitsPerSec> link_rate_;
  // circuits: for a port entering an optical device, the port leaving it along the partner
  // link (kNone: no circuit); lit_at_ is when that circuit carries light
  std::vector<uint32_t> circuit_next_;
  std::vector<SimTime> lit_at_;

  /// Per port, its bundle: place among its node's working ports to the same far end, and
  /// their number (set at every rebuild).
  std::vector<uint32_t> bundle_slot_, bundle_size_;
  /// Which of `count` parallel links (a kBundle cell) a frame takes, given the routing mode's
  /// own choice `c` (< count) and the port `in` it arrived by: a frame that came over link j
  /// of a bundle of m leaves by link (j + m c) mod count of the next, so a bundle of k links
  /// carries what k single links to k switches would (the leaf's choice among its k x s
  /// uplinks also fixes the link down from the spine, as it fixes the spine of a fabric with
  /// k x s spines); a frame that came over a single link (m = 1) keeps the mode's choice.
  uint32_t bundle_pick(uint32_t count, uint32_t c, uint32_t in) const {
    if (in == kNone) return c;
    const uint32_t m = bundle_size_[in];
    return static_cast<uint32_t>((bundle_slot_[in] + static_cast<uint64_t>(m) * c) % count);
  }
  std::vector<uint32_t> gpu_node_;                  ///< GPU id -> node
  std::vector<uint32_t> gpu_nic_port_;              ///< GPU id -> its NIC's egress port (kNone if none)
  std::vector<uint32_t> gpu_nvl_port_;              ///< GPU id -> its NVLink egress port (kNone if none)
  std::vector<uint32_t> gpu_attach_;                ///< GPU id -> node its NIC connects to
  std::vector<uint32_t> gpu_attach_in_;             ///< GPU id -> port from that node to the GPU
  std::vector<uint32_t> gpu_nvs_in_;                ///< GPU id -> port from its NVSwitch to the GPU
  std::vector<uint32_t> gpu_nvs_;                   ///< GPU id -> its NVSwitch node (kNone if none)
  std::vector<uint32_t> gpu_key_;                   ///< GPU id -> routing key
  std::vector<uint32_t> gpu_local_;                 ///< GPU id -> position among its server's GPUs
  std::vector<std::vector<uint32_t>> server_gpus_;  ///< server -> GPU ids in order
  std::vector<std::vector<uint32_t>> leaf_gpus_;    ///< switch -> GPUs whose NIC attaches to it
  /// Per destination GPU, what a packet switch needs to forward toward it on the fast path
  /// (no host forwarding, no up*/down*), set at every rebuild.
  struct FastRoute {
    uint32_t index = kNone;      ///< D-mod-K routing index of the GPU whose NIC takes its
                                 ///< traffic (itself while its NIC works); kNone: route_with decides
    uint32_t attach = kNone;     ///< switch that GPU's NIC attaches to
    uint32_t attach_in = kNone;  ///< port from that switch to the GPU
    uint32_t key = kNone;        ///< routing key of that switch
  };
  std::vector<FastRoute> fast_route_;
  /// D-mod-K, as a subnet manager programs a fat-tree or rail fabric: GPU g's routing index is
  /// (rank of its attach switch among the leaves) x (most GPUs under one leaf) + (its position
  /// under that leaf), so consecutive indices sit side by side below the same switches. At a
  /// packet's h-th switch hop a switch with k next hops takes (index / dmodk_div_[h]) mod k:
  /// the position under the leaf at the first hop, the leaf's rank at the next, and so on.
  std::vector<uint32_t> dmodk_index_;
  std::vector<uint64_t> dmodk_div_;  ///< per switch hop (Packet::hops, 256 entries)
  RoutingInput routing_in_;
  RoutingTable routes_;
  bool circuits_changed_ = true;  ///< since the last rebuild: up*/down* then takes a new order
  uint64_t rebuilds_ = 0;
};

// ---- templates (the packet plane instantiates them with its queue loads) ----

template <class Load>
std::vector<uint32_t> Forwarding::walk_frame(uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq,
                                             const Load& load, bool loops_end, bool& reached) const {
  std::vector<uint32_t> out;
  reached = false;
  const uint32_t dst_node = gpu_node(dst);
  uint32_t port = first_port(src, dst, hash);
  uint32_t hops = 0;
  while (port != kNone && out.size() < max_walk_ports()) {
    const Channel& c = channel(port);
    if (!c.up) break;
    out.push_back(port);
    hops += hop_step(c.peer);
    if (c.peer == dst_node) {
      reached = true;
      break;
    }
    const uint32_t next =
        route_with(c.peer, src, dst, hash, seq, hops, hash, descends(c.node, c.peer), c.node, load, port);
    // (a frame may go back the way it came, as the packet engine sends it: an NVSwitch
    // handing a PXN frame back to its source GPU, whose own NIC is that frame's relay; only a
    // port crossed twice is a loop)
    if (next == kNone || (loops_end && revisits(out, next))) break;
    port = next;
  }
  return out;
}

template <class Load>
uint32_t Forwarding::route_with(uint32_t node, uint32_t src, uint32_t d, uint32_t hash, uint32_t seq,
                                uint32_t hops_so_far, uint32_t flow, bool descending, uint32_t from,
                                const Load& load, uint32_t in) const {
  if (node == gpu_nvs_[d] && nvl_usable(d)) return gpu_nvs_in_[d];  // the destination's own NVSwitch
  if (node == gpu_nvs_[d] && !host_forwarding_) {
    // its NVLink failed: out through another GPU's NIC and in by its own (or, with neither, wait)
    const uint32_t g = nic_usable(d) ? spread_nic(nodes_[node].server, hash) : kNone;
    return g == kNone ? kNone : gpu_nvs_in_[g];
  }
  const uint32_t dst = d;
  uint32_t count = 0;
  bool bundle = false;
  const uint32_t* hops = nullptr;
  if (!host_forwarding_) {
    if (node == gpu_attach_[d] && channels_[gpu_attach_in_[d]].up) return gpu_attach_in_[d];
    const Node& nd = nodes_[node];
    if (nd.gpu >= 0) {
      // A relay GPU: a frame from its NVSwitch leaves through its NIC; one from the network
      // (into the destination's server, or escaping a rail that no longer reaches it) goes
      // into the server. (Back into the server too when its NIC has just failed.)
      const uint32_t g = static_cast<uint32_t>(nd.gpu);
      const bool from_server = from != kNone && from == gpu_nvs_[g];
      if ((gpu_nvs_[g] == gpu_nvs_[d] && nvl_usable(d)) || !nic_usable(g) || !from_server)
        return gpu_nvl_port_[g];
      return gpu_nic_port_[g];
    }
    // Which NICs this frame leaves and enters servers by: every node computes the same. Frame
    // by frame under PFC (RoCE NICs take frames of a message in any order), round-robin by
    // sequence number from a per-flow offset, so even a 29-frame message spreads evenly
    // (hashing each frame left the same lumps on the same NICs at every step of a ring: a
    // connection keeps its hash); per flow on a lossy fabric, whose TCP-like transport would
    // read the reordering as loss.
    const uint64_t key = engine::mix64(hash) + (per_frame_relays_ ? seq : 0u);
    const Ends e = relay_ends(src, d, key);
    if (nd.kind == NodeKind::NvSwitch) {
      if (node == gpu_nvs_[src]) return e.a == kNone ? kNone : gpu_nvs_in_[e.a];
      // a third server, where a frame escaped a switch that no longer reaches b: out again
      // on b's rail (PXN), else through any NIC whose switch reaches b
      const int32_t x = nd.server;
      if (e.b == kNone || x < 0 || static_cast<size_t>(x) >= server_gpus_.size()) return kNone;
      const auto& xg = server_gpus_[static_cast<size_t>(x)];
      const uint32_t rail = xg[gpu_local_[e.b] % xg.size()];
      if (pxn_ && relay_usable(rail, kNone) && relay_reaches(rail, e.b)) return gpu_nvs_in_[rail];
      uint32_t n = 0;
      for (const uint32_t g : xg) n += relay_usable(g, kNone) && relay_reaches(g, e.b);
      if (n == 0) return kNone;
      uint64_t k = key % n;
      for (const uint32_t g : xg)
        if (relay_usable(g, kNone) && relay_reaches(g, e.b) && k-- == 0) return gpu_nvs_in_[g];
      return kNone;
    }
    if (e.b == kNone || gpu_key_[e.b] == kNone) return kNone;
    if (e.b != d) {  // into the destination's server through another GPU's NIC, then NVLink
      if (node == gpu_attach_[e.b]) return gpu_attach_in_[e.b];
      d = e.b;
    }
    hops = routes_.next_hops(node, gpu_key_[d], &count, descending, &bundle);
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
          hops = routes_.next_hops(node, gpu_key_[x], &count, descending, &bundle);
          if (count > 0) {
            d = x;
            break;
          }
        }
      // Else into a server below this switch, whose NVSwitch sends it on through a NIC whose
      // switch reaches b. Servers relay without PFC, so the detour closes no buffer cycle.
      if (count == 0 && way)
        for (const uint32_t g : leaf_gpus_[node])
          if (gpu_nvl_port_[g] != kNone && channels_[gpu_attach_in_[g]].up) return gpu_attach_in_[g];
      // Else (no server below) climb again: the one turn up*/down* forbids, taken only by
      // frames caught by a change.
      if (count == 0 && descending) hops = routes_.next_hops(node, gpu_key_[d], &count, false, &bundle);
    }
  } else {
    if (multipath_) {
      const uint32_t out = route_multipath(node, src, d, hops_so_far, flow, seq, from, load);
      if (out != kNone) return out;
    }
    hops = routes_.next_hops(node, gpu_key_[d], &count, descending, &bundle);
  }
  if (count <= 1) return count ? hops[0] : kNone;
  if (dmodk_) {
    const uint32_t c = static_cast<uint32_t>((dmodk_index_[d] / dmodk_div_[hops_so_far & 0xff]) % count);
    return hops[bundle ? bundle_pick(count, c, in) : c];
  }
  if (adaptive_) {
    // (parallel links too: the least loaded of them, which spreads a bundle by itself)
    // least loaded eligible port: bytes queued plus the frame in service; ties by a
    // per-packet rotation so equal ports share the load
    const uint32_t start = static_cast<uint32_t>(engine::mix64((uint64_t{flow} << 32) ^ seq ^ node)) % count;
    auto port_load = [&](uint32_t port) {
      return load.queued(port) + (load.busy(port) ? 1 : 0) + (load.paused(port) ? (Bytes{1} << 40) : 0);
    };
    uint32_t best = hops[start];
    Bytes best_load = port_load(best);
    for (uint32_t k = 1; k < count; ++k) {
      const uint32_t cand = hops[(start + k) % count];
      const Bytes l = port_load(cand);
      if (l < best_load) {
        best = cand;
        best_load = l;
      }
    }
    return best;
  }
  uint64_t h;
  if (per_packet_) {
    h = engine::mix64(static_cast<uint64_t>(hash) << 32 ^ seq ^ (uint64_t{node} << 20));
  } else {
    h = engine::mix64((static_cast<uint64_t>(hash) << 32) | node);
  }
  const uint32_t c = static_cast<uint32_t>(((h & 0xffffffffULL) * count) >> 32);
  return hops[bundle ? bundle_pick(count, c, in) : c];
}

template <class Load>
uint32_t Forwarding::route_multipath(uint32_t node, uint32_t src, uint32_t d, uint32_t hops, uint32_t flow,
                                     uint32_t seq, uint32_t from, const Load& load) const {
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
    const uint32_t dm = routes_.distance(channels_[gpu_nic_port_[g]].peer, key);
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
  uint32_t best = kNone;
  __int128 best_score = 0;
  for (uint32_t i = 0; i < m; ++i) {
    const uint32_t g = gpus[(start + i) % m];
    if (!relay_usable(g, kNone)) continue;
    const uint32_t nic = gpu_nic_port_[g];
    const uint32_t dm = routes_.distance(channels_[nic].peer, key);
    if (dm == RoutingTable::kUnreachable || hops + 2 + dm > budget) continue;
    const Bytes l = load.queued(gpu_nvs_in_[g]) + load.queued(nic) + (load.busy(nic) ? mtu_ : 0) +
                    (load.paused(nic) ? (Bytes{1} << 40) : 0) + 8 * mtu_;
    const __int128 score = static_cast<__int128>(l) * (2 + dm);
    if (best == kNone || score < best_score) best = g, best_score = score;
  }
  return best == kNone ? kNone : gpu_nvs_in_[best];
}

template <class Load>
std::vector<uint32_t> Forwarding::path(uint32_t src, uint32_t dst, uint32_t flow_hash,
                                       const Load& load) const {
  RF_CHECK(src < num_gpus() && dst < num_gpus() && src != dst, "trace_path: bad GPU pair ", src, ", ", dst);
  std::vector<uint32_t> out;
  uint32_t port = first_port(src, dst, flow_hash);
  uint32_t hops = 0;
  while (port != kNone && out.size() < max_walk_ports()) {
    out.push_back(port);
    const Channel& c = channels_[port];
    hops += hop_step(c.peer);
    const uint32_t node = c.peer;
    if (nodes_[node].gpu >= 0 && static_cast<uint32_t>(nodes_[node].gpu) == dst) break;
    const bool descending = descends(c.node, node);
    const uint32_t next = route_with(node, src, dst, flow_hash, 0, hops, 0, descending, c.node, load, port);
    if (next == kNone || revisits(out, next)) break;
    port = next;
  }
  return out;
}

}  // namespace rfabric::net
