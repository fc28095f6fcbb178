// path_cache.cpp: the flow backend's paths: the forwarding layer's walk for a frame, the
// path sets of (src, dst, hash) it samples on an idle fabric, cached until the next topology
// change, and, where routing follows load (adaptive, multipath), the path sets sampled
// against the load the flows sending offer when a flow starts.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "flow/flow_network.hpp"

namespace rfabric::flow {

namespace {
/// Cached path sets kept at most (between topology changes, which clear them).
constexpr size_t kPathCacheMax = 1 << 18;

}  // namespace

// ---- paths ----

void FlowNetwork::add_sample(PathSet& ps, std::vector<uint32_t>& count, uint32_t& samples,
                             const std::vector<uint32_t>& path, bool reached, uint32_t weight) {
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
}

template <class Load>
std::vector<uint32_t> FlowNetwork::walk(uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq,
                                        bool& reached, const Load& load) const {
  // Under load a multipath frame may cross a port twice, as in the packet engine: a detour
  // that comes back to its server spends its hop budget, which bounds it.
  return fwd_.walk_frame(src, dst, hash, seq, load, !std::is_same_v<Load, FluidLoad>, reached);
}

void FlowNetwork::clear_path_cache() {
  ++path_cache_clears_;
  path_sets_.clear();
  for (PathSlot& e : path_table_) e.index = kNone;
}

void FlowNetwork::fetch_paths(uint32_t src, uint32_t dst, uint32_t hash) const {
  if (path_table_.empty()) return;
  __builtin_prefetch(&path_table_[PathKeyHash{}(PathKey{src, dst, hash}) & (path_table_.size() - 1)]);
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
  const net::IdleLoad idle;
  bool r0 = false, r1 = false;
  auto p0 = walk(src, dst, hash, 0, r0, idle);
  const auto p1 = walk(src, dst, hash, 1, r1, idle);
  if (!spreads_ && p0 == p1 && r0 == r1) {
    // hashed or D-mod-K routing and no frame-by-frame relay: every frame takes one path. An
    // idle walk ends before crossing a port twice, so its ports are distinct: add_sample's
    // one sample without its searches (the ports in path order, each crossed once).
    samples = 1;
    if (r0) {
      ps.ports = p0;
      count.assign(p0.size(), 1);
      ps.paths.push_back(std::move(p0));
    } else {
      ps.reached = false;
    }
  } else {
    add_sample(ps, count, samples, p0, r0, 1);
    add_sample(ps, count, samples, p1, r1, 1);
    for (uint32_t seq = 2; seq < kSamples; ++seq) {
      bool r = false;
      const auto p = walk(src, dst, hash, seq, r, idle);
      add_sample(ps, count, samples, p, r, 1);
    }
  }
  ps.coef.resize(ps.ports.size());
  for (size_t i = 0; i < ps.ports.size(); ++i) ps.coef[i] = static_cast<double>(count[i]) / samples;
  path_table_[at].key = key;
  path_table_[at].index = static_cast<uint32_t>(path_sets_.size());
  path_sets_.push_back(std::move(ps));
  return path_sets_.back();
}

// ---- load-aware paths (adaptive and multipath routing) ----
//
// The packet engine's adaptive and multipath choices take, frame by frame, the port with the
// fewest bytes queued (multipath: weighted by the hops left). The flow model has no queues;
// what fills them is offered load: every sender starts at its line rate, and a port offered
// more than its capacity builds a backlog that steers the next frames elsewhere. So a flow's
// kSamples frames walk the forwarding layer against a fluid Load: a port's backlog is its
// overload, (offered / capacity - 1) x kBacklogFrames frames, where `offered` is what the
// flows sending put on it (each its line rate x copies x the share of its frames crossing
// the port) plus what the flow's own earlier samples put there (each 1/kSamples of its line
// rate), so its later frames see the ones before them. A port offered no more than its
// capacity looks idle: a flow whose direct path can carry its line rate takes it, as on an
// idle fabric; one that cannot (a GPU sending over NVLink to its NVSwitch faster than a NIC
// drains) spreads, as its frames do in the packet engine.

namespace {
/// Frames of backlog a port offered twice its capacity shows (the scale of the fluid backlog
/// against the choices' own tie-breaks: multipath counts every NIC from 8 frames).
constexpr double kBacklogFrames = FlowNetwork::kSamples;
}  // namespace

/// The fluid backlog the choices read (Forwarding's Load): bytes queued from overload, never
/// busy or paused (a port offered no more than its capacity looks idle).
struct FlowNetwork::FluidLoad {
  const FlowNetwork* net;
  double scale;  ///< bytes of backlog per unit of overload
  Bytes queued(uint32_t p) const {
    const double cap = net->ports_[p].capacity;
    if (cap <= 0) return 0;
    const double over = (net->offered_[p] + net->extra_[p]) / cap - 1;
    return over > 0 ? static_cast<Bytes>(std::min(over * scale, 1e15)) : 0;
  }
  bool busy(uint32_t) const { return false; }
  bool paused(uint32_t) const { return false; }
};

void FlowNetwork::offer(uint32_t s, double sign) {
  const Subflow& sf = subs_[s];
  const Hop* hops = sf.hops();
  const double rate = sub_offered_[s];
  for (uint32_t h = 0; h < sf.nhops; ++h) {
    const uint32_t p = hops[h].port;
    offered_[p] += sign * hops[h].coef * rate;
    // (exactly 0 once no subflow crosses it: no rounding residue accumulates)
    if (ports_[p].subs.empty() || offered_[p] < 0) offered_[p] = 0;
  }
}

void FlowNetwork::sample_paths(uint32_t f, PathSet& out) {
  const uint32_t src = flows_.src[f], dst = flows_.dst[f], hash = flows_.hash[f];
  out.paths.clear();
  out.ports.clear();
  out.coef.clear();
  out.reached = true;
  out.delay_size = -1;
  out.delay = 0;
  const double share = offered_rate(f) / kSamples;
  const double scale = kBacklogFrames * static_cast<double>(mtu_);
  const FluidLoad load{this, scale};
  std::vector<uint32_t> count;
  uint32_t samples = 0;
  for (uint32_t seq = 0; seq < kSamples; ++seq) {
    bool r = false;
    const auto path = walk(src, dst, hash, seq, r, load);
    add_sample(out, count, samples, path, r, 1);
    if (!r) continue;
    for (const uint32_t p : path) {
      if (extra_[p] == 0) touched_.push_back(p);
      extra_[p] += share;
    }
  }
  for (const uint32_t p : touched_) extra_[p] = 0;
  touched_.clear();
  out.coef.resize(out.ports.size());
  for (size_t i = 0; i < out.ports.size(); ++i) out.coef[i] = static_cast<double>(count[i]) / samples;
  balance_split(out, offered_rate(f));
}

double FlowNetwork::offered_rate(uint32_t f) const {
  // Network::line_rate: the first port's rate, capped at a failed NIC's (flow_cap), each copy
  const uint32_t first = fwd_.first_port(flows_.src[f], flows_.dst[f], flows_.hash[f]);
  double rate = first == kNone ? 0.0 : static_cast<double>(fwd_.channel(first).rate_bps) * flows_.copies[f];
  const double cap = flow_cap(f);
  if (cap > 0) rate = std::min(rate, cap);
  return rate;
}

FlowNetwork::PathSet& FlowNetwork::start_paths(uint32_t f) {
  PathSet& idle = paths_of(flows_.src[f], flows_.dst[f], flows_.hash[f]);
  if (!load_routing_) return idle;
  if (offered_.size() != ports_.size()) {
    offered_.assign(ports_.size(), 0.0);
    extra_.assign(ports_.size(), 0.0);
  }
  // The idle paths, when the flow's line rate fits on them beside what the others offer: then
  // every port they cross shows no backlog to any of its samples (less than a byte: over <
  // 1e-9 of capacity), a port off them can only look worse, and the walk takes the idle
  // choices frame by frame. Else sampled against the load.
  const double rate = offered_rate(f);
  bool fits = idle.reached && !idle.ports.empty();
  for (size_t i = 0; fits && i < idle.ports.size(); ++i) {
    const double cap = ports_[idle.ports[i]].capacity;
    fits = cap > 0 && (offered_[idle.ports[i]] + idle.coef[i] * rate) / cap - 1 <= 1e-9;
  }
  if (fits) return idle;
  sample_paths(f, fresh_);
  return fresh_;
}

std::vector<uint32_t> FlowNetwork::trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const {
  return fwd_.path(src, dst, flow_hash);
}

std::pair<SimTime, BitsPerSec> FlowNetwork::path_cost(uint32_t src, uint32_t dst) const {
  return fwd_.path_cost(trace_path(src, dst, 0));
}

}  // namespace rfabric::flow
