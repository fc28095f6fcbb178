// event_queue.hpp: the pending-event set, ordered by (time, seq).
// seq is a per-engine counter, so equal-time events run in the order they were scheduled
// and every run is bit-reproducible. Events are 24-byte PODs in one vector used as a 4-ary
// min-heap: push and pop are O(log4 n) with no allocation once the vector has grown.
// Cancellation is lazy: handlers recognise stale events from element state (generation or
// deadline) and ignore them, so the heap is never searched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/time.hpp"

namespace rfabric::engine {

struct Event {
  SimTime time;
  uint64_t seq;
  uint32_t target;  ///< element index, meaning chosen by the handler of `kind`
  uint32_t kind;    ///< handler index registered with the Engine
};

class EventQueue {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  void reserve(size_t n) { heap_.reserve(n); }

  void push(const Event& ev) {
    size_t i = heap_.size();
    heap_.push_back(ev);
    while (i > 0) {
      const size_t parent = (i - 1) >> 2;
      if (!less(ev, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = ev;
  }

  Event pop() {
    const Event out = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n > 0) {
      size_t i = 0;
      for (;;) {
        const size_t c = (i << 2) + 1;
        if (c >= n) break;
        size_t best = c;
        const size_t end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; ++k)
          if (less(heap_[k], heap_[best])) best = k;
        if (!less(heap_[best], last)) break;
        heap_[i] = heap_[best];
        i = best;
      }
      heap_[i] = last;
    }
    return out;
  }

 private:
  static bool less(const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  std::vector<Event> heap_;
};

}  // namespace rfabric::engine
