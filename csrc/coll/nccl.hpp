// nccl.hpp: NCCL's protocol facts (LL, LL128, Simple) that the executor and its tuner use:
// per-step latencies, step sizes, channel thresholds, line formats, the NVLink copy rate.
// Each constant names the NCCL source it was read from; docs/nccl-model.md explains the model
// built around them.
#pragma once

#include <cmath>
#include <cstdint>

#include "coll/executor.hpp"

namespace rfabric::coll {

// NCCL's rule for fewer channels on small messages (its Simple protocol): a channel is used only
// if the op has at least nthreads x per-thread threshold bytes for it, 512 x 64 B = 32 KiB.
inline constexpr Bytes kBytesPerChannel = 512 * 64;

// ---- NCCL's protocol costs (docs/nccl-model.md has each and why). Facts read from NCCL's
// source (github.com/NVIDIA/nccl, 2026 snapshot); the model around them is rfabric's own.
// Launch latency of one collective, us, [tree, ring][LL, LL128, Simple]: the base latencies
// of NCCL's tuner (src/graph/tuning.cc, baseLatencies).
inline constexpr double kBaseUs[2][kNumProtos] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
// Latency of one step over a hop (flag write, poll, proxy post), us, [tree, ring][proto]:
// NCCL's hardware latencies per hop type (src/graph/tuning.cc, hwLatencies NVLINK and NET).
// They are end-to-end figures, so the fabric's own path latency is their part, not added.
inline constexpr double kNvlHopUs[2][kNumProtos] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
inline constexpr double kNetHopUs[2][kNumProtos] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
// Payload per step: LL, 8 lines of 16 B per thread x 512 threads, half of each line data
// (src/include/device.h: NCCL_LL_LINES_PER_THREAD, NCCL_LL_MAX_NTHREADS, union ncclLLFifoLine);
// LL128, 120 8-byte elements per thread x 640 threads, 15 of every 16 elements data
// (NCCL_LL128_ELEMS_PER_THREAD, NCCL_LL128_MAX_NTHREADS, NCCL_LL128_DATAELEMS); the buffers
// hold NCCL_STEPS = 8 such steps (src/init.cc, DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE).
inline constexpr Bytes kLLStep = 8 * 512 * 16 / 2;
inline constexpr Bytes kLL128Step = 120 * 640 * 8 / 16 * 15;
// Per-channel byte thresholds for the channel count (src/enqueue.cc, the loop that lowers the
// channels while bytes < channels x threads x threshold; thresholds in src/include/comm.h,
// NCCL_LL_THREAD_THRESHOLD 8 (times the ranks for a ring), NCCL_LL128_THREAD_THRESHOLD 8).
inline constexpr Bytes kLLBytesPerChannel = 512 * 8;
inline constexpr Bytes kLL128BytesPerChannel = 640 * 8;
// The SM-driven copy through NVLink reaches NCCL's per-link figure for Hopper, 20.6 GB/s
// (src/graph/topo.h, SM90_NVLINK_BW) of an NVLink4 link's 25 GB/s per direction.
inline constexpr double kNvlEfficiency = 20.6 / 25.0;

/// Bytes on the wire for `size` payload bytes under protocol p: an LL line of 16 B carries
/// 8 B of data (and two 4-byte flags), an LL128 line of 128 B carries 120 B (and an 8-byte flag).
inline Bytes wire_bytes(int32_t p, Bytes size) {
  if (p == kLL) return (size + 7) / 8 * 16;
  if (p == kLL128) return (size + 119) / 120 * 128;
  return size;
}
inline int64_t us_to_ps(double us) { return static_cast<int64_t>(std::llround(us * 1e6)); }

}  // namespace rfabric::coll
