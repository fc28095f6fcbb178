// transport.hpp: the interface between the network and an end-host transport protocol.
// The network owns NIC scheduling and forwarding; a transport decides what each flow sends
// next, when it may send again, and what to do with packets that reach their destination.
// Concrete transports live in packet/transports/ (fabric/transport_traits.hpp lists them).
#pragma once

#include <cstdint>

#include "engine/engine.hpp"
#include "fabric/spec.hpp"
#include "packet/packet.hpp"

namespace rfabric::net {

class Network;

class Transport : public engine::Handler {
 public:
  explicit Transport(Network& net) : net_(net) {}
  ~Transport() override = default;

  /// Header bytes this transport adds to every data frame.
  virtual Bytes header_bytes() const = 0;
  /// Whether the fabric should run lossless (PFC) by default under this transport.
  virtual bool lossless() const = 0;
  /// The ECN marking this transport's congestion control is tuned for, used where the
  /// config leaves it to the transport (-1): thresholds as queueing delay at each port's
  /// rate, so one setting fits every link speed.
  struct EcnDefaults {
    SimTime kmin_ps, kmax_ps;
    double pmax;
  };
  virtual EcnDefaults ecn_defaults() const = 0;
  /// Flows 0..num_flows-1 exist (called again as flows are created during a run):
  /// grow per-flow state, keeping what is there.
  virtual void prepare(uint32_t num_flows) = 0;
  /// No timer event of the flow is pending (a flow retires, and its slot is reused, only then).
  /// A transport whose timer fires and leaves none pending calls Network::maybe_retire().
  virtual bool quiet(uint32_t /*flow*/) const { return true; }
  /// The flow retired: reset its state to what prepare() gives a new slot (and free what it
  /// holds), as a later flow will reuse the slot.
  virtual void recycle(uint32_t flow) = 0;
  /// The flow starts now; the transport calls Network::activate() when it may send.
  virtual void start_flow(uint32_t flow) = 0;
  /// The NIC can transmit: fill `p` (already holding flow and dst) with the flow's next data
  /// frame, size_bytes its payload (at most mss_) plus header_, and `e` if the protocol uses
  /// it. Returns the earliest time the flow may send again, or kNever when it must wait for
  /// an event (ACK, timer) that will call Network::activate().
  virtual SimTime next_packet(uint32_t flow, Packet& p, PacketEnds& e) = 0;
  /// A packet of this transport reached its destination host. The network frees it after.
  /// (`e` is read only by protocols that use it: it is another cache line.)
  virtual void receive(const Packet& p, const PacketEnds& e) = 0;
  /// The flow's current sending rate in bit/s if the transport is rate-based (else -1).
  virtual double flow_rate_bps(uint32_t /*flow*/) const { return -1; }
  /// This transport runs the flows across a long link (NetworkSpec::cross_site_transport):
  /// they time out no sooner than `min_rto` (NetworkSpec::cross_site_min_rto_ps, > 0) and take
  /// the transport's settings for a large bandwidth-delay product. False if the transport has
  /// none (no retransmission timer).
  virtual bool set_long_link(SimTime /*min_rto*/) { return false; }
  /// Timers: events of kinds this transport registered.
  void on_event(const engine::Event&) override {}
  /// The network frames this transport's flows with `header` bytes of header per data frame
  /// (its own, or EngineConfig::header_bytes) in frames of at most `mtu` bytes.
  void set_framing(Bytes header, Bytes mtu) {
    header_ = header;
    mss_ = mtu - header;
  }

 protected:
  /// Message bytes a frame of this transport carries (Network::payload_of, without asking
  /// which transport the frame's flow runs).
  Bytes payload_of(const Packet& p) const { return p.control ? 0 : Bytes{p.size_bytes} - header_; }

  Network& net_;
  Bytes header_ = 0;  ///< header bytes per data frame (set_framing)
  Bytes mss_ = 0;     ///< payload bytes of a full data frame (set_framing)
};

}  // namespace rfabric::net
