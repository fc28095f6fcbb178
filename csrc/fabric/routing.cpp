#include "fabric/routing.hpp"

#include <algorithm>

#include "engine/check.hpp"
#include "engine/rng.hpp"

namespace rfabric::net {

void RoutingTable::assign_rows(const RoutingInput& in, uint32_t phases) {
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
  cells_.assign(cells, Cell{});
  bundles_ = false;
  ports_.clear();
  sets_.clear();
}

void RoutingTable::share(size_t cell, size_t from, const std::vector<uint32_t>& port_peer) {
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
  assign_rows(in, 1);
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
  assign_rows(in, 2);

  auto live = [&](uint32_t p) { return in.port_up[p] != 0; };
  if (!(in.keep_order && rank_.size() == n)) order(in);

  // transit nodes by rank, lowest first
  std::vector<uint32_t> by_rank;
  for (uint32_t v = 0; v < n; ++v)
    if (rank_[v] != kUnreachable) by_rank.push_back(v);
  std::sort(by_rank.begin(), by_rank.end(), [&](uint32_t a, uint32_t b) { return rank_[a] < rank_[b]; });

  std::vector<uint32_t> down(n), up(n);
  auto hop_ok = [&](uint32_t p, uint32_t key) {
    const uint32_t m = in.port_peer[p];
    return live(p) && (in.transit[m] || m == key);
  };
  for (uint32_t k = 0; k < num_keys_; ++k) {
    const uint32_t key = in.keys[k];
    std::fill(down.begin(), down.end(), kUnreachable);
    std::fill(up.begin(), up.end(), kUnreachable);
    down[key] = up[key] = 0;
    // Descending-only distances: a down hop v -> m has rank[m] > rank[v], so process by
    // decreasing rank; the key (if not transit) is reached from its neighbours directly.
    for (auto it = by_rank.rbegin(); it != by_rank.rend(); ++it) {
      const uint32_t v = *it;
      if (v == key) continue;
      for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
        const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
        if (!hop_ok(p, key) || down[m] == kUnreachable) continue;
        if (rank_[m] != kUnreachable && !descends(v, m)) continue;  // only unranked leaves are exempt
        down[v] = std::min(down[v], down[m] + 1);
      }
    }
    // Climbing allowed: an up hop lowers the rank, so process by increasing rank.
    for (const uint32_t v : by_rank) {
      if (v == key) continue;
      uint32_t d = down[v];
      for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
        const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
        if (!hop_ok(p, key) || rank_[m] == kUnreachable || descends(v, m) || up[m] == kUnreachable) continue;
        d = std::min(d, up[m] + 1);
      }
      up[v] = d;
    }
    for (uint32_t v = 0; v < n; ++v) {
      for (uint32_t phase = 0; phase < 2; ++phase) {
        const uint32_t target = phase ? down[v] : up[v];
        if (target == kUnreachable || target == 0 || rank_[v] == kUnreachable) continue;
        const size_t from = ports_.size();
        for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
          const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
          if (!hop_ok(p, key)) continue;
          const bool dn = rank_[m] == kUnreachable || descends(v, m);
          const uint32_t via = dn ? down[m] : (phase ? kUnreachable : up[m]);
          if (via != kUnreachable && via + 1 == target) ports_.push_back(p);
        }
        share(static_cast<size_t>(row_[v]) + static_cast<size_t>(k) * 2 + phase, from, in.port_peer);
      }
    }
  }
  sets_ = {};
}

}  // namespace rfabric::net
