// bind_flow.cpp: the flow-level backend's handle, rfabric._engine.FlowEngine. It answers the
// calls rfabric.Simulation makes of the packet Engine by the same names (building, flows,
// workloads, control-loop boundaries, circuits, failures, results), so Python picks one class
// or the other by `backend` and is otherwise the same. Packet-only results (packets, queues,
// drops, ECN, PFC) are not there; counters() says what the flow model counts instead.
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
using flow::FlowSimulator;

void bind_flow(py::module_& m) {
  py::class_<FlowSimulator> cls(m, "FlowEngine",
                                "One flow-level simulation: max-min fair rates over the same forwarding, "
                                "executor and event loop.");
  bind_flow_level(cls);
  cls.def(
         "counters",
         [](const FlowSimulator& s) {
           const auto& c = s.network().counters();
           py::dict d = flow_counters(s);
           d["recomputes"] = c.recomputes;
           d["rate_updates"] = c.rate_updates;
           d["subflows"] = c.subflows;
           d["max_component"] = c.max_component;
           d["component_subflows"] = c.component_subflows;
           d["blocked"] = c.blocked;
           d["reroutes"] = c.reroutes;
           d["quiet_ends"] = c.quiet_ends;
           d["handoffs"] = c.handoffs;
           d["finishes_cancelled"] = c.finishes_cancelled;
           d["stale_finishes"] = c.stale_finishes;
           d["active_subflows"] = s.network().active_subflows();
           d["blocked_now"] = s.network().blocked_subflows();
           return d;
         },
         "Run-wide counters of the flow model: max-min recomputations, subflow rate changes, the\n"
         "largest component recomputed, subflows without a path (now and ever), re-routes.")
      .def(
          "sending_flows",
          [](const FlowSimulator& s) {
            const auto rows = s.network().sending();
            py::dict d;
            d["flow_id"] =
                column<int64_t>(rows.size(), [&](size_t i) { return static_cast<int64_t>(rows[i].id); });
            d["src"] = column<uint32_t>(rows.size(), [&](size_t i) { return rows[i].src; });
            d["dst"] = column<uint32_t>(rows.size(), [&](size_t i) { return rows[i].dst; });
            d["hash"] = column<uint32_t>(rows.size(), [&](size_t i) { return rows[i].hash; });
            d["rate_bps"] = column<double>(rows.size(), [&](size_t i) { return rows[i].rate_bps; });
            return d;
          },
          "The messages sending now, one row each (a flow of n copies is n rows, ids id .. id + n - 1),\n"
          "sorted by flow_id: src, dst, ECMP hash and max-min rate (bit/s of wire bytes).")
      .def(
          "set_local_min", [](FlowSimulator& s, size_t n) { s.network().set_local_min(n); }, py::arg("n"),
          "Subflows sending from which a lossy run's max-min recomputation refills only the flows\n"
          "a change can reach before the whole component (default 4096; 0: always). For tests.")
      .def(
          "port_stats", [](const FlowSimulator& s) { return flow_port_columns(s.network()); },
          "Per-port columns (ports 2l and 2l+1 are link l's two directions): wire bytes carried\n"
          "(headers included) and time busy carrying them at the port's rate.");
}

}  // namespace rfabric::bindings
