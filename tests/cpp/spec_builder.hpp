// spec_builder.hpp: hand-built network specs for the C++ tests, node by node and link by link,
// as rfabric.spec would pass them in (net/spec.hpp). Link l makes ports 2l (from its first node
// to its second) and 2l + 1 (back); GPU ids follow the order GPU nodes are added.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/spec.hpp"

namespace rftest {

using rfabric::net::NodeKind;

struct SpecBuilder {
  rfabric::net::NetworkSpec spec;
  uint32_t gpus = 0;

  uint32_t node(NodeKind kind, int32_t server = -1, int64_t latency_ps = 0) {
    spec.node_kind.push_back(static_cast<uint8_t>(kind));
    spec.node_server.push_back(server);
    spec.node_latency_ps.push_back(latency_ps);
    if (kind == NodeKind::Gpu) ++gpus;
    return static_cast<uint32_t>(spec.node_kind.size() - 1);
  }
  uint32_t gpu(int32_t server = -1) { return node(NodeKind::Gpu, server); }
  uint32_t eps(int64_t latency_ps = 0) { return node(NodeKind::Eps, -1, latency_ps); }
  /// A full-duplex link from a to b; returns its index.
  uint32_t link(uint32_t a, uint32_t b, int64_t rate_bps = 100'000'000'000, int64_t latency_ps = 1000) {
    spec.link_src.push_back(a);
    spec.link_dst.push_back(b);
    spec.link_rate_bps.push_back(rate_bps);
    spec.link_latency_ps.push_back(latency_ps);
    spec.link_buffer_bytes.push_back(1 << 20);
    return static_cast<uint32_t>(spec.link_src.size() - 1);
  }
  uint32_t num_nodes() const { return static_cast<uint32_t>(spec.node_kind.size()); }
  uint32_t num_links() const { return static_cast<uint32_t>(spec.link_src.size()); }
};

/// Port of link l leaving node `from` (one of its two ends).
inline uint32_t port_of(const SpecBuilder& b, uint32_t l, uint32_t from) {
  return b.spec.link_src[l] == from ? 2 * l : 2 * l + 1;
}
/// The node port p leaves from, and the node it leads to (from the spec alone).
inline uint32_t port_tail(const SpecBuilder& b, uint32_t p) {
  return p % 2 == 0 ? b.spec.link_src[p / 2] : b.spec.link_dst[p / 2];
}
inline uint32_t port_head(const SpecBuilder& b, uint32_t p) {
  return p % 2 == 0 ? b.spec.link_dst[p / 2] : b.spec.link_src[p / 2];
}

}  // namespace rftest
