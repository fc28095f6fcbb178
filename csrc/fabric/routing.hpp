// routing.hpp: hop-by-hop forwarding tables. For every node and every destination key (the
// switch a destination GPU's NIC attaches to) the table holds the set of egress ports on a
// shortest path over switches whose channels are up: the ECMP next-hop set. Shortest-path
// tables are dense arrays built whole when a channel changes state (a few ms at 1k GPUs).
// Up*/down* tables (RFabric and other deadlock-free fabrics) are built lazily: the build
// takes the order and each switch's usable channels, and a key's cells (every switch, both
// phases, stored together) are built when a lookup toward that key first comes, so a rebuild
// at a circuit change costs the order plus the keys asked for before the next one, not every
// key. At 16,384 GPUs on RFabric (2,048 keys, 2,048 switches) a plan change costs 15 ms and
// 4,096 paths between random GPU pairs after it 0.14 s of CPU, where the whole rebuild took
// 0.55 s. The cells equal a whole build's (tests/cpp/test_routing.cpp, cell by cell).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace rfabric::net {

struct RoutingInput {
  uint32_t num_nodes;
  std::vector<uint8_t> transit;        ///< node may forward packets for others
  std::vector<uint32_t> adj_begin;     ///< node -> first entry in adj_ports (CSR)
  std::vector<uint32_t> adj_ports;     ///< egress ports of each node
  std::vector<uint32_t> port_peer;     ///< port -> node at the other end
  std::vector<uint32_t> port_reverse;  ///< port -> port of the opposite direction
  std::vector<uint8_t> port_up;
  std::vector<uint32_t> keys;  ///< key index -> node id
  /// Up*/down* routing: order transit nodes by BFS distance from a root and allow only
  /// paths that climb toward it, then descend. No cyclic buffer dependency can form, so
  /// PFC cannot deadlock; paths may be longer than shortest.
  bool updown = false;
  /// Up*/down*: keep the order of the last build. Set when only links failed or came back:
  /// no edge then changes direction, so frames routed before and after the change cannot
  /// close a buffer cycle between them (a new order can flip edges under frames in flight).
  bool keep_order = false;
  /// Keep every node's hop count to every key (shortest-path tables only), for routing that
  /// admits paths a bounded number of hops longer than the shortest.
  bool keep_distances = false;
};

class RoutingTable {
 public:
  void build(const RoutingInput& in);
  uint32_t num_keys() const { return num_keys_; }
  /// Some cell's next hops are parallel links to one node (kBundle). Up*/down* tables: of
  /// the keys built so far (a whole answer only for shortest-path tables).
  bool bundles() const { return bundles_; }
  /// A cell's count carries this bit when its next hops (two or more) all lead to one node:
  /// parallel links (a bundle), among which the choice of a next node is already made.
  static constexpr uint32_t kBundle = 0x80000000u;
  /// Next-hop ports from `node` toward key `key`: [first, first + count). `descending`
  /// (up*/down* tables only): the packet came down a hop and may only keep descending.
  /// `bundle`, if given: set to whether the next hops are parallel links to one node.
  /// Up*/down*: the first lookup toward a key since the build builds that key's cells, which
  /// may move the shared next-hop sets: a pointer from an earlier lookup is then stale (use
  /// each answer before the next lookup).
  const uint32_t* next_hops(uint32_t node, uint32_t key, uint32_t* count, bool descending = false,
                            bool* bundle = nullptr) const {
    const size_t base = row_[node];
    if (base == kNoRow) {
      *count = 0;
      if (bundle) *bundle = false;
      return ports_.data();
    }
    if (__builtin_expect(!ready_[key], 0)) build_key(key);
    const size_t i = base + static_cast<size_t>(key) * key_stride_ + (descending && phases_ == 2);
    *count = cells_[i].count & ~kBundle;
    if (bundle) *bundle = (cells_[i].count & kBundle) != 0;
    return ports_.data() + cells_[i].begin;
  }
  /// next_hops() for tables built without up*/down* (one phase), from a transit node, where
  /// no cell is kBundle (bundles() is false).
  const uint32_t* shortest_hops(uint32_t node, uint32_t key, uint32_t* count) const {
    const Cell& c = cells_[static_cast<size_t>(row_[node]) + key];
    *count = c.count;
    return ports_.data() + c.begin;
  }
  /// The node has cells (a transit node): shortest_hops() may be asked from it.
  bool has_row(uint32_t node) const { return row_[node] != kNoRow; }
  /// Bytes the tables take (rows, cells and the shared next-hop sets), for inspection.
  size_t bytes() const {
    return row_.size() * sizeof(uint32_t) + cells_.size() * sizeof(Cell) + ports_.size() * sizeof(uint32_t);
  }
  /// Keys whose cells are built (all of them for shortest-path tables), for inspection.
  uint32_t keys_built() const {
    return static_cast<uint32_t>(std::count(ready_.begin(), ready_.end(), uint8_t{1}));
  }
  /// Up*/down*: the node's place in the order (lower: closer to the root; kUnreachable for
  /// nodes that forward nothing).
  uint32_t rank(uint32_t node) const { return rank_.empty() ? kUnreachable : rank_[node]; }
  /// Up*/down*: the hop from `from` to `to` descends (moves away from the root).
  bool descends(uint32_t from, uint32_t to) const {
    return phases_ == 2 && rank_[to] != kUnreachable && rank_[from] != kUnreachable &&
           rank_[to] > rank_[from];
  }
  /// Hops from `node` to key `key` (kUnreachable, or without keep_distances).
  uint32_t distance(uint32_t node, uint32_t key) const {
    if (dist_.empty()) return kUnreachable;
    const uint16_t d = dist_[static_cast<size_t>(node) * num_keys_ + key];
    return d == 0xffff ? kUnreachable : d;
  }
  static constexpr uint32_t kUnreachable = 0xffffffffu;

 private:
  void build_updown(const RoutingInput& in);
  void order(const RoutingInput& in);
  /// Up*/down*: build key `k`'s cells, every transit node, both phases (from the order and
  /// the channels taken at the build). Const: the lookup it serves is; the cells are a cache.
  void build_key(uint32_t k) const;
  uint32_t num_keys_ = 0;
  uint32_t phases_ = 1;
  uint32_t key_stride_ = 1;  ///< cells from one key to the next at a node (see assign_rows)
  mutable bool bundles_ = false;
  std::vector<uint32_t> rank_;  ///< up*/down* order (lower: closer to the root)
  struct Cell {
    uint32_t begin = 0, count = 0;  ///< next hops: ports_[begin, begin + count)
  };
  static constexpr uint32_t kNoRow = 0xffffffffu;
  /// Cells only for transit nodes (the others forward nothing: every cell empty).
  /// Sizes: transit nodes x keys cells (a node x keys table was mostly GPU rows: 5x the
  /// cells at 4,096 GPUs) and one copy of each distinct next-hop set, which cells share
  /// (a switch has the same uplinks toward every key above it).
  /// `zero`: clear every cell (a whole build writes only non-empty ones); else keep the
  /// array when its shape is unchanged (a lazy build writes all of a key's cells).
  void assign_rows(const RoutingInput& in, uint32_t phases, bool zero);
  /// Point cell `cell` at the next-hop set in ports_[from, end): an equal set stored before
  /// if there is one (ports_ is then cut back to `from`), else this one. Marks the cell
  /// kBundle when the set is two or more ports to one node (`port_peer`).
  void share(size_t cell, size_t from, const std::vector<uint32_t>& port_peer) const;
  /// node -> its first cell (key 0, phase 0), kNoRow for non-transit nodes
  std::vector<uint32_t> row_;
  mutable std::vector<Cell> cells_;
  mutable std::vector<uint32_t> ports_;
  /// set hash -> begin (while building; up*/down*: until the next build)
  mutable std::unordered_multimap<uint64_t, uint32_t> sets_;
  /// key -> its cells are built (up*/down*: 0 from the build until its first lookup)
  mutable std::vector<uint8_t> ready_;
  // Up*/down*, taken at the build for build_key, by position (transit nodes by rank, then
  // keys that do not forward): each transit node's first cell and the channels it may use
  // toward some key (up, ending at a transit node or a key), each key's position, each
  // port's far end; per position scratch distances (kUnreachable between key builds) and,
  // per transit node and phase, the next-hop set of its last cell built.
  struct Edge {
    uint32_t port, peer;  ///< peer: the far end's position
  };
  std::vector<uint32_t> row_of_, edge_begin_, key_pos_, port_peer_;
  std::vector<Edge> edges_;
  mutable std::vector<uint32_t> down_, up_;
  mutable std::vector<Cell> last_set_;
  std::vector<uint16_t> dist_;  ///< (node, key) -> hops, 0xffff unreachable (keep_distances)
};

}  // namespace rfabric::net
