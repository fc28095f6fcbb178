// engine.hpp: the discrete-event kernel. An Engine is a plain instance (no globals): it owns
// the clock and the event queue and dispatches each event to the handler registered for its
// kind. It knows nothing about packets, ports or protocols; those layers register handlers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/check.hpp"
#include "engine/event_queue.hpp"
#include "engine/time.hpp"

namespace rfabric::engine {

/// Something that receives events of the kinds it registered for.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual void on_event(const Event& ev) = 0;
};

class Engine {
 public:
  explicit Engine(uint64_t seed) : seed_(seed) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Register a handler; returns the kind id its events carry.
  uint32_t register_handler(Handler* h) {
    kinds_.push_back({&call_handler, h, 0, 0});
    return static_cast<uint32_t>(kinds_.size() - 1);
  }
  /// A plain function called with the event's fields in registers (no Event in memory, no
  /// virtual call), for the few kinds on a per-frame path: `fn(obj, time, target, kind)`.
  using Direct = void (*)(void* obj, SimTime time, uint32_t target, uint32_t kind);
  /// Register a direct handler; returns the kind id its events carry.
  uint32_t register_direct(Direct fn, void* obj) {
    kinds_.push_back({fn, obj, 0, 0});
    return static_cast<uint32_t>(kinds_.size() - 1);
  }

  /// Schedule an event at absolute time `t` (never in the past).
  RF_HOT void schedule(SimTime t, uint32_t target, uint32_t kind) {
    RF_DCHECK(t >= now_ && kind < kinds_.size());
    queue_.push(t, target, kind);
  }

  /// Take a scheduled event out before it runs (EventQueue::cancel: a near one found in a
  /// short walk, a far one by the ticket schedule_ticket gave); returns whether it was. One
  /// not taken out still runs, so its handler must still recognise it as stale.
  bool cancel(SimTime t, uint32_t target, uint32_t kind, uint64_t ticket = EventQueue::kNoTicket) {
    return queue_.cancel(t, target, kind, ticket);
  }
  /// schedule() for an event that may be cancelled: returns the ticket cancel() takes, which
  /// finds it in the far future too.
  uint64_t schedule_ticket(SimTime t, uint32_t target, uint32_t kind) {
    RF_DCHECK(t >= now_ && kind < kinds_.size());
    return queue_.push_ticket(t, target, kind);
  }

  /// Run events with time <= until, stopping early after `max_events` (0 = no limit).
  /// Returns the number of events processed by this call. The clock ends at `until`
  /// if the queue ran dry or passed it, else at the last event processed.
  uint64_t run(SimTime until, uint64_t max_events = 0);
  /// run() with two kinds handled by `hot`'s inline members, its `arrive(target)` and
  /// `tx_done(time, target)` (the events of kinds `hot.arrive_kind` and `hot.tx_done_kind`),
  /// compiled into the loop: no call, and no handler entry saving registers, for the kinds of
  /// nearly every event. Other kinds, and the counts, as run(). Instantiated where `Hot`'s
  /// members are defined; kept out of line, so a profile by name (`*Engine::run*`) sees it.
  template <class Hot>
  [[gnu::noinline]] uint64_t run_hot(SimTime until, uint64_t max_events, Hot hot);
  /// As run(), but also returns after the event during which a handler called
  /// request_stop() (the clock then stays at that event's time), and at once, running
  /// nothing, while a stop is still requested. A separate loop so run()'s per-event path
  /// carries no stop test (the control loop's boundaries are its only user).
  uint64_t run_stoppable(SimTime until, uint64_t max_events = 0);
  /// Ask run_stoppable() to return after the current event; stays set until clear_stop().
  void request_stop() { stop_ = true; }
  void clear_stop() { stop_ = false; }
  bool stop_requested() const { return stop_; }

  /// Room for n pending events before the queue's node pool grows (and moves).
  void reserve_events(size_t n) { queue_.reserve(n); }

  SimTime now() const { return now_; }
  /// Time of the next pending event, or kNever.
  SimTime peek() { return queue_.empty() ? kNever : queue_.top().time; }
  uint64_t events_processed() const { return events_counted(); }
  size_t pending() const { return queue_.size(); }
  bool idle() const { return queue_.empty(); }
  uint64_t seed() const { return seed_; }
  /// Events processed per kind (index = kind id), for diagnostics.
  std::vector<uint64_t> kind_counts() const {
    std::vector<uint64_t> out;
    for (uint32_t i = 0; i < kinds_.size(); ++i) out.push_back(kind_count(i));
    return out;
  }
  /// Events processed of one kind.
  uint64_t kind_count(uint32_t kind) const {
    return kinds_[kind].count + (kind == hot_kind_[0] ? hot_count_[0] : 0) +
           (kind == hot_kind_[1] ? hot_count_[1] : 0);
  }

 private:
  RF_HOT void dispatch(const Event& ev) {
    now_ = ev.time;
    Kind& k = kinds_[ev.kind];
    ++k.count;
    k.fn(k.obj, ev.time, ev.target, ev.kind);
  }
  /// dispatch() in run_hot(): the two hot kinds counted in hot_count_, a fixed place (no
  /// table to index), until fold_hot_counts().
  template <class Hot>
  RF_HOT void dispatch_hot(const Event& ev, Hot& hot) {
    now_ = ev.time;
    if (ev.kind == hot.arrive_kind) {
      ++hot_count_[0];
      hot.arrive(ev.target);
    } else if (ev.kind == hot.tx_done_kind) {
      ++hot_count_[1];
      hot.tx_done(ev.time, ev.target);
    } else {
      Kind& k = kinds_[ev.kind];
      ++k.count;
      k.fn(k.obj, ev.time, ev.target, ev.kind);
    }
  }
  /// Move hot_count_ into the kinds' counts (run_hot() does as it returns; a handler's
  /// exception leaves them in hot_count_, which the counts' readers add).
  void fold_hot_counts() {
    for (int i = 0; i < 2; ++i) {
      if (hot_kind_[i] != kNoKind) kinds_[hot_kind_[i]].count += hot_count_[i];
      hot_count_[i] = 0;
    }
  }
  /// The Direct function of a kind registered with a Handler: its on_event.
  static void call_handler(void* h, SimTime time, uint32_t target, uint32_t kind) {
    static_cast<Handler*>(h)->on_event(Event{time, target, kind});
  }
  /// Events processed so far, all kinds.
  uint64_t events_counted() const {
    uint64_t n = hot_count_[0] + hot_count_[1];
    for (const Kind& k : kinds_) n += k.count;
    return n;
  }
  uint64_t finish_run(SimTime until, uint64_t max_events, uint64_t done) {
    const bool stopped_early =
        stop_ || (max_events != 0 && done >= max_events && !queue_.empty() && queue_.top().time <= until);
    if (!stopped_early && until != kNever && now_ < until) now_ = until;
    return done;
  }

  uint64_t seed_;
  SimTime now_ = 0;
  bool stop_ = false;  ///< request_stop() was called and not yet cleared
  EventQueue queue_;
  struct Kind {  // 32 bytes: an index becomes an address with one shift
    Direct fn;
    void* obj;       ///< fn's first argument (the Handler, for call_handler)
    uint64_t count;  ///< events processed
    uint64_t pad;
  };
  std::vector<Kind> kinds_;
  static constexpr uint32_t kNoKind = 0xffffffffu;
  uint32_t hot_kind_[2] = {kNoKind, kNoKind};  ///< run_hot()'s two kinds (kNoKind: none yet)
  uint64_t hot_count_[2] = {0, 0};             ///< their events not yet in kinds_ (fold_hot_counts)
};

template <class Hot>
uint64_t Engine::run_hot(SimTime until, uint64_t max_events, Hot hot) {
  Event ev;
  fold_hot_counts();
  hot_kind_[0] = hot.arrive_kind;
  hot_kind_[1] = hot.tx_done_kind;
  if (max_events == 0) {
    const uint64_t before = events_counted();
    if (until == kNever) {
      while (queue_.pop_any(ev)) dispatch_hot(ev, hot);
    } else {
      while (queue_.pop_due(until, ev)) dispatch_hot(ev, hot);
    }
    const uint64_t done = events_counted() - before;
    fold_hot_counts();
    return finish_run(until, max_events, done);
  }
  uint64_t done = 0;
  while (done < max_events && queue_.pop_due(until, ev)) {
    ++done;
    dispatch_hot(ev, hot);
  }
  fold_hot_counts();
  return finish_run(until, max_events, done);
}

}  // namespace rfabric::engine
