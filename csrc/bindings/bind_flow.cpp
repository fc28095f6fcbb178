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

#include "bindings/ndarray.hpp"
#include "bindings/spec_dict.hpp"
#include "engine/check.hpp"
#include "flow/flow_sim.hpp"

namespace rfabric::bindings {

using engine::SimTime;
using flow::FlowSimulator;

void bind_flow(py::module_& m) {
  py::class_<FlowSimulator>(m, "FlowEngine",
                            "One flow-level simulation: max-min fair rates over the same forwarding, "
                            "executor and event loop.")
      .def(py::init([](const py::dict& spec, const py::dict& config) {
             return std::make_unique<FlowSimulator>(spec_from_dict(spec), config_from_dict(config));
           }),
           py::arg("spec"), py::arg("config"),
           "Build from a dict of spec arrays (rfabric.spec.NetworkSpec.arrays()) and a config dict.")
      .def(
          "add_flows",
          [](FlowSimulator& s, py::handle src, py::handle dst, py::handle size, py::handle start) {
            RF_CHECK(s.executor() == nullptr, "plain flows cannot be combined with a loaded workload");
            s.network().add_flows(from_numpy<uint32_t>(src, "src"), from_numpy<uint32_t>(dst, "dst"),
                                  from_numpy<int64_t>(size, "size_bytes"), from_numpy<int64_t>(start, "start_ps"));
          },
          py::arg("src"), py::arg("dst"), py::arg("size_bytes"), py::arg("start_ps"),
          "Add flows: GPU ids, sizes in bytes, start times in ps. Once, before running.")
      .def(
          "schedule_plan",
          [](FlowSimulator& s, SimTime at_ps, py::handle ocs, py::handle a, py::handle b, SimTime dark_ps) {
            s.network().schedule_plan(at_ps, from_numpy<uint32_t>(ocs, "ocs"), from_numpy<uint32_t>(a, "a"),
                                      from_numpy<uint32_t>(b, "b"), dark_ps);
          },
          py::arg("at_ps"), py::arg("ocs"), py::arg("a"), py::arg("b"), py::arg("dark_ps"),
          "Replace the circuit plan at at_ps; new circuits are dark for dark_ps.")
      .def(
          "apply_plan",
          [](FlowSimulator& s, py::handle ocs, py::handle a, py::handle b, SimTime dark_ps) {
            s.network().apply_plan_now(from_numpy<uint32_t>(ocs, "ocs"), from_numpy<uint32_t>(a, "a"),
                                       from_numpy<uint32_t>(b, "b"), dark_ps);
          },
          py::arg("ocs"), py::arg("a"), py::arg("b"), py::arg("dark_ps"),
          "Replace the circuit plan now; new circuits are dark for dark_ps. A bad plan raises and changes\n"
          "nothing.")
      .def(
          "circuit_log",
          [](const FlowSimulator& s) {
            const auto& log = s.network().circuit_log();
            const size_t n = log.size();
            py::dict d;
            d["time_ps"] = column<int64_t>(n, [&](size_t i) { return log[i].time_ps; });
            d["plan_id"] = column<uint32_t>(n, [&](size_t i) { return log[i].plan_id; });
            d["added"] = column<uint32_t>(n, [&](size_t i) { return log[i].added; });
            d["removed"] = column<uint32_t>(n, [&](size_t i) { return log[i].removed; });
            d["dark_ps"] = column<int64_t>(n, [&](size_t i) { return log[i].dark_ps; });
            return d;
          },
          "Applied circuit changes: time, plan id, circuits added and removed, dark time.")
      .def(
          "current_circuits", [](const FlowSimulator& s) { return to_numpy(s.network().current_circuits()); },
          "Circuits in place now as a flat array of (device, link a, link b) triples.")
      .def(
          "current_circuits_lit_at",
          [](const FlowSimulator& s) { return to_numpy(s.network().current_circuits_lit_at()); },
          "When each circuit of current_circuits() carries light (ps; <= now: lit).")
      .def(
          "load_workload",
          [](FlowSimulator& s, const py::dict& a, int channels, int64_t chunk_bytes, py::object rings,
             const std::string& boundaries, bool period_ends, int64_t ring_slices) {
            if (ring_slices < 0 || ring_slices > (int64_t{1} << 30))
              throw SpecError("flow_ring_slices must be in [0, 2^30], got " + std::to_string(ring_slices));
            coll::ExecutorConfig cfg = executor_config(channels, chunk_bytes, rings, boundaries, period_ends);
            cfg.ring_slices = static_cast<uint32_t>(ring_slices);
            s.load_workload(workload_from_dict(a), std::move(cfg));
          },
          py::arg("arrays"), py::arg("channels") = 8, py::arg("chunk_bytes") = 512 * 1024,
          py::arg("rings") = py::none(), py::arg("boundaries") = "none", py::arg("period_ends") = false,
          py::arg("ring_slices") = 0,
          "Load a collective-op workload to replay (as Engine.load_workload). `ring_slices`: the most\n"
          "slices a ring step is cut into (0: slices of chunk_bytes, as the packet engine).")
      .def(
          "boundary",
          [](const FlowSimulator& s) {
            RF_CHECK(s.executor() != nullptr, "no workload loaded");
            return boundary_dict(*s.executor());
          },
          "The pending control-loop boundary (as Engine.boundary).")
      .def(
          "resume",
          [](FlowSimulator& s) {
            RF_CHECK(s.executor() != nullptr, "no workload loaded");
            s.executor()->resume();
          },
          "Clear the pending boundary so that run() goes on.")
      .def(
          "active_periods",
          [](const FlowSimulator& s) {
            RF_CHECK(s.executor() != nullptr, "no workload loaded");
            return to_numpy(s.executor()->active_periods());
          },
          "Periods (sorted) with an op running, or ready and waiting out its compute gap.")
      .def(
          "op_flows",
          [](FlowSimulator& s, py::handle ops_in) {
            RF_CHECK(s.executor() != nullptr, "no workload loaded");
            return op_flows_dict(*s.executor(), ops_in);
          },
          py::arg("ops"), "Bytes each op would send per directed GPU pair (as Engine.op_flows).")
      .def(
          "op_log",
          [](const FlowSimulator& s) {
            py::dict d;
            const coll::Executor* x = s.executor();
            if (x == nullptr) return d;
            d["start_ps"] = to_numpy(std::vector<int64_t>(x->op_start()));
            d["end_ps"] = to_numpy(std::vector<int64_t>(x->op_end()));
            return d;
          },
          "Per-op start and end times (ps; -1 if not reached), in workload row order.")
      .def(
          "set_link_state",
          [](FlowSimulator& s, uint32_t link, SimTime time_ps, bool up) {
            s.network().schedule_link_state(link, time_ps, up);
          },
          py::arg("link"), py::arg("time_ps"), py::arg("up"),
          "Take link `link` (row of the link table) down or up at time_ps.")
      .def("run", &FlowSimulator::run, py::arg("until") = engine::kNever, py::arg("max_events") = 0,
           py::call_guard<py::gil_scoped_release>(),
           "Run events up to time `until` (ps) or `max_events` events; returns events processed.")
      .def_property_readonly(
          "now", [](const FlowSimulator& s) { return s.engine().now(); }, "Simulated time, ps.")
      .def(
          "peek", [](FlowSimulator& s) { return s.engine().peek(); }, "Time of the next event (ps), or int64 max.")
      .def_property_readonly("events_processed",
                             [](const FlowSimulator& s) { return s.engine().events_processed(); })
      .def_property_readonly("pending", [](const FlowSimulator& s) { return s.engine().pending(); })
      .def_property_readonly("idle", &FlowSimulator::idle)
      .def_property_readonly("flows_done",
                             [](const FlowSimulator& s) { return s.network().counters().flows_done; })
      .def_property_readonly("ops_done",
                             [](const FlowSimulator& s) { return s.executor() ? s.executor()->ops_done() : 0; })
      .def_property_readonly("num_gpus", [](const FlowSimulator& s) { return s.network().num_gpus(); })
      .def_property_readonly("num_links", [](const FlowSimulator& s) { return s.network().num_links(); })
      .def_property_readonly("lossless", [](const FlowSimulator& s) { return s.network().lossless(); })
      .def_property_readonly("header_bytes",
                             [](const FlowSimulator& s) { return s.network().header_bytes(); })
      .def(
          "counters",
          [](const FlowSimulator& s) {
            const auto& c = s.network().counters();
            py::dict d;
            d["events"] = s.engine().events_processed();
            d["flows"] = s.network().flows_created();
            d["flows_done"] = c.flows_done;
            d["last_flow_end_ps"] = c.last_flow_end_ps;
            d["peak_live_flows"] = s.network().peak_live_flows();
            d["recomputes"] = c.recomputes;
            d["rate_updates"] = c.rate_updates;
            d["subflows"] = c.subflows;
            d["max_component"] = c.max_component;
            d["component_subflows"] = c.component_subflows;
            d["blocked"] = c.blocked;
            d["reroutes"] = c.reroutes;
            d["quiet_ends"] = c.quiet_ends;
            d["active_subflows"] = s.network().active_subflows();
            d["blocked_now"] = s.network().blocked_subflows();
            return d;
          },
          "Run-wide counters of the flow model: max-min recomputations, subflow rate changes, the\n"
          "largest component recomputed, subflows without a path (now and ever), re-routes.")
      .def(
          "flow_log",
          [](const FlowSimulator& s) {
            auto f = s.network().flow_rows();
            py::dict d;
            d["ideal_fct_ps"] =
                to_numpy(net::ideal_fct_column(s.network(), f.src, f.dst, f.hash, f.size_bytes));
            d["flow_id"] = to_numpy(std::move(f.id));
            d["op"] = to_numpy(std::move(f.owner));  // workload row of the op that made it, -1: none
            d["src"] = to_numpy(std::move(f.src));
            d["dst"] = to_numpy(std::move(f.dst));
            d["size_bytes"] = to_numpy(std::move(f.size_bytes));
            d["start_ps"] = to_numpy(std::move(f.start_ps));
            d["end_ps"] = to_numpy(std::move(f.end_ps));
            d["sent_ps"] = to_numpy(std::move(f.sent_ps));
            d["sent_bytes"] = to_numpy(std::move(f.sent_bytes));
            d["delivered_bytes"] = to_numpy(std::move(f.delivered_bytes));
            return d;
          },
          "Per-flow columns (numpy arrays), one row per flow recorded (record_flows), then one per\n"
          "flow alive now, sorted by flow_id: sent_bytes (payload that left the source by now),\n"
          "delivered_bytes (all of it once the last byte arrived, else 0: the flow model delivers\n"
          "a flow whole, its path delay after it is sent), sent_ps (when the last byte left),\n"
          "ideal_fct_ps (the flow model's time for it alone on its path: Forwarding::lone_fct_ps).")
      .def_property(
          "record_flows", [](const FlowSimulator& s) { return s.network().record_flows(); },
          [](FlowSimulator& s, bool on) { s.network().set_record_flows(on); },
          "Keep a row per flow as it retires (default on); off, only per-op totals (op_flow_stats).")
      .def(
          "op_flow_stats",
          [](const FlowSimulator& s) {
            const coll::Executor* x = s.executor();
            const size_t n = x ? x->op_start().size() : 0;
            const auto& st = s.network().owner_stats();
            py::dict d;
            d["flows"] = column<int64_t>(n, [&](size_t i) { return i < st.size() ? st[i].flows : int64_t{0}; });
            d["delivered_bytes"] =
                column<int64_t>(n, [&](size_t i) { return i < st.size() ? st[i].delivered_bytes : int64_t{0}; });
            d["max_fct_ps"] = column<int64_t>(n, [&](size_t i) { return i < st.size() ? st[i].max_fct_ps : -1; });
            return d;
          },
          "Per op (workload rows): totals of its flows that finished so far: flows, delivered payload\n"
          "bytes and the longest flow (max_fct_ps, -1: none).")
      .def(
          "delivered_bytes",
          [](const FlowSimulator& s) { return to_numpy(s.network().sent_bytes()); },
          "Payload bytes per flow slot that have left the source by now (the fluid's progress; for a\n"
          "flow set, whose flows keep their slots, per flow).")
      .def(
          "flow_rates", [](const FlowSimulator& s) { return to_numpy(s.network().flow_rates()); },
          "Current max-min rate per flow, bit/s (0 when not sending).")
      .def(
          "port_stats",
          [](const FlowSimulator& s) {
            const auto& net = s.network();
            const auto& fwd = net.forwarding();
            const size_t n = net.num_ports();
            const auto bytes = net.port_bytes();
            const auto busy = net.port_busy_ps();
            py::dict d;
            d["port_id"] = column<uint32_t>(n, [](size_t i) { return i; });
            d["link_id"] = column<uint32_t>(n, [&](size_t i) { return fwd.channel(i).link; });
            d["src"] = column<uint32_t>(n, [&](size_t i) { return fwd.channel(i).node; });
            d["dst"] = column<uint32_t>(n, [&](size_t i) { return fwd.channel(i).peer; });
            d["rate_bps"] = column<int64_t>(n, [&](size_t i) { return fwd.channel(i).rate_bps; });
            d["tx_bytes"] = column<int64_t>(n, [&](size_t i) { return static_cast<int64_t>(std::llround(bytes[i])); });
            d["busy_ps"] = column<int64_t>(n, [&](size_t i) { return static_cast<int64_t>(std::llround(busy[i])); });
            return d;
          },
          "Per-port columns (ports 2l and 2l+1 are link l's two directions): wire bytes carried\n"
          "(headers included) and time busy carrying them at the port's rate.")
      .def(
          "trace_path",
          [](const FlowSimulator& s, uint32_t src, uint32_t dst, uint32_t flow_hash) {
            return s.network().trace_path(src, dst, flow_hash);
          },
          py::arg("src"), py::arg("dst"), py::arg("flow_hash") = 0,
          "Ports crossed from GPU src to GPU dst on the current tables for an ECMP hash.");
}

}  // namespace rfabric::bindings
