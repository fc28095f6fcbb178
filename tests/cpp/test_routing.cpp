// test_routing.cpp: up*/down* tables built key by key on first lookup (fabric/routing.hpp)
// against a whole build. Oracle: every key's cells computed here at once, for every node and
// both phases, by the up*/down* rule written out plainly (descending-only distances by
// decreasing rank, then climbing ones by increasing rank; a next hop is a channel on such a
// shortest way), and the order by its documented rule (breadth-first from the best-connected
// transit node, lowest id on ties, every component in turn). Random graphs with non-transit
// nodes, keys that do not forward, parallel links, one-way failures; then random sequences of
// failures and repairs (the order kept) and circuit changes (ports re-paired: a new order),
// each followed by lookups of a random subset of keys in a random order before every cell is
// compared.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "fabric/routing.hpp"
#include "routing_input.hpp"

using rfabric::net::RoutingInput;
using rfabric::net::RoutingTable;

namespace {

constexpr uint32_t kInf = RoutingTable::kUnreachable;

/// A random fabric as a RoutingInput: nodes with fixed ports (tail), ports paired into
/// channels by `partner` (a circuit plan: any port may face any other).
struct Fabric {
  std::mt19937_64 rng;
  uint32_t n = 0;
  std::vector<uint32_t> tail;  ///< port -> its node
  RoutingInput in;

  explicit Fabric(uint64_t seed) : rng(seed) {
    n = 4 + static_cast<uint32_t>(rng() % 37);
    in.num_nodes = n;
    in.updown = true;
    in.transit.resize(n);
    for (uint32_t v = 0; v < n; ++v) in.transit[v] = rng() % 4 != 0;
    const uint32_t np = 2 * (n + static_cast<uint32_t>(rng() % (3 * n)));
    tail.resize(np);
    for (uint32_t p = 0; p < np; ++p) tail[p] = static_cast<uint32_t>(rng() % n);
    rftest::set_adjacency(in, tail);
    in.port_up.resize(np);
    for (uint32_t p = 0; p < np; ++p) in.port_up[p] = rng() % 8 != 0;
    in.port_reverse.resize(np);
    in.port_peer.resize(np);
    std::vector<uint32_t> all(np);
    std::iota(all.begin(), all.end(), 0u);
    pair(all);
    for (uint32_t v = 0; v < n; ++v)
      if (rng() % 2) in.keys.push_back(v);
    if (in.keys.empty()) in.keys.push_back(static_cast<uint32_t>(rng() % n));
  }
  /// Re-pair the ports `ports` (an even number) at random: a circuit change.
  void pair(std::vector<uint32_t> ports) {
    std::shuffle(ports.begin(), ports.end(), rng);
    for (size_t i = 0; i + 1 < ports.size(); i += 2) {
      const uint32_t a = ports[i], b = ports[i + 1];
      in.port_reverse[a] = b, in.port_reverse[b] = a;
      in.port_peer[a] = tail[b], in.port_peer[b] = tail[a];
    }
  }
  void change_circuits() {
    std::vector<uint32_t> some;
    for (uint32_t p = 0; p < tail.size(); ++p)
      if (rng() % 3 == 0 && p < in.port_reverse[p]) some.push_back(p), some.push_back(in.port_reverse[p]);
    pair(some);
    in.keep_order = false;
  }
  void fail_or_repair() {
    for (int i = 0; i < 3; ++i) {
      const uint32_t p = static_cast<uint32_t>(rng() % tail.size());
      in.port_up[p] = !in.port_up[p];
    }
    in.keep_order = true;
  }
};

/// The order by its rule: breadth-first over live channels between transit nodes from the
/// transit node with the most such channels (lowest id on ties), then from the lowest
/// unranked transit node, until every transit node has a rank.
std::vector<uint32_t> reference_order(const RoutingInput& in) {
  const uint32_t n = in.num_nodes;
  std::vector<uint32_t> rank(n, kInf);
  uint32_t root = kInf, best = 0;
  for (uint32_t v = 0; v < n; ++v) {
    if (!in.transit[v]) continue;
    uint32_t deg = 0;
    for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a)
      deg += in.port_up[in.adj_ports[a]] && in.transit[in.port_peer[in.adj_ports[a]]];
    if (root == kInf || deg > best) root = v, best = deg;
  }
  uint32_t next = 0;
  for (uint32_t start = root; start != kInf;) {
    std::vector<uint32_t> queue{start};
    rank[start] = next++;
    for (size_t i = 0; i < queue.size(); ++i)
      for (uint32_t a = in.adj_begin[queue[i]]; a < in.adj_begin[queue[i] + 1]; ++a) {
        const uint32_t p = in.adj_ports[a], w = in.port_peer[p];
        if (!in.port_up[p] || !in.transit[w] || rank[w] != kInf) continue;
        rank[w] = next++;
        queue.push_back(w);
      }
    start = kInf;
    for (uint32_t v = 0; v < n && start == kInf; ++v)
      if (in.transit[v] && rank[v] == kInf) start = v;
  }
  return rank;
}

/// Every cell of key `k` at once under the order `rank`: [2 node + phase] -> next hops in
/// adjacency order (phase 1: the frame may only keep descending).
std::vector<std::vector<uint32_t>> whole_build(const RoutingInput& in, const std::vector<uint32_t>& rank,
                                               uint32_t k) {
  const uint32_t n = in.num_nodes, key = in.keys[k];
  auto ok = [&](uint32_t p) {
    return in.port_up[p] && (in.transit[in.port_peer[p]] || in.port_peer[p] == key);
  };
  auto ranked = [&](uint32_t v) { return rank[v] != kInf; };
  auto desc = [&](uint32_t v, uint32_t m) { return !ranked(m) || rank[m] > rank[v]; };
  std::vector<uint32_t> nodes;
  for (uint32_t v = 0; v < n; ++v)
    if (ranked(v)) nodes.push_back(v);
  std::sort(nodes.begin(), nodes.end(), [&](uint32_t a, uint32_t b) { return rank[a] < rank[b]; });
  std::vector<uint32_t> down(n, kInf), up(n, kInf);
  down[key] = up[key] = 0;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    for (uint32_t a = in.adj_begin[*it]; a < in.adj_begin[*it + 1]; ++a) {
      const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
      if (*it != key && ok(p) && down[m] != kInf && desc(*it, m))
        down[*it] = std::min(down[*it], down[m] + 1);
    }
  for (const uint32_t v : nodes) {
    if (v == key) continue;
    up[v] = down[v];
    for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
      const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
      if (ok(p) && ranked(m) && !desc(v, m) && up[m] != kInf) up[v] = std::min(up[v], up[m] + 1);
    }
  }
  std::vector<std::vector<uint32_t>> out(2 * n);
  for (uint32_t v = 0; v < n; ++v)
    for (uint32_t phase = 0; phase < 2; ++phase) {
      const uint32_t target = phase ? down[v] : up[v];
      if (!in.transit[v] || !ranked(v) || target == kInf || target == 0) continue;
      for (uint32_t a = in.adj_begin[v]; a < in.adj_begin[v + 1]; ++a) {
        const uint32_t p = in.adj_ports[a], m = in.port_peer[p];
        if (!ok(p)) continue;
        const uint32_t via = desc(v, m) ? down[m] : (phase ? kInf : up[m]);
        if (via != kInf && via + 1 == target) out[2 * v + phase].push_back(p);
      }
    }
  return out;
}

/// Every cell of `t` equals the whole build's (ports in order, the bundle mark).
void check_all_cells(const RoutingTable& t, const RoutingInput& in, const std::vector<uint32_t>& rank,
                     uint64_t seed, int step) {
  for (uint32_t k = 0; k < in.keys.size(); ++k) {
    const auto want = whole_build(in, rank, k);
    for (uint32_t v = 0; v < in.num_nodes; ++v)
      for (uint32_t phase = 0; phase < 2; ++phase) {
        uint32_t count = 0;
        bool bundle = false;
        const uint32_t* hops = t.next_hops(v, k, &count, phase == 1, &bundle);
        const std::vector<uint32_t> got(hops, hops + count);
        const auto& w = want[2 * v + phase];
        CHECK_MESSAGE(got == w, "seed ", seed, " step ", step, " node ", v, " key ", k, " phase ", phase);
        bool one_peer = w.size() >= 2;
        for (const uint32_t p : w) one_peer = one_peer && in.port_peer[p] == in.port_peer[w[0]];
        CHECK(bundle == one_peer);
      }
  }
}

}  // namespace

TEST_CASE(
    "up*/down* tables built key by key on lookup equal a whole build, through failures and circuit changes") {
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    Fabric f(seed);
    RoutingTable t;
    std::vector<uint32_t> rank;
    for (int step = 0; step < 8; ++step) {
      if (step > 0) (f.rng() % 2 ? f.change_circuits() : f.fail_or_repair());
      t.build(f.in);
      if (f.in.keep_order) {
        for (uint32_t v = 0; v < f.n; ++v) CHECK(t.rank(v) == rank[v]);  // the order is kept
      } else {
        rank = reference_order(f.in);
        for (uint32_t v = 0; v < f.n; ++v) CHECK(t.rank(v) == rank[v]);
      }
      CHECK(t.keys_built() == 0);
      // a few lookups first, in a random order, from random nodes (transit or not)
      std::vector<uint32_t> keys(f.in.keys.size());
      std::iota(keys.begin(), keys.end(), 0u);
      std::shuffle(keys.begin(), keys.end(), f.rng);
      keys.resize(f.rng() % (keys.size() + 1));
      std::vector<uint8_t> asked(f.in.keys.size(), 0);
      for (const uint32_t k : keys) {
        uint32_t count = 0;
        const uint32_t v = static_cast<uint32_t>(f.rng() % f.n);
        t.next_hops(v, k, &count, f.rng() % 2);
        asked[k] = f.in.transit[v];  // (a node with no cells asks nothing of the key)
      }
      CHECK(t.keys_built() == static_cast<uint32_t>(std::count(asked.begin(), asked.end(), 1)));
      check_all_cells(t, f.in, rank, seed, step);
      // (every node asked about every key: built unless no node has cells)
      const bool cells = std::count(f.in.transit.begin(), f.in.transit.end(), 1) > 0;
      CHECK(t.keys_built() == (cells ? f.in.keys.size() : 0u));
    }
  }
}

TEST_CASE("up*/down* tables: a lookup answers the same whichever keys were built before it") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Fabric f(seed);
    RoutingTable a, b;
    a.build(f.in);
    b.build(f.in);
    // a: keys in order; b: in reverse, each answer compared before the next lookup
    const uint32_t nk = static_cast<uint32_t>(f.in.keys.size());
    for (uint32_t i = 0; i < nk; ++i)
      for (uint32_t v = 0; v < f.n; ++v) {
        uint32_t ca = 0, cb = 0;
        const uint32_t* ha = a.next_hops(v, i, &ca);
        const std::vector<uint32_t> ga(ha, ha + ca);
        const uint32_t* hb = b.next_hops(v, nk - 1 - i, &cb);
        const std::vector<uint32_t> gb(hb, hb + cb);
        const uint32_t* ha2 = b.next_hops(v, i, &cb);
        CHECK(std::vector<uint32_t>(ha2, ha2 + cb) == ga);
        const uint32_t* hb2 = a.next_hops(v, nk - 1 - i, &ca);
        CHECK(std::vector<uint32_t>(hb2, hb2 + ca) == gb);
      }
  }
}
