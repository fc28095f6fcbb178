// path_cache.cpp: the flow backend's paths: the forwarding layer's walk for a frame, and
// the path sets of (src, dst, hash) it samples, cached until the next topology change.
#include <algorithm>

#include "flow/flow_network.hpp"

namespace rfabric::flow {

namespace {
/// Cached path sets kept at most (between topology changes, which clear them).
constexpr size_t kPathCacheMax = 1 << 18;
}  // namespace

// ---- paths ----

std::vector<uint32_t> FlowNetwork::walk(uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq,
                                        bool& reached) const {
  // Forwarding::path, for the frame with sequence number `seq` (the choices that spread a
  // flow's frames read it), stopping at a channel that is down.
  std::vector<uint32_t> out;
  reached = false;
  const uint32_t dst_node = fwd_.gpu_node(dst);
  uint32_t port = fwd_.first_port(src, dst, hash);
  uint32_t hops = 0;
  while (port != kNone && out.size() < 64) {
    const net::Channel& c = fwd_.channel(port);
    if (!c.up) break;
    out.push_back(port);
    hops += fwd_.hop_step(c.peer);
    if (c.peer == dst_node) {
      reached = true;
      break;
    }
    const bool descending = fwd_.descends(c.node, c.peer);
    const uint32_t next =
        fwd_.route_with(c.peer, src, dst, hash, seq, hops, hash, descending, c.node, net::IdleLoad{}, port);
    // (a frame may go back the way it came, as the packet engine sends it: an NVSwitch
    // handing a PXN frame back to its source GPU, whose own NIC is that frame's relay; only a
    // port crossed twice is a loop)
    if (next == kNone || net::Forwarding::revisits(out, next)) break;
    port = next;
  }
  return out;
}

void FlowNetwork::clear_path_cache() {
  ++path_cache_clears_;
  path_sets_.clear();
  for (PathSlot& e : path_table_) e.index = kNone;
}

FlowNetwork::PathSet& FlowNetwork::paths_of(uint32_t src, uint32_t dst, uint32_t hash) {
  const PathKey key{src, dst, hash};
  if (path_table_.empty()) path_table_.resize(1024);
  size_t mask = path_table_.size() - 1;
  size_t at = PathKeyHash{}(key)&mask;
  for (; path_table_[at].index != kNone; at = (at + 1) & mask)
    if (path_table_[at].key == key) return path_sets_[path_table_[at].index];
  if (path_sets_.size() >= kPathCacheMax) {
    clear_path_cache();
    at = PathKeyHash{}(key)&mask;
  } else if (2 * (path_sets_.size() + 1) > path_table_.size()) {
    // grow to keep the table at most half full, re-placing every entry
    std::vector<PathSlot> old(path_table_.size() * 2);
    old.swap(path_table_);
    mask = path_table_.size() - 1;
    for (const PathSlot& e : old) {
      if (e.index == kNone) continue;
      size_t i = PathKeyHash{}(e.key) & mask;
      while (path_table_[i].index != kNone) i = (i + 1) & mask;
      path_table_[i] = e;
    }
    at = PathKeyHash{}(key)&mask;
    while (path_table_[at].index != kNone) at = (at + 1) & mask;
  }
  PathSet ps;
  std::vector<uint32_t> count;  // per port of ps.ports: samples crossing it
  uint32_t samples = 0;
  auto add = [&](const std::vector<uint32_t>& path, bool reached, uint32_t weight) {
    samples += weight;
    if (!reached) {
      ps.reached = false;
      return;
    }
    if (std::find(ps.paths.begin(), ps.paths.end(), path) == ps.paths.end()) ps.paths.push_back(path);
    for (const uint32_t p : path) {
      const auto it = std::find(ps.ports.begin(), ps.ports.end(), p);
      if (it == ps.ports.end()) {
        ps.ports.push_back(p);
        count.push_back(weight);
      } else {
        count[static_cast<size_t>(it - ps.ports.begin())] += weight;
      }
    }
  };
  bool r0 = false, r1 = false;
  const auto p0 = walk(src, dst, hash, 0, r0);
  const auto p1 = walk(src, dst, hash, 1, r1);
  if (!spreads_ && p0 == p1 && r0 == r1) {
    // hashed or D-mod-K routing and no frame-by-frame relay: every frame takes one path
    add(p0, r0, 1);
  } else {
    add(p0, r0, 1);
    add(p1, r1, 1);
    for (uint32_t seq = 2; seq < kSamples; ++seq) {
      bool r = false;
      const auto p = walk(src, dst, hash, seq, r);
      add(p, r, 1);
    }
  }
  ps.coef.resize(ps.ports.size());
  for (size_t i = 0; i < ps.ports.size(); ++i) ps.coef[i] = static_cast<double>(count[i]) / samples;
  path_table_[at].key = key;
  path_table_[at].index = static_cast<uint32_t>(path_sets_.size());
  path_sets_.push_back(std::move(ps));
  return path_sets_.back();
}

std::vector<uint32_t> FlowNetwork::trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const {
  return fwd_.path(src, dst, flow_hash);
}

std::pair<SimTime, BitsPerSec> FlowNetwork::path_cost(uint32_t src, uint32_t dst) const {
  return fwd_.path_cost(trace_path(src, dst, 0));
}

}  // namespace rfabric::flow
