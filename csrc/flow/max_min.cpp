// max_min.cpp: the flow backend's rates (see flow_network.hpp for the model).
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
// bottleneck requests nothing (remove_subflow). With many flows sending (local_min_), a
// lossy recomputation first refills only the flows the change can reach and checks the
// result against max-min's bottleneck characterisation (recompute_local), falling back to
// the component. Under PFC (lossless) the component is filled whole and then reweighted by
// input link (share_by_input, flow_network.cpp), which a local check does not cover.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>

#include "engine/check.hpp"
#include "flow/flow_network.hpp"

namespace rfabric::flow {

namespace {
/// Rates within this relative difference count as unchanged (summation order only).
constexpr double kRateEps = 1e-12;

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

uint32_t FlowNetwork::next_mark() {
  if (static_cast<uint32_t>(++mark_) == 0) {
    // (the marks keep 32 bits: once in 2^32 uses they are all cleared)
    std::fill(sub_mark_.begin(), sub_mark_.end(), Mark{});
    std::fill(port_mark_.begin(), port_mark_.end(), Mark{});
    ++mark_;
  }
  if (sub_mark_.size() < subs_.size()) sub_mark_.resize(subs_.size());
  if (port_mark_.size() < ports_.size()) port_mark_.resize(ports_.size());
  return static_cast<uint32_t>(mark_);
}

void FlowNetwork::release_rate(uint32_t s) {
  const Subflow& sf = subs_[s];
  if (used_.size() < ports_.size()) used_.resize(ports_.size(), 0.0);
  const Hop* hops = sf.hops();
  for (size_t h = 0; h < sf.nhops; ++h) {
    const uint32_t p = hops[h].port;
    // (exactly 0 once no subflow crosses it: no rounding residue accumulates)
    used_[p] = ports_[p].subs.size() <= 1 ? 0.0 : used_[p] - sf.rate * hops[h].coef;
  }
}

void FlowNetwork::recompute() {
  recompute_pending_ = false;
  ++counters_.recomputes;
  if (local_refill()) {
    if (used_.size() < ports_.size()) used_.resize(ports_.size(), 0.0);
    if (plevel_.size() < ports_.size()) plevel_.resize(ports_.size(), -1.0);
  }
  if (local_refill() && active_.size() >= local_min_ && path_cache_clears_ == local_clears_ &&
      recompute_local()) {
    seed_subs_.clear();
    seed_ports_.clear();
    return;
  }
  local_clears_ = path_cache_clears_;
  const uint32_t mark = next_mark();
  // The walk gathers the component into dense local arrays (Fill): each subflow's ports as
  // local indices with their coefficients, each port's subflows in the order of its list;
  // the fill then reads only those, not the subflow and port records spread over the heap.
  // The arrays are buffers that only grow (written through pointers, their sizes kept here):
  // a push_back per hop stored the vector's end back to memory at every step.
  Fill& w = fill_;
  std::vector<uint32_t>& comp_subs = comp_subs_;
  std::vector<uint32_t>& comp_ports = comp_ports_;
  comp_subs.clear();
  comp_ports.clear();
  Mark* const port_mark = port_mark_.data();
  Mark* const sub_mark = sub_mark_.data();
  size_t nhop = 0;  // entries of sub_port / sub_coef written
  auto grow = [](auto& v, size_t need) {
    if (need > v.size()) v.resize(std::max(need, 2 * v.size()));
  };
  auto visit_port = [&](uint32_t p) {
    Mark& m = port_mark[p];
    if (m.mark == mark) return m.local;
    m.mark = mark;
    m.local = static_cast<uint32_t>(comp_ports.size());
    comp_ports.push_back(p);
    return m.local;
  };
  auto visit_sub = [&](uint32_t s) {
    Mark& m = sub_mark[s];
    if (m.mark == mark) return m.local;
    m.mark = mark;
    const auto i = static_cast<uint32_t>(comp_subs.size());
    m.local = i;
    comp_subs.push_back(s);
    const Subflow& sf = subs_[s];
    grow(w.weight, i + 1);
    grow(w.cap, i + 1);
    grow(w.sub_end, i + 1);
    w.weight[i] = sf.weight;
    w.cap[i] = sf.cap;
    const Hop* hops = sf.hops();
    const size_t n = sf.nhops;
    grow(w.sub_port, nhop + n);
    grow(w.sub_coef, nhop + n);
    uint32_t* const port_out = w.sub_port.data() + nhop;
    double* const coef_out = w.sub_coef.data() + nhop;
    for (size_t h = 0; h < n; ++h) {
      port_out[h] = visit_port(hops[h].port);
      coef_out[h] = hops[h].coef;
    }
    nhop += n;
    w.sub_end[i] = static_cast<uint32_t>(nhop);
    return i;
  };
  // The walk is bound by memory latency on a large component (subflow records and marks
  // scattered over the heap, hops past kInlineHops in a vector of their own, port marks):
  // what the entries a few places ahead in a port's list (or in the seeds: the subflows
  // started at this instant, their records long out of cache when many start at once) will
  // read is fetched in stages while the current one is read: their marks and records
  // (kAhead), the hops of those not yet visited (kAhead / 2), the marks of those hops' ports
  // (kAhead / 4).
  constexpr size_t kAhead = 8;
  auto fetch_hops = [&](uint32_t t) {
    if (sub_mark[t].mark == mark) return;
    const Subflow& sf = subs_[t];
    const char* hops = reinterpret_cast<const char*>(sf.hops());
    const size_t bytes = sizeof(Hop) * sf.nhops;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(hops + b);
  };
  auto fetch_port_marks = [&](uint32_t t) {
    if (sub_mark[t].mark == mark) return;
    const Subflow& sf = subs_[t];
    const Hop* hops = sf.hops();
    for (size_t h = 0; h < sf.nhops; ++h) __builtin_prefetch(&port_mark[hops[h].port]);
  };
  {
    const uint32_t* const seeds = seed_subs_.data();
    const size_t n = seed_subs_.size();
    for (size_t k = 0; k < n; ++k) {
      if (k + kAhead < n) {
        __builtin_prefetch(&sub_mark[seeds[k + kAhead]]);
        __builtin_prefetch(&subs_[seeds[k + kAhead]]);
      }
      if (k + kAhead / 2 < n) fetch_hops(seeds[k + kAhead / 2]);  // (a subflow gone has no hops)
      if (k + kAhead / 4 < n) fetch_port_marks(seeds[k + kAhead / 4]);
      const Subflow& sf = subs_[seeds[k]];
      if (sf.active && !sf.blocked) visit_sub(seeds[k]);
    }
  }
  for (const uint32_t p : seed_ports_) visit_port(p);
  seed_subs_.clear();
  seed_ports_.clear();
  // (every subflow in a port's list is active and has a path: blocked ones are not attached)
  size_t nentry = 0;  // entries of port_sub written
  for (size_t i = 0; i < comp_ports.size(); ++i) {
    const auto& list = ports_[comp_ports[i]].subs;
    if (i + 2 < comp_ports.size()) __builtin_prefetch(&ports_[comp_ports[i + 2]]);
    if (i + 1 < comp_ports.size()) __builtin_prefetch(ports_[comp_ports[i + 1]].subs.data());
    const auto* const entries = list.data();
    const size_t n = list.size();
    grow(w.port_sub, nentry + n);
    for (size_t k = 0; k < n; ++k) {
      if (k + kAhead < n) {
        const uint32_t t = entries[k + kAhead].first;
        __builtin_prefetch(&sub_mark[t]);
        const char* rec = reinterpret_cast<const char*>(&subs_[t]);
        __builtin_prefetch(rec);
        __builtin_prefetch(rec + offsetof(Subflow, spill));
      }
      if (k + kAhead / 2 < n) fetch_hops(entries[k + kAhead / 2].first);
      if (k + kAhead / 4 < n) fetch_port_marks(entries[k + kAhead / 4].first);
      const uint32_t local = visit_sub(entries[k].first);  // (may grow sub_port, not port_sub)
      w.port_sub[nentry++] = local;
    }
    grow(w.port_end, i + 1);
    w.port_end[i] = static_cast<uint32_t>(nentry);
  }
  if (comp_subs.empty()) return;
  counters_.component_subflows += comp_subs.size();
  counters_.max_component = std::max<uint64_t>(counters_.max_component, comp_subs.size());
  w.residual = false;
  water_fill(comp_subs, comp_ports);
  if (lossless_) share_by_input(comp_subs, comp_ports);
  commit_rates();
}

void FlowNetwork::commit_rates() {
  // The filled rates and bottlenecks of comp_subs_ (fill_), into the subflows; where the
  // local refill may run, their ports' usage (used_) and bottleneck levels (plevel_) with them.
  const Fill& w = fill_;
  const std::vector<uint32_t>& comp_subs = comp_subs_;
  const std::vector<uint32_t>& comp_ports = comp_ports_;
  constexpr size_t kAhead = 8;
  const bool track = local_refill();
  if (track)
    for (size_t lp = 0; lp < comp_ports.size(); ++lp)
      if (w.plevel[lp] >= 0) plevel_[comp_ports[lp]] = w.plevel[lp];
  const SimTime now = eng_.now();
  for (size_t i = 0; i < comp_subs.size(); ++i) {
    if (i + kAhead < comp_subs.size()) {
      // (the record's first line, and the line of its rate and finish it compares below)
      const char* rec = reinterpret_cast<const char*>(&subs_[comp_subs[i + kAhead]]);
      __builtin_prefetch(rec);
      __builtin_prefetch(rec + offsetof(Subflow, rate));
    }
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
    if (track) {
      const Hop* hops = sf.hops();
      for (size_t h = 0; h < sf.nhops; ++h) used_[hops[h].port] += (r - sf.rate) * hops[h].coef;
    }
    sf.rate = r;
    ++counters_.rate_updates;
    schedule_finish(comp_subs[i]);
  }
}

bool FlowNetwork::recompute_local() {
  // The max-min allocation is characterised by its bottlenecks: it is feasible, and every
  // flow crosses a saturated port where no other flow has a higher level (rate / weight), or
  // sits at its own ceiling. A change (a flow starting, or one leaving a port that is some
  // flow's bottleneck) can break that only for a few flows of a large component: the new
  // ones, and those whose bottleneck the leaver freed. So refill just those (the region),
  // each port giving them what the flows outside it leave (used_), the outside flows keeping
  // their rates; then check the characterisation where the region's rates moved, and grow
  // the region by the outside flows it fails for: those whose bottleneck the region left
  // unsaturated or outran, and those at a region flow's bottleneck with a higher level. When
  // nothing fails every flow satisfies it, so the rates are the component's max-min rates
  // (to the tolerance below, and the rounding of a different summation order). A region
  // that grows past half of the flows sending, or keeps growing, is given up: the
  // caller recomputes the component. Where a flow has several saturated ports at its level
  // (multipath flows often do), which one is its bottleneck is a tie: the outside flows
  // keep theirs, where the component's refill picks the first its heap pops. The rates are
  // the same; round_robin_lead reads the bottleneck, so the flows' ends can differ.
  constexpr double kTol = 1e-10;
  constexpr int kMaxRounds = 40;
  Fill& w = fill_;
  std::vector<uint32_t>& region = comp_subs_;
  std::vector<uint32_t>& rports = comp_ports_;
  region.clear();
  const uint32_t sub_in = next_mark();  // the region's subflows carry this mark
  Mark* const sub_mark = sub_mark_.data();
  auto add = [&](uint32_t s) {
    Mark& m = sub_mark[s];
    if (m.mark == sub_in) return;
    m.mark = sub_in;
    region.push_back(s);
  };
  for (const uint32_t s : seed_subs_)
    if (subs_[s].active && !subs_[s].blocked) add(s);
  for (const uint32_t p : seed_ports_)
    for (const auto& [t, hop] : ports_[p].subs)
      if (subs_[t].bneck == p) add(t);
  if (region.empty()) return true;
  const size_t limit = std::max<size_t>(64, active_.size() / 2);
  for (int round = 0; round < kMaxRounds; ++round) {
    if (region.size() > limit) return false;
    // gather the region: its subflows' hops as local ports, each port's region subflows
    const uint32_t port_in = next_mark();
    Mark* const port_mark = port_mark_.data();
    rports.clear();
    const size_t ns = region.size();
    auto grow = [](auto& v, size_t need) {
      if (need > v.size()) v.resize(std::max(need, 2 * v.size()));
    };
    grow(w.weight, ns);
    grow(w.cap, ns);
    grow(w.sub_end, ns);
    size_t nhop = 0;
    for (size_t i = 0; i < ns; ++i) {
      const Subflow& sf = subs_[region[i]];
      w.weight[i] = sf.weight;
      w.cap[i] = sf.cap;
      const Hop* hops = sf.hops();
      grow(w.sub_port, nhop + sf.nhops);
      grow(w.sub_coef, nhop + sf.nhops);
      for (size_t h = 0; h < sf.nhops; ++h) {
        Mark& m = port_mark[hops[h].port];
        if (m.mark != port_in) {
          m.mark = port_in;
          m.local = static_cast<uint32_t>(rports.size());
          rports.push_back(hops[h].port);
        }
        w.sub_port[nhop + h] = m.local;
        w.sub_coef[nhop + h] = hops[h].coef;
      }
      nhop += sf.nhops;
      w.sub_end[i] = static_cast<uint32_t>(nhop);
    }
    const size_t np = rports.size();
    grow(w.port_end, np);
    grow(w.port_sub, nhop);
    loc_old_.assign(np, 0.0);
    loc_nb_.assign(np, 0);
    std::fill(w.port_end.begin(), w.port_end.begin() + static_cast<std::ptrdiff_t>(np), 0u);
    for (size_t i = 0; i < ns; ++i) {
      const Subflow& sf = subs_[region[i]];
      for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) {
        const uint32_t lp = w.sub_port[k];
        ++w.port_end[lp];
        loc_old_[lp] += sf.rate * w.sub_coef[k];
        loc_nb_[lp] += sf.bneck == rports[lp];
      }
    }
    // (counts to first entries, then each port's entries in region order: port_end ends at
    // each port's end)
    uint32_t at = 0;
    for (size_t lp = 0; lp < np; ++lp) {
      const uint32_t n = w.port_end[lp];
      w.port_end[lp] = at;
      at += n;
    }
    for (size_t i = 0; i < ns; ++i)
      for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k)
        w.port_sub[w.port_end[w.sub_port[k]]++] = static_cast<uint32_t>(i);
    // what the flows outside the region leave of each port
    w.port_cap.resize(np);
    for (size_t lp = 0; lp < np; ++lp) {
      const uint32_t p = rports[lp];
      const double others = used_[p] - loc_old_[lp];
      w.port_cap[lp] = std::max(0.0, ports_[p].capacity - std::max(0.0, others));
    }
    w.residual = true;
    water_fill(region, rports);
    w.residual = false;
    // the characterisation where the region's rates moved
    loc_new_.assign(np, 0.0);
    loc_max_.assign(np, 0.0);
    loc_bmin_.assign(np, std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < ns; ++i) {
      const double level = w.rate[i] / w.weight[i];
      for (uint32_t k = i ? w.sub_end[i - 1] : 0; k < w.sub_end[i]; ++k) {
        const uint32_t lp = w.sub_port[k];
        loc_new_[lp] += w.rate[i] * w.sub_coef[k];
        loc_max_[lp] = std::max(loc_max_[lp], level);
      }
      if (w.bneck[i] != kNone) loc_bmin_[w.bneck[i]] = std::min(loc_bmin_[w.bneck[i]], level);
    }
    const size_t before = region.size();
    for (size_t lp = 0; lp < np; ++lp) {
      const uint32_t p = rports[lp];
      const PortState& port = ports_[p];
      // outside flows whose bottleneck this is: still saturated, the region not above them
      if (port.bnecks > loc_nb_[lp]) {
        const double level = plevel_[p];
        const double usage = used_[p] - loc_old_[lp] + loc_new_[lp];
        const bool holds = usage >= port.capacity * (1 - kTol) && loc_max_[lp] <= level * (1 + kTol) + 1e-300;
        if (!holds)
          for (const auto& [t, hop] : port.subs)
            if (subs_[t].bneck == p) add(t);
      }
      // a region flow's bottleneck: no outside flow above it
      const double floor = loc_bmin_[lp];
      if (floor < std::numeric_limits<double>::infinity())
        for (const auto& [t, hop] : port.subs) {
          if (sub_mark[t].mark == sub_in) continue;
          const Subflow& o = subs_[t];
          if (o.rate / o.weight > floor * (1 + kTol) + 1e-300) add(t);
        }
    }
    if (region.size() == before) {
      counters_.component_subflows += ns;
      counters_.max_component = std::max<uint64_t>(counters_.max_component, ns);
      commit_rates();
      return true;
    }
  }
  return false;
}

void FlowNetwork::schedule_finish(uint32_t s) {
  Subflow& sf = subs_[s];
  if (sf.rate <= 0) {
    unschedule_finish(s);
    return;
  }
  // Saturates: a finish past the end of int64 time is queued at kLastFinish instead of
  // wrapping, and reaching it (the rate never rose again) is an error in kSent.
  const SimTime now = eng_.now();
  const double ps = std::ceil(sf.remaining * kBitsPsPerByte / sf.rate);
  const double room = static_cast<double>(kLastFinish - std::min(now, kLastFinish));
  const SimTime at = ps < room ? now + static_cast<SimTime>(ps) : kLastFinish;
  // The same instant as the event queued: that one stands, in its place among the events
  // of that instant (a second one would only be dropped as stale after it).
  if (at == sf.finish_at && at > now) return;
  unschedule_finish(s);
  sf.finish_at = at;
  sf.finish_ticket = eng_.schedule_ticket(at, s, kind_base_ + kSent);
}

void FlowNetwork::unschedule_finish(uint32_t s) {
  // The finish event queued for s, out of the queue when it is near (a rate change leaves it
  // stale: about a third of a large run's events were such, dropped by kSent); one still due
  // later (finish_at > now) is queued, one at now is the event running.
  Subflow& sf = subs_[s];
  if (sf.finish_at > eng_.now())
    counters_.finishes_cancelled += eng_.cancel(sf.finish_at, s, kind_base_ + kSent, sf.finish_ticket);
  sf.finish_at = -1;
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
  w.plevel.assign(np, -1.0);
  for (size_t lp = 0; lp < np; ++lp) {
    w.left[lp] = w.residual ? w.port_cap[lp] : ports_[ports[lp]].capacity;
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
    w.plevel[lp] = port_level;
    // (freeze() pushes nothing; the port's own list is not changed by it)
    for (uint32_t k = lp ? w.port_end[lp - 1] : 0; k < w.port_end[lp]; ++k)
      if (!w.frozen[w.port_sub[k]]) freeze(w.port_sub[k], port_level, lp);
  }
}

}  // namespace rfabric::flow
