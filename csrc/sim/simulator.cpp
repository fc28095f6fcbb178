#include "sim/simulator.hpp"

#include "proto/registry.hpp"

namespace rfabric::sim {

Simulator::Simulator(const net::NetworkSpec& spec, const net::EngineConfig& cfg)
    : engine_(cfg.seed),
      network_(std::make_unique<net::Network>(engine_, spec, cfg, proto::find_transport(cfg.transport))) {}

uint64_t Simulator::run(engine::SimTime until, uint64_t max_events) {
  return engine_.run(until, max_events);
}

}  // namespace rfabric::sim
