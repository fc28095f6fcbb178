// routing_input.hpp: the adjacency of a hand-built RoutingInput for the C++ tests.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/routing.hpp"

namespace rftest {

/// Fill in.adj_begin / in.adj_ports (CSR, ports in id order per node) from `tail`, each
/// port's node; in.num_nodes must be set.
inline void set_adjacency(rfabric::net::RoutingInput& in, const std::vector<uint32_t>& tail) {
  const uint32_t n = in.num_nodes, np = static_cast<uint32_t>(tail.size());
  in.adj_begin.assign(n + 1, 0);
  for (uint32_t p = 0; p < np; ++p) ++in.adj_begin[tail[p] + 1];
  for (uint32_t v = 0; v < n; ++v) in.adj_begin[v + 1] += in.adj_begin[v];
  in.adj_ports.resize(np);
  std::vector<uint32_t> fill(in.adj_begin.begin(), in.adj_begin.end() - 1);
  for (uint32_t p = 0; p < np; ++p) in.adj_ports[fill[tail[p]]++] = p;
}

}  // namespace rftest
