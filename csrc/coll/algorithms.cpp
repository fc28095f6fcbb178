// algorithms.cpp: an op's expansion into programs by its algorithm (Executor::plan: rings,
// hierarchical rings, trees, chains, meshes, pairwise and halving-doubling exchanges, per
// channel), the channels' ring orders and whether channels run alike and may merge. The DAG
// scheduling that starts ops and hands them their flows is executor.cpp's.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "coll/executor.hpp"
#include "coll/nccl.hpp"
#include "coll/programs.hpp"
#include "engine/check.hpp"

namespace rfabric::coll {

void Executor::plan(uint32_t op, OpRun& run) {
  std::vector<uint32_t> ranks;
  for (int64_t k = w_.ranks_offsets[op]; k < w_.ranks_offsets[op + 1]; ++k)
    ranks.push_back(static_cast<uint32_t>(w_.ranks[k]));
  const size_t n = ranks.size();
  const Bytes size = w_.size_bytes[op];
  const int32_t kind = w_.kind[op];
  int32_t algo = w_.algorithm[op];
  auto& phases = run.phases;
  phases.clear();
  phases.emplace_back();
  run.algo = algo;
  run.proto = kNoProto;
  run.channels = 0;
  if (size == 0 || n < 2) return;
  {
    const Choice choice = tune(kind, algo, ranks, size);
    run.algo = algo = choice.algo;
    run.proto = choice.proto;
  }
  // the protocol whose step and channel threshold apply (the model off: Simple's)
  const int32_t proto = run.proto == kNoProto ? kSimple : run.proto;
  auto used = [&](int c) { run.channels = std::max(run.channels, c); };

  auto rings = [&](const std::vector<uint32_t>& group_ranks, uint32_t steps, Bytes total, int max_channels,
                   std::vector<std::unique_ptr<Program>>& out) {
    const size_t m = group_ranks.size();
    if (m < 2) return;
    const int c = channels_for(total, max_channels, proto, m);
    used(c);
    const auto groups = by_server(net_, group_ranks);
    const Bytes chunk = ceil_div(total, static_cast<Bytes>(c) * static_cast<Bytes>(m));
    Bytes slice = step_bytes(proto);
    if (cfg_.ring_slices > 0) slice = std::max(slice, ceil_div(chunk, static_cast<Bytes>(cfg_.ring_slices)));
    std::vector<std::vector<uint32_t>> orders;
    for (int ch = 0; ch < c; ++ch) orders.push_back(ring_order(group_ranks, groups, ch));
    auto add = [&](std::vector<uint32_t> order, uint32_t channel, uint32_t copies) {
      auto ring = std::make_unique<Ring>(order, steps, chunk, slice, channel, copies);
      out.push_back(std::move(ring));
    };
    if (c > 1 && cfg_.merge_channels && net_.merges_copies() && same_rings(orders)) {
      add(std::move(orders[0]), 1, static_cast<uint32_t>(c));
      return;
    }
    for (int ch = 0; ch < c; ++ch) add(std::move(orders[ch]), static_cast<uint32_t>(ch) + 1, 1);
  };
  auto mesh_all = [&](Bytes per_peer) {
    std::vector<Mesh::Edge> edges;
    for (const uint32_t a : ranks)
      for (const uint32_t b : ranks)
        if (a != b) edges.push_back({a, b, per_peer});
    phases[0].push_back(std::make_unique<Mesh>(std::move(edges)));
    used(1);
  };
  // a pipeline's chunks as the pieces its edges carry (ExecutorConfig::pipeline_slices). A
  // streamed piece over an NVLink hop keeps the SMs' copy pace (send()). Not where NVLink
  // hops run one after another (a node that takes a piece over NVLink and passes it on over
  // NVLink: three or more ranks of a server in a row): there the SMs of a server's GPUs copy
  // most channels' bytes, the copy is the pipeline's bottleneck and its chunks wait their
  // rounds hop after hop, which the pieces' waves do not (a 256 MiB chain broadcast over 128
  // FatTree GPUs: 5.5% fast streamed, the chunks' flows as packets).
  auto pieces = [&](std::vector<Bytes> chunks, const std::vector<uint32_t>& order,
                    const std::vector<int32_t>& parent) {
    PipelinePieces out;
    const size_t k = chunks.size(), most = cfg_.pipeline_slices;
    bool run_of_nvlink = false;
    for (size_t p = 1; p < order.size() && !run_of_nvlink && most > 0; ++p) {
      const int32_t q = parent[p];
      run_of_nvlink = q > 0 && parent[q] >= 0 && same_server(order[q], order[p]) &&
                      same_server(order[parent[q]], order[q]);
    }
    if (most == 0 || k <= most + 2 || run_of_nvlink) {
      out.bytes = std::move(chunks);
      return out;
    }
    Bytes middle = 0;
    for (size_t j = 1; j + 1 < k; ++j) middle += chunks[j];
    const Bytes slice = ceil_div(middle, static_cast<Bytes>(most));
    out.bytes.push_back(chunks.front());
    for (Bytes left = middle; left > 0; left -= std::min(slice, left))
      out.bytes.push_back(std::min(slice, left));
    out.bytes.push_back(chunks.back());
    out.streamed = true;
    return out;
  };
  const uint32_t n32 = static_cast<uint32_t>(n);
  const Bytes per_rank = ceil_div(size, static_cast<Bytes>(n));

  switch (kind) {
    case kAllReduce:
    case kAllGather:
    case kReduceScatter: {
      if (algo == kTree) {
        // NCCL's double binary tree, per channel: two trees each carrying half of the channel's
        // share of the message. Positions: the servers in the channel's ring order (tree A) or
        // that order reversed (tree B), each server's GPUs in the channel's order; a server's
        // first GPU there (the channel's entry GPU, so each channel crosses servers through a
        // different NIC) is its leader; leaders form a binary tree (leader of server i under
        // leader of server (i-1)/2), the other GPUs of a server a chain. The inner servers of
        // one tree are leaves of the other, so a leader's NIC sends 2 halves, not 3.
        const auto all_groups = by_server(net_, ranks);
        const int c = channels_for(size, cfg_.channels, proto, 1);
        used(c);
        const Bytes per_channel = ceil_div(size, c);
        for (int ch = 0; ch < c; ++ch) {
          const Bytes share = std::min(per_channel, size - ch * per_channel);
          if (share <= 0) break;
          auto groups = by_server(net_, ring_order(ranks, all_groups, ch));
          const int trees = groups.size() >= 2 && share >= 2 ? 2 : 1;
          for (int t = 0; t < trees; ++t) {
            const Bytes half = t == 0 ? share - share / trees : share / trees;
            if (t == 1) std::reverse(groups.begin(), groups.end());
            size_t m = 0, levels = 0;
            for (const auto& g : groups) m = std::max(m, g.size());
            while ((size_t{2} << levels) <= groups.size()) ++levels;
            const Bytes piece = pipeline_chunk(half, m - 1 + levels, step_bytes(proto));
            std::vector<Bytes> chunks;
            const Bytes k = ceil_div(half, piece);
            for (Bytes j = 0; j < k; ++j) chunks.push_back(std::min(piece, half - j * piece));
            std::vector<uint32_t> order, leader_pos;
            std::vector<int32_t> parent;
            for (size_t g = 0; g < groups.size(); ++g) {
              leader_pos.push_back(static_cast<uint32_t>(order.size()));
              for (size_t i = 0; i < groups[g].size(); ++i) {
                parent.push_back(i == 0 ? (g == 0 ? -1 : static_cast<int32_t>(leader_pos[(g - 1) / 2]))
                                        : static_cast<int32_t>(order.size() - 1));
                order.push_back(groups[g][i]);
              }
            }
            phases[0].push_back(std::make_unique<TreeAllReduce>(
                order, parent, pieces(std::move(chunks), order, parent), static_cast<uint32_t>(2 * ch + t)));
          }
        }
        return;
      }
      const uint32_t steps = kind == kAllReduce ? 2 * (n32 - 1) : n32 - 1;
      if (algo == kHierRing) {
        const auto groups = by_server(net_, ranks);
        const size_t m = groups[0].size();
        bool uniform = groups.size() >= 2 && m >= 2;
        for (const auto& g : groups) uniform = uniform && g.size() == m;
        if (uniform) {
          // intra-server reduce-scatter, inter-server rings per local index, intra all-gather
          const Bytes shard = ceil_div(size, static_cast<Bytes>(m));
          const uint32_t s = static_cast<uint32_t>(groups.size()), m32 = static_cast<uint32_t>(m);
          if (kind != kAllGather)
            for (const auto& g : groups) rings(g, m32 - 1, size, 1, phases[0]);
          phases.emplace_back();
          for (size_t l = 0; l < m; ++l) {
            std::vector<uint32_t> rail;
            for (const auto& g : groups) rail.push_back(g[l]);
            const uint32_t inter = kind == kAllReduce ? 2 * (s - 1) : s - 1;
            rings(rail, inter, shard, cfg_.channels, phases.back());
          }
          if (kind != kReduceScatter) {
            phases.emplace_back();
            for (const auto& g : groups) rings(g, m32 - 1, size, 1, phases.back());
          }
          return;
        }
        run.algo = algo = kRing;  // not one uniform group per server: a flat ring (documented)
      }
      if (algo == kRing) {
        rings(ranks, steps, size, cfg_.channels, phases[0]);
      } else if (algo == kHalvingDoubling) {
        std::vector<uint32_t> masks;
        std::vector<Bytes> bytes;
        uint32_t levels = 0;
        while ((size_t{1} << levels) < n) ++levels;
        if (kind != kAllGather)
          for (uint32_t k = 0; k < levels; ++k) {
            masks.push_back(n32 >> (k + 1));
            bytes.push_back(ceil_div(size, Bytes{1} << (k + 1)));
          }
        if (kind != kReduceScatter)
          for (uint32_t k = 0; k < levels; ++k) {
            masks.push_back(1u << k);
            bytes.push_back(per_rank << k);
          }
        phases[0].push_back(std::make_unique<HalvingDoubling>(ranks, std::move(masks), std::move(bytes)));
      } else {  // direct all-gather / reduce-scatter: every rank sends its shard to every other
        mesh_all(per_rank);
      }
      return;
    }
    case kAllToAll:
      if (algo == kRing) {
        phases[0].push_back(std::make_unique<Pairwise>(ranks, per_rank));
      } else {
        mesh_all(per_rank);
      }
      return;
    case kBroadcast: {
      if (algo == kDirect) {
        std::vector<Mesh::Edge> edges;
        for (size_t i = 1; i < n; ++i) edges.push_back({ranks[0], ranks[i], size});
        phases[0].push_back(std::make_unique<Mesh>(std::move(edges)));
        return;
      }
      // As NCCL's ring broadcast: the message is split over the channels; channel c's data runs
      // down a chain that follows channel c's ring from the root (so each channel leaves every
      // server through a different NIC), or down a binary tree over that order (tree).
      std::vector<int32_t> parent(n, -1);
      for (size_t p = 1; p < n; ++p)
        parent[p] = algo == kTree ? static_cast<int32_t>((p - 1) / 2) : static_cast<int32_t>(p - 1);
      const auto groups = by_server(net_, ranks);
      const int c = channels_for(size, cfg_.channels, proto, n);
      used(c);
      const Bytes per_channel = ceil_div(size, c);
      struct Lane {
        std::vector<uint32_t> order;
        std::vector<Bytes> chunks;
        std::vector<uint32_t> channels;  ///< connections (channel + 1) running it alike
      };
      std::vector<Lane> lanes;
      for (int ch = 0; ch < c; ++ch) {
        const Bytes share = std::min(per_channel, size - ch * per_channel);
        if (share <= 0) break;
        size_t depth = n - 1;  // a chain; a binary tree over n ranks is floor(log2 n) deep
        if (algo == kTree)
          for (depth = 0; (size_t{2} << depth) <= n; ++depth) {
          }
        const Bytes piece = pipeline_chunk(share, depth, step_bytes(proto));
        std::vector<Bytes> chunks;
        const Bytes k = ceil_div(share, piece);
        for (Bytes j = 0; j < k; ++j) chunks.push_back(std::min(piece, share - j * piece));
        auto order = ring_order(ranks, groups, ch);
        std::rotate(order.begin(), std::find(order.begin(), order.end(), ranks[0]), order.end());
        const uint32_t conn = static_cast<uint32_t>(ch) + 1;
        // channels with the same order and chunks whose edges take the same paths run as one
        // pipeline of copies (as same_rings for rings), where the fabric merges copies
        Lane* same = nullptr;
        if (cfg_.merge_channels && net_.merges_copies()) {
          for (Lane& l : lanes)
            if (l.order == order && l.chunks == chunks) same = &l;
          if (same != nullptr) {
            std::vector<std::pair<uint32_t, uint32_t>> edges;
            for (size_t p = 1; p < n; ++p) edges.emplace_back(order[parent[p]], order[p]);
            if (!same_paths(edges, {same->channels[0], conn})) same = nullptr;
          }
        }
        if (same != nullptr) {
          same->channels.push_back(conn);
        } else {
          lanes.push_back({std::move(order), std::move(chunks), {conn}});
        }
      }
      for (Lane& l : lanes) {
        PipelinePieces cut = pieces(std::move(l.chunks), l.order, parent);
        phases[0].push_back(std::make_unique<Pipeline>(std::move(l.order), parent, std::move(cut),
                                                       l.channels[0],
                                                       static_cast<uint32_t>(l.channels.size())));
      }
      return;
    }
    case kSend:
      phases[0].push_back(std::make_unique<Mesh>(std::vector<Mesh::Edge>{{ranks[0], ranks[1], size}}));
      return;
    case kM2N: {
      const size_t senders = static_cast<size_t>(w_.m2n_senders[op]);
      const Bytes each = ceil_div(size, static_cast<Bytes>(n - senders));
      std::vector<Mesh::Edge> edges;
      for (size_t a = 0; a < senders; ++a)
        for (size_t b = senders; b < n; ++b) edges.push_back({ranks[a], ranks[b], each});
      phases[0].push_back(std::make_unique<Mesh>(std::move(edges)));
      return;
    }
    default:
      return;
  }
}

bool Executor::same_rings(const std::vector<std::vector<uint32_t>>& orders) {
  // The channels' rings run alike where every channel's ring has the same edges (a rotation
  // of one order: an NVLink ring inside a server) and each edge the same paths on every
  // channel's connection: rank by rank, each sends the same slices at the same times. Only
  // over NVLink, where the SMs copy the channels' messages one after another and a merged
  // flow passes their stagger on (Executor::arrival_lead); channels that leave by one NIC
  // end in its turns (FlowNetwork::round_robin_lead), which a merged flow's copies, ending
  // together, cannot: an 8-rank ring over 8 servers, merged, was 10-19% slow.
  const std::vector<uint32_t>& first = orders[0];
  const size_t m = first.size();
  std::unordered_map<uint32_t, uint32_t> next;
  for (size_t i = 0; i < m; ++i) {
    const uint32_t a = first[i], b = first[(i + 1) % m];
    const int32_t server = net_.gpu_server(a);
    if (server < 0 || server != net_.gpu_server(b)) return false;
    next[a] = b;
  }
  for (size_t ch = 1; ch < orders.size(); ++ch)
    for (size_t i = 0; i < m; ++i)
      if (next[orders[ch][i]] != orders[ch][(i + 1) % m]) return false;
  std::vector<uint32_t> channels(orders.size());
  std::iota(channels.begin(), channels.end(), 1u);
  return same_paths({next.begin(), next.end()}, channels);
}

bool Executor::same_paths(const std::vector<std::pair<uint32_t, uint32_t>>& edges,
                          const std::vector<uint32_t>& channels) {
  for (const auto& [a, b] : edges)
    for (size_t i = 1; i < channels.size(); ++i)
      if (!net_.same_route(a, b, connection_key(a, b, channels[0]), connection_key(a, b, channels[i])))
        return false;
  return true;
}

std::vector<uint32_t> Executor::ring_order(const std::vector<uint32_t>& ranks,
                                           const std::vector<std::vector<uint32_t>>& groups, int ch) const {
  if (ring_pos_.empty()) return channel_ring(groups, ch);
  const auto& pos = ring_pos_[static_cast<size_t>(ch) % ring_pos_.size()];
  std::vector<uint32_t> order(ranks);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return pos[a] < pos[b]; });
  return order;
}

}  // namespace rfabric::coll
