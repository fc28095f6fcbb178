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

/// "None" for node, port, GPU and packet indices.
inline constexpr uint32_t kNone = 0xffffffffu;

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
  // sites joined by a lossy long link (rfabric.topologies.Sites(transport=...)); all empty
  // otherwise
  std::vector<uint8_t> link_lossy;  ///< per link, 1: its ports never PAUSE and drop when full,
                                    ///< even in a lossless run (empty: none)
  std::vector<int32_t> gpu_site;    ///< per GPU id, its site (empty: one site)
  /// Transport of the flows whose GPUs are in different sites ("": the run's, EngineConfig::
  /// transport); a lossy one (it runs over the lossy links and must recover loss).
  std::string cross_site_transport;
  /// The lossy links' step ECN threshold as queueing delay at their rate (-1: the cross-site
  /// transport's default), and the cross-site flows' minimum retransmission timeout (-1: the
  /// run's, e.g. EngineConfig::dctcp_min_rto_ps): Sites scales both to the long link.
  SimTime cross_site_ecn_ps = -1;
  SimTime cross_site_min_rto_ps = -1;
};

/// Engine configuration: the one list of its fields. X(type, name, default, doc) makes the
/// struct below, the binding's dict conversion (csrc/bindings/bind_engine.cpp) and
/// rfabric._engine.config_fields() (name -> default), from which rfabric.EngineConfig takes
/// its defaults and builds the dict it passes in (tests/test_engine.py fails on any drift).
/// A default of -1 means "the transport's choice" (Transport::header_bytes, lossless,
/// ecn_defaults). Names carry their unit: _ps, _bps, _bytes.
#define RF_ENGINE_CONFIG_FIELDS(X)                                                                     \
  X(uint64_t, seed, 1, "seeds ECMP hashing and ECN marking draws")                                     \
  X(std::string, transport, "roce", "transport name, as listed in fabric/transport_traits.hpp")        \
  X(Bytes, mtu_bytes, 9216, "frame size including headers (paper 7.2)")                                \
  X(Bytes, header_bytes, -1, "header bytes per frame; -1: the transport's")                            \
  X(Bytes, control_bytes, 64, "ACK / CNP / pause frame size")                                          \
  X(int, lossless, -1, "1 PFC, 0 lossy drop-tail; -1: the transport's")                                \
  X(SimTime, ecn_kmin_ps, -1,                                                                          \
    "ECN thresholds as queueing delay at the port's rate (one setting fits "                           \
    "every speed); -1: the transport's")                                                               \
  X(SimTime, ecn_kmax_ps, -1, "see ecn_kmin_ps")                                                       \
  X(double, ecn_pmax, -1, "marking probability at kmax; -1: the transport's")                          \
  X(bool, ecmp_per_packet, false, "spray packets instead of hashing flows")                            \
  X(bool, ecmp_adaptive, false,                                                                        \
    "adaptive routing: each packet takes the shortest-path port with the least queued bytes (ties "    \
    "by hash), as InfiniBand AR / Spectrum-X; overrides ecmp_per_packet")                              \
  X(bool, ecmp_multipath, false,                                                                       \
    "multi-path (host-forwarding fabrics; with ecmp_adaptive elsewhere): a server's NVSwitch spreads " \
    "frames over all its NICs whose paths are at most 4 hops (one more server) longer than the "       \
    "shortest, least loaded first, weighted by the hops left")                                         \
  X(bool, ecmp_dmodk, true,                                                                            \
    "D-mod-K (the default): at the h-th hop, next hop (dst / k^(h-1)) mod k of the k equal-cost "      \
    "ones, so each destination is reached over one tree (InfiniBand's fat-tree routing); all three "   \
    "ecmp_* off: flow hashing")                                                                        \
  X(SimTime, pfc_xoff_ps, 5'000'000,                                                                   \
    "PFC XOFF per ingress port as queueing time at the link's rate (lossless only), capped at "        \
    "buffer - headroom: 5 us = 125 KB at 200 Gb/s; x 64 ports, the order of a shared-buffer ASIC's "   \
    "lossless pool (bench/README.md)")                                                                 \
  X(SimTime, dcqcn_timer_ps, 55'000'000, "DCQCN rate-increase and alpha timer period")                 \
  X(Bytes, dcqcn_byte_counter, 32 * 1024,                                                              \
    "DCQCN byte counter, as ConnectX NICs reset it (rpg_byte_reset 32767 B); the DCQCN paper's 10 MB " \
    "leaves a throttled flow in additive increase for milliseconds (bench/README.md)")                 \
  X(double, dcqcn_g, 1.0 / 256, "DCQCN alpha gain")                                                    \
  X(BitsPerSec, dcqcn_rai_bps, 5'000'000,                                                              \
    "DCQCN additive increase step (ConnectX rpg_ai_rate); steps scaled to the line rate overshoot "    \
    "into PFC")                                                                                        \
  X(BitsPerSec, dcqcn_rhai_bps, 50'000'000, "DCQCN hyper increase step (ConnectX rpg_hai_rate)")       \
  X(BitsPerSec, dcqcn_min_rate_bps, 100'000'000, "DCQCN rate floor")                                   \
  X(SimTime, dcqcn_cnp_interval_ps, 50'000'000, "at most one CNP per flow per interval")               \
  X(int, dcqcn_f, 5, "DCQCN fast-recovery steps")                                                      \
  X(double, dctcp_g, 1.0 / 16, "DCTCP alpha gain")                                                     \
  X(int, dctcp_init_cwnd_packets, 10, "DCTCP initial window")                                          \
  X(SimTime, dctcp_min_rto_ps, 200'000'000, "DCTCP minimum retransmission timeout (200 us)")           \
  X(int, dctcp_max_timeouts, 15,                                                                       \
    "consecutive timeouts without progress before a flow gives up, unfinished (Linux tcp_retries2): "  \
    "a flow to an unreachable GPU ends instead of retransmitting forever")

struct EngineConfig {
#define RF_CONFIG_MEMBER(type, name, value, doc) type name = value;
  RF_ENGINE_CONFIG_FIELDS(RF_CONFIG_MEMBER)
#undef RF_CONFIG_MEMBER
};

}  // namespace rfabric::net
