// time.hpp: simulated time and unit arithmetic. Time is int64 picoseconds everywhere in
// the engine; sizes are int64 bytes and rates int64 bit/s. serialization_time() is the one
// definition of how long a frame occupies a wire. Knows nothing about packets or elements.
#pragma once

#include <cstdint>
#include <limits>

namespace rfabric::engine {

using SimTime = int64_t;     ///< picoseconds
using Bytes = int64_t;       ///< bytes
using BitsPerSec = int64_t;  ///< bit/s

inline constexpr SimTime kPsPerSec = 1'000'000'000'000;
inline constexpr SimTime kNever = std::numeric_limits<SimTime>::max();
/// The horizon (rfabric.units.MAX_TIME_PS, 2^62 - 1 ps, about 53 days): no flow or op starts
/// after it, so any two times within it add up without wrapping. Sums that chain (an op's
/// start = its dependencies' end + compute_ps, over many ops) are checked against it where
/// an op or flow starts, never per packet.
inline constexpr SimTime kHorizon = (SimTime{1} << 62) - 1;

/// Time to put `bytes` on a wire of `rate` bit/s, rounded up to a whole picosecond.
/// Exact integer arithmetic; 128-bit intermediate so any int64 size is safe.
inline SimTime serialization_time(Bytes bytes, BitsPerSec rate) {
  if (bytes < (Bytes{1} << 20)) {  // fast path: bytes*8e12 < 2^63
    const int64_t num = bytes * 8 * kPsPerSec;
    return (num + rate - 1) / rate;
  }
  const __int128 num = static_cast<__int128>(bytes) * 8 * kPsPerSec;
  return static_cast<SimTime>((num + rate - 1) / rate);
}

/// std::llround (nearest, halves away from zero) inline, for |x| < 2^63: libm's call costs
/// about 18 instructions where this takes a few, on paths run per flow. Exact: the
/// truncation is, and so is x minus it (below 2^52 both are multiples of x's last place and
/// differ by less than 1; above, x is a whole number).
inline int64_t round_nearest(double x) {
  const auto t = static_cast<int64_t>(x);
  const double frac = x - static_cast<double>(t);
  return t + static_cast<int64_t>(frac >= 0.5) - static_cast<int64_t>(frac <= -0.5);
}

}  // namespace rfabric::engine
