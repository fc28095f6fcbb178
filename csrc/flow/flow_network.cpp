// flow_network.cpp: the flow-level backend (see flow_network.hpp for the model): flows,
// their subflows while they send, topology changes and results. The rates are max_min.cpp's,
// the paths path_cache.cpp's.
#include "flow/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "engine/check.hpp"
#include "fabric/ecmp.hpp"

namespace rfabric::flow {

using engine::kNever;

FlowNetwork::FlowNetwork(engine::Engine& eng, const net::NetworkSpec& spec, const net::EngineConfig& cfg,
                         Bytes header_bytes, bool lossless)
    : eng_(eng), cfg_(cfg), fwd_(spec, cfg) {
  RF_CHECK(cfg.mtu_bytes >= 256 && cfg.mtu_bytes <= 65536, "mtu_bytes ", cfg.mtu_bytes,
           " is outside [256, 65536]");
  mtu_ = cfg.mtu_bytes;
  header_ = cfg.header_bytes >= 0 ? cfg.header_bytes : header_bytes;
  RF_CHECK(header_ >= 0 && header_ < mtu_, "header_bytes ", header_, " must be smaller than mtu_bytes ",
           mtu_);
  ft_ = net::FlowTransports(spec, fwd_.num_gpus(), header_, cfg.header_bytes);
  RF_CHECK(ft_.header(1) < mtu_, "header_bytes ", ft_.header(1), " must be smaller than mtu_bytes ", mtu_);
  lossless_ = cfg.lossless >= 0 ? cfg.lossless != 0 : lossless;
  fwd_.set_per_frame_relays(lossless_);
  spreads_ = cfg.ecmp_per_packet || cfg.ecmp_adaptive || cfg.ecmp_multipath;
  load_routing_ = cfg.ecmp_adaptive || cfg.ecmp_multipath;
  kind_base_ = eng_.register_handler(this);
  for (uint32_t k = 1; k < kNumSub; ++k) eng_.register_handler(this);
  changes_.attach(eng_, *this, fwd_, kind_base_ + kTopologyChange);
  ports_.resize(fwd_.num_ports());
  set_capacities();
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
  // The fluid's own time covers the bottleneck; the delay is the rest of what a lone message
  // (one copy: copies move side by side) takes frame by frame (Forwarding::
  // lone_packet_delay_ps), so a lone flow ends when the packet engine's does.
  const Bytes h = header_for(flows_.src[f], flows_.dst[f]);
  return fwd_.lone_packet_delay_ps(path, flows_.size_bytes[f] / flows_.copies[f], mtu_ - h, h);
}

double FlowNetwork::wire_bytes(uint32_t f) const {
  const Bytes h = header_for(flows_.src[f], flows_.dst[f]);
  const Bytes n = flows_.copies[f], size = flows_.size_bytes[f] / n, pp = mtu_ - h;
  return static_cast<double>(n * (size + (size + pp - 1) / pp * h));
}

bool FlowNetwork::same_route(uint32_t src, uint32_t dst, uint64_t key_a, uint64_t key_b) {
  const uint32_t a = net::ecmp_hash(cfg_.seed, 0, key_a), b = net::ecmp_hash(cfg_.seed, 0, key_b);
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
  const uint64_t i = flows_.next_id();
  net::check_flow(i, num_gpus(), src, dst, size, start_ps, eng_.now());
  RF_CHECK(copies >= 1, "flow ", i, ": copies must be at least 1");
  RF_CHECK(size <= std::numeric_limits<Bytes>::max() / copies, "flow ", i, ": ", copies, " copies of ", size,
           " bytes overflow");
  const uint32_t hash = net::ecmp_hash(cfg_.seed, i, ecmp_key);
  fetch_paths(src, dst, hash);  // (start_paths reads it soon after: its cache miss overlaps)
  RF_CHECK(fwd_.first_port(src, dst, hash) != kNone, "flow ", i, ": GPU ", dst, " is unreachable from GPU ",
           src);
  FlowRecords& t = flows_;
  const uint32_t f = t.acquire(copies, owner, src, dst, size * copies, start_ps, hash);
  if (flow_sub_.size() < t.size()) {
    flow_sub_.emplace_back();
    flow_delay_.emplace_back();
    flow_lag_.emplace_back();
  }
  t.sent_ps[f] = -1;
  t.copies[f] = copies;
  flow_sub_[f] = kNone;
  flow_delay_[f] = 0;
  return f;
}

void FlowNetwork::retire(uint32_t f) {
  FlowRecords& t = flows_;
  owners_.fold(t.owner[f], t.copies[f], t.size_bytes[f], t.end_ps[f] - t.start_ps[f]);
  if (record_) log_.append(t, f);
  t.release(f);
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
    begin_flow(i);  // (starting calls no observer: safe inside its callbacks)
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

SimTime FlowNetwork::start_lag(uint32_t f, uint32_t p) {
  // The packet engine's NIC (a GPU's NVLink port too) sends the frames of the flows
  // backlogged on it in turn, in the order they were posted, so of k flows posted at one
  // instant the j-th sends its first frame after the first frames of the j before it. Where
  // the flows go to different destinations (a mesh all-to-all), a destination's port gets its
  // first frame only when the senders' turns reach it: the ports of the destinations late in
  // every sender's order idle that long at the start, and end that much later, which an even
  // share from the start does not see. The flow's turn: begin_flow notes it on the ports
  // downstream, start_idle delivers the flow late by it where such a port bottlenecks it; its
  // rate is untouched (its own port stays busy, with the flows ahead of it in the turn).
  PortState& port = ports_[p];
  if (port.capacity <= 0) return 0;
  const SimTime now = eng_.now();
  if (port.turn_at != now) {
    port.turn_at = now;
    port.turn_bytes = 0;
  }
  const SimTime lag = engine::round_nearest(port.turn_bytes * kBitsPsPerByte / port.capacity);
  const Bytes h = header_for(flows_.src[f], flows_.dst[f]), pp = mtu_ - h;
  const Bytes size = flows_.size_bytes[f] / flows_.copies[f];
  port.turn_bytes += static_cast<double>((std::min(size, pp) + h) * flows_.copies[f]);
  return lag;
}

void FlowNetwork::begin_flow(uint32_t f) {
  // A flow starting at t sees every change at t, whichever was queued first (as the packet
  // backend's flows do): its turn and the ports that idle for it are those of its paths
  // after the change, not of paths a change at the same instant replaces at once.
  apply_due_changes();
  // (a message posted on its connection as the last one left takes that one's place: its
  // connection is streaming, no turn to wait for)
  const uint64_t handoffs = counters_.handoffs;
  start_flow(f);
  flow_lag_[f] = 0;
  const uint32_t s = flow_sub_[f];
  if (s == kNone || counters_.handoffs != handoffs || subs_[s].blocked || subs_[s].nhops == 0) return;
  // (its first port: the paths' ports are in order of first use, and all leave its GPU there)
  const Hop* hops = subs_[s].hops();
  const SimTime lag = start_lag(f, hops[0].port);
  flow_lag_[f] = lag;
  // Each port on its paths idles at the start until the earliest of the flows starting on it
  // now sends its first frame there (0 if it carried a flow already).
  const SimTime now = eng_.now();
  for (uint32_t h = 0; h < subs_[s].nhops; ++h) {
    PortState& port = ports_[hops[h].port];
    if (port.idle_at != now) {
      port.idle_at = now;
      port.idle_ps = port.subs.size() == 1 ? lag : 0;
      port.idle_full = -1;
    } else {
      port.idle_ps = std::min(port.idle_ps, lag);
    }
  }
}

SimTime FlowNetwork::start_idle(uint32_t s) {
  // The fluid has a port it saturates busy from the start; in packets the first frame of the
  // flows starting on it arrives its idle later, and its last one that much later. The
  // flow's own first port takes the turns (idle 0: its order is round_robin_lead's); a port
  // downstream where the flows of several senders meet idles while every sender serves
  // flows ahead of them. Only a port the flows saturate ends later for it: whether it does is
  // read when the first of them finishes sending (all still attached, rates unchanged).
  const Subflow& sub = subs_[s];
  if (flow_lag_[sub.flow] == 0) return 0;  // (a port idles the least turn among its flows)
  const SimTime start = flows_.start_ps[sub.flow];
  SimTime idle = 0;
  const Hop* hops = sub.hops();
  for (uint32_t h = 0; h < sub.nhops; ++h) {
    PortState& port = ports_[hops[h].port];
    if (port.idle_at != start || port.idle_ps <= idle) continue;
    if (port.idle_full < 0) {
      double load = 0;
      for (const auto& [t, hop] : port.subs) load += subs_[t].rate * subs_[t].hops()[hop].coef;
      port.idle_full = load >= port.capacity * (1 - 1e-9) ? 1 : 0;
    }
    if (port.idle_full > 0) idle = port.idle_ps;
  }
  return idle;
}

void FlowNetwork::start_flow(uint32_t f) {
  const double wire = wire_bytes(f);
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
      // (under load routing the delay of the idle paths: the subflow keeps the ones it has)
      flow_delay_[f] = delivery_delay(f, paths_of(flows_.src[f], flows_.dst[f], flows_.hash[f]));
      ++counters_.subflows;
      ++counters_.handoffs;
      schedule_finish(s);
      return;
    }
  }
  new_subflow(f, start_paths(f), wire);
}

uint32_t FlowNetwork::new_subflow(uint32_t f, PathSet& ps, double bytes) {
  // (the path set's ports and shares are read below, after the record is set up: fetched
  // now, their cache misses overlap with the record's)
  __builtin_prefetch(ps.ports.data());
  __builtin_prefetch(ps.coef.data());
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
    if (load_routing_) {
      if (sub_offered_.size() <= s) sub_offered_.resize(subs_.size());
      sub_offered_[s] = offered_rate(f);
      offer(s, +1);
    }
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
    if (local_refill()) release_rate(s);
    detach(s);
    if (load_routing_) offer(s, -1);
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
  unschedule_finish(s);
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
  flow_sent(f, round_robin_lead(s) - start_idle(s));
  if (handoff_ == s) {
    handoff_ = kNone;
    remove_subflow(s);
  }
}

SimTime FlowNetwork::round_robin_lead(uint32_t s) {
  // A port sends the frames of the flows backlogged on it in turn (the packet engine's NIC
  // arbitration: earliest first, FIFO among equals), so a flow's last frame leaves in the
  // round that ends it, ahead of what the flows behind it in that round send there. The
  // fluid, sharing the port evenly, ends it that much later; its last byte is taken to have
  // left that much earlier. Behind it: the last frame of each flow the fluid ends at this same
  // instant that the port serves after it (started later, or with it and created after it),
  // told before it or after it (the order the fluid tells them in is not the port's); and of
  // each flow started after it (or with it and created after it) that has bytes left, half a
  // frame: whether its turn falls after this flow's last frame or before it depends on the
  // phase of their turns, which the fluid does not know. A flow started at this instant (a
  // connection's next message, posted as its last one left) comes after the round: the
  // port serves the flows already backlogged first.
  const Subflow& sub = subs_[s];
  const uint32_t b = sub.bneck;
  if (b == kNone || ports_[b].capacity <= 0) return 0;
  const PortState& port = ports_[b];
  const SimTime now = eng_.now();
  const uint32_t f = sub.flow;
  const SimTime start = flows_.start_ps[f];
  const uint64_t id = flows_.id[f];
  auto last_frames = [&](uint32_t g) {
    const Bytes h = header_for(flows_.src[g], flows_.dst[g]), pp = mtu_ - h;
    const Bytes size = flows_.size_bytes[g] / flows_.copies[g];
    return static_cast<double>((size % pp == 0 ? pp : size % pp) + h) * flows_.copies[g];
  };
  auto after = [&](SimTime gs, uint64_t gid) { return gs > start || (gs == start && gid > id); };
  if (told_at_ != now) {
    told_.clear();
    told_at_ = now;
  }
  if (told_port_.size() < ports_.size()) told_port_.resize(ports_.size());
  ToldList& told = told_port_[b];
  if (told.at != now) told = ToldList{now, kNone, kNone};
  double behind = 0;  // wire bytes sent after its last frame
  for (uint32_t i = told.first; i != kNone; i = told_[i].next)
    if (after(told_[i].start, told_[i].id)) behind += told_[i].last;
  // Only the flows bottlenecked at b count: port.bnecks of them, s among them. The scan
  // stops once it has met the others (the rest of the list adds nothing, so the sum and its
  // order are those of the whole scan), and fetches the records and start times of the
  // entries a few places on: at scale each is a cache miss, and a port's list is long.
  const auto* const entries = port.subs.data();
  const size_t n = port.subs.size();
  size_t others = port.bnecks > 0 ? port.bnecks - 1 : n;
  constexpr size_t kAhead = 8;
  for (size_t k = 0; k < n && others > 0; ++k) {
    if (k + kAhead < n) {
      // (the record's first line, and the lines of its rate and its last settle)
      const char* rec = reinterpret_cast<const char*>(&subs_[entries[k + kAhead].first]);
      __builtin_prefetch(rec);
      __builtin_prefetch(rec + offsetof(Subflow, rate));
      __builtin_prefetch(rec + offsetof(Subflow, last));
    }
    if (k + kAhead / 2 < n) {
      const uint32_t g = subs_[entries[k + kAhead / 2].first].flow;
      __builtin_prefetch(&flows_.start_ps[g]);
      __builtin_prefetch(&flows_.id[g]);
    }
    const uint32_t t = entries[k].first;
    const Subflow& o = subs_[t];
    if (t == s || !o.active || o.bneck != b) continue;
    --others;
    const uint32_t g = o.flow;
    const SimTime gs = flows_.start_ps[g];
    if (!after(gs, flows_.id[g]) || gs == now) continue;
    if (o.finish_at == now) {
      behind += last_frames(g);
      continue;
    }
    const double left = o.remaining - o.rate * static_cast<double>(now - o.last) / kBitsPsPerByte;
    behind += 0.5 * std::min(static_cast<double>(mtu_), std::max(0.0, left / o.weight)) * o.weight;
  }
  const auto at = static_cast<uint32_t>(told_.size());
  told_.push_back({start, id, last_frames(f), kNone});
  (told.last == kNone ? told.first : told_[told.last].next) = at;
  told.last = at;
  return engine::round_nearest(behind * kBitsPsPerByte / port.capacity);
}

void FlowNetwork::flow_sent(uint32_t f, SimTime lead) {
  flows_.sent_ps[f] = eng_.now() - std::max<SimTime>(0, lead);
  eng_.schedule(eng_.now() + std::max<SimTime>(0, flow_delay_[f] - lead), f, kind_base_ + kDone);
  if (observer_ != nullptr) observer_->on_flow_sent(f);
}

void FlowNetwork::share_by_input(const std::vector<uint32_t>& subs, const std::vector<uint32_t>& ports) {
  // A switch port queues the frames of every link feeding it in one FIFO, and PFC pauses
  // each of those links as its bytes inside the switch pass XOFF: the backlogged inputs take
  // turns, each link an equal share of the port however many flows it carries (PFC's
  // per-port, not per-flow, fairness; DCQCN would even it out per flow, but the pauses come
  // first). The fill above shares a port evenly among its flows. Here a flow's input is the
  // link it reaches its arbitration port by: the first switch port on its path, from the
  // second on, that is its bottleneck or that only flows bottlenecked there cross, saturated
  // (a port that passes the same flows on cannot re-share them: the one before it did). At
  // that port, N copies in G input groups: a group of n copies takes 1/G of it where an
  // even share gave it n/N, so its flows weigh N/(G n) times their copies (1 when the inputs
  // carry alike: the even share stands). The component is filled again with those weights,
  // and again while they move (at most kRounds fills). A NIC serves its own flows in turn
  // (its first port keeps the even share); a flow spread over several paths has no one
  // input and keeps its weight.
  //
  // Weights that come back to those of the fill before last (a bottleneck that moves away
  // under the new weights and back under the old ones) would alternate between the two
  // fills to the last round: the fill the rounds would end on is known then, and is taken
  // as it is (kept from when it was made) without filling again.
  Fill& w = fill_;
  const size_t ns = subs.size(), np = ports.size();
  if (at_switch_.size() != ports_.size()) {
    at_switch_.resize(ports_.size());
    for (uint32_t p = 0; p < ports_.size(); ++p) at_switch_[p] = fwd_.nodes()[fwd_.channel(p).node].gpu < 0;
  }
  base_weight_.assign(w.weight.begin(), w.weight.begin() + static_cast<ptrdiff_t>(ns));
  // per flow: it has one path (every coefficient 1), so one input
  single_.resize(ns);
  for (size_t i = 0; i < ns; ++i) {
    bool one = true;
    for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) one = one && w.sub_coef[k] == 1.0;
    single_[i] = one;
  }
  // per local port: flows that it arbitrates (a count, then where its run starts in order_);
  // per input port: the arbitration port it was last counted for (stamp) and its copies there
  group_count_.assign(np + 1, 0);
  input_stamp_.assign(np, 0);
  input_copies_.resize(np);
  uint32_t stamp = 0;
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    // per port: the one port bottlenecking every flow through it, if one does (else kNone)
    pass_to_.assign(np, kNone);
    for (size_t lp = 0; lp < np; ++lp) {
      const uint32_t lo = lp ? w.port_end[lp - 1] : 0, hi = w.port_end[lp];
      if (lo == hi || !at_switch_[ports[lp]] || w.left[lp] > 1e-9 * ports_[ports[lp]].capacity) continue;
      uint32_t x = w.bneck[w.port_sub[lo]];
      for (uint32_t k = lo + 1; k < hi && x != kNone; ++k)
        if (w.bneck[w.port_sub[k]] != x) x = kNone;
      pass_to_[lp] = x;
    }
    groups_.clear();  // (arbitration port << 32 | input port, flow), local indices, in flow order
    for (size_t i = 0; i < ns; ++i) {
      const uint32_t b = w.bneck[i];
      if (b == kNone || !single_[i]) continue;
      const uint32_t lo = i ? w.sub_end[i - 1] : 0, hi = w.sub_end[i];
      for (uint32_t k = lo + 1; k < hi; ++k) {
        const uint32_t lp = w.sub_port[k];
        if (pass_to_[lp] != b && (lp != b || !at_switch_[ports[lp]])) continue;
        groups_.emplace_back((uint64_t{lp} << 32) | w.sub_port[k - 1], static_cast<uint32_t>(i));
        ++group_count_[lp + 1];
        break;
      }
    }
    // the groups by arbitration port (a counting sort: the copies are whole numbers, so their
    // sums are exact in any order)
    for (size_t lp = 0; lp < np; ++lp) group_count_[lp + 1] += group_count_[lp];
    order_.resize(groups_.size());
    for (size_t j = 0; j < groups_.size(); ++j)
      order_[group_count_[groups_[j].first >> 32]++] = static_cast<uint32_t>(j);
    new_weight_.assign(base_weight_.begin(), base_weight_.end());
    for (size_t a = 0, lp = 0; a < groups_.size(); ++lp) {
      const size_t z = group_count_[lp];  // (the run of port lp: [a, z))
      if (z == a) continue;
      ++stamp;
      double copies = 0;
      uint32_t inputs = 0;
      for (size_t j = a; j < z; ++j) {
        const auto& [key, i] = groups_[order_[j]];
        const auto in = static_cast<uint32_t>(key);
        if (input_stamp_[in] != stamp) {
          input_stamp_[in] = stamp;
          input_copies_[in] = 0;
          ++inputs;
        }
        input_copies_[in] += base_weight_[i];
        copies += base_weight_[i];
      }
      for (size_t j = a; j < z; ++j) {
        const auto& [key, i] = groups_[order_[j]];
        const double scale = copies / (inputs * input_copies_[static_cast<uint32_t>(key)]);
        new_weight_[i] = base_weight_[i] * scale;
      }
      a = z;
    }
    std::fill(group_count_.begin(), group_count_.end(), 0u);
    if (std::equal(new_weight_.begin(), new_weight_.end(), w.weight.begin())) return;
    if (round > 0 && new_weight_ == prev_weight_) {
      // back to the weights of the fill before last: the rounds left would alternate between
      // it and the current one, and end on it when their number is odd
      if ((kRounds - round) % 2 == 1) {
        std::swap(w.rate, prev_.rate);
        std::swap(w.bneck, prev_.bneck);
        std::swap(w.left, prev_.left);
        std::swap(w.plevel, prev_.plevel);
        std::copy(prev_weight_.begin(), prev_weight_.end(), w.weight.begin());
      }
      return;
    }
    // keep this fill (its weights and outputs) in case the weights come back to it
    prev_weight_.assign(w.weight.begin(), w.weight.begin() + static_cast<ptrdiff_t>(ns));
    std::swap(w.rate, prev_.rate);
    std::swap(w.bneck, prev_.bneck);
    std::swap(w.left, prev_.left);
    std::swap(w.plevel, prev_.plevel);
    std::copy(new_weight_.begin(), new_weight_.end(), w.weight.begin());
    water_fill(subs, ports);
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
    // (load routing: sampled again against the others' load, its own taken back meanwhile)
    const bool offers = load_routing_ && !subs_[s].blocked;
    if (offers) offer(s, -1);
    PathSet& ps = load_routing_ ? start_paths(f) : paths_of(flows_.src[f], flows_.dst[f], flows_.hash[f]);
    if (offers) offer(s, +1);
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
    new_subflow(f, load_routing_ ? ps : paths_of(flows_.src[f], flows_.dst[f], flows_.hash[f]), left);
  }
  // capacities changed too: every component is recomputed
  for (uint32_t p = 0; p < ports_.size(); ++p)
    if (!ports_[p].subs.empty()) seed_ports_.push_back(p);
  request_recompute();
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
        begin_flow(f);
      }
      break;
    }
    case kSent: {
      const Subflow& sf = subs_[ev.target];
      if (!sf.active || sf.finish_at != ev.time) {
        ++counters_.stale_finishes;
        break;
      }
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
    case kTopologyChange:
      changes_.apply(ev.target, [this] { topology_changed(); });
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
  order.reserve(log_.size() + flows_.live_flows());
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
