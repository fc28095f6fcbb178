"""rfabric/timeline.py: a run as Chrome trace event JSON (Results.write_timeline, --timeline).

Oracles: the run's own tables (every op of ``res.ops`` is one slice on its stage's track with
its start and end, and one on each GPU of the trace's ``ranks``; every flow one slice on its
source GPU), the failures and plans the test itself scheduled, the queue samples for the
counters, and the format's rule that slices on one thread never partially overlap.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric.cli import main
from rfabric.controllers.base import Controller
from rfabric.timeline import PID_GPU0, PID_RUN, PID_STAGE0, build_timeline, lanes

US = 1_000_000  # ps


def _load(path) -> dict:
    def no_constant(name):
        raise AssertionError(f"{name} is not JSON")

    with open(path) as f:
        return json.load(f, parse_constant=no_constant)


def _thread_names(doc) -> dict:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def _process_names(doc) -> dict:
    return {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }


def _ns(us: float) -> int:
    """A time as Perfetto's JSON importer reads it: llround(us * 1000) nanoseconds."""
    return round(us * 1000)


def _check_format(doc):
    """Every event has the fields its phase needs; times are the ps of the args floored to
    whole ns; slices on one thread are sorted and never overlap, in the ps of their args and
    in the ns Perfetto's importer computes from ts and dur (round(ts * 1000) + round(dur *
    1000), a slice's end, at or before the next slice's round(ts * 1000))."""
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"} and doc["displayTimeUnit"] == "ms"
    threads = _thread_names(doc)
    processes = _process_names(doc)
    per_thread = defaultdict(list)
    for e in doc["traceEvents"]:
        assert e["ph"] in ("M", "X", "i", "C") and isinstance(e["pid"], int) and isinstance(e["name"], str)
        if e["ph"] == "M":
            continue
        assert isinstance(e["ts"], float) and e["pid"] in processes
        if e["ph"] == "X":
            assert isinstance(e["dur"], float) and e["dur"] >= 0 and (e["pid"], e["tid"]) in threads
            assert _ns(e["ts"]) == e["args"]["start_ps"] // 1000
            assert _ns(e["ts"]) + _ns(e["dur"]) == e["args"]["end_ps"] // 1000
            per_thread[e["pid"], e["tid"]].append(e)
        elif e["ph"] == "i":
            assert e["s"] == "t" and (e["pid"], e["tid"]) in threads
            assert _ns(e["ts"]) == e["args"]["time_ps"] // 1000
        else:
            assert e["pid"] == PID_RUN and set(e["args"]) == {"value"}
    for slices in per_thread.values():
        for a, b in zip(slices, slices[1:], strict=False):
            assert a["ts"] <= b["ts"]
            assert a["args"]["end_ps"] <= b["args"]["start_ps"]
            assert _ns(a["ts"]) + _ns(a["dur"]) <= _ns(b["ts"])


def _slices(doc, pid_lo, pid_hi, key="op_id"):
    return [
        e for e in doc["traceEvents"] if e["ph"] == "X" and pid_lo <= e["pid"] < pid_hi and key in e["args"]
    ]


@pytest.fixture(scope="module")
def rl_trace():
    # 128 GPUs of RFabric: two rail groups joined by circuits; gen in the second group
    return tiny_rl_trace(gen_ranks=range(64, 96), iterations=1)


@pytest.fixture(scope="module")
def fabric():
    return rf.topologies.RFabric(128)


@pytest.fixture(scope="module")
def failed_run(fabric, rl_trace):
    spec = fabric.to_spec()
    ocs_port = int(spec.circuits.a[5])
    nic = int(spec.nic_link(70))
    sim = rf.Simulation(fabric, rl_trace, controller=fabric.controller(), t_ocs="10us", sample_every="1ms")
    sim.fail_link(ocs_port, at="1ms")
    sim.fail_link(nic, at="2ms")
    sim.set_link_state(nic, "50ms", True)
    sim.run()
    scheduled = [(1000 * US, ocs_port, False), (2000 * US, nic, False), (50_000 * US, nic, True)]
    return sim.results(), scheduled


@pytest.fixture(scope="module")
def failed_doc(failed_run, tmp_path_factory):
    res, _ = failed_run
    path = tmp_path_factory.mktemp("timeline") / "run.json"
    info = res.write_timeline(path)
    doc = _load(path)
    assert doc["otherData"] == info
    return doc


def test_every_op_is_one_slice_on_its_stage_with_its_start_and_end(failed_run, failed_doc):
    res, _ = failed_run
    _check_format(failed_doc)
    slices = _slices(failed_doc, PID_STAGE0, PID_GPU0)
    by_op = defaultdict(list)
    for e in slices:
        by_op[e["args"]["op_id"]].append(e)
    ops = res.ops.to_pylist()
    assert all(r["start_ps"] >= 0 and r["end_ps"] >= 0 for r in ops)  # a finished run
    assert sorted(by_op) == sorted(r["op_id"] for r in ops) and all(len(v) == 1 for v in by_op.values())
    processes = _process_names(failed_doc)
    for r in ops:
        (e,) = by_op[r["op_id"]]
        assert (e["args"]["start_ps"], e["args"]["end_ps"]) == (r["start_ps"], r["end_ps"])
        assert (
            _ns(e["ts"]) == r["start_ps"] // 1000
            and _ns(e["dur"]) == r["end_ps"] // 1000 - r["start_ps"] // 1000
        )
        assert processes[e["pid"]] == f"stage {r['stage']}" and e["name"] == f"{r['kind']} {r['phase']}"
        for k in ("size_bytes", "algorithm", "protocol", "channels", "iteration", "phase", "kind"):
            assert e["args"][k] == r[k]
        assert e["args"]["busbw_GBps"] == pytest.approx(r["busbw_GBps"]) and e["args"]["finished"]
    assert failed_doc["otherData"]["op_slices"] == len(ops) and failed_doc["otherData"]["notes"] == []


def test_every_op_is_a_slice_on_each_of_its_gpus(fabric, rl_trace):
    # without a controller the run replays the trace as written (no rewrite)
    res = rf.simulate(fabric, rl_trace, backend="flow")
    assert res.run["rewrites"] == [] and res.ops["op_id"].to_pylist() == rl_trace.table["op_id"].to_pylist()
    doc = build_timeline(res)
    _check_format(json.loads(json.dumps(doc, allow_nan=False)))
    # oracle: the trace's own ranks
    want = {
        (op, g)
        for op, gpus in zip(
            rl_trace.table["op_id"].to_pylist(), rl_trace.table["ranks"].to_pylist(), strict=True
        )
        for g in gpus
    }
    got = [(e["args"]["op_id"], e["pid"] - PID_GPU0) for e in _slices(doc, PID_GPU0, 10**9)]
    assert len(got) == len(set(got)) and set(got) == want
    names = _process_names(doc)
    assert all(names[PID_GPU0 + g] == f"GPU {g}" for _, g in want)
    rows = {r["op_id"]: r for r in res.ops.to_pylist()}
    for e in _slices(doc, PID_GPU0, 10**9):  # the op's times and what tells it apart
        r = rows[e["args"]["op_id"]]
        assert (e["args"]["start_ps"], e["args"]["end_ps"]) == (r["start_ps"], r["end_ps"])
        assert e["args"]["size_bytes"] == r["size_bytes"] and e["args"]["stage"] == r["stage"]
        assert e["args"]["algorithm"] == r["algorithm"] and e["args"]["finished"]


def test_failures_and_plan_changes_appear_at_their_times(failed_run, failed_doc):
    res, scheduled = failed_run
    threads = _thread_names(failed_doc)
    instants = [e for e in failed_doc["traceEvents"] if e["ph"] == "i"]
    changes = [
        (e["args"]["time_ps"], e["args"]["link_id"], e["args"]["up"])
        for e in instants
        if threads[e["pid"], e["tid"]] == "link changes"
    ]
    assert changes == scheduled  # (scheduled in time order)
    assert all(_ns(e["ts"]) == e["args"]["time_ps"] // 1000 for e in instants)
    # the NIC was down from 2 ms to 50 ms; the OCS port from 1 ms to the end of the run
    down = sorted(
        (e["args"]["link_id"], e["args"]["start_ps"], e["args"]["end_ps"])
        for e in failed_doc["traceEvents"]
        if e["ph"] == "X" and e["cat"] == "failures"
    )
    nic, port = scheduled[1][1], scheduled[0][1]
    end = max(res.run["sim_ps"], res.run["makespan_ps"])
    assert down == sorted([(nic, 2000 * US, 50_000 * US), (port, 1000 * US, end)])
    # the controller's plans: one instant per row of res.circuits, at its time
    assert res.run["plan_changes"] >= 1 and res.circuits.num_rows == res.run["plan_changes"]
    plans = [
        (e["args"]["time_ps"], e["args"]["plan_id"], e["args"]["added"], e["args"]["removed"])
        for e in instants
        if threads[e["pid"], e["tid"]] == "circuit plans"
    ]
    assert plans == [(r["time_ps"], r["plan_id"], r["added"], r["removed"]) for r in res.circuits.to_pylist()]


def test_dark_periods_are_slices_from_a_plan_to_its_light(fabric, rl_trace, tmp_path):
    spec = fabric.to_spec()
    half = rf.spec.CircuitTable.build(spec.circuits.ocs[::2], spec.circuits.a[::2], spec.circuits.b[::2])

    class Flip(Controller):
        def plan(self, intent, view):
            return half if intent.period % 2 else spec.circuits

    res = rf.simulate(fabric, rl_trace, controller=Flip(), t_ocs="10us", backend="flow")
    rows = [r for r in res.circuits.to_pylist() if r["added"] > 0]
    assert rows and all(r["dark_ps"] == 10 * US for r in rows)
    doc = build_timeline(res)
    _check_format(json.loads(json.dumps(doc, allow_nan=False)))
    dark = sorted(
        (e["args"]["plan_id"], e["args"]["start_ps"], e["args"]["end_ps"])
        for e in doc["traceEvents"]
        if e["ph"] == "X" and e["cat"] == "circuits"
    )
    assert dark == sorted((r["plan_id"], r["time_ps"], r["time_ps"] + r["dark_ps"]) for r in rows)


def test_counters_follow_the_queue_samples(failed_run, failed_doc):
    res, _ = failed_run
    q = res.queue_samples
    assert q.num_rows > 0
    period = res.run["sample_every_ps"]
    counters = defaultdict(dict)
    for e in failed_doc["traceEvents"]:
        if e["ph"] == "C":
            counters[e["name"]][_ns(e["ts"]) * 1000] = e["args"]["value"]
    kind = dict(zip(res.links["link_id"].to_pylist(), res.links["kind"].to_pylist(), strict=True))
    n_dirs = defaultdict(int)
    for k in res.links["kind"].to_pylist():
        n_dirs[k] += 1
    # oracle: the samples table, grouped by hand
    util_max, util_sum, queued = defaultdict(float), defaultdict(float), defaultdict(int)
    for r in q.to_pylist():
        key = (kind[r["link_id"]], r["time_ps"])
        util_max[key] = max(util_max[key], r["utilization"])
        util_sum[key] += r["utilization"]
        queued[key] += r["queue_bytes"]
    # a window's utilization from the window's start (t - period); a queue at its sample t
    for (k, t), v in util_max.items():
        assert counters[f"utilization max {k}"][t - period] == pytest.approx(v)
        assert counters[f"utilization mean {k}"][t - period] == pytest.approx(util_sum[k, t] / n_dirs[k])
        assert counters[f"queue bytes {k}"][t] == queued[k, t]
        if (k, t + period) not in util_max:  # no row at the next sample: nothing moved
            assert counters[f"utilization max {k}"][t] == 0 and counters[f"queue bytes {k}"][t + period] == 0
    goodput = defaultdict(float)
    for r in res.rate_samples.to_pylist():
        goodput[r["time_ps"]] += r["rate_bps"] / 1e9
    assert goodput and all(
        counters["goodput Gbps"][t - period] == pytest.approx(v) for t, v in goodput.items()
    )
    assert "utilization max nic" in failed_doc["otherData"]["counters"]


def test_no_counters_without_sampling_and_unfinished_ops(fabric, rl_trace):
    full = rf.simulate(fabric, rl_trace, backend="flow").ops
    first = int(np.argmin(full["end_ps"].to_numpy()))
    mid = (full["start_ps"][first].as_py() + full["end_ps"][first].as_py()) // 2
    sim = rf.Simulation(fabric, rl_trace, backend="flow")
    sim.run(until=f"{mid}ps")  # stopped in the middle of its first op
    res = sim.results()
    doc = build_timeline(res)
    _check_format(json.loads(json.dumps(doc, allow_nan=False)))
    assert not any(e["ph"] == "C" for e in doc["traceEvents"]) and doc["otherData"]["counters"] == []
    ops = res.ops.to_pylist()
    started = [r for r in ops if r["start_ps"] >= 0]
    unfinished = [r for r in started if r["end_ps"] < 0]
    never = len(ops) - len(started)
    assert unfinished and never  # the run stopped in the middle
    by_op = {e["args"]["op_id"]: e for e in _slices(doc, PID_STAGE0, PID_GPU0)}
    assert sorted(by_op) == sorted(r["op_id"] for r in started)
    for r in unfinished:  # to the end of the run, marked
        e = by_op[r["op_id"]]
        assert e["args"]["end_ps"] == res.run["sim_ps"] and not e["args"]["finished"]
        assert e["name"].endswith("(unfinished)")
    assert f"{never:,} op(s) never started: no slice" in doc["otherData"]["notes"]


def test_a_flows_run_draws_each_flow_on_its_source_gpu(tmp_path):
    flows = rf.Flows.permutation(64, size_bytes=256 << 10, seed=2)
    res = rf.simulate(rf.topologies.FatTree(64), flows, seed=1)
    path = tmp_path / "flows.json"
    info = res.write_timeline(path)
    doc = _load(path)
    _check_format(doc)
    slices = _slices(doc, PID_GPU0, 10**9, key="flow_id")
    table = res.flows.to_pylist()
    assert len(slices) == len(table) == info["flows_drawn"] and info["ops"] == 0
    by_id = {e["args"]["flow_id"]: e for e in slices}
    for r in table:
        e = by_id[r["flow_id"]]
        assert e["pid"] - PID_GPU0 == r["src"] and e["args"]["dst"] == r["dst"]
        assert (e["args"]["start_ps"], e["args"]["end_ps"]) == (r["start_ps"], r["end_ps"])
        assert {k: e["args"][k] for k in r} == r  # the flow's row
    # a cap keeps the first flows by start and says so
    capped = build_timeline(res, max_flows=10)
    kept = _slices(capped, PID_GPU0, 10**9, key="flow_id")
    first = sorted(table, key=lambda r: (r["start_ps"], r["flow_id"]))[:10]
    assert sorted(e["args"]["flow_id"] for e in kept) == sorted(r["flow_id"] for r in first)
    assert capped["otherData"]["notes"] == [f"flows: the first 10 of {len(table):,} by start (max_flows)"]
    assert build_timeline(res, gpus=False)["otherData"]["flows_drawn"] == 0
    with pytest.raises(rf.SpecError, match="max_flows must be a non-negative integer"):
        build_timeline(res, max_flows=-1)


def test_counters_of_samples_streamed_to_parquet(tmp_path):
    flows = rf.Flows.permutation(16, size_bytes=1 << 20, seed=1)
    fab = rf.topologies.FatTree(16)
    kept = rf.simulate(fab, flows, sample_every="5us")
    streamed = rf.simulate(fab, flows, sample_every="5us", samples_path=tmp_path / "samples")
    assert streamed.queue_samples.num_rows == 0 and kept.queue_samples.num_rows > 0
    counters = [
        [(e["name"], e["ts"], e["args"]["value"]) for e in build_timeline(r)["traceEvents"] if e["ph"] == "C"]
        for r in (kept, streamed)
    ]
    a, b = sorted(counters[0]), sorted(counters[1])
    assert a and len(a) == len(b)
    for (na, ta, va), (nb, tb, vb) in zip(a, b, strict=True):
        assert (na, ta) == (nb, tb) and va == pytest.approx(vb)


def test_gpu_op_slices_above_the_cap_are_left_out_and_said(failed_run):
    res, _ = failed_run
    doc = build_timeline(res, max_gpu_slices=10)
    assert not _slices(doc, PID_GPU0, 10**9)
    assert len(_slices(doc, PID_STAGE0, PID_GPU0)) == res.ops.num_rows
    assert doc["otherData"]["notes"][0].startswith("GPU op slices left out")


def test_lanes_never_overlap_and_use_as_few_as_the_deepest_overlap():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randrange(0, 40)
        starts = [rng.randrange(0, 100) for _ in range(n)]
        ends = [s + rng.randrange(1, 30) for s in starts]
        lane = lanes(starts, ends)
        for k in set(lane):
            spans = sorted((s, e) for s, e, x in zip(starts, ends, lane, strict=True) if x == k)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
        # oracle: the most intervals [s, e) covering one point (an interval graph's clique)
        depth = max(
            (sum(s <= t < e for s, e in zip(starts, ends, strict=True)) for t in range(130)), default=0
        )
        assert len(set(lane)) == depth


def test_cli_run_writes_a_timeline(tmp_path, capsys):
    path = tmp_path / "run.json"
    args = ["run", "topologies/fat_tree_128_200g.toml", "--pattern", "incast", "--size", "1MB"]
    assert main([*args, "--timeline", str(path)]) == 0
    doc = _load(path)
    _check_format(doc)
    assert len(_slices(doc, PID_GPU0, 10**9, key="flow_id")) == 16
    assert f"wrote timeline {path} (0 ops, 16 flows)" in capsys.readouterr().out
    assert np.isfinite(doc["otherData"]["makespan_ps"])


def test_the_docs_examples_run(tmp_path, monkeypatch):
    # docs/timelines.md's Python blocks, in order in one namespace, from the repository root
    root = Path(__file__).resolve().parents[1]
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs" / "timelines.md").read_text(), re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(root)
    path = tmp_path / "run.json"
    scope = {"__name__": "__main__"}
    for i, code in enumerate(blocks):
        exec(
            compile(code.replace('"run.json"', repr(str(path))), f"docs/timelines.md block {i}", "exec"),
            scope,
        )
    doc = _load(path)
    _check_format(doc)
    res = scope["res"]
    assert len(_slices(doc, PID_STAGE0, PID_GPU0)) == res.ops.num_rows == 12
    assert [
        e["args"]["link_id"] for e in doc["traceEvents"] if e["ph"] == "i" and e["cat"] == "failures"
    ] == [rf.topologies.RFabric(128).to_spec().nic_link(3)]
    assert scope["doc"]["otherData"]["op_slices"] == 12
