// transport_traits.hpp: what both backends know of a transport without running it: the bytes
// of header it adds to every data frame and whether the fabric runs lossless (PFC) under it.
// The packet transports (packet/transports/) answer Transport::header_bytes() and lossless()
// from here, and the flow backend frames its flows with the same numbers, so the two backends
// cannot disagree. A transport's congestion-control parameters are its own
// (packet/transports/<name>_params.hpp): only the packet backend runs them.
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

inline std::vector<std::string> transport_names() {
  std::vector<std::string> out;
  for (const TransportTraits& t : kTransportTraits) out.emplace_back(t.name);
  return out;
}

}  // namespace rfabric::net
