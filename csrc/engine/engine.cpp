#include "engine/engine.hpp"

namespace rfabric::engine {

uint64_t Engine::run(SimTime until, uint64_t max_events) {
  uint64_t done = 0;
  Event ev;
  while ((max_events == 0 || done < max_events) && queue_.pop_due(until, ev)) {
    now_ = ev.time;
    ++done;
    Kind& k = kinds_[ev.kind];
    ++k.count;
    k.handler->on_event(ev);
  }
  return finish_run(until, max_events, done);
}

}  // namespace rfabric::engine
