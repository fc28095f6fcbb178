#include "packet/simulator.hpp"

#include "engine/check.hpp"
#include "packet/transports/registry.hpp"

namespace rfabric::sim {

Simulator::Simulator(const net::NetworkSpec& spec, const net::EngineConfig& cfg)
    : engine_(cfg.seed),
      network_(std::make_unique<net::Network>(
          engine_, spec, cfg, proto::find_transport(cfg.transport),
          spec.cross_site_transport.empty() ? nullptr : proto::find_transport(spec.cross_site_transport))) {}

void Simulator::load_workload(coll::Workload w, coll::ExecutorConfig cfg) {
  RF_CHECK(executor_ == nullptr, "a workload was already loaded");
  RF_CHECK(network_->flows().size() == 0, "a workload cannot be combined with plain flows");
  executor_ = std::make_unique<coll::Executor>(*network_, std::move(w), cfg);
}

void Simulator::enable_sampling(engine::SimTime period_ps) {
  RF_CHECK(sampler_ == nullptr, "sampling is already on");
  sampler_ = std::make_unique<record::Sampler>(engine_, *network_, period_ps);
}

uint64_t Simulator::run(engine::SimTime until, uint64_t max_events) {
  // The network's loop (Network::run: Engine::run_hot with its arrivals and transmit-dones
  // compiled in; every other kind one indirect call). With a controller the executor stops
  // the engine at boundaries: a loop of its own (the network's kinds through their direct
  // handlers, Engine::register_direct), so the plain loop keeps no per-event stop test.
  if (sampler_ != nullptr) sampler_->arm();
  if (executor_ != nullptr && executor_->stops()) return engine_.run_stoppable(until, max_events);
  return network_->run(until, max_events);
}

}  // namespace rfabric::sim
