// fluid_network.hpp: the flow backend's dynamic mode (EngineConfig flow_model "dynamic";
// docs/explanation/flow-dynamic.md): a fluid model that carries what the max-min mode
// (flow_network.hpp) leaves out where RoCE flows meet a bottleneck: queues, PFC back-pressure
// and DCQCN's rate dynamics.
//
// The model, time-stepped while anything is transient:
//  * a flow's paths are the max-min mode's (the forwarding layer's walk; spread evenly over
//    the paths its first kSamples frames take where routing spreads them): one lane per path,
//    carrying its share of the flow's wire bytes (payload plus a header per frame);
//  * per lane and hop, the bytes queued at that hop's egress port. Each step of length dt (on
//    one grid: a plan made inside a step runs to its end), a port sends at most capacity x dt,
//    visiting ports in a topological order of the lanes' paths so that what leaves a port
//    reaches the next in the same step: first the bytes queued for it and those that reached
//    it this step, in FIFO order by stream position (a lane's queued bytes lie between the
//    port's departures so far and the position its last byte arrived at: lanes whose arrivals
//    stopped drain by that mark, first; lanes still arriving share the rest in proportion to
//    their bytes), then what its NIC pulls from the flows that start there, max-min among
//    them, each at most its DCQCN rate x dt and its bytes left (the packet NIC pops its queue
//    before it pulls). What leaves hop k joins hop k+1; what leaves the last hop is delivered;
//  * PFC as the packet engine's: the bytes inside a switch that came over channel u (queued
//    at any of its egress ports) above u's XOFF pause u (it sends nothing) a reaction time
//    later (2 x u's propagation + the switch's latency: the bytes the packet engine's headroom
//    covers); at or below XON (XOFF - 2 MTU) they resume it as late; the thresholds are the
//    packet engine's (Network::set_thresholds); servers (GPUs, NVSwitches) never PAUSE;
//  * ECN: bytes leaving a port whose queue is q are marked with RED's probability
//    (ecn_kmin/kmax/pmax as in Network::mark_ecn); per flow, the expected marked frames
//    delivered accumulate while its CNP interval has passed, and when they reach one a CNP
//    reaches the source a one-frame path latency later;
//  * DCQCN as roce.cpp, on expected values (no draws): alpha, the target and current rates,
//    the cut on a CNP, the timer and byte-counter rate increases (fast recovery, additive,
//    hyper), the rate floor;
//  * quiescence: when no queue holds bytes, no port is paused, every flow is at its line
//    rate with no timer pending and, at the rates themselves, every byte that reaches a port
//    in a step leaves it, the rates hold: the model goes event by event (a flow starting or
//    finishing sending refills its NIC's shares and the relays' its lanes cross) until a port
//    is oversubscribed, then steps again;
//  * a flow starting inside a step joins it without a new plan where it fits: its lanes take
//    what the plan left of their ports for the rest of the step (a busy NIC shared max-min with
//    its own flows, which give up their excess downstream to the first queue covering it); a
//    saturated port queues them until the next step; else the step is planned again;
//  * a flow is done when its last byte is delivered plus the max-min mode's delivery delay
//    (Forwarding::lone_packet_delay_ps: what a lone message takes frame by frame beyond its
//    bytes at the path's slowest rate), so that a lone flow ends as the packet engine's does.
// Not modelled: DCTCP (the mode needs transport "roce"), drops and the lossy long links of
// Sites (their ports never PAUSE here and never drop), the propagation of bytes between hops inside a step,
// load-aware routing (paths of an idle fabric, as the max-min mode), the RNG of ECN marking.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "coll/executor.hpp"
#include "engine/engine.hpp"
#include "fabric/flow_fabric.hpp"
#include "fabric/flow_slots.hpp"
#include "fabric/forwarding.hpp"
#include "fabric/spec.hpp"
#include "fabric/topology_changes.hpp"
#include "fabric/transport_traits.hpp"
#include "flow/flow_network.hpp"

namespace rfabric::flow {

struct FluidCounters {
  uint64_t flows_done = 0;
  SimTime last_flow_end_ps = -1;
  uint64_t plans = 0;      ///< steps planned (time-stepped ones and quiescent stretches)
  uint64_t steps = 0;      ///< plans of one step (something transient)
  uint64_t jumps = 0;      ///< quiescent plans (rates held to the next flow event)
  SimTime stepped_ps = 0;  ///< simulated time covered by steps
  SimTime jumped_ps = 0;   ///< simulated time covered by quiescent plans
  uint64_t lane_hops = 0;  ///< (lane, hop) pairs visited by plans: the model's work
  uint64_t pauses = 0;     ///< PFC pauses (a channel going from sending to paused)
  double ecn_marks = 0;    ///< expected frames marked
  uint64_t cnps = 0;       ///< CNPs that reached a source
  uint64_t lanes = 0;      ///< lanes ever started (a flow has one per path)
  uint64_t blocked = 0;    ///< lanes ever left without a path
  uint64_t reroutes = 0;   ///< flows moved to new paths by a topology change
  uint64_t stalls = 0;     ///< stepping stopped because nothing could move (PFC deadlock)
  uint64_t max_lanes = 0;  ///< most lanes alive at once
};

class FluidNetwork final : public engine::Handler, public net::FlowFabric {
 public:
  FluidNetwork(engine::Engine& eng, const net::NetworkSpec& spec, const net::EngineConfig& cfg,
               Bytes header_bytes, bool lossless);

  // ---- net::FlowFabric ----
  engine::Engine& engine() override { return eng_; }
  SimTime now() const override { return eng_.now(); }
  uint32_t num_gpus() const override { return fwd_.num_gpus(); }
  int32_t gpu_server(uint32_t gpu) const override { return fwd_.gpu_server(gpu); }
  uint32_t create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key = 0,
                       int64_t owner = -1, uint32_t copies = 1) override;
  void set_observer(net::FlowObserver* observer) override { observer_ = observer; }
  Bytes payload_per_packet() const override { return mtu_ - header_; }
  std::pair<SimTime, BitsPerSec> path_cost(uint32_t src, uint32_t dst) const override {
    return fwd_.path_cost(fwd_.path(src, dst, 0));
  }
  std::vector<uint32_t> trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const override {
    return fwd_.path(src, dst, flow_hash);
  }
  BitsPerSec port_rate_bps(uint32_t port) const override { return fwd_.channel(port).rate_bps; }
  SimTime ideal_fct_ps(uint32_t src, uint32_t dst, uint32_t flow_hash, Bytes size) const override {
    const Bytes h = ft_.header(ft_.of(src, dst));
    return fwd_.lone_packet_fct_ps(fwd_.path(src, dst, flow_hash), size, mtu_ - h, h);
  }
  size_t num_flows() const override { return flows_.size(); }
  uint64_t routing_epoch() const override { return fwd_.rebuilds(); }
  void apply_due_changes() override {
    changes_.apply_due([this] { topology_changed(); });
  }

  void add_flows(const std::vector<uint32_t>& src, const std::vector<uint32_t>& dst,
                 const std::vector<Bytes>& size, const std::vector<SimTime>& start);
  net::TopologyChanges& changes() { return changes_; }
  const net::TopologyChanges& changes() const { return changes_; }
  std::vector<uint32_t> current_circuits() const { return fwd_.current_circuits(); }
  std::vector<SimTime> current_circuits_lit_at() const { return fwd_.current_circuits_lit_at(); }
  void set_record_flows(bool on) { record_ = on; }
  bool record_flows() const { return record_; }
  /// The step (ps) while anything is transient (before the run; default 1 us).
  void set_step(SimTime ps);
  SimTime step() const { return step_; }

  void on_event(const engine::Event& ev) override;

  // ---- results ----
  const FluidCounters& counters() const { return counters_; }
  /// Simulated time quiescent (jumped over) by now, and whether it is now.
  SimTime jumped_ps() const { return counters_.jumped_ps + (quiet_ ? eng_.now() - quiet_since_ : 0); }
  uint64_t flows_created() const { return flows_.next_id(); }
  size_t peak_live_flows() const { return flows_.size(); }
  size_t live_lanes() const { return lanes_.size() - free_lanes_.size(); }
  size_t blocked_lanes() const;
  const std::vector<OwnerStats>& owner_stats() const { return owners_.all(); }
  FlowRows flow_rows() const;
  /// Payload bytes of each flow slot that have left its source by now.
  std::vector<Bytes> sent_bytes() const;
  /// Wire bytes each port has carried by now, and that time at its rate.
  std::vector<double> port_bytes() const;
  std::vector<double> port_busy_ps() const;
  /// Per port: PFC pauses it received (channel u paused by its peer), expected ECN marks.
  const std::vector<uint64_t>& port_pauses() const { return port_pauses_; }
  const std::vector<double>& port_marks() const { return port_marks_; }
  /// Bytes queued now at each port, and the most it held.
  std::vector<double> port_queued() const;
  const std::vector<double>& port_max_queued() const { return max_queued_; }
  /// Current source rate (bit/s of wire bytes leaving the source) of every flow slot.
  std::vector<double> flow_rates() const;
  /// DCQCN current rate (bit/s) of every flow slot (0: not sending).
  std::vector<double> dcqcn_rates() const;
  uint32_t num_ports() const { return fwd_.num_ports(); }
  uint32_t num_links() const { return fwd_.num_links(); }
  const net::Forwarding& forwarding() const { return fwd_; }
  bool lossless() const { return lossless_; }
  Bytes header_bytes() const { return header_; }
  /// Bytes conservation: per flow slot, wire bytes at the source, queued in the fabric and
  /// delivered, as of now (the three sum to the flow's wire bytes).
  struct Ledger {
    std::vector<double> wire, backlog, queued, delivered;
  };
  Ledger ledger() const;

  static constexpr uint32_t kSamples = FlowNetwork::kSamples;

 private:
  enum Sub : uint32_t { kStart, kSent, kDone, kPlan, kTopologyChange, kLane, kNumSub };
  static constexpr double kBitsPsPerByte = 8e12;
  static constexpr double kEps = 1e-6;        ///< bytes: below this a backlog or remainder is none
  static constexpr double kQueuedEps = 1e-3;  ///< bytes: below this a port's queue is empty
  /// Bytes of a lane of `wire` bytes left to deliver that are rounding, not bytes.
  static double tolerance(double wire) { return kEps + 1e-9 * wire; }

  /// A lane's state at one hop, together (the step visits them port by port).
  struct Hop {
    double q = 0;     ///< bytes queued there
    double arr = 0;   ///< plan: bytes reaching the hop during the plan's step
    double dep = 0;   ///< plan: bytes leaving it
    double mark = 0;  ///< the port's stream position its last byte arrived at (FIFO order)
  };
  /// A (lane, hop) crossing a port, with the hop's state (stable while the lane lives: a
  /// lane's hops are allocated once, and port lists are rebuilt when lanes change).
  struct Slot {
    Hop* x;
    uint32_t lane, hop;
  };
  /// One path of a flow: its share of the flow's bytes and, per hop, the bytes queued at
  /// that hop's port (hop 0: unused, the source holds its bytes), with the plan's amounts.
  struct Lane {
    uint32_t flow = kNone;
    bool live = false;
    bool blocked = false;
    double frac = 1;           ///< share of the flow's wire bytes
    double wire = 0;           ///< its wire bytes
    double backlog = 0;        ///< bytes not yet sent by the source
    double delivered = 0;      ///< bytes out of the last hop
    double unmarked = 1;       ///< the plan's probability that a byte crosses unmarked
    SimTime t = 0;             ///< committed up to
    double fin0 = 0, fin = 0;  ///< plan: when in the step its last byte left the source, the last hop
    std::vector<uint32_t> ports;
    std::vector<Hop> hop;  ///< per hop (hop 0: the source; its q and mark unused)
  };
  /// Per flow slot: the source's DCQCN state and the flow's progress events.
  struct Source {
    std::vector<uint32_t> lanes;
    double wire = 0;
    double line = 0, rc = 0, rt = 0, alpha = 1;
    SimTime alpha_time = 0, last_cnp = 0, timer_deadline = engine::kNever, cnp_at = engine::kNever;
    double byte_count = 0;
    int t_stage = 0, bc_stage = 0;
    double marks = 0;  ///< expected marked frames delivered since the CNP interval passed
    SimTime delay = 0, cnp_delay = 0;
    double delivered_base = 0;           ///< bytes delivered by lanes a topology change replaced
    SimTime sent_at = -1, done_at = -1;  ///< queued kSent / kDone (-1: none)
    SimTime lane_at = -1;                ///< quiescent: queued kLane, its first lane to finish sending
    bool sent = false, delivered = false, active = false;
  };
  struct PortState {
    double capacity = 0;  ///< bit/s, 0 while down
    double bytes = 0;     ///< wire bytes carried
    double busy_ps = 0, bytes_mark = 0;
    double xoff = 0, xon = 0;   ///< PFC thresholds on the bytes that came over it (inf: none)
    double kmin = 0, kmax = 0;  ///< ECN thresholds, bytes
    double ingress = 0;         ///< plan: bytes inside its peer that came over it
    double queued = 0;          ///< plan: bytes queued at it
    double pm = 0;              ///< plan: ECN marking probability of what leaves it
    double use = 0;             ///< plan: share of the step it is busy
    double tail = 0;            ///< plan: its stream position at the step's end (FIFO marks)
    uint64_t seq = 0;           ///< the plan that last visited it (use, tail, pm, queued)
    double load = 0;            ///< quiescent: bytes per step crossing it
    uint32_t sources = 0;       ///< lanes starting at it (a NIC's flows)
    bool paused = false;        ///< PFC holds it now
    bool pause_sent = false;    ///< its peer's last decision: PAUSE (true) or RESUME
    SimTime flip_at = 0;        ///< when that decision reaches it
    SimTime reaction = 0;       ///< PFC's reaction time on it: 2 x propagation + the peer's latency
    std::vector<Slot> lanes;    ///< (lane, hop) crossing it
  };

  uint32_t append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key,
                       int64_t owner);
  double wire_bytes(uint32_t f) const;
  void start_flow(uint32_t f);
  /// A flow starts now: locally while quiescent, else at a new step.
  void begin_flow(uint32_t f);
  /// A flow starting inside a step, where what the step's plan left of every port on its
  /// paths passes all it offers: it takes that for the rest of the step and the other lanes'
  /// plans stand (false: it does not fit, plan the step again).
  bool join_step(uint32_t f);
  void add_lanes(uint32_t f, double bytes_left);
  void drop_lanes(uint32_t f);
  uint32_t new_lane();
  void retire(uint32_t f);
  void finish(uint32_t f);
  std::vector<uint32_t> walk(uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq, bool& reached) const;
  /// Bring the state from the plan's start to now at the plan's rates.
  void commit();
  /// Bring lane l to time `to` at the plan's rates.
  void commit_lane(uint32_t l, SimTime to);
  /// Plan the next step (or quiescent stretch) from now.
  void plan();
  /// One step's amounts (the lanes' arr and dep, the ports' use); whether anything moved.
  bool sweep(double dt, bool by_rate);
  // Quiescence, event by event: the lanes' rates hold; a flow starting or finishing sending
  // refills only its NIC's shares (and the relays' NICs its lanes cross); a port oversubscribed
  // ends it (commit, then time-stepping again).
  void enter_quiet();
  void leave_quiet();
  /// Water-fill the NICs in `work` (and those their changes reach) at the rates; false when
  /// a port is oversubscribed.
  bool refill(std::vector<uint32_t> work);
  void schedule_lane_end(uint32_t f);
  void lane_end(uint32_t f);
  /// A sent flow with nothing queued (quiescence): all delivered, done its path's delay after
  /// it left (its kDone event).
  void deliver_quiet(uint32_t f);
  void attach_lane(uint32_t l);
  void detach_lane(uint32_t l);
  void request_plan();
  void rebuild_ports();
  void set_capacities();
  void topology_changed();
  void cnp(uint32_t f, SimTime at);
  void increase(Source& s);
  void fire_timers(Source& s, SimTime now);
  double mark_prob(const PortState& p) const;

  engine::Engine& eng_;
  net::EngineConfig cfg_;
  net::Forwarding fwd_;
  uint32_t kind_base_ = 0;
  Bytes mtu_ = 0, header_ = 0;
  net::FlowTransports ft_;
  bool lossless_ = true;
  bool spreads_ = false;
  SimTime step_ = 1'000'000;
  double ecn_pmax_ = 0;

  FlowRecords flows_;
  bool record_ = true;
  FlowRecords log_;
  net::OwnerTotals owners_;
  std::vector<Source> src_;
  std::vector<uint32_t> active_;  ///< flow slots sending or delivering (lanes alive)
  std::vector<Lane> lanes_;
  std::vector<uint32_t> free_lanes_;
  std::vector<PortState> ports_;
  std::vector<uint32_t> order_;  ///< ports with lanes, in the step's order
  bool ports_dirty_ = true;
  std::vector<uint64_t> port_pauses_;
  std::vector<double> port_marks_, max_queued_;

  // the plan in force: from plan_t_ for plan_len_ ps, the lanes' amounts (arr, dep) are per
  // plan_step_ ps (the step they were computed for; a quiescent plan holds them longer)
  SimTime plan_t_ = 0, plan_len_ = 0, plan_step_ = 1, plan_at_ = -1;
  uint64_t plan_seq_ = 0;         ///< plans made (PortState::seq)
  std::vector<uint32_t> joined_;  ///< lanes that joined a step since the port lists were built
  std::vector<uint32_t> join_own_;
  std::vector<std::pair<uint32_t, double>> join_cuts_, join_freed_;
  bool planned_ = false, plan_pending_ = false;
  SimTime idle_since_ = -1;  ///< stepping without moving a byte since (stall detection)
  SimTime committed_ = -1;   ///< the last commit's time
  bool quiet_ = false;       ///< quiescent (rates held, events local)
  bool stepping_ = false;    ///< the plan in force is a step
  SimTime step_end_ = -1;    ///< the end of the step in progress (the steps' grid)
  SimTime quiet_since_ = 0;
  std::vector<uint32_t> refill_flows_;
  std::vector<uint32_t> indeg_, local_;  ///< rebuild_ports' scratch, per port
  std::vector<uint32_t> touched_, adj_first_, adj_, adj_fill_;
  std::vector<std::pair<uint32_t, uint32_t>> edges_;
  std::vector<std::pair<double, uint32_t>> offers_;
  std::vector<Bytes> link_buffer_;
  std::vector<uint8_t> link_lossy_;

  net::TopologyChanges changes_;
  net::FlowObserver* observer_ = nullptr;
  FluidCounters counters_;
};

}  // namespace rfabric::flow
