// bind_flow_level.hpp: the calls both flow-level engines answer alike, FlowEngine (max-min,
// bind_flow.cpp) and FluidEngine (the dynamic mode, bind_fluid.cpp): loading a workload with
// the flow backend's executor settings, the per-flow and per-op results, each flow's progress
// and rate, and the per-port columns they share. Each binding adds what its model has.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>

#include "bindings/bind_simulator.hpp"
#include "bindings/ndarray.hpp"
#include "bindings/spec_dict.hpp"
#include "engine/check.hpp"

namespace rfabric::bindings {

/// Per-port columns both flow-level models have: ids, ends, rate, wire bytes and busy time.
template <class Net>
py::dict flow_port_columns(const Net& net) {
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
}

/// The counters both flow-level models keep: events, flows created and done, the last flow's
/// end and the most flows alive at once; each binding's counters() adds its model's own.
template <class Sim>
py::dict flow_counters(const Sim& s) {
  const auto& c = s.network().counters();
  py::dict d;
  d["events"] = s.engine().events_processed();
  d["flows"] = s.network().flows_created();
  d["flows_done"] = c.flows_done;
  d["last_flow_end_ps"] = c.last_flow_end_ps;
  d["peak_live_flows"] = s.network().peak_live_flows();
  return d;
}

/// The calls a flow-level simulator `Sim` (FlowSimulator, FluidSimulator) answers alike.
template <class Sim>
void bind_flow_level(py::class_<Sim>& cls) {
  bind_simulator(cls);
  cls.def(
         "load_workload",
         [](Sim& s, const py::dict& a, int channels, int64_t chunk_bytes, py::object rings,
            const std::string& boundaries, bool period_ends, int64_t ring_slices, bool merge_channels,
            bool nccl_model, const std::string& protocol, int64_t pipeline_slices) {
           if (ring_slices < 0 || ring_slices > (int64_t{1} << 30))
             throw SpecError("flow_ring_slices must be in [0, 2^30], got " + std::to_string(ring_slices));
           if (pipeline_slices < 0 || pipeline_slices > (int64_t{1} << 30))
             throw SpecError("flow_pipeline_slices must be in [0, 2^30], got " +
                             std::to_string(pipeline_slices));
           coll::ExecutorConfig cfg =
               executor_config(channels, chunk_bytes, rings, boundaries, period_ends, nccl_model, protocol);
           cfg.ring_slices = static_cast<uint32_t>(ring_slices);
           cfg.pipeline_slices = static_cast<uint32_t>(pipeline_slices);
           cfg.merge_channels = merge_channels;
           s.load_workload(workload_from_dict(a), std::move(cfg));
         },
         py::arg("arrays"), py::arg("channels") = 8, py::arg("chunk_bytes") = 512 * 1024,
         py::arg("rings") = py::none(), py::arg("boundaries") = "none", py::arg("period_ends") = false,
         py::arg("ring_slices") = 0, py::arg("merge_channels") = true, py::arg("nccl_model") = true,
         py::arg("protocol") = "auto", py::arg("pipeline_slices") = 0,
         "Load a collective-op workload to replay (as Engine.load_workload). `ring_slices`: the most\n"
         "slices a ring step is cut into (0: slices of chunk_bytes, as the packet engine).\n"
         "`pipeline_slices`: the most pieces a pipelined tree's or chain's chunks between its first\n"
         "and last are run as, streamed (0: a flow per chunk, as the packet engine).\n"
         "`merge_channels`: a ring collective's channels whose rings have the same edges and paths\n"
         "run as one flow of n copies per message (False: a flow per channel).")
      .def(
          "flow_log",
          [](const Sim& s) {
            auto f = s.network().flow_rows();
            auto ideal = net::ideal_fct_column(s.network(), f.src, f.dst, f.hash, f.size_bytes);
            py::dict d = flow_columns(f);
            d["ideal_fct_ps"] = to_numpy(std::move(ideal));
            d["sent_ps"] = to_numpy(std::move(f.sent_ps));
            return d;
          },
          "Per-flow columns (numpy arrays), one row per flow recorded (record_flows), then one per\n"
          "flow alive now, sorted by flow_id: sent_bytes (payload that left the source by now),\n"
          "delivered_bytes (all of it once the last byte arrived, else 0: the flow model delivers\n"
          "a flow whole, its path delay after it is sent), sent_ps (when the last byte left),\n"
          "ideal_fct_ps (its time alone on its idle path, frame by frame: Forwarding::lone_packet_fct_ps).")
      .def(
          "op_flow_stats",
          [](const Sim& s) {
            const coll::Executor* x = s.executor();
            const size_t n = x ? x->op_start().size() : 0;
            const auto& st = s.network().owner_stats();
            py::dict d;
            d["flows"] =
                column<int64_t>(n, [&](size_t i) { return i < st.size() ? st[i].flows : int64_t{0}; });
            d["delivered_bytes"] = column<int64_t>(
                n, [&](size_t i) { return i < st.size() ? st[i].delivered_bytes : int64_t{0}; });
            d["max_fct_ps"] =
                column<int64_t>(n, [&](size_t i) { return i < st.size() ? st[i].max_fct_ps : -1; });
            return d;
          },
          "Per op (workload rows): totals of its flows that finished so far: flows, delivered payload\n"
          "bytes and the longest flow (max_fct_ps, -1: none).")
      .def(
          "delivered_bytes", [](const Sim& s) { return to_numpy(s.network().sent_bytes()); },
          "Payload bytes per flow slot that have left the source by now (the fluid's progress; for a\n"
          "flow set, whose flows keep their slots, per flow).")
      .def(
          "flow_rates", [](const Sim& s) { return to_numpy(s.network().flow_rates()); },
          "Current rate per flow slot, bit/s of wire bytes (0 when not sending): the max-min share,\n"
          "or in the dynamic mode the source's sending rate.");
}

}  // namespace rfabric::bindings
