// fluid_dynamics.cpp: the dynamic mode's dynamics (see fluid_network.hpp for the model):
// DCQCN on expected values, the step's plan over the ports (FIFO queues, PFC, ECN) and its
// commit. Flows joining a step and quiescence (the updates between plans) are
// fluid_local.cpp's; flows, topology changes, events and results fluid_network.cpp's.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/check.hpp"
#include "fabric/roce_dcqcn.hpp"
#include "flow/fluid_network.hpp"

namespace rfabric::flow {

using engine::kNever;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
/// Stepping that moves no byte for this long with bytes queued stops (a PFC deadlock): the
/// flows stay unfinished, as the packet engine's would.
constexpr SimTime kStallPs = 1'000'000'000;  // 1 ms
}  // namespace

// ---- DCQCN (roce.cpp, on expected values) ----

void FluidNetwork::increase(Source& s) {
  const double rai = static_cast<double>(cfg_.dcqcn_rai_bps), rhai = static_cast<double>(cfg_.dcqcn_rhai_bps);
  const int lo = std::min(s.t_stage, s.bc_stage), hi = std::max(s.t_stage, s.bc_stage);
  if (hi < cfg_.dcqcn_f) {
    // fast recovery: halve the distance to the target
  } else if (lo > cfg_.dcqcn_f) {
    s.rt += (lo - cfg_.dcqcn_f) * rhai;
  } else {
    s.rt += rai;
  }
  s.rt = std::min(s.rt, s.line);
  s.rc = std::min(s.line, (s.rt + s.rc) / 2);
  if (s.line - s.rc < net::kRoceDcqcn.line_rate_snap_bps) s.rc = s.line;
}

void FluidNetwork::fire_timers(Source& s, SimTime now) {
  while (s.timer_deadline <= now) {
    if (s.sent || (s.rc >= s.line && s.rt >= s.line)) {
      s.timer_deadline = kNever;
      return;
    }
    ++s.t_stage;
    increase(s);
    s.timer_deadline += cfg_.dcqcn_timer_ps;
    if (s.rc >= s.line && s.rt >= s.line) s.timer_deadline = kNever;
  }
}

void FluidNetwork::cnp(uint32_t f, SimTime at) {
  Source& s = src_[f];
  const double g = cfg_.dcqcn_g;
  const int64_t periods = (at - s.alpha_time) / cfg_.dcqcn_timer_ps;
  if (periods > 0) s.alpha *= std::pow(1.0 - g, static_cast<double>(periods));
  s.alpha = (1.0 - g) * s.alpha + g;
  s.alpha_time = at;
  s.rt = s.rc;
  s.rc = std::max(static_cast<double>(cfg_.dcqcn_min_rate_bps), s.rc * (1.0 - s.alpha / 2));
  s.t_stage = s.bc_stage = 0;
  s.byte_count = 0;
  s.timer_deadline = at + cfg_.dcqcn_timer_ps;
  ++counters_.cnps;
}

double FluidNetwork::mark_prob(const PortState& p) const {
  // Network::mark_ecn: RED on the bytes queued
  const double q = p.queued;
  if (q <= p.kmin) return 0.0;
  if (q >= p.kmax) return 1.0;
  return ecn_pmax_ * (q - p.kmin) / (p.kmax - p.kmin);
}

// ---- the plan and its commit ----

void FluidNetwork::commit_lane(uint32_t l, SimTime to) {
  Lane& ln = lanes_[l];
  if (!planned_ || ln.blocked || to <= ln.t) return;
  const double scale = static_cast<double>(to - ln.t) / static_cast<double>(plan_step_);
  ln.t = to;
  const size_t n = ln.ports.size();
  if (n == 0) return;
  Source& s = src_[ln.flow];
  Hop* const x = ln.hop.data();
  const double sent = std::min(ln.backlog, x[0].dep * scale);
  ln.backlog -= sent;
  ports_[ln.ports[0]].bytes += sent;
  port_marks_[ln.ports[0]] += sent / static_cast<double>(mtu_) * ports_[ln.ports[0]].pm;
  for (size_t h = 1; h < n; ++h) {
    const double d = x[h].dep * scale;
    const double q = x[h].q + x[h].arr * scale - d;
    x[h].q = q > 0 ? q : 0.0;
    ports_[ln.ports[h]].bytes += d;
    port_marks_[ln.ports[h]] += d / static_cast<double>(mtu_) * ports_[ln.ports[h]].pm;
  }
  const double got = x[n - 1].dep * scale;
  ln.delivered = std::min(ln.wire, ln.delivered + got);
  if (ln.wire - ln.delivered < tolerance(ln.wire)) {
    // all there but rounding (the sums of a few thousand steps' shares)
    ln.delivered = ln.wire;
    ln.backlog = 0;
    for (Hop& y : ln.hop) y.q = 0.0;
  } else if (ln.backlog < tolerance(ln.wire)) {
    ln.backlog = 0;
  }
  // DCQCN's byte counter (rate increase per dcqcn_byte_counter bytes sent below the line rate)
  if (s.rc < s.line && sent > 0) {
    s.byte_count += sent;
    const double bc = static_cast<double>(cfg_.dcqcn_byte_counter);
    while (s.byte_count >= bc && s.rc < s.line) {
      s.byte_count -= bc;
      ++s.bc_stage;
      increase(s);
    }
  }
  // ECN: marked frames reaching the receiver; a CNP once one is due and the interval passed
  const double marked = got / static_cast<double>(mtu_) * (1.0 - ln.unmarked);
  counters_.ecn_marks += marked;
  if (marked > 0 && to - s.last_cnp >= cfg_.dcqcn_cnp_interval_ps) {
    s.marks += marked;
    if (s.marks >= 1.0 && s.cnp_at == kNever) {
      s.marks = 0;
      s.last_cnp = to;
      s.cnp_at = to + s.cnp_delay;
    }
  }
}

void FluidNetwork::commit() {
  const SimTime now = eng_.now();
  if (committed_ == now) return;
  committed_ = now;
  for (const uint32_t f : active_) {
    Source& s = src_[f];
    double backlog = 0, undelivered = 0;
    for (const uint32_t l : s.lanes) {
      commit_lane(l, now);
      backlog += lanes_[l].backlog;
      undelivered += lanes_[l].wire - lanes_[l].delivered;
    }
    // the progress events the plan queued hold only if the plan's rates held until them
    if (!s.sent && backlog > tolerance(s.wire)) s.sent_at = -1;
    if (!s.delivered && undelivered > tolerance(s.wire)) s.done_at = -1;
  }
  if (stepping_) counters_.stepped_ps += now - plan_t_;
  if (plan_len_ != kNever) plan_len_ = std::max<SimTime>(0, plan_t_ + plan_len_ - now);
  plan_t_ = now;
}

void FluidNetwork::request_plan() {
  const SimTime now = eng_.now();
  if (plan_at_ == now && plan_pending_) return;
  plan_at_ = now;
  plan_pending_ = true;
  eng_.schedule(now, 0, kind_base_ + kPlan);
}

void FluidNetwork::rebuild_ports() {
  // Each port's (lane, hop) list, and the step's order: a topological order of the ports
  // along the lanes' paths (Kahn's; a cycle is broken at its lowest port id), so that what
  // leaves a port in a step reaches the next one in the same step.
  for (const uint32_t p : order_) ports_[p].lanes.clear();
  for (const Lane& ln : lanes_)
    for (const uint32_t p : ln.ports) {
      ports_[p].lanes.clear();
      ports_[p].sources = 0;
    }
  order_.clear();
  std::vector<uint32_t>& touched = touched_;
  touched.clear();
  if (indeg_.size() < ports_.size()) {
    indeg_.assign(ports_.size(), 0);
    local_.assign(ports_.size(), 0);
  }
  std::vector<std::pair<uint32_t, uint32_t>>& edges = edges_;  // (port, next port), one per lane-hop
  edges.clear();
  for (uint32_t l = 0; l < lanes_.size(); ++l) {
    Lane& ln = lanes_[l];
    if (!ln.live || ln.blocked) continue;
    for (uint32_t h = 0; h < ln.ports.size(); ++h) {
      const uint32_t p = ln.ports[h];
      if (ports_[p].lanes.empty()) touched.push_back(p);
      ports_[p].lanes.push_back(Slot{&ln.hop[h], l, h});
      ports_[p].sources += h == 0;
      if (h + 1 < ln.ports.size()) edges.emplace_back(p, ln.ports[h + 1]);
    }
  }
  std::sort(touched.begin(), touched.end());
  const size_t n = touched.size();
  for (size_t i = 0; i < n; ++i) local_[touched[i]] = static_cast<uint32_t>(i);
  // adjacency (CSR by port, each port's next ports ascending and distinct)
  std::vector<uint32_t>& first = adj_first_;
  std::vector<uint32_t>& adj = adj_;
  first.assign(n + 1, 0);
  for (const auto& e : edges) ++first[local_[e.first] + 1];
  for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  adj.resize(edges.size());
  {
    std::vector<uint32_t>& fill = adj_fill_;
    fill.assign(first.begin(), first.end() - 1);
    for (const auto& e : edges) adj[fill[local_[e.first]]++] = e.second;
    uint32_t out = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto b = adj.begin() + first[i], e = adj.begin() + first[i + 1];
      std::sort(b, e);
      const auto u = std::unique(b, e);
      first[i] = out;
      for (auto it = b; it != u; ++it) adj[out++] = *it;
    }
    first[n] = out;
    // (first[i] is now where port i's list starts; it ends where port i + 1's starts)
  }
  for (uint32_t k = 0; k < first[n]; ++k) ++indeg_[adj[k]];
  std::vector<uint32_t> ready;
  for (const uint32_t p : touched)
    if (indeg_[p] == 0) ready.push_back(p);
  std::vector<uint8_t> done(n, 0);
  size_t head = 0, scan = 0;
  while (order_.size() < n) {
    if (head == ready.size()) {
      // a cycle: take the lowest port not yet ordered
      while (done[scan]) ++scan;
      ready.push_back(touched[scan]);
      indeg_[touched[scan]] = 0;
    }
    const uint32_t p = ready[head++];
    const size_t i = local_[p];
    if (done[i]) continue;
    done[i] = 1;
    order_.push_back(p);
    for (uint32_t k = first[i]; k < first[i + 1]; ++k) {
      const uint32_t q = adj[k];
      if (indeg_[q] > 0 && --indeg_[q] == 0 && !done[local_[q]]) ready.push_back(q);
    }
  }
  for (const uint32_t p : touched) indeg_[p] = 0;
  joined_.clear();
  ports_dirty_ = false;
}

bool FluidNetwork::sweep(double dt, bool by_rate) {
  // One step of dt ps: ports in order, queued bytes first (a FIFO's share), then the NIC's
  // pulls. `by_rate`: sources offer their rate x dt whatever their bytes left (the rates of a
  // quiescent stretch), else at most their bytes left.
  for (const uint32_t f : active_)
    for (const uint32_t l : src_[f].lanes) {
      Lane& ln = lanes_[l];
      ln.unmarked = 1;
      ln.fin = ln.fin0 = 0;
      for (Hop& x : ln.hop) x.arr = x.dep = 0.0;
    }
  bool moved = false;
  std::vector<std::pair<double, uint32_t>>& offers = offers_;
  for (const uint32_t p : order_) {
    PortState& ps = ports_[p];
    const double budget = ps.paused ? 0.0 : ps.capacity * dt / kBitsPsPerByte;
    double demand = 0, arrivals = 0;
    offers.clear();
    for (const auto& [x, l, h] : ps.lanes) {
      if (h > 0) {
        demand += x->q + x->arr;
        arrivals += x->arr;
      } else {
        const Lane& ln = lanes_[l];
        const Source& s = src_[ln.flow];
        const double rate_cap = s.rc * ln.frac * dt / kBitsPsPerByte;
        const double cap = by_rate ? (ln.backlog > 0 ? rate_cap : 0.0) : std::min(ln.backlog, rate_cap);
        if (cap > 0) offers.emplace_back(cap, l);
      }
    }
    counters_.lane_hops += ps.lanes.size();
    // A FIFO's departures. The port's departures so far are a position in its byte stream
    // (`bytes`); each lane's queued bytes lie spread between there and its mark, the position
    // its last byte arrived at (this step's arrivals: the end of the stream, as they
    // interleave). A lane leaves d x min(1, budget / (mark - position)): a lane whose
    // arrivals stopped drains by its mark (FIFO order: an older chunk ahead of a newer one),
    // lanes still arriving share in proportion to their bytes. Lanes ahead first.
    const double pos = ps.bytes;
    const double end = pos + ps.queued + arrivals;
    double used = 0;
    if (demand <= budget) {
      for (const auto& [x, l, h] : ps.lanes) {
        if (h == 0) continue;
        if (x->arr > 0) x->mark = end;
        x->dep = x->q + x->arr;
        used += x->dep;
      }
    } else {
      double ahead = 0, rest = 0;
      for (const auto& [x, l, h] : ps.lanes) {
        if (h == 0) continue;
        const double d = x->q + x->arr;
        if (x->arr > 0) x->mark = end;
        if (x->arr <= 0 && x->mark < end) {
          x->dep = d * std::min(1.0, budget / std::max(x->mark - pos, 1e-9));
          ahead += x->dep;
        } else {
          x->dep = -d;  // (a proportional one, set below)
          rest += d;
        }
      }
      const double ahead_scale = ahead > budget ? budget / ahead : 1.0;
      const double rest_share = ahead >= budget || rest <= 0 ? 0.0 : std::min(1.0, (budget - ahead) / rest);
      double short_of = 0;  // bytes the lanes ahead still hold
      for (const auto& [x, l, h] : ps.lanes) {
        if (h == 0) continue;
        if (x->dep < 0) {
          x->dep = -x->dep * rest_share;
        } else {
          x->dep *= ahead_scale;
          short_of += x->q + x->arr - x->dep;
        }
        used += x->dep;
      }
      if (used < budget && short_of > 0) {
        // (everything behind them went: what is left of the step drains them further)
        const double extra = std::min(1.0, (budget - used) / short_of);
        for (const auto& [x, l, h] : ps.lanes) {
          if (h == 0) continue;
          if (x->arr > 0 || x->mark >= end) continue;
          const double more = (x->q + x->arr - x->dep) * extra;
          x->dep += more;
          used += more;
        }
      }
    }
    double left = std::max(0.0, budget - used);
    if (!offers.empty()) {
      // max-min among the flows the NIC pulls from, each at most its offer
      std::sort(offers.begin(), offers.end());
      size_t k = offers.size();
      double level = kInf;  // the share of the flows not held back by their offer
      for (const auto& [cap, l] : offers) {
        const double give = std::min(cap, left / static_cast<double>(k));
        if (give < cap && level == kInf) level = give;
        lanes_[l].hop[0].dep = give;
        left -= give;
        used += give;
        --k;
      }
      // when in the step a source sent its last byte: its bytes at its pace (its rate or
      // its share, whichever is lower)
      for (const auto& [cap, l] : offers) {
        Lane& ln = lanes_[l];
        const double pace = std::min(src_[ln.flow].rc * ln.frac * dt / kBitsPsPerByte, level);
        ln.fin0 = ln.fin = pace > 0 ? std::min(1.0, ln.hop[0].dep / pace) : 1.0;
      }
    }
    ps.use = budget > 0 ? std::min(1.0, used / budget) : 1.0;
    ps.tail = end;
    ps.seq = plan_seq_;
    moved |= used > 0;
    // when in the step each lane's last byte here left: behind the queue, at its arrivals'
    // pace where the port keeps up, at the step's end where it does not (a FIFO interleaves)
    const bool saturated = demand > budget;
    const double ahead = budget > 0 ? std::min(1.0, ps.queued / budget) : 1.0;
    const double unmarked = 1.0 - ps.pm;
    for (const auto& [x, l, h] : ps.lanes) {
      const double d = x->dep;
      if (h == 0 && d <= 0) continue;
      Lane& ln = lanes_[l];
      if (h > 0) {
        double fin = ahead;
        if (saturated) {
          const double all = x->q + x->arr;
          fin = d >= all - kEps ? std::min(1.0, std::max(0.0, x->mark - pos) / budget) : 1.0;
        }
        ln.fin = std::max(ln.fin, fin);
      }
      if (d <= 0) continue;
      ln.unmarked *= unmarked;
      if (h + 1 < ln.hop.size()) x[1].arr += d;
    }
  }
  return moved;
}

void FluidNetwork::plan() {
  const SimTime now = eng_.now();
  plan_pending_ = false;
  // sources: CNPs that arrived, timers due; lanes of finished flows leave
  for (const uint32_t f : active_) {
    Source& s = src_[f];
    if (s.cnp_at <= now) {
      const SimTime at = s.cnp_at;
      s.cnp_at = kNever;
      if (!s.sent) cnp(f, at);
    }
    if (!s.sent) fire_timers(s, now);
  }
  if (ports_dirty_) rebuild_ports();
  // Steps keep one grid: a plan made inside a step (a flow started, the state was brought to
  // now) runs to that step's end, so that the starts do not push the step's work back.
  if (step_end_ <= now) step_end_ = now + step_;
  const SimTime step_len = step_end_ - now;
  const double dt = static_cast<double>(step_len);
  // queues and PFC ingress accounting at the start of the step
  for (const uint32_t p : order_) ports_[p].queued = ports_[p].ingress = 0;
  for (const uint32_t f : active_)
    for (const uint32_t l : src_[f].lanes) {
      Lane& ln = lanes_[l];
      for (size_t h = 1; h < ln.ports.size(); ++h) {
        const double q = ln.hop[h].q;
        if (q <= 0) continue;
        ports_[ln.ports[h]].queued += q;
        ports_[ln.ports[h - 1]].ingress += q;
      }
    }
  bool any_paused = false, any_queued = false;
  for (const uint32_t p : order_) {
    PortState& ps = ports_[p];
    // PFC: the switch decides on the bytes that came over p; the PAUSE (RESUME) stops (restarts)
    // what reaches it a reaction time later (the frame's flight back, the wire's bytes in
    // flight, the switch's latency: what the packet engine's headroom covers)
    if (!ps.pause_sent && ps.ingress > ps.xoff) {
      ps.pause_sent = true;
      ps.flip_at = now + ps.reaction;
      ++port_pauses_[p];
      ++counters_.pauses;
    } else if (ps.pause_sent && ps.ingress <= ps.xon) {
      ps.pause_sent = false;
      ps.flip_at = now + ps.reaction;
    }
    if (now >= ps.flip_at) ps.paused = ps.pause_sent;
    any_paused |= ps.paused || ps.pause_sent;
    any_queued |= ps.queued > kQueuedEps;
    max_queued_[p] = std::max(max_queued_[p], ps.queued);
    ps.pm = mark_prob(ps);
  }
  ++plan_seq_;
  bool moved = sweep(dt, false);
  // quiescence: nothing queued, paused, throttled or held back: the rates hold until a flow
  // finishes sending (or a flow starts, which replans)
  auto steady = [&] {
    for (const uint32_t f : active_) {
      const Source& s = src_[f];
      if (!s.sent && (s.rc < s.line || s.timer_deadline != kNever || s.cnp_at != kNever)) return false;
      for (const uint32_t l : s.lanes) {
        const Lane& ln = lanes_[l];
        for (size_t h = 1; h < ln.ports.size(); ++h)
          if (std::abs(ln.hop[h].arr - ln.hop[h].dep) > kEps * (1.0 + ln.hop[h].arr)) return false;
      }
    }
    return true;
  };
  bool quiet = !any_paused && !any_queued && steady();
  if (quiet) {
    // the rates themselves (a source about to finish offered only its bytes left): if they
    // oversubscribe nothing either, they hold until the first flow finishes sending
    moved = sweep(dt, true);
    if (!steady()) {
      quiet = false;
      moved = sweep(dt, false);
    }
  }
  if (quiet) {
    plan_step_ = step_len;  // (the amounts' step)
    step_end_ = -1;
    enter_quiet();
    return;
  }
  const SimTime len = step_len;  // (a step: quiescence went above)
  planned_ = true;
  stepping_ = true;
  plan_t_ = now;
  plan_step_ = step_len;
  plan_len_ = len;
  for (const uint32_t f : active_)
    for (const uint32_t l : src_[f].lanes) lanes_[l].t = now;
  ++counters_.plans;
  ++counters_.steps;
  // progress events: a flow's last byte leaving its source, and reaching its destination
  const double span = static_cast<double>(len) / dt;  // (1: the plan is the step)
  for (const uint32_t f : active_) {
    Source& s = src_[f];
    double backlog = 0, sent = 0, sent_frac = 0, undelivered = 0, done_frac = 0;
    bool delivers = true;
    for (const uint32_t l : s.lanes) {
      const Lane& ln = lanes_[l];
      if (ln.blocked) {
        delivers = false;
        backlog += ln.backlog;
        continue;
      }
      backlog += ln.backlog;
      sent += ln.hop[0].dep * span;
      const double u = ln.wire - ln.delivered;
      undelivered += u;
      if (u <= tolerance(ln.wire)) continue;
      if (ln.hop.back().dep * span < u - tolerance(ln.wire)) {
        delivers = false;
        continue;
      }
      // within the step: when its ports finished their share of it
      done_frac = std::max(done_frac, ln.fin);
      if (ln.backlog > tolerance(ln.wire)) sent_frac = std::max(sent_frac, ln.fin0);
    }
    const double tol = tolerance(s.wire);
    if (!s.sent && s.sent_at < 0 && (backlog <= tol || sent >= backlog - tol)) {
      s.sent_at = now + static_cast<SimTime>(std::ceil(sent_frac * static_cast<double>(len)));
      eng_.schedule(s.sent_at, f, kind_base_ + kSent);
    }
    if (!s.delivered && s.done_at < 0 && delivers && (backlog <= tol || sent >= backlog - tol)) {
      const SimTime last =
          now + static_cast<SimTime>(std::ceil(std::min(1.0, done_frac) * static_cast<double>(len)));
      s.done_at = std::max(last, s.sent_at) + s.delay;
      s.delivered = undelivered <= tol;  // (already all there: the event stands)
      eng_.schedule(s.done_at, f, kind_base_ + kDone);
    }
  }
  if (!moved && any_queued) {
    if (idle_since_ < 0) idle_since_ = now;
    if (now - idle_since_ >= kStallPs) {
      ++counters_.stalls;
      return;  // a PFC deadlock: nothing will move again
    }
  } else {
    idle_since_ = -1;
  }
  plan_at_ = now + len;
  eng_.schedule(plan_at_, 0, kind_base_ + kPlan);
}

}  // namespace rfabric::flow
