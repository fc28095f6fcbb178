// ecmp.hpp: a flow's ECMP hash, the one formula both backends use, so that they route a flow
// alike: the forwarding layer's choices among equal-cost ports (and the flow backend's path
// cache) key on it.
#pragma once

#include <cstdint>

#include "engine/rng.hpp"

namespace rfabric::net {

/// The ECMP hash of the flow with creation serial `id`, under the run's seed.
inline uint32_t flow_hash(uint64_t seed, uint64_t id) {
  return static_cast<uint32_t>(engine::mix64(seed * 0x9e3779b97f4a7c15ULL + id) >> 32);
}

/// The ECMP hash of connection `key` (nonzero): every flow of one connection (an RDMA QP
/// reused across steps and ops) hashes alike, so keeps one path, as on real NICs.
inline uint32_t connection_hash(uint64_t seed, uint64_t key) {
  return static_cast<uint32_t>(engine::mix64(seed ^ engine::mix64(key)) >> 32);
}

/// The hash of flow `id` created with `ecmp_key` (0: none, the flow's own).
inline uint32_t ecmp_hash(uint64_t seed, uint64_t id, uint64_t ecmp_key) {
  return ecmp_key != 0 ? connection_hash(seed, ecmp_key) : flow_hash(seed, id);
}

}  // namespace rfabric::net
