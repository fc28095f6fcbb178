// network_build.cpp: building the packet plane from a NetworkSpec: ports copied from the
// forwarding layer's channels, one NIC scheduler per GPU egress port, the transport, and each
// port's ECN and PFC thresholds. Topology checks and tables are Forwarding's (forwarding.cpp).
#include <algorithm>
#include <limits>

#include "engine/check.hpp"
#include "packet/network.hpp"
#include "packet/transports/roce.hpp"

namespace rfabric::net {

Network::~Network() = default;

Network::Network(engine::Engine& eng, const NetworkSpec& spec, const EngineConfig& cfg,
                 TransportFactory make_transport, TransportFactory make_cross)
    : eng_(eng), cfg_(cfg), rng_(cfg.seed, 0x6e6574776f726bULL), fwd_(spec, cfg) {
  RF_CHECK(cfg.mtu_bytes >= 256 && cfg.mtu_bytes <= 65536, "mtu_bytes ", cfg.mtu_bytes,
           " is outside [256, 65536]");
  RF_CHECK(cfg.pfc_xoff_ps > 0, "pfc_xoff_ps must be positive");
  RF_CHECK(cfg.control_bytes > 0 && cfg.control_bytes <= cfg.mtu_bytes, "control_bytes ", cfg.control_bytes,
           " must be in (0, mtu_bytes]");

  // Ports: the packet plane's copy of each channel (wiring as built; ports facing optical
  // devices then take the far end their circuit chain reaches).
  const size_t m = fwd_.num_links();
  RF_CHECK(spec.link_lossy.empty() || spec.link_lossy.size() == m, "link_lossy has ", spec.link_lossy.size(),
           " rows for ", m, " links");
  ports_.resize(2 * m);
  port_info_.resize(2 * m);
  port_nic_.resize(2 * m);
  for (size_t l = 0; l < m; ++l) {
    RF_CHECK(spec.link_buffer_bytes[l] >= cfg.mtu_bytes, "link ", l, ": buffer ", spec.link_buffer_bytes[l],
             " B is smaller than one MTU (", cfg.mtu_bytes, " B)");
    for (int dir = 0; dir < 2; ++dir) {
      const uint32_t id = static_cast<uint32_t>(2 * l + dir);
      const Channel& c = fwd_.channel(id);
      Port& p = ports_[id];
      PortInfo& info = port_info_[id];
      info.node = c.node;
      set_peer(p, c.wire_peer);
      info.link = static_cast<uint32_t>(l);
      set_rate(p, info, fwd_.link_rate_bps(info.link));
      info.prop_ps = fwd_.link_prop_ps(info.link);
      p.delay_ps = info.prop_ps + nodes()[p.peer].latency_ps;
      info.buffer_bytes = spec.link_buffer_bytes[l];
      info.inert = c.inert;
      info.optical = c.optical;
      info.lossy_link = !spec.link_lossy.empty() && spec.link_lossy[l] != 0;
    }
  }
  for (uint32_t p = 0; p < ports_.size(); ++p)
    if (port_info_[p].optical) resolve_channel(p);
  // one NIC scheduler per GPU egress port
  for (uint32_t gpu = 0; gpu < num_gpus(); ++gpu) {
    for (const uint32_t p : {fwd_.gpu_nic_port(gpu), fwd_.gpu_nvl_port(gpu)}) {
      if (p == kNone) continue;
      set_nic(ports_[p]);
      port_nic_[p] = static_cast<uint32_t>(nics_.size());
      nics_.emplace_back();
    }
  }

  // The frame pool and the event nodes grow by doubling, each move a copy of the whole pool
  // (on the per-frame path); reserved for kFramesPerGpu frames per GPU, address space only
  // until used, most runs never move them (the 1,024-GPU permutation of bench/one_run.py peaks
  // at 38 frames per GPU).
  pool_.reserve(size_t{kFramesPerGpu} * num_gpus());
  eng_.reserve_events(size_t{kFramesPerGpu} * num_gpus());

  // Arrivals and transmit completions, nearly every event, get direct handlers of their own
  // (the event's fields in registers, no virtual call, no switch in on_event).
  // The network is its engine's first handler (the Simulator builds it right after the
  // engine), so its kinds are constants: the per-frame pushes store an immediate kind and the
  // loop tests the two hot kinds against immediates.
  RF_CHECK(eng_.register_direct(&on_arrive, this) == kind_base_,
           "the packet network must be the first handler registered on its engine");
  eng_.register_direct(&on_tx_done, this);
  for (uint32_t k = kTxDone + 1; k < kNumSub; ++k) eng_.register_handler(this);
  changes_.attach(eng_, *this, fwd_, kind_base_ + kTopologyChange);

  transport_ = make_transport(*this);
  header_ = cfg_.header_bytes >= 0 ? cfg_.header_bytes : transport_->header_bytes();
  ft_ = FlowTransports(spec, num_gpus(), header_, cfg_.header_bytes);
  two_ = ft_.two();
  if (!two_) roce_ = dynamic_cast<proto::Roce*>(transport_.get());
  RF_CHECK(ft_.header(1) >= 0 && ft_.header(1) < cfg_.mtu_bytes, "header_bytes ", ft_.header(1),
           " must be smaller than mtu_bytes ", cfg_.mtu_bytes);
  transport_->set_framing(header_, cfg_.mtu_bytes);
  lossy_ecn_ = transport_->ecn_defaults();
  if (two_) {
    RF_CHECK(make_cross != nullptr, "no factory for cross-site transport '", spec.cross_site_transport, "'");
    cross_transport_ = make_cross(*this);
    cross_transport_->set_framing(ft_.header(1), cfg_.mtu_bytes);
    RF_CHECK(cross_transport_->header_bytes() == ft_.header(1) || cfg_.header_bytes >= 0,
             "cross-site transport: header bytes disagree with its traits");
    // The long link's queues mark as the transport that crosses it is tuned for. (One ecn_pmax
    // serves every port: step marking, kmin = kmax, never reads it.)
    lossy_ecn_ = cross_transport_->ecn_defaults();
    RF_CHECK(lossy_ecn_.kmin_ps == lossy_ecn_.kmax_ps, "cross-site transport '", spec.cross_site_transport,
             "': only step ECN marking (kmin = kmax) is modelled on the long link");
    // Thresholds scaled to the long link (Sites: its round trip, not a datacenter's).
    if (spec.cross_site_ecn_ps >= 0) lossy_ecn_.kmin_ps = lossy_ecn_.kmax_ps = spec.cross_site_ecn_ps;
    if (spec.cross_site_min_rto_ps >= 0) {  // (Sites always sets it; a bare spec may not)
      RF_CHECK(spec.cross_site_min_rto_ps > 0, "cross_site_min_rto_ps must be positive");
      RF_CHECK(cross_transport_->set_long_link(spec.cross_site_min_rto_ps), "cross-site transport '",
               spec.cross_site_transport, "' has no long-link settings");
    }
  }
  RF_CHECK(header_ >= 0 && header_ < cfg_.mtu_bytes, "header_bytes ", header_,
           " must be smaller than mtu_bytes ", cfg_.mtu_bytes);
  mtu_ = cfg_.mtu_bytes;
  lossless_ = cfg_.lossless >= 0 ? cfg_.lossless != 0 : transport_->lossless();
  fwd_.set_per_frame_relays(lossless_);
  const Transport::EcnDefaults ecn = transport_->ecn_defaults();
  if (cfg_.ecn_kmin_ps == -1) cfg_.ecn_kmin_ps = ecn.kmin_ps;
  if (cfg_.ecn_kmax_ps == -1) cfg_.ecn_kmax_ps = ecn.kmax_ps;
  if (cfg_.ecn_pmax == -1) cfg_.ecn_pmax = ecn.pmax;
  if (!two_) lossy_ecn_ = {cfg_.ecn_kmin_ps, cfg_.ecn_kmax_ps, cfg_.ecn_pmax};
  RF_CHECK(cfg_.ecn_kmin_ps >= 0, "ecn_kmin_ps ", cfg_.ecn_kmin_ps, " is negative");
  RF_CHECK(cfg_.ecn_kmax_ps >= cfg_.ecn_kmin_ps, "ecn_kmax_ps ", cfg_.ecn_kmax_ps, " is below ecn_kmin_ps ",
           cfg_.ecn_kmin_ps, " (a threshold left at -1 is ", cfg_.transport, "'s default)");
  RF_CHECK(cfg_.ecn_pmax >= 0 && cfg_.ecn_pmax <= 1, "ecn_pmax ", cfg_.ecn_pmax, " is outside [0, 1]");
  ecn_pmax_ = cfg_.ecn_pmax;
  for (uint32_t p = 0; p < ports_.size(); ++p) set_thresholds(p);
  take_hop_keys();
  built_ = true;  // (fwd_ built its tables from the same channels)
}

void Network::set_thresholds(uint32_t port) {
  Port& p = ports_[port];
  PortInfo& info = port_info_[port];
  // ECN thresholds are queueing delays at the port's rate, so one setting fits all speeds.
  p.lossy = info.lossy_link && lossless_ && !info.inert;
  const SimTime kmin = info.lossy_link ? lossy_ecn_.kmin_ps : cfg_.ecn_kmin_ps;
  const SimTime kmax = info.lossy_link ? lossy_ecn_.kmax_ps : cfg_.ecn_kmax_ps;
  p.ecn_kmin = static_cast<Bytes>(static_cast<__int128>(kmin) * info.rate_bps / 8 / engine::kPsPerSec);
  p.ecn_kmax = static_cast<Bytes>(static_cast<__int128>(kmax) * info.rate_bps / 8 / engine::kPsPerSec);
  if (!lossless_ || info.inert) return;
  if (p.lossy) {  // never PAUSEs: its queue drops instead
    p.xoff = std::numeric_limits<Bytes>::max();
    info.xon = p.xoff;
    return;
  }
  // PFC headroom: bytes that can still arrive after XOFF is decided: the pause frame's
  // flight, the wire in both directions, the peer's latency and one frame in service at
  // each end.
  const SimTime reaction = 2 * info.prop_ps + nodes()[p.peer].latency_ps;
  const Bytes headroom =
      static_cast<Bytes>(static_cast<__int128>(reaction) * info.rate_bps / 8 / engine::kPsPerSec) + 2 * mtu_;
  const Bytes xoff = std::max<Bytes>(mtu_, static_cast<Bytes>(static_cast<__int128>(cfg_.pfc_xoff_ps) *
                                                              info.rate_bps / 8 / engine::kPsPerSec));
  p.xoff = std::min(xoff, info.buffer_bytes - headroom);
  RF_CHECK(p.xoff >= mtu_ || nodes()[p.peer].kind == NodeKind::Gpu, "link ", info.link, ": buffer ",
           info.buffer_bytes, " B leaves no room for PFC headroom of ", headroom,
           " B at this rate and latency; raise buffer_bytes or", " run lossy");
  info.xon = std::max<Bytes>(0, p.xoff - 2 * mtu_);
}

}  // namespace rfabric::net
