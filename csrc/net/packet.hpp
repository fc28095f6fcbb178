// packet.hpp: the packet record and its pool. Packets are PODs in one per-network vector
// and are referred to by index; a free list recycles them, so steady state allocates
// nothing per packet. Protocols own `type` and `hdr`; the core never interprets them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/check.hpp"
#include "engine/time.hpp"
#include "net/spec.hpp"  // kNone

namespace rfabric::net {

struct Packet {
  uint32_t next;  ///< intrusive FIFO / free-list link
  uint32_t flow;
  uint32_t src;            ///< source GPU id
  uint32_t dst;            ///< destination GPU id
  uint32_t size_bytes;     ///< bytes on the wire, headers included
  uint32_t payload_bytes;  ///< message bytes carried
  uint32_t port;           ///< channel the packet is on or arrived through
  uint32_t seq;            ///< protocol-defined sequence number
  uint8_t proto;           ///< index of the owning transport
  uint8_t type;            ///< protocol-defined packet type
  uint8_t ecn;             ///< congestion-experienced mark
  uint8_t hops;
  uint32_t aux;             ///< protocol-defined
  uint32_t chan_gen;        ///< generation of the channel it is on, when it was sent (dark-circuit check)
  uint64_t hdr;             ///< protocol-defined
  engine::SimTime sent_ps;  ///< when the source put it on its first wire
};

class PacketPool {
 public:
  uint32_t alloc() {
    if (free_ != kNone) {
      const uint32_t i = free_;
      free_ = packets_[i].next;
      ++live_;
      return i;
    }
    packets_.push_back(Packet{});
    ++live_;
    return static_cast<uint32_t>(packets_.size() - 1);
  }
  void release(uint32_t i) {
    RF_DCHECK(live_ > 0 && i < packets_.size());
    packets_[i].next = free_;
    free_ = i;
    --live_;
  }
  Packet& operator[](uint32_t i) { return packets_[i]; }
  const Packet& operator[](uint32_t i) const { return packets_[i]; }
  size_t live() const { return live_; }
  /// Call f(packet) for every allocated packet (a walk over the free list and the pool:
  /// O(capacity), for inspection between runs, never on the hot path).
  template <class F>
  void for_each_live(F&& f) const {
    std::vector<uint8_t> free(packets_.size(), 0);
    for (uint32_t i = free_; i != kNone; i = packets_[i].next) free[i] = 1;
    for (size_t i = 0; i < packets_.size(); ++i)
      if (!free[i]) f(packets_[i]);
  }
  size_t capacity() const { return packets_.size(); }

 private:
  std::vector<Packet> packets_;
  uint32_t free_ = kNone;
  size_t live_ = 0;
};

}  // namespace rfabric::net
