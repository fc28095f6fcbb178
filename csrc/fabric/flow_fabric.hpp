// flow_fabric.hpp: what the collective executor needs of a network, whichever backend moves the
// bytes: the packet Network (packet/network.hpp) or the flow-level model (flow/flow_network.hpp).
// Flows are created with create_flow and reported back through a FlowObserver; paths, rates
// and latencies come from the same forwarding layer in both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine.hpp"
#include "fabric/spec.hpp"

namespace rfabric::net {

/// The checks both backends make of each flow they create (flow `id`, on a fabric of `gpus`
/// GPUs, at time `now`): a SpecError names the flow and the value.
inline void check_flow(uint64_t id, uint32_t gpus, uint32_t src, uint32_t dst, Bytes size,
                       engine::SimTime start, engine::SimTime now) {
  RF_CHECK(src < gpus, "flow ", id, ": src ", src, " is not a GPU (the fabric has ", gpus, ")");
  RF_CHECK(dst < gpus, "flow ", id, ": dst ", dst, " is not a GPU (the fabric has ", gpus, ")");
  RF_CHECK(src != dst, "flow ", id, ": src and dst are both GPU ", src);
  RF_CHECK(size >= 0, "flow ", id, ": negative size_bytes ", size);
  RF_CHECK(start >= now, "flow ", id, ": start_ps ", start, " is in the past");
}

/// The checks both backends make of a flow set given to add_flows(), once and before any flow
/// exists: one flow set per run, columns of one length, every start within the horizon
/// (engine::kHorizon; a SpecError names the first flow past it).
inline void check_flow_set(size_t existing, const std::vector<uint32_t>& src,
                           const std::vector<uint32_t>& dst, const std::vector<Bytes>& size,
                           const std::vector<engine::SimTime>& start) {
  RF_CHECK(existing == 0, "flows were already added");
  const size_t f = src.size();
  RF_CHECK(dst.size() == f && size.size() == f && start.size() == f, "flow arrays have different lengths");
  for (size_t i = 0; i < f; ++i)
    RF_CHECK(start[i] <= engine::kHorizon, "flow ", i, ": start_ps ", start[i],
             " is past the engine's horizon of ", engine::kHorizon, " ps (2^62 - 1)");
}

/// Told when a flow's last byte reaches its destination (the collective executor).
class FlowObserver {
 public:
  virtual ~FlowObserver() = default;
  virtual void on_flow_done(uint32_t flow) = 0;
  /// The flow's last byte left its source NIC (the NIC may start the connection's next message).
  virtual void on_flow_sent(uint32_t /*flow*/) {}
};

class FlowFabric {
 public:
  virtual ~FlowFabric() = default;
  virtual engine::Engine& engine() = 0;
  virtual SimTime now() const = 0;
  virtual uint32_t num_gpus() const = 0;
  /// Server of a GPU (from the spec), for locality-aware collectives.
  virtual int32_t gpu_server(uint32_t gpu) const = 0;
  /// Create one flow during a run, starting at `start_ps` (>= now); returns its id. Flows with
  /// the same nonzero `ecmp_key` (one connection) hash alike, so keep one ECMP path. `owner`
  /// (>= 0, e.g. the op) names what the flow's totals count toward. The packet network reuses
  /// an id once its flow has retired (after on_flow_done), and so does the flow model.
  /// `copies` > 1 (only where merges_copies()): one flow standing for that many messages of
  /// `size` bytes each on the same paths, moving as they would side by side.
  virtual uint32_t create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps,
                               uint64_t ecmp_key = 0, int64_t owner = -1, uint32_t copies = 1) = 0;
  /// Whether one flow can stand for several identical ones (create_flow's `copies`): the flow
  /// model, where flows on the same paths share them alike; not packets, which interleave.
  virtual bool merges_copies() const { return false; }
  /// Whether connections `key_a` and `key_b` (create_flow's ecmp_key) from src to dst take
  /// the same paths now (only asked where merges_copies()).
  virtual bool same_route(uint32_t /*src*/, uint32_t /*dst*/, uint64_t /*key_a*/, uint64_t /*key_b*/) {
    return false;
  }
  virtual void set_observer(FlowObserver* observer) = 0;
  /// Payload bytes per full frame (MTU minus headers).
  virtual Bytes payload_per_packet() const = 0;
  /// Latency (ps) and slowest rate (bit/s) of the current path from GPU src to GPU dst.
  virtual std::pair<SimTime, BitsPerSec> path_cost(uint32_t src, uint32_t dst) const = 0;
  /// Ports (link directions) a frame from src to dst crosses for ECMP hash `flow_hash`.
  virtual std::vector<uint32_t> trace_path(uint32_t src, uint32_t dst, uint32_t flow_hash) const = 0;
  /// Current rate of a port (bit/s).
  virtual BitsPerSec port_rate_bps(uint32_t port) const = 0;
  /// Changes with every rebuild of the routes (a circuit plan, a circuit lit, a failure or
  /// repair): what path_cost, trace_path and port_rate_bps said before may no longer hold.
  virtual uint64_t routing_epoch() const = 0;
  /// Apply now every topology change due at this instant whose event has not come yet (a
  /// circuit plan, a circuit lit, a failure or repair queued after the caller's event): what
  /// starts at t, a flow or the tuner's choice for an op, sees every change at t, whichever
  /// was scheduled first (TopologyChanges::apply_due). Cheap when nothing is due.
  virtual void apply_due_changes() = 0;
  /// Ideal completion time (ps) of a lone message of `size` payload bytes from src to dst
  /// on the idle path of ECMP hash `flow_hash` (Forwarding::lone_packet_fct_ps): the denominator of
  /// a flow's slowdown.
  virtual SimTime ideal_fct_ps(uint32_t src, uint32_t dst, uint32_t flow_hash, Bytes size) const = 0;
  /// Size of the flow table: ids are 0 .. num_flows() - 1 (packet network: slots, reused).
  virtual size_t num_flows() const = 0;
};

/// ideal_fct_ps of each result row (src, dst, ECMP hash, payload bytes).
inline std::vector<SimTime> ideal_fct_column(const FlowFabric& net, const std::vector<uint32_t>& src,
                                             const std::vector<uint32_t>& dst,
                                             const std::vector<uint32_t>& hash,
                                             const std::vector<Bytes>& size) {
  std::vector<SimTime> out(src.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = net.ideal_fct_ps(src[i], dst[i], hash[i], size[i]);
  return out;
}

}  // namespace rfabric::net
