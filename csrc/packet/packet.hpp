// packet.hpp: the packet record and its pool. A packet is two PODs at one index, in two
// per-network vectors (Packet, read at every hop, and PacketEnds, protocol fields read at the
// ends), and is referred to by that index; a free list recycles them, so steady state
// allocates nothing per packet. Protocols own `type` and PacketEnds; the core never
// interprets them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/check.hpp"
#include "engine/time.hpp"
#include "fabric/spec.hpp"  // kNone

namespace rfabric::net {

/// What forwarding reads and writes at every hop, and all the network and RoCE read of a
/// frame: 32 bytes, two frames per cache line. (At 4,096 GPUs a permutation keeps ~136k
/// frames alive and each hop reads its frame at random: the pool is the largest item of the
/// working set.) Where it comes from and what it carries follow from the flow: a data frame
/// goes from the flow's source to its destination with size_bytes - Network::header_bytes()
/// bytes of the message, a control frame back from the destination with none
/// (Network::src_of, payload_of).
struct Packet {
  uint32_t next;  ///< intrusive FIFO / free-list link
  uint32_t flow;
  uint32_t dst;         ///< destination GPU id
  uint32_t size_bytes;  ///< bytes on the wire, headers included
  uint32_t port;        ///< channel the packet is on or arrived through
  uint32_t chan_gen;    ///< generation of the channel it is on, when it was sent (dark-circuit check)
  uint32_t seq;         ///< protocol-defined sequence number (per-frame spreading reads it per hop)
  bool control;         ///< a control frame (Network::send_control)
  uint8_t type;         ///< protocol-defined packet type
  uint8_t ecn;          ///< congestion-experienced mark
  uint8_t hops;
};

/// Protocol-defined fields beside a frame (same index), which only transports that need them
/// read and write, at the two ends: nothing on the per-hop path touches them.
struct PacketEnds {
  uint32_t aux;
  uint64_t hdr;
  engine::SimTime sent_ps;
};

static_assert(sizeof(Packet) == 32, "two frames per cache line");

class PacketPool {
 public:
  /// Room for n frames without moving the pool (untouched memory: nothing resident until used).
  void reserve(size_t n) {
    packets_.reserve(n);
    ends_.reserve(n);
  }
  uint32_t alloc() {
    if (free_ != kNone) {
      const uint32_t i = free_;
      free_ = packets_[i].next;
      ++live_;
      return i;
    }
    packets_.push_back(Packet{});
    ends_.push_back(PacketEnds{});
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
  PacketEnds& ends(uint32_t i) { return ends_[i]; }
  const PacketEnds& ends(uint32_t i) const { return ends_[i]; }
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
  std::vector<PacketEnds> ends_;
  uint32_t free_ = kNone;
  size_t live_ = 0;
};

}  // namespace rfabric::net
