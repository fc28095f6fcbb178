// roce_params.hpp: RoCEv2 with DCQCN (roce.cpp): the transport's fixed parameters, each with
// its source. What a run may change (DCQCN's timer, byte counter, gains and steps) is in the
// engine configuration (RF_ENGINE_CONFIG_FIELDS, fabric/spec.hpp), with its defaults' sources.
#pragma once

#include "fabric/transport_traits.hpp"
#include "packet/transport.hpp"

namespace rfabric::proto {

struct RoceParams {
  /// Header bytes per frame and the lossless (PFC) fabric RDMA assumes; both backends read them.
  static constexpr net::TransportTraits traits = net::kRoceTraits;
  /// ECN marking DCQCN is tuned for: Kmin 5 KB, Kmax 200 KB, Pmax 1% at 40 Gb/s in the DCQCN
  /// paper (Zhu et al., SIGCOMM 2015), i.e. 1 us and 40 us of queueing.
  static constexpr net::Transport::EcnDefaults ecn{1'000'000, 40'000'000, 0.01};
  /// A flow's alpha when it starts (DCQCN paper: 1, the most cautious first cut).
  static constexpr double initial_alpha = 1.0;
  /// Rate recovery ends at the line rate once within this many bit/s of it (rfabric's: ends
  /// the halving's approach to the line rate, which doubles never reach exactly).
  static constexpr double line_rate_snap_bps = 1.0;
};

}  // namespace rfabric::proto
