// network.hpp: the packet network: ports (egress queue + serializer + wire), switches
// (table forwarding, ECMP, PFC), hosts (NIC scheduling across flows) and flows.
//
// A port is the sending end of one direction of a link. INVARIANT: a port has at most one
// valid pending TxDone event, at tx_event_at (busy_until, or for an idle-queue NIC port the
// later of busy_until and its earliest flow slot); older ones are stale and skipped. A packet
// on a wire has exactly one pending Arrive event, at tx end + propagation + the next node's
// latency. The network knows transports through the Transport interface, except RoCE's
// per-frame members, which it calls directly when RoCE carries every flow (Network::roce_).
//
// Where a frame goes is the forwarding layer's (net::Forwarding, forwarding.hpp: topology,
// channel states, tables, relays), which the network owns by value; the ports copy each
// channel's far end and state for the per-frame path. The implementation is split by seam:
// network_build.cpp (building), flows.cpp (flows and NIC scheduling), circuits.cpp (link
// failures, circuit plans, re-forwarding after a change), network.cpp (the per-frame hot path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
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
#include "packet/packet.hpp"
#include "packet/transport.hpp"

namespace rfabric::proto {
class Roce;  // packet/transports/roce.hpp
}  // namespace rfabric::proto

namespace rfabric::net {

struct alignas(64) Port {  // 128 bytes: an index becomes an address with one shift
  // What the per-frame path reads and writes, in two cache lines; the rest of a port (wiring,
  // rate, what only PAUSE and RESUME read, counters of rare things) is its PortInfo, in an
  // array of its own. At 4,096 GPUs the port table does not fit in cache and every hop reads
  // two ports at random: 128 hot bytes per port, where the 256-byte port had 192.
  // Line 0: a frame's arrival over this channel (the far end, the generation it checks, the
  // PFC ingress accounting of the peer's buffer), and what only a queued frame reads (the
  // queue's peak, the ECN thresholds). Line 1: the transmitter and the queue, all a frame
  // through an idle port writes.
  // For a port facing an optical device (PortInfo::optical), peer/delay/rate are those of
  // the end-to-end channel its circuit chain forms, re-resolved on changes.

  // ---- line 0: arrivals, and the rest of a queued frame ----
  uint32_t peer = 0;
  /// Forwarding::hop_key(peer): the GPU's id when `peer` is a GPU (arrivals test delivery
  /// here: any other node's key is at least num_gpus()), else where its next-hop cache row is
  uint32_t peer_key = 0;
  uint32_t live_gen = 1;  ///< gen | 1: what a frame sent on this channel as it is, live, carries
  bool peer_eps = false;  ///< `peer` is a packet switch
  uint8_t hop_step = 0;   ///< what an arrival over this channel adds to Packet::hops: 1 when
                          ///< `peer` is a packet switch (or a forwarding host), 0 for a GPU
                          ///< or NVSwitch only relaying (PXN, failed NIC) or receiving
  bool pause_sent = false;
  /// A lossy port in a lossless run (NetworkSpec::link_lossy, a long link between sites):
  /// drop-tail on its queue, and what arrives over it never sends a PAUSE (xoff unbounded).
  /// (Set by set_thresholds; in a lossy run every port drops and this stays false.)
  bool lossy = false;
  Bytes ingress_bytes = 0;  ///< bytes that came over this channel and wait inside the peer
  Bytes max_ingress_bytes = 0;
  Bytes xoff = 0;  ///< PFC threshold on ingress_bytes (lossless only)
  Bytes ecn_kmin = 0, ecn_kmax = 0;
  Bytes max_queue_bytes = 0;
  // ---- line 1: the transmitter and the queue ----
  alignas(64) uint32_t head = kNone;
  uint32_t tail = kNone;
  /// channel generation, odd while up: new on every change of peer or state (new_channel);
  /// frames carry it when sent
  uint32_t gen = 1;
  uint32_t ps_per_byte = 0;  ///< 8e12 / rate_bps when that is a whole number (and < 2^31), else 0
  bool paused = false;       ///< write with set_paused (up is the parity of gen: is_up())
  bool stopped = false;      ///< !is_up() || paused, kept by new_channel/set_paused: the hot paths' one test
  bool nic = false;          ///< the owner is a GPU with a NIC scheduler here (Network::port_nic_)
  /// nic || !ps_per_byte, kept by set_nic/set_rate: a frame straight through this idle port
  /// takes Network::straight_through_cold (one test on the per-hop path, not two)
  bool cold_wire = true;
  /// Frames sent, modulo 2^32 (Network::tx_packets adds PortInfo::tx_packets_high): 32 bits
  /// and the NIC flag leave line 1 room for all a frame through an idle port writes.
  uint32_t tx_packets_low = 0;
  SimTime busy_until = 0;
  /// Time of the one valid pending TxDone event (-1 before the first; after one fires it
  /// keeps that time, which no later event can have). Events at other times are stale.
  SimTime tx_event_at = -1;
  SimTime delay_ps = 0;  ///< tx end -> arrival event: propagation + latency of the peer node
  Bytes queued_bytes = 0;
  Bytes tx_bytes = 0;
};

static_assert(sizeof(Port) == 128 && offsetof(Port, max_queue_bytes) < 64 && offsetof(Port, head) == 64,
              "Port's per-frame fields stay on the cache lines the comment above names");

/// The rest of a port (same index as its Port): wiring, rate, what only PAUSE and RESUME read,
/// and counters of rare things.
struct PortInfo {
  uint32_t node = 0, link = 0;
  bool optical = false;     ///< the link's far end is an optical device (OCS or patch panel)
  bool inert = false;       ///< owned by an optical device: never transmits
  bool lossy_link = false;  ///< NetworkSpec::link_lossy: its ECN thresholds are the cross-site
                            ///< transport's; in a lossless run, Port::lossy
  BitsPerSec rate_bps = 0;
  SimTime prop_ps = 0;  ///< propagation delay of the wire
  Bytes xon = 0;        ///< PFC: RESUME once ingress_bytes is back at or below (lossless only)
  Bytes buffer_bytes = 0;
  int64_t drops = 0, ecn_marks = 0, pauses = 0;
  int64_t tx_packets_high = 0;  ///< Port::tx_packets_low's wraps, times 2^32
  /// Busy time (Network::busy_ps) is tx_bytes' at the whole ps_per_byte, counted from
  /// busy_base_bytes on, plus busy_base_ps: the time before the last change of rate and
  /// every frame's at a rate of no whole ps per byte. So the per-frame path adds nothing.
  SimTime busy_base_ps = 0;
  Bytes busy_base_bytes = 0;
};

/// The port's channel is up (the parity of its generation, which new_channel keeps).
inline bool is_up(const Port& pt) { return (pt.gen & 1u) != 0; }

inline void set_paused(Port& pt, bool paused) {
  pt.paused = paused;
  pt.stopped = !is_up(pt) || pt.paused;
}

/// The port is a NIC's (its owner's NIC scheduler pulls frames for it).
inline void set_nic(Port& pt) {
  pt.nic = true;
  pt.cold_wire = true;
}

/// The port's channel changed (peer, or up/down): a new generation, odd when up, so frames
/// sent before are recognised on arrival, and so are frames sent while it was down.
inline void new_channel(Port& pt, bool up) {
  pt.gen = (((pt.gen >> 1) + 1) << 1) | (up ? 1u : 0u);
  pt.live_gen = pt.gen | 1u;
  pt.stopped = !up || pt.paused;
}

/// Set a port's rate and the whole-ps-per-byte shortcut its serializations use (the busy
/// time at the old one folded into busy_base_ps first).
inline void set_rate(Port& pt, PortInfo& info, BitsPerSec rate) {
  info.busy_base_ps += (pt.tx_bytes - info.busy_base_bytes) * pt.ps_per_byte;
  info.busy_base_bytes = pt.tx_bytes;
  info.rate_bps = rate;
  const SimTime bits_ps = 8 * engine::kPsPerSec;
  // (below 2^31 ps per byte, so any uint32 frame size times it fits in int64)
  pt.ps_per_byte = rate > 0 && bits_ps % rate == 0 && bits_ps / rate < (SimTime{1} << 31)
                       ? static_cast<uint32_t>(bits_ps / rate)
                       : 0;
  pt.cold_wire = pt.nic || pt.ps_per_byte == 0;
}

static_assert((sizeof(Port) & (sizeof(Port) - 1)) == 0, "keep Port a power-of-two size (see above)");

/// Per-flow state of the flows alive now, struct-of-arrays, indexed by slot: the columns both
/// backends keep (fabric/flow_slots.hpp: id, owner, src, dst, size, start, end, hash, live;
/// the slot's reuse once its flow retires) and the packet network's own.
struct FlowTable : FlowSlots<FlowTable> {
  std::vector<Bytes> delivered_bytes, sent_bytes;
  /// Payload accounting beyond the first copy of each byte: sent again (retransmissions),
  /// reaching the destination again (duplicates), lost in the fabric. INVARIANT, per flow at
  /// any time: sent + resent = delivered + duplicate + dropped + in flight (tests check it).
  std::vector<Bytes> resent_bytes, duplicate_bytes, dropped_bytes;
  std::vector<uint32_t> first_port;
  std::vector<uint32_t> retransmits;
  std::vector<SimTime> nic_ready;      ///< the flow's valid NIC slot; other heap entries are stale
  std::vector<uint32_t> packets;       ///< frames of this flow in the pool (data and control)
  std::vector<uint8_t> sent_notified;  ///< FlowObserver::on_flow_sent already told
  std::vector<uint8_t> proto;          ///< the flow's transport (FlowTransports::of): 0 the run's
  /// One more row in each of these columns (FlowSlots::acquire).
  void grow_row() {
    for (auto* v : {&first_port, &retransmits, &packets}) v->emplace_back();
    for (auto* v :
         {&delivered_bytes, &sent_bytes, &resent_bytes, &duplicate_bytes, &dropped_bytes, &nic_ready})
      v->emplace_back();
    sent_notified.emplace_back();
    proto.emplace_back();
  }
};

/// Rows of retired flows, columnar: the per-flow result table (FLOW_SCHEMA), kept only when
/// recording (Network::set_record_flows) and drained by the caller as it streams them out.
struct FlowLog {
  std::vector<int64_t> id, owner;
  std::vector<uint32_t> src, dst;
  std::vector<Bytes> size_bytes, sent_bytes, delivered_bytes, resent_bytes, duplicate_bytes, dropped_bytes;
  std::vector<SimTime> start_ps, end_ps;
  std::vector<uint32_t> retransmits;
  std::vector<uint32_t> hash;    ///< ECMP hash (its path: Network::ideal_fct_ps)
  std::vector<Bytes> in_flight;  ///< payload now in the fabric (filled by Network::flow_records)
  size_t size() const { return id.size(); }
  /// Append slot f of `t` (in_flight 0).
  void append(const FlowTable& t, uint32_t f);
};

/// Per-port NIC arbitration: flows ready to send, earliest first, FIFO among equals.
struct NicScheduler {
  struct Entry {
    SimTime ready;
    uint64_t seq;
    uint32_t flow;
    uint32_t gen;  ///< low bits of the flow's id: an entry of a slot's earlier flow is stale
  };
  /// Heap order (std heaps keep the greatest on top): earliest ready, FIFO among equals.
  /// A function object, so the heap algorithms inline it.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.ready > b.ready || (a.ready == b.ready && a.seq > b.seq);
    }
  };
  static constexpr Later later{};
  std::vector<Entry> heap;
  SimTime wake_at = engine::kNever;
};

struct RunCounters {
  uint64_t packets = 0, packets_delivered = 0, packet_hops = 0 /* filled by counters() */, drops = 0,
           ecn_marks = 0, pauses = 0;
  uint64_t overflow_drops = 0;
  uint64_t no_route_drops = 0, link_down_drops = 0;
  uint64_t circuit_drops = 0;     ///< lost on a circuit that went dark (lossy)
  uint64_t circuit_reroutes = 0;  ///< held back from a dark circuit and re-forwarded, or sent
                                  ///< again from its source (resend_from_source) (lossless)
  uint64_t dark_transmits = 0;    ///< frames put on a down or dark channel (found when they arrive):
                                  ///< an invariant, always 0
  uint64_t busy_starts = 0;       ///< frames put on a port still serialising another: an
                                  ///< invariant, always 0
  uint64_t held = 0;              ///< frames ever held at a node for lack of a route (lossless)
  uint64_t flows_done = 0;
  SimTime last_flow_end_ps = -1;  ///< when the latest flow to finish finished
};

class Network final : public engine::Handler, public FlowFabric {
 public:
  using TransportFactory = std::unique_ptr<Transport> (*)(Network&);
  /// Build ports, tables and the transport made by `make_transport` (packet/transports/registry).
  /// `make_cross` builds the cross-site transport when the spec names one.
  Network(engine::Engine& eng, const NetworkSpec& spec, const EngineConfig& cfg,
          TransportFactory make_transport, TransportFactory make_cross = nullptr);
  ~Network() override;

  /// Add flows (GPU ids, bytes, ps). Must be called before the first run.
  void add_flows(const std::vector<uint32_t>& src, const std::vector<uint32_t>& dst,
                 const std::vector<Bytes>& size, const std::vector<SimTime>& start);
  /// Create one flow during a run; it starts at `start_ps` (>= now) through an event, so a
  /// caller inside a transport callback never re-enters the transport. Returns its id.
  /// `ecmp_key` (when not 0) replaces the flow's own ECMP hash: flows of one connection
  /// (an RDMA QP reused across steps and ops) then keep one path, as on real NICs.
  /// `owner` (>= 0: an index the creator chooses, e.g. the op) collects the flow's totals in
  /// owner_stats() when it retires. The id returned is the flow's slot, valid until its
  /// on_flow_done(): a later flow may reuse it.
  uint32_t create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps, uint64_t ecmp_key = 0,
                       int64_t owner = -1, uint32_t copies = 1) override;
  void set_observer(FlowObserver* observer) override { observer_ = observer; }
  /// Engine::run() with this network's arrivals and transmit-dones compiled into the loop
  /// (Engine::run_hot).
  uint64_t run(SimTime until, uint64_t max_events);
  /// Latency (ps: propagation plus per-hop processing) and slowest rate (bit/s) of the
  /// current path from GPU src to GPU dst, for cost models.
  std::pair<SimTime, BitsPerSec> path_cost(uint32_t src, uint32_t dst) const override;
  /// Server of a GPU (from the spec), for locality-aware collectives.
  int32_t gpu_server(uint32_t gpu) const override { return fwd_.gpu_server(gpu); }
  /// Link failures and repairs, circuit plans, the circuit log (fabric/topology_changes.hpp).
  TopologyChanges& changes() { return changes_; }
  const TopologyChanges& changes() const { return changes_; }
  /// Current circuits as (device, link a, link b) triples, lit or not.
  std::vector<uint32_t> current_circuits() const;
  /// When each current circuit (current_circuits() order) carries light, ps.
  std::vector<SimTime> current_circuits_lit_at() const { return fwd_.current_circuits_lit_at(); }

  void on_event(const engine::Event& ev) override;

  // ---- services for transports ----
  engine::Engine& engine() override { return eng_; }
  SimTime now() const override { return eng_.now(); }
  const EngineConfig& config() const { return cfg_; }
  const FlowTable& flows() const { return flows_; }
  FlowTable& flows_mut() { return flows_; }
  PacketPool& pool() { return pool_; }
  /// The run's transport's payload per full frame (a flow's own: the overload below).
  Bytes payload_per_packet() const override { return mtu_ - header_; }
  /// The run's transport's header bytes per data frame (a flow's own: the overload below).
  Bytes header_bytes() const { return header_; }
  /// Header bytes per data frame of the flow's transport (its own on a cross-site flow).
  Bytes header_bytes(uint32_t flow) const { return two_ ? ft_.header(flows_.proto[flow]) : header_; }
  /// The flow's line rate: its first-hop port's, but no more than its GPU's NIC link's when
  /// that NIC failed and the flow leaves the server (its frames spread over the server's
  /// other NICs): at NVLink rate it would flood their queues and, through PFC, pause their
  /// own GPUs' traffic (2x their time). (PXN flows keep NVLink's rate: paced upstream of a
  /// shared NVLink port at the NIC's rate, every delay there is lost NIC time.)
  BitsPerSec line_rate(uint32_t flow) const;
  /// The flow may send from time t on. Replaces any readiness given before (a transport
  /// that changes its rate re-paces the flow with this), so a flow holds one valid slot.
  void activate(uint32_t flow, SimTime t);
  /// The flow has nothing to send until its next activate() (an ACK covered everything it
  /// had queued, or its window shrank): its NIC slot is given up, and the heap entry left
  /// behind is skipped as stale, so the NIC never pulls a frame the flow cannot send.
  void deactivate(uint32_t flow) { flows_.nic_ready[flow] = engine::kNever; }
  /// The flow's slot may be free now (a transport calls this when a timer of the flow fired
  /// and none is pending any more); it retires once finished with no frame left in the fabric.
  void maybe_retire(uint32_t flow) {
    if (flows_.end_ps[flow] >= 0 && flows_.packets[flow] == 0 && flows_.live[flow]) retire_if_quiet(flow);
  }
  /// Send a control frame (ACK, CNP, ...) of the flow, from its destination back to its
  /// source, ahead of data.
  uint32_t send_control(uint32_t flow, uint8_t type);
  /// The GPU a frame comes from: its flow's source for a data frame, its flow's destination
  /// for a control frame.
  uint32_t src_of(const Packet& p) const { return p.control ? flows_.dst[p.flow] : flows_.src[p.flow]; }
  /// Message bytes a frame carries.
  Bytes payload_of(const Packet& p) const {
    return p.control ? 0 : Bytes{p.size_bytes} - header_bytes(p.flow);
  }
  void send_packet(uint32_t pkt);
  /// The destination received the flow's last byte.
  void complete_flow(uint32_t flow);

  // ---- inspection ----
  const std::vector<Port>& ports() const { return ports_; }
  const std::vector<PortInfo>& port_info() const { return port_info_; }
  /// Frames the port sent.
  int64_t tx_packets(uint32_t port) const {
    return port_info_[port].tx_packets_high + ports_[port].tx_packets_low;
  }
  /// Time the port spent serialising frames, ps.
  SimTime busy_ps(uint32_t port) const {
    const Port& pt = ports_[port];
    const PortInfo& info = port_info_[port];
    return info.busy_base_ps + (pt.tx_bytes - info.busy_base_bytes) * pt.ps_per_byte;
  }
  const std::vector<Node>& nodes() const { return fwd_.nodes(); }
  /// The forwarding layer: topology, channel states, tables (read-only; changes go through
  /// changes(), whose events keep the ports in step).
  const Forwarding& forwarding() const { return fwd_; }
  /// Run counters; packet_hops is the engine's count of arrival events (one per frame
  /// leaving a link), so the arrival path keeps no counter of its own.
  RunCounters counters() const {
    RunCounters c = counters_;
    c.packet_hops = eng_.kind_count(kind_base_ + kArrive);
    return c;
  }
  /// Keep a row for every flow that retires (the per-flow result table); off, only the
  /// per-owner totals are kept. On by default. Set before the run.
  void set_record_flows(bool on) { record_ = on; }
  bool record_flows() const { return record_; }
  /// Move out the rows recorded so far (for streaming them to a file).
  FlowLog take_flow_log() { return std::exchange(log_, FlowLog{}); }
  /// Rows recorded and not yet taken, then the flows alive now, sorted by id, with each
  /// one's payload now in the fabric (for conservation checks between runs).
  FlowLog flow_records() const;
  size_t flow_log_rows() const { return log_.size(); }
  /// Per-owner totals (index: owner) of the flows retired so far.
  const std::vector<OwnerStats>& owner_stats() const { return owners_.all(); }
  /// Flows created so far (the next flow's id).
  uint64_t flows_created() const { return flows_.next_id(); }
  size_t live_flows() const { return flows_.live_flows(); }
  /// The most flows alive at once so far: the size of the per-flow table.
  size_t peak_live_flows() const { return flows_.size(); }
  uint32_t num_links() const { return fwd_.num_links(); }
  uint32_t num_gpus() const override { return fwd_.num_gpus(); }
  BitsPerSec port_rate_bps(uint32_t port) const override { return port_info_[port].rate_bps; }
  SimTime ideal_fct_ps(uint32_t src, uint32_t dst, uint32_t flow_hash, Bytes size) const override {
    const Bytes h = ft_.header(ft_.of(src, dst));
    return fwd_.lone_packet_fct_ps(fwd_.path(src, dst, flow_hash), size, mtu_ - h, h);
  }
  size_t num_flows() const override { return flows_.size(); }
  uint64_t routing_epoch() const override { return fwd_.rebuilds(); }
  void apply_due_changes() override;
  size_t packets_in_flight() const { return pool_.live(); }
  size_t packets_held() const { return held_now_; }
  bool lossless() const { return lossless_; }
  /// The run's transport (EngineConfig::transport).
  const Transport& transport() const { return *transport_; }
  /// The transport flow slot `flow` runs (the run's, or the cross-site one).
  Transport& transport_of(uint32_t flow) const {
    return two_ && flows_.proto[flow] ? *cross_transport_ : *transport_;
  }
  /// Ports a packet from GPU src to GPU dst crosses on the current tables, following the
  /// first ECMP choice for `flow` (for tests and path inspection).
  std::vector<uint32_t> trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const override;

 private:
  enum Sub : uint32_t {
    kArrive,
    kTxDone,
    kPause,
    kResume,
    kWake,
    kFlowStart,
    kTopologyChange,
    kStartOne,
    kNumSub
  };
  /// The kind of kArrive (the first the engine hands out: the constructor checks it); the
  /// others follow in Sub's order.
  static constexpr uint32_t kind_base_ = 0;

  uint32_t first_port_for(uint32_t src_gpu, uint32_t dst_gpu, uint32_t hash) const {
    return fwd_.first_port(src_gpu, dst_gpu, hash);
  }
  RF_HOT uint32_t route(uint32_t node, const Packet& p) const;
  /// route() when the caller knows whether `node` is a packet switch.
  RF_HOT uint32_t route(uint32_t node, bool eps, const Packet& p) const;
  /// A port's peer and what arrivals need to know of it.
  /// (Its key is set by take_hop_keys(), once forwarding's tables are rebuilt.)
  void set_peer(Port& pt, uint32_t peer) {
    pt.peer = peer;
    pt.peer_eps = fwd_.nodes()[peer].kind == NodeKind::Eps;
    pt.hop_step = fwd_.hop_step(peer);
  }
  /// Every port's Port::peer_key from forwarding's tables as they are (after each rebuild:
  /// the keys of the tables before no longer hold).
  void take_hop_keys() {
    for (Port& pt : ports_) pt.peer_key = fwd_.hop_key(pt.peer);
  }
  /// What forwarding's adaptive and multi-path choices see of a port: its queue, the frame in
  /// service, a PAUSE. Read lazily, so routes that never look cost nothing.
  struct QueueLoad {
    const Network* net;
    Bytes queued(uint32_t port) const { return net->ports_[port].queued_bytes; }
    bool busy(uint32_t port) const { return net->ports_[port].busy_until > net->eng_.now(); }
    bool paused(uint32_t port) const { return net->ports_[port].paused; }
  };
  /// The general route (Forwarding::route_with) with this network's queue loads.
  uint32_t route_with(uint32_t node, uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq, uint32_t hops,
                      uint32_t flow, bool descending, uint32_t from, uint32_t in = kNone) const;
  // topology changes (circuits.cpp)
  void resolve_channel(uint32_t port);
  void topology_changed();
  void evacuate(uint32_t port);
  void rehome_flows();
  /// The topology change queued as `index` is due (TopologyChanges::apply).
  void topology_change_due(uint32_t index);
  // out-of-line versions of the inlined hot-path functions, for cold code in other files
  uint32_t route_cold(uint32_t node, const Packet& p) const;
  void enqueue_cold(uint32_t port, uint32_t pkt);
  uint32_t pop_queue_cold(Port& pt);
  RF_HOT void enqueue(uint32_t port, uint32_t pkt);
  /// enqueue(); `may_be_idle` false when the caller knows the port is not idle (busy,
  /// stopped or with a queue), which leaves out its straight-onto-the-wire branch.
  RF_HOT void enqueue(uint32_t port, uint32_t pkt, bool may_be_idle);
  void try_transmit(uint32_t port);
  /// try_transmit()'s body, inlined into the transmit-done handler (one call fewer per event).
  RF_HOT void transmit_next(uint32_t port);
  RF_HOT void schedule_tx_done(uint32_t port);
  RF_HOT void schedule_tx_done(uint32_t port, SimTime at);
  RF_HOT void schedule_nic_pull(uint32_t port);
  RF_HOT void transmit(uint32_t port, uint32_t pkt);
  /// transmit() for a frame whose ingress accounting is already settled.
  RF_HOT void put_on_wire(uint32_t port, uint32_t pkt);
  /// put_on_wire(); `found_idle`: the caller has just found the port idle (busy_until <= now)
  /// and run nothing since that could start a frame on it.
  RF_HOT void put_on_wire(uint32_t port, uint32_t pkt, bool found_idle);
  RF_HOT void arrive(uint32_t pkt);
  /// The engine's direct handlers (Engine::register_direct) of arrivals (arrive() inlined:
  /// one call per hop) and transmit-dones (try_transmit() inlined).
  static void on_arrive(void* net, SimTime time, uint32_t pkt, uint32_t kind);
  /// What Engine::run_hot() calls inline for the two per-frame kinds.
  struct Hot {
    Network* net;
    static constexpr uint32_t arrive_kind = kind_base_ + kArrive, tx_done_kind = kind_base_ + kTxDone;
    RF_HOT void arrive(uint32_t pkt);
    RF_HOT void tx_done(SimTime time, uint32_t port);
  };
  static void on_tx_done(void* net, SimTime time, uint32_t port, uint32_t kind);
  [[gnu::noinline]] void arrive_on_changed_channel(uint32_t pkt);
  [[gnu::noinline]] void send_pause(uint32_t port);
  /// arrive()'s queued path when the frame came over a lossy port or is queued for one.
  [[gnu::noinline]] void arrive_lossy(uint32_t pkt, uint32_t out, Bytes ingress);
  [[gnu::noinline]] void arrive_without_route(uint32_t pkt, uint32_t node);
  /// arrive()'s ends off the straight-through path: the frame reached its destination GPU
  /// (deliver: inlined, into the network's loop too, where it measured leaner); the frame
  /// waits in the queue of `port`, which is busy, stopped or queueing (enqueue_busy: out of
  /// line, which measured leaner in the loop as in the direct handler).
  RF_HOT void deliver(uint32_t pkt);
  [[gnu::noinline]] void enqueue_busy(uint32_t port, uint32_t pkt);
  /// arrive() for a frame the fast route does not place (route_with): out of line, with the
  /// call it makes. Then forward() as on the fast path.
  [[gnu::noinline]] void arrive_routed(uint32_t pkt);
  /// arrive() when the next-hop cache has no answer for the frame: filled, then forward(), or
  /// arrive_routed() when the fast route does not decide.
  [[gnu::noinline]] void arrive_missed(uint32_t pkt);
  /// The frame at the node behind its ingress port leaves by port `out` (kNone: no route).
  RF_HOT void forward(uint32_t pkt, uint32_t out);
  /// forward() once the ingress bytes are counted (peak, PAUSE).
  RF_HOT void forward_counted(uint32_t pkt, Port& in, uint32_t out, Bytes ingress);
  /// forward() when the frame's ingress bytes cross XOFF: the PAUSE, then as forward().
  [[gnu::noinline]] void forward_pausing(uint32_t pkt, uint32_t out, Bytes ingress);
  /// Straight through an idle port that is a NIC's (a relayed frame) or has no whole ps
  /// per byte: put_on_wire() and the NIC's next pull, out of line.
  [[gnu::noinline]] void straight_through_cold(uint32_t out, uint32_t pkt);
  /// Lossless: hold a frame that node has no route for, or, at a switch once no circuit is
  /// dark (no route will appear there without another change), send it again from its source.
  void hold_or_resend(uint32_t node, uint32_t pkt, bool fresh);
  /// Send a frame again from its source GPU along the current tables (as a RoCE NIC's
  /// go-back-N would after its loss), releasing the ingress it held; held at the source while
  /// the source's own path does not reach the destination.
  void resend_from_source(uint32_t pkt);
  /// The frame is now inside the node behind ingress port `in`: its peak and PAUSE
  /// accounting; returns the ingress bytes with it, for the caller to store if it stays.
  RF_HOT Bytes count_ingress(Port& in, const Packet& p);
  void start_flows();
  void start_one(uint32_t flow);
  uint32_t append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start, int64_t owner);
  void retire_if_quiet(uint32_t flow);
  /// A frame of flow f left the pool.
  RF_HOT void release_packet(uint32_t pkt) {
    const uint32_t f = pool_[pkt].flow;
    pool_.release(pkt);
    if (--flows_.packets[f] == 0 && flows_.end_ps[f] >= 0) [[unlikely]]
      maybe_retire(f);
  }
  void set_thresholds(uint32_t port);
  /// A frame of `size` leaves the node it arrived at through `in_port`: release its ingress
  /// (PFC) accounting and RESUME the upstream sender once the port is back at or below xon.
  RF_HOT void release_ingress(uint32_t in_port, Bytes size) {
    Port& in = ports_[in_port];
    in.ingress_bytes -= size;
    RF_DCHECK(in.ingress_bytes >= 0);
    if (in.pause_sent && in.ingress_bytes <= port_info_[in_port].xon) {
      in.pause_sent = false;
      eng_.schedule(eng_.now() + port_info_[in_port].prop_ps, in_port, kind_base_ + kResume);
    }
  }
  /// A frame queued into a lossy port leaves the ingress accounting of the port it came
  /// through now (as a frame put straight on a wire does), so the long queue never PAUSEs.
  void leave_ingress(Packet& p);
  Transport::EcnDefaults lossy_ecn_{};  ///< ECN thresholds of the lossy ports
  RF_HOT uint32_t pop_queue(Port& port);
  /// What a NIC pull gives: the frame (kNone: none is due) and the earliest slot left in
  /// the NIC's heap (kNever: it is empty), when the next pull is due at the soonest.
  struct NicPull {
    SimTime next_slot;
    uint32_t pkt;
  };
  NicPull pull_nic(uint32_t port);
  /// Take a flow's entries out of a port's NIC heap (the flow now starts elsewhere).
  void drop_nic_entries(uint32_t port, uint32_t flow);
  void drop(uint32_t pkt, uint64_t& reason);
  RF_HOT void mark_ecn(Port& pt, uint32_t port, Packet& p);

  engine::Engine& eng_;
  EngineConfig cfg_;
  bool lossless_ = true;
  Bytes mtu_ = 0, header_ = 0;
  double ecn_pmax_ = 0;
  engine::Rng rng_;
  /// Topology, channel states and tables: the ports below copy each channel's far end and
  /// state for the per-frame path; topology_changed() keeps the two in step.
  Forwarding fwd_;

  std::vector<Port> ports_;
  std::vector<PortInfo> port_info_;
  bool built_ = false;
  TopologyChanges changes_;  ///< link and plan queues, circuit log
  /// Lossless: frames a node could not route (e.g. while a circuit is dark), FIFO per node
  /// through Packet::next; they keep their ingress (PFC) accounting and are re-forwarded
  /// when the topology next changes.
  std::vector<uint32_t> held_head_, held_tail_;
  size_t held_now_ = 0;
  SimTime dark_until_ = -1;  ///< Forwarding::last_lit_at() as of the last topology change
  void hold(uint32_t node, uint32_t pkt, bool fresh = true);
  void release_held();
  std::vector<NicScheduler> nics_;
  /// Port -> index of its NIC scheduler in nics_, for ports with Port::nic (an array of its
  /// own: one indexed load on each NIC pull, where PortInfo's 96-byte records take two more).
  std::vector<uint32_t> port_nic_;
  uint64_t nic_seq_ = 0;

  FlowTable flows_;
  OwnerTotals owners_;
  bool record_ = true;
  FlowLog log_;
  std::vector<uint32_t> start_order_;  ///< flows by start time
  size_t next_start_ = 0;

  PacketPool pool_;
  static constexpr uint32_t kFramesPerGpu = 64;  ///< frames (and events) reserved per GPU
  std::unique_ptr<Transport> transport_;
  /// Sites with a transport of their own between them: the flows' transports and headers, and
  /// the cross-site transport (two_: it exists).
  FlowTransports ft_;
  bool two_ = false;
  std::unique_ptr<Transport> cross_transport_;
  /// The transport when it is RoCE for every flow (else null): the frame pull and the delivery
  /// call its per-frame members directly, inlined, instead of through the Transport interface.
  proto::Roce* roce_ = nullptr;
  FlowObserver* observer_ = nullptr;
  RunCounters counters_;
  /// The port whose NIC is inside Transport::next_packet (kNone otherwise): an activate()
  /// from there must not start a frame before the one being pulled is on the wire.
  uint32_t pulling_port_ = kNone;
};

}  // namespace rfabric::net
