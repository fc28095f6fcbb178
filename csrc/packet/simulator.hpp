// simulator.hpp: one simulation = one Engine + one Network + the transport named in the
// config. This is the object the Python binding holds; it has no Python in it.
#pragma once

#include <memory>

#include "coll/executor.hpp"
#include "engine/engine.hpp"
#include "packet/network.hpp"
#include "packet/sampler.hpp"

namespace rfabric::sim {

class Simulator {
 public:
  Simulator(const net::NetworkSpec& spec, const net::EngineConfig& cfg);

  engine::Engine& engine() { return engine_; }
  const engine::Engine& engine() const { return engine_; }
  net::Network& network() { return *network_; }
  const net::Network& network() const { return *network_; }

  /// Replay a workload of collective ops (once, before running).
  void load_workload(coll::Workload w, coll::ExecutorConfig cfg);
  const coll::Executor* executor() const { return executor_.get(); }
  coll::Executor* executor() { return executor_.get(); }

  /// Sample queues and flow rates every `period_ps` from now on (once; packet/sampler.hpp).
  void enable_sampling(engine::SimTime period_ps);
  record::Sampler* sampler() { return sampler_.get(); }
  const record::Sampler* sampler() const { return sampler_.get(); }

  /// Run until time `until` (ps), the queue empties, or `max_events` (0 = no limit); with a
  /// workload loaded with boundaries, also until the next control-loop boundary.
  uint64_t run(engine::SimTime until, uint64_t max_events);
  /// True when no event is pending (every flow has finished or can make no progress).
  bool idle() const { return engine_.idle(); }

 private:
  engine::Engine engine_;
  std::unique_ptr<net::Network> network_;
  std::unique_ptr<coll::Executor> executor_;  // after network_: destroyed first
  std::unique_ptr<record::Sampler> sampler_;  // off unless enable_sampling()
};

}  // namespace rfabric::sim
