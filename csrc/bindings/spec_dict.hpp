// spec_dict.hpp: the spec and config dicts Python passes in (rfabric.spec.NetworkSpec.arrays(),
// rfabric.EngineConfig.to_engine()), turned into engine structs; SpecError names what is wrong.
#pragma once

#include <pybind11/pybind11.h>

#include "net/spec.hpp"

namespace rfabric::bindings {

namespace py = pybind11;

/// d[key], or SpecError naming what is missing.
py::handle require(const py::dict& d, const char* key, const char* what);
net::NetworkSpec spec_from_dict(const py::dict& d);
net::EngineConfig config_from_dict(const py::dict& d);

}  // namespace rfabric::bindings
