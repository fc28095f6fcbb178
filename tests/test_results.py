"""Results columns beyond the raw times: FCT slowdown against the ideal, and sampled queue
depths and flow rates (``sample_every``)."""

import numpy as np
import pyarrow as pa
import pytest
from conftest import ideal_fct_ps

import rfabric as rf
from rfabric.results import QUEUE_SAMPLE_SCHEMA, RATE_SAMPLE_SCHEMA

US = 1_000_000  # ps
RATE = 200_000_000_000
HEADER = 62  # roce


def fat_tree_hops(n_links: int):
    """(rate, delay) per link of an idle fat-tree path at 200G: 1 us per link, 0.8 us per switch."""
    return [(RATE, US + (800_000 if i < n_links - 1 else 0)) for i in range(n_links)]


def wire_time_ps(size: int, mtu: int = 9216) -> int:
    """All of a message's wire bytes (payload + a header per frame) at 200G, rounded up."""
    frames = max(1, -(-size // (mtu - HEADER)))
    return -(-(size + frames * HEADER) * 8 * 10**12 // RATE)


@pytest.mark.parametrize("backend", ["packet", "flow"])
@pytest.mark.parametrize("size", [1, 9155, 1 << 20, 50 * 9154])
def test_lone_flow_slowdown_is_one(ft128, backend, size):
    # GPU 0 -> 64: another pod, 6 links. The ideal is computed here from rates, latencies and
    # the MTU: the store-and-forward oracle (exact), on both backends (the flow model's delay
    # after the fluid is what a lone message takes beyond its bottleneck time, frame by frame).
    res = rf.simulate(ft128, rf.Flows([0], [64], [size]), ecmp="flow", backend=backend)
    hops = fat_tree_hops(6)
    ideal = ideal_fct_ps(size, hops, mtu=9216, header=HEADER)
    assert res.flows["ideal_fct_ps"][0].as_py() == ideal
    assert res.flows["slowdown"][0].as_py() == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_congested_flows_slow_down_and_none_beats_the_ideal(ft128, backend):
    # an 8-to-1 incast plus a permutation: the incast shares one NIC 8 ways
    src = list(range(8, 16)) + list(range(64, 128))
    dst = [0] * 8 + list(range(0, 64))
    res = rf.simulate(ft128, rf.Flows(src, dst, 1 << 20), backend=backend)
    assert res.complete
    slowdown = res.flows["slowdown"].to_numpy()
    assert np.all(slowdown >= 1 - 1e-9)
    assert np.all(slowdown[:8] > 4)  # 8 flows through one 200G NIC
    fct, ideal = res.flows["fct_ps"].to_numpy(), res.flows["ideal_fct_ps"].to_numpy()
    np.testing.assert_allclose(slowdown, fct / ideal)
    assert f"slowdown median {np.median(slowdown):.2f}" in res.summary()


def test_slowdown_of_empty_and_unfinished_flows(ft128):
    res = rf.simulate(ft128, rf.Flows([0, 1], [9, 70], [0, 1 << 24]), until="20us")
    assert res.flows["ideal_fct_ps"][0].as_py() == 0 and res.flows["slowdown"][0].as_py() == 1.0
    assert res.flows["end_ps"][1].as_py() == -1 and res.flows["slowdown"][1].as_py() is None


def test_sampling_is_off_by_default_and_does_not_change_the_run(ft128):
    flows = rf.Flows([8, 9, 10, 64], [0, 0, 0, 1], 1 << 20)
    plain = rf.simulate(ft128, flows)
    assert plain.queue_samples.num_rows == 0 and plain.rate_samples.num_rows == 0
    assert plain.run["sample_every_ps"] is None
    sampled = rf.simulate(ft128, flows, sample_every="10us")
    assert sampled.run["sample_every_ps"] == 10 * US
    assert sampled.flows["end_ps"].equals(plain.flows["end_ps"])
    assert sampled.links["bytes"].equals(plain.links["bytes"])


@pytest.mark.parametrize("transport", ["roce", "dctcp"])
def test_sampled_queues_stay_within_buffers(transport):
    # lossy: a small buffer that the incast overflows; lossless: the default, which PFC guards
    small = {"buffer": "64KiB"} if transport == "dctcp" else {}
    fab = rf.topologies.FatTree(gpus=128, radix=16, **small)
    n = 24
    res = rf.simulate(
        fab,
        rf.Flows(np.arange(8, 128, 4)[:n], np.zeros(n, int), 300_000),
        transport=transport,
        sample_every="2us",
    )
    q = res.queue_samples
    assert q.schema.equals(QUEUE_SAMPLE_SCHEMA) and res.rate_samples.schema.equals(RATE_SAMPLE_SCHEMA)
    row = q["link_id"].to_numpy() * 2 + q["direction"].to_numpy()  # res.links: 2 rows per link
    assert np.array_equal(
        res.links["link_id"].to_numpy() * 2 + res.links["direction"].to_numpy(), np.arange(res.links.num_rows)
    )
    queue = q["queue_bytes"].to_numpy()
    assert queue.max() > 0  # the incast queues
    # never above the port's own peak; lossy, never above its buffer (lossless, PFC bounds
    # what each ingress holds, and an egress queue gathers several ingresses)
    assert np.all(queue <= res.links["max_queue_bytes"].to_numpy()[row])
    if transport == "dctcp":
        assert np.all(queue <= res.links["buffer_bytes"].to_numpy()[row])
        assert res.run["drops"] > 0  # the buffer was tested
    # frames count in the window in which they start serializing: at most one frame over
    one_frame = 9216 * 8 * 10**12 / (RATE * 2 * US)
    assert np.all(q["utilization"].to_numpy() <= 1 + one_frame + 1e-9)
    # every frame a port sent is in exactly one window
    sent = (
        pa.table({"link_id": q["link_id"], "direction": q["direction"], "tx_bytes": q["tx_bytes"]})
        .group_by(["link_id", "direction"])
        .aggregate([("tx_bytes", "sum")])
    )
    links = res.links.to_pydict()
    total = {
        (lid, d): b for lid, d, b in zip(links["link_id"], links["direction"], links["bytes"], strict=True)
    }
    for lid, d, b in zip(
        *(sent[c].to_pylist() for c in ("link_id", "direction", "tx_bytes_sum")), strict=True
    ):
        assert b == total[(lid, d)]


def test_sampled_rate_of_a_lone_flow_is_the_line_rate(ft128):
    period = 10 * US
    res = rf.simulate(ft128, rf.Flows([0], [64], [8 << 20]), ecmp="flow", sample_every=period)
    r = res.rate_samples
    t = r["time_ps"].to_numpy()
    assert np.all(t % period == 0) and np.all(t > 0)
    assert np.all(res.queue_samples["time_ps"].to_numpy() % period == 0)
    assert len(np.unique(t)) == len(t)  # one flow: one row per sample
    # windows wholly inside the flow's delivery (the first byte arrives ~10 us after start)
    end = res.flows["end_ps"][0].as_py()
    inside = (t - period >= 12 * US) & (t <= end)
    assert inside.sum() >= 30
    goodput = RATE * (9216 - HEADER) / 9216  # payload share of the line rate
    frame_bits = 9216 * 8 * 10**12 / period  # one frame more or less in a window
    np.testing.assert_allclose(r["rate_bps"].to_numpy()[inside], goodput, atol=frame_bits)
    assert r["delivered_bytes"].to_numpy().sum() <= 8 << 20


def test_sample_every_errors(ft128):
    with pytest.raises(rf.SpecError, match="sample_every"):
        rf.simulate(ft128, rf.Flows([0], [1], [100]), sample_every="0us")
    with pytest.raises(rf.SpecError, match="sample_every.*packet backend"):
        rf.simulate(ft128, rf.Flows([0], [1], [100]), sample_every="10us", backend="flow")


def test_sampling_resumes_when_a_later_run_has_events(ft128):
    period = 10 * US
    sim = rf.Simulation(ft128, rf.Flows([0], [64], [1 << 20]), sample_every=period)
    sim.run()
    assert sim.done and sim.now % period == 0  # the last event: the sample that found it idle
    fail_at = sim.now + 35 * US
    sim.fail_link(ft128.to_spec().nic_link(3), at=fail_at)
    sim.run()
    # sampled again after the failure, at multiples of the period, until idle
    assert sim.done and sim.now % period == 0 and sim.now > fail_at


def test_samples_stream_to_parquet(ft128, tmp_path):
    import pyarrow.parquet as pq

    flows = rf.Flows([8, 9, 10, 64], [0, 0, 0, 1], 1 << 20)
    memory = rf.simulate(ft128, flows, sample_every="5us")
    sim = rf.Simulation(ft128, flows, sample_every="5us", samples_path=tmp_path / "s")
    sim._STREAM_CHUNK_EVENTS = 1000  # several parts within one run() call
    sim.run("50us")
    sim.run()
    res = sim.results()
    assert res.samples_path == str(tmp_path / "s")
    assert res.queue_samples.num_rows == 0 and res.rate_samples.num_rows == 0
    parts = sorted((tmp_path / "s" / "queues").iterdir())
    assert len(parts) > 2 and len(parts) == len(list((tmp_path / "s" / "rates").iterdir()))
    for sub, table in (("queues", memory.queue_samples), ("rates", memory.rate_samples)):
        streamed = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "s" / sub).iterdir())])
        streamed = streamed.combine_chunks()
        assert streamed.equals(table.combine_chunks())
    # the over-time plot reads them back
    line = res.plot.link_utilization(over_time=True, kinds=["nic"]).axes[0].lines[0]
    mem = memory.plot.link_utilization(over_time=True, kinds=["nic"]).axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), mem.get_ydata())
    with pytest.raises(rf.SpecError, match="samples_path: give sample_every"):
        rf.Simulation(ft128, flows, samples_path=tmp_path / "t")
    with pytest.raises(rf.SpecError, match="samples_path: directory .* is not empty"):
        rf.Simulation(ft128, flows, sample_every="5us", samples_path=tmp_path / "s")
