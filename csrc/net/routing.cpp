#include "net/routing.hpp"

#include <algorithm>

namespace rfabric::net {

void RoutingTable::build(const RoutingInput& in) {
  const uint32_t n = in.num_nodes;
  num_keys_ = static_cast<uint32_t>(in.keys.size());
  const size_t cells = static_cast<size_t>(n) * num_keys_;
  begin_.assign(cells, 0);
  count_.assign(cells, 0);
  dist_.assign(cells, kUnreachable);
  ports_.clear();

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
      const size_t cell = static_cast<size_t>(x) * num_keys_ + k;
      dist_[cell] = dist[x];
      begin_[cell] = static_cast<uint32_t>(ports_.size());
      if (dist[x] == kUnreachable || dist[x] == 0) continue;
      uint16_t c = 0;
      for (uint32_t a = in.adj_begin[x]; a < in.adj_begin[x + 1]; ++a) {
        const uint32_t p = in.adj_ports[a];
        const uint32_t m = in.port_peer[p];
        if (in.port_up[p] && dist[m] + 1 == dist[x] && (in.transit[m] || m == key)) {
          ports_.push_back(p);
          ++c;
        }
      }
      count_[cell] = c;
    }
  }
}

}  // namespace rfabric::net
