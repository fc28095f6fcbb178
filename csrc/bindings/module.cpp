// module.cpp: the compiled module rfabric._engine. Only registers exceptions and calls bind_*().
#include <pybind11/pybind11.h>

#include "bindings/ndarray.hpp"
#include "engine/check.hpp"
#include "engine/time.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_engine, m) {
  m.doc() = "rfabric's compiled packet engine (private; use the rfabric package).";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rfabric::SpecError& e) {
      py::object cls = py::module_::import("rfabric.errors").attr("SpecError");
      PyErr_SetString(cls.ptr(), e.what());
    }
  });
  m.attr("MAX_TIME_PS") = rfabric::engine::kHorizon;  // == rfabric.units.MAX_TIME_PS (tested)
  rfabric::bindings::bind_engine(m);
  rfabric::bindings::bind_forwarding(m);
  rfabric::bindings::bind_flow(m);
  rfabric::bindings::bind_fluid(m);
}
