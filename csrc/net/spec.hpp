// spec.hpp: the plain data that crosses from Python into the engine: a network as
// struct-of-arrays and one configuration struct. Python (rfabric.spec) validates these with
// good messages first; the builder re-checks what it relies on and throws SpecError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/time.hpp"

namespace rfabric::net {

using engine::BitsPerSec;
using engine::Bytes;
using engine::SimTime;

/// Node kinds; the numeric values are part of the Python boundary (rfabric.spec.NODE_KINDS).
enum class NodeKind : uint8_t { Gpu = 0, NvSwitch = 1, Eps = 2, Ocs = 3, PatchPanel = 4 };

struct NetworkSpec {
  // nodes
  std::vector<uint8_t> node_kind;
  std::vector<int32_t> node_server;      ///< server index for gpu/nvswitch nodes, -1 otherwise
  std::vector<SimTime> node_latency_ps;  ///< per-hop processing latency of the node
  // links (full duplex; one row makes two channels)
  std::vector<uint32_t> link_src, link_dst;
  std::vector<BitsPerSec> link_rate_bps;
  std::vector<SimTime> link_latency_ps;  ///< propagation delay
  std::vector<Bytes> link_buffer_bytes;  ///< per-port buffer at each end
  // initial circuit plan: circuit i joins links circuit_a[i], circuit_b[i] inside optical
  // device circuit_ocs[i]
  std::vector<uint32_t> circuit_ocs, circuit_a, circuit_b;
  bool host_forwarding = false;  ///< GPUs/NVSwitches forward other servers' traffic
  bool pxn = false;              ///< cross-rail traffic relays over NVLink to the right rail
  bool deadlock_free = false;    ///< up*/down* routing among switches (circuit meshes under PFC)
};

/// Engine configuration: one value, mirrored by rfabric.simulation.EngineConfig.
struct EngineConfig {
  uint64_t seed = 1;
  std::string transport = "roce";
  Bytes mtu_bytes = 9216;    ///< frame size including headers
  Bytes header_bytes = -1;   ///< -1: the transport's own header size
  Bytes control_bytes = 64;  ///< ACK / CNP / pause frame size
  int lossless = -1;         ///< -1: the transport's choice; 0 lossy drop-tail; 1 PFC
  SimTime ecn_kmin_ps = -1;  ///< ECN thresholds as queueing delay at the port's rate
  SimTime ecn_kmax_ps = -1;
  double ecn_pmax = -1;
  bool ecmp_per_packet = false;  ///< spray packets instead of hashing flows
  /// Adaptive routing: each packet takes the shortest-path port with the least queued
  /// bytes (ties by hash), as InfiniBand AR / Spectrum-X do. Overrides ecmp_per_packet.
  bool ecmp_adaptive = false;
  /// Multi-path (host-forwarding fabrics; with ecmp_adaptive elsewhere): a server's NVSwitch
  /// spreads frames over all its NICs whose paths are at most 4 hops (one more server) longer
  /// than the shortest, least loaded first, weighted by the hops left.
  bool ecmp_multipath = false;
  /// D-mod-K: at the h-th hop, take next hop (dst / k^(h-1)) mod k of the k equal-cost ones,
  /// so each destination is reached over one tree (InfiniBand's fat-tree routing).
  bool ecmp_dmodk = false;
  /// Optical circuit reconfiguration time: changed circuits are dark this long.
  SimTime t_ocs_ps = 25'000'000'000;
  /// PFC XOFF threshold per ingress as queueing time at the link's rate (lossless only);
  /// capped at buffer - headroom.
  SimTime pfc_xoff_ps = 5'000'000;
  // DCQCN (roce)
  SimTime dcqcn_timer_ps = 55'000'000;  ///< rate-increase and alpha timer period
  Bytes dcqcn_byte_counter = 32 * 1024;
  double dcqcn_g = 1.0 / 256;
  BitsPerSec dcqcn_rai_bps = 5'000'000;    ///< additive increase step
  BitsPerSec dcqcn_rhai_bps = 50'000'000;  ///< hyper increase step
  BitsPerSec dcqcn_min_rate_bps = 100'000'000;
  SimTime dcqcn_cnp_interval_ps = 50'000'000;
  int dcqcn_f = 5;  ///< fast-recovery steps
  // DCTCP
  double dctcp_g = 1.0 / 16;
  int dctcp_init_cwnd_packets = 10;
  SimTime dctcp_min_rto_ps = 200'000'000;  ///< 200 us
  /// Consecutive timeouts without progress before a flow gives up (Linux tcp_retries2 = 15):
  /// a flow to an unreachable GPU ends unfinished instead of retransmitting forever.
  int dctcp_max_timeouts = 15;
};

}  // namespace rfabric::net
