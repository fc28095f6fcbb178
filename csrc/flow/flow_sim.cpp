#include "flow/flow_sim.hpp"

#include "engine/check.hpp"
#include "fabric/transport_traits.hpp"

namespace rfabric::flow {

namespace {
FlowNetwork* make_network(engine::Engine& eng, const net::NetworkSpec& spec, const net::EngineConfig& cfg) {
  const net::TransportTraits& t = net::transport_traits(cfg.transport);
  return new FlowNetwork(eng, spec, cfg, t.header_bytes, t.lossless);
}
}  // namespace

FlowSimulator::FlowSimulator(const net::NetworkSpec& spec, const net::EngineConfig& cfg)
    : engine_(cfg.seed), network_(make_network(engine_, spec, cfg)) {}

void FlowSimulator::load_workload(coll::Workload w, coll::ExecutorConfig cfg) {
  RF_CHECK(executor_ == nullptr, "a workload was already loaded");
  RF_CHECK(network_->flows().size() == 0, "a workload cannot be combined with plain flows");
  executor_ = std::make_unique<coll::Executor>(*network_, std::move(w), cfg);
}

uint64_t FlowSimulator::run(engine::SimTime until, uint64_t max_events) {
  if (executor_ != nullptr && executor_->stops()) return engine_.run_stoppable(until, max_events);
  return engine_.run(until, max_events);
}

}  // namespace rfabric::flow
