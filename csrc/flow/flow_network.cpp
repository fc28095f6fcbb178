// flow_network.cpp: the flow-level backend (see flow_network.hpp for the model).
//
// Rates: progressive filling over one connected component of sending flows ("subflows":
// a flow's state while it sends, renewed when a change re-routes it) and ports at a time.
// All ports start with their capacity and every flow unfrozen; repeatedly the tightest
// constraint (the port with the least capacity left per unit of unfrozen load through it,
// each flow weighing its coefficient there, or a flow's own ceiling) fixes the rate of the
// flows it binds, which then use up their share of every other port they cross. The result
// is the (weighted) max-min fair allocation. A recomputation is requested by whatever
// changes (a flow starts or finishes sending, a link or circuit changes) and runs once per
// instant as one event, after the changes of that instant, over the components that hold
// them (found by a walk over ports and the flows through them). Flows whose rate did not
// change keep their completion event; a flow that ends where no other flow has its
// bottleneck requests nothing (remove_subflow).
#include "flow/flow_network.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "engine/check.hpp"

namespace rfabric::flow {

using engine::kNever;

namespace {
constexpr double kBitsPsPerByte = 8e12;  // bytes * 8e12 / rate_bps = ps
/// Rates within this relative difference count as unchanged (summation order only).
constexpr double kRateEps = 1e-12;
/// The latest time a subflow's finish is queued at (saturated, well clear of kNever so that
/// now + ps, rounded through double, cannot wrap).
constexpr SimTime kLastFinish = engine::kNever - (SimTime{1} << 20);
/// Cached path sets kept at most (between topology changes, which clear them).
constexpr size_t kPathCacheMax = 1 << 18;

/// The filling's heap of ports: a 4-ary min-heap in a vector (half the depth of a binary
/// one), with replace_top, which re-keys a stale top in one sift where a pop and a push took
/// two (nothing else is pushed once it is built). An entry is a port's level and its key
/// (global port << 32 | local port) as one unsigned 128-bit integer, the level's bits above:
/// a level is never negative nor NaN, so its bits order as it does, and one integer
/// comparison orders the pairs without the branches a (double, key) pair's takes on the
/// double's equality. Keys are unique (one entry per port at most), so the pops come in the
/// one order of the pairs, whatever the heap's shape.
using LevelEntry = unsigned __int128;
LevelEntry level_entry(double level, uint64_t key) {
  RF_DCHECK(!std::signbit(level) && !std::isnan(level));
  return (LevelEntry{std::bit_cast<uint64_t>(level)} << 64) | key;
}
double entry_level(LevelEntry e) { return std::bit_cast<double>(static_cast<uint64_t>(e >> 64)); }
uint32_t entry_local(LevelEntry e) { return static_cast<uint32_t>(e); }
void heap_down(std::vector<LevelEntry>& h, size_t i) {
  const size_t n = h.size();
  const LevelEntry e = h[i];
  for (;;) {
    const size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    LevelEntry least = h[c];
    for (size_t j = c + 1; j < std::min(c + 4, n); ++j) {
      const LevelEntry v = h[j];
      const bool lower = v < least;  // (selected, not branched on)
      least = lower ? v : least;
      best = lower ? j : best;
    }
    if (!(least < e)) break;
    h[i] = least;
    i = best;
  }
  h[i] = e;
}
void heap_build(std::vector<LevelEntry>& h) {
  if (h.size() < 2) return;
  for (size_t i = (h.size() - 2) / 4 + 1; i-- > 0;) heap_down(h, i);
}
void heap_pop(std::vector<LevelEntry>& h) {
  h.front() = h.back();
  h.pop_back();
  if (!h.empty()) heap_down(h, 0);
}
void heap_replace_top(std::vector<LevelEntry>& h, LevelEntry e) {
  h.front() = e;
  heap_down(h, 0);
}
}  // namespace

FlowNetwork::FlowNetwork(engine::Engine& eng, const net::NetworkSpec& spec, const net::EngineConfig& cfg,
                         Bytes header_bytes, bool lossless)
    : eng_(eng), cfg_(cfg), fwd_(spec, cfg) {
  RF_CHECK(cfg.mtu_bytes >= 256 && cfg.mtu_bytes <= 65536, "mtu_bytes ", cfg.mtu_bytes,
           " is outside [256, 65536]");
  mtu_ = cfg.mtu_bytes;
  header_ = cfg.header_bytes >= 0 ? cfg.header_bytes : header_bytes;
  RF_CHECK(header_ >= 0 && header_ < mtu_, "header_bytes ", header_, " must be smaller than mtu_bytes ",
           mtu_);
  lossless_ = cfg.lossless >= 0 ? cfg.lossless != 0 : lossless;
  fwd_.set_per_frame_relays(lossless_);
  spreads_ = cfg.ecmp_per_packet || cfg.ecmp_adaptive || cfg.ecmp_multipath;
  kind_base_ = eng_.register_handler(this);
  for (uint32_t k = 1; k < kNumSub; ++k) eng_.register_handler(this);
  ports_.resize(fwd_.num_ports());
  set_capacities();
}

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

double FlowNetwork::flow_cap(uint32_t f) const {
  // Network::line_rate: a flow whose GPU's NIC failed and that leaves the server is paced at
  // that NIC's rate (its frames spread over the server's other NICs), each copy.
  const uint32_t src = flows_.src[f], nic = fwd_.gpu_nic_port(src);
  if (nic == kNone || fwd_.nic_usable(src) || fwd_.gpu_server(src) == fwd_.gpu_server(flows_.dst[f]))
    return 0;
  return static_cast<double>(fwd_.link_rate_bps(fwd_.channel(nic).link)) * flows_.copies[f];
}

SimTime FlowNetwork::flow_delay(uint32_t f, const std::vector<uint32_t>& path) const {
  // The fluid's own time covers the bottleneck; the rest is Forwarding::lone_delay_ps (of one
  // copy: copies move side by side).
  return fwd_.lone_delay_ps(path, flows_.size_bytes[f] / flows_.copies[f], payload_per_packet(), header_);
}

double FlowNetwork::wire_bytes(uint32_t f) const {
  const Bytes n = flows_.copies[f], size = flows_.size_bytes[f] / n, pp = payload_per_packet();
  return static_cast<double>(n * (size + (size + pp - 1) / pp * header_));
}

uint32_t FlowNetwork::hash_of(uint64_t id, uint64_t ecmp_key) const {
  // the packet Network's hashes (of the flow's id, or of its connection), so both backends
  // route a flow alike
  if (ecmp_key != 0) return static_cast<uint32_t>(engine::mix64(cfg_.seed ^ engine::mix64(ecmp_key)) >> 32);
  return static_cast<uint32_t>(engine::mix64(cfg_.seed * 0x9e3779b97f4a7c15ULL + id) >> 32);
}

bool FlowNetwork::same_route(uint32_t src, uint32_t dst, uint64_t key_a, uint64_t key_b) {
  const uint32_t a = hash_of(0, key_a), b = hash_of(0, key_b);
  if (a == b) return true;
  const uint64_t clears = path_cache_clears_;
  const auto ia = static_cast<size_t>(&paths_of(src, dst, a) - path_sets_.data());
  const auto ib = static_cast<size_t>(&paths_of(src, dst, b) - path_sets_.data());
  if (path_cache_clears_ != clears) return false;  // (emptied in between: rare; not merging is safe)
  const PathSet &pa = path_sets_[ia], &pb = path_sets_[ib];
  return pa.reached && pb.reached && pa.ports == pb.ports && pa.coef == pb.coef;
}

// ---- flows ----

void FlowRecords::append(const FlowRecords& t, uint32_t f) {
  id.push_back(t.id[f]);
  owner.push_back(t.owner[f]);
  src.push_back(t.src[f]);
  dst.push_back(t.dst[f]);
  size_bytes.push_back(t.size_bytes[f]);
  start_ps.push_back(t.start_ps[f]);
  end_ps.push_back(t.end_ps[f]);
  sent_ps.push_back(t.sent_ps[f]);
  hash.push_back(t.hash[f]);
  copies.push_back(t.copies[f]);
  live.push_back(t.live[f]);
}

uint32_t FlowNetwork::append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key,
                                  int64_t owner, uint32_t copies) {
  const uint64_t i = next_id_;
  net::check_flow(i, num_gpus(), src, dst, size, start_ps, eng_.now());
  RF_CHECK(copies >= 1, "flow ", i, ": copies must be at least 1");
  RF_CHECK(size <= std::numeric_limits<Bytes>::max() / copies, "flow ", i, ": ", copies, " copies of ", size,
           " bytes overflow");
  const uint32_t hash = hash_of(i, ecmp_key);
  RF_CHECK(fwd_.first_port(src, dst, hash) != kNone, "flow ", i, ": GPU ", dst, " is unreachable from GPU ",
           src);
  next_id_ += copies;
  ++live_flows_;
  FlowRecords& t = flows_;
  uint32_t f;
  if (!free_slots_.empty()) {
    f = free_slots_.back();
    free_slots_.pop_back();
  } else {
    f = static_cast<uint32_t>(t.size());
    RF_CHECK(f != kNone, "more than ", kNone, " flows alive at once");
    t.id.emplace_back();
    t.owner.emplace_back();
    t.src.emplace_back();
    t.dst.emplace_back();
    t.size_bytes.emplace_back();
    t.start_ps.emplace_back();
    t.end_ps.emplace_back();
    t.sent_ps.emplace_back();
    t.hash.emplace_back();
    t.copies.emplace_back();
    t.live.emplace_back();
    flow_sub_.emplace_back();
    flow_delay_.emplace_back();
  }
  t.id[f] = i;
  t.owner[f] = owner;
  t.src[f] = src;
  t.dst[f] = dst;
  t.size_bytes[f] = size * copies;
  t.start_ps[f] = start_ps;
  t.end_ps[f] = -1;
  t.sent_ps[f] = -1;
  t.hash[f] = hash;
  t.copies[f] = copies;
  t.live[f] = 1;
  flow_sub_[f] = kNone;
  flow_delay_[f] = 0;
  return f;
}

void FlowNetwork::retire(uint32_t f) {
  FlowRecords& t = flows_;
  if (t.owner[f] >= 0) {
    const auto o = static_cast<size_t>(t.owner[f]);
    if (owner_stats_.size() <= o) owner_stats_.resize(o + 1);
    OwnerStats& s = owner_stats_[o];
    s.flows += t.copies[f];
    s.delivered_bytes += t.size_bytes[f];
    s.max_fct_ps = std::max(s.max_fct_ps, t.end_ps[f] - t.start_ps[f]);
  }
  if (record_) log_.append(t, f);
  t.live[f] = 0;
  --live_flows_;
  free_slots_.push_back(f);
}

void FlowNetwork::finish(uint32_t f) {
  flows_.end_ps[f] = eng_.now();
  counters_.flows_done += flows_.copies[f];
  counters_.last_flow_end_ps = eng_.now();
  if (observer_ != nullptr) observer_->on_flow_done(f);
  retire(f);
}

uint32_t FlowNetwork::create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key,
                                  int64_t owner, uint32_t copies) {
  const uint32_t i = append_flow(src, dst, size, start_ps, ecmp_key, owner, copies);
  if (start_ps == eng_.now() && size > 0) {
    start_flow(i);  // (starting calls no observer: safe inside its callbacks)
  } else {
    eng_.schedule(start_ps, i, kind_base_ + kStart);
  }
  return i;
}

void FlowNetwork::add_flows(const std::vector<uint32_t>& src, const std::vector<uint32_t>& dst,
                            const std::vector<Bytes>& size, const std::vector<SimTime>& start) {
  net::check_flow_set(flows_.size(), src, dst, size, start);
  for (size_t i = 0; i < src.size(); ++i) {
    const uint32_t id = append_flow(src[i], dst[i], size[i], start[i], 0, -1);
    eng_.schedule(start[i], id, kind_base_ + kStart);
  }
}

void FlowNetwork::start_flow(uint32_t f) {
  const double wire = wire_bytes(f);
  PathSet& ps = paths_of(flows_.src[f], flows_.dst[f], flows_.hash[f]);
  if (handoff_ != kNone) {
    // The connection's next message, posted as its last one left: same paths and ceiling, so
    // the max-min allocation with the new flow in the old one's place is the one in force.
    // It takes over the subflow, rate and bottleneck; nothing is recomputed.
    Subflow& sf = subs_[handoff_];
    const uint32_t g = sf.flow;
    if (flows_.src[g] == flows_.src[f] && flows_.dst[g] == flows_.dst[f] &&
        flows_.hash[g] == flows_.hash[f] && !sf.blocked && sf.weight == flows_.copies[f] &&
        sf.cap == flow_cap(f)) {
      const uint32_t s = handoff_;
      handoff_ = kNone;
      sf.flow = f;
      sf.remaining = sf.accounted = wire;
      sf.last = eng_.now();
      flow_sub_[f] = s;
      flow_delay_[f] = delivery_delay(f, ps);
      ++counters_.subflows;
      ++counters_.handoffs;
      schedule_finish(s);
      return;
    }
  }
  new_subflow(f, ps, wire);
}

uint32_t FlowNetwork::new_subflow(uint32_t f, PathSet& ps, double bytes) {
  uint32_t s;
  if (!free_subs_.empty()) {
    s = free_subs_.back();
    free_subs_.pop_back();
  } else {
    s = static_cast<uint32_t>(subs_.size());
    subs_.emplace_back();
  }
  Subflow& sf = subs_[s];
  sf.flow = f;
  sf.active = true;
  sf.blocked = !ps.reached || ps.ports.empty();
  sf.remaining = sf.accounted = bytes;
  sf.rate = 0;
  sf.cap = flow_cap(f);
  sf.weight = flows_.copies[f];
  sf.last = eng_.now();
  sf.finish_at = -1;
  sf.bneck = kNone;
  const size_t n = ps.ports.size();
  RF_CHECK(n <= std::numeric_limits<uint16_t>::max(), "flow ", flows_.id[f], ": a path set of ", n, " ports");
  sf.nhops = static_cast<uint16_t>(n);
  if (n > kInlineHops) sf.spill.resize(n);
  Hop* hops = sf.hops();
  for (size_t h = 0; h < n; ++h) hops[h] = Hop{ps.ports[h], 0, ps.coef[h]};
  sf.active_pos = static_cast<uint32_t>(active_.size());
  active_.push_back(s);
  flow_sub_[f] = s;
  flow_delay_[f] = delivery_delay(f, ps);
  ++counters_.subflows;
  if (sf.blocked) {
    ++counters_.blocked;
  } else {
    attach(s);
    dirty_sub(s);
  }
  return s;
}

SimTime FlowNetwork::delivery_delay(uint32_t f, PathSet& ps) const {
  const Bytes size = flows_.size_bytes[f] / flows_.copies[f];
  if (ps.delay_size != size) {
    SimTime delay = 0;
    for (const auto& path : ps.paths) delay = std::max(delay, flow_delay(f, path));
    ps.delay = delay;
    ps.delay_size = size;
  }
  return ps.delay;
}

void FlowNetwork::attach(uint32_t s) {
  Subflow& sf = subs_[s];
  Hop* hops = sf.hops();
  for (uint32_t h = 0; h < sf.nhops; ++h) {
    auto& list = ports_[hops[h].port].subs;
    hops[h].slot = static_cast<uint32_t>(list.size());
    list.emplace_back(s, h);
  }
}

void FlowNetwork::detach(uint32_t s) {
  Subflow& sf = subs_[s];
  const Hop* hops = sf.hops();
  for (uint32_t h = 0; h < sf.nhops; ++h) {
    auto& list = ports_[hops[h].port].subs;
    const uint32_t at = hops[h].slot;
    const auto moved = list.back();
    list[at] = moved;
    subs_[moved.first].hops()[moved.second].slot = at;
    list.pop_back();
  }
}

void FlowNetwork::settle(uint32_t s) {
  Subflow& sf = subs_[s];
  const SimTime now = eng_.now();
  if (sf.rate > 0 && now > sf.last) {
    const double bytes =
        std::min(sf.remaining, sf.rate * static_cast<double>(now - sf.last) / kBitsPsPerByte);
    sf.remaining -= bytes;
  }
  sf.last = now;
}

void FlowNetwork::account(uint32_t s) {
  Subflow& sf = subs_[s];
  const double bytes = sf.accounted - sf.remaining;
  if (bytes > 0) {
    const Hop* hops = sf.hops();
    for (size_t h = 0; h < sf.nhops; ++h) ports_[hops[h].port].bytes += bytes * hops[h].coef;
  }
  sf.accounted = sf.remaining;
}

void FlowNetwork::remove_subflow(uint32_t s) {
  // A flow leaving frees capacity only where it was; a flow g whose bottleneck port (its
  // saturated port, where its rate is the largest) is not among them keeps that bottleneck,
  // so the allocation without the leaver is still max-min fair when no flow left on its ports
  // has its bottleneck there: no recomputation then (a flow's bottleneck characterises a
  // max-min allocation: feasible, and every flow has one).
  Subflow& sf = subs_[s];
  if (sf.bneck != kNone) {
    --ports_[sf.bneck].bnecks;
    sf.bneck = kNone;
  }
  if (!sf.blocked) {
    detach(s);
    bool quiet = true;
    const Hop* hops = sf.hops();
    for (size_t h = 0; h < sf.nhops; ++h)
      if (ports_[hops[h].port].bnecks > 0) {
        dirty_port(hops[h].port);
        quiet = false;
      }
    counters_.quiet_ends += quiet;
  }
  const uint32_t pos = sf.active_pos, last = active_.back();
  active_[pos] = last;
  subs_[last].active_pos = pos;
  active_.pop_back();
  sf.active = false;
  sf.finish_at = -1;
  sf.nhops = 0;
  if (flow_sub_[sf.flow] == s) flow_sub_[sf.flow] = kNone;
  free_subs_.push_back(s);
}

void FlowNetwork::subflow_sent(uint32_t s) {
  settle(s);
  account(s);
  const uint32_t f = subs_[s].flow;
  // The subflow stays attached while the observer hears of it: a message it posts on the same
  // connection now takes it over (start_flow); otherwise it leaves after.
  flow_sub_[f] = kNone;
  handoff_ = s;
  flow_sent(f);
  if (handoff_ == s) {
    handoff_ = kNone;
    remove_subflow(s);
  }
}

void FlowNetwork::flow_sent(uint32_t f) {
  flows_.sent_ps[f] = eng_.now();
  eng_.schedule(eng_.now() + flow_delay_[f], f, kind_base_ + kDone);
  if (observer_ != nullptr) observer_->on_flow_sent(f);
}

// ---- rates ----

void FlowNetwork::dirty_port(uint32_t p) {
  seed_ports_.push_back(p);
  request_recompute();
}

void FlowNetwork::dirty_sub(uint32_t s) {
  seed_subs_.push_back(s);
  request_recompute();
}

void FlowNetwork::request_recompute() {
  if (recompute_pending_) return;
  recompute_pending_ = true;
  eng_.schedule(eng_.now(), 0, kind_base_ + kRecompute);
}

void FlowNetwork::recompute() {
  recompute_pending_ = false;
  ++counters_.recomputes;
  const uint64_t mark = ++mark_;
  // The walk gathers the component into dense local arrays (Fill): each subflow's ports as
  // local indices with their coefficients, each port's subflows in the order of its list;
  // the fill then reads only those, not the subflow and port records spread over the heap.
  Fill& w = fill_;
  w.clear();
  std::vector<uint32_t>& comp_subs = comp_subs_;
  std::vector<uint32_t>& comp_ports = comp_ports_;
  comp_subs.clear();
  comp_ports.clear();
  if (sub_mark_.size() < subs_.size()) sub_mark_.resize(subs_.size());
  auto visit_port = [&](uint32_t p) {
    PortState& ps = ports_[p];
    if (ps.mark == mark) return ps.local;
    ps.mark = mark;
    ps.local = static_cast<uint32_t>(comp_ports.size());
    comp_ports.push_back(p);
    return ps.local;
  };
  auto visit_sub = [&](uint32_t s) {
    Mark& m = sub_mark_[s];
    if (m.mark == mark) return m.local;
    m.mark = mark;
    m.local = static_cast<uint32_t>(comp_subs.size());
    comp_subs.push_back(s);
    const Subflow& sf = subs_[s];
    w.weight.push_back(sf.weight);
    w.cap.push_back(sf.cap);
    const Hop* hops = sf.hops();
    for (size_t h = 0; h < sf.nhops; ++h) {
      w.sub_port.push_back(visit_port(hops[h].port));
      w.sub_coef.push_back(hops[h].coef);
    }
    w.sub_end.push_back(static_cast<uint32_t>(w.sub_port.size()));
    return m.local;
  };
  for (const uint32_t s : seed_subs_)
    if (subs_[s].active && !subs_[s].blocked) visit_sub(s);
  for (const uint32_t p : seed_ports_) visit_port(p);
  seed_subs_.clear();
  seed_ports_.clear();
  // (every subflow in a port's list is active and has a path: blocked ones are not attached)
  for (size_t i = 0; i < comp_ports.size(); ++i) {
    for (const auto& [s, h] : ports_[comp_ports[i]].subs) w.port_sub.push_back(visit_sub(s));
    w.port_end.push_back(static_cast<uint32_t>(w.port_sub.size()));
  }
  if (comp_subs.empty()) return;
  counters_.component_subflows += comp_subs.size();
  counters_.max_component = std::max<uint64_t>(counters_.max_component, comp_subs.size());
  water_fill(comp_subs, comp_ports);
  const SimTime now = eng_.now();
  for (size_t i = 0; i < comp_subs.size(); ++i) {
    Subflow& sf = subs_[comp_subs[i]];
    const uint32_t bneck = w.bneck[i] == kNone ? kNone : comp_ports[w.bneck[i]];
    if (bneck != sf.bneck) {
      if (sf.bneck != kNone) --ports_[sf.bneck].bnecks;
      if (bneck != kNone) ++ports_[bneck].bnecks;
      sf.bneck = bneck;
    }
    const double r = w.rate[i];
    if (sf.finish_at >= now && std::abs(r - sf.rate) <= kRateEps * std::max(r, sf.rate)) continue;
    settle(comp_subs[i]);  // (at the rate it had since it was last settled; unchanged rates need none)
    sf.rate = r;
    ++counters_.rate_updates;
    schedule_finish(comp_subs[i]);
  }
}

void FlowNetwork::schedule_finish(uint32_t s) {
  Subflow& sf = subs_[s];
  if (sf.rate <= 0) {
    sf.finish_at = -1;
    return;
  }
  // Saturates: a finish past the end of int64 time is queued at kLastFinish instead of
  // wrapping, and reaching it (the rate never rose again) is an error in kSent.
  const SimTime now = eng_.now();
  const double ps = std::ceil(sf.remaining * kBitsPsPerByte / sf.rate);
  const double room = static_cast<double>(kLastFinish - std::min(now, kLastFinish));
  sf.finish_at = ps < room ? now + static_cast<SimTime>(ps) : kLastFinish;
  eng_.schedule(sf.finish_at, s, kind_base_ + kSent);
}

void FlowNetwork::water_fill(const std::vector<uint32_t>& subs, const std::vector<uint32_t>& ports) {
  // Progressive filling with weights: raising every unfrozen flow's rate to L per copy takes
  // L x (their coefficients x copies, summed) of a port, so the port fills at L = left / load. The
  // fill goes in increasing L, and freezing a flow at the current (smallest) L can only
  // raise the level of its other ports ((left - Lc) / (load - c) >= left / load when
  // L <= left / load), so a heap entry is never above its port's level: an entry that
  // comes up below it is re-keyed to the new level, and freezing pushes nothing.
  // Works on the local arrays recompute gathered (fill_); ties between ports at one level
  // go by global port id, as they did over the port records.
  Fill& w = fill_;
  const size_t ns = subs.size(), np = ports.size();
  // (level, global port << 32 | local port)
  std::vector<LevelEntry>& heap =
      heap_;  // a min-heap (heap_build, heap_pop, heap_replace_top), reused across calls
  heap.clear();
  auto entry = [&](double level, uint32_t lp) {
    return level_entry(level, (uint64_t{ports[lp]} << 32) | lp);
  };
  w.left.resize(np);
  w.load.assign(np, 0.0);
  w.unfrozen.resize(np);
  for (size_t lp = 0; lp < np; ++lp) {
    w.left[lp] = ports_[ports[lp]].capacity;
    w.unfrozen[lp] = w.port_end[lp] - (lp ? w.port_end[lp - 1] : 0);
  }
  w.frozen.assign(ns, 0);
  w.rate.assign(ns, 0.0);
  w.bneck.assign(ns, kNone);
  std::vector<uint32_t>& capped = capped_;
  capped.clear();
  for (size_t i = 0; i < ns; ++i) {
    if (w.cap[i] > 0) capped.push_back(static_cast<uint32_t>(i));
    for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k)
      w.load[w.sub_port[k]] += w.sub_coef[k] * w.weight[i];
  }
  for (size_t lp = 0; lp < np; ++lp)
    if (w.unfrozen[lp] > 0) heap.push_back(entry(w.left[lp] / w.load[lp], static_cast<uint32_t>(lp)));
  heap_build(heap);  // ((level, port) pairs: a total order)
  // a capped flow binds when the level reaches its ceiling per copy
  auto cap_level = [&](uint32_t i) { return w.cap[i] / w.weight[i]; };
  std::stable_sort(capped.begin(), capped.end(),
                   [&](uint32_t a, uint32_t b) { return cap_level(a) < cap_level(b); });
  size_t next_cap = 0;
  size_t left = ns;
  auto level_of = [&](uint32_t lp) { return w.left[lp] / w.load[lp]; };
  auto freeze = [&](uint32_t i, double level, uint32_t bneck) {
    const double rate = level * w.weight[i];
    w.frozen[i] = 1;
    w.rate[i] = rate;
    w.bneck[i] = bneck;
    --left;
    // (selections, not branches: std::max's, and whether the port has unfrozen flows left)
    for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) {
      const uint32_t lp = w.sub_port[k];
      const double left_after = w.left[lp] - rate * w.sub_coef[k];
      w.left[lp] = 0.0 < left_after ? left_after : 0.0;
      const double load_after = w.load[lp] - w.sub_coef[k] * w.weight[i];
      const double load_kept = load_after < 1e-300 ? 1e-300 : load_after;
      w.load[lp] = --w.unfrozen[lp] > 0 ? load_kept : 0.0;
    }
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  while (left > 0) {
    while (!heap.empty()) {
      const double level = entry_level(heap.front());
      const uint32_t lp = entry_local(heap.front());
      if (w.unfrozen[lp] > 0 && level == level_of(lp)) break;
      if (w.unfrozen[lp] > 0) {
        heap_replace_top(heap, entry(level_of(lp), lp));  // risen since pushed
      } else {
        heap_pop(heap);
      }
    }
    while (next_cap < capped.size() && w.frozen[capped[next_cap]]) ++next_cap;
    const double port_level = heap.empty() ? kInf : entry_level(heap.front());
    const double cap = next_cap < capped.size() ? cap_level(capped[next_cap]) : kInf;
    if (cap < port_level) {
      freeze(capped[next_cap], cap, kNone);
      continue;
    }
    if (heap.empty()) break;  // (every flow crosses a port: not reached)
    const uint32_t lp = entry_local(heap.front());
    heap_pop(heap);
    // (freeze() pushes nothing; the port's own list is not changed by it)
    for (uint32_t k = lp ? w.port_end[lp - 1] : 0; k < w.port_end[lp]; ++k)
      if (!w.frozen[w.port_sub[k]]) freeze(w.port_sub[k], port_level, lp);
  }
}

void FlowNetwork::set_capacities() {
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    PortState& ps = ports_[p];
    if (ps.capacity > 0) ps.busy_ps += (ps.bytes - ps.bytes_mark) * kBitsPsPerByte / ps.capacity;
    ps.bytes_mark = ps.bytes;
    const net::Channel& c = fwd_.channel(p);
    ps.capacity = c.up && !c.inert ? static_cast<double>(c.rate_bps) : 0.0;
  }
}

// ---- topology ----

void FlowNetwork::topology_changed() {
  for (const uint32_t s : active_) {
    settle(s);
    account(s);  // (port bytes current before the capacities change: busy time)
  }
  fwd_.update_channels(eng_.now());
  fwd_.rebuild();
  clear_path_cache();
  set_capacities();
  // Re-path every flow still sending whose paths changed, with the bytes it has left; in
  // order of flow id, so the outcome does not depend on slot reuse.
  std::vector<uint32_t> sending;
  sending.reserve(active_.size());
  for (const uint32_t s : active_) sending.push_back(subs_[s].flow);
  std::sort(sending.begin(), sending.end(),
            [&](uint32_t a, uint32_t b) { return flows_.id[a] < flows_.id[b]; });
  for (const uint32_t f : sending) {
    const uint32_t s = flow_sub_[f];
    const PathSet& ps = paths_of(flows_.src[f], flows_.dst[f], flows_.hash[f]);
    const Subflow& sf = subs_[s];
    const bool blocked = !ps.reached || ps.ports.empty();
    bool same = sf.blocked == blocked && sf.nhops == ps.ports.size();
    for (size_t h = 0; same && h < sf.nhops; ++h)
      same = sf.hops()[h].port == ps.ports[h] && sf.hops()[h].coef == ps.coef[h];
    if (same) {
      if (!blocked) dirty_sub(s);
      continue;
    }
    const double left = sf.remaining;
    remove_subflow(s);
    ++counters_.reroutes;
    new_subflow(f, paths_of(flows_.src[f], flows_.dst[f], flows_.hash[f]), left);
  }
  // capacities changed too: every component is recomputed
  for (uint32_t p = 0; p < ports_.size(); ++p)
    if (!ports_[p].subs.empty()) seed_ports_.push_back(p);
  request_recompute();
}

void FlowNetwork::schedule_link_state(uint32_t link, SimTime t, bool up) {
  RF_CHECK(link < num_links(), "link ", link, " does not exist (the fabric has ", num_links(), ")");
  RF_CHECK(t >= eng_.now(), "link ", link, ": change at ", t, " ps is in the past (now ", eng_.now(), ")");
  link_changes_.push_back({t, link, up});
  eng_.schedule(t, static_cast<uint32_t>(link_changes_.size() - 1), kind_base_ + kLinkState);
}

void FlowNetwork::schedule_plan(SimTime t, std::vector<uint32_t> ocs, std::vector<uint32_t> a,
                                std::vector<uint32_t> b, SimTime dark_ps) {
  RF_CHECK(t >= eng_.now(), "circuit plan at ", t, " ps is in the past (now ", eng_.now(), " ps)");
  const uint32_t index = fwd_.push_plan(plans_, std::move(ocs), std::move(a), std::move(b), dark_ps);
  eng_.schedule(t, index, kind_base_ + kPlan);
}

void FlowNetwork::apply_plan_now(std::vector<uint32_t> ocs, std::vector<uint32_t> a, std::vector<uint32_t> b,
                                 SimTime dark_ps) {
  const uint32_t index = fwd_.push_plan(plans_, std::move(ocs), std::move(a), std::move(b), dark_ps);
  on_event(engine::Event{eng_.now(), index, kind_base_ + kPlan});
}

void FlowNetwork::on_event(const engine::Event& ev) {
  switch (ev.kind - kind_base_) {
    case kStart: {
      const uint32_t f = ev.target;
      if (flows_.size_bytes[f] == 0) {
        flows_.sent_ps[f] = eng_.now();
        if (observer_ != nullptr) observer_->on_flow_sent(f);
        finish(f);
      } else {
        start_flow(f);
      }
      break;
    }
    case kSent: {
      const Subflow& sf = subs_[ev.target];
      if (!sf.active || sf.finish_at != ev.time) break;
      RF_CHECK(ev.time < kLastFinish, "flow ", sf.flow, ": still sending at ", ev.time,
               " ps, the end of the engine's time range (its rate is ", sf.rate, " bit/s)");
      subflow_sent(ev.target);
      break;
    }
    case kDone:
      finish(ev.target);
      break;
    case kRecompute:
      recompute();
      break;
    case kLinkState: {
      const LinkChange& c = link_changes_[ev.target];
      if (fwd_.link_up(c.link) == c.up) break;
      fwd_.set_link_up(c.link, c.up);
      topology_changed();
      break;
    }
    case kPlan: {
      const auto& plan = plans_[ev.target];
      const SimTime now = eng_.now();
      const auto [added, removed] = fwd_.set_plan(plan.circuits, now + plan.dark_ps);
      circuit_log_.push_back({now, ev.target, added, removed, plan.dark_ps});
      topology_changed();
      if (added > 0 && plan.dark_ps > 0) eng_.schedule(now + plan.dark_ps, ev.target, kind_base_ + kLight);
      break;
    }
    case kLight:
      fwd_.circuits_lit();
      topology_changed();
      break;
    default:
      break;
  }
}

// ---- results ----

Bytes FlowNetwork::sent_of(uint32_t f) const {
  const Bytes size = flows_.size_bytes[f];
  if (flows_.sent_ps[f] >= 0) return size;
  const uint32_t s = flow_sub_[f];
  if (!flows_.live[f] || s == kNone) return 0;
  const Subflow& sf = subs_[s];
  const double moved = sf.rate * static_cast<double>(eng_.now() - sf.last) / kBitsPsPerByte;
  const double left = std::max(0.0, sf.remaining - moved);
  return static_cast<Bytes>(std::floor(static_cast<double>(size) * (1 - left / wire_bytes(f))));
}

std::vector<Bytes> FlowNetwork::sent_bytes() const {
  std::vector<Bytes> out(flows_.size(), 0);
  for (uint32_t f = 0; f < out.size(); ++f) out[f] = sent_of(f);
  return out;
}

FlowRows FlowNetwork::flow_rows() const {
  // recorded rows, then the flows alive (retired ones are in the log, when recorded)
  std::vector<std::pair<uint64_t, uint32_t>> order;  // (id, row: log row, or log size + slot)
  order.reserve(log_.size() + live_flows_);
  for (uint32_t r = 0; r < log_.size(); ++r) order.emplace_back(log_.id[r], r);
  const auto base = static_cast<uint32_t>(log_.size());
  for (uint32_t f = 0; f < flows_.size(); ++f)
    if (flows_.live[f]) order.emplace_back(flows_.id[f], base + f);
  std::sort(order.begin(), order.end());
  // a flow of n copies is n rows, ids id .. id + n - 1, as its messages would be apart
  size_t n = 0;
  for (const auto& [id, r] : order) n += r < base ? log_.copies[r] : flows_.copies[r - base];
  FlowRows out;
  for (auto* v : {&out.id, &out.owner}) v->resize(n);
  for (auto* v : {&out.src, &out.dst, &out.hash}) v->resize(n);
  for (auto* v :
       {&out.size_bytes, &out.sent_bytes, &out.delivered_bytes, &out.start_ps, &out.end_ps, &out.sent_ps})
    v->resize(n);
  size_t k = 0;
  for (const auto& [id, r] : order) {
    const bool logged = r < base;
    const FlowRecords& t = logged ? log_ : flows_;
    const uint32_t i = logged ? r : r - base;
    const uint32_t copies = t.copies[i];
    const Bytes size = t.size_bytes[i] / copies, sent = (logged ? t.size_bytes[i] : sent_of(i)) / copies;
    for (uint32_t c = 0; c < copies; ++c, ++k) {
      out.id[k] = static_cast<int64_t>(t.id[i] + c);
      out.owner[k] = t.owner[i];
      out.src[k] = t.src[i];
      out.dst[k] = t.dst[i];
      out.size_bytes[k] = size;
      out.start_ps[k] = t.start_ps[i];
      out.end_ps[k] = t.end_ps[i];
      out.sent_ps[k] = t.sent_ps[i];
      out.hash[k] = t.hash[i];
      out.sent_bytes[k] = sent;
      out.delivered_bytes[k] = t.end_ps[i] >= 0 ? size : 0;
    }
  }
  return out;
}

std::vector<double> FlowNetwork::port_bytes() const {
  std::vector<double> out(ports_.size());
  for (size_t p = 0; p < ports_.size(); ++p) out[p] = ports_[p].bytes;
  const SimTime now = eng_.now();
  for (const uint32_t s : active_) {
    const Subflow& sf = subs_[s];
    const double moved =
        std::min(sf.remaining, sf.rate * static_cast<double>(now - sf.last) / kBitsPsPerByte);
    const double bytes = sf.accounted - sf.remaining + moved;  // since its bytes were last added
    const Hop* hops = sf.hops();
    for (size_t h = 0; h < sf.nhops; ++h) out[hops[h].port] += bytes * hops[h].coef;
  }
  return out;
}

std::vector<double> FlowNetwork::port_busy_ps() const {
  const auto bytes = port_bytes();
  std::vector<double> out(ports_.size());
  for (size_t p = 0; p < ports_.size(); ++p) {
    const PortState& ps = ports_[p];
    out[p] = ps.busy_ps + (ps.capacity > 0 ? (bytes[p] - ps.bytes_mark) * kBitsPsPerByte / ps.capacity : 0.0);
  }
  return out;
}

size_t FlowNetwork::blocked_subflows() const {
  size_t n = 0;
  for (const uint32_t s : active_) n += subs_[s].blocked;
  return n;
}

std::vector<FlowNetwork::Sending> FlowNetwork::sending() const {
  std::vector<Sending> out;
  for (const uint32_t s : active_) {
    const Subflow& sf = subs_[s];
    const uint32_t f = sf.flow, n = flows_.copies[f];
    for (uint32_t c = 0; c < n; ++c)
      out.push_back({flows_.id[f] + c, flows_.src[f], flows_.dst[f], flows_.hash[f], sf.rate / n});
  }
  std::sort(out.begin(), out.end(), [](const Sending& a, const Sending& b) { return a.id < b.id; });
  return out;
}

std::vector<double> FlowNetwork::flow_rates() const {
  std::vector<double> out(flows_.size(), 0);
  for (const uint32_t s : active_) out[subs_[s].flow] = subs_[s].rate;  // (by slot)
  return out;
}

}  // namespace rfabric::flow
