// test_event_queue.cpp: the pending-event set (engine/event_queue.hpp) and the Engine's run
// loop. Oracle: a std::priority_queue ordered by (time, push serial), i.e. the documented
// contract "by time, and among equal times in the order scheduled"; for cancel(), an ordered
// set of the same keys, from which a cancelled event is erased.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <queue>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "engine/engine.hpp"
#include "engine/event_queue.hpp"

using rfabric::engine::Engine;
using rfabric::engine::Event;
using rfabric::engine::EventQueue;
using rfabric::engine::HeapQueue;
using rfabric::engine::SimTime;

namespace {

/// Width of the calendar's wheel in ps: events further ahead go to its far heap.
constexpr SimTime kWheelPs = static_cast<SimTime>(EventQueue::kBuckets) << EventQueue::kBucketBits;

/// The oracle: a min-heap on (time, serial), serial = push order.
struct Oracle {
  using Item = std::tuple<SimTime, uint64_t, uint32_t>;  // time, serial, target
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> q;
  uint64_t serial = 0;
  void push(SimTime t, uint32_t target) { q.emplace(t, serial++, target); }
  Item pop() {
    const Item it = q.top();
    q.pop();
    return it;
  }
};

template <class Q>
void check_pop(Q& queue, Oracle& oracle) {
  REQUIRE(!queue.empty());
  REQUIRE(!oracle.q.empty());
  const auto [t, serial, target] = oracle.pop();
  const Event ev = queue.pop();
  CHECK(ev.time == t);
  CHECK(ev.target == target);
}

/// An oracle's pending events, (time, push serial, target): they pop in that order.
using Pending = std::set<std::tuple<SimTime, uint64_t, uint32_t>>;

/// Pop the queue's next event and the oracle's first and check they are one event; its time.
SimTime pop_both(EventQueue& q, Pending& o) {
  const auto k = *o.begin();
  o.erase(o.begin());
  const Event ev = q.pop();
  REQUIRE(ev.time == std::get<0>(k));
  REQUIRE(ev.target == std::get<2>(k));
  return ev.time;
}

/// Pop both to the end, event by event, and check the queue is left empty.
void drain_both(EventQueue& q, Pending& o) {
  while (!o.empty()) pop_both(q, o);
  CHECK(q.empty());
}
}  // namespace

TEST_CASE("EventQueue pops by time, equal times in push order") {
  EventQueue q;
  Oracle o;
  // scrambled times with many ties, within one bucket, across buckets and beyond the wheel
  const SimTime times[] = {700,          5,         5, 512,          0,   5,           511, 700,
                           kWheelPs + 3, 1'000'000, 0, kWheelPs + 3, 512, 2 * kWheelPs};
  uint32_t target = 0;
  for (const SimTime t : times) {
    q.push(Event{t, target, 7});
    o.push(t, target);
    ++target;
  }
  CHECK(q.size() == std::size(times));
  while (!o.q.empty()) check_pop(q, o);
  CHECK(q.empty());
  CHECK(q.size() == 0);
}

TEST_CASE("EventQueue keeps the kind and the target of each event") {
  EventQueue q;
  q.push(10, 4, 2);
  q.push(Event{3, 9, 5});
  const Event a = q.pop();
  CHECK(a.time == 3);
  CHECK(a.target == 9);
  CHECK(a.kind == 5);
  const Event b = q.pop();
  CHECK(b.time == 10);
  CHECK(b.target == 4);
  CHECK(b.kind == 2);
}

TEST_CASE("EventQueue ties across the far heap and the wheel stay in push order") {
  // A at T lands in the far heap; popping an event shortly before T brings T's bucket into
  // the wheel; B and C, pushed later at T, must still pop after A.
  EventQueue q;
  Oracle o;
  const SimTime T = 3 * kWheelPs + 1234;
  q.push(T, 0, 0);
  o.push(T, 0);
  q.push(T - 100, 1, 0);
  o.push(T - 100, 1);
  check_pop(q, o);  // T - 100: the window now starts next to T
  q.push(T, 2, 0);
  o.push(T, 2);
  q.push(T, 3, 0);
  o.push(T, 3);
  while (!o.q.empty()) check_pop(q, o);
}

TEST_CASE("EventQueue finds the next bucket at every distance across the wheel") {
  // The scan past empty buckets tests the bitmap eight words at a time: the next event at
  // each distance around those blocks' edges, the wheel's end, and wrapped round to the
  // current word's buckets below the window's start, from starts at several offsets in a
  // word and a block, with and without a later event in the far heap.
  constexpr SimTime kBucketPs = SimTime{1} << EventQueue::kBucketBits;
  const SimTime nb = static_cast<SimTime>(EventQueue::kBuckets);
  std::vector<SimTime> dists;
  for (SimTime d = 1; d < 140; ++d) dists.push_back(d);
  for (const SimTime block : {SimTime{64}, SimTime{512}, nb / 2, nb})
    for (SimTime k = -65; k <= 65; k += 13)
      if (block + k > 0 && block + k < nb) dists.push_back(block + k);
  for (SimTime d = nb - 70; d < nb; ++d) dists.push_back(d);
  for (const SimTime start : {SimTime{0}, SimTime{5}, SimTime{63}, SimTime{64 * 7 + 9}, nb - 3})
    for (const bool far : {false, true}) {
      EventQueue q;
      Pending o;
      uint64_t serial = 0;
      uint32_t target = 0;
      auto push = [&](SimTime t) {
        q.push(t, target, 0);
        o.emplace(t, serial++, target++);
      };
      SimTime now = start * kBucketPs + 7;
      push(now);
      pop_both(q, o);  // the window starts at `start`'s bucket
      for (const SimTime d : dists) {
        if (far) push(now + 3 * nb * kBucketPs);
        push(now + d * kBucketPs + 11);
        now = pop_both(q, o);
      }
      drain_both(q, o);
    }
}

TEST_CASE("EventQueue takes an earlier event after a peek moved its window ahead") {
  // top() advances the wheel to a far event; an event scheduled before it afterwards (the
  // Engine peeks at the next event time, then a handler schedules something sooner) must
  // still come first, and the far ones keep their order.
  EventQueue q;
  Oracle o;
  const SimTime far = 5 * kWheelPs;
  for (uint32_t i = 0; i < 5; ++i) {
    q.push(far + i * kWheelPs / 3, i, 0);
    o.push(far + i * kWheelPs / 3, i);
  }
  CHECK(q.top().time == far);
  q.push(17, 10, 0);
  o.push(17, 10);
  q.push(far - 1, 11, 0);
  o.push(far - 1, 11);
  q.push(far, 12, 0);  // a tie with the first far event, pushed after it
  o.push(far, 12);
  CHECK(q.top().time == 17);
  while (!o.q.empty()) check_pop(q, o);
  CHECK(q.empty());
}

TEST_CASE("EventQueue pop_due stops at the bound and pops nothing past it") {
  EventQueue q;
  q.push(100, 1, 0);
  q.push(200, 2, 0);
  q.push(kWheelPs * 4, 3, 0);
  Event ev{};
  REQUIRE(q.pop_due(150, ev));
  CHECK(ev.target == 1);
  CHECK_FALSE(q.pop_due(150, ev));
  CHECK(q.size() == 2);
  REQUIRE(q.pop_due(200, ev));  // inclusive bound
  CHECK(ev.target == 2);
  CHECK_FALSE(q.pop_due(kWheelPs * 4 - 1, ev));
  REQUIRE(q.pop_due(kWheelPs * 4, ev));
  CHECK(ev.target == 3);
  CHECK_FALSE(q.pop_due(rfabric::engine::kNever, ev));
  CHECK(q.empty());
}

TEST_CASE("EventQueue matches the oracle on random engine-like schedules") {
  // As the Engine uses it: every push at or after the time of the last event popped, at
  // distances from 0 (ties) through one bucket, the wheel, to beyond it, and on a grid of
  // far times that many events share; peeks (top) between,
  // which may move the window past later pushes; pop_due with random bounds.
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    EventQueue q;
    Oracle o;
    SimTime now = 0;
    uint32_t target = 0;
    auto ahead = [&]() -> SimTime {
      switch (rng() % 7) {
        case 0:
          return 0;
        case 1:
          return static_cast<SimTime>(rng() % 600);
        case 2:
          return static_cast<SimTime>(rng() % 100'000);
        case 3:
          return static_cast<SimTime>(rng() % static_cast<uint64_t>(kWheelPs));
        case 4:
          return static_cast<SimTime>(rng() % static_cast<uint64_t>(4 * kWheelPs));
        case 5: {  // a grid of absolute times up to three wheels ahead: ties in the far heap
          const SimTime grid = kWheelPs / 2;
          return (now / grid + 1 + static_cast<SimTime>(rng() % 6)) * grid - now;
        }
        default:
          return static_cast<SimTime>(rng() % 4) * 512;  // bucket edges
      }
    };
    for (int step = 0; step < 4000; ++step) {
      const uint64_t r = rng() % 10;
      if (r < 5 || o.q.empty()) {
        const SimTime t = now + ahead();
        q.push(t, target, static_cast<uint32_t>(seed));
        o.push(t, target);
        ++target;
      } else if (r < 8) {
        const auto [t, serial, tg] = o.pop();
        const Event ev = q.pop();
        REQUIRE(ev.time == t);
        REQUIRE(ev.target == tg);
        now = t;
      } else if (r < 9) {
        REQUIRE(q.top().time == std::get<0>(o.q.top()));
      } else {
        const SimTime until = now + ahead();
        Event ev{};
        const bool due = std::get<0>(o.q.top()) <= until;
        REQUIRE(q.pop_due(until, ev) == due);
        if (due) {
          const auto [t, serial, tg] = o.pop();
          REQUIRE(ev.time == t);
          REQUIRE(ev.target == tg);
          now = t;
        }
      }
      if (step % 500 == 0) REQUIRE(q.size() == o.q.size());
    }
    while (!o.q.empty()) check_pop(q, o);
    CHECK(q.empty());
  }
}

TEST_CASE("EventQueue keeps order when out-of-order inserts follow pops of their hint") {
  // Dense churn inside a few buckets: many events out of order (each such insert leaves its
  // node as the bucket's hint), pops that take the hint node out and free it, pushes that
  // reuse it in this bucket or the next, then more out-of-order inserts that must not walk
  // from it unless it is in the bucket again.
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    EventQueue q;
    Oracle o;
    SimTime now = 0;
    uint32_t target = 0;
    for (int step = 0; step < 6000; ++step) {
      if (rng() % 8 < 5 || o.q.empty()) {
        // ties, and times within the current bucket and the next, in any order
        const SimTime t = now + (rng() % 3 == 0 ? 0 : static_cast<SimTime>(rng() % 1024));
        q.push(t, target, 0);
        o.push(t, target);
        ++target;
      } else {
        const auto [t, serial, tg] = o.pop();
        const Event ev = q.pop();
        REQUIRE(ev.time == t);
        REQUIRE(ev.target == tg);
        now = t;
      }
    }
    while (!o.q.empty()) check_pop(q, o);
    CHECK(q.empty());
  }
}

TEST_CASE("EventQueue cancel takes out near events and keeps the others' order") {
  // Pushes at ties, within a few buckets, across the wheel and beyond it; cancels of random
  // pending events (head, middle, tail, the hint of out-of-order inserts, a bucket's last
  // event) by their tickets; pops. Every cancel of an event in the wheel within the walk's
  // bound, and of one in the far heap, must succeed, and the pops must be the oracle's minus
  // the cancelled events. (No peeks: the window is the last pop's bucket on.)
  using Key = std::tuple<SimTime, uint64_t, uint32_t>;  // time, serial, target
  int near_taken = 0, far_taken = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    EventQueue q;
    std::set<Key> o;
    std::vector<Key> live;         // pending events, for picking one at random
    std::vector<uint64_t> ticket;  // by target
    SimTime now = 0;
    uint64_t serial = 0;
    uint32_t target = 0;
    for (int step = 0; step < 5000; ++step) {
      const uint64_t r = rng() % 10;
      if (r < 5 || o.empty()) {
        SimTime t = now;
        switch (rng() % 4) {
          case 0:
            break;
          case 1:
            t += static_cast<SimTime>(rng() % 2048);
            break;
          case 2:
            t += static_cast<SimTime>(rng() % static_cast<uint64_t>(kWheelPs));
            break;
          default:
            t += static_cast<SimTime>(rng() % static_cast<uint64_t>(3 * kWheelPs));
        }
        ticket.push_back(q.push_ticket(t, target, 7));
        o.emplace(t, serial, target);
        live.emplace_back(t, serial, target);
        ++serial;
        ++target;
      } else if (r < 7) {
        const size_t i = rng() % live.size();
        const Key k = live[i];
        if (!o.count(k)) {  // popped already: cancelling it must find nothing
          CHECK_FALSE(q.cancel(std::get<0>(k), std::get<2>(k), 7, EventQueue::kNoTicket));
          live[i] = live.back();
          live.pop_back();
          continue;
        }
        const SimTime t = std::get<0>(k);
        // position among the pending events of its bucket, to know whether the walk reaches it
        const SimTime b0 = (t >> EventQueue::kBucketBits) << EventQueue::kBucketBits;
        const auto pos = std::distance(o.lower_bound(Key{b0, 0, 0}), o.find(k));
        const bool far = (t >> EventQueue::kBucketBits) - (now >> EventQueue::kBucketBits) >=
                         static_cast<SimTime>(EventQueue::kBuckets);
        CHECK_FALSE(q.cancel(t, std::get<2>(k), 8));  // another kind, no ticket: not that event
        const bool out = q.cancel(t, std::get<2>(k), 7, ticket[std::get<2>(k)]);
        CHECK(out == (far || pos < EventQueue::kCancelWalk));
        if (out) {
          o.erase(k);
          live[i] = live.back();
          live.pop_back();
          ++(far ? far_taken : near_taken);
        }
      } else {
        REQUIRE(!o.empty());
        now = pop_both(q, o);
      }
      if (step % 500 == 0) REQUIRE(q.size() == o.size());
    }
    drain_both(q, o);
  }
  CHECK(near_taken > 1000);
  CHECK(far_taken > 1000);
}

TEST_CASE("EventQueue cancel of most far events: the far heap compacted keeps the rest's order") {
  // Thousands of far events on a coarse grid (many ties), most cancelled in random order,
  // pops and near pushes between: past kCompactAt cancels the far heap is rebuilt without
  // them; every pop must still be the oracle's next.
  using Key = std::tuple<SimTime, uint64_t, uint32_t>;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    EventQueue q;
    std::set<Key> o;
    std::vector<std::pair<Key, uint64_t>> far;  // (key, ticket)
    uint64_t serial = 0;
    uint32_t target = 0;
    for (int i = 0; i < 6000; ++i) {
      const SimTime t = kWheelPs * 2 + static_cast<SimTime>(rng() % 400) * (kWheelPs / 16);
      const uint64_t tk = q.push_ticket(t, target, 2);
      REQUIRE(tk != EventQueue::kNoTicket);
      o.emplace(t, serial, target);
      far.emplace_back(Key{t, serial++, target++}, tk);
    }
    std::shuffle(far.begin(), far.end(), rng);
    SimTime now = 0;
    for (size_t i = 0; i < 5000; ++i) {
      const auto& [k, tk] = far[i];
      REQUIRE(q.cancel(std::get<0>(k), std::get<2>(k), 2, tk));
      o.erase(k);
      if (i % 500 == 0) {  // a near event, popped: the window stays before the far events
        q.push(now + 1000, target, 2);
        o.emplace(now + 1000, serial++, target++);
        now = pop_both(q, o);
      }
      if (i % 700 == 0) REQUIRE(q.size() == o.size());
    }
    REQUIRE(q.size() == o.size());
    drain_both(q, o);
  }
}

TEST_CASE("EventQueue cancel after a peek moved the window and an earlier push slid it back") {
  // A ticket from before the slide names a far event the slide may have re-queued: cancel
  // declines it (the event still pops, for its handler); tickets after it work.
  EventQueue q;
  const uint64_t ta = q.push_ticket(10 * kWheelPs, 1, 0);
  const uint64_t tb = q.push_ticket(3 * kWheelPs, 2, 0);
  CHECK(ta != EventQueue::kNoTicket);
  CHECK(tb != EventQueue::kNoTicket);
  CHECK(q.top().time == 3 * kWheelPs);  // the window moves to b's bucket, b into the wheel
  q.push(5, 3, 0);                      // before the window: it slides back, b to the far heap
  CHECK_FALSE(q.cancel(3 * kWheelPs, 2, 0, tb));
  CHECK_FALSE(q.cancel(10 * kWheelPs, 1, 0, ta));
  const uint64_t td = q.push_ticket(4 * kWheelPs, 4, 0);
  const uint64_t te = q.push_ticket(4 * kWheelPs, 5, 0);
  CHECK(q.cancel(4 * kWheelPs, 4, 0, td));
  CHECK(q.size() == 4);
  const uint32_t want[] = {3, 2, 5, 1};
  for (const uint32_t w : want) CHECK(q.pop().target == w);
  CHECK(q.empty());
  (void)te;
}

TEST_CASE("EventQueue cancel with peeks and slides matches the oracle") {
  // Random pushes (near, far, on a grid of shared far times), peeks that move the window,
  // pushes before it, cancels by ticket (of pending and of popped events) and pops: whatever
  // cancel reports, the pops are the oracle's minus the events it took out, and the sizes agree.
  using Key = std::tuple<SimTime, uint64_t, uint32_t>;
  int taken = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    EventQueue q;
    std::set<Key> o;
    std::vector<Key> live;
    std::vector<uint64_t> ticket;
    SimTime now = 0;
    uint64_t serial = 0;
    uint32_t target = 0;
    for (int step = 0; step < 4000; ++step) {
      const uint64_t r = rng() % 12;
      if (r < 5 || o.empty()) {
        SimTime t = now;
        switch (rng() % 4) {
          case 0:
            t += static_cast<SimTime>(rng() % 1024);
            break;
          case 1:
            t += static_cast<SimTime>(rng() % static_cast<uint64_t>(kWheelPs));
            break;
          case 2: {
            const SimTime grid = kWheelPs / 2;
            t = (now / grid + 1 + static_cast<SimTime>(rng() % 6)) * grid;
            break;
          }
          default:
            t += static_cast<SimTime>(rng() % static_cast<uint64_t>(4 * kWheelPs));
        }
        ticket.push_back(q.push_ticket(t, target, 1));
        o.emplace(t, serial, target);
        live.emplace_back(t, serial++, target++);
      } else if (r < 8 && !live.empty()) {
        const size_t i = rng() % live.size();
        const Key k = live[i];
        const bool pending = o.count(k) > 0;
        const bool out = q.cancel(std::get<0>(k), std::get<2>(k), 1, ticket[std::get<2>(k)]);
        if (!pending) CHECK_FALSE(out);
        if (out || !pending) {
          o.erase(k);
          live[i] = live.back();
          live.pop_back();
          taken += out;
        }
      } else if (r < 9) {
        REQUIRE(q.top().time == std::get<0>(*o.begin()));
      } else {
        now = pop_both(q, o);
      }
      if (step % 250 == 0) REQUIRE(q.size() == o.size());
    }
    drain_both(q, o);
  }
  CHECK(taken > 1000);
}

TEST_CASE("EventQueue cancel within one crowded bucket: out-of-order inserts after cancels") {
  // Equal and close times in two buckets, cancels of the tail and of out-of-order inserts
  // (the bucket's hint), then inserts that must land in order.
  for (uint64_t seed = 1; seed <= 80; ++seed) {
    std::mt19937_64 rng(seed);
    EventQueue q;
    using Key = std::tuple<SimTime, uint64_t, uint32_t>;
    std::set<Key> o;
    std::vector<Key> live;
    SimTime now = 0;
    uint64_t serial = 0;
    uint32_t target = 0;
    for (int step = 0; step < 3000; ++step) {
      const uint64_t r = rng() % 10;
      if (r < 5 || o.empty()) {
        const SimTime t = now + (rng() % 3 == 0 ? 0 : static_cast<SimTime>(rng() % 1024));
        q.push(t, target, 0);
        o.emplace(t, serial, target);
        live.emplace_back(t, serial++, target++);
      } else if (r < 8 && !live.empty()) {
        // the most recent push half the time (often the hint or the tail), else any
        const size_t i = rng() % 2 ? live.size() - 1 : rng() % live.size();
        const Key k = live[i];
        live[i] = live.back();
        live.pop_back();
        if (!o.count(k)) continue;
        const SimTime b0 = (std::get<0>(k) >> EventQueue::kBucketBits) << EventQueue::kBucketBits;
        const auto pos = std::distance(o.lower_bound(Key{b0, 0, 0}), o.find(k));
        const bool out = q.cancel(std::get<0>(k), std::get<2>(k), 0);
        CHECK(out == (pos < EventQueue::kCancelWalk));
        if (out)
          o.erase(k);
        else
          live.push_back(k);
      } else {
        now = pop_both(q, o);
      }
    }
    drain_both(q, o);
  }
}

TEST_CASE("HeapQueue matches the oracle on random pushes and pops") {
  // the reference heap has no monotone-time contract: any order of times
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    HeapQueue q;
    Oracle o;
    uint32_t target = 0;
    for (int step = 0; step < 3000; ++step) {
      if (rng() % 3 != 0 || o.q.empty()) {
        const SimTime t = static_cast<SimTime>(rng() % 50);  // dense: many ties
        q.push(Event{t, target, 0});
        o.push(t, target);
        ++target;
      } else {
        REQUIRE(q.top().time == std::get<0>(o.q.top()));
        check_pop(q, o);
      }
      REQUIRE(q.size() == o.q.size());
    }
    while (!o.q.empty()) check_pop(q, o);
  }
}

namespace {
/// Records (time, target) of every event it gets, and can schedule follow-ups.
struct Recorder : rfabric::engine::Handler {
  Engine* eng = nullptr;
  uint32_t kind = 0;
  std::vector<std::pair<SimTime, uint32_t>> seen;
  SimTime follow_up_ps = -1;  ///< >= 0: every event schedules target + 100 that far ahead
  uint32_t stop_at = UINT32_MAX;
  void on_event(const Event& ev) override {
    seen.emplace_back(ev.time, ev.target);
    if (follow_up_ps >= 0 && ev.target < 100) eng->schedule(ev.time + follow_up_ps, ev.target + 100, kind);
    if (ev.target == stop_at) eng->request_stop();
  }
};
}  // namespace

TEST_CASE("Engine runs events in order up to a bound and sets its clock") {
  Engine eng(1);
  Recorder r;
  r.eng = &eng;
  r.kind = eng.register_handler(&r);
  r.follow_up_ps = 0;  // a follow-up at the same instant runs after the events already due then
  eng.schedule(50, 2, r.kind);
  eng.schedule(10, 1, r.kind);
  eng.schedule(50, 3, r.kind);
  eng.schedule(900, 4, r.kind);
  CHECK(eng.peek() == 10);
  CHECK(eng.run(100) == 6);
  const std::vector<std::pair<SimTime, uint32_t>> want{{10, 1}, {10, 101}, {50, 2},
                                                       {50, 3}, {50, 102}, {50, 103}};
  CHECK(r.seen == want);
  CHECK(eng.now() == 100);  // nothing left before the bound: the clock ends at it
  CHECK(eng.pending() == 1);
  CHECK(eng.events_processed() == 6);
  CHECK(eng.kind_count(r.kind) == 6);
  CHECK(eng.run(rfabric::engine::kNever) == 2);  // 4 at 900, then its follow-up 104
  CHECK(r.seen.back() == std::pair<SimTime, uint32_t>{900, 104});
  CHECK(eng.idle());
}

TEST_CASE("Engine stops after max_events with the clock at the last event") {
  Engine eng(1);
  Recorder r;
  r.eng = &eng;
  r.kind = eng.register_handler(&r);
  for (uint32_t i = 0; i < 5; ++i) eng.schedule(10 * (i + 1), i, r.kind);
  CHECK(eng.run(1000, 3) == 3);
  CHECK(eng.now() == 30);  // stopped early: the clock stays at the last event run
  CHECK(eng.run(1000, 3) == 2);
  CHECK(eng.now() == 1000);  // ran dry before the limit: the clock ends at the bound
}

TEST_CASE("Engine run_stoppable returns after the event that requested the stop") {
  Engine eng(1);
  Recorder r;
  r.eng = &eng;
  r.kind = eng.register_handler(&r);
  r.stop_at = 2;
  for (uint32_t i = 0; i < 5; ++i) eng.schedule(10 * (i + 1), i, r.kind);
  CHECK(eng.run_stoppable(1000) == 3);
  CHECK(eng.now() == 30);
  CHECK(eng.run_stoppable(1000) == 0);  // still requested: runs nothing
  eng.clear_stop();
  CHECK(eng.run_stoppable(1000) == 2);
  CHECK(r.seen.size() == 5);
}

namespace {
/// A direct handler's log: (clock, time, target, kind) of each call.
struct DirectLog {
  Engine* eng = nullptr;
  std::vector<std::tuple<SimTime, SimTime, uint32_t, uint32_t>> seen;
  static void call(void* self, SimTime time, uint32_t target, uint32_t kind) {
    auto* log = static_cast<DirectLog*>(self);
    log->seen.emplace_back(log->eng->now(), time, target, kind);
  }
};
}  // namespace

TEST_CASE("Engine calls direct handlers with the event's fields, interleaved with Handler kinds") {
  Engine eng(1);
  Recorder r;
  r.eng = &eng;
  DirectLog d;
  d.eng = &eng;
  r.kind = eng.register_handler(&r);
  const uint32_t dk = eng.register_direct(&DirectLog::call, &d);
  CHECK(dk == r.kind + 1);
  eng.schedule(20, 7, dk);
  eng.schedule(10, 1, r.kind);
  eng.schedule(20, 8, r.kind);
  eng.schedule(30, 9, dk);
  // to the end (kNever: the loop without a time test), then with a bound
  CHECK(eng.run(rfabric::engine::kNever) == 4);
  const std::vector<std::tuple<SimTime, SimTime, uint32_t, uint32_t>> want{{20, 20, 7, dk}, {30, 30, 9, dk}};
  CHECK(d.seen == want);
  CHECK(r.seen == std::vector<std::pair<SimTime, uint32_t>>{{10, 1}, {20, 8}});
  CHECK(eng.kind_count(dk) == 2);
  CHECK(eng.kind_count(r.kind) == 2);
  eng.schedule(40, 3, dk);
  eng.schedule(60, 4, dk);
  CHECK(eng.run(50) == 1);
  CHECK(std::get<2>(d.seen.back()) == 3);
  CHECK(eng.now() == 50);
  CHECK(eng.pending() == 1);
}

namespace {
/// Two per-frame-like kinds for Engine::run_hot (a Hot) and, as the oracle, the same two as
/// direct handlers under Engine::run(): every event logged with the clock, and followed up by
/// another of the other kind a seeded step later, until `budget` follow-ups.
struct HotLog {
  Engine* eng = nullptr;
  uint32_t arrive_kind = 0, tx_done_kind = 0;
  std::vector<std::tuple<SimTime, SimTime, uint32_t, uint32_t>> seen;
  uint64_t rng = 12345;
  int budget = 2000;
  uint32_t throw_at = 0xffffffffu;  ///< a target whose arrival throws
  void step(SimTime time, uint32_t target, uint32_t kind) {
    seen.emplace_back(eng->now(), time, target, kind);
    if (target == throw_at) throw std::runtime_error("handler failed");
    if (budget-- <= 0) return;
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    const SimTime dt = static_cast<SimTime>((rng >> 33) % 3000);  // equal times too
    eng->schedule(time + dt, target + 1, kind == arrive_kind ? tx_done_kind : arrive_kind);
  }
  void arrive(uint32_t target) { step(eng->now(), target, arrive_kind); }
  void tx_done(SimTime time, uint32_t target) { step(time, target, tx_done_kind); }
  static void direct(void* self, SimTime time, uint32_t target, uint32_t kind) {
    static_cast<HotLog*>(self)->step(time, target, kind);
  }
};
/// What Engine::run_hot calls: HotLog's members.
struct HotOf {
  HotLog* log;
  uint32_t arrive_kind, tx_done_kind;
  void arrive(uint32_t target) { log->arrive(target); }
  void tx_done(SimTime time, uint32_t target) { log->tx_done(time, target); }
};
/// An engine with a Handler kind, then the two kinds, and the same start events.
struct HotRun {
  Engine eng{1};
  Recorder r;
  HotLog h;
  HotRun() {
    r.eng = &eng;
    h.eng = &eng;
    r.kind = eng.register_handler(&r);
    h.arrive_kind = eng.register_direct(&HotLog::direct, &h);
    h.tx_done_kind = eng.register_direct(&HotLog::direct, &h);
    for (uint32_t i = 0; i < 20; ++i) {
      eng.schedule(100 * (i % 7), 1000 * i, i % 2 ? h.arrive_kind : h.tx_done_kind);
      eng.schedule(150 * i, i, r.kind);
    }
  }
  HotOf hot() { return HotOf{&h, h.arrive_kind, h.tx_done_kind}; }
};
}  // namespace

TEST_CASE("Engine run_hot runs the events run() runs, in its order, with its counts and clock") {
  for (const auto& [until, max_events] : std::vector<std::pair<SimTime, uint64_t>>{
           {rfabric::engine::kNever, 0}, {500'000, 0}, {500'000, 777}}) {
    HotRun a, b;  // a: run_hot, b: the oracle, run()
    uint64_t na = 0, nb = 0;
    for (int round = 0; round < 4; ++round) {  // in pieces, as a streaming run goes
      na += a.eng.run_hot(until, max_events, a.hot());
      nb += b.eng.run(until, max_events);
      CHECK(a.eng.now() == b.eng.now());
      CHECK(a.eng.pending() == b.eng.pending());
    }
    CHECK(na == nb);
    CHECK(a.h.seen == b.h.seen);
    CHECK(a.r.seen == b.r.seen);
    CHECK(a.eng.kind_counts() == b.eng.kind_counts());
    CHECK(a.eng.events_processed() == b.eng.events_processed());
    CHECK(a.eng.kind_count(a.h.arrive_kind) > 100);
  }
}

TEST_CASE("Engine run_hot keeps exact counts when a hot handler throws") {
  HotRun a, b;
  a.h.throw_at = b.h.throw_at = 1005;  // an arrival some way in
  CHECK_THROWS_AS(a.eng.run_hot(rfabric::engine::kNever, 0, a.hot()), std::runtime_error);
  CHECK_THROWS_AS(b.eng.run(rfabric::engine::kNever), std::runtime_error);
  CHECK(a.h.seen == b.h.seen);
  CHECK(a.eng.kind_counts() == b.eng.kind_counts());
  CHECK(a.eng.events_processed() == b.eng.events_processed());
  // and the next run goes on from there as run() does
  a.h.throw_at = b.h.throw_at = 0xffffffffu;
  CHECK(a.eng.run_hot(rfabric::engine::kNever, 0, a.hot()) == b.eng.run(rfabric::engine::kNever));
  CHECK(a.h.seen == b.h.seen);
  CHECK(a.eng.kind_counts() == b.eng.kind_counts());
}

TEST_CASE("round_nearest is std::llround") {
  // The oracle is libm's llround: halves away from zero, on halves and their neighbours,
  // whole numbers, the 2^52 and 2^53 edges, negatives, and random values of every magnitude
  // up to 2^62 (times in ps and their fractions).
  using rfabric::engine::round_nearest;
  std::vector<double> xs{0.0, -0.0, 0.49999999999999994, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e-300};
  for (const double base : {0.0, 1.0, 1e6, 4503599627370496.0, 9007199254740992.0, 4.0e18}) {
    for (const double off : {-1.0, -0.5, 0.0, 0.5, 1.0, 2.0}) {
      const double x = base + off;
      for (const double y : {x, std::nextafter(x, 0.0), std::nextafter(x, 1e300)}) {
        xs.push_back(y);
        xs.push_back(-y);
      }
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(unit(rng), static_cast<int>(rng() % 63)) * ((rng() & 1) ? 1 : -1);
    xs.push_back(x);
    xs.push_back(std::floor(x) + 0.5);
  }
  for (const double x : xs) {
    CAPTURE(x);
    REQUIRE(round_nearest(x) == std::llround(x));
  }
}
