// event_queue.hpp: the pending-event set, ordered by time, and among equal times by the
// order they were scheduled, so every run is bit-reproducible. Events are 16-byte PODs
// (no sequence number: push order is kept structurally); the Engine uses a calendar
// queue (EventQueue) with a 4-ary heap (HeapQueue) for the far future. No allocation per
// event once buckets have grown. Cancellation is mostly lazy: handlers recognise stale events
// from element state (generation or deadline) and ignore them; cancel() takes a near event out
// of its bucket (a short walk) for callers that reschedule often (the flow backend's finishes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/check.hpp"
#include "engine/time.hpp"

/// Force inlining of small functions on the per-event path.
#define RF_HOT [[gnu::always_inline]] inline

namespace rfabric::engine {

struct Event {
  SimTime time;
  uint32_t target;  ///< element index, meaning chosen by the handler of `kind`
  uint32_t kind;    ///< handler index registered with the Engine
};

/// 4-ary min-heap on (time, push order): O(log4 n) push and pop. Used for the calendar
/// queue's far future, and kept as a reference implementation.
class HeapQueue {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front().ev; }

  /// Returns the event's serial (its place among equal times), which names it for cancel.
  uint64_t push(const Event& ev) {
    const Item item{ev, seq_++};
    size_t i = heap_.size();
    heap_.push_back(item);
    while (i > 0) {
      const size_t parent = (i - 1) >> 2;
      if (!before(item, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = item;
    return item.seq;
  }

  /// The serial of the top event (push()'s return value for it).
  uint64_t top_seq() const { return heap_.front().seq; }
  /// The serial the next push will get.
  uint64_t next_seq() const { return seq_; }

  /// Take out every event whose serial is in `seqs` (sorted), then restore the heap: O(n log m)
  /// in one sequential pass, where popping them one by one costs a walk down the heap each.
  void remove_sorted(const std::vector<uint64_t>& seqs) {
    size_t k = 0;
    for (const Item& it : heap_)
      if (!std::binary_search(seqs.begin(), seqs.end(), it.seq)) heap_[k++] = it;
    heap_.resize(k);
    for (size_t i = k / 4 + 1; i-- > 0;) sift_down(i);
  }

  Event pop() {
    const Event out = heap_.front().ev;
    const Item last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) place(0, last);
    return out;
  }

 private:
  struct Item {
    Event ev;
    uint64_t seq;  ///< push order: ties in time pop first in, first out
  };
  /// (time, seq) order as one 128-bit comparison (time >= 0, so unsigned order is right).
  static bool before(const Item& a, const Item& b) {
    const unsigned __int128 ka = (static_cast<unsigned __int128>(a.ev.time) << 64) | a.seq;
    const unsigned __int128 kb = (static_cast<unsigned __int128>(b.ev.time) << 64) | b.seq;
    return ka < kb;
  }
  /// Put `item` at slot i (a hole) or below it, moving smaller children up.
  void place(size_t i, const Item item) {
    const size_t n = heap_.size();
    for (;;) {
      const size_t c = (i << 2) + 1;
      if (c >= n) break;
      size_t best = c;
      const size_t end = c + 4 < n ? c + 4 : n;
      for (size_t k = c + 1; k < end; ++k)
        if (before(heap_[k], heap_[best])) best = k;
      if (!before(heap_[best], item)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = item;
  }
  void sift_down(size_t i) {
    if (i < heap_.size()) place(i, heap_[i]);
  }

  std::vector<Item> heap_;
  uint64_t seq_ = 0;
};

/// Calendar queue: the pending-event set used by the Engine.
///
/// Time is cut into buckets of 2^kBucketBits ps; a wheel of kBuckets buckets covers the
/// near future and a HeapQueue holds events beyond it. Each bucket is a singly linked list
/// of pooled nodes (named by byte offset into the pool) kept sorted by time, equal times in push order;
/// events nearly always arrive in order within a bucket, so a push is an append at the tail, and a pop takes
/// the head of the first non-empty bucket (found with a bitmap). Pop order is exactly (time, push order), as
/// the reference heap's. Costs: push O(1) (O(k) for an out-of-order insert into a bucket of k events), pop
/// O(1) plus the scan over empty buckets; no allocation once the node pool has grown. Packet simulations
/// schedule almost everything a few microseconds ahead, where this beats a heap of tens of thousands of
/// events (bench/README.md has the instruction counts).
class EventQueue {
 public:
  static constexpr int kBucketBits = 9;                ///< 512 ps per bucket
  static constexpr size_t kBuckets = size_t{1} << 18;  ///< horizon ~134 us

  EventQueue() : buckets_(kBuckets), bitmap_(kBuckets / 64, 0), cur_bucket_(buckets_.data()) {}
  EventQueue(const EventQueue&) = delete;  // (cur_bucket_ points into buckets_)
  EventQueue& operator=(const EventQueue&) = delete;

  /// Events held (off the hot path: counts the free list, so pushes and pops keep no count).
  size_t size() const {
    size_t free = 0;
    for (uint32_t n = free_; n != kNil; n = node(n).next) ++free;
    return nodes_.size() - free + far_.size() - cancelled_.size();
  }
  bool empty() const {
    if (far_.size() > cancelled_.size()) return false;  // (cancelled_: far events all)
    for (const uint64_t word : bitmap_)
      if (word) return false;
    return true;
  }

  /// Room for n pending events without moving the node pool (untouched until used).
  void reserve(size_t n) { nodes_.reserve(n); }

  /// The next event; the queue must not be empty.
  const Event& top() {
    prepare();
    return node(buckets_[cur_slot()].head).ev;
  }

  RF_HOT void push(const Event& ev) { push(ev.time, ev.target, ev.kind); }

  /// push() from the event's fields: the node is written in place, with no event built
  /// on the stack and copied.
  RF_HOT void push(SimTime time, uint32_t target, uint32_t kind) {
    const int64_t b = time >> kBucketBits;
    // one unsigned test for the window [cur_, cur_ + kBuckets); the rare cases (outside it,
    // or no free node) in one out-of-line call at the end, so a caller's per-event path that
    // ends in a push makes no call but a tail call and saves no registers for it
    if (static_cast<uint64_t>(b - cur_) >= kBuckets || free_ == kNil) [[unlikely]] {
      push_slow(time, target, kind);
      return;
    }
    const uint32_t n = free_;
    free_ = node(n).next;
    Node& nd = node(n);
    nd.ev.time = time;
    nd.ev.target = target;
    nd.ev.kind = kind;
    link(static_cast<size_t>(b) & (kBuckets - 1), n, time);
  }

  RF_HOT Event pop() {
    prepare();
    return take_head(cur_slot());
  }

  /// Take the queued event with exactly these fields out of the queue, if it is in the wheel
  /// among the first kCancelWalk events of its bucket; returns whether it was. The others
  /// stay queued and their order with them (so equal times still pop in push order). An event
  /// not found (in the far heap, deep in a crowded bucket, or not queued at all) is left for
  /// its handler to recognise as stale, as without cancel. The walk is bounded so that a burst
  /// of equal-time events cancelled one by one costs no more than their pushes.
  bool cancel(SimTime time, uint32_t target, uint32_t kind, uint64_t ticket = kNoTicket) {
    const int64_t b = time >> kBucketBits;
    if (time < 0 || b < cur_) return false;
    if (static_cast<uint64_t>(b - cur_) >= kBuckets) {
      // In the far heap, named by its serial: marked, and dropped when it reaches the top. A
      // ticket from before the last rebase may name an event rebase re-queued under another
      // serial, so it is not trusted.
      if (ticket == kNoTicket || ticket < ticket_floor_) return false;
      cancelled_.push_back(Cancelled{time, ticket});
      std::push_heap(cancelled_.begin(), cancelled_.end(), later);
      if (cancelled_.size() >= kCompactAt && 2 * cancelled_.size() >= far_.size()) compact_far();
      return true;
    }
    const size_t slot = static_cast<size_t>(b) & (kBuckets - 1);
    Bucket& bk = buckets_[slot];
    uint32_t prev = kNil;
    uint32_t n = bk.head;
    for (int walked = 0;; ++walked) {
      if (n == kNil || walked == kCancelWalk) return false;
      const Event& ev = node(n).ev;
      if (ev.time == time && ev.target == target && ev.kind == kind) break;
      if (ev.time > time) return false;  // (sorted: it is not further on)
      prev = n;
      n = node(n).next;
    }
    const uint32_t next = node(n).next;
    if (prev == kNil)
      bk.head = next;
    else
      node(prev).next = next;
    if (bk.tail == n) bk.tail = prev;
    // (the hint must name a node in the bucket or one link() recognises as out of it: prev,
    // when there is one, is in it and not after the cancelled node)
    if (bk.hint == n) bk.hint = prev;
    if (bk.head == kNil) {
      bk.tail = bk.hint = kNil;
      bitmap_[slot >> 6] &= ~(uint64_t{1} << (slot & 63));
    }
    release(n);
    return true;
  }
  /// Events cancel() looks at in a bucket before it gives up.
  static constexpr int kCancelWalk = 16;
  /// push_ticket()'s value for an event in the wheel (cancel() finds it by its fields).
  static constexpr uint64_t kNoTicket = ~uint64_t{0};

  /// push() that returns a ticket for cancel(): the far heap's serial of an event beyond the
  /// wheel (found there by it), else kNoTicket.
  uint64_t push_ticket(SimTime time, uint32_t target, uint32_t kind) {
    const int64_t b = time >> kBucketBits;
    if (b - cur_ >= static_cast<int64_t>(kBuckets)) return far_.push(Event{time, target, kind});
    push(time, target, kind);
    return kNoTicket;
  }

  /// Pop the next event into `out` if the queue holds one with time <= until (one bucket
  /// lookup for the test and the pop, the run loop's path).
  RF_HOT bool pop_due(SimTime until, Event& out) { return pop_if<true>(until, out); }
  /// pop_due(kNever, out): no event is later, so no time test.
  RF_HOT bool pop_any(Event& out) { return pop_if<false>(kNever, out); }

 private:
  template <bool kBounded>
  RF_HOT bool pop_if(SimTime until, Event& out) {
    if (cur_bucket_->head == kNil && !next_bucket()) return false;
    Bucket& b = *cur_bucket_;
    const uint32_t n = b.head;
    if (kBounded && node(n).ev.time > until) return false;
    // take_head() on the current bucket, through its pointer
    out = node(n).ev;
    b.head = node(n).next;
    if (b.head == kNil) {
      b.tail = b.hint = kNil;
      const size_t slot = cur_slot();
      bitmap_[slot >> 6] &= ~(uint64_t{1} << (slot & 63));
    }
    release(n);
    return true;
  }

  RF_HOT Event take_head(size_t slot) {
    const uint32_t n = buckets_[slot].head;
    const Event out = node(n).ev;
    buckets_[slot].head = node(n).next;
    if (buckets_[slot].head == kNil) {
      buckets_[slot].tail = buckets_[slot].hint = kNil;
      bitmap_[slot >> 6] &= ~(uint64_t{1} << (slot & 63));
    }
    release(n);
    return out;
  }

  /// Node n, just taken out of its bucket, onto the free list, its time set to kFreeTime: a
  /// bucket's hint may still name it (a pop does not test for its hint, which saves a test
  /// per event), and link() then recognises it as no longer in the bucket by that time.
  RF_HOT void release(uint32_t n) {
    node(n).ev.time = kFreeTime;
    node(n).next = free_;
    free_ = n;
  }

  static constexpr uint32_t kNil = 0xffffffffu;
  static constexpr SimTime kFreeTime = -1;  ///< a free node's time (every event's is >= 0)
  struct Node {
    Event ev;
    uint32_t next;
  };
  /// The node at byte offset `off` into the pool. Nodes are named by byte offset, not
  /// index (kNil none): a node's address is one add, with no multiply by its 24 bytes.
  Node& node(uint32_t off) { return *reinterpret_cast<Node*>(reinterpret_cast<char*>(nodes_.data()) + off); }
  const Node& node(uint32_t off) const {
    return *reinterpret_cast<const Node*>(reinterpret_cast<const char*>(nodes_.data()) + off);
  }

  size_t cur_slot() const { return static_cast<size_t>(cur_) & (kBuckets - 1); }

  /// Insert after every event of the bucket with time <= ev.time (link() does the ordering). That keeps
  /// (time, push order) without a sequence number: a bucket's events are either all in the wheel or all in
  /// the far heap, so an insert is either a fresh push (the latest yet) or a bucket moving in from the far
  /// heap, in order, into an empty bucket.
  RF_HOT void insert(size_t slot, const Event& ev) {
    const uint32_t n = alloc();
    node(n).ev = ev;
    link(slot, n, ev.time);
  }

  RF_HOT uint32_t alloc() {
    if (free_ != kNil) {
      const uint32_t n = free_;
      free_ = node(n).next;
      return n;
    }
    RF_CHECK(nodes_.size() < kNil / sizeof(Node), "more than ", kNil / sizeof(Node), " pending events");
    nodes_.push_back(Node{Event{0, 0, 0}, kNil});
    return static_cast<uint32_t>((nodes_.size() - 1) * sizeof(Node));
  }

  /// Link node n (its event at `time`) into bucket `slot`.
  RF_HOT void link(size_t slot, uint32_t n, SimTime time) {
    const uint32_t t = buckets_[slot].tail;
    if (t == kNil) {
      node(n).next = kNil;
      buckets_[slot].head = buckets_[slot].tail = n;
      bitmap_[slot >> 6] |= uint64_t{1} << (slot & 63);
    } else if (time >= node(t).ev.time) {
      node(n).next = kNil;
      node(t).next = n;
      buckets_[slot].tail = n;
    } else if (time < node(buckets_[slot].head).ev.time) {
      node(n).next = buckets_[slot].head;
      buckets_[slot].head = n;
    } else {
      // Out of order (e.g. equal-time bursts from synchronized flows): walk from the last
      // out-of-order insert when it is not later than ev, since such inserts come in rising runs.
      // The hint may have been popped since (pops leave it): unless it is n itself (taken
      // from the free list for this event), it is still in the bucket exactly when its time
      // is within [head's, ev's]. A popped node is free (kFreeTime, below any head's) or holds
      // an event of another bucket (outside this bucket's times, which hold both), or of this
      // one, and then it is in the list again, which is all the walk needs.
      uint32_t p = buckets_[slot].hint;
      if (p == kNil || p == n || node(p).ev.time > time ||
          node(p).ev.time < node(buckets_[slot].head).ev.time)
        p = buckets_[slot].head;
      while (node(node(p).next).ev.time <= time) p = node(p).next;
      node(n).next = node(p).next;
      node(p).next = n;
      buckets_[slot].hint = n;
    }
  }

  /// push() when the event falls outside the wheel's window or the node pool is used up.
  [[gnu::noinline]] void push_slow(SimTime time, uint32_t target, uint32_t kind) {
    const int64_t b = time >> kBucketBits;
    if (static_cast<uint64_t>(b - cur_) >= kBuckets) {
      push_outside(Event{time, target, kind}, b);
      return;
    }
    insert(static_cast<size_t>(b) & (kBuckets - 1), Event{time, target, kind});
  }

  /// An event beyond the wheel's horizon goes to the far heap; one before its window (only
  /// after a peek moved the wheel past a run's end, then something was scheduled earlier)
  /// slides the window back first.
  [[gnu::noinline]] void push_outside(const Event& ev, int64_t b) {
    if (b >= cur_) {
      far_.push(ev);
      return;
    }
    rebase(b);
    insert(static_cast<size_t>(b) & (kBuckets - 1), ev);
  }

  /// advance() when the current bucket ran dry: the next non-empty bucket is most often
  /// later in the same bitmap word, and then, with nothing in the far heap, the move takes
  /// no call and no scan. (The far heap must be empty: its events enter the wheel only as
  /// advance() moves the window.)
  RF_HOT bool next_bucket() {
    const size_t slot = cur_slot();
    const uint64_t bits = bitmap_[slot >> 6] & (~uint64_t{0} << (slot & 63));
    if (bits && far_.empty()) [[likely]] {
      set_cur(cur_ + static_cast<int64_t>(static_cast<size_t>(__builtin_ctzll(bits)) - (slot & 63)));
      return true;
    }
    return advance();
  }
  /// Make cur_ the first non-empty bucket (the queue must not be empty).
  RF_HOT void prepare() {
    if (cur_bucket_->head != kNil) return;  // (the bitmap serves advance()'s scan)
    advance();
  }
  /// cur_ changed: its bucket's address.
  void set_cur(int64_t b) {
    cur_ = b;
    cur_bucket_ = &buckets_[cur_slot()];
  }

  /// Move cur_ to the next bucket holding events, pulling far events into the wheel.
  /// Returns false, moving nothing, when the queue is empty.
  bool advance() {
    if (!cancelled_.empty()) drop_cancelled();
    const size_t slot = cur_slot();
    size_t next = kBuckets;
    size_t word = slot >> 6;
    uint64_t bits = bitmap_[word] & (~uint64_t{0} << (slot & 63));
    if (!bits) {
      // the words after the current one, then those from the wheel's start up to it whole
      // (its bits below the slot are the window's far end)
      size_t w = first_word(word + 1, kWords);
      if (w == kWords && (w = first_word(0, word + 1)) == word + 1) w = kWords;
      if (w < kWords) {
        word = w;
        bits = bitmap_[w];
      }
    }
    if (bits) {
      const size_t found = (word << 6) + static_cast<size_t>(__builtin_ctzll(bits));
      next = (found + kBuckets - slot) & (kBuckets - 1);
    }
    if (far_.empty()) {  // the common case: the next bucket is in the wheel, or nothing is left
      if (next == kBuckets) return false;
      set_cur(cur_ + static_cast<int64_t>(next));
      return true;
    }
    int64_t target = next < kBuckets ? cur_ + static_cast<int64_t>(next) : INT64_MAX;
    const int64_t fb = far_.top().time >> kBucketBits;
    if (fb < target) target = fb;
    set_cur(target);
    while (!far_.empty() && (far_.top().time >> kBucketBits) < cur_ + static_cast<int64_t>(kBuckets)) {
      const Event ev = far_.pop();
      insert(static_cast<size_t>(ev.time >> kBucketBits) & (kBuckets - 1), ev);
      if (!cancelled_.empty()) drop_cancelled();
    }
    return true;
  }

  static constexpr size_t kWords = kBuckets / 64;  ///< the bitmap's words
  /// The first non-zero bitmap word in [a, b), else b. A flow simulation's events lie
  /// microseconds to milliseconds apart, so advance() often crosses most of the wheel: eight
  /// words are tested with one branch (a packet simulation seldom scans past one word).
  size_t first_word(size_t a, size_t b) const {
    const uint64_t* const w = bitmap_.data();
    for (; a < b && (a & 7) != 0; ++a)
      if (w[a]) return a;
    for (; a + 8 <= b; a += 8)
      if ((w[a] | w[a + 1] | w[a + 2] | w[a + 3] | w[a + 4] | w[a + 5] | w[a + 6] | w[a + 7]) != 0) break;
    for (; a < b; ++a)
      if (w[a]) return a;
    return b;
  }

  /// Far events cancelled before compact_far() takes them out at once (at least this many,
  /// and half the far heap): until then each is dropped as it reaches the top.
  static constexpr size_t kCompactAt = 1024;
  [[gnu::noinline]] void compact_far() {
    std::vector<uint64_t> seqs(cancelled_.size());
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i] = cancelled_[i].seq;
    std::sort(seqs.begin(), seqs.end());
    far_.remove_sorted(seqs);
    cancelled_.clear();
  }

  /// Pop the far heap's top while it is a cancelled event. cancelled_ holds far events only,
  /// ordered as the far heap is, so the first of them is at its top or later.
  [[gnu::noinline]] void drop_cancelled() {
    while (!cancelled_.empty() && !far_.empty() && far_.top().time == cancelled_.front().time &&
           far_.top_seq() == cancelled_.front().seq) {
      far_.pop();
      std::pop_heap(cancelled_.begin(), cancelled_.end(), later);
      cancelled_.pop_back();
    }
  }

  /// An event before the wheel's window (after a peek moved it ahead): slide the window back
  /// to start at bucket b. A slot's absolute bucket does not depend on the window's start, so
  /// only the buckets that fall off its far end, [b + kBuckets, old + kBuckets), move to the
  /// far heap: O(old - b) buckets, not the whole wheel.
  void rebase(int64_t b) {
    const int64_t n = static_cast<int64_t>(kBuckets);
    const int64_t old = cur_;
    for (int64_t abs = std::max(b + n, old); abs < old + n; ++abs) {
      const size_t slot = static_cast<size_t>(abs) & (kBuckets - 1);
      for (uint32_t n = buckets_[slot].head; n != kNil;) {
        const uint32_t next = node(n).next;
        far_.push(node(n).ev);
        release(n);
        n = next;
      }
      buckets_[slot].head = buckets_[slot].tail = buckets_[slot].hint = kNil;
      bitmap_[slot >> 6] &= ~(uint64_t{1} << (slot & 63));
    }
    set_cur(b);
    ticket_floor_ = far_.next_seq();
  }

  std::vector<Node> nodes_;
  uint32_t free_ = kNil;
  struct Bucket {
    uint32_t head = kNil, tail = kNil;  ///< first and last event
    uint32_t hint = kNil;               ///< last out-of-order insert
  };
  std::vector<Bucket> buckets_;
  std::vector<uint64_t> bitmap_;
  HeapQueue far_;
  int64_t cur_ = 0;     ///< absolute index of the current bucket
  Bucket* cur_bucket_;  ///< &buckets_[cur_slot()] (the run loop's one load to reach it)
  /// Far events cancelled, a min-heap on (time, serial); each is still in far_.
  struct Cancelled {
    SimTime time;
    uint64_t seq;
  };
  static bool later(const Cancelled& a, const Cancelled& b) {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
  std::vector<Cancelled> cancelled_;
  uint64_t ticket_floor_ = 0;  ///< far serials below it may have been re-queued by rebase
};

}  // namespace rfabric::engine
