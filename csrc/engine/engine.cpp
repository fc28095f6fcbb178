#include "engine/engine.hpp"

namespace rfabric::engine {

uint64_t Engine::run(SimTime until, uint64_t max_events) {
  Event ev;
  if (max_events == 0) {
    // No limit: the per-kind counters are the only count kept per event.
    const uint64_t before = events_counted();
    if (until == kNever) {  // (a run to the end: nothing is later, no time test per event)
      while (queue_.pop_any(ev)) dispatch(ev);
    } else {
      while (queue_.pop_due(until, ev)) dispatch(ev);
    }
    return finish_run(until, max_events, events_counted() - before);
  }
  uint64_t done = 0;
  while (done < max_events && queue_.pop_due(until, ev)) {
    ++done;
    dispatch(ev);
  }
  return finish_run(until, max_events, done);
}

uint64_t Engine::run_stoppable(SimTime until, uint64_t max_events) {
  Event ev;
  uint64_t done = 0;
  while (!stop_ && (max_events == 0 || done < max_events) && queue_.pop_due(until, ev)) {
    ++done;
    dispatch(ev);
  }
  return finish_run(until, max_events, done);
}

}  // namespace rfabric::engine
