#include "fabric/routing.hpp"

#include <algorithm>

#include "engine/check.hpp"
#include "engine/rng.hpp"

namespace rfabric::net {

void RoutingTable::assign_rows(const RoutingInput& in, uint32_t phases, bool zero) {
  phases_ = phases;
  num_keys_ = static_cast<uint32_t>(in.keys.size());
  row_.assign(in.num_nodes, kNoRow);
  size_t cells = 0;
  for (uint32_t v = 0; v < in.num_nodes; ++v) {
    if (!in.transit[v]) continue;
    row_[v] = static_cast<uint32_t>(cells);
    cells += static_cast<size_t>(num_keys_) * phases;
  }
  RF_CHECK(cells < kNoRow, "routing tables: ", cells, " cells do not fit 32-bit indices");
  if (zero || cells_.size() != cells) cells_.assign(cells, Cell{});
  bundles_ = false;
  ports_.clear();
  sets_.clear();
}

void RoutingTable::share(size_t cell, size_t from, const std::vector<uint32_t>& port_peer) const {
  const uint32_t count = static_cast<uint32_t>(ports_.size() - from);
  RF_CHECK(count < kBundle, "routing tables: ", count, " next hops in one cell");
  bool bundle = count >= 2;
  for (size_t i = from + 1; bundle && i < ports_.size(); ++i)
    bundle = port_peer[ports_[i]] == port_peer[ports_[from]];
  const uint32_t mark = bundle ? kBundle : 0u;
  bundles_ = bundles_ || bundle;
  uint64_t h = count;
  for (size_t i = from; i < ports_.size(); ++i) h = engine::mix64(h ^ ports_[i]);
  auto [it, end] = sets_.equal_range(h);
  for (; it != end; ++it) {
    const uint32_t b = it->second;
    if (std::equal(ports_.begin() + static_cast<std::ptrdiff_t>(from), ports_.end(), ports_.begin() + b)) {
      ports_.resize(from);
      cells_[cell] = Cell{b, count | mark};
      return;
    }
  }
  sets_.emplace(h, static_cast<uint32_t>(from));
  cells_[cell] = Cell{static_cast<uint32_t>(from), count | mark};
}

void RoutingTable::build(const RoutingInput& in) {
  if (in.updown) {
    build_updown(in);
    return;
  }
  const uint32_t n = in.num_nodes;
  assign_rows(in, 1, true);
  ready_.assign(num_keys_, 1);
  rank_.clear();
  dist_.clear();
  if (in.keep_distances) dist_.assign(static_cast<size_t>(n) * num_keys_, 0xffff);

  std::vector<uint32_t> dist(n), frontier, next;
  for (uint32_t k = 0; k < num_keys_; ++k) {
    const uint32_t key = in.keys[k];
    std::fill(dist.begin(), dist.end(), kUnreachable);
    dist[key] = 0;
    frontier.assign(1, key);
    // Breadth-first search outward from the key over channels x -> m that are up, where
    // x is a transit node: dist[x] is then x's hop count toward the key.
    while (!frontier.empty()) {
      next.clear();
      for (const uint32_t m : frontier) {
        for (uint32_t a = in.adj_begin[m]; a < in.adj_begin[m + 1]; ++a) {
          const uint32_t p = in.adj_ports[a];
          const uint32_t x = in.port_peer[p];
          if (dist[x] != kUnreachable || !in.transit[x] || !in.port_up[in.port_reverse[p]]) continue;
          dist[x] = dist[m] + 1;
          next.push_back(x);
        }
      }
      frontier.swap(next);
    }
    for (uint32_t x = 0; x < n; ++x) {
      if (!dist_.empty() && dist[x] < 0xffff)
        dist_[static_cast<size_t>(x) * num_keys_ + k] = static_cast<uint16_t>(dist[x]);
      // (only transit nodes get a distance: the others keep an empty row)
      if (dist[x] == kUnreachable || dist[x] == 0) continue;
      const size_t from = ports_.size();
      for (uint32_t a = in.adj_begin[x]; a < in.adj_begin[x + 1]; ++a) {
        const uint32_t p = in.adj_ports[a];
        const uint32_t m = in.port_peer[p];
        if (in.port_up[p] && dist[m] + 1 == dist[x] && (in.transit[m] || m == key)) ports_.push_back(p);
      }
      share(static_cast<size_t>(row_[x]) + k, from, in.port_peer);
    }
  }
  sets_ = {};  // (only for building)
}

void RoutingTable::order(const RoutingInput& in) {
  // BFS over transit nodes from the best-connected one (ties: lowest id); rank = position in
  // BFS order, so every up hop strictly lowers the rank.
  const uint32_t n = in.num_nodes;
  auto live = [&](uint32_t p) { return in.port_up[p] != 0; };
  uint32_t root = kUnreachable, best = 0;
  for (uint32_t v = 0; v < n; ++v) {
    if (!in.transit[v]) continue;
    uint32_t deg = 0;
    for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a)
      deg += live(in.adj_ports[a]) && in.transit[in.port_peer[in.adj_ports[a]]];
    if (root == kUnreachable || deg > best) root = v, best = deg;
  }
  rank_.assign(n, kUnreachable);
  uint32_t next_rank = 0;
  std::vector<uint32_t> frontier, next;
  for (uint32_t start = root; start != kUnreachable;) {  // every component gets an order
    rank_[start] = next_rank++;
    frontier.assign(1, start);
    while (!frontier.empty()) {
      next.clear();
      for (const uint32_t v : frontier)
        for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
          const uint32_t p = in.adj_ports[a], w = in.port_peer[p];
          if (!live(p) || !in.transit[w] || rank_[w] != kUnreachable) continue;
          rank_[w] = next_rank++;
          next.push_back(w);
        }
      frontier.swap(next);
    }
    start = kUnreachable;
    for (uint32_t v = 0; v < n; ++v)
      if (in.transit[v] && rank_[v] == kUnreachable) {
        start = v;
        break;
      }
  }
}

void RoutingTable::build_updown(const RoutingInput& in) {
  const uint32_t n = in.num_nodes;
  assign_rows(in, 2, false);
  ready_.assign(num_keys_, 0);
  dist_.clear();
  if (!(in.keep_order && rank_.size() == n)) order(in);

  // transit nodes (those with cells) by id, and those ranked (all of them) by rank
  by_rank_.clear();
  transit_nodes_.clear();
  for (uint32_t v = 0; v < n; ++v) {
    if (in.transit[v]) transit_nodes_.push_back(v);
    if (rank_[v] != kUnreachable) by_rank_.push_back(v);
  }
  std::sort(by_rank_.begin(), by_rank_.end(), [&](uint32_t a, uint32_t b) { return rank_[a] < rank_[b]; });
  // What build_key reads: per transit node its channels that are up and end at a transit
  // node or a key (no other channel is ever a next hop), in adjacency order (the order of
  // the ports in a next-hop set).
  key_nodes_ = in.keys;
  transit_ = in.transit;
  port_peer_ = in.port_peer;
  std::vector<uint8_t> is_key(n, 0);
  for (const uint32_t key : in.keys) is_key[key] = 1;
  edge_begin_.assign(n + 1, 0);
  edges_.clear();
  for (uint32_t v = 0; v < n; ++v) {
    edge_begin_[v] = static_cast<uint32_t>(edges_.size());
    if (rank_[v] == kUnreachable) continue;
    for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
      const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
      if (in.port_up[p] && (in.transit[m] || is_key[m])) edges_.push_back(Edge{p, m});
    }
  }
  edge_begin_[n] = static_cast<uint32_t>(edges_.size());
  down_.assign(n, kUnreachable);
  up_.assign(n, kUnreachable);
}

void RoutingTable::build_key(uint32_t k) const {
  const uint32_t key = key_nodes_[k];
  // A channel v -> m is a hop toward `key` when m forwards (transit) or is the key itself.
  auto hop_ok = [&](uint32_t m) { return transit_[m] || m == key; };
  auto down_hop = [&](uint32_t v, uint32_t m) { return rank_[m] == kUnreachable || rank_[m] > rank_[v]; };
  down_[key] = up_[key] = 0;
  // Descending-only distances: a down hop v -> m has rank[m] > rank[v], so process by
  // decreasing rank; the key (if not transit) is reached from its neighbours directly.
  for (auto it = by_rank_.rbegin(); it != by_rank_.rend(); ++it) {
    const uint32_t v = *it;
    if (v == key) continue;
    uint32_t d = kUnreachable;
    for (uint32_t e = edge_begin_[v]; e < edge_begin_[v + 1]; ++e) {
      const uint32_t m = edges_[e].peer;
      if (!hop_ok(m) || down_[m] == kUnreachable || !down_hop(v, m)) continue;
      d = std::min(d, down_[m] + 1);
    }
    down_[v] = d;
  }
  // Climbing allowed: an up hop lowers the rank, so process by increasing rank.
  for (const uint32_t v : by_rank_) {
    if (v == key) continue;
    uint32_t d = down_[v];
    for (uint32_t e = edge_begin_[v]; e < edge_begin_[v + 1]; ++e) {
      const uint32_t m = edges_[e].peer;
      if (!hop_ok(m) || rank_[m] == kUnreachable || rank_[m] > rank_[v] || up_[m] == kUnreachable) continue;
      d = std::min(d, up_[m] + 1);
    }
    up_[v] = d;
  }
  // Every cell of the key (an unreachable or arrived one empty): the array is not cleared
  // between builds.
  for (const uint32_t v : transit_nodes_) {
    for (uint32_t phase = 0; phase < 2; ++phase) {
      const size_t cell = static_cast<size_t>(row_[v]) + static_cast<size_t>(k) * 2 + phase;
      const uint32_t target = phase ? down_[v] : up_[v];
      if (target == kUnreachable || target == 0) {
        cells_[cell] = Cell{};
        continue;
      }
      const size_t from = ports_.size();
      for (uint32_t e = edge_begin_[v]; e < edge_begin_[v + 1]; ++e) {
        const uint32_t m = edges_[e].peer;
        if (!hop_ok(m)) continue;
        const uint32_t via = down_hop(v, m) ? down_[m] : (phase ? kUnreachable : up_[m]);
        if (via != kUnreachable && via + 1 == target) ports_.push_back(edges_[e].port);
      }
      share(cell, from, port_peer_);
    }
  }
  for (const uint32_t v : by_rank_) down_[v] = up_[v] = kUnreachable;
  down_[key] = up_[key] = kUnreachable;
  ready_[k] = 1;
}

}  // namespace rfabric::net
