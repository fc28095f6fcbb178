// flow_sim.hpp: one flow-level simulation = one Engine + one FlowNetwork + optionally the
// collective executor, the flow backend's counterpart of sim::Simulator (the object its
// Python binding holds; no Python in it).
#pragma once

#include <memory>

#include "coll/executor.hpp"
#include "engine/engine.hpp"
#include "flow/flow_network.hpp"

namespace rfabric::flow {

class FlowSimulator {
 public:
  FlowSimulator(const net::NetworkSpec& spec, const net::EngineConfig& cfg);

  engine::Engine& engine() { return engine_; }
  const engine::Engine& engine() const { return engine_; }
  FlowNetwork& network() { return *network_; }
  const FlowNetwork& network() const { return *network_; }

  /// Replay a workload of collective ops (once, before running).
  void load_workload(coll::Workload w, coll::ExecutorConfig cfg);
  const coll::Executor* executor() const { return executor_.get(); }
  coll::Executor* executor() { return executor_.get(); }

  /// As sim::Simulator::run.
  uint64_t run(engine::SimTime until, uint64_t max_events);
  bool idle() const { return engine_.idle(); }

 private:
  engine::Engine engine_;
  std::unique_ptr<FlowNetwork> network_;
  std::unique_ptr<coll::Executor> executor_;  // after network_: destroyed first
};

}  // namespace rfabric::flow
