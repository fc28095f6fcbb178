// transport_traits.hpp: what both backends know of a transport without running it: the bytes
// of header it adds to every data frame and whether the fabric runs lossless (PFC) under it.
// The packet transports (packet/transports/) answer Transport::header_bytes() and lossless()
// from here, and the flow backend frames its flows with the same numbers, so the two backends
// cannot disagree. A transport's congestion-control parameters are its own
// (packet/transports/<name>_params.hpp), except RoCE's DCQCN constants, which the flow
// backend's dynamic fluid runs too (fabric/roce_dcqcn.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/check.hpp"
#include "fabric/spec.hpp"

namespace rfabric::net {

struct TransportTraits {
  std::string_view name;  ///< as EngineConfig::transport names it
  Bytes header_bytes;     ///< header bytes per data frame
  bool lossless;          ///< the fabric runs PFC under it by default
};

/// RoCEv2: Eth 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4; RDMA assumes a lossless fabric.
inline constexpr TransportTraits kRoceTraits{"roce", 62, true};
/// TCP: Eth 14 + IPv4 20 + TCP 20 + FCS 4, over lossy drop-tail queues.
inline constexpr TransportTraits kDctcpTraits{"dctcp", 58, false};
/// The transports compiled in (packet/transports/registry.cpp pairs each with its factory).
inline constexpr TransportTraits kTransportTraits[] = {kRoceTraits, kDctcpTraits};

/// Transport `name`'s traits; throws SpecError naming the known ones if unknown.
inline const TransportTraits& transport_traits(const std::string& name) {
  for (const TransportTraits& t : kTransportTraits)
    if (name == t.name) return t;
  std::string known;
  for (const TransportTraits& t : kTransportTraits)
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  throw SpecError("unknown transport '" + name + "' (known: " + known + ")");
}

/// Which transport each flow runs: the run's (0), or, between GPUs of different sites when the
/// spec names a cross-site transport (NetworkSpec::cross_site_transport), that one (1). Both
/// backends build it from the spec, so they frame a flow alike.
class FlowTransports {
 public:
  FlowTransports() = default;
  /// Checks the spec's site columns (SpecError naming what is wrong). `run_header`: the run's
  /// transport's header bytes as the network frames them; `header_override` >= 0
  /// (EngineConfig::header_bytes) replaces the cross-site transport's too.
  FlowTransports(const NetworkSpec& spec, size_t num_gpus, Bytes run_header, Bytes header_override) {
    header_[0] = run_header;
    RF_CHECK(spec.gpu_site.empty() || spec.gpu_site.size() == num_gpus, "gpu_site has ", spec.gpu_site.size(),
             " rows for ", num_gpus, " GPUs");
    if (spec.cross_site_transport.empty()) {
      header_[1] = header_[0];
      return;
    }
    const TransportTraits& c = transport_traits(spec.cross_site_transport);
    RF_CHECK(!c.lossless, "cross-site transport '", spec.cross_site_transport,
             "' assumes a lossless fabric; the long link is lossy (a loss-recovering transport, e.g. dctcp)");
    RF_CHECK(!spec.gpu_site.empty(), "a cross-site transport needs gpu_site");
    cross_ = c.name;
    header_[1] = header_override >= 0 ? header_override : c.header_bytes;
    site_ = spec.gpu_site;
  }
  /// 1 when a flow from GPU src to GPU dst crosses sites under a transport of its own, else 0.
  uint8_t of(uint32_t src, uint32_t dst) const { return !site_.empty() && site_[src] != site_[dst]; }
  bool two() const { return !site_.empty(); }
  /// Header bytes per data frame of transport `k` (of()).
  Bytes header(uint8_t k) const { return header_[k]; }
  /// The cross-site transport's name ("" if none).
  std::string_view cross() const { return cross_; }

 private:
  std::vector<int32_t> site_;  ///< per GPU; empty: every flow runs the run's transport
  Bytes header_[2] = {0, 0};
  std::string_view cross_;
};

inline std::vector<std::string> transport_names() {
  std::vector<std::string> out;
  for (const TransportTraits& t : kTransportTraits) out.emplace_back(t.name);
  return out;
}

}  // namespace rfabric::net
