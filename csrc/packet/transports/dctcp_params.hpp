// dctcp_params.hpp: DCTCP (dctcp.cpp): the transport's fixed parameters, each with its
// source. What a run may change (g, initial window, minimum RTO, timeouts before giving up) is
// in the engine configuration (RF_ENGINE_CONFIG_FIELDS, fabric/spec.hpp).
#pragma once

#include <cstdint>

#include "fabric/transport_traits.hpp"
#include "packet/transport.hpp"

namespace rfabric::proto {

struct DctcpParams {
  /// Header bytes per frame (TCP/IPv4 over Ethernet) and lossy drop-tail queues; both
  /// backends read them.
  static constexpr net::TransportTraits traits = net::kDctcpTraits;
  /// Step marking at K (kmin = kmax, pmax 1); K ~ 0.4 RTT of a 3-tier fabric (DCTCP's
  /// guideline K > C x RTT / 7, Alizadeh et al., SIGCOMM 2010).
  static constexpr net::Transport::EcnDefaults ecn{5'000'000, 5'000'000, 1.0};
  /// Duplicate ACKs that start fast retransmit (RFC 5681).
  static constexpr uint32_t dupack_threshold = 3;
  /// Slow-start threshold of a new flow: unbounded (RFC 5681: "arbitrarily high").
  static constexpr double initial_ssthresh = 1e18;
  /// The least ssthresh a loss leaves, packets (RFC 5681's floor of 2 SMSS in
  /// max(FlightSize / 2, 2 SMSS); here half the window).
  static constexpr double min_ssthresh = 2.0;
  /// RTO = SRTT + K x RTTVAR (RFC 6298, K = 4).
  static constexpr int64_t rto_k = 4;
  /// Exponential backoff stops at this multiple of the minimum RTO: rfabric's cap, not a
  /// measured value (Linux stops at 120 s, 600x its 200 ms minimum).
  static constexpr int64_t max_rto_backoff = 64;

  // Over a long link (Transport::set_long_link: the flows between sites). Over a round trip
  // of milliseconds the bandwidth-delay product is thousands of frames and congestion
  // avoidance adds one frame per round trip, so a flow that leaves slow start at half the
  // link, or halves its window once, stays below the link's rate for seconds. Two causes:
  /// Unpaced slow start sends two frames per ACK back to back: the long queue passes the
  /// marking threshold in every window's burst long before the link is full, and slow start
  /// ends early. Frames are paced instead, at cwnd per smoothed RTT times 2 in slow start
  /// (cwnd < ssthresh / 2) and 1.2 after: Linux's TCP pacing (tcp_update_pacing_rate,
  /// sysctls tcp_pacing_ss_ratio = 200 and tcp_pacing_ca_ratio = 120).
  static constexpr double pacing_ss_ratio = 2.0;
  static constexpr double pacing_ca_ratio = 1.2;
  /// alpha of a new flow. At 1 (the datacenter default here and Linux's
  /// dctcp_alpha_on_init = 1024/1024) the first marks at the end of slow start halve the
  /// window; at 0 (Linux's dctcp_alpha_on_init = 0) the cut follows the measured fraction of
  /// marks, as DCTCP's steady state does.
  static constexpr double long_link_alpha0 = 0.0;
};

}  // namespace rfabric::proto
