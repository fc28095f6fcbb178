// ndarray.hpp: numpy <-> std::vector at the boundary. Inputs are copied into engine-owned
// vectors (no aliasing of Python buffers during run); outputs move a vector into a capsule
// that owns it and becomes the array's base, so no copy is made on the way out.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "engine/check.hpp"

namespace rfabric::bindings {

namespace py = pybind11;

template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({heap->size()}, {sizeof(T)}, heap->data(), owner);
}

/// A result column of n values computed by f(i), as a numpy array.
template <class T, class F>
py::array_t<T> column(size_t n, F f) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(f(i));
  return to_numpy(std::move(v));
}

/// A 1-d C-contiguous array of T over `obj`, without a copy where its dtype and layout are
/// already those (else converted once): read in place, e.g. a large array passed per call.
template <typename T>
py::array_t<T, py::array::c_style | py::array::forcecast> array_view(const py::handle& obj,
                                                                     const char* name) {
  py::array_t<T, py::array::c_style | py::array::forcecast> a;
  try {
    a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(obj);
  } catch (const py::error_already_set&) {
    throw SpecError(std::string(name) + ": not convertible to an array");
  }
  if (!a) throw SpecError(std::string(name) + ": not convertible to an array");
  if (a.ndim() != 1) throw SpecError(std::string(name) + ": expected a 1-d array");
  return a;
}

template <class T>
std::vector<T> from_numpy(const py::handle& obj, const char* name) {
  const auto a = array_view<T>(obj, name);
  return std::vector<T>(a.data(), a.data() + a.size());
}

void bind_engine(py::module_& m);
void bind_forwarding(py::module_& m);
void bind_flow(py::module_& m);
void bind_fluid(py::module_& m);

}  // namespace rfabric::bindings
