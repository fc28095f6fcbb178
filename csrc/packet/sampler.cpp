// sampler.cpp: the periodic sample (see sampler.hpp).
#include "packet/sampler.hpp"

namespace rfabric::record {

Sampler::Sampler(engine::Engine& eng, const net::Network& net, SimTime period_ps)
    : eng_(eng), net_(net), period_(period_ps), kind_(eng.register_handler(this)) {
  RF_CHECK(period_ps > 0, "sample period must be positive, got ", period_ps, " ps");
  eng_.schedule((eng_.now() / period_ + 1) * period_, 0, kind_);
  pending_ = true;
}

void Sampler::arm() {
  if (pending_ || eng_.idle()) return;
  eng_.schedule((eng_.now() / period_ + 1) * period_, 0, kind_);
  pending_ = true;
}

void Sampler::on_event(const engine::Event& ev) {
  const SimTime t = ev.time;
  const auto& ports = net_.ports();
  last_tx_.resize(ports.size(), 0);
  for (uint32_t p = 0; p < ports.size(); ++p) {
    const net::Port& pt = ports[p];
    if (net_.port_info()[p].inert || (pt.queued_bytes == 0 && pt.tx_bytes == last_tx_[p])) continue;
    queues_.time_ps.push_back(t);
    queues_.port.push_back(p);
    queues_.queue_bytes.push_back(pt.queued_bytes);
    queues_.tx_bytes.push_back(pt.tx_bytes - last_tx_[p]);
    last_tx_[p] = pt.tx_bytes;
  }
  const net::FlowTable& flows = net_.flows();
  last_id_.resize(flows.size(), UINT64_MAX);
  last_delivered_.resize(flows.size(), 0);
  for (uint32_t f = 0; f < flows.size(); ++f) {
    if (!flows.live[f]) continue;
    // a slot reused since the last sample holds a new flow, which had delivered nothing then
    const Bytes before = last_id_[f] == flows.id[f] ? last_delivered_[f] : 0;
    const Bytes now = flows.delivered_bytes[f];
    last_id_[f] = flows.id[f];
    last_delivered_[f] = now;
    if (now == before) continue;
    rates_.time_ps.push_back(t);
    rates_.flow_id.push_back(static_cast<int64_t>(flows.id[f]));
    rates_.delivered_bytes.push_back(now - before);
  }
  // (this event is already off the queue: idle means nothing else will happen before the
  // next run, whose arm() starts sampling again)
  pending_ = !eng_.idle();
  if (pending_) eng_.schedule(t + period_, 0, kind_);
}

}  // namespace rfabric::record
