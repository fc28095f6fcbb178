// flow_slots.hpp: the flow-slot table and the per-owner totals, kept alike by both backends.
//
// A slot holds one flow from its creation until it retires (packet network: finished, no
// frame of it left in the fabric, no transport timer pending; flow model: its last byte
// delivered); then the slot goes back to a free list and a later flow reuses it, last in
// first out, so the table is as large as the most flows ever alive at once, not the flows
// ever created. A flow's public id is its creation serial (`id`). Each backend adds its own
// columns to the ones here (packet/network.hpp FlowTable, flow/flow_network.hpp FlowRecords).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/check.hpp"
#include "fabric/spec.hpp"

namespace rfabric::net {

/// The columns of a flow both backends keep, struct-of-arrays, indexed by slot, and the slots'
/// free list. `Table` (the backend's table, deriving from this) adds its own columns and grows
/// them by one row in grow_row().
template <class Table>
struct FlowSlots {
  std::vector<uint64_t> id;    ///< creation serial: the flow id in results (add_flows: the row)
  std::vector<int64_t> owner;  ///< who created it (the collective executor: op index), or -1
  std::vector<uint32_t> src, dst;
  std::vector<Bytes> size_bytes;
  std::vector<SimTime> start_ps, end_ps;
  std::vector<uint32_t> hash;  ///< ECMP hash (fabric/ecmp.hpp)
  std::vector<uint8_t> live;   ///< the slot holds a flow (not retired)

  size_t size() const { return src.size(); }
  /// The id the next flow takes (flows created so far, counting each copy the flow model
  /// merges into one flow).
  uint64_t next_id() const { return next_id_; }
  /// Flows alive now.
  size_t live_flows() const { return live_count_; }

  /// A slot for a new flow with these columns, which takes the next `ids` ids (the first is
  /// its id), end_ps -1 and live: a retired slot, or a new row.
  uint32_t acquire(uint64_t ids, int64_t owner_, uint32_t src_, uint32_t dst_, Bytes bytes, SimTime start,
                   uint32_t hash_) {
    const uint64_t i = next_id_;
    next_id_ += ids;
    ++live_count_;
    uint32_t f;
    if (!free_.empty()) {
      f = free_.back();
      free_.pop_back();
    } else {
      f = static_cast<uint32_t>(size());
      RF_CHECK(f != kNone, "more than ", kNone, " flows alive at once");
      for (auto* v : {&src, &dst, &hash}) v->emplace_back();
      for (auto* v : {&start_ps, &end_ps}) v->emplace_back();
      id.emplace_back();
      owner.emplace_back();
      size_bytes.emplace_back();
      live.emplace_back();
      static_cast<Table*>(this)->grow_row();
    }
    id[f] = i;
    owner[f] = owner_;
    src[f] = src_;
    dst[f] = dst_;
    size_bytes[f] = bytes;
    start_ps[f] = start;
    end_ps[f] = -1;
    hash[f] = hash_;
    live[f] = 1;
    return f;
  }
  /// The flow in slot f retired: the slot is free for a later flow.
  void release(uint32_t f) {
    live[f] = 0;
    --live_count_;
    free_.push_back(f);
  }

 private:
  std::vector<uint32_t> free_;  ///< retired slots, reused last-in first-out
  uint64_t next_id_ = 0;
  size_t live_count_ = 0;
};

/// What the flows an owner (an op) created came to, folded in as each retires, so results per
/// op need no per-flow table. (The flow model has no losses: its retransmits and resent,
/// duplicate and dropped bytes stay 0.)
struct OwnerStats {
  int64_t flows = 0, retransmits = 0;
  Bytes delivered_bytes = 0, resent_bytes = 0, duplicate_bytes = 0, dropped_bytes = 0;
  SimTime max_fct_ps = -1;  ///< longest flow (end - start) among the finished ones
};

/// Per-owner totals, indexed by owner.
class OwnerTotals {
 public:
  /// Fold a retired flow (standing for `flows` messages) into its owner's totals; returns
  /// them for the backend's own fields, or nullptr for a flow with no owner (< 0).
  OwnerStats* fold(int64_t owner, int64_t flows, Bytes delivered, SimTime fct_ps) {
    if (owner < 0) return nullptr;
    const auto o = static_cast<size_t>(owner);
    if (stats_.size() <= o) stats_.resize(o + 1);
    OwnerStats& s = stats_[o];
    s.flows += flows;
    s.delivered_bytes += delivered;
    s.max_fct_ps = std::max(s.max_fct_ps, fct_ps);
    return &s;
  }
  const std::vector<OwnerStats>& all() const { return stats_; }

 private:
  std::vector<OwnerStats> stats_;
};

}  // namespace rfabric::net
