// registry.hpp: transport lookup by name. The list of protocols is fabric/transport_traits.hpp
// (what both backends know of each); registry.cpp pairs each with its factory. Adding one is
// a new packet/transports/<name>.cpp plus one line in each.
#pragma once

#include <string>
#include <vector>

#include "fabric/transport_traits.hpp"
#include "packet/network.hpp"

namespace rfabric::proto {

/// The factory for transport `name`; throws SpecError naming the known ones if unknown.
net::Network::TransportFactory find_transport(const std::string& name);
std::vector<std::string> transport_names();

}  // namespace rfabric::proto
