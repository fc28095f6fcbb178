// programs.hpp: the step-by-step programs an op expands into (rings, meshes, pairwise and
// halving-doubling exchanges, pipelined trees and chains, the double-tree all-reduce), and the
// placement helpers they share with the tuner (ranks by server, channel ring orders). Only
// the collective executor's sources include it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "coll/executor.hpp"
#include "coll/nccl.hpp"

namespace rfabric::coll {

inline Bytes ceil_div(Bytes a, Bytes b) { return b <= 0 ? 0 : (a + b - 1) / b; }
inline bool power_of_two(size_t n) { return n >= 1 && (n & (n - 1)) == 0; }

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

inline uint64_t tag_of(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
/// Connection identity (create_flow's ecmp_key): (src, dst, channel); channel 0 is the
/// default connection.
inline uint64_t connection_key(uint32_t src, uint32_t dst, uint32_t channel) {
  return (static_cast<uint64_t>(src) << 40) ^ (static_cast<uint64_t>(dst) << 16) ^ channel ^ 0x5bd1e995u;
}
inline uint32_t tag_hi(uint64_t t) { return static_cast<uint32_t>(t >> 32); }
inline uint32_t tag_lo(uint64_t t) { return static_cast<uint32_t>(t); }

/// The pieces a pipelined tree or chain carries down each edge, in order. Per chunk (NCCL's
/// and the packet engine's): piece j leaves a node once the node holds piece j. Streamed (the
/// flow backend, ExecutorConfig::pipeline_slices): the first and last pieces are the first
/// and last chunks, the chunks between them a few large pieces, and a middle piece j leaves
/// once the node holds piece j - 1: in the fluid its bytes stream out as they stream in, one
/// chunk behind, as the chunks would, where store-and-forward of a large piece would add its
/// size to every hop's latency. The first piece takes the chunk's fill through the depth,
/// the last the chunk's tail, so a pipeline of equal rates ends as its chunks would.
struct PipelinePieces {
  std::vector<Bytes> bytes;
  bool streamed = false;
};

/// The piece a node must hold before it sends piece j of `k` (PipelinePieces).
inline uint32_t gate(bool streamed, uint32_t j, size_t k) {
  return streamed && j > 0 && j + 1 < k ? j - 1 : j;
}

/// Arrival times a program has popped for a node (a streamed piece may wait for the same
/// arrival as the piece before it, or skip one): how many, and the last one's time and lead.
struct Taken {
  uint32_t count = 0;
  SimTime at = -1, lead = 0;
};

/// The arrival of piece `need` at a node: pops `at` (one time per piece, in order) and, when
/// given, `leads` alongside, up to that piece; earlier calls' pops are kept in `t`.
inline const Taken& take_arrival(Times& at, Times* leads, Taken& t, uint32_t need) {
  while (t.count <= need) {
    t.at = at.pop();
    if (leads != nullptr) t.lead = leads->pop();
    ++t.count;
  }
  return t;
}

/// Ring: in each of `steps` steps every rank passes a `chunk` of data to the next rank
/// (steps = n-1 for all-gather / reduce-scatter, 2(n-1) for all-reduce). As in NCCL, a
/// step's data moves in slices of at most `slice` bytes, posted in order on the connection
/// (the next as soon as the previous has left the NIC), and a rank forwards slice j of step
/// s+1 as soon as slice j of step s has arrived, so the ring runs as a pipeline.
class Ring final : public Program {
 public:
  /// `copies` > 1: the ring stands for that many channels' rings over the same edges and
  /// paths, each of its flows for their `copies` slices side by side (FlowFabric::merges_copies).
  Ring(std::vector<uint32_t> order, uint32_t steps, Bytes chunk, Bytes slice, uint32_t channel,
       uint32_t copies = 1)
      : order_(std::move(order)),
        steps_(steps),
        channel_(channel),
        copies_(copies),
        sent_(order_.size(), 0),
        got_(order_.size(), 0),
        busy_(order_.size(), 0),
        arrived_(order_.size()),
        leads_(copies_ > 1 ? order_.size() : 0) {
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
    if (timed && copies_ > 1) leads_[next].push(x.arrival_lead());
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
    const SimTime lead = timed && q >= k && copies_ > 1 ? leads_[i].pop() : 0;
    x.send(op, id, order_[i], order_[(i + 1) % n], slices_[q % k], tag_of(i, static_cast<uint32_t>(q)),
           channel_, copies_, ready, lead);
  }
  std::vector<uint32_t> order_;
  uint32_t steps_, channel_, copies_;
  std::vector<Bytes> slices_;
  std::vector<uint64_t> sent_, got_;
  std::vector<uint8_t> busy_;
  std::vector<Times> arrived_;  ///< per rank: when each slice not yet forwarded came
  std::vector<Times> leads_;    ///< (copies > 1) and how much earlier its first copy came
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
/// NIC), forwarding chunk j once its parent has received it (a streamed pipeline's middle
/// pieces: once its parent has received piece j - 1; PipelinePieces).
class Pipeline final : public Program {
 public:
  /// `copies` > 1: the pipeline stands for that many channels' pipelines over the same edges,
  /// paths and chunks (FlowFabric::merges_copies).
  Pipeline(std::vector<uint32_t> order, std::vector<int32_t> parent, PipelinePieces pieces,
           uint32_t channel = 0, uint32_t copies = 1)
      : order_(std::move(order)),
        channel_(channel),
        copies_(copies),
        parent_(std::move(parent)),
        chunks_(std::move(pieces.bytes)),
        streamed_(pieces.streamed),
        received_(order_.size(), 0),
        flowed_(order_.size(), 0),
        next_(order_.size(), 0),
        busy_(order_.size(), 0),
        children_(order_.size()),
        arrived_(order_.size()),
        leads_(copies_ > 1 ? order_.size() : 0),
        taken_(order_.size()) {
    for (uint32_t p = 1; p < order_.size(); ++p) children_[parent_[p]].push_back(p);
    // A node with several children copies their flows' copies interleaved, which a merged
    // flow per child cannot stand for: only a chain passes its copies' stagger on.
    for (const auto& c : children_)
      if (c.size() > 1) leads_.clear();
    received_[0] = static_cast<uint32_t>(chunks_.size());
  }
  bool start(Executor& x, uint32_t op, uint32_t id) override {
    if (order_.size() < 2 || chunks_.empty()) return true;
    for (const uint32_t c : children_[0]) try_edge(x, op, id, c);
    return false;
  }
  bool on_flow(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t p = tag_hi(tag);
    ++flowed_[p];  // chunks arrive in order on an edge
    hold(x, op, id, p, x.arrival_lead());
    return done_ == (order_.size() - 1) * chunks_.size();
  }
  void on_sent(Executor& x, uint32_t op, uint32_t id, uint64_t tag) override {
    const uint32_t p = tag_hi(tag);
    busy_[p] = 0;
    try_edge(x, op, id, p);
  }

 private:
  /// p holds what has flowed to it and its parent holds (a streamed piece's fluid may end
  /// before its upstream piece delivered its bytes: p holds it only once the parent does, so
  /// no node runs more than a piece ahead of the data); each piece p comes to hold lets p's
  /// children go on, and with a streamed pipeline may let theirs.
  void hold(Executor& x, uint32_t op, uint32_t id, uint32_t p, SimTime lead) {
    const uint32_t now_held = std::min(flowed_[p], received_[parent_[p]]);
    while (received_[p] < now_held) {
      ++received_[p];
      ++done_;
      for (const uint32_t c : children_[p]) {
        if (timed) arrived_[c].push(x.now());
        if (timed && !leads_.empty()) leads_[c].push(lead);
        try_edge(x, op, id, c);
        if (streamed_) hold(x, op, id, c, 0);
      }
    }
  }
  void try_edge(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t j = next_[p];
    if (busy_[p] || j >= chunks_.size()) return;
    const uint32_t need = gate(streamed_, j, chunks_.size());
    if (received_[parent_[p]] <= need) return;
    busy_[p] = 1;
    ++next_[p];
    // the root holds every chunk from the start; elsewhere the piece's data is there once the
    // piece it waits for (need) arrived
    SimTime ready = -1, lead = 0;
    if (timed && parent_[p] != 0) {
      const Taken& t = take_arrival(arrived_[p], leads_.empty() ? nullptr : &leads_[p], taken_[p], need);
      ready = t.at;
      lead = t.lead;
    }
    x.send(op, id, order_[parent_[p]], order_[p], chunks_[j], tag_of(p, j), channel_, copies_, ready, lead,
           need != j ? chunks_[0] : 0);
  }
  std::vector<uint32_t> order_;
  uint32_t channel_, copies_;
  std::vector<int32_t> parent_;
  std::vector<Bytes> chunks_;
  bool streamed_;
  /// per position: pieces it holds, pieces whose flow to it ended, the next piece it is sent
  std::vector<uint32_t> received_, flowed_, next_;
  std::vector<uint8_t> busy_;
  std::vector<std::vector<uint32_t>> children_;
  /// per position: when each chunk its parent holds for it (not yet forwarded to it) arrived,
  /// and (a chain of copies > 1) how much earlier its first copy arrived
  std::vector<Times> arrived_, leads_;
  std::vector<Taken> taken_;  ///< per position: the arrivals popped so far, the last one's
  uint64_t done_ = 0;
};

/// Tree all-reduce, shaped as NCCL's: inside each server a chain of its GPUs leads (over
/// NVLink) to the server's first GPU; the servers' first GPUs form a binary tree. The message
/// is cut into chunks; each chunk is reduced up the tree (a node sends chunk j to its parent
/// once every child has delivered chunk j) and broadcast back down from the root, chunks
/// pipelined. Up and down edges are separate connections, each posting its next chunk when
/// the previous one has left the NIC. Streamed pieces (PipelinePieces): a middle piece goes up
/// once every child delivered the piece before it, and down once the parent holds it.
class TreeAllReduce final : public Program {
 public:
  /// `parent[p]` is p's parent position (-1 for the root at position 0).
  TreeAllReduce(std::vector<uint32_t> order, std::vector<int32_t> parent, PipelinePieces pieces,
                uint32_t channel = 0)
      : order_(std::move(order)),
        up_(2 * channel + 1),
        down_(2 * channel + 2),
        parent_(std::move(parent)),
        chunks_(std::move(pieces.bytes)),
        streamed_(pieces.streamed),
        n_(static_cast<uint32_t>(order_.size())),
        children_(n_),
        recv_up_(n_, 0),
        flow_up_(n_, 0),
        next_up_(n_, 0),
        busy_up_(n_, 0),
        have_down_(n_, 0),
        flow_down_(n_, 0),
        next_down_(n_, 0),
        busy_down_(n_, 0),
        up_ready_(n_),
        down_ready_(n_),
        up_taken_(n_),
        down_taken_(n_) {
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
      ++flow_up_[p];
      hold_up(x, op, id, p);
    } else {  // down: a reduced chunk reached p
      ++flow_down_[p];
      hold_down(x, op, id, p);
    }
    return done_ == static_cast<uint64_t>(n_ - 1) * chunks_.size();
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
  /// p's parent holds what p's up flows delivered and p had reduced (a streamed piece's fluid
  /// may end before p's children delivered its bytes; as Pipeline::hold).
  void hold_up(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t parent = static_cast<uint32_t>(parent_[p]);
    const uint32_t now_held = std::min(flow_up_[p], reduced(p));
    while (recv_up_[p] < now_held) {
      const uint32_t before = reduced(parent);
      ++recv_up_[p];
      const bool more = reduced(parent) > before;  // the parent has one more chunk reduced, now
      if (timed && more) {
        if (parent == 0) {
          for (uint32_t c : children_[0]) down_ready_[c].push(x.now());
        } else {
          up_ready_[parent].push(x.now());
        }
      }
      if (parent == 0) {
        for (uint32_t c : children_[0]) {
          try_down(x, op, id, c);
          if (streamed_ && more) hold_down(x, op, id, c);
        }
      } else {
        try_up(x, op, id, parent);
        if (streamed_ && more) hold_up(x, op, id, parent);
      }
    }
  }
  /// p holds what its down flows delivered and its parent holds.
  void hold_down(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t parent = static_cast<uint32_t>(parent_[p]);
    const uint32_t now_held = std::min(flow_down_[p], parent == 0 ? reduced(0) : have_down_[parent]);
    while (have_down_[p] < now_held) {
      ++have_down_[p];
      ++done_;
      for (uint32_t c : children_[p]) {
        if (timed) down_ready_[c].push(x.now());
        try_down(x, op, id, c);
        if (streamed_) hold_down(x, op, id, c);
      }
    }
  }
  void try_up(Executor& x, uint32_t op, uint32_t id, uint32_t p) {
    const uint32_t j = next_up_[p];
    if (busy_up_[p] || j >= chunks_.size()) return;
    const uint32_t need = gate(streamed_, j, chunks_.size());
    if (reduced(p) <= need) return;
    busy_up_[p] = 1;
    ++next_up_[p];
    // a leaf holds its data from the start
    const SimTime ready =
        timed && !children_[p].empty() ? take_arrival(up_ready_[p], nullptr, up_taken_[p], need).at : -1;
    x.send(op, id, order_[p], order_[parent_[p]], chunks_[j], tag_of(p, 2 * j), up_, 1, ready, 0,
           need != j ? chunks_[0] : 0);
  }
  void try_down(Executor& x, uint32_t op, uint32_t id, uint32_t c) {
    const uint32_t parent = static_cast<uint32_t>(parent_[c]), j = next_down_[c];
    if (busy_down_[c] || j >= chunks_.size()) return;
    const uint32_t need = gate(streamed_, j, chunks_.size());
    const uint32_t avail = parent == 0 ? reduced(0) : have_down_[parent];
    if (avail <= need) return;
    busy_down_[c] = 1;
    ++next_down_[c];
    const SimTime ready = timed ? take_arrival(down_ready_[c], nullptr, down_taken_[c], need).at : -1;
    x.send(op, id, order_[parent], order_[c], chunks_[j], tag_of(c, 2 * j + 1), down_, 1, ready, 0,
           need != j ? chunks_[0] : 0);
  }
  std::vector<uint32_t> order_;
  uint32_t up_, down_;
  std::vector<int32_t> parent_;
  std::vector<Bytes> chunks_;
  bool streamed_;
  uint32_t n_;
  std::vector<std::vector<uint32_t>> children_;
  /// per position: pieces its parent holds from it (up) and it holds (down), pieces whose
  /// flow ended, the next piece it sends
  std::vector<uint32_t> recv_up_, flow_up_, next_up_;
  std::vector<uint8_t> busy_up_;
  std::vector<uint32_t> have_down_, flow_down_, next_down_;
  std::vector<uint8_t> busy_down_;
  /// when p reduced each chunk it has not yet sent up; when each chunk p's parent holds for it
  /// (not yet sent down) arrived there (at the root: was reduced)
  std::vector<Times> up_ready_, down_ready_;
  std::vector<Taken> up_taken_, down_taken_;
  uint64_t done_ = 0;
};

/// Ranks grouped by server, each group in order of first appearance.
inline std::vector<std::vector<uint32_t>> by_server(net::FlowFabric& net,
                                                    const std::vector<uint32_t>& ranks) {
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
inline std::vector<uint32_t> channel_ring(const std::vector<std::vector<uint32_t>>& groups, int c) {
  std::vector<uint32_t> order;
  for (const auto& g : groups) {
    const size_t m = g.size();
    for (size_t i = 0; i < m; ++i) order.push_back(g[(i + static_cast<size_t>(c)) % m]);
  }
  return order;
}

}  // namespace rfabric::coll
