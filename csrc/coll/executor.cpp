#include "coll/executor.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "coll/nccl.hpp"
#include "coll/programs.hpp"
#include "engine/check.hpp"
#include "engine/time.hpp"

namespace rfabric::coll {

namespace {

const char* const kKindNames[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                                  "send",       "m2n"};
const char* const kAlgoNames[] = {"auto", "ring", "hier_ring", "direct", "tree", "chain", "halving_doubling"};
static_assert(std::size(kKindNames) == kNumKinds, "one name per Kind");
static_assert(std::size(kAlgoNames) == kNumAlgos, "one name per Algo");
const char* const kProtoNames[] = {"ll", "ll128", "simple"};
static_assert(std::size(kProtoNames) == kNumProtos, "one name per Proto");

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
  bound_.clear();  // (start_bounds() sizes them at its first call)
  need_.clear();
  bound_lo_ = 0;
  algo_ran_.assign(n, -1);
  proto_ran_.assign(n, -1);
  channels_ran_.assign(n, -1);
  ready_.assign(n, net_.now());
  runs_.resize(n);
  kind_ = net_.engine().register_handler(this);
  held_kind_ = net_.engine().register_handler(this);
  net_.set_observer(this);
  for (size_t i = 0; i < n; ++i)
    if (pending_[i] == 0) {
      schedule_start(static_cast<uint32_t>(i));
      if (stops()) became_ready(static_cast<uint32_t>(i));
    }
}

Executor::~Executor() { net_.set_observer(nullptr); }

void Executor::on_event(const engine::Event& ev) {
  if (ev.kind != held_kind_) {
    start_op(ev.target);
    return;
  }
  const Held h = held_[ev.target];
  held_free_.push_back(ev.target);
  if (h.done) {
    tell_done(h.rec);
  } else {
    tell_sent(h.rec);
  }
}

void Executor::hold_notice(const FlowRec& rec, bool done, SimTime at) {
  uint32_t slot;
  if (held_free_.empty()) {
    slot = static_cast<uint32_t>(held_.size());
    held_.push_back({rec, done});
  } else {
    slot = held_free_.back();
    held_free_.pop_back();
    held_[slot] = {rec, done};
  }
  net_.engine().schedule(at, slot, held_kind_);
}

void Executor::send(uint32_t op, uint32_t prog, uint32_t src, uint32_t dst, Bytes size, uint64_t tag,
                    uint32_t channel, uint32_t copies, SimTime ready, SimTime lead, Bytes chunk) {
  if (dry_ != nullptr) {
    dry_->bytes[{src, dst}] += wire_bytes(dry_->proto, size) * copies;
    dry_->fifo.emplace_back(prog, tag);
    return;
  }
  OpRun& run = runs_[op];
  SimTime at = net_.now();
  SimTime lead_out = 0, copy_begin = -1, round = 0, copy = 0;
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
    const bool nvlink = same_server(src, dst);
    const int a = run.algo == kTree ? 0 : 1;
    const SimTime hop = us_to_ps((nvlink ? kNvlHopUs : kNetHopUs)[a][run.proto]);
    const SimTime flag = std::max<SimTime>(0, hop - path_ps);
    const SimTime last_ready = std::max(ready, run.t0) + flag;  // the last copy's data
    at = std::max(at, last_ready);
    // Streamed pieces the GPU's SMs are copying now take one chunk each in every round of
    // its copies, so a chunk posted now begins after one chunk of each (its FIFO holds one
    // chunk per connection).
    const SimTime others = nvlink ? pieces_round_[src] : 0;
    if (nvlink && bps > 0 && chunk > 0) {
      // A streamed piece (PipelinePieces) stands for chunks that the SMs copy as their data
      // comes, one chunk in each round among the other connections' copies: queued whole it
      // would hold them all behind it. It begins once the chunks queued before it are copied
      // and runs in the fluid beside the port's other flows; its notices are held back until
      // the SMs have copied it after the GPU's pieces before it (on_flow_sent), so the
      // pieces together move at most kNvlEfficiency of the port.
      copy_begin = at = std::max(at, copy_free_[src]);
      round = static_cast<SimTime>(engine::round_nearest(static_cast<double>(wire_bytes(run.proto, chunk)) *
                                                         8e12 / bps / kNvlEfficiency));
      pieces_round_[src] += round;
      copy = static_cast<SimTime>(engine::round_nearest(
          static_cast<double>(wire) * static_cast<double>(copies) * 8e12 / bps / kNvlEfficiency));
    } else if (nvlink && bps > 0 && copies > 1) {
      // Merged channels (docs/explanation/flow-backend.md, "Merged channels"): the flow stands
      // for `copies` channels' messages, which the SMs copy one after another like any
      // others. Copy k may begin once its own data is there: the first copy `lead` before the
      // last, as the merged flow that brought them staggered them, and with it the moment the
      // program would have posted it (now - lead: a channel's program steps on its own data).
      // So the copies begin as soon as the SMs are free of the earlier flows, even before the
      // last copy's data came, and end one copy time apart; the flow carries the copies' wire
      // bytes at the link's rate, its last byte leaving as the last copy ends (or as soon after
      // now as the bytes allow: the fluid cannot send in the past).
      const double one = static_cast<double>(wire) * 8e12 / bps;  // a copy's bytes at the link's rate
      const SimTime copy1 = static_cast<SimTime>(engine::round_nearest(one / kNvlEfficiency));
      const SimTime first_ready = std::max(ready < 0 ? ready : ready - lead, run.t0) + flag;
      SimTime& free = copy_free_[src];
      const SimTime begin = std::max({first_ready + others, free, net_.now() - lead});
      // copy k begins after the copies before it and once its data is there (the data
      // arrive spread from first_ready to the last copy's), so the last copy ends at the
      // later of all copies back to back from `begin` and its own copy after its data
      const SimTime all =
          static_cast<SimTime>(engine::round_nearest(one * static_cast<double>(copies) / kNvlEfficiency));
      free = std::max(begin + all, at + copy1);  // (at: the last copy may begin no earlier)
      at = std::max(net_.now(),
                    free - static_cast<SimTime>(engine::round_nearest(one * static_cast<double>(copies))));
      lead_out = free - (begin + copy1);
    } else if (nvlink && bps > 0) {
      // The copy is a bandwidth limit of the GPU's NVLink port, whoever's flow it is: the SMs
      // copy the flows leaving src over NVLink one after another, each for its bytes at
      // kNvlEfficiency of the port's rate, and a flow runs at the link's rate at the end of its
      // copy (its last byte leaves as the copy ends). So the port carries at most
      // kNvlEfficiency of its rate on either backend, however many channels' flows share it.
      const double line = static_cast<double>(wire) * static_cast<double>(copies) * 8e12 / bps;
      SimTime& free = copy_free_[src];
      const SimTime begin = std::max(at + others, free);
      free = begin + static_cast<SimTime>(engine::round_nearest(line / kNvlEfficiency));
      at = std::max(begin, free - static_cast<SimTime>(engine::round_nearest(line)));
    }
  }
  const uint64_t key = connection_key(src, dst, channel);
  const uint32_t f = net_.create_flow(src, dst, wire, at, key, op, copies);  // (op: its totals' owner)
  if (recs_.size() <= f) {
    recs_.resize(f + 1);
    has_rec_.resize(f + 1, 0);
  }
  recs_[f] = FlowRec{op, prog, tag, lead_out, copy_begin, 0, round, copy, src};
  has_rec_[f] = 1;
}

void Executor::on_flow_sent(uint32_t flow) {
  if (flow >= has_rec_.size() || !has_rec_[flow]) return;
  FlowRec& r = recs_[flow];
  if (r.copy_begin >= 0) {
    // A streamed piece over NVLink: its last byte leaves (and, a path later, arrives) no
    // sooner than the GPU's SMs have copied it, after the pieces whose bytes left before it,
    // at kNvlEfficiency of the port (a piece done early in the fluid leaves the port to the
    // others, whose copies still wait for its own). Where the fluid's share is below the
    // copy's (a port shared with other traffic), the fluid's end stands, as a chunk's flow
    // runs after its copy. Its sent and done notices wait until then; the fluid's own times
    // are the flow's in the results.
    const SimTime now = net_.now();
    SimTime& free = pieces_free_[r.src];
    free = std::max(free, r.copy_begin) + r.copy;
    const SimTime end = free;
    r.copy_lag = std::max<SimTime>(0, end - now);
    if (r.copy_lag > 0) {
      hold_notice(r, false, end);
      return;
    }
  }
  tell_sent(r);
}

void Executor::tell_sent(const FlowRec& r) {
  if (r.round > 0) pieces_round_[r.src] -= r.round;
  OpRun& run = runs_[r.op];
  if (run.phase < run.phases.size()) run.phases[run.phase][r.prog]->on_sent(*this, r.op, r.prog, r.tag);
}

void Executor::on_flow_done(uint32_t flow) {
  if (flow >= has_rec_.size() || !has_rec_[flow]) return;
  const FlowRec r = recs_[flow];
  if (r.copy_lag > 0) {
    hold_notice(r, true, net_.now() + r.copy_lag);
    return;
  }
  tell_done(r);
}

void Executor::tell_done(const FlowRec& r) {
  OpRun& run = runs_[r.op];
  lead_ = r.lead;
  const bool done = run.phases[run.phase][r.prog]->on_flow(*this, r.op, r.prog, r.tag);
  lead_ = 0;
  if (done) program_done(r.op);
}

void Executor::start_op(uint32_t op) {
  // The tuner chooses on the paths of this instant: a circuit lit at t, queued after the
  // op's start, is one its flows take, so it is one the choice is made on.
  net_.apply_due_changes();
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
  return std::move(dry_runs({op}, {algo}).front());
}

std::vector<std::vector<std::tuple<uint32_t, uint32_t, Bytes>>> Executor::dry_runs(
    const std::vector<uint32_t>& ops, const std::vector<int32_t>& algos) {
  RF_CHECK(algos.size() == ops.size(), "dry_runs: ", algos.size(), " algorithms for ", ops.size(), " ops");
  RF_CHECK(dry_ == nullptr, "dry_run is not re-entrant");
  for (size_t i = 0; i < ops.size(); ++i) {
    RF_CHECK(ops[i] < w_.op_id.size(), "op index ", ops[i], " out of range (", w_.op_id.size(), " ops)");
    RF_CHECK(algos[i] < kNumAlgos, "unknown algorithm code ", algos[i]);
  }
  // plan() may fill the congestion cache from the current paths; the real run must fill it
  // itself, when the op starts, so the batch leaves it as it was: the entries its dry runs
  // add are noted (dry_congestion_, dry_terms_) and erased when the batch ends. Within the
  // batch (one instant: the paths do not change) they serve every dry run that asks for the
  // same rank set.
  dry_congestion_.clear();
  dry_terms_.clear();
  struct Restore {
    Executor& x;
    ~Restore() {
      x.dry_ = nullptr;
      for (const auto it : x.dry_congestion_) x.congestion_.erase(it);
      for (const auto it : x.dry_terms_) x.terms_.erase(it);
      x.dry_congestion_.clear();
      x.dry_terms_.clear();
    }
  } restore{*this};
  std::vector<std::vector<std::tuple<uint32_t, uint32_t, Bytes>>> out;
  out.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) out.push_back(dry_one(ops[i], algos[i]));
  return out;
}

std::vector<std::tuple<uint32_t, uint32_t, Bytes>> Executor::dry_one(uint32_t op, int32_t algo) {
  DryRun d;
  // a forced algorithm replaces the op's own for this dry run only
  struct Algo {
    int32_t& slot;
    int32_t was;
    ~Algo() { slot = was; }
  } own{w_.algorithm[op], w_.algorithm[op]};
  if (algo >= 0) own.slot = algo;
  dry_ = &d;
  struct Unset {
    Executor& x;
    ~Unset() { x.dry_ = nullptr; }
  } unset{*this};
  OpRun run;
  plan(op, run);
  d.proto = run.proto;
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

std::vector<SimTime> Executor::start_bounds(const std::vector<uint32_t>& rows, const SimTime* dur,
                                            size_t n_dur, SimTime now) const {
  const size_t n = w_.op_id.size();
  RF_CHECK(n_dur == n, "start_bounds: dur has ", n_dur, " entries, the workload ", n, " ops");
  // The recursion in row order (rows are topological: an op's dependencies are earlier rows,
  // checked at load), over the rows from the first unfinished one to the last asked: a
  // backward pass marks the unfinished ops the asked rows wait on (an unstarted op's
  // unfinished dependencies; a finished op ends at its end, a started one starts at its
  // start), a forward pass computes their bounds. Both read the rows' arrays in order.
  if (bound_.size() != n) {
    bound_.assign(n, 0);
    need_.assign(n, 0);
    bound_lo_ = 0;
  }
  while (bound_lo_ < n && end_[bound_lo_] >= 0) ++bound_lo_;  // (ops never finish again)
  const size_t lo = bound_lo_;
  for (const uint32_t row : rows)
    RF_CHECK(row < n, "start_bounds: op row ", row, " out of range (", n, " ops)");
  size_t hi = 0;  // one past the last asked row not started
  for (const uint32_t row : rows) {
    if (start_[row] < 0) {  // (so row >= lo)
      need_[row] = 1;
      hi = std::max(hi, static_cast<size_t>(row) + 1);
    }
  }
  for (size_t r = hi; r-- > lo;) {
    if (!need_[r] || start_[r] >= 0) continue;
    for (int64_t k = w_.deps_offsets[r]; k < w_.deps_offsets[r + 1]; ++k) {
      const auto d = static_cast<size_t>(w_.deps[k]);
      if (end_[d] < 0) need_[d] = 1;  // (d >= lo: every row before lo has finished)
    }
  }
  for (size_t r = lo; r < hi; ++r) {
    if (!need_[r]) continue;
    need_[r] = 0;
    if (start_[r] >= 0) {
      bound_[r] = start_[r];
      continue;
    }
    SimTime ready = 0;
    for (int64_t k = w_.deps_offsets[r]; k < w_.deps_offsets[r + 1]; ++k) {
      const auto d = static_cast<size_t>(w_.deps[k]);
      const SimTime e = end_[d] >= 0 ? end_[d] : std::max(now, bound_[d] + dur[d]);
      ready = std::max(ready, e);
    }
    bound_[r] = ready + w_.compute_ps[r];
  }
  std::vector<SimTime> out;
  out.reserve(rows.size());
  for (const uint32_t row : rows) out.push_back(start_[row] >= 0 ? start_[row] : bound_[row]);
  return out;
}

std::vector<int64_t> Executor::flow_ops() const {
  std::vector<int64_t> out(net_.num_flows(), -1);
  for (size_t f = 0; f < out.size() && f < has_rec_.size(); ++f)
    if (has_rec_[f]) out[f] = w_.op_id[recs_[f].op];
  return out;
}

}  // namespace rfabric::coll
