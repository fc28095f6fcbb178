#include "fabric/routing.hpp"

#include <algorithm>

#include "engine/check.hpp"
#include "engine/rng.hpp"

namespace rfabric::net {

void RoutingTable::assign_rows(const RoutingInput& in, uint32_t phases, bool zero) {
  phases_ = phases;
  num_keys_ = static_cast<uint32_t>(in.keys.size());
  row_.assign(in.num_nodes, kNoRow);
  // One phase: node-major (a node's cells for every key together; shortest_hops reads
  // row + key). Up*/down*: key-major (a key's cells for every node together, as build_key
  // writes them), a node's row its place among the transit nodes times the phases.
  size_t transit = 0;
  for (uint32_t v = 0; v < in.num_nodes; ++v)
    if (in.transit[v])
      row_[v] = static_cast<uint32_t>(phases == 1 ? transit++ * num_keys_ : phases * transit++);
  const size_t cells = transit * num_keys_ * phases;
  RF_CHECK(cells < kNoRow, "routing tables: ", cells, " cells do not fit 32-bit indices");
  key_stride_ = phases == 1 ? 1 : static_cast<uint32_t>(phases * transit);
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

  // Transit nodes by rank, lowest first: a node's place in this list (its position) stands
  // for it in build_key, whose arrays then span the transit nodes alone, in the order its
  // passes walk them. Keys that do not forward come after them.
  std::vector<uint32_t> by_rank;
  for (uint32_t v = 0; v < n; ++v) {
    if (rank_[v] != kUnreachable) by_rank.push_back(v);
    RF_CHECK(!in.transit[v] || rank_[v] != kUnreachable, "up*/down*: transit node ", v,
             " has no place in the order (the transit nodes changed under keep_order)");
  }
  std::sort(by_rank.begin(), by_rank.end(), [&](uint32_t a, uint32_t b) { return rank_[a] < rank_[b]; });
  const uint32_t t = static_cast<uint32_t>(by_rank.size());
  std::vector<uint32_t> pos(n, kUnreachable);
  for (uint32_t i = 0; i < t; ++i) pos[by_rank[i]] = i;
  key_pos_.assign(num_keys_, 0);
  uint32_t extra = t;
  for (uint32_t k = 0; k < num_keys_; ++k) {
    const uint32_t key = in.keys[k];
    if (pos[key] == kUnreachable) pos[key] = extra++;
    key_pos_[k] = pos[key];
  }
  // Per transit node (by position) its first cell, and its channels that are up and end at
  // a transit node or a key (no other channel is ever a next hop), in adjacency order (the
  // order of the ports in a next-hop set). A channel to a higher position descends; so does
  // one to a key that does not forward (it has no rank).
  row_of_.resize(t);
  edge_begin_.assign(t + 1, 0);
  edges_.clear();
  for (uint32_t i = 0; i < t; ++i) {
    const uint32_t v = by_rank[i];
    row_of_[i] = row_[v];
    edge_begin_[i] = static_cast<uint32_t>(edges_.size());
    for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
      const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
      if (in.port_up[p] && pos[m] != kUnreachable) edges_.push_back(Edge{p, pos[m]});
    }
  }
  edge_begin_[t] = static_cast<uint32_t>(edges_.size());
  port_peer_ = in.port_peer;
  down_.assign(extra, kUnreachable);
  up_.assign(extra, kUnreachable);
  last_set_.assign(2 * static_cast<size_t>(t), Cell{});
}

void RoutingTable::build_key(uint32_t k) const {
  // Positions (build_updown): transit nodes 0 .. t-1 by rank, then keys that do not forward.
  const uint32_t t = static_cast<uint32_t>(row_of_.size()), key = key_pos_[k];
  // A channel to position m is a hop toward the key when m forwards or is the key itself.
  auto hop_ok = [&](uint32_t m) { return m < t || m == key; };
  down_[key] = up_[key] = 0;
  // Descending-only distances: a down hop goes to a higher position, so process by
  // decreasing position; the key (if not transit) is reached from its neighbours directly.
  for (uint32_t v = t; v-- > 0;) {
    if (v == key) continue;
    uint32_t d = kUnreachable;
    for (uint32_t e = edge_begin_[v]; e < edge_begin_[v + 1]; ++e) {
      const uint32_t m = edges_[e].peer;
      if (m > v && hop_ok(m) && down_[m] != kUnreachable) d = std::min(d, down_[m] + 1);
    }
    down_[v] = d;
  }
  // Climbing allowed: an up hop goes to a lower position, so process by increasing position.
  for (uint32_t v = 0; v < t; ++v) {
    if (v == key) continue;
    uint32_t d = down_[v];
    for (uint32_t e = edge_begin_[v]; e < edge_begin_[v + 1]; ++e) {
      const uint32_t m = edges_[e].peer;
      if (m < v && up_[m] != kUnreachable) d = std::min(d, up_[m] + 1);
    }
    up_[v] = d;
  }
  // Every cell of the key (an unreachable or arrived one empty): the array is not cleared
  // between builds.
  for (uint32_t v = 0; v < t; ++v) {
    for (uint32_t phase = 0; phase < 2; ++phase) {
      const size_t cell = static_cast<size_t>(k) * key_stride_ + row_of_[v] + phase;
      const uint32_t target = phase ? down_[v] : up_[v];
      if (target == kUnreachable || target == 0) {
        cells_[cell] = Cell{};
        continue;
      }
      const size_t from = ports_.size();
      for (uint32_t e = edge_begin_[v]; e < edge_begin_[v + 1]; ++e) {
        const uint32_t m = edges_[e].peer;
        if (!hop_ok(m)) continue;
        const uint32_t via = m > v ? down_[m] : (phase ? kUnreachable : up_[m]);
        if (via != kUnreachable && via + 1 == target) ports_.push_back(edges_[e].port);
      }
      // (a node's set toward one key is often its set toward the key before: compared first)
      Cell& last = last_set_[2 * static_cast<size_t>(v) + phase];
      const uint32_t count = static_cast<uint32_t>(ports_.size() - from);
      if ((last.count & ~kBundle) == count && count > 0 &&
          std::equal(ports_.begin() + static_cast<std::ptrdiff_t>(from), ports_.end(),
                     ports_.begin() + last.begin)) {
        ports_.resize(from);
        cells_[cell] = last;
        continue;
      }
      share(cell, from, port_peer_);
      last = cells_[cell];
    }
  }
  for (uint32_t v = 0; v < t; ++v) down_[v] = up_[v] = kUnreachable;
  down_[key] = up_[key] = kUnreachable;
  ready_[k] = 1;
}

}  // namespace rfabric::net
