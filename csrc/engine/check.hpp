// check.hpp: error reporting for the engine. User-reachable conditions throw SpecError
// (registered in Python as rfabric.SpecError, a ValueError); internal invariants use
// RF_DCHECK, compiled out in release builds. Nothing here aborts the process.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace rfabric {

/// A user mistake in a spec, workload, configuration or plan.
class SpecError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// An internal invariant failed: a bug in rfabric, never the user's input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace rfabric

/// Throw rfabric::SpecError with a streamed message when `cond` is false.
#define RF_CHECK(cond, ...)                                                          \
  do {                                                                               \
    if (!(cond)) throw ::rfabric::SpecError(::rfabric::detail::concat(__VA_ARGS__)); \
  } while (0)

#ifdef RFABRIC_DEBUG
namespace rfabric {
inline constexpr bool kDebugChecks = true;
}
#define RF_DCHECK(cond)                                                                      \
  do {                                                                                       \
    if (!(cond)) throw ::rfabric::InternalError("invariant failed: " #cond " at " __FILE__); \
  } while (0)
#else
namespace rfabric {
inline constexpr bool kDebugChecks = false;
}
#define RF_DCHECK(cond) \
  do {                  \
  } while (0)
#endif
