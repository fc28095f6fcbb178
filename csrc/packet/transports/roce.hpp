// roce.hpp: RoCEv2-style message transfer with DCQCN rate control, for lossless (PFC)
// fabrics. The sender paces each flow at its current rate Rc; the receiver answers
// ECN-marked data with at most one CNP per flow per cnp_interval; a CNP cuts Rc by alpha/2
// and rate-increase steps (timer and byte counter: fast recovery, additive, hyper) bring it
// back, as in Zhu et al., "Congestion Control for Large-Scale RDMA Deployments"
// (SIGCOMM 2015). No per-packet ACKs: a message completes when its last byte reaches the
// receiver. Loss is not recovered (RoCE assumes the fabric is lossless).
//
// The class is in a header so the packet network can call its per-frame members directly
// (Network::roce_: the frame pull and the delivery inline them, with no virtual call), when
// RoCE is every flow's transport.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/check.hpp"
#include "packet/network.hpp"
#include "packet/transports/roce_params.hpp"

namespace rfabric::proto {

class Roce final : public net::Transport {
  using SimTime = engine::SimTime;
  using Bytes = net::Bytes;
  using Packet = net::Packet;
  using PacketEnds = net::PacketEnds;
  static constexpr SimTime kNever = engine::kNever;
  enum PacketType : uint8_t { kData = 0, kCnp = 1 };

 public:
  explicit Roce(net::Network& net) : Transport(net) {
    timer_kind_ = net.engine().register_handler(this);
    const auto& c = net.config();
    RF_CHECK(c.dcqcn_timer_ps > 0, "dcqcn_timer_ps must be positive");
    RF_CHECK(c.dcqcn_byte_counter > 0, "dcqcn_byte_counter must be positive");
    RF_CHECK(c.dcqcn_g > 0 && c.dcqcn_g < 1, "dcqcn_g must be in (0, 1)");
    RF_CHECK(c.dcqcn_f >= 1, "dcqcn_f must be >= 1");
    RF_CHECK(c.dcqcn_rai_bps > 0 && c.dcqcn_rhai_bps > 0, "dcqcn_rai and dcqcn_rhai must be positive");
  }

  Bytes header_bytes() const override { return RoceParams::traits.header_bytes; }
  bool lossless() const override { return RoceParams::traits.lossless; }
  EcnDefaults ecn_defaults() const override { return RoceParams::ecn; }

  void prepare(uint32_t num_flows) override { st_.resize(num_flows); }
  bool quiet(uint32_t f) const override { return !st_[f].timer_pending; }
  void recycle(uint32_t f) override { st_[f] = State{}; }

  void start_flow(uint32_t f) override {
    State& s = st_[f];
    s.line = static_cast<double>(net_.line_rate(f));
    s.rc = s.rt = s.line;
    s.alpha = RoceParams::initial_alpha;
    s.alpha_time = net_.now();
    s.last_cnp_sent = std::numeric_limits<SimTime>::min() / 2;  // no CNP yet
    net_.activate(f, net_.now());
  }

  /// (kNever exactly when the frame took the flow's last new byte: Network::pull_nic relies on it.)
  SimTime next_packet(uint32_t f, Packet& p, PacketEnds&) override {
    State& s = st_[f];
    auto& flows = net_.flows_mut();
    const Bytes left = flows.size_bytes[f] - flows.sent_bytes[f];
    const Bytes payload = std::min(left, mss_);
    RF_DCHECK(payload > 0);  // the NIC pulls a flow only while it has bytes left
    p.type = kData;
    p.size_bytes = static_cast<uint32_t>(payload + header_);
    p.seq = s.next_seq++;
    flows.sent_bytes[f] += payload;
    if (s.rc < s.line) {
      s.byte_count += p.size_bytes;
      if (s.byte_count >= net_.config().dcqcn_byte_counter) [[unlikely]]
        return byte_counter_step(f, s, p.size_bytes);
    }
    return sent(f, s, p.size_bytes);
  }

  void receive(const Packet& p, const PacketEnds&) override {
    const uint32_t f = p.flow;
    if (p.type == kCnp) {
      on_cnp(f);
      return;
    }
    auto& flows = net_.flows_mut();
    flows.delivered_bytes[f] += Bytes{p.size_bytes} - header_;  // (a data frame: payload_of)
    RF_DCHECK(flows.delivered_bytes[f] <= flows.size_bytes[f]);
    if (p.ecn && net_.now() - st_[f].last_cnp_sent >= net_.config().dcqcn_cnp_interval_ps) [[unlikely]] {
      send_cnp(f);
      return;
    }
    if (flows.delivered_bytes[f] == flows.size_bytes[f]) net_.complete_flow(f);
  }

  double flow_rate_bps(uint32_t f) const override { return st_[f].rc; }

  void on_event(const engine::Event& ev) override {
    timer(ev.target);
    if (!st_[ev.target].timer_pending) net_.maybe_retire(ev.target);
  }

 private:
  void timer(uint32_t f) {
    State& s = st_[f];
    const SimTime now = net_.now();
    if (now < s.timer_deadline) {  // a CNP moved the deadline: re-arm lazily
      net_.engine().schedule(s.timer_deadline, f, timer_kind_);
      return;
    }
    s.timer_pending = false;
    const auto& flows = net_.flows();
    if (flows.sent_bytes[f] >= flows.size_bytes[f]) return;  // nothing left to pace
    if (s.rc >= s.line && s.rt >= s.line) return;
    ++s.t_stage;
    increase(f, s);
    arm(f, now + net_.config().dcqcn_timer_ps);
  }

  struct State {
    double line = 0, rc = 0, rt = 0, alpha = 1;
    SimTime alpha_time = 0, last_cnp_sent = 0, timer_deadline = 0, last_tx = 0;
    uint32_t last_size = 0;
    Bytes byte_count = 0;
    int t_stage = 0, bc_stage = 0;
    uint32_t next_seq = 0;
    bool timer_pending = false;
  };

  // The per-frame paths above end in tail calls only (their rare branches out of line), so
  // they save no registers.

  /// next_packet() once the frame is built: the flow's pacing.
  RF_HOT SimTime sent(uint32_t f, State& s, uint32_t size) {
    s.last_tx = net_.now();
    s.last_size = size;
    const auto& flows = net_.flows();
    if (flows.sent_bytes[f] >= flows.size_bytes[f]) return kNever;
    // Pace at Rc; at line rate this is exactly when the NIC finishes this frame.
    return pace(s);
  }

  /// next_packet() when the byte counter fills: a rate-increase step, then as sent().
  [[gnu::noinline]] SimTime byte_counter_step(uint32_t f, State& s, uint32_t size) {
    s.byte_count = 0;
    ++s.bc_stage;
    increase(f, s);
    return sent(f, s, size);
  }

  /// receive() of an ECN-marked frame with no CNP sent within cnp_interval: send one, then
  /// the completion test.
  [[gnu::noinline]] void send_cnp(uint32_t f) {
    st_[f].last_cnp_sent = net_.now();
    const uint32_t cnp = net_.send_control(f, kCnp);
    net_.send_packet(cnp);
    const auto& flows = net_.flows();
    if (flows.delivered_bytes[f] == flows.size_bytes[f]) net_.complete_flow(f);
  }

  void arm(uint32_t f, SimTime deadline) {
    State& s = st_[f];
    s.timer_deadline = deadline;
    if (s.rc >= s.line && s.rt >= s.line) return;
    if (!s.timer_pending) {
      s.timer_pending = true;
      net_.engine().schedule(deadline, f, timer_kind_);
    }
  }

  [[gnu::noinline]] void on_cnp(uint32_t f) {
    State& s = st_[f];
    const auto& c = net_.config();
    const SimTime now = net_.now();
    // alpha decays by (1-g) per timer period without a CNP; apply the elapsed periods lazily.
    const int64_t periods = (now - s.alpha_time) / c.dcqcn_timer_ps;
    if (periods > 0) s.alpha *= std::pow(1.0 - c.dcqcn_g, static_cast<double>(periods));
    s.alpha = (1.0 - c.dcqcn_g) * s.alpha + c.dcqcn_g;
    s.alpha_time = now;
    s.rt = s.rc;
    s.rc = std::max(static_cast<double>(c.dcqcn_min_rate_bps), s.rc * (1.0 - s.alpha / 2));
    s.t_stage = s.bc_stage = 0;
    s.byte_count = 0;
    arm(f, now + c.dcqcn_timer_ps);
  }

  SimTime pace(const State& s) const {
    // ceil() of a positive gap, without a libm call per frame
    // (8e12 in one product: s.last_size * 8.0 is exact, so this is the same double)
    const double gap = s.last_size * 8e12 / s.rc;
    SimTime whole = static_cast<SimTime>(gap);
    if (static_cast<double>(whole) < gap) ++whole;
    return s.last_tx + whole;
  }

  void increase(uint32_t f, State& s) {
    const auto& c = net_.config();
    const double rai = static_cast<double>(c.dcqcn_rai_bps);
    const double rhai = static_cast<double>(c.dcqcn_rhai_bps);
    const int lo = std::min(s.t_stage, s.bc_stage), hi = std::max(s.t_stage, s.bc_stage);
    if (hi < c.dcqcn_f) {
      // fast recovery: halve the distance to the target
    } else if (lo > c.dcqcn_f) {
      s.rt += (lo - c.dcqcn_f) * rhai;
    } else {
      s.rt += rai;
    }
    s.rt = std::min(s.rt, s.line);
    s.rc = std::min(s.line, (s.rt + s.rc) / 2);
    if (s.line - s.rc < RoceParams::line_rate_snap_bps) s.rc = s.line;
    // A NIC re-paces at once: the next frame may leave earlier at the higher rate.
    const auto& flows = net_.flows();
    if (s.last_size > 0 && flows.sent_bytes[f] < flows.size_bytes[f]) {
      const SimTime next = std::max(pace(s), net_.now());
      if (next < flows.nic_ready[f]) net_.activate(f, next);
    }
  }

  std::vector<State> st_;
  uint32_t timer_kind_ = 0;
};

}  // namespace rfabric::proto
