// path_balance.cpp: the split a queue-steered flow settles on (adaptive and multipath
// routing): over the paths its sampled frames found, the shortest first up to what their
// ports take, as the packet engine's queues make it.
#include <algorithm>
#include <limits>

#include "flow/flow_network.hpp"

namespace rfabric::flow {

void FlowNetwork::balance_split(PathSet& ps, double rate) {
  // Adaptive and multipath choices take, frame by frame, the port with the fewest bytes
  // queued (multipath: weighted by the hops left, counted from 8 frames). A queue is the
  // integral of its port's overload: a port offered more than it drains grows its backlog
  // until the frames go elsewhere, however small the excess, so in steady state no port a
  // flow can choose stays over capacity while another has room, and the weights only
  // decide which of the ports with room come first (the shorter paths). The walk's frames
  // read a fluid backlog once (the overload as a level, not an integral): its hop weights
  // and 8-frame floor keep frames on short paths up to a fixed overload, which the fluid
  // then holds the flow to (a lone GPU 0 -> 32 on TopoOpt(128): 8, 6 and 5 of 56 frames on
  // the NICs, 7/8 of the rate the packet engine's even eighths give).
  // So the paths stay the walk's (what the choices reach) and their shares are filled
  // again, a unit (1/kBalanceUnits of the flow's line rate) at a time, onto the shortest
  // path that takes it without putting a port over capacity (the others' offered load,
  // as the walk reads it, plus the flow's units so far); ports every path crosses are left
  // out (they carry the flow whatever the split). Where no path takes a unit any more, the
  // flow's rate is the congestion control's to cut and the split is what it has placed;
  // where no path takes the first (every path is full of others' offered load), the walk's
  // split stands.
  const size_t np = ps.paths.size();
  if (np < 2 || rate <= 0 || !ps.reached) return;
  const double unit = rate / kBalanceUnits;
  // per distinct port: in how many paths it occurs (common ports are left out of the score)
  bal_load_.assign(ps.ports.size(), 0.0);
  bal_in_.assign(ps.ports.size(), 0);
  bal_path_ports_.clear();
  bal_path_end_.clear();
  for (const auto& path : ps.paths) {
    for (const uint32_t p : path) {
      const auto i = static_cast<uint32_t>(std::find(ps.ports.begin(), ps.ports.end(), p) - ps.ports.begin());
      bal_path_ports_.push_back(i);
    }
    bal_path_end_.push_back(static_cast<uint32_t>(bal_path_ports_.size()));
  }
  for (size_t k = 0; k < np; ++k) {
    const uint32_t lo = k ? bal_path_end_[k - 1] : 0, hi = bal_path_end_[k];
    for (uint32_t j = lo; j < hi; ++j) {
      bool first = true;  // (a port a path crosses twice counts once here)
      for (uint32_t q = lo; q < j; ++q) first = first && bal_path_ports_[q] != bal_path_ports_[j];
      bal_in_[bal_path_ports_[j]] += first;
    }
  }
  // per path: its ports that not every path crosses, each once, with the times it crosses it
  bal_diff_.clear();
  bal_diff_end_.clear();
  for (size_t k = 0; k < np; ++k) {
    const uint32_t lo = k ? bal_path_end_[k - 1] : 0, hi = bal_path_end_[k];
    for (uint32_t j = lo; j < hi; ++j) {
      const uint32_t i = bal_path_ports_[j];
      bool first = bal_in_[i] != np;
      for (uint32_t q = lo; first && q < j; ++q) first = bal_path_ports_[q] != i;
      if (!first) continue;
      uint32_t times = 0;
      for (uint32_t q = lo; q < hi; ++q) times += bal_path_ports_[q] == i;
      bal_diff_.emplace_back(i, times);
    }
    bal_diff_end_.push_back(static_cast<uint32_t>(bal_diff_.size()));
  }
  for (size_t i = 0; i < ps.ports.size(); ++i) {
    const double cap = ports_[ps.ports[i]].capacity;
    bal_load_[i] = cap > 0 && offered_.size() == ports_.size() ? offered_[ps.ports[i]] : 0.0;
  }
  bal_units_.assign(np, 0);
  uint32_t placed = 0;
  for (; placed < kBalanceUnits; ++placed) {
    size_t best = np;
    double best_over = 0;
    for (size_t k = 0; k < np; ++k) {
      const uint32_t lo = k ? bal_diff_end_[k - 1] : 0, hi = bal_diff_end_[k];
      double over = 0;  // the most its differing ports are over capacity with the unit
      for (uint32_t j = lo; j < hi; ++j) {
        const auto [i, times] = bal_diff_[j];
        const double cap = ports_[ps.ports[i]].capacity;
        over = std::max(over, cap > 0 ? (bal_load_[i] + times * unit) / cap - 1
                                      : std::numeric_limits<double>::infinity());
      }
      const bool shorter = best < np && ps.paths[k].size() < ps.paths[best].size();
      if (best == np || over < best_over - 1e-9 || (over <= best_over + 1e-9 && shorter)) {
        best = k;
        best_over = over;
      }
    }
    if (best_over > 1e-9) break;  // no path takes the unit without overloading a port
    ++bal_units_[best];
    const uint32_t lo = best ? bal_path_end_[best - 1] : 0, hi = bal_path_end_[best];
    for (uint32_t j = lo; j < hi; ++j) bal_load_[bal_path_ports_[j]] += unit;
  }
  if (placed == 0) return;  // every path is full already: the walk's split stands
  // the paths that took units, their ports in order of first use, each port's share
  std::vector<std::vector<uint32_t>> paths;
  std::vector<uint32_t> ports;
  std::vector<double> coef;
  for (size_t k = 0; k < np; ++k) {
    if (bal_units_[k] == 0) continue;
    const double c = static_cast<double>(bal_units_[k]) / placed;
    for (const uint32_t p : ps.paths[k]) {
      const auto it = std::find(ports.begin(), ports.end(), p);
      if (it == ports.end()) {
        ports.push_back(p);
        coef.push_back(c);
      } else {
        coef[static_cast<size_t>(it - ports.begin())] += c;
      }
    }
    paths.push_back(std::move(ps.paths[k]));
  }
  ps.paths = std::move(paths);
  ps.ports = std::move(ports);
  ps.coef = std::move(coef);
}

}  // namespace rfabric::flow
