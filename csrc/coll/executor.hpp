// executor.hpp: runs a workload's DAG of collective ops inside the engine.
// An op becomes ready when its dependencies have finished, starts compute_ps later, and
// expands into flows step by step by its algorithm (rings, hierarchical rings, direct and
// pairwise all-to-all, halving-doubling, tree and chain broadcast, send, M2N). Flows are
// created lazily as earlier steps finish, so only the active steps exist at any time.
// INVARIANT: an op never starts before max(end of its deps) + compute_ps, exactly.
// Knows the network only through net::FlowFabric (create_flow, paths) and the flow-done
// callback, so the packet Network and the flow-level model drive it alike.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine.hpp"
#include "fabric/flow_fabric.hpp"

namespace rfabric::coll {

using engine::SimTime;
using net::Bytes;

/// Op kinds and algorithms: codes match rfabric.traces.KINDS / ALGORITHMS.
enum Kind : int32_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSend, kM2N, kNumKinds };
enum Algo : int32_t { kAuto, kRing, kHierRing, kDirect, kTree, kChain, kHalvingDoubling, kNumAlgos };
/// NCCL's protocols (docs/nccl-model.md), in NCCL's order; kNoProto: an op whose algorithm is
/// not one of NCCL's pipelined kernels (direct, pairwise, halving-doubling, send, M2N) or a
/// run with the protocol model off.
enum Proto : int32_t { kNoProto = -1, kLL, kLL128, kSimple, kNumProtos };

/// The workload as struct-of-arrays (rfabric.traces.Trace.arrays()).
struct Workload {
  std::vector<int64_t> op_id;
  std::vector<int32_t> kind, algorithm, m2n_senders;
  std::vector<int64_t> ranks_offsets;  ///< CSR, num_ops + 1
  std::vector<int32_t> ranks;
  std::vector<int64_t> deps_offsets;  ///< CSR, num_ops + 1
  std::vector<int64_t> deps;          ///< op_ids
  std::vector<Bytes> size_bytes;
  std::vector<SimTime> compute_ps;
  /// Trace codes carried for the control loop (empty: all 0). period: the communication
  /// period (ops that share one circuit plan); stage, phase: the trace's dictionary codes.
  std::vector<int32_t> stage, phase, period;
};

/// Where the executor stops the engine for a circuit controller (Engine::request_stop).
enum class Boundaries : int32_t {
  kNone,    ///< never (no controller): the executor behaves exactly as without this feature
  kPeriod,  ///< when an op of a period not seen before becomes ready
  kOp,      ///< when any op becomes ready (per-collective control)
};

/// Names of the Kind and Algo codes, in code order (rfabric.traces.KINDS / ALGORITHMS are
/// checked against them by name when the module is imported).
const std::vector<std::string>& kind_names();
const std::vector<std::string>& algo_names();
const std::vector<std::string>& proto_names();

struct ExecutorConfig {
  int channels = 8;                ///< NCCL channels per ring collective (the most; see plan())
  Bytes chunk_bytes = 512 * 1024;  ///< pipelining unit: ring slices, tree/chain broadcast chunks
  /// The most slices a ring step is cut into (0: no limit, slices of chunk_bytes as NCCL's).
  /// The flow backend sets it: a fluid ring whose ranks post each slice as the previous one
  /// leaves runs at the same pace with a few large slices as with many small ones, as long as
  /// a slice outlasts the path delay (README "Flow-level backend"), and makes far fewer flows.
  uint32_t ring_slices = 0;
  /// The most pieces the chunks between a pipelined tree's or chain's first and last chunk
  /// are run as (0: a piece per chunk, as NCCL's). The flow backend sets it: the middle
  /// pieces stream, each leaving a node one piece behind its arrival (PipelinePieces), so a
  /// fluid pipeline keeps the chunks' fill and tail with a handful of flows per edge.
  uint32_t pipeline_slices = 0;
  /// Where the fabric merges copies (FlowFabric::merges_copies: the flow backend), run the
  /// channels of a ring collective whose rings have the same edges and paths as one ring of
  /// flows of n copies (same_rings), and so the channels of a pipelined broadcast with the
  /// same order, chunks and paths: the same fluid, n times fewer flows and events.
  bool merge_channels = true;
  /// NCCL's protocol costs (docs/nccl-model.md): wire bytes per protocol, per-step and launch
  /// latencies, protocol step sizes and channel thresholds, the SM-driven NVLink copy, and
  /// the tuner's choice of (algorithm, protocol). Off: line-rate Simple, as before the model.
  bool nccl_model = true;
  /// Forced protocol (as NCCL_PROTO): kNoProto lets the tuner choose (needs nccl_model).
  int32_t protocol = kNoProto;
  /// The fabric's preferred ring orders (Topology.ring_orders()): one row per channel, each a
  /// permutation of all GPU ids. Empty: servers in the op's rank order, each server's GPUs
  /// rotated by the channel. An op's ring on channel c visits its ranks in row c's order.
  std::vector<std::vector<uint32_t>> rings;
  Boundaries boundaries = Boundaries::kNone;
  /// With boundaries: also stop when a period goes idle (its last ready or running op
  /// finished), so that a look-ahead controller sees the ports it used fall free.
  bool period_ends = false;
};

/// One step-by-step program inside an op (a ring, a mesh, a pipeline, ...).
class Program;

class Executor final : public engine::Handler, public net::FlowObserver {
 public:
  Executor(net::FlowFabric& net, Workload w, ExecutorConfig cfg);
  ~Executor() override;

  void on_event(const engine::Event& ev) override;
  void on_flow_done(uint32_t flow) override;
  void on_flow_sent(uint32_t flow) override;

  // ---- used by programs ----
  SimTime now() const { return net_.now(); }
  /// Start a flow now; `tag` comes back to the program in on_flow(tag). `channel` names the
  /// connection (as NCCL's per-channel QPs): one (src, dst, channel) keeps one ECMP path.
  /// `copies` > 1: the flow stands for that many messages of `size` bytes side by side (the
  /// rings of several channels merged, where the fabric merges copies).
  /// `ready`: when the flow's data became available at src (the arrival of what it forwards);
  /// -1: held since the op began. With the NCCL model the flow carries the protocol's wire
  /// bytes and starts no earlier than `ready` (or the op's launch) plus the hop's latency.
  /// Over NVLink the flow also waits for src's SM copy (docs/nccl-model.md, "NVLink copy").
  /// `lead` (copies > 1): how much earlier than `ready` the first copy's data arrived (the
  /// arrival_lead() of the merged flow that brought it; 0: all copies at `ready`).
  /// `chunk` > 0: the flow is a streamed piece (PipelinePieces) standing for chunks of that
  /// size; over NVLink the SMs copy it a chunk a round among the other copies (see send()).
  void send(uint32_t op, uint32_t prog, uint32_t src, uint32_t dst, Bytes size, uint64_t tag,
            uint32_t channel = 0, uint32_t copies = 1, SimTime ready = -1, SimTime lead = 0, Bytes chunk = 0);
  /// Whether GPUs a and b share a server (their flows go over NVLink, copied by the SMs).
  bool same_server(uint32_t a, uint32_t b) const {
    const int32_t s = net_.gpu_server(a);
    return s >= 0 && s == net_.gpu_server(b);
  }
  /// While a program is told a flow is done (on_flow): how much earlier than now the first
  /// of its copies arrived. Over NVLink the SMs copy a merged flow's copies (the channels it
  /// stands for) one after another, so their data arrive staggered, the first (copies - 1)
  /// copy times before the last; 0 for a flow of one copy, or whose copies arrive together.
  SimTime arrival_lead() const { return lead_; }

  // ---- control-loop boundaries (ExecutorConfig::boundaries) ----
  bool stops() const { return cfg_.boundaries != Boundaries::kNone; }
  /// Ops (indices) that became ready since the last resume() and make the pending boundary,
  /// in the order they became ready; empty when no boundary is pending. Each has its start
  /// event queued already (at ready time + compute_ps): a boundary never moves an op.
  const std::vector<uint32_t>& boundary_ops() const { return boundary_ops_; }
  /// Periods (trace ids) that went idle since the last resume() (ExecutorConfig::period_ends).
  const std::vector<int32_t>& ended_periods() const { return ended_periods_; }
  /// When op `op` starts (or started) sending: max(end of its deps) + compute_ps; -1 while
  /// some dependency is unfinished.
  SimTime start_time(uint32_t op) const { return pending_[op] == 0 ? ready_[op] + w_.compute_ps[op] : -1; }
  int32_t period(uint32_t op) const { return w_.period.empty() ? 0 : w_.period[op]; }
  /// Clear the pending boundary and let the engine run on.
  void resume();
  /// Periods (sorted, distinct) with an op whose dependencies are done and that has not
  /// finished: running, or ready and waiting out its compute gap. Only with boundaries.
  std::vector<int32_t> active_periods() const;
  /// The flows op `op` would create, run by its algorithm on the current paths without
  /// touching the network or the clock: bytes per directed (src, dst) GPU pair, sorted by
  /// pair. The same programs as a real run, their flows completed in FIFO order. `algo` >= 0
  /// runs that algorithm instead of the op's own (kAuto: tuned on the current paths), e.g. to
  /// see what an auto-tuned op would send if the tuner chose otherwise on other paths.
  std::vector<std::tuple<uint32_t, uint32_t, Bytes>> dry_run(uint32_t op, int32_t algo = -1);
  /// dry_run() of each ops[i] with algos[i] (-1: the op's own), as one batch at one instant:
  /// the tuner's path terms and port loads computed for one dry run serve the others that
  /// ask for the same rank set (a group's ops of several sizes; an auto all-reduce and the
  /// same op forced to ring and tree), and are erased when the batch ends.
  std::vector<std::vector<std::tuple<uint32_t, uint32_t, Bytes>>> dry_runs(const std::vector<uint32_t>& ops,
                                                                           const std::vector<int32_t>& algos);
  /// A lower bound of when each op in `rows` starts: a started op its start; otherwise its
  /// compute gap after the latest of its dependencies' end bounds, where a finished op ends
  /// at its end and an unfinished one no earlier than `now`, nor than its own start bound
  /// plus `dur[op]` (a lower bound of its communication time, ps; 0 where unknown). For the
  /// control loop's look-ahead (rfabric.controllers.loop).
  /// `dur` points at `n_dur` entries, one per op (the caller's array, not copied).
  std::vector<SimTime> start_bounds(const std::vector<uint32_t>& rows, const SimTime* dur, size_t n_dur,
                                    SimTime now) const;

  // ---- results ----
  const std::vector<SimTime>& op_start() const { return start_; }
  const std::vector<SimTime>& op_end() const { return end_; }
  /// What ran per op (-1 before it started): the resolved algorithm (Algo code), the protocol
  /// (Proto code; kNoProto where none applies) and the channels its programs used.
  const std::vector<int32_t>& op_algorithm() const { return algo_ran_; }
  const std::vector<int32_t>& op_protocol() const { return proto_ran_; }
  const std::vector<int32_t>& op_channels() const { return channels_ran_; }
  /// Whether NCCL's protocol costs are modelled (ExecutorConfig::nccl_model).
  bool models() const { return cfg_.nccl_model; }
  /// op index of every flow (flows not created by the executor: -1)
  std::vector<int64_t> flow_ops() const;
  size_t ops_done() const { return ops_done_; }

 private:
  struct FlowRec {
    uint32_t op;
    uint32_t prog;
    uint64_t tag;
    SimTime lead;  ///< its arrival_lead()
    /// A streamed piece over NVLink (send()): when its SM copy began (-1: not such a piece),
    /// and once its last byte left, how much later its copy ends than the fluid sent it.
    SimTime copy_begin = -1, copy_lag = 0;
    SimTime round = 0;  ///< its chunk's copy time, in pieces_round_[src] while it copies
    SimTime copy = 0;   ///< its whole copy's time at kNvlEfficiency of the port
    uint32_t src = 0;
  };
  /// A flow's sent or done notice held back to its copy's end (a copy-paced piece).
  struct Held {
    FlowRec rec;
    bool done;
  };
  /// Tell the program a flow left (done false) or arrived (true).
  void tell_sent(const FlowRec& r);
  void tell_done(const FlowRec& r);
  /// Hold a notice of rec back until `at` (an event of kind held_kind_).
  void hold_notice(const FlowRec& rec, bool done, SimTime at);
  struct OpRun {
    std::vector<std::vector<std::unique_ptr<Program>>> phases;
    size_t phase = 0;
    size_t live = 0;                                       ///< programs of the current phase not yet done
    int32_t algo = kAuto, proto = kNoProto, channels = 0;  ///< what plan() chose
    SimTime t0 = 0;  ///< start plus the protocol's launch latency: when its data may first leave
    /// path latency and rate per (src, dst) the op's flows took, looked up once per op
    std::unordered_map<uint64_t, std::pair<SimTime, double>> hops;
  };
  /// The tuner's choice for an op (NCCL's: the least predicted latency + size / bandwidth).
  struct Choice {
    int32_t algo, proto;
  };

  struct DryRun;
  void start_op(uint32_t op);
  /// Queue op `op`'s start at ready_ + compute_ps; SpecError naming the op if that is past
  /// the horizon (engine::kHorizon).
  void schedule_start(uint32_t op);
  /// Op `op`'s dependencies are done (its start event is queued): a boundary, maybe.
  void became_ready(uint32_t op);
  void start_phase(uint32_t op);
  void program_done(uint32_t op);
  void finish_op(uint32_t op);
  void plan(uint32_t op, OpRun& run);
  /// Resolve `algo` (kAuto: ring or tree for an all-reduce, ring otherwise) and the protocol
  /// (cfg_.protocol, or the cheapest by predicted time) for an op of `kind`.
  Choice tune(int32_t kind, int32_t algo, const std::vector<uint32_t>& ranks, Bytes size) const;
  /// Predicted time (ps) of a ring (algo kRing) or double-tree (kTree) all-reduce, or a ring
  /// all-gather / reduce-scatter / broadcast (`passes` 1 instead of 2), under protocol p.
  double predict(int32_t algo, int32_t p, int passes, const std::vector<uint32_t>& ranks, Bytes size) const;
  /// Time per message byte (ps) on the busiest network port (rate <= nic_bps) for the ring
  /// and the double tree over `ranks` with c channels, along the current paths.
  std::pair<double, double> busiest_port(const std::vector<uint32_t>& ranks,
                                         const std::vector<std::vector<uint32_t>>& groups, int c,
                                         double nic_bps) const;
  /// Chunk of a pipelined tree or chain carrying `share` bytes through `depth` hops, halved
  /// down from `start` (the protocol's step).
  Bytes pipeline_chunk(Bytes share, size_t depth, Bytes start) const;
  /// Whether the channels' rings (each channel's order of the same ranks) have the same edges
  /// and each edge the same paths on every channel: then they run as one ring of copies.
  bool same_rings(const std::vector<std::vector<uint32_t>>& orders);
  /// Whether every edge (a, b) takes the same paths on each connection `channels` names.
  bool same_paths(const std::vector<std::pair<uint32_t, uint32_t>>& edges,
                  const std::vector<uint32_t>& channels);
  /// NCCL's channel count for an op of `total` bytes (at most `max_channels`).
  /// With the NCCL model the per-channel threshold is the protocol's (`proto`, over `nranks`).
  int channels_for(Bytes total, int max_channels, int32_t proto = kSimple, size_t nranks = 1) const;
  /// Payload bytes per step of protocol p (its slice / chunk start; Simple: chunk_bytes).
  Bytes step_bytes(int32_t p) const;
  /// The ranks in channel ch's ring order (groups: the ranks by server, for the default order).
  std::vector<uint32_t> ring_order(const std::vector<uint32_t>& ranks,
                                   const std::vector<std::vector<uint32_t>>& groups, int ch) const;

  net::FlowFabric& net_;
  Workload w_;
  ExecutorConfig cfg_;
  uint32_t kind_ = 0;
  uint32_t held_kind_ = 0;  ///< events of notices held back (hold_notice)
  std::vector<Held> held_;  ///< by slot, reused once told
  std::vector<uint32_t> held_free_;
  std::vector<uint32_t> pending_;                        ///< unfinished deps per op
  std::vector<uint32_t> dependents_begin_, dependents_;  ///< reverse CSR (op indices)
  std::vector<SimTime> start_, end_, ready_;
  std::vector<int32_t> algo_ran_, proto_ran_, channels_ran_;
  std::vector<OpRun> runs_;
  std::vector<FlowRec> recs_;  ///< indexed by flow slot (reused once a flow retires)
  /// per GPU: when the SM copy of its NVLink flows posted so far ends (send(), NCCL model)
  std::unordered_map<uint32_t, SimTime> copy_free_;
  /// per GPU: one chunk's copy time of each streamed piece it copies now (a round of the SMs)
  std::unordered_map<uint32_t, SimTime> pieces_round_;
  /// per GPU: when the SMs have copied the streamed pieces whose bytes left so far
  std::unordered_map<uint32_t, SimTime> pieces_free_;
  SimTime lead_ = 0;  ///< arrival_lead() of the flow being told
  std::vector<uint8_t> has_rec_;
  std::vector<std::vector<uint32_t>> ring_pos_;  ///< [channel][gpu] position in cfg_.rings
  /// busiest_port() results by (ranks, channels)
  mutable std::map<std::pair<std::vector<uint32_t>, int>, std::pair<double, double>> congestion_;
  /// The fabric's terms of predict() for a rank set: ps and bytes/ps of the server-crossing
  /// ring hops (mean latency, least rate), of the tree's hops, of an NVLink pair.
  struct PathTerms {
    size_t m = 0, servers = 0;  ///< most ranks on one server; servers
    double l_net = 0, b_net = 0, l_tree = 0, l_nvl = 0, b_nvl = 0;
  };
  mutable std::map<std::vector<uint32_t>, PathTerms> terms_;
  /// net_.routing_epoch() when congestion_ and terms_ were last emptied: both hold what the
  /// paths and port rates of that epoch give, and are emptied when it changes.
  mutable uint64_t terms_epoch_ = 0;
  void forget_stale_terms() const;
  const PathTerms& path_terms(const std::vector<uint32_t>& ranks,
                              const std::vector<std::vector<uint32_t>>& groups) const;
  /// The entries of congestion_ and terms_ added during the current dry_run(), erased when it
  /// ends (so a dry run leaves both caches as they were without copying them: a copy per dry
  /// run grew with the cache, and so with the fabric, for every op dry-run).
  mutable std::vector<decltype(congestion_)::iterator> dry_congestion_;
  mutable std::vector<decltype(terms_)::iterator> dry_terms_;
  size_t ops_done_ = 0;
  // control-loop boundaries
  std::vector<uint32_t> period_index_;   ///< op -> dense period index
  std::vector<int64_t> period_epoch_;    ///< dense period -> epoch it was first seen in (-1: not yet)
  std::vector<int32_t> period_ids_;      ///< dense period -> trace period id
  std::vector<uint32_t> period_active_;  ///< dense period -> ops ready or running (with boundaries)
  int64_t epoch_ = 0;                    ///< resume() count
  std::vector<uint32_t> boundary_ops_;
  std::vector<int32_t> ended_periods_;
  /// start_bounds()'s bound per op (valid for the rows its last call computed), the rows a
  /// call needs (cleared as it computes them), and the first row not finished (ops never
  /// finish again).
  mutable std::vector<SimTime> bound_;
  mutable std::vector<uint8_t> need_;
  mutable size_t bound_lo_ = 0;
  DryRun* dry_ = nullptr;  ///< set during dry_run(): send() records instead of creating flows
  /// One dry run of a batch (dry_runs(): the caches are restored when the batch ends).
  std::vector<std::tuple<uint32_t, uint32_t, Bytes>> dry_one(uint32_t op, int32_t algo);
};

}  // namespace rfabric::coll
