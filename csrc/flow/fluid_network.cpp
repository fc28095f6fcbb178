// fluid_network.cpp: the flow backend's dynamic mode (see fluid_network.hpp for the model):
// its set-up, flows and their lanes, topology changes, events and results. The dynamics
// (DCQCN, the step's plan and commit, quiescence) are fluid_dynamics.cpp's.
#include "flow/fluid_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/check.hpp"
#include "fabric/ecmp.hpp"
#include "fabric/roce_dcqcn.hpp"

namespace rfabric::flow {

using engine::kNever;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

FluidNetwork::FluidNetwork(engine::Engine& eng, const net::NetworkSpec& spec, const net::EngineConfig& cfg,
                           Bytes header_bytes, bool lossless)
    : eng_(eng), cfg_(cfg), fwd_(spec, cfg) {
  RF_CHECK(cfg.transport == "roce", "flow_model 'dynamic' models RoCE with DCQCN over PFC; transport '",
           cfg.transport, "' is not modelled (use flow_model 'max-min' or the packet backend)");
  RF_CHECK(cfg.mtu_bytes >= 256 && cfg.mtu_bytes <= 65536, "mtu_bytes ", cfg.mtu_bytes,
           " is outside [256, 65536]");
  RF_CHECK(cfg.dcqcn_timer_ps > 0, "dcqcn_timer_ps must be positive");
  RF_CHECK(cfg.dcqcn_byte_counter > 0, "dcqcn_byte_counter must be positive");
  RF_CHECK(cfg.dcqcn_g > 0 && cfg.dcqcn_g < 1, "dcqcn_g must be in (0, 1)");
  RF_CHECK(cfg.dcqcn_f >= 1, "dcqcn_f must be >= 1");
  RF_CHECK(cfg.pfc_xoff_ps > 0, "pfc_xoff_ps must be positive");
  mtu_ = cfg.mtu_bytes;
  header_ = cfg.header_bytes >= 0 ? cfg.header_bytes : header_bytes;
  RF_CHECK(header_ >= 0 && header_ < mtu_, "header_bytes ", header_, " must be smaller than mtu_bytes ",
           mtu_);
  ft_ = net::FlowTransports(spec, fwd_.num_gpus(), header_, cfg.header_bytes);
  RF_CHECK(ft_.header(1) < mtu_, "header_bytes ", ft_.header(1), " must be smaller than mtu_bytes ", mtu_);
  lossless_ = cfg.lossless >= 0 ? cfg.lossless != 0 : lossless;
  fwd_.set_per_frame_relays(lossless_);
  spreads_ = cfg.ecmp_per_packet || cfg.ecmp_adaptive || cfg.ecmp_multipath;
  const net::RoceDcqcn& dcqcn = net::kRoceDcqcn;
  if (cfg_.ecn_kmin_ps == -1) cfg_.ecn_kmin_ps = dcqcn.ecn_kmin_ps;
  if (cfg_.ecn_kmax_ps == -1) cfg_.ecn_kmax_ps = dcqcn.ecn_kmax_ps;
  if (cfg_.ecn_pmax == -1) cfg_.ecn_pmax = dcqcn.ecn_pmax;
  RF_CHECK(cfg_.ecn_kmin_ps >= 0 && cfg_.ecn_kmax_ps >= cfg_.ecn_kmin_ps, "ecn_kmax_ps ", cfg_.ecn_kmax_ps,
           " is below ecn_kmin_ps ", cfg_.ecn_kmin_ps);
  ecn_pmax_ = cfg_.ecn_pmax;
  kind_base_ = eng_.register_handler(this);
  for (uint32_t k = 1; k < kNumSub; ++k) eng_.register_handler(this);
  changes_.attach(eng_, *this, fwd_, kind_base_ + kTopologyChange);
  ports_.resize(fwd_.num_ports());
  port_pauses_.assign(ports_.size(), 0);
  port_marks_.assign(ports_.size(), 0.0);
  max_queued_.assign(ports_.size(), 0.0);
  link_buffer_ = spec.link_buffer_bytes;
  link_lossy_ = spec.link_lossy;
  set_capacities();
}

void FluidNetwork::set_step(SimTime ps) {
  RF_CHECK(ps > 0, "flow_step must be positive, got ", ps, " ps");
  step_ = ps;
}

void FluidNetwork::set_capacities() {
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    PortState& ps = ports_[p];
    if (ps.capacity > 0) ps.busy_ps += (ps.bytes - ps.bytes_mark) * kBitsPsPerByte / ps.capacity;
    ps.bytes_mark = ps.bytes;
    const net::Channel& c = fwd_.channel(p);
    ps.capacity = c.up && !c.inert ? static_cast<double>(c.rate_bps) : 0.0;
    const double rate = static_cast<double>(c.rate_bps);
    ps.kmin = static_cast<double>(cfg_.ecn_kmin_ps) * rate / kBitsPsPerByte;
    ps.kmax = static_cast<double>(cfg_.ecn_kmax_ps) * rate / kBitsPsPerByte;
    // PFC thresholds as Network::set_thresholds: on what comes into a switch over this channel
    const bool lossy_link = !link_lossy_.empty() && link_lossy_[c.link] != 0;
    if (!lossless_ || c.inert || lossy_link || fwd_.nodes()[c.peer].kind != net::NodeKind::Eps) {
      ps.xoff = ps.xon = kInf;
      continue;
    }
    const double reaction =
        2.0 * static_cast<double>(c.prop_ps) + static_cast<double>(fwd_.nodes()[c.peer].latency_ps);
    const double headroom = reaction * rate / kBitsPsPerByte + 2.0 * static_cast<double>(mtu_);
    const double xoff = std::max(static_cast<double>(mtu_),
                                 std::floor(static_cast<double>(cfg_.pfc_xoff_ps) * rate / kBitsPsPerByte));
    const double buffer = c.link < link_buffer_.size() ? static_cast<double>(link_buffer_[c.link]) : kInf;
    ps.xoff = std::min(xoff, buffer - std::floor(headroom));
    ps.xon = std::max(0.0, ps.xoff - 2.0 * static_cast<double>(mtu_));
    ps.reaction = static_cast<SimTime>(reaction);
  }
}

// ---- flows ----

double FluidNetwork::wire_bytes(uint32_t f) const {
  const Bytes h = ft_.header(ft_.of(flows_.src[f], flows_.dst[f]));
  const Bytes size = flows_.size_bytes[f], pp = mtu_ - h;
  return static_cast<double>(size + (size + pp - 1) / pp * h);
}

uint32_t FluidNetwork::append_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps,
                                   uint64_t ecmp_key, int64_t owner) {
  const uint64_t i = flows_.next_id();
  net::check_flow(i, num_gpus(), src, dst, size, start_ps, eng_.now());
  const uint32_t hash = net::ecmp_hash(cfg_.seed, i, ecmp_key);
  RF_CHECK(fwd_.first_port(src, dst, hash) != kNone, "flow ", i, ": GPU ", dst, " is unreachable from GPU ",
           src);
  const uint32_t f = flows_.acquire(1, owner, src, dst, size, start_ps, hash);
  if (src_.size() < flows_.size()) src_.emplace_back();
  flows_.sent_ps[f] = -1;
  flows_.copies[f] = 1;
  src_[f] = Source{};
  return f;
}

uint32_t FluidNetwork::create_flow(uint32_t src, uint32_t dst, Bytes size, SimTime start_ps,
                                   uint64_t ecmp_key, int64_t owner, uint32_t copies) {
  RF_CHECK(copies == 1, "flow_model 'dynamic' runs one flow per message (copies ", copies, ")");
  const uint32_t f = append_flow(src, dst, size, start_ps, ecmp_key, owner);
  if (start_ps == eng_.now() && size > 0) {
    begin_flow(f);
  } else {
    eng_.schedule(start_ps, f, kind_base_ + kStart);
  }
  return f;
}

void FluidNetwork::add_flows(const std::vector<uint32_t>& src, const std::vector<uint32_t>& dst,
                             const std::vector<Bytes>& size, const std::vector<SimTime>& start) {
  net::check_flow_set(flows_.size(), src, dst, size, start);
  for (size_t i = 0; i < src.size(); ++i) {
    const uint32_t id = append_flow(src[i], dst[i], size[i], start[i], 0, -1);
    eng_.schedule(start[i], id, kind_base_ + kStart);
  }
}

std::vector<uint32_t> FluidNetwork::walk(uint32_t src, uint32_t dst, uint32_t hash, uint32_t seq,
                                         bool& reached) const {
  // the frame's walk on an idle fabric (the max-min mode's paths before they followed load)
  return fwd_.walk_frame(src, dst, hash, seq, net::IdleLoad{}, true, reached);
}

uint32_t FluidNetwork::new_lane() {
  uint32_t l;
  if (!free_lanes_.empty()) {
    l = free_lanes_.back();
    free_lanes_.pop_back();
  } else {
    l = static_cast<uint32_t>(lanes_.size());
    lanes_.emplace_back();
  }
  return l;
}

void FluidNetwork::add_lanes(uint32_t f, double bytes_left) {
  // The flow's paths (sampled where routing spreads frames), one lane each with its share.
  Source& s = src_[f];
  const uint32_t src = flows_.src[f], dst = flows_.dst[f], hash = flows_.hash[f];
  std::vector<std::vector<uint32_t>> paths;
  std::vector<uint32_t> count;
  bool all_reached = true;
  const uint32_t samples = spreads_ ? kSamples : 2;
  for (uint32_t seq = 0; seq < samples; ++seq) {
    bool r = false;
    auto p = walk(src, dst, hash, seq, r);
    if (!r || p.empty()) {
      all_reached = false;
      continue;
    }
    const auto it = std::find(paths.begin(), paths.end(), p);
    if (it == paths.end()) {
      paths.push_back(std::move(p));
      count.push_back(1);
    } else {
      ++count[static_cast<size_t>(it - paths.begin())];
    }
  }
  const Bytes h = ft_.header(ft_.of(src, dst));
  if (!all_reached || paths.empty()) {
    const uint32_t l = new_lane();
    Lane& ln = lanes_[l];
    ln = Lane{};
    ln.flow = f;
    ln.live = true;
    ln.blocked = true;
    ln.wire = ln.backlog = bytes_left;
    s.lanes.push_back(l);
    ++counters_.lanes;
    ++counters_.blocked;
    return;
  }
  uint32_t total = 0;
  for (const uint32_t c : count) total += c;
  SimTime delay = 0, cnp_delay = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    const uint32_t l = new_lane();
    Lane& ln = lanes_[l];
    ln = Lane{};
    ln.flow = f;
    ln.live = true;
    ln.frac = static_cast<double>(count[i]) / total;
    ln.wire = ln.backlog = bytes_left * ln.frac;
    ln.ports = paths[i];
    ln.t = eng_.now();
    ln.hop.assign(ln.ports.size(), Hop{});
    s.lanes.push_back(l);
    ++counters_.lanes;
    if (quiet_) attach_lane(l);
    delay = std::max(delay, fwd_.lone_packet_delay_ps(paths[i], flows_.size_bytes[f], mtu_ - h, h));
    cnp_delay = std::max(cnp_delay, fwd_.lone_delay_ps(paths[i], cfg_.control_bytes, mtu_ - h, 0));
  }
  s.delay = delay;
  s.cnp_delay = cnp_delay;
  ports_dirty_ = true;
}

void FluidNetwork::start_flow(uint32_t f) {
  Source& s = src_[f];
  s.wire = wire_bytes(f);
  // DCQCN's start (roce.cpp): at the line rate (Network::line_rate), alpha 1
  const uint32_t srcg = flows_.src[f], first = fwd_.first_port(srcg, flows_.dst[f], flows_.hash[f]);
  double line = static_cast<double>(fwd_.channel(first).rate_bps);
  const uint32_t nic = fwd_.gpu_nic_port(srcg);
  if (nic != kNone && !fwd_.nic_usable(srcg) && fwd_.gpu_server(srcg) != fwd_.gpu_server(flows_.dst[f]))
    line = std::min(line, static_cast<double>(fwd_.link_rate_bps(fwd_.channel(nic).link)));
  s.line = s.rc = s.rt = line;
  s.alpha = net::kRoceDcqcn.initial_alpha;
  s.alpha_time = eng_.now();
  s.last_cnp = std::numeric_limits<SimTime>::min() / 2;
  s.active = true;
  add_lanes(f, s.wire);
  active_.push_back(f);
  counters_.max_lanes = std::max<uint64_t>(counters_.max_lanes, live_lanes());
}

void FluidNetwork::drop_lanes(uint32_t f) {
  for (const uint32_t l : src_[f].lanes) {
    if (quiet_) detach_lane(l);
    lanes_[l].live = false;
    lanes_[l].ports.clear();
    lanes_[l].hop.clear();
    free_lanes_.push_back(l);
  }
  src_[f].lanes.clear();
  ports_dirty_ = true;
}

void FluidNetwork::retire(uint32_t f) {
  owners_.fold(flows_.owner[f], 1, flows_.size_bytes[f], flows_.end_ps[f] - flows_.start_ps[f]);
  if (record_) log_.append(flows_, f);
  flows_.release(f);
}

void FluidNetwork::finish(uint32_t f) {
  flows_.end_ps[f] = eng_.now();
  ++counters_.flows_done;
  counters_.last_flow_end_ps = eng_.now();
  Source& s = src_[f];
  if (s.active) {
    // its lanes delivered their last bytes by the plan's end: bring them there, then go
    const SimTime end = plan_len_ == kNever ? eng_.now() : plan_t_ + plan_len_;
    for (const uint32_t l : s.lanes) commit_lane(l, end);
    drop_lanes(f);
    s.active = false;
    active_.erase(std::find(active_.begin(), active_.end(), f));
  }
  if (observer_ != nullptr) observer_->on_flow_done(f);
  retire(f);
}

// ---- topology ----

void FluidNetwork::topology_changed() {
  if (quiet_) leave_quiet();
  commit();
  fwd_.update_channels(eng_.now());
  fwd_.rebuild();
  set_capacities();
  // Re-path every flow still moving whose paths changed: the bytes it has in the fabric go
  // back to its source (a lossless fabric holds them and re-forwards them on the new paths),
  // in order of flow id.
  std::vector<uint32_t> moving(active_.begin(), active_.end());
  std::sort(moving.begin(), moving.end(),
            [&](uint32_t a, uint32_t b) { return flows_.id[a] < flows_.id[b]; });
  for (const uint32_t f : moving) {
    Source& s = src_[f];
    std::vector<std::vector<uint32_t>> now_paths;
    bool reached_all = true;
    for (uint32_t seq = 0; seq < (spreads_ ? kSamples : 2); ++seq) {
      bool r = false;
      auto p = walk(flows_.src[f], flows_.dst[f], flows_.hash[f], seq, r);
      if (!r) reached_all = false;
      if (std::find(now_paths.begin(), now_paths.end(), p) == now_paths.end())
        now_paths.push_back(std::move(p));
    }
    bool same = reached_all && now_paths.size() == s.lanes.size();
    for (const uint32_t l : s.lanes) {
      const Lane& ln = lanes_[l];
      same =
          same && !ln.blocked && std::find(now_paths.begin(), now_paths.end(), ln.ports) != now_paths.end();
    }
    if (same) continue;
    double undelivered = 0, delivered = 0;
    for (const uint32_t l : s.lanes) {
      undelivered += lanes_[l].wire - lanes_[l].delivered;
      delivered += lanes_[l].delivered;
    }
    s.delivered_base += delivered;
    drop_lanes(f);
    if (undelivered > kEps) {
      add_lanes(f, undelivered);
      s.done_at = -1;
      s.delivered = false;
      if (!s.sent) s.sent_at = -1;
    }
    ++counters_.reroutes;
  }
  for (const uint32_t f : active_) src_[f].sent_at = src_[f].sent ? src_[f].sent_at : -1;
  request_plan();
}

void FluidNetwork::on_event(const engine::Event& ev) {
  switch (ev.kind - kind_base_) {
    case kStart: {
      const uint32_t f = ev.target;
      if (flows_.size_bytes[f] == 0) {
        flows_.sent_ps[f] = eng_.now();
        if (observer_ != nullptr) observer_->on_flow_sent(f);
        finish(f);
      } else {
        begin_flow(f);
      }
      break;
    }
    case kSent: {
      Source& s = src_[ev.target];
      if (s.sent || s.sent_at != ev.time || !flows_.live[ev.target]) break;
      s.sent = true;
      s.timer_deadline = kNever;
      flows_.sent_ps[ev.target] = eng_.now();
      if (observer_ != nullptr) observer_->on_flow_sent(ev.target);
      break;
    }
    case kDone: {
      Source& s = src_[ev.target];
      if (s.done_at != ev.time || !flows_.live[ev.target] || !s.active) break;
      if (!s.sent) {  // (sent in the same instant, its event not yet reached)
        s.sent = true;
        flows_.sent_ps[ev.target] = eng_.now();
        if (observer_ != nullptr) observer_->on_flow_sent(ev.target);
      }
      finish(ev.target);
      break;
    }
    case kLane: {
      Source& s = src_[ev.target];
      if (!quiet_ || s.lane_at != ev.time || s.sent || !s.active || !flows_.live[ev.target]) break;
      lane_end(ev.target);
      break;
    }
    case kPlan:
      if (ev.time != plan_at_) break;
      commit();
      plan();
      break;
    case kTopologyChange:
      changes_.apply(ev.target, [this] { topology_changed(); });
      break;
    default:
      break;
  }
}

// ---- results ----

size_t FluidNetwork::blocked_lanes() const {
  size_t n = 0;
  for (const uint32_t f : active_)
    for (const uint32_t l : src_[f].lanes) n += lanes_[l].blocked;
  return n;
}

FluidNetwork::Ledger FluidNetwork::ledger() const {
  Ledger out;
  const size_t n = flows_.size();
  out.wire.assign(n, 0);
  out.backlog.assign(n, 0);
  out.queued.assign(n, 0);
  out.delivered.assign(n, 0);
  for (uint32_t f = 0; f < n; ++f) {
    if (!flows_.live[f]) continue;
    const Source& s = src_[f];
    out.wire[f] = s.active ? s.wire : wire_bytes(f);
    out.delivered[f] = s.delivered_base;
    if (!s.active) {
      out.backlog[f] = flows_.end_ps[f] >= 0 ? 0 : out.wire[f];
      continue;
    }
    for (const uint32_t l : s.lanes) {
      const Lane& ln = lanes_[l];
      // (as of the last commit)
      out.backlog[f] += ln.backlog;
      out.delivered[f] += ln.delivered;
      for (size_t h = 1; h < ln.hop.size(); ++h) out.queued[f] += ln.hop[h].q;
    }
  }
  return out;
}

std::vector<Bytes> FluidNetwork::sent_bytes() const {
  std::vector<Bytes> out(flows_.size(), 0);
  for (uint32_t f = 0; f < out.size(); ++f) {
    if (flows_.sent_ps[f] >= 0) {
      out[f] = flows_.size_bytes[f];
      continue;
    }
    const Source& s = src_[f];
    if (!flows_.live[f] || !s.active || s.wire <= 0) continue;
    double backlog = 0;
    for (const uint32_t l : s.lanes) backlog += lanes_[l].backlog;
    out[f] =
        static_cast<Bytes>(std::floor(static_cast<double>(flows_.size_bytes[f]) * (1 - backlog / s.wire)));
  }
  return out;
}

FlowRows FluidNetwork::flow_rows() const {
  std::vector<std::pair<uint64_t, uint32_t>> order;
  for (uint32_t r = 0; r < log_.size(); ++r) order.emplace_back(log_.id[r], r);
  const auto base = static_cast<uint32_t>(log_.size());
  for (uint32_t f = 0; f < flows_.size(); ++f)
    if (flows_.live[f]) order.emplace_back(flows_.id[f], base + f);
  std::sort(order.begin(), order.end());
  const auto sent = sent_bytes();
  FlowRows out;
  const size_t n = order.size();
  for (auto* v : {&out.id, &out.owner}) v->resize(n);
  for (auto* v : {&out.src, &out.dst, &out.hash}) v->resize(n);
  for (auto* v :
       {&out.size_bytes, &out.sent_bytes, &out.delivered_bytes, &out.start_ps, &out.end_ps, &out.sent_ps})
    v->resize(n);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t r = order[k].second;
    const bool logged = r < base;
    const FlowRecords& t = logged ? log_ : flows_;
    const uint32_t i = logged ? r : r - base;
    out.id[k] = static_cast<int64_t>(t.id[i]);
    out.owner[k] = t.owner[i];
    out.src[k] = t.src[i];
    out.dst[k] = t.dst[i];
    out.size_bytes[k] = t.size_bytes[i];
    out.start_ps[k] = t.start_ps[i];
    out.end_ps[k] = t.end_ps[i];
    out.sent_ps[k] = t.sent_ps[i];
    out.hash[k] = t.hash[i];
    out.sent_bytes[k] = logged ? t.size_bytes[i] : sent[i];
    out.delivered_bytes[k] = t.end_ps[i] >= 0 ? t.size_bytes[i] : 0;
  }
  return out;
}

std::vector<double> FluidNetwork::port_bytes() const {
  std::vector<double> out(ports_.size());
  for (size_t p = 0; p < ports_.size(); ++p) out[p] = ports_[p].bytes;
  return out;
}

std::vector<double> FluidNetwork::port_busy_ps() const {
  std::vector<double> out(ports_.size());
  for (size_t p = 0; p < ports_.size(); ++p) {
    const PortState& ps = ports_[p];
    out[p] = ps.busy_ps + (ps.capacity > 0 ? (ps.bytes - ps.bytes_mark) * kBitsPsPerByte / ps.capacity : 0.0);
  }
  return out;
}

std::vector<double> FluidNetwork::port_queued() const {
  std::vector<double> out(ports_.size(), 0.0);
  for (const uint32_t f : active_)
    for (const uint32_t l : src_[f].lanes) {
      const Lane& ln = lanes_[l];
      for (size_t h = 1; h < ln.hop.size(); ++h) out[ln.ports[h]] += ln.hop[h].q;
    }
  return out;
}

std::vector<double> FluidNetwork::flow_rates() const {
  std::vector<double> out(flows_.size(), 0.0);
  if (!planned_) return out;
  for (const uint32_t f : active_) {
    if (src_[f].sent) continue;
    double r = 0;
    for (const uint32_t l : src_[f].lanes)
      if (!lanes_[l].hop.empty()) r += lanes_[l].hop[0].dep;
    out[f] = r * kBitsPsPerByte / static_cast<double>(plan_step_);
  }
  return out;
}

std::vector<double> FluidNetwork::dcqcn_rates() const {
  std::vector<double> out(flows_.size(), 0.0);
  for (const uint32_t f : active_)
    if (!src_[f].sent) out[f] = src_[f].rc;
  return out;
}

}  // namespace rfabric::flow
