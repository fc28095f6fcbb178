// roce_dcqcn.hpp: RoCEv2's DCQCN constants that both transports of RoCE read: the packet
// engine's (packet/transports/roce.cpp, through RoceParams) and the flow backend's dynamic
// fluid (flow/fluid_dynamics.cpp, fluid_network.cpp), so that the two cannot disagree. What a run may change
// (DCQCN's timer, byte counter, gains and steps) is in the engine configuration
// (RF_ENGINE_CONFIG_FIELDS, fabric/spec.hpp), with its defaults' sources.
#pragma once

#include "engine/time.hpp"

namespace rfabric::net {

struct RoceDcqcn {
  /// ECN marking DCQCN is tuned for: Kmin 5 KB, Kmax 200 KB, Pmax 1% at 40 Gb/s in the DCQCN
  /// paper (Zhu et al., SIGCOMM 2015), i.e. 1 us and 40 us of queueing at the port's rate.
  engine::SimTime ecn_kmin_ps, ecn_kmax_ps;
  double ecn_pmax;
  /// A flow's alpha when it starts (DCQCN paper: 1, the most cautious first cut).
  double initial_alpha;
  /// Rate recovery ends at the line rate once within this many bit/s of it (rfabric's: ends
  /// the halving's approach to the line rate, which doubles never reach exactly).
  double line_rate_snap_bps;
};

inline constexpr RoceDcqcn kRoceDcqcn{1'000'000, 40'000'000, 0.01, 1.0, 1.0};

}  // namespace rfabric::net
