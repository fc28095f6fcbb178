// topology_changes.hpp: the changes of a fabric's topology a backend is given (link failures
// and repairs, circuit plans, and the ends of their dark times), kept in call order and queued
// as the backend's own events, and the log of the circuit changes applied. Both backends keep
// them alike: each change is checked when given, applied to the forwarding layer when its
// event comes (or earlier in the same instant, by apply_due: the packet backend's flows
// starting at t see every change at t), and the backend then re-forwards what it carries
// (packet/circuits.cpp, flow/flow_network.cpp topology_changed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/check.hpp"
#include "engine/engine.hpp"
#include "fabric/forwarding.hpp"
#include "fabric/spec.hpp"

namespace rfabric::net {

/// One applied circuit change (the res.circuits table).
struct CircuitChange {
  SimTime time_ps;
  uint32_t plan_id;
  uint32_t added, removed;
  SimTime dark_ps;
};

class TopologyChanges {
 public:
  /// Queue the changes as events of `backend` (kind `kind`, target the change's index in call
  /// order) on `eng`, applied to `fwd`. Once, when the backend is built.
  void attach(engine::Engine& eng, engine::Handler& backend, Forwarding& fwd, uint32_t kind) {
    eng_ = &eng;
    backend_ = &backend;
    fwd_ = &fwd;
    kind_ = kind;
  }

  /// Take link `link` down or up at time t (>= now).
  void schedule_link_state(uint32_t link, SimTime t, bool up) {
    RF_CHECK(link < fwd_->num_links(), "link ", link, " does not exist (the fabric has ", fwd_->num_links(),
             ")");
    RF_CHECK(t >= eng_->now(), "link ", link, ": change at ", t, " ps is in the past (now ", eng_->now(),
             ")");
    schedule({t, link, Change::kLink, up});
  }
  /// Replace the circuit plan at time t (>= now): circuits not in the new plan go dark at t,
  /// new ones light up at t + dark_ps; circuits in both keep carrying traffic.
  void schedule_plan(SimTime t, std::vector<uint32_t> ocs, std::vector<uint32_t> a, std::vector<uint32_t> b,
                     SimTime dark_ps) {
    RF_CHECK(t >= eng_->now(), "circuit plan at ", t, " ps is in the past (now ", eng_->now(), " ps)");
    const uint32_t plan = push_plan(std::move(ocs), std::move(a), std::move(b), dark_ps);
    schedule({t, plan, Change::kPlan, false});
  }
  /// schedule_plan at the current time, applied at once (between runs: before any event
  /// already queued for this instant, such as an op start a control-loop boundary left).
  void apply_plan_now(std::vector<uint32_t> ocs, std::vector<uint32_t> a, std::vector<uint32_t> b,
                      SimTime dark_ps) {
    const uint32_t plan = push_plan(std::move(ocs), std::move(a), std::move(b), dark_ps);
    list_.push_back({eng_->now(), plan, Change::kPlan, false});
    backend_->on_event(engine::Event{eng_->now(), static_cast<uint32_t>(list_.size() - 1), kind_});
  }

  /// Change `i` (an event's target) is due: apply it to the forwarding layer unless it was
  /// applied already (by apply_due), then call `reforward()`, the backend's re-forwarding of
  /// what it carries, if anything changed. A link set to the state it has changes nothing; a
  /// plan is logged, and its new circuits' end of dark time queued as a change of its own.
  template <class Reforward>
  void apply(uint32_t i, Reforward&& reforward) {
    if (list_[i].applied) return;
    list_[i].applied = true;
    const Change c = list_[i];  // (a copy: a plan appends its light to list_)
    switch (c.kind) {
      case Change::kLink:
        if (fwd_->link_up(c.index) == c.up) return;
        fwd_->set_link_up(c.index, c.up);
        reforward();
        break;
      case Change::kPlan: {
        const SimTime now = eng_->now(), dark_ps = plans_[c.index].dark_ps;
        const auto [added, removed] = fwd_->set_plan(plans_[c.index].circuits, now + dark_ps);
        log_.push_back({now, c.index, added, removed, dark_ps});
        reforward();
        if (added > 0 && dark_ps > 0) schedule({now + dark_ps, c.index, Change::kLight, false});
        break;
      }
      case Change::kLight:
        fwd_->circuits_lit();
        reforward();
        break;
    }
  }
  /// Apply now, in call order, every change due now whose event has not come yet (each as
  /// apply). A backend calls it where something starting at this instant must see every
  /// change at this instant, whichever was scheduled first; equal times otherwise go by call
  /// order. Cheap when nothing is due.
  template <class Reforward>
  void apply_due(Reforward&& reforward) {
    const SimTime now = eng_->now();
    if (now < unapplied_from_) return;
    while (first_open_ < list_.size() && list_[first_open_].applied) ++first_open_;
    unapplied_from_ = engine::kNever;
    for (size_t i = first_open_; i < list_.size(); ++i) {  // (apply may append lights, all later)
      if (list_[i].applied) continue;
      if (list_[i].t > now) {
        unapplied_from_ = std::min(unapplied_from_, list_[i].t);
        continue;
      }
      apply(static_cast<uint32_t>(i), reforward);
    }
  }

  /// The circuit changes applied so far.
  const std::vector<CircuitChange>& circuit_log() const { return log_; }

 private:
  /// A scheduled link change, circuit plan or end of a plan's dark time.
  struct Change {
    enum Kind : uint8_t { kLink, kPlan, kLight };
    SimTime t;
    uint32_t index;  ///< link row, or plan index (plans_)
    Kind kind;
    bool up;               ///< a link change's new state
    bool applied = false;  ///< applied (by its event, or earlier by apply_due: its event then skips it)
  };
  /// Record a change due at t and queue its event.
  void schedule(const Change& c) {
    list_.push_back(c);
    unapplied_from_ = std::min(unapplied_from_, c.t);
    eng_->schedule(c.t, static_cast<uint32_t>(list_.size() - 1), kind_);
  }
  /// Check a plan (valid circuits, dark time >= 0) and keep it; returns its index.
  uint32_t push_plan(std::vector<uint32_t> ocs, std::vector<uint32_t> a, std::vector<uint32_t> b,
                     SimTime dark_ps) {
    RF_CHECK(dark_ps >= 0, "circuit plan: negative reconfiguration time");
    Forwarding::PendingPlan plan{{std::move(ocs), std::move(a), std::move(b)}, dark_ps};
    fwd_->check_plan(plan.circuits);
    plans_.push_back(std::move(plan));
    return static_cast<uint32_t>(plans_.size() - 1);
  }

  engine::Engine* eng_ = nullptr;
  engine::Handler* backend_ = nullptr;
  Forwarding* fwd_ = nullptr;
  uint32_t kind_ = 0;
  std::vector<Change> list_;                 ///< every change given, in call order
  size_t first_open_ = 0;                    ///< list_ before this one is all applied
  SimTime unapplied_from_ = engine::kNever;  ///< no change before this time is still to apply
  std::vector<Forwarding::PendingPlan> plans_;
  std::vector<CircuitChange> log_;
};

}  // namespace rfabric::net
