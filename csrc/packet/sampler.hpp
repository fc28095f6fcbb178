// sampler.hpp: optional periodic samples of the packet network: every `period` ps, the queue
// depth of each port whose queue is not empty or that sent since the last sample, and the
// payload rate of each flow that delivered bytes since then. Columnar, taken out in batches.
// INVARIANT: sample times are exact multiples of the period. The sampler is a handler of its
// own event kind, created only when sampling is on: the per-frame path has no branch for it.
// It reads the network's public tables and knows nothing about transports.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine.hpp"
#include "packet/network.hpp"

namespace rfabric::record {

using engine::Bytes;
using engine::SimTime;

/// One row per (sample time, port) with a queue or traffic in the window.
struct QueueSamples {
  std::vector<SimTime> time_ps;
  std::vector<uint32_t> port;
  std::vector<Bytes> queue_bytes;  ///< egress queue at the sample (excludes the frame in service)
  std::vector<Bytes> tx_bytes;     ///< wire bytes of frames it started in the window ending at the sample
};

/// One row per (sample time, flow) that delivered payload in the window.
struct RateSamples {
  std::vector<SimTime> time_ps;
  std::vector<int64_t> flow_id;
  std::vector<Bytes> delivered_bytes;  ///< payload first delivered in the window
};

class Sampler final : public engine::Handler {
 public:
  /// Start sampling `net` every `period_ps` (> 0), from the next multiple of it after now.
  Sampler(engine::Engine& eng, const net::Network& net, SimTime period_ps);
  void on_event(const engine::Event& ev) override;
  /// Before a run: sample again from the next multiple of the period if the sampler stopped
  /// when the engine went idle and events have been scheduled since (no-op otherwise).
  void arm();
  SimTime period_ps() const { return period_; }
  /// Move out the rows sampled so far.
  QueueSamples take_queues() { return std::exchange(queues_, QueueSamples{}); }
  RateSamples take_rates() { return std::exchange(rates_, RateSamples{}); }

 private:
  engine::Engine& eng_;
  const net::Network& net_;
  SimTime period_;
  uint32_t kind_;
  bool pending_ = false;               ///< a sample event is queued
  std::vector<Bytes> last_tx_;         ///< per port: tx_bytes at the last sample
  std::vector<uint64_t> last_id_;      ///< per flow slot: the flow it held at the last sample
  std::vector<Bytes> last_delivered_;  ///< per flow slot: its delivered bytes then
  QueueSamples queues_;
  RateSamples rates_;
};

}  // namespace rfabric::record
