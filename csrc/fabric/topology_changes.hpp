// topology_changes.hpp: the changes of a fabric's topology a backend is given (link failures
// and repairs, circuit plans), queued as the backend's own events, and the log of the circuit
// changes applied. Both backends keep them alike: each change is checked when given, applied
// to the forwarding layer when its event comes, and the backend then re-forwards what it
// carries (packet/circuits.cpp, flow/flow_network.cpp topology_changed).
#pragma once

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
  /// Queue the changes as events of `backend` (kinds `link_kind`, `plan_kind`, targets the
  /// changes' indices) on `eng`, applied to `fwd`. Once, when the backend is built.
  void attach(engine::Engine& eng, engine::Handler& backend, Forwarding& fwd, uint32_t link_kind,
              uint32_t plan_kind) {
    eng_ = &eng;
    backend_ = &backend;
    fwd_ = &fwd;
    link_kind_ = link_kind;
    plan_kind_ = plan_kind;
  }

  /// Take link `link` down or up at time t (>= now).
  void schedule_link_state(uint32_t link, SimTime t, bool up) {
    RF_CHECK(link < fwd_->num_links(), "link ", link, " does not exist (the fabric has ", fwd_->num_links(),
             ")");
    RF_CHECK(t >= eng_->now(), "link ", link, ": change at ", t, " ps is in the past (now ", eng_->now(),
             ")");
    links_.push_back({t, link, up});
    eng_->schedule(t, static_cast<uint32_t>(links_.size() - 1), link_kind_);
  }
  /// The link change queued as `index` is due: apply it to the forwarding layer. False when
  /// the link was already in that state (nothing changed, nothing to re-forward).
  bool apply_link_state(uint32_t index) const {
    const LinkChange& c = links_[index];
    if (fwd_->link_up(c.link) == c.up) return false;
    fwd_->set_link_up(c.link, c.up);
    return true;
  }

  /// Replace the circuit plan at time t (>= now): circuits not in the new plan go dark at t,
  /// new ones light up at t + dark_ps; circuits in both keep carrying traffic.
  void schedule_plan(SimTime t, std::vector<uint32_t> ocs, std::vector<uint32_t> a, std::vector<uint32_t> b,
                     SimTime dark_ps) {
    RF_CHECK(t >= eng_->now(), "circuit plan at ", t, " ps is in the past (now ", eng_->now(), " ps)");
    const uint32_t index = push_plan(std::move(ocs), std::move(a), std::move(b), dark_ps);
    eng_->schedule(t, index, plan_kind_);
  }
  /// schedule_plan at the current time, applied at once (between runs: before any event
  /// already queued for this instant, such as an op start a control-loop boundary left).
  void apply_plan_now(std::vector<uint32_t> ocs, std::vector<uint32_t> a, std::vector<uint32_t> b,
                      SimTime dark_ps) {
    const uint32_t index = push_plan(std::move(ocs), std::move(a), std::move(b), dark_ps);
    backend_->on_event(engine::Event{eng_->now(), index, plan_kind_});
  }
  /// Plan `index` is due: the forwarding layer's circuits replaced (the new ones dark until
  /// now + its dark time) and the change logged. Returns when the new circuits carry light,
  /// or -1 when none waits for it: the backend re-forwards, then queues its light event then.
  SimTime apply_plan(uint32_t index) {
    const Forwarding::PendingPlan& plan = plans_[index];
    const SimTime now = eng_->now();
    const auto [added, removed] = fwd_->set_plan(plan.circuits, now + plan.dark_ps);
    log_.push_back({now, index, added, removed, plan.dark_ps});
    return added > 0 && plan.dark_ps > 0 ? now + plan.dark_ps : -1;
  }
  /// The circuit changes applied so far.
  const std::vector<CircuitChange>& circuit_log() const { return log_; }

 private:
  /// Check a plan (valid circuits, dark time >= 0) and keep it; returns its index.
  uint32_t push_plan(std::vector<uint32_t> ocs, std::vector<uint32_t> a, std::vector<uint32_t> b,
                     SimTime dark_ps) {
    RF_CHECK(dark_ps >= 0, "circuit plan: negative reconfiguration time");
    Forwarding::PendingPlan plan{{std::move(ocs), std::move(a), std::move(b)}, dark_ps};
    fwd_->check_plan(plan.circuits);
    plans_.push_back(std::move(plan));
    return static_cast<uint32_t>(plans_.size() - 1);
  }

  struct LinkChange {
    SimTime t;
    uint32_t link;
    bool up;
  };
  engine::Engine* eng_ = nullptr;
  engine::Handler* backend_ = nullptr;
  Forwarding* fwd_ = nullptr;
  uint32_t link_kind_ = 0, plan_kind_ = 0;
  std::vector<LinkChange> links_;
  std::vector<Forwarding::PendingPlan> plans_;
  std::vector<CircuitChange> log_;
};

}  // namespace rfabric::net
