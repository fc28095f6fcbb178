// dctcp.cpp: DCTCP (Alizadeh et al., SIGCOMM 2010) over lossy drop-tail queues.
// Window-based sender with slow start, congestion avoidance, fast retransmit on three
// duplicate ACKs (then go-back-N from the first hole on a partial ACK, repairing a loss
// burst in about one round trip as SACK stacks do) and go-back-N on retransmission timeout; the receiver ACKs
// every data packet cumulatively and echoes its ECN mark. Once per window of data the sender updates alpha =
// (1-g) alpha + g F (F: fraction of ECN-echoing ACKs) and, if any ACK was marked, cuts cwnd by alpha/2. A
// flow completes when its last byte reaches the receiver. Run across a long link (set_long_link,
// Sites' cross-site flows) it takes that link's minimum RTO, paces its frames (once it has an
// RTT sample) and starts alpha at 0 (DctcpParams, "Over a long link").
#include <algorithm>
#include <memory>
#include <vector>

#include "engine/check.hpp"
#include "packet/network.hpp"
#include "packet/transports/dctcp_params.hpp"

namespace rfabric::proto {
namespace {

using engine::kNever;
using engine::SimTime;
using net::Bytes;
using net::Packet;
using net::PacketEnds;

enum PacketType : uint8_t { kData = 0, kAck = 1 };

class Dctcp final : public net::Transport {
 public:
  explicit Dctcp(net::Network& net) : Transport(net) {
    timer_kind_ = net.engine().register_handler(this);
    const auto& c = net.config();
    RF_CHECK(c.dctcp_g > 0 && c.dctcp_g < 1, "dctcp_g must be in (0, 1)");
    RF_CHECK(c.dctcp_init_cwnd_packets >= 1, "dctcp_init_cwnd_packets must be >= 1");
    RF_CHECK(c.dctcp_min_rto_ps > 0, "dctcp_min_rto_ps must be positive");
    RF_CHECK(c.dctcp_max_timeouts >= 1, "dctcp_max_timeouts must be at least 1, got ", c.dctcp_max_timeouts);
    min_rto_ = c.dctcp_min_rto_ps;
  }

  bool set_long_link(SimTime min_rto) override {
    min_rto_ = min_rto;
    pace_ = true;
    alpha0_ = DctcpParams::long_link_alpha0;
    return true;
  }

  Bytes header_bytes() const override { return DctcpParams::traits.header_bytes; }
  bool lossless() const override { return DctcpParams::traits.lossless; }
  EcnDefaults ecn_defaults() const override { return DctcpParams::ecn; }

  void prepare(uint32_t num_flows) override {
    st_.resize(num_flows);
    rx_.resize(num_flows);
  }
  bool quiet(uint32_t f) const override { return !st_[f].timer_pending; }
  void recycle(uint32_t f) override {
    st_[f] = State{};
    rx_[f] = Receiver{};  // (frees the per-packet receive map)
  }

  void start_flow(uint32_t f) override {
    State& s = st_[f];
    const Bytes mss = mss_;
    const Bytes size = net_.flows().size_bytes[f];
    s.npkts = static_cast<uint32_t>((size + mss - 1) / mss);
    s.cwnd = static_cast<double>(net_.config().dctcp_init_cwnd_packets);
    s.ssthresh = DctcpParams::initial_ssthresh;
    s.rto = min_rto_;
    s.alpha = alpha0_;
    rx_[f].got.assign(s.npkts, 0);
    wake(f);
  }

  SimTime next_packet(uint32_t f, Packet& p, PacketEnds& e) override {
    State& s = st_[f];
    auto& flows = net_.flows_mut();
    uint32_t seq;
    bool again = true;  // a retransmission (fast, or go-back-N below the highest sent)
    if (s.retransmit) {
      seq = s.snd_una;
      s.retransmit = false;
    } else {
      seq = s.snd_nxt++;
      if (seq >= s.sent_hi) {
        s.sent_hi = seq + 1;
        again = false;
      }
    }
    const Bytes mss = mss_;
    const Bytes payload = std::min<Bytes>(mss, flows.size_bytes[f] - static_cast<Bytes>(seq) * mss);
    RF_DCHECK(seq < s.npkts && payload > 0);  // never a frame past the end of the flow
    if (again) {
      ++flows.retransmits[f];
      flows.resent_bytes[f] += payload;
    }
    p.type = kData;
    p.seq = seq;
    e.sent_ps = net_.now();  // (echoed by the ACK: the RTT sample)
    p.size_bytes = static_cast<uint32_t>(payload + header_);
    flows.sent_bytes[f] = std::max(flows.sent_bytes[f], static_cast<Bytes>(seq) * mss + payload);
    if (s.rto_deadline == kNever) arm(f);
    s.in_nic = can_send(s);
    if (pace_ && s.srtt > 0) {
      // Paced (over a long link): a full window per smoothed RTT, times a ratio, in wire bytes.
      const double ratio =
          s.cwnd < s.ssthresh / 2 ? DctcpParams::pacing_ss_ratio : DctcpParams::pacing_ca_ratio;
      const double gap = static_cast<double>(p.size_bytes) * static_cast<double>(s.srtt) /
                         (ratio * s.cwnd * static_cast<double>(mss_ + header_));
      s.next_send = net_.now() + static_cast<SimTime>(gap);
      return s.in_nic ? s.next_send : kNever;
    }
    return s.in_nic ? net_.now() : kNever;
  }

  void receive(const Packet& p, const PacketEnds& e) override {
    if (p.type == kAck) {
      on_ack(p, e);
      return;
    }
    // Copy what the ACK needs first: sending it may grow the packet pool (invalidating
    // `p` and `e`), and completing the flow may let the executor create flows (growing rx_).
    const uint32_t f = p.flow, seq = p.seq;
    const uint8_t ecn = p.ecn;
    const SimTime sent = e.sent_ps;
    auto& flows = net_.flows_mut();
    bool done = false;
    Receiver& r = rx_[f];
    RF_DCHECK(seq < r.got.size());
    if (!r.got[seq]) {
      r.got[seq] = 1;
      flows.delivered_bytes[f] += payload_of(p);
      while (r.cum < r.got.size() && r.got[r.cum]) ++r.cum;
      done = flows.delivered_bytes[f] == flows.size_bytes[f];
    } else {
      flows.duplicate_bytes[f] += payload_of(p);
    }
    const uint32_t cum = r.cum;
    const uint32_t ack = net_.send_control(f, kAck);
    net_.pool()[ack].seq = cum;
    PacketEnds& a = net_.pool().ends(ack);
    a.aux = ecn;
    a.hdr = static_cast<uint64_t>(sent);
    net_.send_packet(ack);
    if (done) net_.complete_flow(f);
  }

  /// Window-limited rate estimate: cwnd x MSS per smoothed RTT (before the first RTT
  /// sample: -1).
  double flow_rate_bps(uint32_t f) const override {
    const State& s = st_[f];
    if (s.srtt <= 0) return -1;
    return s.cwnd * static_cast<double>(mss_) * 8.0 * 1e12 / static_cast<double>(s.srtt);
  }

  void on_event(const engine::Event& ev) override {
    timer(ev.target);
    if (!st_[ev.target].timer_pending) net_.maybe_retire(ev.target);
  }

 private:
  void timer(uint32_t f) {
    State& s = st_[f];
    const SimTime now = net_.now();
    if (s.rto_deadline == kNever) {
      s.timer_pending = false;
      return;
    }
    if (now < s.rto_deadline) {
      net_.engine().schedule(s.rto_deadline, f, timer_kind_);
      return;
    }
    s.timer_pending = false;
    if (++s.timeouts > net_.config().dctcp_max_timeouts) {
      s.rto_deadline = kNever;  // give up: the flow stays unfinished (its peer is unreachable)
      return;
    }
    // Retransmission timeout: go back to the first unacknowledged packet.
    s.ssthresh = std::max(s.cwnd / 2, DctcpParams::min_ssthresh);
    s.cwnd = 1;
    s.snd_nxt = s.snd_una;
    s.recovering = false;
    s.dupacks = 0;
    s.rto = std::min<SimTime>(s.rto * 2, DctcpParams::max_rto_backoff * min_rto_);
    s.rto_deadline = kNever;
    arm(f);
    wake(f);
  }

  struct State {
    uint32_t npkts = 0, snd_una = 0, snd_nxt = 0, sent_hi = 0, recover = 0, window_end = 0;
    uint32_t dupacks = 0, acks = 0, marked = 0;
    int timeouts = 0;                          ///< consecutive, since the last cumulative ACK progress
    double cwnd = 1, ssthresh = 0, alpha = 1;  // cwnd in packets
    SimTime srtt = 0, rttvar = 0, rto = 0, rto_deadline = kNever;
    SimTime next_send = 0;  ///< paced: the earliest the next frame may leave
    bool retransmit = false, recovering = false, in_nic = false, timer_pending = false;
  };
  struct Receiver {
    std::vector<uint8_t> got;
    uint32_t cum = 0;
  };

  static bool can_send(const State& s) {
    if (s.retransmit) return true;
    return s.snd_nxt < s.npkts && static_cast<double>(s.snd_nxt - s.snd_una) < s.cwnd;
  }

  void wake(uint32_t f) {
    State& s = st_[f];
    if (s.in_nic || !can_send(s)) return;
    s.in_nic = true;
    net_.activate(f, std::max(net_.now(), s.next_send));
  }

  /// After an ACK: hold a NIC slot exactly while the flow can send. An ACK can leave a flow
  /// that holds a slot with nothing to send (everything acknowledged after a go-back-N, or a
  /// window cut): it gives the slot back, else the NIC would pull a frame past the end of
  /// the flow (whose negative payload wrapped delivered_bytes past 2^32) or beyond cwnd.
  void sync_nic(uint32_t f) {
    State& s = st_[f];
    if (can_send(s)) {
      wake(f);
    } else if (s.in_nic) {
      s.in_nic = false;
      net_.deactivate(f);
    }
  }

  void arm(uint32_t f) {
    State& s = st_[f];
    s.rto_deadline = net_.now() + s.rto;
    if (!s.timer_pending) {
      s.timer_pending = true;
      net_.engine().schedule(s.rto_deadline, f, timer_kind_);
    }
  }

  void on_ack(const Packet& p, const PacketEnds& e) {
    const uint32_t f = p.flow;
    State& s = st_[f];
    const auto& c = net_.config();
    const SimTime now = net_.now();
    ++s.acks;
    if (e.aux) ++s.marked;
    const uint32_t cum = p.seq;
    if (cum > s.snd_una) {
      const SimTime rtt = now - static_cast<SimTime>(e.hdr);
      if (s.srtt == 0) {
        s.srtt = rtt;
        s.rttvar = rtt / 2;
      } else {
        const SimTime err = rtt > s.srtt ? rtt - s.srtt : s.srtt - rtt;
        s.rttvar = (3 * s.rttvar + err) / 4;
        s.srtt = (7 * s.srtt + rtt) / 8;
      }
      s.rto = std::max(min_rto_, s.srtt + DctcpParams::rto_k * s.rttvar);
      const uint32_t newly = cum - s.snd_una;
      s.timeouts = 0;
      s.retransmit = false;  // the hole a pending fast retransmit was for is acknowledged
      s.snd_una = cum;
      if (s.snd_nxt < s.snd_una) s.snd_nxt = s.snd_una;
      s.dupacks = 0;
      if (s.recovering) {
        if (cum >= s.recover) {
          s.recovering = false;
          s.cwnd = s.ssthresh;
        } else {
          // Partial ACK: the loss was a burst. Resend from the first hole on (go-back-N in
          // the window), as SACK-based stacks repair a burst in about one round trip;
          // NewReno's one hole per round trip would take hundreds of RTTs after a dark
          // circuit or a failed link.
          s.snd_nxt = s.snd_una;
        }
      } else if (s.cwnd < s.ssthresh) {
        s.cwnd += newly;
      } else {
        s.cwnd += newly / s.cwnd;
      }
      if (s.snd_una >= s.window_end) {
        // One window of data acknowledged: DCTCP's alpha update and proportional cut.
        const double frac = s.acks ? static_cast<double>(s.marked) / s.acks : 0.0;
        s.alpha = (1 - c.dctcp_g) * s.alpha + c.dctcp_g * frac;
        if (s.marked > 0) {
          s.cwnd = std::max(1.0, s.cwnd * (1 - s.alpha / 2));
          s.ssthresh = s.cwnd;
        }
        s.acks = s.marked = 0;
        s.window_end = s.snd_nxt;
      }
      if (s.snd_una >= s.npkts) {
        s.rto_deadline = kNever;  // everything acknowledged
        sync_nic(f);
        return;
      }
      arm(f);
    } else if (cum == s.snd_una && s.snd_una < s.snd_nxt) {
      if (++s.dupacks == DctcpParams::dupack_threshold && !s.recovering) {
        s.recovering = true;
        s.recover = s.snd_nxt;
        s.ssthresh = std::max(s.cwnd / 2, DctcpParams::min_ssthresh);
        s.cwnd = s.ssthresh;
        s.retransmit = true;
      }
    }
    sync_nic(f);
  }

  std::vector<State> st_;
  std::vector<Receiver> rx_;
  uint32_t timer_kind_ = 0;
  // Datacenter settings by default; set_long_link's for the cross-site flows.
  SimTime min_rto_ = 0;  ///< EngineConfig::dctcp_min_rto_ps, or set_long_link's
  bool pace_ = false;    ///< frames paced (DctcpParams::pacing_*_ratio), not sent back to back
  double alpha0_ = 1;    ///< alpha of a new flow (1, as Linux; long link: long_link_alpha0)
};

}  // namespace

std::unique_ptr<net::Transport> make_dctcp(net::Network& net) { return std::make_unique<Dctcp>(net); }

}  // namespace rfabric::proto
