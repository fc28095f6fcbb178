// spec_dict.hpp: the spec and config dicts Python passes in (rfabric.spec.NetworkSpec.arrays(),
// rfabric.EngineConfig.to_engine()), turned into engine structs; SpecError names what is wrong.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "coll/executor.hpp"
#include "fabric/spec.hpp"

namespace rfabric::bindings {

namespace py = pybind11;

/// d[key], or SpecError naming what is missing.
py::handle require(const py::dict& d, const char* key, const char* what);
net::NetworkSpec spec_from_dict(const py::dict& d);
net::EngineConfig config_from_dict(const py::dict& d);
/// rfabric.traces.Trace.arrays() as the executor's workload.
coll::Workload workload_from_dict(const py::dict& a);
/// The executor's settings: channels, chunk, the fabric's rings (None or channels x GPUs) and
/// the control loop's boundaries ("none", "period", "op").
/// Bytes each op of `ops` (workload rows) would send per directed GPU pair (Engine.op_flows()).
py::dict op_flows_dict(coll::Executor& x, py::handle ops, py::handle algo);
/// The pending control-loop boundary of an executor (Engine.boundary()).
py::dict boundary_dict(const coll::Executor& x);
/// `protocol`: "auto" (the tuner's choice), "ll", "ll128" or "simple"; `nccl_model` false: no
/// protocol costs (line-rate Simple).
coll::ExecutorConfig executor_config(int channels, int64_t chunk_bytes, const py::object& rings,
                                     const std::string& boundaries, bool period_ends = false,
                                     bool nccl_model = true, const std::string& protocol = "auto");

}  // namespace rfabric::bindings
