// roce.cpp: the RoCEv2/DCQCN transport (roce.hpp) and its factory.
#include "packet/transports/roce.hpp"

#include <memory>

namespace rfabric::proto {

std::unique_ptr<net::Transport> make_roce(net::Network& net) { return std::make_unique<Roce>(net); }

}  // namespace rfabric::proto
