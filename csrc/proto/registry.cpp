#include "proto/registry.hpp"

#include <memory>

#include "engine/check.hpp"

namespace rfabric::proto {

std::unique_ptr<net::Transport> make_roce(net::Network& net);
std::unique_ptr<net::Transport> make_dctcp(net::Network& net);

namespace {
struct Entry {
  const char* name;
  net::Network::TransportFactory make;
  TransportTraits traits;  ///< what the flow backend takes without a packet network (tests
                           ///< check it against the transport's own answers)
};
constexpr Entry kTransports[] = {
    {"roce", &make_roce, {62, true}},
    {"dctcp", &make_dctcp, {58, false}},
};

const Entry& find(const std::string& name) {
  for (const Entry& e : kTransports)
    if (name == e.name) return e;
  std::string known;
  for (const Entry& e : kTransports) known += std::string(known.empty() ? "" : ", ") + e.name;
  throw SpecError("unknown transport '" + name + "' (known: " + known + ")");
}
}  // namespace

net::Network::TransportFactory find_transport(const std::string& name) { return find(name).make; }

TransportTraits transport_traits(const std::string& name) { return find(name).traits; }

std::vector<std::string> transport_names() {
  std::vector<std::string> out;
  for (const Entry& e : kTransports) out.emplace_back(e.name);
  return out;
}

}  // namespace rfabric::proto
