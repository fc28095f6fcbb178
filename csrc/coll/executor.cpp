#include "coll/executor.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "engine/check.hpp"

namespace rfabric::coll {

namespace {

const char* const kKindNames[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                                  "send",       "m2n"};
const char* const kAlgoNames[] = {"auto", "ring", "hier_ring", "direct", "tree", "chain", "halving_doubling"};
static_assert(std::size(kKindNames) == kNumKinds, "one name per Kind");
static_assert(std::size(kAlgoNames) == kNumAlgos, "one name per Algo");

// NCCL's rule for fewer channels on small messages (its Simple protocol): a channel is used only
// if the op has at least nthreads x per-thread threshold bytes for it, 512 x 64 B = 32 KiB.
constexpr Bytes kBytesPerChannel = 512 * 64;

// ---- NCCL's protocol costs (docs/nccl-model.md has each and why). Facts read from NCCL's
// source (github.com/NVIDIA/nccl, 2026 snapshot); the model around them is rfabric's own.
const char* const kProtoNames[] = {"ll", "ll128", "simple"};
static_assert(std::size(kProtoNames) == kNumProtos, "one name per Proto");
// Launch latency of one collective, us, [tree, ring][LL, LL128, Simple]: the base latencies
// of NCCL's tuner (src/graph/tuning.cc, baseLatencies).
constexpr double kBaseUs[2][kNumProtos] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
// Latency of one step over a hop (flag write, poll, proxy post), us, [tree, ring][proto]:
// NCCL's hardware latencies per hop type (src/graph/tuning.cc, hwLatencies NVLINK and NET).
// They are end-to-end figures, so the fabric's own path latency is their part, not added.
constexpr double kNvlHopUs[2][kNumProtos] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
constexpr double kNetHopUs[2][kNumProtos] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
// Payload per step: LL, 8 lines of 16 B per thread x 512 threads, half of each line data
// (src/include/device.h: NCCL_LL_LINES_PER_THREAD, NCCL_LL_MAX_NTHREADS, union ncclLLFifoLine);
// LL128, 120 8-byte elements per thread x 640 threads, 15 of every 16 elements data
// (NCCL_LL128_ELEMS_PER_THREAD, NCCL_LL128_MAX_NTHREADS, NCCL_LL128_DATAELEMS); the buffers
// hold NCCL_STEPS = 8 such steps (src/init.cc, DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE).
constexpr Bytes kLLStep = 8 * 512 * 16 / 2;
constexpr Bytes kLL128Step = 120 * 640 * 8 / 16 * 15;
// Per-channel byte thresholds for the channel count (src/enqueue.cc, the loop that lowers the
// channels while bytes < channels x threads x threshold; thresholds in src/include/comm.h,
// NCCL_LL_THREAD_THRESHOLD 8 (times the ranks for a ring), NCCL_LL128_THREAD_THRESHOLD 8).
constexpr Bytes kLLBytesPerChannel = 512 * 8;
constexpr Bytes kLL128BytesPerChannel = 640 * 8;
// The SM-driven copy through NVLink reaches NCCL's per-link figure for Hopper, 20.6 GB/s
// (src/graph/topo.h, SM90_NVLINK_BW) of an NVLink4 link's 25 GB/s per direction.
constexpr double kNvlEfficiency = 20.6 / 25.0;

/// Bytes on the wire for `size` payload bytes under protocol p: an LL line of 16 B carries
/// 8 B of data (and two 4-byte flags), an LL128 line of 128 B carries 120 B (and an 8-byte flag).
Bytes wire_bytes(int32_t p, Bytes size) {
  if (p == kLL) return (size + 7) / 8 * 16;
  if (p == kLL128) return (size + 119) / 120 * 128;
  return size;
}
int64_t us_to_ps(double us) { return static_cast<int64_t>(std::llround(us * 1e6)); }

Bytes ceil_div(Bytes a, Bytes b) { return b <= 0 ? 0 : (a + b - 1) / b; }
bool power_of_two(size_t n) { return n >= 1 && (n & (n - 1)) == 0; }

}  // namespace

const std::vector<std::string>& kind_names() {
  static const std::vector<std::string> names(std::begin(kKindNames), std::end(kKindNames));
  return names;
}
const std::vector<std::string>& algo_names() {
  static const std::vector<std::string> names(std::begin(kAlgoNames), std::end(kAlgoNames));
  return names;
}
const std::vector<std::string>& proto_names() {
  static const std::vector<std::string> names(std::begin(kProtoNames), std::end(kProtoNames));
  return names;
}

/// A step-by-step communication pattern inside an op. start() issues the first flows;
/// on_flow() is told each finished flow (by the tag it was sent with) and issues what that
/// unblocks; both return true once the program has nothing left to do.
class Program {
 public:
  virtual ~Program() = default;
  virtual bool start(Executor& x, uint32_t op, uint32_t id) = 0;
  virtual bool on_flow(Executor& x, uint32_t op, uint32_t id, uint64_t tag) = 0;
  /// The flow's last byte left the sender's NIC (the connection is free for the next one).
  virtual void on_sent(Executor&, uint32_t, uint32_t, uint64_t) {}
  /// Whether its op runs a protocol (the NCCL model): then it tells send() when each flow's
  /// data became available, else the times are not kept.
  bool timed = false;
};

namespace {

/// Arrival times in FIFO order (a queue that allocates nothing until used and keeps its
/// storage once drained).
class Times {
 public:
  void push(SimTime t) { v_.push_back(t); }
  SimTime pop() {
    const SimTime t = v_[head_++];
    if (head_ == v_.size()) v_.clear(), head_ = 0;
    return t;
  }

 private:
  std::vector<SimTime> v_;
  size_t head_ = 0;
};

uint64_t tag_of(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
/// Connection identity (create_flow's ecmp_key): (src, dst, channel); channel 0 is the
/// default connection.
uint64_t connection_key(uint32_t src, uint32_t dst, uint32_t channel) {
  return (static_cast<uint64_t>(src) << 40) ^ (static_cast<uint64_t>(dst) << 16) ^ channel ^ 0x5bd1e995u;
}
uint32_t tag_hi(uint64_t t) { return static_cast<uint32_t>(t >> 32); }
uint32_t tag_lo(uint64_t t) { return static_cast<uint32_t>(t); }

/// Ring: in each of `steps` steps every rank passes a `chunk` of data to the next rank
/// (steps = n-1 for all-gather / reduce-scatter, 2(n-1) for all-reduce). As in NCCL, a
/// step's data moves in slices of at most `slice` bytes, posted in order on the connection
/// (the next as soon as the previous has left the NIC), and a rank forwards slice j of step
/// s+1 as soon as slice j of step s has arrived, so the ring runs as a pipeline.
class Ring final : public Program {
 public:
  /// `copies` > 1: the ring stands for that many channels' rings over the same edges and
  /// paths, each of its flows for their `copies` slices side by side (FlowFabric::merges_copies).
  Ring(std::vector<uint32_t> order, uint32_t steps, Bytes chunk, Bytes slice, uint32_t channel, uint32_t copies = 1)
      : order_(std::move(order)),
        steps_(steps),
        channel_(channel),
        copies_(copies),
        sent_(order_.size(), 0),
        got_(order_.size(), 0),
        busy_(order_.size(), 0),
        arrived_(order_.size()) {
    const Bytes k = std::max<Bytes>(1, ceil_div(chunk, slice));
    for (Bytes j = 0; j < k; ++j) slices_.push_back(std::min(slice, chunk - j * slice));
    if (chunk == 0) slices_.assign(1, 0);
  }
  bool start(Executor& x, uint32_t op, uint32_t id) override {
    if (order_.size() < 2 || steps_ == 0) return true;
    for (uint32_t i = 0; i < order_.size(); ++i) try_send(x, op, id, i);
    return false;
  }
  bool on_flow(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t n = static_cast<uint32_t>(order_.size());
    const uint32_t next = (tag_hi(tag) + 1) % n;
    ++got_[next];
    if (timed) arrived_[next].push(x.now());
    try_send(x, op, id, next);
    return ++done_ == total();
  }
  void on_sent(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t i = tag_hi(tag);
    busy_[i] = 0;
    try_send(x, op, id, i);
  }

 private:
  uint64_t per_rank() const { return static_cast<uint64_t>(steps_) * slices_.size(); }
  uint64_t total() const { return per_rank() * order_.size(); }
  /// Rank i sends its q-th slice (step q / K, slice q % K) once the previous one has left
  /// and, after step 0, once it holds slice q - K (the same slice of the previous step).
  void try_send(Executor& x, uint32_t op, uint32_t id, uint32_t i) {
    const uint64_t q = sent_[i], k = slices_.size();
    if (busy_[i] || q >= per_rank() || (q >= k && got_[i] < q - k + 1)) return;
    busy_[i] = 1;
    ++sent_[i];
    const uint32_t n = static_cast<uint32_t>(order_.size());
    // step 0: the rank's own data; later, the slice it forwards arrived then (in order)
    const SimTime ready = timed && q >= k ? arrived_[i].pop() : -1;
    x.send(op, id, order_[i], order_[(i + 1) % n], slices_[q % k], tag_of(i, static_cast<uint32_t>(q)),
           channel_, copies_, ready);
  }
  std::vector<uint32_t> order_;
  uint32_t steps_, channel_, copies_;
  std::vector<Bytes> slices_;
  std::vector<uint64_t> sent_, got_;
  std::vector<uint8_t> busy_;
  std::vector<Times> arrived_;  ///< per rank: when each slice not yet forwarded came
  uint64_t done_ = 0;
};

/// Mesh: independent flows, all started at once (direct all-to-all, M2N, send, ...).
class Mesh final : public Program {
 public:
  struct Edge {
    uint32_t src, dst;
    Bytes size;
  };
  explicit Mesh(std::vector<Edge> edges) : edges_(std::move(edges)) {}
  bool start(Executor& x, uint32_t op, uint32_t id) override {
    for (uint32_t i = 0; i < edges_.size(); ++i)
      x.send(op, id, edges_[i].src, edges_[i].dst, edges_[i].size, i);
    return edges_.empty();
  }
  bool on_flow(Executor&, uint32_t, uint32_t, uint64_t) override { return ++done_ == edges_.size(); }

 private:
  std::vector<Edge> edges_;
  size_t done_ = 0;
};

/// Pairwise exchange: rank i sends to rank i+k at step k = 1..n-1, one step at a time.
class Pairwise final : public Program {
 public:
  Pairwise(std::vector<uint32_t> order, Bytes size) : order_(std::move(order)), size_(size) {}
  bool start(Executor& x, uint32_t op, uint32_t id) override {
    const uint32_t n = static_cast<uint32_t>(order_.size());
    if (n < 2) return true;
    for (uint32_t i = 0; i < n; ++i) x.send(op, id, order_[i], order_[(i + 1) % n], size_, tag_of(i, 1));
    return false;
  }
  bool on_flow(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t n = static_cast<uint32_t>(order_.size());
    const uint32_t i = tag_hi(tag), k = tag_lo(tag);
    if (k + 1 < n) x.send(op, id, order_[i], order_[(i + k + 1) % n], size_, tag_of(i, k + 1));
    return ++done_ == static_cast<uint64_t>(n) * (n - 1);
  }

 private:
  std::vector<uint32_t> order_;
  Bytes size_;
  uint64_t done_ = 0;
};

/// Recursive halving / doubling: at step k rank p exchanges `bytes[k]` with p XOR mask[k];
/// it moves to step k+1 once both its send and its receive of step k are done.
class HalvingDoubling final : public Program {
 public:
  HalvingDoubling(std::vector<uint32_t> order, std::vector<uint32_t> masks, std::vector<Bytes> bytes)
      : order_(std::move(order)),
        masks_(std::move(masks)),
        bytes_(std::move(bytes)),
        step_(order_.size(), 0),
        sent_(order_.size(), 0),
        got_(order_.size(), 0) {}
  bool start(Executor& x, uint32_t op, uint32_t id) override {
    if (order_.size() < 2 || masks_.empty()) return true;
    for (uint32_t p = 0; p < order_.size(); ++p) issue(x, op, id, p);
    return false;
  }
  bool on_flow(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t p = tag_hi(tag), k = tag_lo(tag);
    const uint32_t q = p ^ masks_[k];
    sent_[p] |= uint64_t{1} << k;
    got_[q] |= uint64_t{1} << k;
    advance(x, op, id, p);
    advance(x, op, id, q);
    return finished_ == order_.size();
  }

 private:
  void issue(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t k = step_[p];
    x.send(op, id, order_[p], order_[p ^ masks_[k]], bytes_[k], tag_of(p, k));
  }
  void advance(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t k = step_[p];
    if (k >= masks_.size()) return;
    const uint64_t bit = uint64_t{1} << k;
    if (!(sent_[p] & bit) || !(got_[p] & bit)) return;
    if (++step_[p] == masks_.size()) {
      ++finished_;
    } else {
      issue(x, op, id, p);
    }
  }
  std::vector<uint32_t> order_, masks_;
  std::vector<Bytes> bytes_;
  std::vector<uint32_t> step_;
  std::vector<uint64_t> sent_, got_;
  size_t finished_ = 0;
};

/// Pipelined broadcast down a tree (a chain is a tree of fan-out 1): the message is cut into
/// chunks; each edge carries them in order (the next posted when the previous has left the
/// NIC), forwarding chunk j once its parent has received it.
class Pipeline final : public Program {
 public:
  /// `copies` > 1: the pipeline stands for that many channels' pipelines over the same edges,
  /// paths and chunks (FlowFabric::merges_copies).
  Pipeline(std::vector<uint32_t> order, std::vector<int32_t> parent, std::vector<Bytes> chunks,
           uint32_t channel = 0, uint32_t copies = 1)
      : order_(std::move(order)),
        channel_(channel),
        copies_(copies),
        parent_(std::move(parent)),
        chunks_(std::move(chunks)),
        received_(order_.size(), 0),
        next_(order_.size(), 0),
        busy_(order_.size(), 0),
        children_(order_.size()),
        arrived_(order_.size()) {
    for (uint32_t p = 1; p < order_.size(); ++p) children_[parent_[p]].push_back(p);
    received_[0] = static_cast<uint32_t>(chunks_.size());
  }
  bool start(Executor& x, uint32_t op, uint32_t id) override {
    if (order_.size() < 2 || chunks_.empty()) return true;
    for (const uint32_t c : children_[0]) try_edge(x, op, id, c);
    return false;
  }
  bool on_flow(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t p = tag_hi(tag);
    ++received_[p];  // chunks arrive in order on an edge
    for (const uint32_t c : children_[p]) {
      if (timed) arrived_[c].push(x.now());
      try_edge(x, op, id, c);
    }
    return ++done_ == (order_.size() - 1) * chunks_.size();
  }
  void on_sent(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t p = tag_hi(tag);
    busy_[p] = 0;
    try_edge(x, op, id, p);
  }

 private:
  void try_edge(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t j = next_[p];
    if (busy_[p] || j >= chunks_.size() || received_[parent_[p]] <= j) return;
    busy_[p] = 1;
    ++next_[p];
    // the root holds every chunk from the start
    const SimTime ready = timed && parent_[p] != 0 ? arrived_[p].pop() : -1;
    x.send(op, id, order_[parent_[p]], order_[p], chunks_[j], tag_of(p, j), channel_, copies_, ready);
  }
  std::vector<uint32_t> order_;
  uint32_t channel_, copies_;
  std::vector<int32_t> parent_;
  std::vector<Bytes> chunks_;
  std::vector<uint32_t> received_, next_;
  std::vector<uint8_t> busy_;
  std::vector<std::vector<uint32_t>> children_;
  /// per position: when each chunk its parent holds for it (not yet forwarded to it) arrived
  std::vector<Times> arrived_;
  uint64_t done_ = 0;
};

/// Tree all-reduce, shaped as NCCL's: inside each server a chain of its GPUs leads (over
/// NVLink) to the server's first GPU; the servers' first GPUs form a binary tree. The message
/// is cut into chunks; each chunk is reduced up the tree (a node sends chunk j to its parent
/// once every child has delivered chunk j) and broadcast back down from the root, chunks
/// pipelined. Up and down edges are separate connections, each posting its next chunk when
/// the previous one has left the NIC.
class TreeAllReduce final : public Program {
 public:
  /// `parent[p]` is p's parent position (-1 for the root at position 0).
  TreeAllReduce(std::vector<uint32_t> order, std::vector<int32_t> parent, std::vector<Bytes> chunks,
                uint32_t channel = 0)
      : order_(std::move(order)),
        up_(2 * channel + 1),
        down_(2 * channel + 2),
        parent_(std::move(parent)),
        chunks_(std::move(chunks)),
        n_(static_cast<uint32_t>(order_.size())),
        children_(n_),
        recv_up_(n_, 0),
        next_up_(n_, 0),
        busy_up_(n_, 0),
        have_down_(n_, 0),
        next_down_(n_, 0),
        busy_down_(n_, 0),
        up_ready_(n_),
        down_ready_(n_) {
    for (uint32_t p = 1; p < n_; ++p) children_[parent_[p]].push_back(p);
  }
  bool start(Executor& x, uint32_t op, uint32_t id) override {
    if (n_ < 2 || chunks_.empty()) return true;
    for (uint32_t p = 1; p < n_; ++p) try_up(x, op, id, p);  // leaves hold their data
    return false;
  }
  bool on_flow(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t p = tag_hi(tag), dir = tag_lo(tag) & 1;
    if (dir == 0) {  // up: p's chunk reached its parent
      const uint32_t parent = static_cast<uint32_t>(parent_[p]);
      const uint32_t before = reduced(parent);
      ++recv_up_[p];
      if (timed && reduced(parent) > before) {  // the parent has one more chunk reduced, now
        if (parent == 0) {
          for (uint32_t c : children_[0]) down_ready_[c].push(x.now());
        } else {
          up_ready_[parent].push(x.now());
        }
      }
      if (parent == 0) {
        for (uint32_t c : children_[0]) try_down(x, op, id, c);
      } else {
        try_up(x, op, id, parent);
      }
      return false;
    }
    ++have_down_[p];  // down: a reduced chunk reached p
    for (uint32_t c : children_[p]) {
      if (timed) down_ready_[c].push(x.now());
      try_down(x, op, id, c);
    }
    return ++done_ == static_cast<uint64_t>(n_ - 1) * chunks_.size();
  }
  void on_sent(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t p = tag_hi(tag);
    if ((tag_lo(tag) & 1) == 0) {
      busy_up_[p] = 0;
      try_up(x, op, id, p);
    } else {
      busy_down_[p] = 0;
      try_down(x, op, id, p);
    }
  }

 private:
  /// Chunks p has fully reduced: all its children delivered them (a leaf: all).
  uint32_t reduced(uint32_t p) const {
    uint32_t r = static_cast<uint32_t>(chunks_.size());
    for (uint32_t c : children_[p]) r = std::min(r, recv_up_[c]);
    return r;
  }
  void try_up(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t j = next_up_[p];
    if (busy_up_[p] || j >= chunks_.size() || reduced(p) <= j) return;
    busy_up_[p] = 1;
    ++next_up_[p];
    // a leaf holds its data from the start
    const SimTime ready = timed && !children_[p].empty() ? up_ready_[p].pop() : -1;
    x.send(op, id, order_[p], order_[parent_[p]], chunks_[j], tag_of(p, 2 * j), up_, 1, ready);
  }
  void try_down(Executor& x, uint32_t op, uint32_t id, uint32_t c) {
    const uint32_t parent = static_cast<uint32_t>(parent_[c]), j = next_down_[c];
    const uint32_t avail = parent == 0 ? reduced(0) : have_down_[parent];
    if (busy_down_[c] || j >= chunks_.size() || avail <= j) return;
    busy_down_[c] = 1;
    ++next_down_[c];
    const SimTime ready = timed ? down_ready_[c].pop() : -1;
    x.send(op, id, order_[parent], order_[c], chunks_[j], tag_of(c, 2 * j + 1), down_, 1, ready);
  }
  std::vector<uint32_t> order_;
  uint32_t up_, down_;
  std::vector<int32_t> parent_;
  std::vector<Bytes> chunks_;
  uint32_t n_;
  std::vector<std::vector<uint32_t>> children_;
  std::vector<uint32_t> recv_up_, next_up_;
  std::vector<uint8_t> busy_up_;
  std::vector<uint32_t> have_down_, next_down_;
  std::vector<uint8_t> busy_down_;
  /// when p reduced each chunk it has not yet sent up; when each chunk p's parent holds for it
  /// (not yet sent down) arrived there (at the root: was reduced)
  std::vector<Times> up_ready_, down_ready_;
  uint64_t done_ = 0;
};

/// Ranks grouped by server, each group in order of first appearance.
std::vector<std::vector<uint32_t>> by_server(net::FlowFabric& net, const std::vector<uint32_t>& ranks) {
  std::vector<std::vector<uint32_t>> groups;
  std::vector<int32_t> keys;
  for (const uint32_t r : ranks) {
    const int32_t s = net.gpu_server(r);
    auto it = std::find(keys.begin(), keys.end(), s);
    if (it == keys.end() || s < 0) {
      keys.push_back(s);
      groups.push_back({r});
    } else {
      groups[static_cast<size_t>(it - keys.begin())].push_back(r);
    }
  }
  return groups;
}

/// Ring order of channel c: servers in order, each server's GPUs rotated by c, so that the
/// hop leaving a server uses a different GPU (NIC) in every channel, as NCCL's rings do.
std::vector<uint32_t> channel_ring(const std::vector<std::vector<uint32_t>>& groups, int c) {
  std::vector<uint32_t> order;
  for (const auto& g : groups) {
    const size_t m = g.size();
    for (size_t i = 0; i < m; ++i) order.push_back(g[(i + static_cast<size_t>(c)) % m]);
  }
  return order;
}

}  // namespace

/// What send() records during dry_run(): bytes per (src, dst) and the flows not yet done.
struct Executor::DryRun {
  int32_t proto = kNoProto;  ///< the op's protocol: wire bytes are counted
  std::map<std::pair<uint32_t, uint32_t>, Bytes> bytes;
  std::deque<std::pair<uint32_t, uint64_t>> fifo;  ///< (program, tag) of flows not yet done, FIFO
};

Executor::Executor(net::FlowFabric& net, Workload w, ExecutorConfig cfg)
    : net_(net), w_(std::move(w)), cfg_(cfg) {
  const size_t n = w_.op_id.size();
  RF_CHECK(w_.kind.size() == n && w_.algorithm.size() == n && w_.m2n_senders.size() == n &&
               w_.size_bytes.size() == n && w_.compute_ps.size() == n && w_.ranks_offsets.size() == n + 1 &&
               w_.deps_offsets.size() == n + 1,
           "workload arrays have inconsistent lengths");
  RF_CHECK(cfg_.channels >= 1, "coll_channels must be >= 1");
  RF_CHECK(cfg_.chunk_bytes >= 1, "coll_chunk_bytes must be >= 1");
  RF_CHECK(cfg_.protocol >= kNoProto && cfg_.protocol < kNumProtos, "unknown protocol code ", cfg_.protocol);
  RF_CHECK(cfg_.nccl_model || cfg_.protocol == kNoProto,
           "a protocol is forced but the NCCL model is off (nccl_model=False runs line-rate Simple)");
  const uint32_t gpus = net_.num_gpus();
  for (size_t c = 0; c < cfg_.rings.size(); ++c) {
    const auto& row = cfg_.rings[c];
    RF_CHECK(row.size() == gpus, "rings[", c, "] has ", row.size(), " GPUs, the fabric has ", gpus);
    std::vector<uint32_t> pos(gpus, gpus);
    for (uint32_t i = 0; i < gpus; ++i) {
      RF_CHECK(row[i] < gpus && pos[row[i]] == gpus, "rings[", c, "] is not a permutation of the ", gpus,
               " GPU ids (GPU ", row[i], " at position ", i, ")");
      pos[row[i]] = i;
    }
    ring_pos_.push_back(std::move(pos));
  }
  pending_.assign(n, 0);
  std::vector<uint32_t> count(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t id = w_.op_id[i];
    RF_CHECK(i == 0 || id > w_.op_id[i - 1], "op ", id, ": op_ids must be strictly ascending");
    RF_CHECK(w_.kind[i] >= 0 && w_.kind[i] < kNumKinds, "op ", id, ": unknown kind code ", w_.kind[i]);
    RF_CHECK(w_.algorithm[i] >= 0 && w_.algorithm[i] < kNumAlgos, "op ", id, ": unknown algorithm code ",
             w_.algorithm[i]);
    RF_CHECK(w_.size_bytes[i] >= 0, "op ", id, ": negative size_bytes");
    RF_CHECK(w_.compute_ps[i] >= 0, "op ", id, ": negative compute_ps");
    const int64_t r0 = w_.ranks_offsets[i], r1 = w_.ranks_offsets[i + 1];
    RF_CHECK(r0 >= 0 && r1 >= r0 && r1 <= static_cast<int64_t>(w_.ranks.size()), "op ", id,
             ": bad ranks offsets");
    const size_t nr = static_cast<size_t>(r1 - r0);
    RF_CHECK(nr >= 1, "op ", id, ": no ranks");
    for (int64_t k = r0; k < r1; ++k)
      RF_CHECK(w_.ranks[k] >= 0 && static_cast<uint32_t>(w_.ranks[k]) < gpus, "op ", id, ": rank ",
               w_.ranks[k], " is not a GPU of the fabric (it has ", gpus, ")");
    const int32_t kind = w_.kind[i], algo = w_.algorithm[i];
    RF_CHECK(kind != kSend || nr == 2, "op ", id, ": send needs exactly 2 ranks, has ", nr);
    RF_CHECK(kind != kM2N || (w_.m2n_senders[i] >= 1 && static_cast<size_t>(w_.m2n_senders[i]) < nr), "op ",
             id, ": m2n needs 1 <= m2n_senders < ranks");
    const bool reduce_like = kind == kAllReduce || kind == kAllGather || kind == kReduceScatter;
    const bool ok =
        algo == kAuto ||
        (reduce_like && (algo == kRing || algo == kHierRing || algo == kHalvingDoubling ||
                         (algo == kDirect && kind != kAllReduce) || (algo == kTree && kind == kAllReduce))) ||
        (kind == kAllToAll && (algo == kDirect || algo == kRing)) ||
        (kind == kBroadcast && (algo == kTree || algo == kChain || algo == kDirect || algo == kRing)) ||
        ((kind == kSend || kind == kM2N) && (algo == kDirect || algo == kRing));
    RF_CHECK(ok, "op ", id, ": algorithm '", kAlgoNames[algo], "' is not available for ", kKindNames[kind]);
    RF_CHECK(algo != kHalvingDoubling || power_of_two(nr), "op ", id,
             ": halving_doubling needs a power-of-two", " group, this one has ", nr, " ranks");
    const int64_t d0 = w_.deps_offsets[i], d1 = w_.deps_offsets[i + 1];
    RF_CHECK(d0 >= 0 && d1 >= d0 && d1 <= static_cast<int64_t>(w_.deps.size()), "op ", id,
             ": bad deps offsets");
    for (int64_t k = d0; k < d1; ++k) {
      auto it =
          std::lower_bound(w_.op_id.begin(), w_.op_id.begin() + static_cast<std::ptrdiff_t>(i), w_.deps[k]);
      RF_CHECK(it != w_.op_id.begin() + static_cast<std::ptrdiff_t>(i) && *it == w_.deps[k], "op ", id,
               ": depends on op ", w_.deps[k], " which does not exist before it");
      w_.deps[k] = it - w_.op_id.begin();  // now an op index
      ++count[static_cast<size_t>(w_.deps[k]) + 1];
      ++pending_[i];
    }
  }
  dependents_begin_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) dependents_begin_[i + 1] = dependents_begin_[i] + count[i + 1];
  dependents_.resize(dependents_begin_[n]);
  std::vector<uint32_t> fill(dependents_begin_.begin(), dependents_begin_.end() - 1);
  for (size_t i = 0; i < n; ++i)
    for (int64_t k = w_.deps_offsets[i]; k < w_.deps_offsets[i + 1]; ++k)
      dependents_[fill[static_cast<size_t>(w_.deps[k])]++] = static_cast<uint32_t>(i);

  for (const auto* col : {&w_.stage, &w_.phase, &w_.period})
    RF_CHECK(col->empty() || col->size() == n, "workload stage/phase/period arrays have inconsistent",
             " lengths");
  if (!w_.period.empty()) {
    std::vector<int32_t> ids(w_.period);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    period_index_.resize(n);
    for (size_t i = 0; i < n; ++i)
      period_index_[i] =
          static_cast<uint32_t>(std::lower_bound(ids.begin(), ids.end(), w_.period[i]) - ids.begin());
    period_ids_ = std::move(ids);
  } else {
    period_index_.assign(n, 0);
    period_ids_.assign(1, 0);
  }
  period_epoch_.assign(period_ids_.size(), -1);
  period_active_.assign(period_ids_.size(), 0);

  start_.assign(n, -1);
  end_.assign(n, -1);
  algo_ran_.assign(n, -1);
  proto_ran_.assign(n, -1);
  channels_ran_.assign(n, -1);
  ready_.assign(n, net_.now());
  runs_.resize(n);
  kind_ = net_.engine().register_handler(this);
  net_.set_observer(this);
  for (size_t i = 0; i < n; ++i)
    if (pending_[i] == 0) {
      schedule_start(static_cast<uint32_t>(i));
      if (stops()) became_ready(static_cast<uint32_t>(i));
    }
}

Executor::~Executor() { net_.set_observer(nullptr); }

void Executor::on_event(const engine::Event& ev) { start_op(ev.target); }

void Executor::send(uint32_t op, uint32_t prog, uint32_t src, uint32_t dst, Bytes size, uint64_t tag,
                    uint32_t channel, uint32_t copies, SimTime ready) {
  if (dry_ != nullptr) {
    dry_->bytes[{src, dst}] += wire_bytes(dry_->proto, size) * copies;
    dry_->fifo.emplace_back(prog, tag);
    return;
  }
  OpRun& run = runs_[op];
  SimTime at = net_.now();
  Bytes wire = size;
  if (run.proto != kNoProto) {
    // NCCL's protocol (docs/nccl-model.md): the line format's bytes go on the wire; the step
    // leaves once its data is there (or the op has launched) and the hop's flag latency has
    // passed, of which the fabric's own path latency is a part; over NVLink the SMs copy at
    // kNvlEfficiency of the link.
    wire = wire_bytes(run.proto, size);
    const uint64_t pair = (static_cast<uint64_t>(src) << 32) | dst;
    auto it = run.hops.find(pair);
    if (it == run.hops.end()) {
      const auto [ps, bps] = net_.path_cost(src, dst);
      it = run.hops.emplace(pair, std::pair{ps, static_cast<double>(bps)}).first;
    }
    const auto [path_ps, bps] = it->second;
    const int32_t server = net_.gpu_server(src);
    const bool nvlink = server >= 0 && server == net_.gpu_server(dst);
    const int a = run.algo == kTree ? 0 : 1;
    const SimTime hop = us_to_ps((nvlink ? kNvlHopUs : kNetHopUs)[a][run.proto]);
    at = std::max(at, std::max(ready, run.t0) + std::max<SimTime>(0, hop - path_ps));
    if (nvlink && bps > 0) {
      // The copy is a bandwidth limit of the GPU's NVLink port, whoever's flow it is: the SMs
      // copy the flows leaving src over NVLink one after another, each for its bytes at
      // kNvlEfficiency of the port's rate, and a flow runs at the link's rate at the end of its
      // copy (its last byte leaves as the copy ends). So the port carries at most
      // kNvlEfficiency of its rate on either backend, however many channels' flows share it.
      const double line = static_cast<double>(wire) * static_cast<double>(copies) * 8e12 / bps;
      SimTime& free = copy_free_[src];
      const SimTime begin = std::max(at, free);
      free = begin + static_cast<SimTime>(std::llround(line / kNvlEfficiency));
      at = std::max(begin, free - static_cast<SimTime>(std::llround(line)));
    }
  }
  const uint64_t key = connection_key(src, dst, channel);
  const uint32_t f = net_.create_flow(src, dst, wire, at, key, op, copies);  // (op: its totals' owner)
  if (recs_.size() <= f) {
    recs_.resize(f + 1);
    has_rec_.resize(f + 1, 0);
  }
  recs_[f] = FlowRec{op, prog, tag};
  has_rec_[f] = 1;
}

void Executor::on_flow_sent(uint32_t flow) {
  if (flow >= has_rec_.size() || !has_rec_[flow]) return;
  const FlowRec r = recs_[flow];
  OpRun& run = runs_[r.op];
  if (run.phase < run.phases.size()) run.phases[run.phase][r.prog]->on_sent(*this, r.op, r.prog, r.tag);
}

void Executor::on_flow_done(uint32_t flow) {
  if (flow >= has_rec_.size() || !has_rec_[flow]) return;
  const FlowRec r = recs_[flow];
  OpRun& run = runs_[r.op];
  if (run.phases[run.phase][r.prog]->on_flow(*this, r.op, r.prog, r.tag)) program_done(r.op);
}

void Executor::start_op(uint32_t op) {
  start_[op] = net_.now();
  OpRun& run = runs_[op];
  plan(op, run);
  algo_ran_[op] = run.algo;
  proto_ran_[op] = run.proto;
  channels_ran_[op] = std::max(run.channels, 1);  // (programs on the default connection: 1)
  run.t0 = start_[op];
  if (run.proto != kNoProto) {
    run.t0 += us_to_ps(kBaseUs[run.algo == kTree ? 0 : 1][run.proto]);
    for (auto& progs : run.phases)
      for (auto& prog : progs) prog->timed = true;
  }
  start_phase(op);
}

void Executor::start_phase(uint32_t op) {
  OpRun& run = runs_[op];
  while (run.phase < run.phases.size()) {
    auto& progs = run.phases[run.phase];
    run.live = progs.size();
    size_t finished = 0;
    for (size_t i = 0; i < progs.size(); ++i)
      if (progs[i]->start(*this, op, static_cast<uint32_t>(i))) ++finished;
    run.live -= finished;
    if (run.live > 0) return;
    ++run.phase;
  }
  finish_op(op);
}

void Executor::program_done(uint32_t op) {
  OpRun& run = runs_[op];
  if (--run.live > 0) return;
  ++run.phase;
  start_phase(op);
}

void Executor::finish_op(uint32_t op) {
  const SimTime now = net_.now();
  end_[op] = now;
  ++ops_done_;
  if (stops()) --period_active_[period_index_[op]];
  runs_[op] = OpRun{};
  for (uint32_t k = dependents_begin_[op]; k < dependents_begin_[op + 1]; ++k) {
    const uint32_t d = dependents_[k];
    ready_[d] = std::max(ready_[d], now);
    if (--pending_[d] == 0) {
      schedule_start(d);
      if (stops()) became_ready(d);
    }
  }
  // (after the dependents: an op of the same period made ready here keeps it active)
  if (cfg_.period_ends && stops() && period_active_[period_index_[op]] == 0) {
    ended_periods_.push_back(period_ids_[period_index_[op]]);
    net_.engine().request_stop();
  }
}

void Executor::schedule_start(uint32_t op) {
  // INVARIANT: an op starts within the horizon, so a chain of ops whose gaps are each within
  // it never wraps int64 time (ready_ <= now, which stays below kNever: every op and flow
  // started at or before kHorizon).
  const SimTime ready = ready_[op], gap = w_.compute_ps[op];
  RF_CHECK(gap <= engine::kHorizon - ready, "op ", w_.op_id[op], ": would start at ", ready,
           " ps (its dependencies' end) + compute_ps ", gap, " ps, past the engine's horizon of ",
           engine::kHorizon, " ps (2^62 - 1 ps, about 53 days, rfabric.units.MAX_TIME_PS)");
  net_.engine().schedule(ready + gap, op, kind_);
}

void Executor::became_ready(uint32_t op) {
  ++period_active_[period_index_[op]];
  if (cfg_.boundaries == Boundaries::kPeriod) {
    // A period's first op to become ready opens the boundary; its other ops that become ready
    // in the same stop (the same event) join it.
    int64_t& seen = period_epoch_[period_index_[op]];
    if (seen != -1 && seen != epoch_) return;
    seen = epoch_;
  }
  boundary_ops_.push_back(op);
  net_.engine().request_stop();
}

void Executor::resume() {
  boundary_ops_.clear();
  ended_periods_.clear();
  ++epoch_;
  net_.engine().clear_stop();
}

std::vector<int32_t> Executor::active_periods() const {
  // Counted as ops become ready and finish (with boundaries only): O(periods) per call, so a
  // per-op control loop does not scan every op at every op.
  RF_CHECK(stops(), "active_periods needs a workload loaded with boundaries ('period' or 'op')");
  std::vector<int32_t> out;
  for (size_t p = 0; p < period_ids_.size(); ++p)
    if (period_active_[p] > 0) out.push_back(period_ids_[p]);
  return out;
}

std::vector<std::tuple<uint32_t, uint32_t, Bytes>> Executor::dry_run(uint32_t op, int32_t algo) {
  RF_CHECK(op < w_.op_id.size(), "op index ", op, " out of range (", w_.op_id.size(), " ops)");
  RF_CHECK(dry_ == nullptr, "dry_run is not re-entrant");
  RF_CHECK(algo < kNumAlgos, "unknown algorithm code ", algo);
  DryRun d;
  // a forced algorithm replaces the op's own for this dry run only
  struct Algo {
    int32_t& slot;
    int32_t was;
    ~Algo() { slot = was; }
  } own{w_.algorithm[op], w_.algorithm[op]};
  if (algo >= 0) own.slot = algo;
  // plan() may fill the congestion cache from the current paths; the real run must fill it
  // itself, when the op starts, so a dry run leaves it as it was.
  auto saved = congestion_;
  auto saved_terms = terms_;
  struct Restore {
    Executor& x;
    decltype(saved)& cache;
    decltype(saved_terms)& terms;
    ~Restore() {
      x.dry_ = nullptr;
      x.congestion_.swap(cache);
      x.terms_.swap(terms);
    }
  } restore{*this, saved, saved_terms};
  OpRun run;
  plan(op, run);
  d.proto = run.proto;
  dry_ = &d;
  for (auto& progs : run.phases) {
    size_t live = progs.size();
    for (size_t i = 0; i < progs.size(); ++i)
      if (progs[i]->start(*this, op, static_cast<uint32_t>(i))) --live;
    while (!d.fifo.empty()) {
      const auto [prog, tag] = d.fifo.front();
      d.fifo.pop_front();
      progs[prog]->on_sent(*this, op, prog, tag);
      if (progs[prog]->on_flow(*this, op, prog, tag)) --live;
    }
    RF_CHECK(live == 0, "op ", w_.op_id[op], ": dry run left ", live, " programs unfinished");
  }
  std::vector<std::tuple<uint32_t, uint32_t, Bytes>> out;
  out.reserve(d.bytes.size());
  for (const auto& [pair, bytes] : d.bytes) out.emplace_back(pair.first, pair.second, bytes);
  return out;
}

std::vector<SimTime> Executor::start_bounds(const std::vector<uint32_t>& rows, const std::vector<SimTime>& dur,
                                           SimTime now) const {
  const size_t n = w_.op_id.size();
  RF_CHECK(dur.size() == n, "start_bounds: dur has ", dur.size(), " entries, the workload ", n, " ops");
  // iterative depth-first walk over the unfinished ops the rows wait on, memoised (-1: not yet)
  std::vector<SimTime> lb_start(n, -1), lb_end(n, -1);
  std::vector<uint32_t> stack;
  std::vector<SimTime> out;
  out.reserve(rows.size());
  for (const uint32_t row : rows) {
    RF_CHECK(row < n, "start_bounds: op row ", row, " out of range (", n, " ops)");
    stack.push_back(row);
    while (!stack.empty()) {
      const uint32_t r = stack.back();
      if (lb_start[r] >= 0) {
        stack.pop_back();
        continue;
      }
      if (start_[r] >= 0) {
        lb_start[r] = start_[r];
        stack.pop_back();
        continue;
      }
      SimTime ready = 0;
      bool waiting = false;
      for (int64_t k = w_.deps_offsets[r]; k < w_.deps_offsets[r + 1]; ++k) {
        const auto d = static_cast<uint32_t>(w_.deps[k]);
        SimTime e = end_[d];
        if (e < 0) {
          if (lb_end[d] < 0) {
            if (lb_start[d] < 0) {
              stack.push_back(d);
              waiting = true;
              continue;
            }
            lb_end[d] = std::max(now, lb_start[d] + dur[d]);
          }
          e = lb_end[d];
        }
        ready = std::max(ready, e);
      }
      if (waiting) continue;
      lb_start[r] = ready + w_.compute_ps[r];
      stack.pop_back();
    }
    out.push_back(lb_start[row]);
  }
  return out;
}

void Executor::plan(uint32_t op, OpRun& run) {
  std::vector<uint32_t> ranks;
  for (int64_t k = w_.ranks_offsets[op]; k < w_.ranks_offsets[op + 1]; ++k)
    ranks.push_back(static_cast<uint32_t>(w_.ranks[k]));
  const size_t n = ranks.size();
  const Bytes size = w_.size_bytes[op];
  const int32_t kind = w_.kind[op];
  int32_t algo = w_.algorithm[op];
  auto& phases = run.phases;
  phases.clear();
  phases.emplace_back();
  run.algo = algo;
  run.proto = kNoProto;
  run.channels = 0;
  if (size == 0 || n < 2) return;
  {
    const Choice choice = tune(kind, algo, ranks, size);
    run.algo = algo = choice.algo;
    run.proto = choice.proto;
  }
  // the protocol whose step and channel threshold apply (the model off: Simple's)
  const int32_t proto = run.proto == kNoProto ? kSimple : run.proto;
  auto used = [&](int c) { run.channels = std::max(run.channels, c); };

  auto rings = [&](const std::vector<uint32_t>& group_ranks, uint32_t steps, Bytes total, int max_channels,
                   std::vector<std::unique_ptr<Program>>& out) {
    const size_t m = group_ranks.size();
    if (m < 2) return;
    const int c = channels_for(total, max_channels, proto, m);
    used(c);
    const auto groups = by_server(net_, group_ranks);
    const Bytes chunk = ceil_div(total, static_cast<Bytes>(c) * static_cast<Bytes>(m));
    Bytes slice = step_bytes(proto);
    if (cfg_.ring_slices > 0) slice = std::max(slice, ceil_div(chunk, static_cast<Bytes>(cfg_.ring_slices)));
    std::vector<std::vector<uint32_t>> orders;
    for (int ch = 0; ch < c; ++ch) orders.push_back(ring_order(group_ranks, groups, ch));
    auto add = [&](std::vector<uint32_t> order, uint32_t channel, uint32_t copies) {
      auto ring = std::make_unique<Ring>(order, steps, chunk, slice, channel, copies);
      out.push_back(std::move(ring));
    };
    if (c > 1 && cfg_.merge_channels && net_.merges_copies() && same_rings(orders)) {
      add(std::move(orders[0]), 1, static_cast<uint32_t>(c));
      return;
    }
    for (int ch = 0; ch < c; ++ch) add(std::move(orders[ch]), static_cast<uint32_t>(ch) + 1, 1);
  };
  auto mesh_all = [&](Bytes per_peer) {
    std::vector<Mesh::Edge> edges;
    for (const uint32_t a : ranks)
      for (const uint32_t b : ranks)
        if (a != b) edges.push_back({a, b, per_peer});
    phases[0].push_back(std::make_unique<Mesh>(std::move(edges)));
    used(1);
  };
  const uint32_t n32 = static_cast<uint32_t>(n);
  const Bytes per_rank = ceil_div(size, static_cast<Bytes>(n));

  switch (kind) {
    case kAllReduce:
    case kAllGather:
    case kReduceScatter: {
      if (algo == kTree) {
        // NCCL's double binary tree, per channel: two trees each carrying half of the channel's
        // share of the message. Positions: the servers in the channel's ring order (tree A) or
        // that order reversed (tree B), each server's GPUs in the channel's order; a server's
        // first GPU there (the channel's entry GPU, so each channel crosses servers through a
        // different NIC) is its leader; leaders form a binary tree (leader of server i under
        // leader of server (i-1)/2), the other GPUs of a server a chain. The inner servers of
        // one tree are leaves of the other, so a leader's NIC sends 2 halves, not 3.
        const auto all_groups = by_server(net_, ranks);
        const int c = channels_for(size, cfg_.channels, proto, 1);
        used(c);
        const Bytes per_channel = ceil_div(size, c);
        for (int ch = 0; ch < c; ++ch) {
          const Bytes share = std::min(per_channel, size - ch * per_channel);
          if (share <= 0) break;
          auto groups = by_server(net_, ring_order(ranks, all_groups, ch));
          const int trees = groups.size() >= 2 && share >= 2 ? 2 : 1;
          for (int t = 0; t < trees; ++t) {
            const Bytes half = t == 0 ? share - share / trees : share / trees;
            if (t == 1) std::reverse(groups.begin(), groups.end());
            size_t m = 0, levels = 0;
            for (const auto& g : groups) m = std::max(m, g.size());
            while ((size_t{2} << levels) <= groups.size()) ++levels;
            const Bytes piece = pipeline_chunk(half, m - 1 + levels, step_bytes(proto));
            std::vector<Bytes> chunks;
            const Bytes k = ceil_div(half, piece);
            for (Bytes j = 0; j < k; ++j) chunks.push_back(std::min(piece, half - j * piece));
            std::vector<uint32_t> order, leader_pos;
            std::vector<int32_t> parent;
            for (size_t g = 0; g < groups.size(); ++g) {
              leader_pos.push_back(static_cast<uint32_t>(order.size()));
              for (size_t i = 0; i < groups[g].size(); ++i) {
                parent.push_back(i == 0 ? (g == 0 ? -1 : static_cast<int32_t>(leader_pos[(g - 1) / 2]))
                                        : static_cast<int32_t>(order.size() - 1));
                order.push_back(groups[g][i]);
              }
            }
            phases[0].push_back(std::make_unique<TreeAllReduce>(
                std::move(order), std::move(parent), std::move(chunks), static_cast<uint32_t>(2 * ch + t)));
          }
        }
        return;
      }
      const uint32_t steps = kind == kAllReduce ? 2 * (n32 - 1) : n32 - 1;
      if (algo == kHierRing) {
        const auto groups = by_server(net_, ranks);
        const size_t m = groups[0].size();
        bool uniform = groups.size() >= 2 && m >= 2;
        for (const auto& g : groups) uniform = uniform && g.size() == m;
        if (uniform) {
          // intra-server reduce-scatter, inter-server rings per local index, intra all-gather
          const Bytes shard = ceil_div(size, static_cast<Bytes>(m));
          const uint32_t s = static_cast<uint32_t>(groups.size()), m32 = static_cast<uint32_t>(m);
          if (kind != kAllGather)
            for (const auto& g : groups) rings(g, m32 - 1, size, 1, phases[0]);
          phases.emplace_back();
          for (size_t l = 0; l < m; ++l) {
            std::vector<uint32_t> rail;
            for (const auto& g : groups) rail.push_back(g[l]);
            const uint32_t inter = kind == kAllReduce ? 2 * (s - 1) : s - 1;
            rings(rail, inter, shard, cfg_.channels, phases.back());
          }
          if (kind != kReduceScatter) {
            phases.emplace_back();
            for (const auto& g : groups) rings(g, m32 - 1, size, 1, phases.back());
          }
          return;
        }
        run.algo = algo = kRing;  // not one uniform group per server: a flat ring (documented)
      }
      if (algo == kRing) {
        rings(ranks, steps, size, cfg_.channels, phases[0]);
      } else if (algo == kHalvingDoubling) {
        std::vector<uint32_t> masks;
        std::vector<Bytes> bytes;
        uint32_t levels = 0;
        while ((size_t{1} << levels) < n) ++levels;
        if (kind != kAllGather)
          for (uint32_t k = 0; k < levels; ++k) {
            masks.push_back(n32 >> (k + 1));
            bytes.push_back(ceil_div(size, Bytes{1} << (k + 1)));
          }
        if (kind != kReduceScatter)
          for (uint32_t k = 0; k < levels; ++k) {
            masks.push_back(1u << k);
            bytes.push_back(per_rank << k);
          }
        phases[0].push_back(std::make_unique<HalvingDoubling>(ranks, std::move(masks), std::move(bytes)));
      } else {  // direct all-gather / reduce-scatter: every rank sends its shard to every other
        mesh_all(per_rank);
      }
      return;
    }
    case kAllToAll:
      if (algo == kRing) {
        phases[0].push_back(std::make_unique<Pairwise>(ranks, per_rank));
      } else {
        mesh_all(per_rank);
      }
      return;
    case kBroadcast: {
      if (algo == kDirect) {
        std::vector<Mesh::Edge> edges;
        for (size_t i = 1; i < n; ++i) edges.push_back({ranks[0], ranks[i], size});
        phases[0].push_back(std::make_unique<Mesh>(std::move(edges)));
        return;
      }
      // As NCCL's ring broadcast: the message is split over the channels; channel c's data runs
      // down a chain that follows channel c's ring from the root (so each channel leaves every
      // server through a different NIC), or down a binary tree over that order (tree).
      std::vector<int32_t> parent(n, -1);
      for (size_t p = 1; p < n; ++p)
        parent[p] = algo == kTree ? static_cast<int32_t>((p - 1) / 2) : static_cast<int32_t>(p - 1);
      const auto groups = by_server(net_, ranks);
      const int c = channels_for(size, cfg_.channels, proto, n);
      used(c);
      const Bytes per_channel = ceil_div(size, c);
      struct Lane {
        std::vector<uint32_t> order;
        std::vector<Bytes> chunks;
        std::vector<uint32_t> channels;  ///< connections (channel + 1) running it alike
      };
      std::vector<Lane> lanes;
      for (int ch = 0; ch < c; ++ch) {
        const Bytes share = std::min(per_channel, size - ch * per_channel);
        if (share <= 0) break;
        size_t depth = n - 1;  // a chain; a binary tree over n ranks is floor(log2 n) deep
        if (algo == kTree) for (depth = 0; (size_t{2} << depth) <= n; ++depth) {}
        const Bytes piece = pipeline_chunk(share, depth, step_bytes(proto));
        std::vector<Bytes> chunks;
        const Bytes k = ceil_div(share, piece);
        for (Bytes j = 0; j < k; ++j) chunks.push_back(std::min(piece, share - j * piece));
        auto order = ring_order(ranks, groups, ch);
        std::rotate(order.begin(), std::find(order.begin(), order.end(), ranks[0]), order.end());
        const uint32_t conn = static_cast<uint32_t>(ch) + 1;
        // channels with the same order and chunks whose edges take the same paths run as one
        // pipeline of copies (as same_rings for rings), where the fabric merges copies
        Lane* same = nullptr;
        if (cfg_.merge_channels && net_.merges_copies()) {
          for (Lane& l : lanes)
            if (l.order == order && l.chunks == chunks) same = &l;
          if (same != nullptr) {
            std::vector<std::pair<uint32_t, uint32_t>> edges;
            for (size_t p = 1; p < n; ++p) edges.emplace_back(order[parent[p]], order[p]);
            if (!same_paths(edges, {same->channels[0], conn})) same = nullptr;
          }
        }
        if (same != nullptr) {
          same->channels.push_back(conn);
        } else {
          lanes.push_back({std::move(order), std::move(chunks), {conn}});
        }
      }
      for (Lane& l : lanes)
        phases[0].push_back(std::make_unique<Pipeline>(std::move(l.order), parent, std::move(l.chunks),
                                                       l.channels[0],
                                                       static_cast<uint32_t>(l.channels.size())));
      return;
    }
    case kSend:
      phases[0].push_back(std::make_unique<Mesh>(std::vector<Mesh::Edge>{{ranks[0], ranks[1], size}}));
      return;
    case kM2N: {
      const size_t senders = static_cast<size_t>(w_.m2n_senders[op]);
      const Bytes each = ceil_div(size, static_cast<Bytes>(n - senders));
      std::vector<Mesh::Edge> edges;
      for (size_t a = 0; a < senders; ++a)
        for (size_t b = senders; b < n; ++b) edges.push_back({ranks[a], ranks[b], each});
      phases[0].push_back(std::make_unique<Mesh>(std::move(edges)));
      return;
    }
    default:
      return;
  }
}

Executor::Choice Executor::tune(int32_t kind, int32_t algo, const std::vector<uint32_t>& ranks, Bytes size) const {
  const bool reduce_like = kind == kAllReduce || kind == kAllGather || kind == kReduceScatter;
  if (algo == kAuto && kind == kBroadcast) algo = kChain;
  if (algo == kAuto && !reduce_like) algo = kDirect;
  if (algo == kAuto && kind != kAllReduce) algo = kRing;
  // NCCL's pipelined kernels (ring, tree, and rfabric's hierarchical ring made of rings) run a
  // protocol; the others (direct, pairwise, halving-doubling, send, M2N) are not NCCL's.
  const bool pipelined = (reduce_like && (algo == kAuto || algo == kRing || algo == kTree || algo == kHierRing)) ||
                         (kind == kBroadcast && algo != kDirect);
  auto one_server = [&] { return by_server(net_, ranks).size() < 2; };
  if (!cfg_.nccl_model || !pipelined) {
    if (algo == kAuto)
      algo = one_server() || !(predict(kTree, kNoProto, 2, ranks, size) < predict(kRing, kNoProto, 2, ranks, size))
                 ? kRing
                 : kTree;
    return {algo, kNoProto};
  }
  // As NCCL's tuner (src/graph/tuning.cc, src/enqueue.cc topoGetAlgoInfo): predict each enabled
  // (algorithm, protocol)'s time and take the least; ties go to the earlier (ring, then LL).
  const int passes = kind == kAllReduce ? 2 : 1;
  std::vector<int32_t> algos{algo};
  if (algo == kAuto) algos = one_server() ? std::vector<int32_t>{kRing} : std::vector<int32_t>{kRing, kTree};
  std::vector<int32_t> protos{kLL, kLL128, kSimple};
  if (cfg_.protocol != kNoProto) protos = {cfg_.protocol};
  Choice best{algos[0], protos[0]};
  double least = 0;
  bool first = true;
  for (const int32_t a : algos)
    for (const int32_t p : protos) {
      const double t = predict(a == kTree ? kTree : kRing, p, passes, ranks, size);
      if (first || t < least) best = {a, p}, least = t, first = false;
    }
  return best;
}

double Executor::predict(int32_t algo, int32_t p, int passes, const std::vector<uint32_t>& ranks, Bytes size) const {
  // A latency-bandwidth model of each algorithm's structure, on the fabric's own latencies and
  // rates (the current paths between two servers' GPUs and between two GPUs of a server);
  // traces/README.md gives the formulas, docs/nccl-model.md the protocol terms. p = kNoProto:
  // no protocol costs (the model off).
  const auto groups = by_server(net_, ranks);
  const PathTerms& pt = path_terms(ranks, groups);
  const size_t m = pt.m, servers = pt.servers;
  const double n = static_cast<double>(ranks.size()), s = static_cast<double>(groups.size());
  const double l_net = pt.l_net, b_net = pt.b_net, l_tree = pt.l_tree, l_nvl = pt.l_nvl, b_nvl = pt.b_nvl;
  const bool on = p != kNoProto;
  const int a = algo == kTree ? 0 : 1;
  // protocol terms: wire bytes per payload byte, hop latencies no less than NCCL's per-step
  // figures, the launch latency, the NVLink copy's share of a step's time
  const double w = !on ? 1 : p == kLL ? 2.0 : p == kLL128 ? 128.0 / 120.0 : 1.0;
  const double lat_net = on ? std::max(l_net, 1e6 * kNetHopUs[a][p]) : l_net;
  const double lat_tree = on ? std::max(l_tree, 1e6 * kNetHopUs[0][p]) : l_tree;
  const double lat_nvl = on ? std::max(l_nvl, 1e6 * kNvlHopUs[a][p]) : l_nvl;
  const double base = on ? 1e6 * kBaseUs[a][p] : 0;
  const int32_t chan_proto = on ? p : kSimple;
  const double bytes = static_cast<double>(size);
  if (algo != kTree) {
    // ring: the longer of its dependency chain (2(n-1) hops, s of every n crossing servers,
    // each carrying one step's slice) and the time the busiest NIC sends (2(n-1)/n of the
    // bytes over C NICs per server); the two overlap, as every rank sends while the chain
    // proceeds. With the model: also the time each GPU's NVLink port copies its share.
    const double c = channels_for(size, cfg_.channels, chan_proto, ranks.size());
    // channels through a GPU's NVLink port: all c on one server, else (m-1)/m of them
    const double nvl_share = servers >= 2 && m >= 1 ? c * (static_cast<double>(m) - 1) / static_cast<double>(m) : c;
    const double copy = on ? 1 + nvl_share * (1 / kNvlEfficiency - 1) : 1;
    const double step = w * std::min(bytes / (c * n), static_cast<double>(step_bytes(chan_proto)));
    const double chain =
        passes * (s * (lat_net + step / b_net) + (n - s) * (lat_nvl + step / b_nvl * copy));
    double ring = chain;
    if (servers >= 2) ring = std::max(ring, busiest_port(ranks, groups, static_cast<int>(c), b_net * 8e12).first *
                                               bytes * w * passes / 2);
    if (on && m >= 2) {
      const double mm = static_cast<double>(m);
      ring = std::max(ring, bytes * w * passes * (n - 1) / n * (mm - 1) / mm / (kNvlEfficiency * b_nvl));
    }
    return base + ring;
  }
  // tree: per channel two trees (A, and B over the servers reversed), each with chains of m
  // GPUs and a binary tree of depth floor(log2 s), up and down, pipelined in the chunks plan()
  // uses; a leader's NIC sends each chunk once up (but the root's) and once down per child,
  // half of the channel's bytes in each tree
  const double c = channels_for(size, cfg_.channels, chan_proto, 1);
  const double copy = on ? 1 + c * (1 / kNvlEfficiency - 1) : 1;
  const double depth = std::floor(std::log2(s));
  const Bytes half = static_cast<Bytes>(bytes / (2 * c));
  Bytes piece = pipeline_chunk(half, m - 1 + static_cast<size_t>(depth), step_bytes(chan_proto));
  if (on) piece = std::min(piece, std::max<Bytes>(half, 1));  // a chunk is no larger than the data
  const double chunk = w * static_cast<double>(piece);
  const double tree_port = servers >= 2 ? busiest_port(ranks, groups, static_cast<int>(c), b_net * 8e12).second : 0;
  const double up_down =
      2 * ((static_cast<double>(m) - 1) * (lat_nvl + chunk / b_nvl * copy) + depth * (lat_tree + chunk / b_net));
  double tree = up_down + tree_port * bytes * w;
  if (on && m >= 2) {
    // the SM copy: a GPU's NVLink port sends each byte up and down its server's chain, but
    // for the chain's ends (channels rotate the chain: (m-1)/m of it each way on average), at
    // kNvlEfficiency of the link
    const double mm = static_cast<double>(m);
    tree = std::max(tree, 2 * bytes * w * (mm - 1) / mm / (kNvlEfficiency * b_nvl));
  }
  return base + tree;
}

const Executor::PathTerms& Executor::path_terms(const std::vector<uint32_t>& ranks,
                                                const std::vector<std::vector<uint32_t>>& groups) const {
  // Cached per rank set, as busiest_port(): the ops of one group repeat.
  if (auto it = terms_.find(ranks); it != terms_.end()) return it->second;
  PathTerms t;
  size_t widest = 0;
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].size() > t.m) t.m = groups[g].size(), widest = g;
  const double s = static_cast<double>(groups.size());
  // a hop's latency: its links and switches, plus one packet's store-and-forward per extra hop
  const double packet = static_cast<double>(net_.payload_per_packet());
  struct Hop {
    double ps, bytes_per_ps;
  };
  auto hop = [&](uint32_t a, uint32_t b) {
    const auto [ps, bps] = net_.path_cost(a, b);
    const double hops = static_cast<double>(net_.trace_path(a, b, 0).size());
    return Hop{static_cast<double>(ps) + (hops - 1) * packet * 8e12 / static_cast<double>(bps),
               static_cast<double>(bps) / 8e12};
  };
  // the servers in channel 0's order; the ring crosses from each server's last GPU there to
  // the next server's first, a tree edge joins a server's first GPU to its parent's
  const auto order = by_server(net_, ring_order(ranks, groups, 0));
  t.servers = order.size();
  if (t.servers >= 2)
    for (size_t g = 0; g < t.servers; ++g) {
      const Hop h = hop(order[g].back(), order[(g + 1) % t.servers].front());
      t.l_net += h.ps / s;
      t.b_net = g == 0 ? h.bytes_per_ps : std::min(t.b_net, h.bytes_per_ps);
      if (g == 0) continue;
      const Hop e = hop(order[g].front(), order[(g - 1) / 2].front());
      t.l_tree += e.ps / (s - 1);
    }
  // an NVLink pair from a server that has two of the ranks (any server if none does)
  if (t.m < 2) {
    t.l_nvl = t.l_net, t.b_nvl = t.b_net;
  } else {
    const Hop h = hop(groups[widest][0], groups[widest][1]);
    t.l_nvl = h.ps, t.b_nvl = h.bytes_per_ps;
  }
  if (t.servers < 2) t.l_net = t.l_tree = t.l_nvl, t.b_net = t.b_nvl;
  return terms_.emplace(ranks, t).first->second;
}

std::pair<double, double> Executor::busiest_port(const std::vector<uint32_t>& ranks,
                                                const std::vector<std::vector<uint32_t>>& groups, int c,
                                                double nic_bps) const {
  // Every edge of the c channels' rings (and double trees) loads each port on its current
  // path with its share of the message; the busiest port's load over its rate is the
  // algorithm's time per byte. Cached per (ranks, channels): ops of one group repeat.
  auto key = std::make_pair(ranks, c);
  if (auto it = congestion_.find(key); it != congestion_.end()) return it->second;
  std::unordered_map<uint32_t, double> ring, tree;  // port -> bytes per message byte
  auto add = [&](std::unordered_map<uint32_t, double>& load, uint32_t a, uint32_t b, double w) {
    if (a == b) return;
    for (const uint32_t p : net_.trace_path(a, b, 0)) load[p] += w;
  };
  const double n = static_cast<double>(ranks.size()), cc = static_cast<double>(c);
  for (int ch = 0; ch < c; ++ch) {
    const auto order = ring_order(ranks, groups, ch);
    for (size_t i = 0; i < order.size(); ++i)
      add(ring, order[i], order[(i + 1) % order.size()], 2 * (n - 1) / n / cc);
    auto srv = by_server(net_, order);
    const int trees = srv.size() >= 2 ? 2 : 1;
    const double w = 1 / (cc * trees);  // each direction of each edge carries its tree's share
    for (int t = 0; t < trees; ++t) {
      if (t == 1) std::reverse(srv.begin(), srv.end());
      for (size_t g = 0; g < srv.size(); ++g) {
        for (size_t i = 1; i < srv[g].size(); ++i) {
          add(tree, srv[g][i], srv[g][i - 1], w);
          add(tree, srv[g][i - 1], srv[g][i], w);
        }
        if (g == 0) continue;
        add(tree, srv[g][0], srv[(g - 1) / 2][0], w);
        add(tree, srv[(g - 1) / 2][0], srv[g][0], w);
      }
    }
  }
  // network ports only: NVLink's share is part of the pipeline's per-chunk terms
  auto worst = [&](const std::unordered_map<uint32_t, double>& load) {
    double ps = 0;
    for (const auto& [p, bytes] : load)
      if (net_.port_rate_bps(p) <= nic_bps)
        ps = std::max(ps, bytes * 8e12 / static_cast<double>(net_.port_rate_bps(p)));
    return ps;
  };
  const std::pair<double, double> out{worst(ring), worst(tree)};
  congestion_.emplace(std::move(key), out);
  return out;
}

Bytes Executor::pipeline_chunk(Bytes share, size_t depth, Bytes start) const {
  // NCCL's rule for its pipelined tree: from the step size, halve the chunk while a channel
  // would hold fewer than 8 x depth chunks (down to 128 KiB), 4 x depth (64 KiB), depth
  // (32 KiB), so the pipeline fill (about depth chunks) stays a small part of the time.
  Bytes chunk = start;
  const Bytes d = static_cast<Bytes>(std::max<size_t>(depth, 1));
  while (share / chunk < 8 * d && chunk > 128 * 1024) chunk /= 2;
  while (share / chunk < 4 * d && chunk > 64 * 1024) chunk /= 2;
  while (share / chunk < d && chunk > 32 * 1024) chunk /= 2;
  return std::max<Bytes>(chunk, 1);
}

Bytes Executor::step_bytes(int32_t p) const {
  if (cfg_.nccl_model && p == kLL) return kLLStep;
  if (cfg_.nccl_model && p == kLL128) return kLL128Step;
  return cfg_.chunk_bytes;
}

bool Executor::same_rings(const std::vector<std::vector<uint32_t>>& orders) {
  // The channels' rings run alike where every channel's ring has the same edges (a rotation
  // of one order: an NVLink ring inside a server) and each edge the same paths on every
  // channel's connection: rank by rank, each sends the same slices at the same times.
  const std::vector<uint32_t>& first = orders[0];
  const size_t m = first.size();
  std::unordered_map<uint32_t, uint32_t> next;
  for (size_t i = 0; i < m; ++i) next[first[i]] = first[(i + 1) % m];
  for (size_t ch = 1; ch < orders.size(); ++ch)
    for (size_t i = 0; i < m; ++i)
      if (next[orders[ch][i]] != orders[ch][(i + 1) % m]) return false;
  std::vector<uint32_t> channels(orders.size());
  std::iota(channels.begin(), channels.end(), 1u);
  return same_paths({next.begin(), next.end()}, channels);
}

bool Executor::same_paths(const std::vector<std::pair<uint32_t, uint32_t>>& edges,
                          const std::vector<uint32_t>& channels) {
  for (const auto& [a, b] : edges)
    for (size_t i = 1; i < channels.size(); ++i)
      if (!net_.same_route(a, b, connection_key(a, b, channels[0]), connection_key(a, b, channels[i]))) return false;
  return true;
}

int Executor::channels_for(Bytes total, int max_channels, int32_t proto, size_t nranks) const {
  // NCCL: the topology gives the channels (here coll_channels, capped by the fabric's ring
  // orders when it has them); an op uses the most c of them with c x (threads x per-thread
  // threshold) <= its bytes: 32 KiB for Simple; with the NCCL model 5 KiB for LL128 and
  // 4 KiB (x the ranks, on a ring) for LL.
  int top = max_channels;
  if (!cfg_.rings.empty()) top = std::min<int>(top, static_cast<int>(cfg_.rings.size()));
  Bytes per = kBytesPerChannel;
  if (cfg_.nccl_model && proto == kLL128) per = kLL128BytesPerChannel;
  if (cfg_.nccl_model && proto == kLL) per = kLLBytesPerChannel * static_cast<Bytes>(std::max<size_t>(nranks, 1));
  return static_cast<int>(std::clamp<Bytes>(total / per, 1, std::max(top, 1)));
}

std::vector<uint32_t> Executor::ring_order(const std::vector<uint32_t>& ranks,
                                           const std::vector<std::vector<uint32_t>>& groups, int ch) const {
  if (ring_pos_.empty()) return channel_ring(groups, ch);
  const auto& pos = ring_pos_[static_cast<size_t>(ch) % ring_pos_.size()];
  std::vector<uint32_t> order(ranks);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return pos[a] < pos[b]; });
  return order;
}

std::vector<int64_t> Executor::flow_ops() const {
  std::vector<int64_t> out(net_.num_flows(), -1);
  for (size_t f = 0; f < out.size() && f < has_rec_.size(); ++f)
    if (has_rec_[f]) out[f] = w_.op_id[recs_[f].op];
  return out;
}

}  // namespace rfabric::coll
