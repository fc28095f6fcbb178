// test_forwarding.cpp: the forwarding layer both backends share (net/forwarding.hpp,
// net/routing.hpp). Oracles: shortest hop counts found here by BFS over the spec's links
// that are up; paths checked link by link against the spec; the spreading rules as
// documented (flow hashing near uniform, D-mod-K one tree per destination, a bundle of
// parallel links keeping a frame's place); and, for the routing tables on random graphs,
// the ECMP next-hop sets from distances computed here by relaxation.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "fabric/forwarding.hpp"
#include "fabric/routing.hpp"
#include "routing_input.hpp"
#include "spec_builder.hpp"

using rfabric::net::EngineConfig;
using rfabric::net::Forwarding;
using rfabric::net::kNone;
using rfabric::net::RoutingInput;
using rfabric::net::RoutingTable;
using rftest::port_head;
using rftest::port_of;
using rftest::port_tail;
using rftest::SpecBuilder;

namespace {

/// Hops on a shortest path from node a to node z over links up, through switches only.
uint32_t bfs_hops(const SpecBuilder& b, const std::vector<bool>& link_up, uint32_t a, uint32_t z) {
  std::vector<uint32_t> dist(b.num_nodes(), UINT32_MAX);
  std::vector<uint32_t> queue{a};
  dist[a] = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const uint32_t x = queue[i];
    if (x != a && b.spec.node_kind[x] != static_cast<uint8_t>(rftest::NodeKind::Eps)) continue;
    for (uint32_t p = 0; p < 2 * b.num_links(); ++p) {
      if (!link_up[p / 2] || port_tail(b, p) != x) continue;
      const uint32_t y = port_head(b, p);
      if (dist[y] != UINT32_MAX) continue;
      dist[y] = dist[x] + 1;
      queue.push_back(y);
    }
  }
  return dist[z];
}

/// `path` goes port by port from node a to node z over links up, and is a shortest such path.
void check_shortest_path(const SpecBuilder& b, const std::vector<bool>& link_up,
                         const std::vector<uint32_t>& path, uint32_t a, uint32_t z) {
  REQUIRE(!path.empty());
  CHECK(port_tail(b, path.front()) == a);
  CHECK(port_head(b, path.back()) == z);
  for (size_t i = 0; i < path.size(); ++i) {
    CHECK(link_up[path[i] / 2]);
    if (i > 0) CHECK(port_tail(b, path[i]) == port_head(b, path[i - 1]));
  }
  CHECK(path.size() == bfs_hops(b, link_up, a, z));
}

/// Leaf-spine: `leaves` leaves with `per_leaf` GPUs each, `spines` spines, `par` parallel
/// links between each leaf and each spine. GPU g sits under leaf g / per_leaf.
struct LeafSpine {
  SpecBuilder b;
  std::vector<uint32_t> gpu, leaf, spine;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> trunk;  // (leaf i, spine j) -> links
  LeafSpine(uint32_t leaves, uint32_t per_leaf, uint32_t spines, uint32_t par = 1) {
    for (uint32_t g = 0; g < leaves * per_leaf; ++g) gpu.push_back(b.gpu());
    for (uint32_t i = 0; i < leaves; ++i) leaf.push_back(b.eps(200));
    for (uint32_t j = 0; j < spines; ++j) spine.push_back(b.eps(300));
    for (uint32_t g = 0; g < gpu.size(); ++g) b.link(gpu[g], leaf[g / per_leaf], 400'000'000'000, 1000);
    for (uint32_t i = 0; i < leaves; ++i)
      for (uint32_t j = 0; j < spines; ++j)
        for (uint32_t k = 0; k < par; ++k)
          trunk[{i, j}].push_back(b.link(leaf[i], spine[j], 100'000'000'000, 5000));
  }
  /// The spine a path between two leaves crosses (its second port's tail).
  uint32_t spine_of(const std::vector<uint32_t>& path) const {
    const uint32_t s = port_tail(b, path.at(2));
    const auto it = std::find(spine.begin(), spine.end(), s);
    REQUIRE(it != spine.end());
    return static_cast<uint32_t>(it - spine.begin());
  }
};

EngineConfig flow_hashing() {
  EngineConfig cfg;
  cfg.ecmp_dmodk = false;  // all three ecmp_* off: a flow's hash picks among equal-cost hops
  return cfg;
}

}  // namespace

TEST_CASE("forwarding: next hops and path costs on a hand-built leaf-spine") {
  LeafSpine ls(2, 2, 2);
  const std::vector<bool> up(ls.b.num_links(), true);
  for (const EngineConfig& cfg : {EngineConfig{}, flow_hashing()}) {
    Forwarding fwd(ls.b.spec, cfg);
    REQUIRE(fwd.num_gpus() == 4);
    REQUIRE(fwd.num_ports() == 2 * ls.b.num_links());
    // under one leaf: up to it and straight down, link 0 (g0 -> leaf 0) then link 1 backwards
    CHECK(fwd.path(0, 1, 0) == std::vector<uint32_t>{0, 3});
    CHECK(fwd.first_port(0, 1, 0) == 0);
    for (uint32_t s = 0; s < 4; ++s)
      for (uint32_t d = 0; d < 4; ++d)
        for (uint32_t h = 0; h < 32 && s != d; ++h) {
          const auto path = fwd.path(s, d, h * 0x9e3779b9u);
          check_shortest_path(ls.b, up, path, ls.gpu[s], ls.gpu[d]);
          CHECK(path.size() == (s / 2 == d / 2 ? 2u : 4u));
        }
    // latency: links 1 + 5 + 5 + 1 ns, nodes leaf 0.2 + spine 0.3 + leaf 0.2 ns (+ the GPU's
    // 0); rate: the slowest port, a 100 Gb/s trunk
    const auto [lat, rate] = fwd.path_cost(fwd.path(0, 3, 7));
    CHECK(lat == 1000 + 200 + 5000 + 300 + 5000 + 200 + 1000);
    CHECK(rate == 100'000'000'000);
  }
}

TEST_CASE("forwarding: flow hashing spreads a pair's flows over the spines") {
  LeafSpine ls(2, 2, 4);
  Forwarding fwd(ls.b.spec, flow_hashing());
  std::vector<uint32_t> per_spine(4, 0);
  std::set<std::vector<uint32_t>> distinct;
  const uint32_t n = 4000;
  for (uint32_t h = 0; h < n; ++h) {
    const auto path = fwd.path(0, 2, h);
    ++per_spine[ls.spine_of(path)];
    CHECK(fwd.path(0, 2, h) == path);  // one hash, one path
    distinct.insert(path);
  }
  CHECK(distinct.size() == 4);
  // uniform hashing: 1000 expected per spine, standard deviation ~27
  for (const uint32_t c : per_spine) CHECK((c > 850 && c < 1150));
}

TEST_CASE("forwarding: D-mod-K reaches each destination over one tree, neighbours over different spines") {
  LeafSpine ls(2, 4, 4);  // 4 GPUs per leaf, 4 spines
  Forwarding fwd(ls.b.spec, EngineConfig{});
  // from leaf 0, the four GPUs of leaf 1 (consecutive D-mod-K indices) go over four spines,
  // whatever the source and the flow's hash
  for (uint32_t s = 0; s < 4; ++s) {
    std::set<uint32_t> spines;
    for (uint32_t d = 4; d < 8; ++d) {
      const uint32_t sp = ls.spine_of(fwd.path(s, d, 0));
      for (uint32_t h = 1; h < 50; ++h) CHECK(ls.spine_of(fwd.path(s, d, h * 7919)) == sp);
      spines.insert(sp);
      // and every source reaches d over the same spine: one tree per destination
      CHECK(ls.spine_of(fwd.path(0, d, 0)) == sp);
    }
    CHECK(spines.size() == 4);
  }
}

namespace {

// A k = 4 fat-tree: 4 pods of 2 edge and 2 aggregation switches, 4 cores, 2 GPUs per edge
// switch; agg j of every pod connects to cores 2j and 2j + 1. `edge_agg`: the edge-agg links.
struct FatTreeK4 {
  SpecBuilder b;
  std::vector<uint32_t> gpu, edge, agg, core, edge_agg;
  FatTreeK4() {
    for (uint32_t g = 0; g < 16; ++g) gpu.push_back(b.gpu());
    for (uint32_t e = 0; e < 8; ++e) edge.push_back(b.eps());
    for (uint32_t a = 0; a < 8; ++a) agg.push_back(b.eps());
    for (uint32_t c = 0; c < 4; ++c) core.push_back(b.eps());
    for (uint32_t g = 0; g < 16; ++g) b.link(gpu[g], edge[g / 2]);
    for (uint32_t e = 0; e < 8; ++e)
      for (uint32_t j = 0; j < 2; ++j) edge_agg.push_back(b.link(edge[e], agg[2 * (e / 2) + j]));
    for (uint32_t a = 0; a < 8; ++a)
      for (uint32_t j = 0; j < 2; ++j) b.link(agg[a], core[2 * (a % 2) + j]);
  }
};

}  // namespace

TEST_CASE("forwarding: D-mod-K on a k = 4 fat-tree spreads a remote pod's GPUs over all cores") {
  // D-mod-K picks the agg by a destination's place under its edge switch and the core by
  // that switch's rank: the four GPUs of a remote pod come in over the four cores, so a
  // source leaf's traffic to them shares no core link.
  FatTreeK4 ft;
  const SpecBuilder& b = ft.b;
  const std::vector<uint32_t>& gpu = ft.gpu;
  const std::vector<bool> up(b.num_links(), true);
  Forwarding fwd(b.spec, EngineConfig{});
  for (uint32_t s = 0; s < 4; ++s)  // the GPUs of pod 0
    for (uint32_t pod = 1; pod < 4; ++pod) {
      std::set<uint32_t> cores;
      for (uint32_t d = 4 * pod; d < 4 * pod + 4; ++d) {
        const auto path = fwd.path(s, d, 0);
        check_shortest_path(b, up, path, gpu[s], gpu[d]);
        REQUIRE(path.size() == 6);
        for (uint32_t h = 1; h < 20; ++h) CHECK(fwd.path(s, d, h * 40503u) == path);  // one tree
        cores.insert(port_head(b, path[2]));
      }
      CHECK(cores.size() == 4);
    }
}

TEST_CASE("forwarding: a failed link is avoided, and used again once repaired") {
  LeafSpine ls(2, 2, 2);
  for (const EngineConfig& cfg : {EngineConfig{}, flow_hashing()}) {
    Forwarding fwd(ls.b.spec, cfg);
    std::vector<bool> up(ls.b.num_links(), true);
    const uint32_t cut = ls.trunk[{0, 0}][0];  // leaf 0 - spine 0
    auto set = [&](uint32_t link, bool on) {
      up[link] = on;
      fwd.set_link_up(link, on);
      fwd.update_channels(0);
      fwd.rebuild();
    };
    set(cut, false);
    CHECK_FALSE(fwd.channel(2 * cut).up);
    CHECK_FALSE(fwd.channel(2 * cut + 1).up);
    for (uint32_t h = 0; h < 64; ++h)
      for (const auto& [s, d] : {std::pair<uint32_t, uint32_t>{0, 2}, {1, 3}, {2, 0}, {3, 1}, {0, 3}}) {
        const auto path = fwd.path(s, d, h * 2654435761u);
        check_shortest_path(ls.b, up, path, ls.gpu[s], ls.gpu[d]);
        CHECK(ls.spine_of(path) == 1);
      }
    // the other uplink too: leaf 0 is cut off from leaf 1, but not from its own GPUs
    const uint32_t cut2 = ls.trunk[{0, 1}][0];
    set(cut2, false);
    for (uint32_t h = 0; h < 8; ++h) {
      const auto path = fwd.path(0, 2, h);
      CHECK((path.empty() || port_head(ls.b, path.back()) != ls.gpu[2]));
      CHECK(fwd.path(0, 1, h) == std::vector<uint32_t>{0, 3});
    }
    // repaired: spine 0 carries traffic again, the paths shortest over all links
    set(cut2, true);
    set(cut, true);
    std::set<uint32_t> spines;
    for (uint32_t h = 0; h < 64; ++h)
      for (uint32_t d = 2; d < 4; ++d) {
        const auto path = fwd.path(0, d, h * 2654435761u);
        check_shortest_path(ls.b, up, path, ls.gpu[0], ls.gpu[d]);
        spines.insert(ls.spine_of(path));
      }
    CHECK(spines.size() == 2);
  }
}

TEST_CASE("forwarding: a bundle of parallel links is used link by link, and keeps a frame's place") {
  // two parallel links between each leaf and each spine, four GPUs per leaf
  LeafSpine ls(2, 4, 2, /*par=*/2);
  const std::vector<bool> up(ls.b.num_links(), true);
  for (const EngineConfig& cfg : {EngineConfig{}, flow_hashing()}) {
    CAPTURE(cfg.ecmp_dmodk);
    Forwarding fwd(ls.b.spec, cfg);
    for (const auto& [ij, links] : ls.trunk) {
      const uint32_t l = ls.leaf[ij.first];
      std::set<uint32_t> slots;
      for (const uint32_t link : links) {
        CHECK(fwd.bundle_size(port_of(ls.b, link, l)) == 2);
        slots.insert(fwd.bundle_slot(port_of(ls.b, link, l)));
      }
      CHECK(slots == std::set<uint32_t>{0, 1});
    }
    CHECK(fwd.bundle_size(0) == 1);  // a GPU's single link
    // Over flows from leaf 0 to the four GPUs of leaf 1 every one of leaf 0's four uplinks
    // and leaf 1's four downlinks carries some (D-mod-K: one uplink per destination, and four
    // destinations); a frame that came up over link j of its bundle goes down over link j of
    // the next (bundle_pick: (j + m c) mod count, m = 2 = count).
    std::set<uint32_t> ups, downs;
    for (uint32_t h = 0; h < 400; ++h)
      for (uint32_t d = 4; d < 8; ++d) {
        const uint32_t src = h % 4;
        const auto path = fwd.path(src, d, h * 2654435761u);
        check_shortest_path(ls.b, up, path, ls.gpu[src], ls.gpu[d]);
        ups.insert(path[1] / 2);
        downs.insert(path[2] / 2);
        CHECK(fwd.bundle_slot(path[1]) == fwd.bundle_slot(path[2]));
      }
    CHECK(ups.size() == 4);
    CHECK(downs.size() == 4);
  }
}

TEST_CASE(
    "forwarding: flows between two switches spread over their parallel links; a failed one is left out") {
  // leaf 0 ==3 links== leaf 1, two GPUs each
  SpecBuilder b;
  const uint32_t g0 = b.gpu(), g1 = b.gpu(), g2 = b.gpu(), g3 = b.gpu(), l0 = b.eps(), l1 = b.eps();
  b.link(g0, l0);
  b.link(g1, l0);
  b.link(g2, l1);
  b.link(g3, l1);
  const std::vector<uint32_t> bundle{b.link(l0, l1), b.link(l0, l1), b.link(l0, l1)};
  std::vector<bool> up(b.num_links(), true);
  Forwarding fwd(b.spec, flow_hashing());
  std::map<uint32_t, uint32_t> per_link;
  const uint32_t n = 3000;
  for (uint32_t h = 0; h < n; ++h) {
    const auto path = fwd.path(0, 2, h);
    check_shortest_path(b, up, path, g0, g2);
    ++per_link[path[1] / 2];
  }
  REQUIRE(per_link.size() == 3);
  for (const uint32_t l : bundle) CHECK((per_link[l] > 850 && per_link[l] < 1150));  // 1000 +- 26 sd
  // the middle link fails: the other two carry everything, and form a bundle of two
  up[bundle[1]] = false;
  fwd.set_link_up(bundle[1], false);
  fwd.update_channels(0);
  fwd.rebuild();
  CHECK(fwd.bundle_size(port_of(b, bundle[0], l0)) == 2);
  per_link.clear();
  for (uint32_t h = 0; h < n; ++h) {
    const auto path = fwd.path(1, 3, h);
    check_shortest_path(b, up, path, g1, g3);
    ++per_link[path[1] / 2];
  }
  CHECK(per_link.count(bundle[1]) == 0);
  CHECK(per_link.size() == 2);
}

namespace {

/// A random connected fabric of `nsw` switches (a random tree plus extra links, parallel
/// ones possible) with one GPU on each switch; GPU g on switch g.
SpecBuilder random_fabric(std::mt19937_64& rng, uint32_t nsw, uint32_t extra) {
  SpecBuilder b;
  for (uint32_t i = 0; i < nsw; ++i) b.gpu();
  for (uint32_t i = 0; i < nsw; ++i) b.eps();
  for (uint32_t i = 0; i < nsw; ++i) b.link(i, nsw + i);
  for (uint32_t i = 1; i < nsw; ++i) b.link(nsw + static_cast<uint32_t>(rng() % i), nsw + i);
  for (uint32_t k = 0; k < extra; ++k) {
    const uint32_t a = static_cast<uint32_t>(rng() % nsw), c = static_cast<uint32_t>(rng() % nsw);
    if (a != c) b.link(nsw + a, nsw + c);
  }
  return b;
}

/// The channel dependency graph of `paths` (an edge from each port to the next on a path,
/// between switches) has a cycle: under PFC, a possible deadlock.
bool dependency_cycle(uint32_t ports, const std::vector<std::vector<uint32_t>>& paths) {
  std::vector<std::set<uint32_t>> next(ports);
  for (const auto& path : paths)
    for (size_t i = 0; i + 1 < path.size(); ++i) next[path[i]].insert(path[i + 1]);
  std::vector<uint8_t> state(ports, 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<uint32_t, std::set<uint32_t>::const_iterator>> stack;
  for (uint32_t s = 0; s < ports; ++s) {
    if (state[s]) continue;
    state[s] = 1;
    stack.emplace_back(s, next[s].begin());
    while (!stack.empty()) {
      auto& [v, it] = stack.back();
      if (it == next[v].end()) {
        state[v] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t w = *it++;
      if (state[w] == 1) return true;
      if (state[w] == 0) {
        state[w] = 1;
        stack.emplace_back(w, next[w].begin());
      }
    }
  }
  return false;
}

}  // namespace

TEST_CASE("forwarding: random fabrics with failed links: paths are shortest where BFS finds a way") {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    const uint32_t nsw = 3 + static_cast<uint32_t>(rng() % 6);
    SpecBuilder b = random_fabric(rng, nsw, 1 + static_cast<uint32_t>(rng() % (2 * nsw)));
    EngineConfig cfg;
    cfg.ecmp_dmodk = seed % 2 == 0;  // D-mod-K and flow hashing alike
    Forwarding fwd(b.spec, cfg);
    std::vector<bool> up(b.num_links(), true);
    for (uint32_t l = nsw; l < b.num_links(); ++l)  // switch-to-switch links only
      if (rng() % 4 == 0) {
        up[l] = false;
        fwd.set_link_up(l, false);
      }
    fwd.update_channels(0);
    fwd.rebuild();
    for (uint32_t s = 0; s < nsw; ++s)
      for (uint32_t d = 0; d < nsw; ++d) {
        if (s == d) continue;
        const bool reachable = bfs_hops(b, up, s, d) != UINT32_MAX;
        for (uint32_t h = 0; h < 4; ++h) {
          const auto path = fwd.path(s, d, static_cast<uint32_t>(rng()));
          CAPTURE(seed);
          CAPTURE(s);
          CAPTURE(d);
          if (reachable) {
            check_shortest_path(b, up, path, s, d);
          } else {
            CHECK((path.empty() || port_head(b, path.back()) != d));
          }
        }
      }
  }
}

TEST_CASE("forwarding: up*/down* routes every pair with no cyclic buffer dependency") {
  // On random meshes of switches (deadlock_free: up*/down*), every pair is reached and the
  // channel dependency graph of all the paths is acyclic, so PFC cannot deadlock; shortest-
  // path routing on a ring of six switches has a cycle (the check can fail).
  {
    SpecBuilder ring;
    for (uint32_t i = 0; i < 6; ++i) ring.gpu();
    for (uint32_t i = 0; i < 6; ++i) ring.eps();
    for (uint32_t i = 0; i < 6; ++i) ring.link(i, 6 + i);
    for (uint32_t i = 0; i < 6; ++i) ring.link(6 + i, 6 + (i + 1) % 6);
    for (const bool updown : {false, true}) {
      ring.spec.deadlock_free = updown;
      Forwarding fwd(ring.spec, EngineConfig{});
      std::vector<std::vector<uint32_t>> paths;
      for (uint32_t s = 0; s < 6; ++s)
        for (uint32_t d = 0; d < 6; ++d)
          for (uint32_t h = 0; h < 8 && s != d; ++h) paths.push_back(fwd.path(s, d, h * 2654435761u));
      CHECK(dependency_cycle(fwd.num_ports(), paths) == !updown);
    }
  }
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const uint32_t nsw = 4 + static_cast<uint32_t>(rng() % 6);
    SpecBuilder b = random_fabric(rng, nsw, nsw + static_cast<uint32_t>(rng() % nsw));
    b.spec.deadlock_free = true;
    EngineConfig cfg;
    cfg.ecmp_dmodk = seed % 2 == 0;
    Forwarding fwd(b.spec, cfg);
    REQUIRE(fwd.updown());
    // the orientation: every switch-to-switch link descends one way only, and the hops down
    // form no cycle (a total order of the switches), so a path never returns to a switch
    std::vector<std::vector<uint32_t>> down_hops;
    for (uint32_t l = nsw; l < b.num_links(); ++l) {
      const uint32_t x = b.spec.link_src[l], y = b.spec.link_dst[l];
      CHECK(fwd.descends(x, y) != fwd.descends(y, x));
      down_hops.push_back(fwd.descends(x, y) ? std::vector<uint32_t>{2 * l}
                                             : std::vector<uint32_t>{2 * l + 1});
    }
    std::vector<std::vector<uint32_t>> chains;  // down hops chained port to port
    for (const auto& a : down_hops)
      for (const auto& c : down_hops)
        if (port_head(b, a[0]) == port_tail(b, c[0])) chains.push_back({a[0], c[0]});
    CHECK_FALSE(dependency_cycle(fwd.num_ports(), chains));
    std::vector<std::vector<uint32_t>> paths;
    for (uint32_t s = 0; s < nsw; ++s)
      for (uint32_t d = 0; d < nsw; ++d)
        for (uint32_t h = 0; h < 6 && s != d; ++h) {
          const auto path = fwd.path(s, d, static_cast<uint32_t>(rng()));
          CAPTURE(seed);
          REQUIRE(!path.empty());
          CHECK(port_tail(b, path.front()) == s);
          CHECK(port_head(b, path.back()) == d);
          for (size_t i = 1; i < path.size(); ++i) CHECK(port_tail(b, path[i]) == port_head(b, path[i - 1]));
          // up*/down*: between switches, no hop up after a hop down
          bool down = false;
          for (size_t i = 1; i + 1 < path.size(); ++i) {
            const bool d_hop = fwd.descends(port_tail(b, path[i]), port_head(b, path[i]));
            CHECK_FALSE((down && !d_hop));
            down = down || d_hop;
          }
          paths.push_back(path);
        }
    CHECK_MESSAGE(!dependency_cycle(fwd.num_ports(), paths), "seed ", seed);
  }
}

TEST_CASE("routing tables: ECMP next-hop sets on random graphs match distances found by relaxation") {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const uint32_t n = 3 + static_cast<uint32_t>(rng() % 10);
    RoutingInput in;
    in.num_nodes = n;
    in.transit.resize(n);
    for (uint32_t v = 0; v < n; ++v) in.transit[v] = rng() % 4 != 0;
    // random links (parallel ones included), each direction up or down on its own
    std::vector<std::pair<uint32_t, uint32_t>> links;
    const uint32_t m = n + static_cast<uint32_t>(rng() % (2 * n));
    while (links.size() < m) {
      const uint32_t a = static_cast<uint32_t>(rng() % n), c = static_cast<uint32_t>(rng() % n);
      if (a != c) links.emplace_back(a, c);
    }
    const uint32_t np = 2 * m;
    in.port_peer.resize(np);
    in.port_reverse.resize(np);
    in.port_up.resize(np);
    std::vector<uint32_t> tail(np);
    for (uint32_t l = 0; l < m; ++l) {
      tail[2 * l] = links[l].first, in.port_peer[2 * l] = links[l].second;
      tail[2 * l + 1] = links[l].second, in.port_peer[2 * l + 1] = links[l].first;
      in.port_reverse[2 * l] = 2 * l + 1, in.port_reverse[2 * l + 1] = 2 * l;
      in.port_up[2 * l] = rng() % 8 != 0;
      in.port_up[2 * l + 1] = rng() % 8 != 0;
    }
    rftest::set_adjacency(in, tail);
    for (uint32_t v = 0; v < n; ++v)
      if (rng() % 2) in.keys.push_back(v);
    if (in.keys.empty()) in.keys.push_back(0);
    in.keep_distances = true;
    RoutingTable t;
    t.build(in);
    REQUIRE(t.num_keys() == in.keys.size());

    for (uint32_t k = 0; k < in.keys.size(); ++k) {
      const uint32_t key = in.keys[k];
      // distances toward the key by relaxation: a transit node is one hop further than the
      // nearest node it has an up port to that is the key or a transit node
      constexpr uint32_t kInf = UINT32_MAX;
      std::vector<uint32_t> dist(n, kInf);
      dist[key] = 0;
      for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t p = 0; p < np; ++p) {
          const uint32_t x = tail[p], y = in.port_peer[p];
          if (!in.transit[x] || !in.port_up[p] || dist[y] == kInf || (y != key && !in.transit[y])) continue;
          if (dist[y] + 1 < dist[x]) dist[x] = dist[y] + 1, changed = true;
        }
      }
      for (uint32_t x = 0; x < n; ++x) {
        std::vector<uint32_t> want;
        if (in.transit[x] && dist[x] != kInf && dist[x] > 0)
          for (uint32_t p = 0; p < np; ++p) {
            const uint32_t y = in.port_peer[p];
            if (tail[p] == x && in.port_up[p] && dist[y] != kInf && dist[y] + 1 == dist[x] &&
                (y == key || in.transit[y]))
              want.push_back(p);
          }
        uint32_t count = 0;
        bool bundle = false;
        const uint32_t* hops = t.next_hops(x, k, &count, false, &bundle);
        std::vector<uint32_t> got(hops, hops + count);
        std::sort(got.begin(), got.end());
        CHECK_MESSAGE(got == want, "seed ", seed, " node ", x, " key ", key);
        bool one_peer = want.size() >= 2;
        for (const uint32_t p : want) one_peer = one_peer && in.port_peer[p] == in.port_peer[want[0]];
        CHECK(bundle == one_peer);
        if (in.transit[x])
          CHECK(t.distance(x, k) == (dist[x] == kInf ? RoutingTable::kUnreachable : dist[x]));
      }
    }
  }
}

TEST_CASE("forwarding: the next-hop cache answers as fast_next_hop, across hop counts and rebuilds") {
  // The k = 4 fat-tree above: D-mod-K picks at edge and aggregation switches (answers that
  // read the hop count), single next hops elsewhere. Every (node, destination, hop count)
  // asked in a random order, several times, so entries are filled at one hop count and read
  // at others; again after a link fails (the rebuild must drop every entry) and is repaired.
  FatTreeK4 ft;
  SpecBuilder& b = ft.b;
  const std::vector<uint32_t>& edge_agg = ft.edge_agg;
  for (const EngineConfig& cfg : {EngineConfig{}, flow_hashing()}) {
    Forwarding fwd(b.spec, cfg);
    std::mt19937 rng(7);
    uint64_t decided = 0, asked = 0;
    auto check_all = [&] {
      std::vector<std::array<uint32_t, 3>> asks;
      for (uint32_t node = 0; node < b.num_nodes(); ++node)
        for (uint32_t d = 0; d < 16; ++d)
          for (uint32_t h = 0; h < 8; ++h) asks.push_back({node, d, h == 7 ? 255u : h});
      for (int round = 0; round < 3; ++round) {
        std::shuffle(asks.begin(), asks.end(), rng);
        for (const auto& [node, d, h] : asks) {
          const bool eps = b.spec.node_kind[node] == static_cast<uint8_t>(rftest::NodeKind::Eps);
          uint32_t want = 12345, got = 54321;
          const bool fast = fwd.fast_next_hop(node, eps, d, h, want);
          const bool cached = fwd.cached_next_hop(node, d, h, got);
          REQUIRE(cached == fast);
          if (fast) CHECK(got == want);
          // through the node's key, as the packet ports keep it: a GPU's is its id, any other
          // node's never a GPU's, and the answers are the node's
          const uint32_t key = fwd.hop_key(node);
          const int32_t gpu = fwd.nodes()[node].gpu;
          if (gpu >= 0) {
            CHECK(key == static_cast<uint32_t>(gpu));
          } else {
            CHECK(key >= fwd.num_gpus());
          }
          uint32_t by_key = 54321;
          REQUIRE(fwd.cached_next_hop_at(key, node, d, h, by_key) == fast);
          if (fast) CHECK(by_key == want);
          decided += fast;
          ++asked;
        }
      }
    };
    check_all();
    const uint32_t cut = edge_agg[0];  // edge 0 - its first aggregation switch
    fwd.set_link_up(cut, false);
    fwd.update_channels(0);
    fwd.rebuild();
    check_all();
    fwd.set_link_up(cut, true);
    fwd.update_channels(0);
    fwd.rebuild();
    check_all();
    // D-mod-K decides at every switch; flow hashing leaves the multi-hop picks to route_with
    if (cfg.ecmp_dmodk) {
      CHECK(decided > asked / 2);
    } else {
      CHECK(decided > 0);
      CHECK(decided < asked / 2);
    }
  }
}
