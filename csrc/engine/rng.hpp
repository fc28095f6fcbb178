// rng.hpp: deterministic random numbers. One seed per engine; every element derives its
// own stream from (seed, element id), so adding an element never changes another's draws.
#pragma once

#include <cstdint>

namespace rfabric::engine {

/// SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
inline constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Small PRNG (xorshift64*) for per-element streams.
class Rng {
 public:
  explicit Rng(uint64_t seed = 1) : s_(mix64(seed) | 1) {}
  Rng(uint64_t seed, uint64_t stream) : s_(mix64(seed ^ mix64(stream + 0x632be59bd9b4e019ULL)) | 1) {}
  uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1DULL;
  }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

}  // namespace rfabric::engine
