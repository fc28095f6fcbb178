// bind_engine.cpp: the Engine handle: build from arrays, add flows, run with the GIL
// released, read counters and result columns as numpy arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>

#include "bindings/bind_simulator.hpp"
#include "bindings/ndarray.hpp"
#include "bindings/spec_dict.hpp"
#include "engine/check.hpp"
#include "engine/event_queue.hpp"
#include "engine/rng.hpp"
#include "packet/simulator.hpp"
#include "packet/transports/registry.hpp"

namespace rfabric::bindings {

namespace {

using engine::BitsPerSec;
using engine::Bytes;
using engine::SimTime;
using net::EngineConfig;
using net::NetworkSpec;
using sim::Simulator;

/// Every engine config field and its default, in declaration order.
py::dict config_fields() {
  const EngineConfig c;
  py::dict d;
#define RF_CONFIG_DEFAULT(type, name, value, doc) d[#name] = c.name;
  RF_ENGINE_CONFIG_FIELDS(RF_CONFIG_DEFAULT)
#undef RF_CONFIG_DEFAULT
  return d;
}

/// FlowLog rows as numpy columns (moved, not copied).
py::dict flow_log_dict(const net::Network& net, net::FlowLog f) {
  auto ideal = net::ideal_fct_column(net, f.src, f.dst, f.hash, f.size_bytes);
  py::dict d = flow_columns(f);
  d["ideal_fct_ps"] = to_numpy(std::move(ideal));
  d["resent_bytes"] = to_numpy(std::move(f.resent_bytes));
  d["duplicate_bytes"] = to_numpy(std::move(f.duplicate_bytes));
  d["dropped_bytes"] = to_numpy(std::move(f.dropped_bytes));
  d["retransmits"] = to_numpy(std::move(f.retransmits));
  d["in_flight_bytes"] = to_numpy(std::move(f.in_flight));
  return d;
}

}  // namespace

py::handle require(const py::dict& d, const char* key, const char* what) {
  if (!d.contains(key)) throw SpecError(std::string(what) + ": missing array '" + key + "'");
  return d[key];
}

NetworkSpec spec_from_dict(const py::dict& d) {
  auto get = [&](const char* key) { return require(d, key, "network spec"); };
  NetworkSpec s;
  s.node_kind = from_numpy<uint8_t>(get("node_kind"), "node_kind");
  s.node_server = from_numpy<int32_t>(get("node_server"), "node_server");
  s.node_latency_ps = from_numpy<int64_t>(get("node_latency_ps"), "node_latency_ps");
  s.link_src = from_numpy<uint32_t>(get("link_src"), "link_src");
  s.link_dst = from_numpy<uint32_t>(get("link_dst"), "link_dst");
  s.link_rate_bps = from_numpy<int64_t>(get("link_rate_bps"), "link_rate_bps");
  s.link_latency_ps = from_numpy<int64_t>(get("link_latency_ps"), "link_latency_ps");
  s.link_buffer_bytes = from_numpy<int64_t>(get("link_buffer_bytes"), "link_buffer_bytes");
  if (d.contains("circuit_ocs")) {
    s.circuit_ocs = from_numpy<uint32_t>(d["circuit_ocs"], "circuit_ocs");
    s.circuit_a = from_numpy<uint32_t>(get("circuit_a"), "circuit_a");
    s.circuit_b = from_numpy<uint32_t>(get("circuit_b"), "circuit_b");
  }
  if (d.contains("host_forwarding")) s.host_forwarding = d["host_forwarding"].cast<bool>();
  if (d.contains("pxn")) s.pxn = d["pxn"].cast<bool>();
  if (d.contains("deadlock_free")) s.deadlock_free = d["deadlock_free"].cast<bool>();
  if (d.contains("link_lossy")) s.link_lossy = from_numpy<uint8_t>(d["link_lossy"], "link_lossy");
  if (d.contains("gpu_site")) s.gpu_site = from_numpy<int32_t>(d["gpu_site"], "gpu_site");
  if (d.contains("cross_site_transport"))
    s.cross_site_transport = d["cross_site_transport"].cast<std::string>();
  if (d.contains("cross_site_ecn_ps")) s.cross_site_ecn_ps = d["cross_site_ecn_ps"].cast<int64_t>();
  if (d.contains("cross_site_min_rto_ps"))
    s.cross_site_min_rto_ps = d["cross_site_min_rto_ps"].cast<int64_t>();
  return s;
}

EngineConfig config_from_dict(const py::dict& d) {
  EngineConfig c;
  for (const auto& item : d) {
    const std::string k = py::str(item.first);
    const py::handle v = item.second;
    try {
#define RF_CONFIG_FROM_DICT(type, name, value, doc) \
  if (k == #name) {                                 \
    c.name = v.cast<type>();                        \
    continue;                                       \
  }
      RF_ENGINE_CONFIG_FIELDS(RF_CONFIG_FROM_DICT)
#undef RF_CONFIG_FROM_DICT
    } catch (const py::cast_error&) {
      throw SpecError("engine config: field '" + k + "' has the wrong type");
    }
    throw SpecError("engine config: unknown field '" + k + "'");
  }
  return c;
}

coll::Workload workload_from_dict(const py::dict& a) {
  auto get = [&](const char* key) { return require(a, key, "workload"); };
  coll::Workload w;
  w.op_id = from_numpy<int64_t>(get("op_id"), "op_id");
  w.kind = from_numpy<int32_t>(get("kind"), "kind");
  w.algorithm = from_numpy<int32_t>(get("algorithm"), "algorithm");
  w.m2n_senders = from_numpy<int32_t>(get("m2n_senders"), "m2n_senders");
  w.ranks_offsets = from_numpy<int64_t>(get("ranks_offsets"), "ranks_offsets");
  w.ranks = from_numpy<int32_t>(get("ranks"), "ranks");
  w.deps_offsets = from_numpy<int64_t>(get("deps_offsets"), "deps_offsets");
  w.deps = from_numpy<int64_t>(get("deps"), "deps");
  w.size_bytes = from_numpy<int64_t>(get("size_bytes"), "size_bytes");
  w.compute_ps = from_numpy<int64_t>(get("compute_ps"), "compute_ps");
  if (a.contains("stage")) w.stage = from_numpy<int32_t>(a["stage"], "stage");
  if (a.contains("phase")) w.phase = from_numpy<int32_t>(a["phase"], "phase");
  if (a.contains("period")) w.period = from_numpy<int32_t>(a["period"], "period");
  return w;
}

py::dict op_flows_dict(coll::Executor& x, py::handle ops_in, py::handle algo_in) {
  const auto ops = from_numpy<int64_t>(ops_in, "ops");
  std::vector<uint32_t> rows;
  rows.reserve(ops.size());
  for (const int64_t o : ops) {
    RF_CHECK(o >= 0, "op index ", o, " is negative");
    rows.push_back(static_cast<uint32_t>(o));
  }
  // one algorithm for every op, or one per op
  std::vector<int32_t> algos;
  if (!py::hasattr(algo_in, "__len__")) {
    algos.assign(rows.size(), algo_in.cast<int32_t>());
  } else {
    const auto given = from_numpy<int64_t>(algo_in, "algorithm");
    RF_CHECK(given.size() == rows.size(), "op_flows: ", given.size(), " algorithms for ", rows.size(),
             " ops");
    for (const int64_t a : given) {
      RF_CHECK(a >= -1 && a <= std::numeric_limits<int32_t>::max(), "unknown algorithm code ", a);
      algos.push_back(static_cast<int32_t>(a));
    }
  }
  std::vector<int64_t> op, bytes, counts;
  std::vector<uint32_t> src, dst;
  const auto runs = x.dry_runs(rows, algos);
  for (size_t i = 0; i < rows.size(); ++i) {
    counts.push_back(static_cast<int64_t>(runs[i].size()));
    for (const auto& [a, b, n] : runs[i]) {
      op.push_back(ops[i]);
      src.push_back(a);
      dst.push_back(b);
      bytes.push_back(n);
    }
  }
  py::dict d;
  d["op"] = to_numpy(std::move(op));
  d["src"] = to_numpy(std::move(src));
  d["dst"] = to_numpy(std::move(dst));
  d["size_bytes"] = to_numpy(std::move(bytes));
  d["counts"] = to_numpy(std::move(counts));
  return d;
}

py::dict boundary_dict(const coll::Executor& x) {
  const auto& ops = x.boundary_ops();
  const size_t n = ops.size();
  py::dict d;
  d["op"] = column<int64_t>(n, [&](size_t i) { return ops[i]; });
  d["period"] = column<int32_t>(n, [&](size_t i) { return x.period(ops[i]); });
  d["start_ps"] = column<int64_t>(n, [&](size_t i) { return x.start_time(ops[i]); });
  const auto& ended = x.ended_periods();
  d["ended"] = column<int32_t>(ended.size(), [&](size_t i) { return ended[i]; });
  return d;
}

coll::ExecutorConfig executor_config(int channels, int64_t chunk_bytes, const py::object& rings,
                                     const std::string& boundaries, bool period_ends, bool nccl_model,
                                     const std::string& protocol) {
  coll::ExecutorConfig cfg;
  cfg.nccl_model = nccl_model;
  if (protocol != "auto") {
    const auto& names = coll::proto_names();
    const auto it = std::find(names.begin(), names.end(), protocol);
    if (it == names.end())
      throw SpecError("protocol must be 'auto', 'll', 'll128' or 'simple', got '" + protocol + "'");
    if (!nccl_model)
      throw SpecError("protocol '" + protocol + "' is forced but the NCCL model is off (nccl_model=False)");
    cfg.protocol = static_cast<int32_t>(it - names.begin());
  }
  if (boundaries == "period") {
    cfg.boundaries = coll::Boundaries::kPeriod;
  } else if (boundaries == "op") {
    cfg.boundaries = coll::Boundaries::kOp;
  } else if (boundaries != "none") {
    throw SpecError("boundaries must be 'none', 'period' or 'op', got '" + boundaries + "'");
  }
  cfg.period_ends = period_ends;
  cfg.channels = channels;
  cfg.chunk_bytes = chunk_bytes;
  if (!rings.is_none()) {
    using Rows = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>;
    const auto arr = Rows::ensure(rings);
    RF_CHECK(arr && arr.ndim() == 2, "rings must be a 2-D array (channels x GPUs)");
    const auto r = arr.unchecked<2>();
    cfg.rings.assign(static_cast<size_t>(r.shape(0)), {});
    for (py::ssize_t c = 0; c < r.shape(0); ++c)
      for (py::ssize_t g = 0; g < r.shape(1); ++g) cfg.rings[c].push_back(r(c, g));
  }
  return cfg;
}

/// Differential self-check of the calendar queue against the reference heap: a random stream
/// of pushes (bursts of equal times, near and far future, beyond the wheel's horizon) and
/// pops, with peeks that move the wheel ahead of time and pushes behind it (the rebase path).
/// Returns the number of pops where the two disagree.
uint64_t check_event_queue(uint64_t seed, uint64_t operations) {
  engine::EventQueue cal;
  engine::HeapQueue ref;
  engine::Rng rng(seed);
  uint32_t id = 0;  // each event's identity, in its target field
  uint64_t mismatches = 0;
  engine::SimTime now = 0;
  const engine::SimTime horizon = static_cast<engine::SimTime>(engine::EventQueue::kBuckets)
                                  << engine::EventQueue::kBucketBits;
  const auto push = [&](engine::SimTime t) {
    const engine::Event ev{t, id++, 0};
    cal.push(ev);
    ref.push(ev);
  };
  const auto pop = [&] {
    const engine::Event a = cal.pop(), b = ref.pop();
    if (a.time != b.time || a.target != b.target) ++mismatches;
    now = b.time;
  };
  for (uint64_t i = 0; i < operations; ++i) {
    const uint64_t r = rng.next() % 100;
    if (r < 55 || ref.empty()) {
      engine::SimTime t = now;
      const uint64_t kind = rng.next() % 6;
      if (kind == 1) t += static_cast<engine::SimTime>(rng.next() % 2000);               // same bucket
      if (kind == 2) t += static_cast<engine::SimTime>(rng.next() % 5'000'000);          // microseconds
      if (kind == 3) t += horizon + static_cast<engine::SimTime>(rng.next() % horizon);  // far
      if (kind == 4) t += static_cast<engine::SimTime>(rng.next() % (4 * horizon));
      const uint32_t burst = kind == 5 ? 1 + static_cast<uint32_t>(rng.next() % 20) : 1;  // equal times
      for (uint32_t b = 0; b < burst; ++b) push(t);
    } else if (r < 65) {
      // pop one, then push a few events in random order into the bucket it came from:
      // out-of-order inserts among live and just-freed nodes (the walk along a bucket's list)
      pop();
      const uint32_t run = 1 + static_cast<uint32_t>(rng.next() % 3);
      for (uint32_t k = 0; k < run; ++k) push(now + static_cast<engine::SimTime>(rng.next() % 256));
    } else if (r < 95) {
      pop();
    } else if (!cal.empty()) {
      // peek (moves the wheel to the next non-empty bucket, possibly far ahead) ...
      if (cal.top().time != ref.top().time || cal.size() != ref.size()) ++mismatches;
      // ... then schedule just after `now`, behind where the wheel now stands
      push(now + 1);
    }
  }
  while (!ref.empty()) pop();
  return mismatches + (cal.empty() ? 0 : 1);
}

void bind_engine(py::module_& m) {
  m.attr("debug_checks") = kDebugChecks;  // RF_DCHECK live: the RF_SANITIZE build (.ci/sanitize)
  m.def("transports", &proto::transport_names, "Names of the compiled-in transports.");
  m.def(
      "transport_traits",
      [] {
        py::dict d;
        for (const net::TransportTraits& t : net::kTransportTraits)
          d[py::str(std::string(t.name))] =
              py::dict(py::arg("header_bytes") = t.header_bytes, py::arg("lossless") = t.lossless);
        return d;
      },
      "Per compiled-in transport: header bytes per data frame and whether it runs lossless (PFC)\n"
      "(fabric/transport_traits.hpp).");
  m.def("config_fields", &config_fields,
        "Engine config fields and their defaults (base units; -1: the transport's choice), in\n"
        "declaration order: the one list (RF_ENGINE_CONFIG_FIELDS in csrc/fabric/spec.hpp).");
  m.def("op_kinds", &coll::kind_names, "Collective op kind names, in the executor's code order.");
  m.def("op_algorithms", &coll::algo_names, "Collective algorithm names, in the executor's code order.");
  m.def("op_protocols", &coll::proto_names, "NCCL protocol names, in the executor's code order.");
  m.def("check_event_queue", &check_event_queue, py::arg("seed"), py::arg("operations"),
        "Self-check: replay a random push/pop stream on the calendar queue and the reference heap; "
        "returns the number of disagreements (0 expected).");

  py::class_<Simulator> cls(m, "Engine", "One packet-level simulation: network, flows, event loop.");
  bind_simulator(cls);
  cls.def(
         "load_workload",
         [](Simulator& s, const py::dict& a, int channels, int64_t chunk_bytes, py::object rings,
            const std::string& boundaries, bool period_ends, bool nccl_model, const std::string& protocol) {
           coll::Workload w = workload_from_dict(a);
           coll::ExecutorConfig cfg =
               executor_config(channels, chunk_bytes, rings, boundaries, period_ends, nccl_model, protocol);
           s.load_workload(std::move(w), cfg);
         },
         py::arg("arrays"), py::arg("channels") = 8, py::arg("chunk_bytes") = 512 * 1024,
         py::arg("rings") = py::none(), py::arg("boundaries") = "none", py::arg("period_ends") = false,
         py::arg("nccl_model") = true, py::arg("protocol") = "auto",
         "Load a collective-op workload (rfabric.traces.Trace.arrays()) to replay; `rings` (channels x\n"
         "GPUs, each row a permutation of the GPU ids) are the fabric's preferred ring orders.\n"
         "`boundaries`: 'none'; 'period': run() returns when an op of a period not seen before\n"
         "becomes ready (its deps done); 'op': when any op becomes ready. The op stays queued to start\n"
         "after its compute gap; boundary() describes the stop, resume() lets run() go on. `period_ends`\n"
         "(with boundaries): also return when a period goes idle (its last ready or running op finished).\n"
         "`nccl_model`: NCCL's protocol costs (docs/nccl-model.md; False: line-rate Simple); `protocol`:\n"
         "'auto' (the tuner's choice per op) or a forced 'll', 'll128', 'simple'.")
      .def(
          "event_counts",
          [](const Simulator& s) { return to_numpy(std::vector<uint64_t>(s.engine().kind_counts())); },
          "Events processed per kind id (network kinds first, then each transport's timers).")
      .def(
          "counters",
          [](const Simulator& s) {
            const auto& c = s.network().counters();
            py::dict d;
            d["events"] = s.engine().events_processed();
            d["packets"] = c.packets;
            d["packet_hops"] = c.packet_hops;
            d["packets_delivered"] = c.packets_delivered;
            d["overflow_drops"] = c.overflow_drops;
            d["drops"] = c.drops;
            d["no_route_drops"] = c.no_route_drops;
            d["link_down_drops"] = c.link_down_drops;
            d["circuit_drops"] = c.circuit_drops;
            d["circuit_reroutes"] = c.circuit_reroutes;
            d["ecn_marks"] = c.ecn_marks;
            d["pfc_pauses"] = c.pauses;
            d["flows_done"] = c.flows_done;
            d["flows"] = s.network().flows_created();
            d["last_flow_end_ps"] = c.last_flow_end_ps;
            d["live_flows"] = s.network().live_flows();
            d["peak_live_flows"] = s.network().peak_live_flows();
            d["packets_in_flight"] = s.network().packets_in_flight();
            d["packets_held"] = s.network().packets_held();
            d["held"] = c.held;
            d["dark_transmits"] = c.dark_transmits;
            d["busy_starts"] = c.busy_starts;
            return d;
          },
          "Run-wide counters.")
      .def(
          "flow_log",
          [](const Simulator& s) { return flow_log_dict(s.network(), s.network().flow_records()); },
          "Per-flow columns (numpy arrays), one row per flow recorded and not yet taken by\n"
          "take_flow_log(), then one per flow alive now, sorted by flow_id. Payload accounting:\n"
          "sent_bytes (highest byte sent), resent_bytes (sent again), delivered_bytes (first copies\n"
          "received), duplicate_bytes, dropped_bytes, in_flight_bytes (now in the fabric): sent + resent\n"
          "= delivered + duplicate + dropped + in flight for every flow at any time. ideal_fct_ps: the\n"
          "flow alone on its idle path, frame by frame (Forwarding::lone_packet_fct_ps).")
      .def(
          "take_flow_log",
          [](Simulator& s) { return flow_log_dict(s.network(), s.network().take_flow_log()); },
          "Move out the rows of the flows that retired since the last call (for streaming them).")
      .def_property_readonly(
          "flow_log_rows", [](const Simulator& s) { return s.network().flow_log_rows(); },
          "Rows recorded and not yet taken.")
      .def(
          "op_flow_stats",
          [](const Simulator& s) {
            const coll::Executor* x = s.executor();
            const size_t n = x ? x->op_start().size() : 0;
            const auto& st = s.network().owner_stats();
            auto col = [&](auto member) {
              return column<int64_t>(n, [&](size_t i) { return i < st.size() ? st[i].*member : int64_t{0}; });
            };
            py::dict d;
            d["flows"] = col(&net::OwnerStats::flows);
            d["retransmits"] = col(&net::OwnerStats::retransmits);
            d["delivered_bytes"] = col(&net::OwnerStats::delivered_bytes);
            d["resent_bytes"] = col(&net::OwnerStats::resent_bytes);
            d["duplicate_bytes"] = col(&net::OwnerStats::duplicate_bytes);
            d["dropped_bytes"] = col(&net::OwnerStats::dropped_bytes);
            d["max_fct_ps"] =
                column<int64_t>(n, [&](size_t i) { return i < st.size() ? st[i].max_fct_ps : -1; });
            return d;
          },
          "Per op (workload rows): totals of its flows that retired so far: flows, retransmits,\n"
          "delivered, resent, duplicate and dropped payload bytes, and the longest flow (max_fct_ps, -1: "
          "none).")
      .def(
          "delivered_bytes",
          [](const Simulator& s) {
            return to_numpy(std::vector<int64_t>(s.network().flows().delivered_bytes));
          },
          "Bytes delivered so far per flow slot (for plain flow sets, whose flows keep their slots:\n"
          "per flow id; for sampling between run() epochs).")
      .def(
          "payload_in_flight",
          [](const Simulator& s) { return to_numpy(s.network().flow_records().in_flight); },
          "Payload bytes per flow now inside the fabric (queued, on a wire or held), in flow_log()'s row\n"
          "order: with its sent, resent, delivered, duplicate and dropped bytes, for conservation checks.")
      .def(
          "flow_rates",
          [](const Simulator& s) {
            const auto& net = s.network();
            std::vector<double> r(net.flows().size());
            for (size_t i = 0; i < r.size(); ++i)
              r[i] = net.transport_of(static_cast<uint32_t>(i)).flow_rate_bps(static_cast<uint32_t>(i));
            return to_numpy(std::move(r));
          },
          "Current sending rate per flow slot (plain flow sets: per flow id), bit/s (rate-based\n"
          "transports; -1 otherwise).")
      .def(
          "port_stats",
          [](const Simulator& s) {
            const net::Network& net = s.network();
            const auto& ports = net.ports();
            const auto& info = net.port_info();
            const size_t n = ports.size();
            auto col_of = [&](const auto& table, auto member) {
              using T = std::decay_t<decltype(table[0].*member)>;
              using Out = std::conditional_t<std::is_same_v<T, uint32_t>, uint32_t, int64_t>;
              return column<Out>(n, [&](size_t i) { return table[i].*member; });
            };
            auto col = [&](auto member) { return col_of(ports, member); };
            auto info_col = [&](auto member) { return col_of(info, member); };
            py::dict d;
            d["port_id"] = column<uint32_t>(n, [](size_t i) { return i; });
            d["link_id"] = info_col(&net::PortInfo::link);
            d["src"] = info_col(&net::PortInfo::node);
            d["dst"] = col(&net::Port::peer);
            d["rate_bps"] = info_col(&net::PortInfo::rate_bps);
            d["buffer_bytes"] = info_col(&net::PortInfo::buffer_bytes);
            d["tx_bytes"] = col(&net::Port::tx_bytes);
            d["tx_packets"] =
                column<int64_t>(n, [&](size_t i) { return net.tx_packets(static_cast<uint32_t>(i)); });
            d["busy_ps"] =
                column<int64_t>(n, [&](size_t i) { return net.busy_ps(static_cast<uint32_t>(i)); });
            d["max_queue_bytes"] = col(&net::Port::max_queue_bytes);
            d["max_ingress_bytes"] = col(&net::Port::max_ingress_bytes);
            d["queued_bytes"] = col(&net::Port::queued_bytes);
            d["drops"] = info_col(&net::PortInfo::drops);
            d["ecn_marks"] = info_col(&net::PortInfo::ecn_marks);
            d["pfc_pauses_sent"] = info_col(&net::PortInfo::pauses);
            return d;
          },
          "Per-port (one direction of a link) columns: ports 2l and 2l+1 are link l's two directions.")
      .def("enable_sampling", &Simulator::enable_sampling, py::arg("period_ps"),
           "Sample queue depths and flow rates every period_ps (ps, > 0) from now on; once.")
      .def(
          "take_samples",
          [](Simulator& s) {
            py::dict d;
            record::Sampler* sp = s.sampler();
            if (sp == nullptr) return d;
            auto q = sp->take_queues();
            auto r = sp->take_rates();
            d["queue_time_ps"] = to_numpy(std::move(q.time_ps));
            d["queue_port"] = to_numpy(std::move(q.port));
            d["queue_bytes"] = to_numpy(std::move(q.queue_bytes));
            d["queue_tx_bytes"] = to_numpy(std::move(q.tx_bytes));
            d["rate_time_ps"] = to_numpy(std::move(r.time_ps));
            d["rate_flow_id"] = to_numpy(std::move(r.flow_id));
            d["rate_delivered_bytes"] = to_numpy(std::move(r.delivered_bytes));
            return d;
          },
          "Move out the samples taken so far (empty dict when sampling is off): per (time, port)\n"
          "queue bytes and wire bytes sent in the window; per (time, flow) payload delivered in it.");
}

}  // namespace rfabric::bindings
