// bind_simulator.hpp: the calls both simulation handles answer alike, bound once for each:
// rfabric._engine.Engine (sim::Simulator, packet level) and FlowEngine (flow::FlowSimulator).
// Building, flows, circuits, failures, the control loop's boundaries, the clock and the
// shared properties; each bind_*.cpp adds the calls whose results differ by model (counters,
// flow_log, port_stats, ...). Sim needs engine(), network(), executor(), load_workload(),
// run() and idle(), as both simulators have. Included only by csrc/bindings/.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "bindings/ndarray.hpp"
#include "bindings/spec_dict.hpp"
#include "engine/check.hpp"
#include "engine/time.hpp"

namespace rfabric::bindings {

/// The per-flow columns both models log, moved out of `f` (a net::FlowLog or the flow model's
/// rows); each binding adds its own (retransmission accounting, or sent_ps).
template <class Rows>
py::dict flow_columns(Rows& f) {
  py::dict d;
  d["flow_id"] = to_numpy(std::move(f.id));
  d["op"] = to_numpy(std::move(f.owner));  // workload row of the op that made it, -1: none
  d["src"] = to_numpy(std::move(f.src));
  d["dst"] = to_numpy(std::move(f.dst));
  d["size_bytes"] = to_numpy(std::move(f.size_bytes));
  d["start_ps"] = to_numpy(std::move(f.start_ps));
  d["end_ps"] = to_numpy(std::move(f.end_ps));
  d["sent_bytes"] = to_numpy(std::move(f.sent_bytes));
  d["delivered_bytes"] = to_numpy(std::move(f.delivered_bytes));
  return d;
}

/// The entries of a per-op column at the workload rows `rows` (a re-plan's read of its own
/// period's ops, without op_log's copy of every op); `what` names the call in the error.
template <class T>
std::vector<T> op_rows(const std::vector<T>& column, const py::handle& rows, const char* what) {
  const auto r = from_numpy<uint32_t>(rows, "rows");
  std::vector<T> out(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    RF_CHECK(r[i] < column.size(), what, ": row ", r[i], " out of range (", column.size(), " ops)");
    out[i] = column[r[i]];
  }
  return out;
}

template <class Sim>
void bind_simulator(py::class_<Sim>& c) {
  using engine::SimTime;
  auto executor = [](auto& s) -> auto& {
    RF_CHECK(s.executor() != nullptr, "no workload loaded");
    return *s.executor();
  };
  c.def(py::init([](const py::dict& spec, const py::dict& config) {
          return std::make_unique<Sim>(spec_from_dict(spec), config_from_dict(config));
        }),
        py::arg("spec"), py::arg("config"),
        "Build from a dict of spec arrays (rfabric.spec.NetworkSpec.arrays()) and a config dict.")
      .def(
          "add_flows",
          [](Sim& s, py::handle src, py::handle dst, py::handle size, py::handle start) {
            RF_CHECK(s.executor() == nullptr, "plain flows cannot be combined with a loaded workload");
            s.network().add_flows(from_numpy<uint32_t>(src, "src"), from_numpy<uint32_t>(dst, "dst"),
                                  from_numpy<int64_t>(size, "size_bytes"),
                                  from_numpy<int64_t>(start, "start_ps"));
          },
          py::arg("src"), py::arg("dst"), py::arg("size_bytes"), py::arg("start_ps"),
          "Add flows: GPU ids, sizes in bytes, start times in ps. Once, before running.")
      .def(
          "schedule_plan",
          [](Sim& s, SimTime at_ps, py::handle ocs, py::handle a, py::handle b, SimTime dark_ps) {
            s.network().changes().schedule_plan(at_ps, from_numpy<uint32_t>(ocs, "ocs"),
                                                from_numpy<uint32_t>(a, "a"), from_numpy<uint32_t>(b, "b"),
                                                dark_ps);
          },
          py::arg("at_ps"), py::arg("ocs"), py::arg("a"), py::arg("b"), py::arg("dark_ps"),
          "Replace the circuit plan at at_ps; new circuits are dark for dark_ps.")
      .def(
          "apply_plan",
          [](Sim& s, py::handle ocs, py::handle a, py::handle b, SimTime dark_ps) {
            s.network().changes().apply_plan_now(from_numpy<uint32_t>(ocs, "ocs"),
                                                 from_numpy<uint32_t>(a, "a"), from_numpy<uint32_t>(b, "b"),
                                                 dark_ps);
          },
          py::arg("ocs"), py::arg("a"), py::arg("b"), py::arg("dark_ps"),
          "Replace the circuit plan now, at once (before events already queued for this instant);\n"
          "new circuits are dark for dark_ps. A bad plan raises and changes nothing.")
      .def(
          "circuit_log",
          [](const Sim& s) {
            const auto& log = s.network().changes().circuit_log();
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
          "current_circuits", [](const Sim& s) { return to_numpy(s.network().current_circuits()); },
          "Circuits in place now as a flat array of (device, link a, link b) triples.")
      .def(
          "current_circuits_lit_at",
          [](const Sim& s) { return to_numpy(s.network().current_circuits_lit_at()); },
          "When each circuit of current_circuits() carries light (ps; <= now: lit).")
      .def(
          "boundary", [executor](const Sim& s) { return boundary_dict(executor(s)); },
          "The pending control-loop boundary: the ops (workload rows) that became ready and opened it,\n"
          "their periods and when each starts sending (ps; slack = start_ps - now); `ended`: the periods\n"
          "that went idle (load_workload(period_ends=True)). Both empty: none pending.")
      .def(
          "resume", [executor](Sim& s) { executor(s).resume(); },
          "Clear the pending boundary so that run() goes on.")
      .def(
          "active_periods", [executor](const Sim& s) { return to_numpy(executor(s).active_periods()); },
          "Periods (sorted) with an op running, or ready and waiting out its compute gap (with\n"
          "boundaries only: counted as ops become ready and finish).")
      .def(
          "op_flows",
          [executor](Sim& s, py::handle ops_in, py::handle algorithm) {
            return op_flows_dict(executor(s), ops_in, algorithm);
          },
          py::arg("ops"), py::arg("algorithm") = -1,
          "Bytes each op (workload rows) would send per directed GPU pair, by running its algorithm on\n"
          "the current paths without the network (one row per (op, src, dst), sorted; `counts`: the rows of\n"
          "each op asked, in order). The flows of a\n"
          "real run, summed per pair, are the same unless the paths change before the op starts (an\n"
          "auto-tuned all-reduce picks ring or tree on the paths at its start). `algorithm` >= 0 (a code\n"
          "of the trace schema's ALGORITHMS) runs that algorithm instead of each op's own; an array, one\n"
          "code per op (-1: its own). The ops run as one batch: the tuner's path terms and port loads\n"
          "computed for one serve the others, and the real run's caches are left as they were.")
      .def(
          "start_bounds",
          [executor](Sim& s, const py::handle& rows, const py::handle& dur, int64_t now) {
            // one duration per op of the workload, read in place (not copied at every call)
            const auto d = array_view<int64_t>(dur, "dur");
            return to_numpy(executor(s).start_bounds(from_numpy<uint32_t>(rows, "rows"), d.data(),
                                                     static_cast<size_t>(d.size()), now));
          },
          py::arg("rows"), py::arg("dur"), py::arg("now"),
          "A lower bound of each op's start (ps; workload rows): a started op its start, else its\n"
          "compute gap after its dependencies' end bounds (a finished op its end; an unfinished one\n"
          "no earlier than `now`, nor than its start bound plus dur[op]).")
      .def(
          "op_ends",
          [executor](const Sim& s, const py::handle& rows) {
            return to_numpy(op_rows(executor(s).op_end(), rows, "op_ends"));
          },
          py::arg("rows"), "End time (ps; -1 if not reached) of each op row in `rows`.")
      .def(
          "op_algorithms_ran",
          [executor](const Sim& s, const py::handle& rows) {
            return to_numpy(op_rows(executor(s).op_algorithm(), rows, "op_algorithms_ran"));
          },
          py::arg("rows"), "Algorithm (op_algorithms() code; -1 if not started) each op row in `rows` runs.")
      .def(
          "op_log",
          [](const Sim& s) {
            py::dict d;
            const coll::Executor* x = s.executor();
            if (x == nullptr) return d;
            d["start_ps"] = to_numpy(std::vector<int64_t>(x->op_start()));
            d["end_ps"] = to_numpy(std::vector<int64_t>(x->op_end()));
            d["algorithm"] = to_numpy(std::vector<int32_t>(x->op_algorithm()));
            d["protocol"] = to_numpy(std::vector<int32_t>(x->op_protocol()));
            d["channels"] = to_numpy(std::vector<int32_t>(x->op_channels()));
            return d;
          },
          "Per-op start and end times (ps; -1 if not reached), in workload row order, and what ran:\n"
          "algorithm (op_algorithms() code), protocol (op_protocols() code; -1: none modelled) and\n"
          "channels (-1 for an op not started).")
      .def(
          "set_link_state",
          [](Sim& s, uint32_t link, SimTime time_ps, bool up) {
            s.network().changes().schedule_link_state(link, time_ps, up);
          },
          py::arg("link"), py::arg("time_ps"), py::arg("up"),
          "Take link `link` (row of the link table) down or up at time_ps.")
      .def("run", &Sim::run, py::arg("until") = engine::kNever, py::arg("max_events") = 0,
           py::call_guard<py::gil_scoped_release>(),
           "Run events up to time `until` (ps) or `max_events` events; returns events processed.")
      .def_property_readonly(
          "now", [](const Sim& s) { return s.engine().now(); }, "Simulated time, ps.")
      .def(
          "peek", [](Sim& s) { return s.engine().peek(); }, "Time of the next event (ps), or int64 max.")
      .def_property_readonly("events_processed", [](const Sim& s) { return s.engine().events_processed(); })
      .def_property_readonly("pending", [](const Sim& s) { return s.engine().pending(); })
      .def_property_readonly("idle", &Sim::idle)
      .def_property_readonly("flows_done", [](const Sim& s) { return s.network().counters().flows_done; })
      .def_property_readonly("ops_done",
                             [](const Sim& s) { return s.executor() ? s.executor()->ops_done() : size_t{0}; })
      .def_property_readonly("num_gpus", [](const Sim& s) { return s.network().num_gpus(); })
      .def_property_readonly("num_links", [](const Sim& s) { return s.network().num_links(); })
      .def_property_readonly("lossless", [](const Sim& s) { return s.network().lossless(); })
      .def_property_readonly("header_bytes", [](const Sim& s) { return s.network().header_bytes(); })
      .def_property(
          "record_flows", [](const Sim& s) { return s.network().record_flows(); },
          [](Sim& s, bool on) { s.network().set_record_flows(on); },
          "Keep a row per flow as it retires (default on); off, only per-op totals (op_flow_stats).")
      .def(
          "trace_path",
          [](const Sim& s, uint32_t src, uint32_t dst, uint32_t flow_hash) {
            return s.network().trace_path(src, dst, flow_hash);
          },
          py::arg("src"), py::arg("dst"), py::arg("flow_hash") = 0,
          "Ports crossed from GPU src to GPU dst on the current tables for an ECMP hash.");
}

}  // namespace rfabric::bindings
