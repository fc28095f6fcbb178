// bind_forwarding.cpp: the forwarding layer alone (net::Forwarding), without packets or an
// event loop: paths between GPUs on a fabric's tables as links fail and circuits change, for
// controllers, cost models and a flow-level backend.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/ndarray.hpp"
#include "bindings/spec_dict.hpp"
#include "fabric/forwarding.hpp"

namespace rfabric::bindings {

using net::Forwarding;

void bind_forwarding(py::module_& m) {
  py::class_<Forwarding>(m, "Forwarding",
                         "A fabric's forwarding state (topology, channels, routing tables) without a\n"
                         "simulation. Paths follow the same tables and choices as the packet engine's\n"
                         "frames (sequence number 0, idle queues for adaptive routing).")
      .def(py::init([](const py::dict& spec, const py::dict& config) {
             return std::make_unique<Forwarding>(spec_from_dict(spec), config_from_dict(config));
           }),
           py::arg("spec"), py::arg("config"),
           "Build from a dict of spec arrays (rfabric.spec.NetworkSpec.arrays()) and an engine config dict\n"
           "(its ecmp_* switches and mtu_bytes are read).")
      .def(
          "path",
          [](const Forwarding& f, uint32_t src, uint32_t dst, uint32_t flow_hash) {
            return to_numpy(f.path(src, dst, flow_hash));
          },
          py::arg("src"), py::arg("dst"), py::arg("flow_hash") = 0,
          "Ports (2 x link + direction) a frame from GPU src to GPU dst crosses for an ECMP hash;\n"
          "the same as Engine.trace_path on the same fabric state.")
      .def(
          "path_cost",
          [](const Forwarding& f, uint32_t src, uint32_t dst) { return f.path_cost(f.path(src, dst, 0)); },
          py::arg("src"), py::arg("dst"),
          "(latency_ps, rate_bps) of the path from src to dst: propagation plus per-hop processing, and\n"
          "the slowest channel.")
      .def(
          "set_link_state",
          [](Forwarding& f, uint32_t link, bool up) {
            RF_CHECK(link < f.num_links(), "link ", link, " does not exist (the fabric has ", f.num_links(),
                     ")");
            f.set_link_up(link, up);
            f.update_channels(0);
            f.rebuild();
          },
          py::arg("link"), py::arg("up"),
          "Take link `link` (row of the link table) down or up; tables are rebuilt.")
      .def(
          "set_plan",
          [](Forwarding& f, py::handle ocs, py::handle a, py::handle b) {
            const Forwarding::Plan plan{from_numpy<uint32_t>(ocs, "ocs"), from_numpy<uint32_t>(a, "a"),
                                        from_numpy<uint32_t>(b, "b")};
            f.check_plan(plan);
            const auto changed = f.set_plan(plan, 0);
            f.update_channels(0);
            f.rebuild();
            return changed;
          },
          py::arg("ocs"), py::arg("a"), py::arg("b"),
          "Replace the circuit plan (new circuits lit at once); returns (added, removed).")
      .def(
          "current_circuits", [](const Forwarding& f) { return to_numpy(f.current_circuits()); },
          "Circuits in place as a flat array of (device, link a, link b) triples.")
      .def(
          "channels",
          [](const Forwarding& f) {
            const uint32_t n = f.num_ports();
            py::dict d;
            d["link_id"] = column<uint32_t>(n, [&](size_t i) { return f.channel(i).link; });
            d["src"] = column<uint32_t>(n, [&](size_t i) { return f.channel(i).node; });
            d["dst"] = column<uint32_t>(n, [&](size_t i) { return f.channel(i).peer; });
            d["up"] = column<uint8_t>(n, [&](size_t i) { return f.channel(i).up && !f.channel(i).inert; });
            d["rate_bps"] = column<int64_t>(n, [&](size_t i) { return f.channel(i).rate_bps; });
            d["latency_ps"] = column<int64_t>(n, [&](size_t i) { return f.channel(i).prop_ps; });
            return d;
          },
          "Per-port channel columns: a port facing an optical device reaches the far end of its circuit\n"
          "chain (dst), with the chain's summed latency and slowest rate; up: carries traffic now.")
      .def_property_readonly("num_gpus", &Forwarding::num_gpus)
      .def_property_readonly("num_links", &Forwarding::num_links);
}

}  // namespace rfabric::bindings
