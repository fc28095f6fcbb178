// flow_sim.hpp: one flow-level simulation = one Engine + one flow-level network (FlowNetwork:
// max-min; FluidNetwork: the dynamic fluid) + optionally the collective executor, the flow
// backend's counterpart of sim::Simulator (the object its Python binding holds; no Python in it).
#pragma once

#include <memory>
#include <utility>

#include "coll/executor.hpp"
#include "engine/check.hpp"
#include "engine/engine.hpp"
#include "fabric/transport_traits.hpp"
#include "flow/flow_network.hpp"
#include "flow/fluid_network.hpp"

namespace rfabric::flow {

template <class Net>
class FlowLevelSimulator {
 public:
  FlowLevelSimulator(const net::NetworkSpec& spec, const net::EngineConfig& cfg)
      : engine_(cfg.seed), network_(make_network(engine_, spec, cfg)) {}

  engine::Engine& engine() { return engine_; }
  const engine::Engine& engine() const { return engine_; }
  Net& network() { return *network_; }
  const Net& network() const { return *network_; }

  /// Replay a workload of collective ops (once, before running).
  void load_workload(coll::Workload w, coll::ExecutorConfig cfg) {
    RF_CHECK(executor_ == nullptr, "a workload was already loaded");
    RF_CHECK(network_->flows_created() == 0, "a workload cannot be combined with plain flows");
    executor_ = std::make_unique<coll::Executor>(*network_, std::move(w), cfg);
  }
  const coll::Executor* executor() const { return executor_.get(); }
  coll::Executor* executor() { return executor_.get(); }

  /// As sim::Simulator::run.
  uint64_t run(engine::SimTime until, uint64_t max_events) {
    if (executor_ != nullptr && executor_->stops()) return engine_.run_stoppable(until, max_events);
    return engine_.run(until, max_events);
  }
  bool idle() const { return engine_.idle(); }

 private:
  /// The network with its transport's header bytes and lossless default.
  static std::unique_ptr<Net> make_network(engine::Engine& eng, const net::NetworkSpec& spec,
                                           const net::EngineConfig& cfg) {
    const net::TransportTraits& t = net::transport_traits(cfg.transport);
    return std::make_unique<Net>(eng, spec, cfg, t.header_bytes, t.lossless);
  }

  engine::Engine engine_;
  std::unique_ptr<Net> network_;
  std::unique_ptr<coll::Executor> executor_;  // after network_: destroyed first
};

using FlowSimulator = FlowLevelSimulator<FlowNetwork>;
using FluidSimulator = FlowLevelSimulator<FluidNetwork>;

}  // namespace rfabric::flow
