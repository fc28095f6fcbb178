// registry.hpp: transport lookup by name. The only list of protocols is registry.cpp;
// adding one is a new proto/<name>.cpp plus one line there.
#pragma once

#include <string>
#include <vector>

#include "net/network.hpp"

namespace rfabric::proto {

/// What a transport fixes for every frame: its header bytes and whether it runs lossless.
struct TransportTraits {
  net::Bytes header_bytes;
  bool lossless;
};

/// The factory for transport `name`; throws SpecError naming the known ones if unknown.
net::Network::TransportFactory find_transport(const std::string& name);
std::vector<std::string> transport_names();
/// Transport `name`'s traits, without building a network (the flow backend's headers).
TransportTraits transport_traits(const std::string& name);

}  // namespace rfabric::proto
