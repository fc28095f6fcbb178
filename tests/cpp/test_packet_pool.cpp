// test_packet_pool.cpp: the packet pool (net/packet.hpp). Oracle: a std::set of the indices
// handed out and not yet released, and the pool's contract: an index is never handed out
// twice while live, released indices are reused (last released first) before the pool grows,
// so its capacity is the peak number of packets alive at once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "engine/check.hpp"
#include "packet/packet.hpp"

using rfabric::net::Packet;
using rfabric::net::PacketPool;

namespace {
std::set<uint32_t> live_flows(const PacketPool& pool) {
  std::set<uint32_t> out;
  pool.for_each_live([&](const Packet& p) { out.insert(p.flow); });
  return out;
}
}  // namespace

TEST_CASE("PacketPool hands out fresh indices, then reuses released ones last-in first-out") {
  PacketPool pool;
  CHECK(pool.live() == 0);
  CHECK(pool.capacity() == 0);
  std::vector<uint32_t> got;
  for (int i = 0; i < 5; ++i) got.push_back(pool.alloc());
  CHECK(got == std::vector<uint32_t>{0, 1, 2, 3, 4});
  CHECK(pool.live() == 5);
  pool.release(1);
  pool.release(3);
  CHECK(pool.live() == 3);
  CHECK(pool.alloc() == 3);  // the last released
  CHECK(pool.alloc() == 1);
  CHECK(pool.capacity() == 5);  // no growth while released slots remained
  CHECK(pool.alloc() == 5);     // then a new one
  CHECK(pool.capacity() == 6);
  CHECK(pool.live() == 6);
}

TEST_CASE("PacketPool keeps each packet's fields and its ends apart from the others'") {
  PacketPool pool;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 100; ++i) {
    const uint32_t p = pool.alloc();
    ids.push_back(p);
    pool[p].flow = 1000 + i;
    pool[p].dst = i;
    pool[p].size_bytes = 64 * i;
    pool.ends(p).aux = 7 * i;
    pool.ends(p).sent_ps = 1'000'000 + i;
  }
  for (uint32_t i = 0; i < 100; ++i) {  // growth moved the storage: the values moved with it
    const PacketPool& c = pool;
    CHECK(c[ids[i]].flow == 1000 + i);
    CHECK(c[ids[i]].dst == i);
    CHECK(c[ids[i]].size_bytes == 64 * i);
    CHECK(c.ends(ids[i]).aux == 7 * i);
    CHECK(c.ends(ids[i]).sent_ps == 1'000'000 + i);
  }
}

TEST_CASE("PacketPool for_each_live visits exactly the packets alive") {
  PacketPool pool;
  for (uint32_t i = 0; i < 10; ++i) pool[pool.alloc()].flow = i;
  for (const uint32_t i : {0u, 4u, 9u, 5u}) pool.release(i);
  CHECK(live_flows(pool) == std::set<uint32_t>{1, 2, 3, 6, 7, 8});
  pool[pool.alloc()].flow = 42;  // reuses 5
  CHECK(live_flows(pool) == std::set<uint32_t>{1, 2, 3, 6, 7, 8, 42});
}

TEST_CASE("PacketPool matches a set of live indices under random traffic") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    PacketPool pool;
    std::set<uint32_t> live;
    std::vector<uint32_t> released;  // in release order: the next alloc takes the back
    size_t peak = 0;
    for (int step = 0; step < 5000; ++step) {
      // bursts of growth and drain, as a congested then draining fabric
      const bool grow = (step / 500) % 2 == 0 ? rng() % 3 != 0 : rng() % 3 == 0;
      if (grow || live.empty()) {
        const uint32_t p = pool.alloc();
        REQUIRE(live.count(p) == 0);  // never handed out twice
        if (!released.empty()) {
          REQUIRE(p == released.back());
          released.pop_back();
        } else {
          REQUIRE(p == pool.capacity() - 1);  // a new slot only when none was free
        }
        live.insert(p);
        pool[p].flow = p ^ 0x5a5a;
      } else {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        const uint32_t p = *it;
        REQUIRE(pool[p].flow == (p ^ 0x5a5a));  // nobody overwrote it while alive
        live.erase(it);
        pool.release(p);
        released.push_back(p);
      }
      peak = std::max(peak, live.size());
      REQUIRE(pool.live() == live.size());
      REQUIRE(pool.capacity() == peak);
    }
    std::set<uint32_t> want;
    for (const uint32_t p : live) want.insert(p ^ 0x5a5a);
    CHECK(live_flows(pool) == want);
  }
}

TEST_CASE("PacketPool refuses a release with nothing alive (debug checks)") {
  PacketPool pool;
  CHECK_THROWS_AS(pool.release(0), rfabric::InternalError);
  const uint32_t p = pool.alloc();
  pool.release(p);
  CHECK_THROWS_AS(pool.release(p), rfabric::InternalError);  // live() is 0 again
}
