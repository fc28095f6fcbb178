// registry.hpp: transport lookup by name. The only list of protocols is registry.cpp;
// adding one is a new proto/<name>.cpp plus one line there.
#pragma once

#include <string>
#include <vector>

#include "net/network.hpp"

namespace rfabric::proto {

/// The factory for transport `name`; throws SpecError naming the known ones if unknown.
net::Network::TransportFactory find_transport(const std::string& name);
std::vector<std::string> transport_names();

}  // namespace rfabric::proto
