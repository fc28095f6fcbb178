#include "packet/transports/registry.hpp"

#include <iterator>
#include <memory>

#include "engine/check.hpp"

namespace rfabric::proto {

std::unique_ptr<net::Transport> make_roce(net::Network& net);
std::unique_ptr<net::Transport> make_dctcp(net::Network& net);

namespace {
struct Entry {
  const net::TransportTraits* traits;
  net::Network::TransportFactory make;
};
constexpr Entry kFactories[] = {
    {&net::kRoceTraits, &make_roce},
    {&net::kDctcpTraits, &make_dctcp},
};
static_assert(std::size(kFactories) == std::size(net::kTransportTraits), "one factory per transport");
}  // namespace

net::Network::TransportFactory find_transport(const std::string& name) {
  const net::TransportTraits& t = net::transport_traits(name);  // (throws for an unknown name)
  for (const Entry& e : kFactories)
    if (e.traits->name == t.name) return e.make;
  throw InternalError("transport '" + name + "' has no factory");
}

std::vector<std::string> transport_names() { return net::transport_names(); }

}  // namespace rfabric::proto
