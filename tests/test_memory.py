"""Bounded memory: the engine keeps a flow's state only while it is alive, a trace's results
are per op unless flows are recorded, and recorded flows can be streamed to Parquet."""

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import tiny_rl_trace
from test_properties import assert_conserved

import rfabric as rf


@pytest.fixture(scope="module")
def ft64():
    return rf.topologies.FatTree(gpus=64, radix=16)


def test_flow_table_does_not_grow_with_iterations(ft64):
    # A small, fast version of bench/bench_memory.py: the engine's per-flow table is as large
    # as the most flows alive at once, so replaying more iterations of the same RL trace
    # creates more flows but no more state. (The first iteration alone peaks lower: from the
    # second on, an iteration's generation overlaps the previous one's tail.)
    runs = {n: rf.simulate(ft64, tiny_rl_trace(iterations=n)).run for n in (2, 4)}
    assert runs[4]["flows"] > 1.5 * runs[2]["flows"]
    assert runs[4]["peak_live_flows"] == runs[2]["peak_live_flows"]
    assert runs[2]["peak_live_flows"] < runs[2]["flows"] / 1000
    for r in runs.values():
        assert r["flows_done"] == r["flows"] and not r["flows_recorded"]


def test_trace_results_are_the_same_with_and_without_flows(ft64):
    trace = tiny_rl_trace(iterations=1)
    kept = rf.simulate(ft64, trace, transport="dctcp", record_flows=True)
    lean = rf.simulate(ft64, trace, transport="dctcp")
    assert lean.flows.num_rows == 0 and kept.flows.num_rows == kept.run["flows"] > 0
    assert kept.ops.equals(lean.ops) and kept.stages.equals(lean.stages)
    same = ("events", "packets", "packet_hops", "flows", "flows_done", "makespan_ps", "peak_live_flows")
    assert {k: kept.run[k] for k in same} == {k: lean.run[k] for k in same}
    # flow ids are the creation order, every one once
    assert np.array_equal(kept.flows["flow_id"].to_numpy(), np.arange(kept.run["flows"]))


def test_per_op_totals_are_the_sums_of_the_ops_flows():
    # lossy DCTCP into shallow buffers: drops and retransmissions to fold in
    fab = rf.topologies.FatTree(gpus=64, radix=16, buffer="24KiB")
    res = rf.simulate(fab, tiny_rl_trace(iterations=1), transport="dctcp", seed=2, record_flows=True)
    assert res.run["drops"] > 0
    f = {c: res.flows[c].to_numpy() for c in ("op_id", "retransmits", "delivered_bytes", "fct_ps")}
    ops = {
        c: res.ops[c].to_numpy()
        for c in res.ops.column_names
        if c not in ("stage", "phase", "kind", "algorithm")
    }
    row = np.searchsorted(ops["op_id"], f["op_id"])
    assert np.array_equal(ops["op_id"][row], f["op_id"])
    n = len(ops["op_id"])
    assert np.array_equal(ops["flows"], np.bincount(row, minlength=n))
    for col in ("retransmits", "delivered_bytes"):
        assert np.array_equal(ops[col], np.bincount(row, weights=f[col], minlength=n).astype(np.int64)), col
    longest = np.full(n, -1)
    np.maximum.at(longest, row, f["fct_ps"])
    assert np.array_equal(ops["max_fct_ps"], longest)
    assert ops["retransmits"].sum() > 0 and ops["dropped_bytes"].sum() > 0
    assert ops["resent_bytes"].sum() >= ops["dropped_bytes"].sum()  # every lost byte was sent again


def test_conservation_holds_per_recorded_flow_of_a_trace_in_epochs():
    fab = rf.topologies.FatTree(gpus=16, radix=16, buffer="24KiB")
    trace = tiny_rl_trace(
        iterations=1, train_gpus=8, gen_gpus=8, train=dict(tp=4, pp=1, dp=2), gen=dict(tp=4)
    )
    sim = rf.Simulation(fab, trace, transport="dctcp", seed=1, record_flows=True)
    epochs = 0
    while not sim.done:
        sim.run(until=sim.now + 2_000_000_000)
        assert_conserved(sim.engine)
        epochs += 1
    res = sim.results()
    assert epochs > 3 and res.flows.num_rows == res.run["flows"]
    assert np.array_equal(res.flows["delivered_bytes"].to_numpy(), res.flows["size_bytes"].to_numpy())


def test_flows_stream_to_parquet_parts(ft64, tmp_path, monkeypatch):
    trace = tiny_rl_trace(iterations=1)
    kept = rf.simulate(ft64, trace, record_flows=True)
    monkeypatch.setattr(rf.Simulation, "FLOW_BATCH_ROWS", 50_000)
    monkeypatch.setattr(rf.Simulation, "_STREAM_CHUNK_EVENTS", 1_000_000)
    out = tmp_path / "flows"
    streamed = rf.simulate(ft64, trace, flows_path=out)
    parts = sorted(p.name for p in out.iterdir())
    assert len(parts) > 3 and all(p.startswith("part-") for p in parts)  # all finished: no alive.parquet
    assert streamed.flows.num_rows == 0 and streamed.flows_path == str(out)
    table = pq.read_table(out).sort_by("flow_id")
    assert table.equals(kept.flows)
    assert streamed.ops.equals(kept.ops)


def test_streaming_writes_unfinished_flows_as_alive(ft64, tmp_path):
    out = tmp_path / "flows"
    sim = rf.Simulation(ft64, tiny_rl_trace(iterations=1), flows_path=out)
    sim.run(max_events=100_000)  # (stops mid-step: some flows are sending)
    assert sim.engine.counters()["live_flows"] > 0
    sim.results()
    alive = pq.read_table(out / "alive.parquet")
    assert alive.num_rows > 0 and np.any(alive["end_ps"].to_numpy() == -1)
    sim.run()
    res = sim.results()
    assert not (out / "alive.parquet").exists()
    assert pq.read_table(out).num_rows == res.run["flows"]


def test_bad_flow_recording_settings_name_the_field(ft64, tmp_path):
    trace = tiny_rl_trace(iterations=1)
    with pytest.raises(rf.SpecError, match="record_flows"):
        rf.Simulation(ft64, trace, record_flows="yes")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(rf.SpecError, match="flows_path.*not empty"):
        rf.Simulation(ft64, trace, flows_path=tmp_path / "full")
    with pytest.raises(rf.SpecError, match="flows_path.*not a directory"):
        rf.Simulation(ft64, trace, flows_path=tmp_path / "full" / "x")


def test_failures_mid_replay_rehome_only_live_flows_with_the_same_results(ft64):
    # A failed NIC and a link that fails and comes back while slots are being reused: the
    # flows alive are moved (rehome_flows visits live slots only), and whether flows are
    # recorded changes nothing.
    trace = tiny_rl_trace(iterations=1)

    def run(record):
        sim = rf.Simulation(ft64, trace, seed=3, record_flows=record)
        sim.fail_nic(5, at="3ms")
        sim.fail_link(sim.spec.nic_link(40), at="5ms")
        sim.set_link_state(sim.spec.nic_link(40), "9ms", True)
        return sim.run().results()

    kept, lean = run(True), run(False)
    assert kept.ops.equals(lean.ops) and kept.run["events"] == lean.run["events"]
    assert kept.run["flows_done"] == kept.run["flows"] == kept.flows.num_rows
    assert kept.run["peak_live_flows"] < kept.run["flows"] / 100
    # the failed NIC's GPU still sent and received (over another NIC of its server)
    f = kept.flows
    assert np.any(f["src"].to_numpy() == 5) and np.all(f["end_ps"].to_numpy() >= 0)
