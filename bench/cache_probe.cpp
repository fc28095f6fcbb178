// cache_probe.cpp: the load latency this machine gives a random walk over a working set of a
// given size, to tell where its cache hierarchy ends for a process like the engine (see
// bench_scale.py --probe, which builds and runs this). A dependent chain of loads visits every
// 64-byte line of the set once per lap in a random cyclic order (Sattolo's shuffle), so no
// prefetcher can guess the next line and each load waits for the one before: the time per
// load is the latency at that size. Sizes are printed with the time per load on ordinary 4 KiB
// pages (as the engine's vectors get them) and on transparent huge pages (madvise), which
// separates TLB misses from cache misses.
//
//   c++ -O2 -o cache_probe cache_probe.cpp && ./cache_probe 0.25 1 4 8 16 32 64
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

struct alignas(64) Line {
  Line* next;
  char pad[56];
};

/// Nanoseconds per load of a random cyclic walk over `bytes`.
double walk_ns(size_t bytes, bool huge) {
  const size_t n = bytes / sizeof(Line);
  const size_t len = n * sizeof(Line);
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  madvise(mem, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  Line* lines = static_cast<Line*>(mem);
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::mt19937_64 rng(1);
  for (size_t i = n - 1; i > 0; --i) {  // Sattolo: one cycle through all lines
    const size_t j = std::uniform_int_distribution<size_t>(0, i - 1)(rng);
    std::swap(order[i], order[j]);
  }
  for (size_t i = 0; i < n; ++i) lines[order[i]].next = &lines[order[(i + 1) % n]];
  // Warm up one lap (at least 1 M loads), then time laps totalling at least 20 M loads.
  Line* p = &lines[0];
  for (size_t i = 0; i < std::max<size_t>(n, 1u << 20); ++i) p = p->next;
  const size_t loads = std::max<size_t>(n, size_t{20} << 20);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < loads; ++i) p = p->next;
  const auto t1 = std::chrono::steady_clock::now();
  if (p == nullptr) std::puts("");  // keep the chain live
  munmap(mem, len);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(loads);
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("%10s %14s %14s\n", "MiB", "ns/load 4K", "ns/load THP");
  for (int i = 1; i < argc; ++i) {
    const double mib = std::atof(argv[i]);
    const auto bytes = static_cast<size_t>(mib * 1048576.0);
    if (bytes < 4096) continue;
    std::printf("%10g %14.2f %14.2f\n", mib, walk_ns(bytes, false), walk_ns(bytes, true));
    std::fflush(stdout);
  }
  return 0;
}
