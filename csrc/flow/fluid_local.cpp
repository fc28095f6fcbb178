// fluid_local.cpp: the dynamic mode's updates between plans (see fluid_network.hpp for the
// model): a flow starting inside a step joins it (its NIC shared with its own flows where
// busy) without a new plan, and quiescent stretches go event by event (a flow starting or
// finishing sending refills its NIC's shares). The plan itself is fluid_dynamics.cpp's.
#include <algorithm>
#include <cmath>
#include <limits>

#include "flow/fluid_network.hpp"

namespace rfabric::flow {

using engine::kNever;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// ---- a flow starting: joining the step in force, or quiescence ----

void FluidNetwork::begin_flow(uint32_t f) {
  apply_due_changes();  // (a flow starting at t sees every change at t, as on the other backends)
  const SimTime now = eng_.now();
  if (!quiet_ && stepping_ && planned_ && step_end_ > now && plan_at_ == step_end_) {
    // inside a step whose plan stands (no replan pending)
    start_flow(f);
    if (join_step(f)) return;
    commit();
    request_plan();
    return;
  }
  if (!quiet_) {
    commit();
    start_flow(f);
    request_plan();
    return;
  }
  start_flow(f);
  std::vector<uint32_t> work;
  bool blocked = false;
  for (const uint32_t l : src_[f].lanes) {
    if (lanes_[l].blocked) {
      blocked = true;
      continue;
    }
    work.push_back(lanes_[l].ports[0]);
  }
  if (!refill(std::move(work))) {
    leave_quiet();
    return;
  }
  (void)blocked;  // (a blocked lane waits for a topology change, as in the steps)
}

bool FluidNetwork::join_step(uint32_t f) {
  // The flow's lanes, hop by hop, take what the plan left of each port for the rest of the
  // step (its plan's work spread evenly over the step). Where that passes every byte they
  // offer, no port the other lanes cross saturates: their plans are what a new plan would
  // give them, and stand. A NIC taken by its own flows is shared max-min with the new one
  // (below). At a saturated port (paused, queued or fully used) the new bytes wait in its
  // queue for the next step. Anything else (a NIC busy with relayed frames, a port the new
  // lane would oversubscribe that no queue holds, a lane without a path): false, and the
  // step is planned again.
  const SimTime now = eng_.now();
  const double rest = static_cast<double>(step_end_ - now);
  const double per = static_cast<double>(plan_step_) / rest;  // (rest's amounts to the plan's)
  Source& s = src_[f];
  auto left_of = [&](const PortState& ps) {
    if (ps.paused) return 0.0;
    const double use = ps.seq == plan_seq_ ? ps.use : 0.0;  // (not visited: nothing crosses it)
    return ps.capacity * rest / kBitsPsPerByte * (1.0 - use);
  };
  for (const uint32_t l : s.lanes)
    if (lanes_[l].blocked) return false;
  auto saturated = [&](const PortState& ps) {
    return ps.paused || (ps.seq == plan_seq_ && (ps.queued > kQueuedEps || ps.use >= 1.0 - 1e-9));
  };
  std::vector<std::pair<uint32_t, double>>& cuts = join_cuts_;    // (lane, bytes it gives up)
  std::vector<std::pair<uint32_t, double>>& freed = join_freed_;  // (port, bytes freed)
  cuts.clear();
  freed.clear();
  if (s.lanes.size() == 1) {
    // Its NIC busy with its own flows: they share it max-min with the new one for the rest
    // of the step, as a new plan would; each gives up its excess where it passes through
    // (up to its first saturated port, whose queue takes the difference).
    Lane& ln = lanes_[s.lanes[0]];
    const uint32_t p0 = ln.ports[0];
    PortState& nic = ports_[p0];
    const double offer = std::min(ln.backlog, s.rc * ln.frac * rest / kBitsPsPerByte);
    if (left_of(nic) * (1 + 1e-9) < offer && nic.seq == plan_seq_ && !nic.paused && nic.capacity > 0) {
      std::vector<uint32_t>& own = join_own_;
      own.clear();
      for (const Slot& e : nic.lanes)
        if (e.hop == 0) own.push_back(e.lane);
      for (const uint32_t l : joined_) own.push_back(l);
      std::sort(own.begin(), own.end());
      own.erase(std::unique(own.begin(), own.end()), own.end());
      std::vector<std::pair<double, uint32_t>>& caps = offers_;
      caps.clear();
      const double budget = nic.capacity * rest / kBitsPsPerByte;
      double mine = 0;
      for (const uint32_t l : own) {
        Lane& o = lanes_[l];
        if (!o.live || o.blocked || o.ports.empty() || o.ports[0] != p0 || o.flow == f) continue;
        commit_lane(l, now);
        if (o.backlog <= tolerance(o.wire)) continue;  // (all sent: not the NIC's any more)
        const double r = o.hop[0].dep / per;
        mine += r;
        caps.emplace_back(std::min(r, std::min(o.backlog, src_[o.flow].rc * o.frac * rest / kBitsPsPerByte)),
                          l);
      }
      const double relayed = std::max(0.0, budget * nic.use - mine);
      double avail = std::max(0.0, budget - relayed);
      caps.emplace_back(offer, kNone);
      std::sort(caps.begin(), caps.end());
      size_t k = caps.size();
      for (const auto& [cap, l] : caps) {
        const double give = std::min(cap, avail / static_cast<double>(k));
        avail -= give;
        --k;
        if (l == kNone) continue;
        const double r = lanes_[l].hop[0].dep / per;
        if (r - give > kEps) cuts.emplace_back(l, r - give);
      }
      for (const auto& [l, d] : cuts) {
        const Lane& o = lanes_[l];
        double x = d * per;  // (per plan step)
        freed.emplace_back(p0, d);
        for (size_t h = 1; h < o.ports.size() && x > 0; ++h) {
          // what leaves hop h: at most its queue and what still reaches it
          const Hop& y = o.hop[h];
          x = y.dep - std::min(y.dep, y.q * per + std::max(0.0, y.arr - x));
          if (x > 0) freed.emplace_back(o.ports[h], x / per);
        }
      }
    }
  }
  auto freed_at = [&](uint32_t p) {
    double x = 0;
    for (const auto& [q, d] : freed)
      if (q == p) x += d;
    return x;
  };
  for (const uint32_t l : s.lanes) {
    const Lane& ln = lanes_[l];
    double carry = std::min(ln.backlog, s.rc * ln.frac * rest / kBitsPsPerByte);
    for (size_t h = 0; h < ln.ports.size(); ++h) {
      const PortState& ps = ports_[ln.ports[h]];
      const double left = left_of(ps) + freed_at(ln.ports[h]);
      if (left * (1 + 1e-9) >= carry && !(ps.seq == plan_seq_ && ps.queued > kQueuedEps)) continue;
      if (h == 0 && cuts.empty()) return false;  // (busy with relays: plan again)
      if (h > 0 && !saturated(ps)) return false;
      carry = std::min(carry, std::max(0.0, left));
    }
  }
  // the cuts: each lane's excess off its NIC share, and off every port it passes through
  for (const auto& [l, d] : cuts) {
    Lane& o = lanes_[l];
    double x = d * per;  // (per plan step) what the hop gets less of, then sends less of
    bool through = true;
    for (size_t h = 0; h < o.ports.size() && x > 0; ++h) {
      PortState& ps = ports_[o.ports[h]];
      Hop& y = o.hop[h];
      if (h > 0) {
        // what leaves hop h: at most its queue and what still reaches it
        y.arr = std::max(0.0, y.arr - x);
        const double dep = std::min(y.dep, y.q * per + y.arr);
        x = y.dep - dep;
        y.dep = dep;
        if (y.q > kQueuedEps || (h + 1 < o.ports.size() && x <= 0)) through = false;
      } else {
        y.dep = std::max(0.0, y.dep - x);
      }
      const double room = ps.capacity * rest / kBitsPsPerByte;
      if (room > 0) ps.use = std::max(0.0, ps.use - x / per / room);
    }
    // its progress events, at its new pace (a flow of several lanes: at the next plan)
    Source& so = src_[o.flow];
    if (so.sent) continue;
    so.sent_at = -1;
    if (!so.delivered) so.done_at = -1;
    const double r = o.hop[0].dep / per;
    if (so.lanes.size() == 1 && r > 0 && o.backlog <= r * (1 + 1e-9)) {
      so.sent_at = now + static_cast<SimTime>(std::ceil(std::min(1.0, o.backlog / r) * rest));
      eng_.schedule(so.sent_at, o.flow, kind_base_ + kSent);
      if (through && !so.delivered) {
        so.done_at = so.sent_at + so.delay;
        eng_.schedule(so.done_at, o.flow, kind_base_ + kDone);
      }
    }
  }
  double backlog = 0, sent = 0, sent_frac = 0, done_frac = 0;
  bool delivers = true;
  for (const uint32_t l : s.lanes) {
    Lane& ln = lanes_[l];
    backlog += ln.backlog;
    ln.t = now;
    ln.unmarked = 1;
    ln.fin = ln.fin0 = 0;
    double carry = 0;  // bytes reaching the hop in the rest of the step
    const size_t n = ln.ports.size();
    counters_.lane_hops += n;
    for (size_t h = 0; h < n; ++h) {
      PortState& ps = ports_[ln.ports[h]];
      const double left = left_of(ps);
      if (ps.seq != plan_seq_) {
        ps.seq = plan_seq_;
        ps.use = 0;
        ps.queued = 0;
        ps.tail = ps.bytes;
        ps.pm = mark_prob(ps);
      }
      double d;
      if (h == 0) {
        const double pace = std::min(s.rc * ln.frac * rest / kBitsPsPerByte, left);
        d = std::min(ln.backlog, pace);
        ln.fin0 = ln.fin = pace > 0 ? std::min(1.0, d / pace) : 1.0;
      } else {
        d = std::min(carry, left);
        ln.hop[h].arr = carry * per;
        if (carry > 0) {
          ps.tail += carry;
          ln.hop[h].mark = ps.tail;
        }
      }
      ln.hop[h].dep = d * per;
      const double room = ps.capacity * rest / kBitsPsPerByte;  // (use: of the rest, from now)
      if (room > 0) ps.use = std::min(1.0, ps.use + d / room);
      if (d > 0) ln.unmarked *= 1.0 - ps.pm;
      carry = d;
    }
    sent += ln.hop[0].dep / per;
    if (carry < ln.wire - ln.delivered - tolerance(ln.wire)) {
      delivers = false;
    } else {
      done_frac = std::max(done_frac, ln.fin);
    }
    if (ln.backlog > tolerance(ln.wire)) sent_frac = std::max(sent_frac, ln.fin0);
    joined_.push_back(l);
  }
  // its progress events, as plan()'s
  const double tol = tolerance(s.wire);
  if (backlog <= tol || sent >= backlog - tol) {
    s.sent_at = now + static_cast<SimTime>(std::ceil(sent_frac * rest));
    eng_.schedule(s.sent_at, f, kind_base_ + kSent);
    if (delivers) {
      const SimTime last = now + static_cast<SimTime>(std::ceil(std::min(1.0, done_frac) * rest));
      s.done_at = std::max(last, s.sent_at) + s.delay;
      eng_.schedule(s.done_at, f, kind_base_ + kDone);
    }
  }
  return true;
}

void FluidNetwork::attach_lane(uint32_t l) {
  const Lane& ln = lanes_[l];
  if (ln.blocked) return;
  for (uint32_t h = 0; h < ln.ports.size(); ++h) {
    PortState& ps = ports_[ln.ports[h]];
    ps.lanes.push_back(Slot{&lanes_[l].hop[h], l, h});
    ps.sources += h == 0;
  }
}

void FluidNetwork::detach_lane(uint32_t l) {
  const Lane& ln = lanes_[l];
  if (ln.blocked) return;
  for (uint32_t h = 0; h < ln.ports.size(); ++h) {
    PortState& ps = ports_[ln.ports[h]];
    ps.load -= ln.hop[h].dep;
    auto& list = ps.lanes;
    const auto it =
        std::find_if(list.begin(), list.end(), [&](const Slot& e) { return e.lane == l && e.hop == h; });
    if (it != list.end()) {
      *it = list.back();
      list.pop_back();
    }
    ps.sources -= h == 0;
  }
}

void FluidNetwork::enter_quiet() {
  const SimTime now = eng_.now();
  quiet_ = true;
  quiet_since_ = now;
  planned_ = true;
  stepping_ = false;
  plan_t_ = now;
  plan_len_ = kNever;
  plan_at_ = -1;  // (no step queued: events are the flows' own)
  ++counters_.plans;
  ++counters_.jumps;
  for (const uint32_t p : order_) ports_[p].load = 0;
  for (const uint32_t f : active_)
    for (const uint32_t l : src_[f].lanes) {
      Lane& ln = lanes_[l];
      ln.t = now;
      for (size_t h = 0; h < ln.ports.size(); ++h) ports_[ln.ports[h]].load += ln.hop[h].dep;
    }
  for (const uint32_t f : active_) {
    Source& s = src_[f];
    if (s.sent) {
      // Sent, and its delivery event dropped by a commit in between (a flow starting while
      // its last bytes were under way): with nothing queued they are all past the queues, as
      // for a flow sent in quiescence. Without this the flow would wait for a plan that
      // quiescence never makes.
      if (!s.delivered && s.done_at < 0) deliver_quiet(f);
      continue;
    }
    s.sent_at = -1;  // (the flow's own lane events take over)
    if (!s.delivered) s.done_at = -1;
    schedule_lane_end(f);
  }
}

void FluidNetwork::leave_quiet() {
  const SimTime now = eng_.now();
  quiet_ = false;
  counters_.jumped_ps += now - quiet_since_;
  for (const uint32_t f : active_) src_[f].lane_at = -1;
  committed_ = -1;
  commit();
  ports_dirty_ = true;
  request_plan();
}

void FluidNetwork::schedule_lane_end(uint32_t f) {
  Source& s = src_[f];
  const double dt = static_cast<double>(plan_step_);
  double first = kInf;
  bool left = false;
  for (const uint32_t l : s.lanes) {
    const Lane& ln = lanes_[l];
    if (ln.backlog <= tolerance(ln.wire)) continue;
    left = true;  // (a blocked lane waits for a topology change: no event)
    if (!ln.blocked && ln.hop[0].dep > 0)
      first = std::min(first, static_cast<double>(ln.t) + ln.backlog / ln.hop[0].dep * dt);
  }
  const SimTime now = eng_.now();
  if (!left) {
    s.lane_at = now;  // all sent: tell it now
  } else if (first < kInf) {
    s.lane_at = std::max(now, static_cast<SimTime>(std::ceil(first)));
  } else {
    s.lane_at = -1;  // (no rate: waits for a refill)
    return;
  }
  eng_.schedule(s.lane_at, f, kind_base_ + kLane);
}

void FluidNetwork::lane_end(uint32_t f) {
  Source& s = src_[f];
  const SimTime now = eng_.now();
  std::vector<uint32_t> work;
  bool all = true;
  for (const uint32_t l : s.lanes) {
    Lane& ln = lanes_[l];
    commit_lane(l, now);
    if (ln.blocked) {
      all = false;
      continue;
    }
    if (ln.backlog <= tolerance(ln.wire)) {
      ln.backlog = 0;
      if (ln.hop[0].dep > 0) work.push_back(ln.ports[0]);
    } else {
      all = false;
    }
  }
  if (!work.empty() && !refill(std::move(work))) {
    leave_quiet();
    return;
  }
  if (!all) {
    schedule_lane_end(f);
    return;
  }
  s.sent = true;
  s.timer_deadline = kNever;
  s.lane_at = -1;
  flows_.sent_ps[f] = now;
  deliver_quiet(f);
  if (observer_ != nullptr) observer_->on_flow_sent(f);
}

void FluidNetwork::deliver_quiet(uint32_t f) {
  // sent, and (nothing queued: quiescence) delivered: done its path's delay after it left
  Source& s = src_[f];
  for (const uint32_t l : s.lanes) lanes_[l].delivered = lanes_[l].wire;
  s.delivered = true;
  s.done_at = std::max(eng_.now(), flows_.sent_ps[f] + s.delay);
  eng_.schedule(s.done_at, f, kind_base_ + kDone);
}

bool FluidNetwork::refill(std::vector<uint32_t> work) {
  const SimTime now = eng_.now();
  const double dt = static_cast<double>(plan_step_);
  std::vector<uint32_t>& changed = refill_flows_;
  changed.clear();
  size_t rounds = 0;
  std::vector<std::pair<double, uint32_t>>& offers = offers_;
  while (!work.empty()) {
    if (++rounds > 4096) return false;  // (relays feeding each other: let the steps settle it)
    const uint32_t p = work.back();
    work.pop_back();
    PortState& ps = ports_[p];
    counters_.lane_hops += ps.lanes.size();
    double relayed = 0;
    offers.clear();
    for (const auto& [x, l, h] : ps.lanes) {
      if (h > 0) {
        relayed += x->dep;
        continue;
      }
      Lane& ln = lanes_[l];
      commit_lane(l, now);
      const Source& s = src_[ln.flow];
      offers.emplace_back(ln.backlog > tolerance(ln.wire) ? s.rc * ln.frac * dt / kBitsPsPerByte : 0.0, l);
    }
    const double budget = ps.capacity * dt / kBitsPsPerByte;
    if (relayed > budget * (1 + 1e-9) + kQueuedEps) return false;
    double left = std::max(0.0, budget - relayed);
    std::sort(offers.begin(), offers.end());
    size_t k = offers.size();
    for (const auto& [cap, l] : offers) {
      const double give = std::min(cap, left / static_cast<double>(k));
      left -= give;
      --k;
      Lane& ln = lanes_[l];
      const double old = ln.hop[0].dep;
      if (std::abs(give - old) <= 1e-12 * std::max(give, old)) continue;
      changed.push_back(ln.flow);
      for (size_t h = 0; h < ln.ports.size(); ++h) {
        PortState& q = ports_[ln.ports[h]];
        q.load += give - ln.hop[h].dep;
        ln.hop[h].dep = give;
        ln.hop[h].arr = h > 0 ? give : 0.0;
        if (h == 0) continue;
        if (q.sources > 0) {
          work.push_back(ln.ports[h]);  // a relay's NIC: its own flows' shares change
        } else if (q.load > q.capacity * dt / kBitsPsPerByte * (1 + 1e-9) + kQueuedEps) {
          return false;
        }
      }
    }
  }
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (const uint32_t f : changed)
    if (!src_[f].sent) schedule_lane_end(f);
  return true;
}

}  // namespace rfabric::flow
