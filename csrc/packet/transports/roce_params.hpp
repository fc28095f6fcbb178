// roce_params.hpp: RoCEv2 with DCQCN (roce.cpp): the transport's fixed parameters, each with
// its source. What a run may change (DCQCN's timer, byte counter, gains and steps) is in the
// engine configuration (RF_ENGINE_CONFIG_FIELDS, fabric/spec.hpp), with its defaults' sources.
#pragma once

#include "fabric/roce_dcqcn.hpp"
#include "fabric/transport_traits.hpp"
#include "packet/transport.hpp"

namespace rfabric::proto {

struct RoceParams {
  /// Header bytes per frame and the lossless (PFC) fabric RDMA assumes; both backends read them.
  static constexpr net::TransportTraits traits = net::kRoceTraits;
  /// DCQCN's ECN marking, first alpha and line-rate snap (fabric/roce_dcqcn.hpp, with their
  /// sources; the flow backend's dynamic fluid reads the same).
  static constexpr net::Transport::EcnDefaults ecn{net::kRoceDcqcn.ecn_kmin_ps, net::kRoceDcqcn.ecn_kmax_ps,
                                                   net::kRoceDcqcn.ecn_pmax};
  static constexpr double initial_alpha = net::kRoceDcqcn.initial_alpha;
  static constexpr double line_rate_snap_bps = net::kRoceDcqcn.line_rate_snap_bps;
};

}  // namespace rfabric::proto
