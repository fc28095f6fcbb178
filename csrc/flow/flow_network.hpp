// flow_network.hpp: the flow-level backend. Flows share the ports (link directions) on their
// paths by max-min fairness, computed by progressive filling (water-filling); rates change
// only when a flow starts or finishes sending, or a link or circuit changes, and each change
// recomputes only the connected component of flows that share ports with the ones affected.
//
// What it takes from the packet engine, unchanged: the forwarding layer (net::Forwarding:
// topology, channel states, circuits, routing tables, relays around failed NICs, PXN, host
// forwarding), so a flow's path is the one the packet engine's frames take; the engine's
// event queue; and the collective executor, which drives it through net::FlowFabric exactly
// as it drives the packet Network.
//
// The model, per flow:
//  * wire bytes = payload + one header per frame (frames = ceil(payload / (MTU - header)));
//  * paths: the forwarding path for the flow's ECMP hash. Where the packet engine spreads a
//    flow's frames (per-packet spraying, adaptive and multipath routing, frame-by-frame relays
//    around a failed NIC) the flow's frames are split evenly over the paths its first
//    kSamples frames would take: a port that a fraction c of them cross carries c x the
//    flow's rate (its coefficient), and the flow moves as one, so all its paths finish
//    together, as evenly sprayed frames do. The frames walk an idle fabric, except under
//    adaptive and multipath routing, where they walk against the load the flows sending
//    offer at their line rates, the flow's own earlier frames included (path_cache.cpp);
//  * its rate is its max-min fair share, the coefficients weighting what it takes of each
//    port (progressive filling with weights); a flow relayed around its failed NIC is capped
//    at that NIC's rate, as Network::line_rate caps it. Under PFC (a lossless transport) a
//    switch port is shared among the links feeding it, not among its flows: PFC pauses each
//    input link in turn, so a link with six flows gets what a link with one gets, and its
//    flows share that (share_by_input);
//  * the last byte reaches the destination a fixed delay after the fluid is through: what a
//    lone message takes frame by frame beyond its bottleneck time (Forwarding::
//    lone_packet_fct_ps: the path's propagation and node latencies, store-and-forward at every
//    hop, a short last frame waiting behind the full one before it), so that a lone flow ends
//    as the packet engine's does; a flow that shares its bottleneck delivers as its last
//    frame would in a port sending the flows' frames in turn, ahead of what the flows behind
//    it in that round send (round_robin_lead); and one that a port downstream bottlenecks
//    delivers as late as that port idled at the start: the flows starting on it at one
//    instant reach it after the first frames their senders' ports send first, in turn
//    (start_lag, start_idle: a mesh all-to-all's destination ports);
//  * a flow one of whose paths does not reach the destination (a dark circuit, a failed link
//    with no way round) has rate 0 until the next topology change re-routes it (the packet
//    engine holds those frames, and the flow cannot end without them).
// Not modelled: queues, PFC, ECN, congestion control dynamics (DCQCN's ramp, DCTCP's window),
// losses and retransmissions; load-aware choices see offered load when a flow starts, not
// queues as they change while it sends.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine.hpp"
#include "engine/rng.hpp"
#include "fabric/flow_fabric.hpp"
#include "fabric/flow_slots.hpp"
#include "fabric/forwarding.hpp"
#include "fabric/spec.hpp"
#include "fabric/topology_changes.hpp"
#include "fabric/transport_traits.hpp"

namespace rfabric::flow {

using engine::BitsPerSec;
using engine::Bytes;
using engine::SimTime;
using net::kNone;

/// Per-flow state, struct-of-arrays, indexed by slot: the columns both backends keep
/// (fabric/flow_slots.hpp: id, owner, src, dst, size, start, end, hash, live; the slot's reuse
/// once its flow retires, after on_flow_done) and the flow model's own. The same columns hold
/// the rows of retired flows when they are recorded (FlowNetwork::set_record_flows).
struct FlowRecords : net::FlowSlots<FlowRecords> {
  std::vector<SimTime> sent_ps;  ///< when its last byte left the source (-1: not yet)
  std::vector<uint32_t> copies;  ///< messages it stands for (create_flow's copies; size_bytes is their total)
  /// One more row in each of these columns (FlowSlots::acquire).
  void grow_row() {
    sent_ps.emplace_back();
    copies.emplace_back();
  }
  /// Append slot f of `t`.
  void append(const FlowRecords& t, uint32_t f);
};

using net::OwnerStats;

/// The per-flow result rows: recorded flows, then the flows alive, sorted by id.
struct FlowRows {
  std::vector<int64_t> id, owner;
  std::vector<uint32_t> src, dst;
  std::vector<Bytes> size_bytes, sent_bytes, delivered_bytes;
  std::vector<SimTime> start_ps, end_ps, sent_ps;
  std::vector<uint32_t> hash;  ///< ECMP hash (its path: ideal_fct_ps)
};

struct FlowCounters {
  uint64_t flows_done = 0;
  SimTime last_flow_end_ps = -1;    ///< when the latest flow to finish finished
  uint64_t recomputes = 0;          ///< max-min recomputations (one per batch of changes at one instant)
  uint64_t rate_updates = 0;        ///< subflow rates that changed in a recomputation
  uint64_t subflows = 0;            ///< subflows ever started
  uint64_t max_component = 0;       ///< most subflows in one recomputed component
  uint64_t component_subflows = 0;  ///< subflows recomputed, summed over recomputations
  uint64_t blocked = 0;             ///< subflows ever left without a path (rate 0 until a change)
  uint64_t reroutes = 0;            ///< active subflows moved to a new path by a topology change
  uint64_t quiet_ends = 0;          ///< flows that finished sending without a recomputation
                                    ///< (no other flow had its bottleneck on their ports)
  uint64_t handoffs = 0;            ///< flows started in the place of their connection's last
                                    ///< message as it left (no recomputation)
  uint64_t finishes_cancelled = 0;  ///< finish events taken out of the queue by a rate change
  uint64_t stale_finishes = 0;      ///< finish events run after all (not found to cancel), dropped
};

class FlowNetwork final : public engine::Handler, public net::FlowFabric {
 public:
  /// `header_bytes`, `lossless`: the transport's (net::transport_traits), used where the
  /// config leaves them at -1.
  FlowNetwork(engine::Engine& eng, const net::NetworkSpec& spec, const net::EngineConfig& cfg,
              Bytes header_bytes, bool lossless);

  // ---- net::FlowFabric ----
  engine::Engine& engine() override { return eng_; }
  SimTime now() const override { return eng_.now(); }
  uint32_t num_gpus() const override { return fwd_.num_gpus(); }
  int32_t gpu_server(uint32_t gpu) const override { return fwd_.gpu_server(gpu); }
  uint32_t create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key = 0,
                       int64_t owner = -1,
                       uint32_t copies = 1) override;  // (owner: the executor's flow_ops())
  bool merges_copies() const override { return true; }
  bool same_route(uint32_t src, uint32_t dst, uint64_t key_a, uint64_t key_b) override;
  void set_observer(net::FlowObserver* observer) override { observer_ = observer; }
  Bytes payload_per_packet() const override { return mtu_ - header_; }
  std::pair<SimTime, BitsPerSec> path_cost(uint32_t src, uint32_t dst) const override;
  std::vector<uint32_t> trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const override;
  BitsPerSec port_rate_bps(uint32_t port) const override { return fwd_.channel(port).rate_bps; }
  SimTime ideal_fct_ps(uint32_t src, uint32_t dst, uint32_t flow_hash, Bytes size) const override {
    const Bytes h = header_for(src, dst);
    return fwd_.lone_packet_fct_ps(fwd_.path(src, dst, flow_hash), size, mtu_ - h, h);
  }
  /// Header bytes per frame of a flow from GPU src to GPU dst: its transport's (the run's, or
  /// between sites the cross-site one, net::FlowTransports).
  Bytes header_for(uint32_t src, uint32_t dst) const { return ft_.header(ft_.of(src, dst)); }
  size_t num_flows() const override { return flows_.size(); }
  uint64_t routing_epoch() const override { return fwd_.rebuilds(); }
  void apply_due_changes() override {
    changes_.apply_due([this] { topology_changed(); });
  }
  /// Messages created so far (the next flow's id: a flow of n copies takes n ids), flows
  /// alive now, and alive at most at once.
  uint64_t flows_created() const { return flows_.next_id(); }
  size_t live_flows() const { return flows_.live_flows(); }
  size_t peak_live_flows() const { return flows_.size(); }
  /// Keep a row for every flow that retires (the per-flow result table); off, only the
  /// per-owner totals. On by default. Set before the run.
  void set_record_flows(bool on) { record_ = on; }
  bool record_flows() const { return record_; }
  /// Per-owner totals (index: owner) of the flows retired so far.
  const std::vector<OwnerStats>& owner_stats() const { return owners_.all(); }
  /// Rows recorded, then the flows alive now, sorted by id.
  FlowRows flow_rows() const;

  /// Add flows (GPU ids, bytes, ps) before the first run.
  void add_flows(const std::vector<uint32_t>& src, const std::vector<uint32_t>& dst,
                 const std::vector<Bytes>& size, const std::vector<SimTime>& start);
  /// Link failures and repairs, circuit plans, the circuit log (fabric/topology_changes.hpp).
  net::TopologyChanges& changes() { return changes_; }
  const net::TopologyChanges& changes() const { return changes_; }
  std::vector<uint32_t> current_circuits() const { return fwd_.current_circuits(); }
  std::vector<SimTime> current_circuits_lit_at() const { return fwd_.current_circuits_lit_at(); }

  void on_event(const engine::Event& ev) override;

  // ---- results ----
  /// The flow table (by slot: for a flow set, whose flows are all added at once, slot = id).
  const FlowRecords& flows() const { return flows_; }
  const FlowCounters& counters() const { return counters_; }
  /// Payload bytes of each flow slot that have left its source by now (the fluid's progress;
  /// all of them once it is done). A flow's bytes reach its destination its path delay later.
  std::vector<Bytes> sent_bytes() const;
  /// Wire bytes (headers included) each port has carried by now, and the time it spent
  /// carrying them at its rate.
  std::vector<double> port_bytes() const;
  std::vector<double> port_busy_ps() const;
  uint32_t num_ports() const { return fwd_.num_ports(); }
  uint32_t num_links() const { return fwd_.num_links(); }
  const net::Forwarding& forwarding() const { return fwd_; }
  bool lossless() const { return lossless_; }
  Bytes header_bytes() const { return header_; }
  /// Subflows sending from which a lossy run's recomputation refills only the flows a change
  /// can reach (max_min.cpp, recompute_local) before the whole component; 0: always. Below
  /// it the component is refilled, as in small runs (the results hashes).
  void set_local_min(size_t n) { local_min_ = n; }
  static constexpr size_t kLocalMin = 4096;
  /// Subflows currently active, and how many of them have no path.
  size_t active_subflows() const { return active_.size(); }
  size_t blocked_subflows() const;
  /// Current rate (bit/s) of every flow slot (0 when not sending).
  std::vector<double> flow_rates() const;
  struct Sending {
    uint64_t id;
    uint32_t src, dst, hash;
    double rate_bps;
  };
  /// The messages sending now, by id: a flow of n copies is n of them, each at its share.
  std::vector<Sending> sending() const;

  /// Frames of a flow whose paths are sampled where the packet engine spreads them.
  static constexpr uint32_t kSamples = 56;  // divisible by 1, 2, 4, 7 and 8 (NICs of a server)

 private:
  enum Sub : uint32_t { kStart, kSent, kDone, kRecompute, kTopologyChange, kNumSub };
  static constexpr double kBitsPsPerByte = 8e12;  // bytes * 8e12 / rate_bps = ps
  /// The latest time a subflow's finish is queued at (saturated, well clear of kNever so that
  /// now + ps, rounded through double, cannot wrap).
  static constexpr SimTime kLastFinish = engine::kNever - (SimTime{1} << 20);

  /// One port a subflow's paths cross: its position in the port's list, and the share of
  /// the flow's frames crossing it.
  struct Hop {
    uint32_t port;
    uint32_t slot;  ///< position in ports_[port].subs
    double coef;
  };
  /// Hops kept inside the Subflow record (a flow's paths cross 2-11 ports on the built-in
  /// fabrics); more go to a vector beside it.
  static constexpr uint32_t kInlineHops = 8;
  /// A flow while it sends (the struct keeps the name from when a flow had one per path: now
  /// it has one, replaced by a new one when a topology change re-routes it). The fields a
  /// recomputation reads (flags, weight, cap, bottleneck, hops) come first and the hops sit
  /// in the record, so gathering a component reads one or two cache lines per subflow, not
  /// three separate arrays.
  struct alignas(64) Subflow {
    uint32_t flow = kNone;
    /// The port whose saturation fixes its rate (kNone: its own cap, or not computed yet).
    /// While it holds, no change elsewhere can raise the rate: see remove_subflow.
    uint32_t bneck = kNone;
    uint32_t active_pos = 0;  ///< index in active_
    uint16_t nhops = 0;
    bool active = false;
    bool blocked = false;  ///< no path to the destination now
    double weight = 1;     ///< its flow's copies: it takes weight x the fair share
    double cap = 0;        ///< bit/s ceiling beyond the ports' (0: none)
    Hop inline_hops[kInlineHops];
    double rate = 0;  ///< bit/s
    SimTime finish_at = -1;
    double remaining = 0;        ///< wire bytes left to send
    double accounted = 0;        ///< `remaining` when its bytes sent were last added to its ports (account)
    SimTime last = 0;            ///< when remaining was last settled
    std::vector<Hop> spill;      ///< the hops when there are more than kInlineHops
    uint64_t finish_ticket = 0;  ///< its finish event's, for engine::Engine::cancel (last: cold)
    Hop* hops() { return nhops <= kInlineHops ? inline_hops : spill.data(); }
    const Hop* hops() const { return nhops <= kInlineHops ? inline_hops : spill.data(); }
  };
  struct PortState {
    std::vector<std::pair<uint32_t, uint32_t>> subs;  ///< (subflow, hop index)
    double capacity = 0;                              ///< bit/s, 0 while down
    double bytes = 0;                                 ///< wire bytes carried
    double busy_ps = 0;     ///< time busy up to the last capacity change, when bytes was
    double bytes_mark = 0;  ///< bytes_mark (busy time since: the bytes after it at capacity)
    uint32_t bnecks = 0;    ///< subflows whose bottleneck it is (Subflow::bneck)
    /// Flows starting on it at `turn_at` so far: the wire bytes of their first frames (start_lag).
    SimTime turn_at = -1;
    double turn_bytes = 0;
    /// The flows that started on it at `idle_at` reach it `idle_ps` after (begin_flow).
    SimTime idle_at = -1;
    SimTime idle_ps = 0;
    int8_t idle_full = -1;  ///< whether they saturate it (-1: not read yet, start_idle)
  };
  /// Paths of one (src, dst, hash), valid until the next topology change.
  struct PathSet {
    std::vector<std::vector<uint32_t>> paths;  ///< distinct paths that reach the destination
    std::vector<uint32_t> ports;               ///< the ports they cross, in order of first use
    std::vector<double> coef;                  ///< per port: share of the samples crossing it
    bool reached = true;                       ///< every sample reaches the destination
    /// The delivery delay (flow_delay's max over paths) for flows of `delay_size` bytes: the
    /// last size asked, kept since the flows of one op mostly share it (-1: none yet).
    Bytes delay_size = -1;
    SimTime delay = 0;
  };

  uint32_t append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key,
                       int64_t owner, uint32_t copies = 1);
  /// Bytes flow f puts on the wire, headers included (each copy framed on its own).
  double wire_bytes(uint32_t f) const;
  /// The flow in slot f is done and told: fold it into its owner's totals, record it, free the slot.
  void retire(uint32_t f);
  /// The flow in slot f delivered its last byte: tell the observer, then retire it.
  void finish(uint32_t f);
  Bytes sent_of(uint32_t f) const;
  PathSet& paths_of(uint32_t src, uint32_t dst, uint32_t hash);
  /// Fetch the path cache's slot for (src, dst, hash) ahead of paths_of: at scale the table
  /// is megabytes and each lookup a cache miss.
  void fetch_paths(uint32_t src, uint32_t dst, uint32_t hash) const;
  /// Add one sampled frame's path (`reached`: it gets to the destination) to `ps`, `weight`
  /// samples of it; `count`: per port of ps.ports, the samples crossing it; `samples`: all.
  static void add_sample(PathSet& ps, std::vector<uint32_t>& count, uint32_t& samples,
                         const std::vector<uint32_t>& path, bool reached, uint32_t weight);
  void clear_path_cache();
  struct FluidLoad;  ///< path_cache.cpp
  /// The ports a frame with sequence number `seq` crosses; `reached`: it gets to dst. `load`:
  /// what adaptive and multipath choices read (net::IdleLoad, or path_cache.cpp's FluidLoad).
  template <class Load>
  std::vector<uint32_t> walk(uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq, bool& reached,
                             const Load& load) const;
  /// Sample the paths of flow f's kSamples frames into `out`, frame by frame, as the ports'
  /// offered load (path_cache.cpp) makes adaptive and multipath choices take them.
  void sample_paths(uint32_t f, PathSet& out);
  /// Refill the shares of a sampled path set `ps` of a flow offering `rate` bit/s over its
  /// paths so the ports they choose among carry the offered load alike (path_balance.cpp).
  void balance_split(PathSet& ps, double rate);
  static constexpr uint32_t kBalanceUnits = 4 * kSamples;
  std::vector<double> bal_load_;
  std::vector<uint32_t> bal_in_, bal_path_ports_, bal_path_end_, bal_units_, bal_diff_end_;
  std::vector<std::pair<uint32_t, uint32_t>> bal_diff_;  ///< (port index, times crossed)
  /// The paths flow f starts on: with load routing sampled now (into fresh_), else cached.
  PathSet& start_paths(uint32_t f);
  /// What flow f offers when it starts (bit/s): its line rate, each copy.
  double offered_rate(uint32_t f) const;
  /// Add (sign +1) or take back (-1) subflow s's offered load on its ports (load routing).
  void offer(uint32_t s, double sign);
  void start_flow(uint32_t f);
  /// How long after now flow f, starting now, sends its first frame from port p, its first:
  /// a port sends the first frames of the flows that start on it at one instant in turn, in
  /// the order they start.
  SimTime start_lag(uint32_t f, uint32_t p);
  /// Start flow f now, noting on the ports it crosses how long they idle (start_lag).
  void begin_flow(uint32_t f);
  /// How long the ports bottlenecking subflow s idled at its start (begin_flow): its last
  /// frame leaves that much later than the fluid's.
  SimTime start_idle(uint32_t s);
  uint32_t new_subflow(uint32_t f, PathSet& ps, double bytes);
  void remove_subflow(uint32_t s);
  void attach(uint32_t s);
  void detach(uint32_t s);
  /// Bring s's bytes left up to now at its rate (its ports' byte counts wait for account()).
  void settle(uint32_t s);
  /// Add the bytes s sent since it was last accounted to its ports (when it ends sending,
  /// and before a capacity change): one pass over its ports per flow, not per rate change.
  void account(uint32_t s);
  void subflow_sent(uint32_t s);
  /// How much earlier than now subflow s's last frame left, as a port sends the frames of the
  /// flows backlogged on it in turn: what the flows behind it in that round send (0: alone).
  SimTime round_robin_lead(uint32_t s);
  /// Queue subflow s's finish at its rate (none at rate 0).
  void schedule_finish(uint32_t s);
  /// Drop s's queued finish event (taken out of the queue when near) and its finish_at.
  void unschedule_finish(uint32_t s);
  /// Flow f's delivery delay over the paths of `ps` (kept in ps for flows of its size).
  SimTime delivery_delay(uint32_t f, PathSet& ps) const;
  /// Flow f's last byte left `lead` ps ago (round_robin_lead): it arrives its delay after.
  void flow_sent(uint32_t f, SimTime lead = 0);
  void dirty_port(uint32_t p);
  void dirty_sub(uint32_t s);
  void request_recompute();
  void recompute();
  /// recompute() in place of its whole component, where many subflows send (max_min.cpp):
  /// false if it had to give up (the caller then recomputes the component).
  bool recompute_local();
  /// Whether recompute_local may run, and so used_ and plevel_ are kept: lossy runs only
  /// (under PFC share_by_input reweights the whole component, which its check does not cover).
  bool local_refill() const { return !lossless_; }
  /// Take subflow s's rate off its ports' usage (used_) as it stops sending.
  void release_rate(uint32_t s);
  uint32_t next_mark();
  /// Write the rates and bottlenecks water_fill found for comp_subs_ into their subflows.
  void commit_rates();

  void water_fill(const std::vector<uint32_t>& subs, const std::vector<uint32_t>& ports);
  /// Under PFC a switch port serves the links feeding it in turns, not its flows: fill the
  /// component again with each flow weighted by its input link's share of the port that
  /// arbitrates it (flow_network.cpp), while the weights move.
  void share_by_input(const std::vector<uint32_t>& subs, const std::vector<uint32_t>& ports);
  void topology_changed();
  void set_capacities();
  double flow_cap(uint32_t f) const;
  SimTime flow_delay(uint32_t f, const std::vector<uint32_t>& path) const;

  engine::Engine& eng_;
  net::EngineConfig cfg_;
  net::Forwarding fwd_;
  uint32_t kind_base_ = 0;
  Bytes mtu_ = 0, header_ = 0;
  net::FlowTransports ft_;
  bool lossless_ = true;
  bool spreads_ = false;  ///< the routing mode spreads a flow's frames (spray, adaptive, multipath)
  /// Adaptive or multipath routing: a flow's frames follow port load, so a flow's paths are
  /// sampled when it starts against the offered load of the flows sending (path_cache.cpp).
  bool load_routing_ = false;
  std::vector<double> offered_;      ///< per port: bit/s offered by the subflows crossing it
  std::vector<double> sub_offered_;  ///< per subflow slot: the bit/s it offers (line rate x copies)
  std::vector<double> extra_;        ///< per port: offered by the samples of the flow being routed
  std::vector<uint32_t> touched_;    ///< ports with extra_ set
  PathSet fresh_;                    ///< the last sampled path set (start_paths)

  FlowRecords flows_;
  bool record_ = true;
  FlowRecords log_;  ///< rows of retired flows (when recording)
  net::OwnerTotals owners_;
  std::vector<uint32_t> flow_sub_;   ///< per flow: its subflow while it sends (kNone otherwise)
  std::vector<SimTime> flow_delay_;  ///< per flow: sent -> delivered
  std::vector<SimTime> flow_lag_;    ///< per flow: its start_lag (begin_flow)
  std::vector<Subflow> subs_;
  std::vector<uint32_t> free_subs_;
  std::vector<uint32_t> active_;  ///< live subflows
  /// The subflow whose flow just finished sending, while its observer is told (start_flow
  /// hands it to the connection's next message); kNone otherwise.
  uint32_t handoff_ = kNone;
  /// The flows told of this instant's end at their bottleneck port (round_robin_lead): a
  /// port's round ends its flows in the order it serves them, whatever order they are told in.
  /// Each port's are a list through told_ (next), so that a flow reads only its own port's.
  struct Told {
    SimTime start;
    uint64_t id;
    double last;    ///< wire bytes of its last frames (one per copy)
    uint32_t next;  ///< the next one told at the same port (kNone: none)
  };
  std::vector<Told> told_;
  SimTime told_at_ = -1;
  /// Per port: the first and last of told_ at that port, valid while `at` is told_at_.
  struct ToldList {
    SimTime at = -1;
    uint32_t first = kNone, last = kNone;
  };
  std::vector<ToldList> told_port_;
  std::vector<PortState> ports_;
  struct PathKey {
    uint32_t src, dst, hash;
    bool operator==(const PathKey&) const = default;
  };
  struct PathKeyHash {
    size_t operator()(const PathKey& k) const {
      return static_cast<size_t>(engine::mix64((uint64_t{k.src} << 40) ^ (uint64_t{k.dst} << 20) ^ k.hash ^
                                               (uint64_t{k.hash} << 44)));
    }
  };
  /// The path cache: open addressing (linear probing, power-of-two table at most half full)
  /// from a key to its PathSet's index in path_sets_; one probe is usually one cache line,
  /// where a node-based map chases two or three.
  struct PathSlot {
    PathKey key;
    uint32_t index = kNone;  ///< in path_sets_ (kNone: empty)
  };
  std::vector<PathSlot> path_table_;
  std::vector<PathSet> path_sets_;
  uint64_t path_cache_clears_ = 0;

  // recomputation: seeds of the component(s) to recompute, and the scratch it reuses
  std::vector<uint32_t> seed_ports_, seed_subs_;
  std::vector<uint32_t> comp_subs_, comp_ports_, capped_;
  /// share_by_input's scratch: each flow's copies, new weight and weight in the fill before
  /// the current one, whether it has one path; the (port, input) groups and their order by
  /// port; per port the one bottleneck of the flows through it, how many flows it
  /// arbitrates, and as an input its copies at the port being counted; the outputs of the
  /// fill before the current one.
  std::vector<double> base_weight_, new_weight_, prev_weight_;
  std::vector<uint8_t> single_;
  std::vector<std::pair<uint64_t, uint32_t>> groups_;
  std::vector<uint32_t> order_, pass_to_, group_count_, input_stamp_;
  std::vector<double> input_copies_;
  struct FillOut {
    std::vector<double> rate, left, plevel;
    std::vector<uint32_t> bneck;
  };
  FillOut prev_;
  std::vector<uint8_t> at_switch_;       ///< per port: it leaves a switch (not a GPU)
  std::vector<unsigned __int128> heap_;  ///< water_fill's heap of ports (max_min.cpp)
  /// Per subflow slot (per port): the recomputation that last reached it (the low 32 bits of
  /// mark_) and its index in that component (comp_subs_, comp_ports_), beside subs_ (ports_),
  /// so the walk reads 8 bytes per subflow or port it meets, not their records.
  struct Mark {
    uint32_t mark = 0;
    uint32_t local = 0;
  };
  std::vector<Mark> sub_mark_, port_mark_;
  /// One component, gathered by recompute for water_fill, by local index (comp_subs_,
  /// comp_ports_ order): CSR lists sub -> (port, coefficient) and port -> subs, the inputs
  /// (weight, cap) and the fill's state and outputs (rate, bottleneck). The gathered arrays
  /// are buffers: recompute writes their first entries and only grows them.
  struct Fill {
    std::vector<double> weight, cap, sub_coef;
    std::vector<uint32_t> sub_port, sub_end, port_sub, port_end;
    std::vector<double> left, load, rate;   ///< (load: the unfrozen flows' coefficients x weights)
    std::vector<uint32_t> unfrozen, bneck;  ///< (unfrozen: how many; load is exactly 0 with them gone)
    std::vector<uint8_t> frozen;
    /// Per port: what the subflows filled may use (recompute_local: the capacity the others
    /// leave; else the port's capacity), and the level at which it saturated (-1: did not).
    bool residual = false;
    std::vector<double> port_cap, plevel;
  };
  Fill fill_;
  /// Per port: bit/s the subflows through it use at their rates (kept as rates change), and
  /// the level (rate / weight) of the subflows whose bottleneck it is (max_min.cpp).
  std::vector<double> used_, plevel_;
  size_t local_min_ = kLocalMin;
  uint64_t local_clears_ = 0;  ///< path_cache_clears_ at the last full recomputation
  /// recompute_local's scratch, per port of its region.
  std::vector<double> loc_old_, loc_new_, loc_max_, loc_bmin_;
  std::vector<uint32_t> loc_nb_;
  bool recompute_pending_ = false;
  uint64_t mark_ = 0;

  net::TopologyChanges changes_;  ///< link and plan queues, circuit log

  net::FlowObserver* observer_ = nullptr;
  FlowCounters counters_;
};

}  // namespace rfabric::flow
