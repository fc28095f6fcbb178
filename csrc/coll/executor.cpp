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

std::vector<SimTime> Executor::start_bounds(const std::vector<uint32_t>& rows,
                                            const std::vector<SimTime>& dur, SimTime now) const {
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
        if (algo == kTree)
          for (depth = 0; (size_t{2} << depth) <= n; ++depth) {
          }
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
      if (!net_.same_route(a, b, connection_key(a, b, channels[0]), connection_key(a, b, channels[i])))
        return false;
  return true;
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
