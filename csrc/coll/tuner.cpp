// tuner.cpp: how the executor chooses an op's algorithm, protocol and channels as NCCL's
// tuner does (least predicted time over {ring, tree} x {LL, LL128, Simple}), and the path and
// congestion terms its predictions use.
#include <algorithm>
#include <cmath>

#include "coll/executor.hpp"
#include "coll/nccl.hpp"
#include "coll/programs.hpp"

namespace rfabric::coll {

Executor::Choice Executor::tune(int32_t kind, int32_t algo, const std::vector<uint32_t>& ranks,
                                Bytes size) const {
  const bool reduce_like = kind == kAllReduce || kind == kAllGather || kind == kReduceScatter;
  if (algo == kAuto && kind == kBroadcast) algo = kChain;
  if (algo == kAuto && !reduce_like) algo = kDirect;
  if (algo == kAuto && kind != kAllReduce) algo = kRing;
  // NCCL's pipelined kernels (ring, tree, and rfabric's hierarchical ring made of rings) run a
  // protocol; the others (direct, pairwise, halving-doubling, send, M2N) are not NCCL's.
  const bool pipelined =
      (reduce_like && (algo == kAuto || algo == kRing || algo == kTree || algo == kHierRing)) ||
      (kind == kBroadcast && algo != kDirect);
  auto one_server = [&] { return by_server(net_, ranks).size() < 2; };
  if (!cfg_.nccl_model || !pipelined) {
    if (algo == kAuto)
      algo = one_server() ||
                     !(predict(kTree, kNoProto, 2, ranks, size) < predict(kRing, kNoProto, 2, ranks, size))
                 ? kRing
                 : kTree;
    return {algo, kNoProto};
  }
  // As NCCL's tuner (src/graph/tuning.cc, src/enqueue.cc topoGetAlgoInfo): predict each enabled
  // (algorithm, protocol)'s time and take the least; ties go to the earlier (ring, then LL).
  const int passes = kind == kAllReduce ? 2 : 1;
  std::vector<int32_t> algos{algo};
  if (algo == kAuto) algos = one_server() ? std::vector<int32_t>{kRing} : std::vector<int32_t>{kRing, kTree};
  std::vector<int32_t> protos{kLL, kLL128, kSimple};
  if (cfg_.protocol != kNoProto) protos = {cfg_.protocol};
  Choice best{algos[0], protos[0]};
  double least = 0;
  bool first = true;
  for (const int32_t a : algos)
    for (const int32_t p : protos) {
      const double t = predict(a == kTree ? kTree : kRing, p, passes, ranks, size);
      if (first || t < least) best = {a, p}, least = t, first = false;
    }
  return best;
}

double Executor::predict(int32_t algo, int32_t p, int passes, const std::vector<uint32_t>& ranks,
                         Bytes size) const {
  // A latency-bandwidth model of each algorithm's structure, on the fabric's own latencies and
  // rates (the current paths between two servers' GPUs and between two GPUs of a server);
  // traces/README.md gives the formulas, docs/nccl-model.md the protocol terms. p = kNoProto:
  // no protocol costs (the model off).
  const auto groups = by_server(net_, ranks);
  const PathTerms& pt = path_terms(ranks, groups);
  const size_t m = pt.m, servers = pt.servers;
  const double n = static_cast<double>(ranks.size()), s = static_cast<double>(groups.size());
  const double l_net = pt.l_net, b_net = pt.b_net, l_tree = pt.l_tree, l_nvl = pt.l_nvl, b_nvl = pt.b_nvl;
  const bool on = p != kNoProto;
  const int a = algo == kTree ? 0 : 1;
  // protocol terms: wire bytes per payload byte, hop latencies no less than NCCL's per-step
  // figures, the launch latency, the NVLink copy's share of a step's time
  const double w = !on ? 1 : p == kLL ? 2.0 : p == kLL128 ? 128.0 / 120.0 : 1.0;
  const double lat_net = on ? std::max(l_net, 1e6 * kNetHopUs[a][p]) : l_net;
  const double lat_tree = on ? std::max(l_tree, 1e6 * kNetHopUs[0][p]) : l_tree;
  const double lat_nvl = on ? std::max(l_nvl, 1e6 * kNvlHopUs[a][p]) : l_nvl;
  const double base = on ? 1e6 * kBaseUs[a][p] : 0;
  const int32_t chan_proto = on ? p : kSimple;
  const double bytes = static_cast<double>(size);
  if (algo != kTree) {
    // ring: the longer of its dependency chain (2(n-1) hops, s of every n crossing servers,
    // each carrying one step's slice) and the time the busiest NIC sends (2(n-1)/n of the
    // bytes over C NICs per server); the two overlap, as every rank sends while the chain
    // proceeds. With the model: also the time each GPU's NVLink port copies its share.
    const double c = channels_for(size, cfg_.channels, chan_proto, ranks.size());
    // channels through a GPU's NVLink port: all c on one server, else (m-1)/m of them
    const double nvl_share =
        servers >= 2 && m >= 1 ? c * (static_cast<double>(m) - 1) / static_cast<double>(m) : c;
    const double copy = on ? 1 + nvl_share * (1 / kNvlEfficiency - 1) : 1;
    const double step = w * std::min(bytes / (c * n), static_cast<double>(step_bytes(chan_proto)));
    const double chain = passes * (s * (lat_net + step / b_net) + (n - s) * (lat_nvl + step / b_nvl * copy));
    double ring = chain;
    if (servers >= 2)
      ring = std::max(ring, busiest_port(ranks, groups, static_cast<int>(c), b_net * 8e12).first * bytes * w *
                                passes / 2);
    if (on && m >= 2) {
      const double mm = static_cast<double>(m);
      ring = std::max(ring, bytes * w * passes * (n - 1) / n * (mm - 1) / mm / (kNvlEfficiency * b_nvl));
    }
    return base + ring;
  }
  // tree: per channel two trees (A, and B over the servers reversed), each with chains of m
  // GPUs and a binary tree of depth floor(log2 s), up and down, pipelined in the chunks plan()
  // uses; a leader's NIC sends each chunk once up (but the root's) and once down per child,
  // half of the channel's bytes in each tree
  const double c = channels_for(size, cfg_.channels, chan_proto, 1);
  const double copy = on ? 1 + c * (1 / kNvlEfficiency - 1) : 1;
  const double depth = std::floor(std::log2(s));
  const Bytes half = static_cast<Bytes>(bytes / (2 * c));
  Bytes piece = pipeline_chunk(half, m - 1 + static_cast<size_t>(depth), step_bytes(chan_proto));
  if (on) piece = std::min(piece, std::max<Bytes>(half, 1));  // a chunk is no larger than the data
  const double chunk = w * static_cast<double>(piece);
  const double tree_port =
      servers >= 2 ? busiest_port(ranks, groups, static_cast<int>(c), b_net * 8e12).second : 0;
  const double up_down = 2 * ((static_cast<double>(m) - 1) * (lat_nvl + chunk / b_nvl * copy) +
                              depth * (lat_tree + chunk / b_net));
  double tree = up_down + tree_port * bytes * w;
  if (on && m >= 2) {
    // the SM copy: a GPU's NVLink port sends each byte up and down its server's chain, but
    // for the chain's ends (channels rotate the chain: (m-1)/m of it each way on average), at
    // kNvlEfficiency of the link
    const double mm = static_cast<double>(m);
    tree = std::max(tree, 2 * bytes * w * (mm - 1) / mm / (kNvlEfficiency * b_nvl));
  }
  return base + tree;
}

void Executor::forget_stale_terms() const {
  // Both caches read the current paths and port rates: a circuit plan, a circuit lit or a
  // failure makes them stale, and an op tuned after it must see the fabric as it is then.
  // (Within a dry-run batch the paths do not change, so its noted entries stay valid; if
  // they did change, the notes would point into emptied maps and go with them.)
  const uint64_t epoch = net_.routing_epoch();
  if (epoch == terms_epoch_) return;
  terms_epoch_ = epoch;
  congestion_.clear();
  terms_.clear();
  dry_congestion_.clear();
  dry_terms_.clear();
}

const Executor::PathTerms& Executor::path_terms(const std::vector<uint32_t>& ranks,
                                                const std::vector<std::vector<uint32_t>>& groups) const {
  // Cached per rank set, as busiest_port(): the ops of one group repeat.
  forget_stale_terms();
  if (auto it = terms_.find(ranks); it != terms_.end()) return it->second;
  PathTerms t;
  size_t widest = 0;
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].size() > t.m) t.m = groups[g].size(), widest = g;
  const double s = static_cast<double>(groups.size());
  // a hop's latency: its links and switches, plus one packet's store-and-forward per extra hop
  const double packet = static_cast<double>(net_.payload_per_packet());
  struct Hop {
    double ps, bytes_per_ps;
  };
  auto hop = [&](uint32_t a, uint32_t b) {
    const auto [ps, bps] = net_.path_cost(a, b);
    const double hops = static_cast<double>(net_.trace_path(a, b, 0).size());
    return Hop{static_cast<double>(ps) + (hops - 1) * packet * 8e12 / static_cast<double>(bps),
               static_cast<double>(bps) / 8e12};
  };
  // the servers in channel 0's order; the ring crosses from each server's last GPU there to
  // the next server's first, a tree edge joins a server's first GPU to its parent's
  const auto order = by_server(net_, ring_order(ranks, groups, 0));
  t.servers = order.size();
  if (t.servers >= 2)
    for (size_t g = 0; g < t.servers; ++g) {
      const Hop h = hop(order[g].back(), order[(g + 1) % t.servers].front());
      t.l_net += h.ps / s;
      t.b_net = g == 0 ? h.bytes_per_ps : std::min(t.b_net, h.bytes_per_ps);
      if (g == 0) continue;
      const Hop e = hop(order[g].front(), order[(g - 1) / 2].front());
      t.l_tree += e.ps / (s - 1);
    }
  // an NVLink pair from a server that has two of the ranks (any server if none does)
  if (t.m < 2) {
    t.l_nvl = t.l_net, t.b_nvl = t.b_net;
  } else {
    const Hop h = hop(groups[widest][0], groups[widest][1]);
    t.l_nvl = h.ps, t.b_nvl = h.bytes_per_ps;
  }
  if (t.servers < 2) t.l_net = t.l_tree = t.l_nvl, t.b_net = t.b_nvl;
  const auto it = terms_.emplace(ranks, t).first;
  if (dry_ != nullptr) dry_terms_.push_back(it);
  return it->second;
}

std::pair<double, double> Executor::busiest_port(const std::vector<uint32_t>& ranks,
                                                 const std::vector<std::vector<uint32_t>>& groups, int c,
                                                 double nic_bps) const {
  // Every edge of the c channels' rings (and double trees) loads each port on its current
  // path with its share of the message; the busiest port's load over its rate is the
  // algorithm's time per byte. Cached per (ranks, channels): ops of one group repeat.
  forget_stale_terms();
  auto key = std::make_pair(ranks, c);
  if (auto it = congestion_.find(key); it != congestion_.end()) return it->second;
  std::unordered_map<uint32_t, double> ring, tree;  // port -> bytes per message byte
  auto add = [&](std::unordered_map<uint32_t, double>& load, uint32_t a, uint32_t b, double w) {
    if (a == b) return;
    for (const uint32_t p : net_.trace_path(a, b, 0)) load[p] += w;
  };
  const double n = static_cast<double>(ranks.size()), cc = static_cast<double>(c);
  for (int ch = 0; ch < c; ++ch) {
    const auto order = ring_order(ranks, groups, ch);
    for (size_t i = 0; i < order.size(); ++i)
      add(ring, order[i], order[(i + 1) % order.size()], 2 * (n - 1) / n / cc);
    auto srv = by_server(net_, order);
    const int trees = srv.size() >= 2 ? 2 : 1;
    const double w = 1 / (cc * trees);  // each direction of each edge carries its tree's share
    for (int t = 0; t < trees; ++t) {
      if (t == 1) std::reverse(srv.begin(), srv.end());
      for (size_t g = 0; g < srv.size(); ++g) {
        for (size_t i = 1; i < srv[g].size(); ++i) {
          add(tree, srv[g][i], srv[g][i - 1], w);
          add(tree, srv[g][i - 1], srv[g][i], w);
        }
        if (g == 0) continue;
        add(tree, srv[g][0], srv[(g - 1) / 2][0], w);
        add(tree, srv[(g - 1) / 2][0], srv[g][0], w);
      }
    }
  }
  // network ports only: NVLink's share is part of the pipeline's per-chunk terms
  auto worst = [&](const std::unordered_map<uint32_t, double>& load) {
    double ps = 0;
    for (const auto& [p, bytes] : load)
      if (net_.port_rate_bps(p) <= nic_bps)
        ps = std::max(ps, bytes * 8e12 / static_cast<double>(net_.port_rate_bps(p)));
    return ps;
  };
  const std::pair<double, double> out{worst(ring), worst(tree)};
  const auto it = congestion_.emplace(std::move(key), out).first;
  if (dry_ != nullptr) dry_congestion_.push_back(it);
  return out;
}

Bytes Executor::pipeline_chunk(Bytes share, size_t depth, Bytes start) const {
  // NCCL's rule for its pipelined tree: from the step size, halve the chunk while a channel
  // would hold fewer than 8 x depth chunks (down to 128 KiB), 4 x depth (64 KiB), depth
  // (32 KiB), so the pipeline fill (about depth chunks) stays a small part of the time.
  Bytes chunk = start;
  const Bytes d = static_cast<Bytes>(std::max<size_t>(depth, 1));
  while (share / chunk < 8 * d && chunk > 128 * 1024) chunk /= 2;
  while (share / chunk < 4 * d && chunk > 64 * 1024) chunk /= 2;
  while (share / chunk < d && chunk > 32 * 1024) chunk /= 2;
  return std::max<Bytes>(chunk, 1);
}

Bytes Executor::step_bytes(int32_t p) const {
  if (cfg_.nccl_model && p == kLL) return kLLStep;
  if (cfg_.nccl_model && p == kLL128) return kLL128Step;
  return cfg_.chunk_bytes;
}

int Executor::channels_for(Bytes total, int max_channels, int32_t proto, size_t nranks) const {
  // NCCL: the topology gives the channels (here coll_channels, capped by the fabric's ring
  // orders when it has them); an op uses the most c of them with c x (threads x per-thread
  // threshold) <= its bytes: 32 KiB for Simple; with the NCCL model 5 KiB for LL128 and
  // 4 KiB (x the ranks, on a ring) for LL.
  int top = max_channels;
  if (!cfg_.rings.empty()) top = std::min<int>(top, static_cast<int>(cfg_.rings.size()));
  Bytes per = kBytesPerChannel;
  if (cfg_.nccl_model && proto == kLL128) per = kLL128BytesPerChannel;
  if (cfg_.nccl_model && proto == kLL)
    per = kLLBytesPerChannel * static_cast<Bytes>(std::max<size_t>(nranks, 1));
  return static_cast<int>(std::clamp<Bytes>(total / per, 1, std::max(top, 1)));
}

}  // namespace rfabric::coll
