// bind_fluid.cpp: the flow backend's dynamic mode, rfabric._engine.FluidEngine
// (flow/fluid_network.hpp): the calls FlowEngine answers, by the same names, so
// rfabric.Simulation picks it by EngineConfig.flow_model and is otherwise the same; plus
// what the dynamic model has that the max-min one has not (queues, PFC pauses, ECN marks,
// DCQCN rates, the bytes ledger).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>

#include "bindings/bind_flow_level.hpp"
#include "bindings/bind_simulator.hpp"
#include "bindings/ndarray.hpp"
#include "bindings/spec_dict.hpp"
#include "engine/check.hpp"
#include "flow/flow_sim.hpp"

namespace rfabric::bindings {

using engine::SimTime;
using flow::FluidSimulator;

void bind_fluid(py::module_& m) {
  py::class_<FluidSimulator> cls(m, "FluidEngine",
                                 "One flow-level simulation in the dynamic mode: a time-stepped fluid with "
                                 "queues, PFC and DCQCN over the same forwarding, executor and event loop.");
  bind_flow_level(cls);
  cls.def(
         "set_step", [](FluidSimulator& s, SimTime ps) { s.network().set_step(ps); }, py::arg("ps"),
         "The step (ps) while anything is transient (EngineConfig.flow_step). Before the run.")
      .def_property_readonly("step", [](const FluidSimulator& s) { return s.network().step(); })
      .def(
          "counters",
          [](const FluidSimulator& s) {
            const auto& c = s.network().counters();
            py::dict d = flow_counters(s);
            d["plans"] = c.plans;
            d["steps"] = c.steps;
            d["jumps"] = c.jumps;
            d["stepped_ps"] = c.stepped_ps;
            d["jumped_ps"] = s.network().jumped_ps();
            d["lane_hops"] = c.lane_hops;
            d["pauses"] = c.pauses;
            d["ecn_marks"] = c.ecn_marks;
            d["cnps"] = c.cnps;
            d["lanes"] = c.lanes;
            d["max_lanes"] = c.max_lanes;
            d["blocked"] = c.blocked;
            d["reroutes"] = c.reroutes;
            d["stalls"] = c.stalls;
            d["active_lanes"] = s.network().live_lanes();
            d["blocked_now"] = s.network().blocked_lanes();
            return d;
          },
          "Run-wide counters of the dynamic fluid: plans (steps while transient, jumps while quiescent)\n"
          "and the simulated time each covered, (lane, hop) pairs visited, PFC pauses, expected ECN\n"
          "marks, CNPs, lanes (one per path of a flow), re-routes, stalls (PFC deadlocks).")
      .def(
          "dcqcn_rates", [](const FluidSimulator& s) { return to_numpy(s.network().dcqcn_rates()); },
          "DCQCN's current rate per flow slot, bit/s (0 when not sending).")
      .def(
          "ledger",
          [](const FluidSimulator& s) {
            auto l = s.network().ledger();
            py::dict d;
            d["wire"] = to_numpy(std::move(l.wire));
            d["backlog"] = to_numpy(std::move(l.backlog));
            d["queued"] = to_numpy(std::move(l.queued));
            d["delivered"] = to_numpy(std::move(l.delivered));
            return d;
          },
          "Per flow slot alive, as of the last step: wire bytes, bytes still at the source, queued in\n"
          "the fabric and delivered (they sum to the wire bytes).")
      .def(
          "port_stats",
          [](const FluidSimulator& s) {
            const auto& net = s.network();
            const size_t n = net.num_ports();
            const auto queued = net.port_queued();
            py::dict d = flow_port_columns(net);
            d["pfc_pauses_sent"] =
                column<int64_t>(n, [&](size_t i) { return static_cast<int64_t>(net.port_pauses()[i]); });
            d["ecn_marks"] = column<int64_t>(
                n, [&](size_t i) { return static_cast<int64_t>(std::llround(net.port_marks()[i])); });
            d["max_queue_bytes"] = column<int64_t>(
                n, [&](size_t i) { return static_cast<int64_t>(std::llround(net.port_max_queued()[i])); });
            d["queued_bytes"] = column<double>(n, [&](size_t i) { return queued[i]; });
            return d;
          },
          "Per-port columns: wire bytes carried, time busy, PFC pauses of the port (by its peer, as the\n"
          "packet engine counts them), expected ECN marks (rounded), bytes queued at most and now.");
}

}  // namespace rfabric::bindings
