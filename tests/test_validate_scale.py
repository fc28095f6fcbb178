"""The machinery of `bench/validate_flow.py --scale` (the flow model's error against scale),
at 32 GPUs in seconds. Asserts what holds whatever the flow model's accuracy: both backends
deliver the same bytes per op, the rows cover exactly the trace's stages and op kinds, stage
replay keeps a stage's ops and their dependencies inside it, and the CSV round-trips."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import load_bench

import rfabric as rf

vf = load_bench("validate_flow")
GPUS = 32


@pytest.fixture(scope="module")
def trace():
    return vf.moe_iteration(GPUS, seed=1)


def _stage_kinds(tr) -> dict:
    out = defaultdict(set)
    for st, k in zip(
        tr.table["stage"].cast(pa.string()).to_pylist(),
        tr.table["kind"].cast(pa.string()).to_pylist(),
        strict=True,
    ):
        out[st].add(k)
    return out


def test_workload_has_every_moe_op_kind(trace):
    kinds = set(trace.table["kind"].cast(pa.string()).to_pylist())
    assert {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send", "broadcast"} <= kinds
    stages = set(trace.table["stage"].cast(pa.string()).to_pylist())
    assert stages == {"gen", "response_stream", "experience", "train", "weight_sync"}


@pytest.fixture(scope="module")
def iteration_rows(trace):
    fab = vf.fabric("FT", GPUS)
    pk, wp = vf.run_mode(fab, trace, "packet", 1)
    fl, wf = vf.run_mode(fab, trace, "flow", 1)
    return pk, fl, vf.scale_rows("FT", GPUS, "iteration", "flow", pk, fl, wp, wf, vf.parse_time("50us"))


def test_same_bytes_per_op_both_backends(trace, iteration_rows):
    pk, fl, _ = iteration_rows
    p = pk.ops.sort_by("op_id")
    f = fl.ops.sort_by("op_id")
    assert p["op_id"].to_pylist() == f["op_id"].to_pylist() == sorted(trace.table["op_id"].to_pylist())
    pb = p["delivered_bytes"].to_numpy()
    assert np.array_equal(pb, f["delivered_bytes"].to_numpy())
    assert pb.sum() > 0


def test_rows_cover_the_trace(trace, iteration_rows):
    pk, fl, rows = iteration_rows
    want = _stage_kinds(trace)
    got = defaultdict(set)
    for r in rows:
        if r["stage"] != "*" and r["kind"] != "*":
            got[r["stage"]].add(r["kind"])
    assert got == want
    # one whole-run row, one row per stage, and op counts and bytes that add up
    whole = [r for r in rows if r["stage"] == "*"]
    assert len(whole) == 1 and whole[0]["ops"] == trace.num_ops
    assert whole[0]["packet_ms"] == pk.run["makespan_ps"] / 1e9
    assert whole[0]["flow_ms"] == fl.run["makespan_ps"] / 1e9
    per_stage = [r for r in rows if r["stage"] != "*" and r["kind"] == "*"]
    assert {r["stage"] for r in per_stage} == set(want)
    assert sum(r["ops"] for r in per_stage) == trace.num_ops
    assert sum(r["bytes"] for r in per_stage) == whole[0]["bytes"]
    for st in want:
        kinds = [r for r in rows if r["stage"] == st and r["kind"] != "*"]
        stage = next(r for r in per_stage if r["stage"] == st)
        assert sum(r["ops"] for r in kinds) == stage["ops"]
        assert sum(r["bytes"] for r in kinds) == stage["bytes"]
    for r in rows:
        assert r["flow_bytes"] == r["bytes"]
        assert r["pfc_pauses"] == pk.run["pfc_pauses"] and r["ecn_marks"] == pk.run["ecn_marks"]
        assert r["drops"] == pk.run["drops"]
        assert r["packet_ms"] > 0 and r["flow_ms"] > 0
        assert math.isclose(r["error"], r["flow_ms"] / r["packet_ms"] - 1, rel_tol=1e-9, abs_tol=1e-12)
        if r["ops_compared"]:
            assert r["op_err_p90_abs"] >= 0 and abs(r["op_err_worst"]) >= r["op_err_p90_abs"] - 1e-12


def test_csv_round_trips(tmp_path, iteration_rows):
    rows = iteration_rows[2]
    path = tmp_path / "sub" / "scale.csv"
    vf.write_csv(str(path), rows, "python bench/validate_flow.py --scale 32")
    text = path.read_text()
    assert text.startswith("# python bench/validate_flow.py --scale 32\n")
    back = vf.read_csv(str(path))
    assert len(back) == len(rows)
    for a, b in zip(rows, back, strict=True):
        assert set(b) == set(vf.SCALE_COLUMNS)
        for k in vf.SCALE_COLUMNS:
            if isinstance(a[k], float) and math.isnan(a[k]):
                assert math.isnan(b[k])
            else:
                assert a[k] == b[k] and type(a[k]) is type(b[k]), k


def test_only_stage_keeps_its_ops_and_deps(trace):
    for st in _stage_kinds(trace):
        sub = vf.only_stage(trace, st)
        ids = set(sub.table["op_id"].to_pylist())
        assert set(sub.table["stage"].cast(pa.string()).to_pylist()) == {st}
        full = trace.table.filter(pc.equal(trace.table["stage"].cast(pa.string()), st))
        assert ids == set(full["op_id"].to_pylist())
        for own, deps in zip(full["deps"].to_pylist(), sub.table["deps"].to_pylist(), strict=True):
            assert deps == [d for d in own if d in ids]
    with pytest.raises(SystemExit, match="not in the trace"):
        vf.only_stage(trace, "no_such_stage")


def test_stage_replay_end_to_end(tmp_path, trace):
    out = tmp_path / "rows.csv"
    assert (
        vf.main(["--scale", str(GPUS), "--fabrics", "RFabric", "--replay", "stages", "--csv", str(out)]) == 0
    )
    rows = vf.read_csv(str(out))
    assert {r["ran"] for r in rows} == {"stage"}
    assert not [r for r in rows if r["stage"] == "*"]
    got = defaultdict(set)
    for r in rows:
        if r["kind"] != "*":
            got[r["stage"]].add(r["kind"])
    assert got == _stage_kinds(trace)
    assert out.read_text().splitlines()[0].startswith("# python bench/validate_flow.py --scale 32 ")


def test_modes_parse():
    assert vf.parse_mode("flow") == ("flow", {})
    assert vf.parse_mode("flow+flow_ring_slices=0+flow_merge_channels=false") == (
        "flow",
        {"flow_ring_slices": 0, "flow_merge_channels": False},
    )
    for bad in ("fluid", "flow+flow_ring_slices", "flow+=3"):
        with pytest.raises(SystemExit):
            vf.parse_mode(bad)


def test_a_mode_setting_reaches_the_engine(trace):
    # a mode's settings are the run's config: an unknown one is the config's error, not ignored
    fab = vf.fabric("FT", GPUS)
    with pytest.raises((rf.SpecError, TypeError, ValueError)):
        vf.run_mode(fab, trace, "flow+no_such_setting=1", 1)


@pytest.mark.parametrize("name", sorted(vf.STRESS))
def test_stress_scenarios_finish_and_their_events_happen(name):
    # Each stress scenario of validate_flow.py finishes on both backends with every byte
    # delivered, and its mid-run event (link failure, circuit change) takes effect in both.
    fab, wl, events, focus, _ = vf.STRESS[name](1 << 20, 1)
    at = 100_000_000 if events else 0  # 100 us: inside every scenario's run at 1 MiB
    runs = [vf.run_events(fab, wl, b, 1, events, at)[0] for b in ("packet", "flow")]
    if name == "link_failure":  # the failed link carries bytes before the failure only
        link = int(np.flatnonzero(fab.to_spec().links.kind == "tor-agg")[0])
        for b, res in zip(("packet", "flow"), runs, strict=True):
            healthy = vf.run_events(fab, wl, b, 1, [], 0)[0]

            def on_link(r):
                return sum(x["bytes"] for x in r.links.to_pylist() if x["link_id"] == link)

            assert 0 < on_link(res) < on_link(healthy), b
    for res in runs:
        assert res.complete and not res.run["unroutable"]
        if isinstance(wl, rf.Flows):
            assert res.flows["delivered_bytes"].to_pylist() == wl.size_bytes.tolist()
        else:
            assert res.ops["delivered_bytes"][0].as_py() > 0
        if name == "circuit_change":
            assert len(res.circuits) == 1
    if not isinstance(wl, rf.Flows):
        assert runs[0].ops["delivered_bytes"].to_pylist() == runs[1].ops["delivered_bytes"].to_pylist()
    if focus is not None:
        assert len(focus) and focus.max() < len(wl.size_bytes)


def test_summary_has_a_line_per_run_and_per_stage_kind(iteration_rows):
    rows = iteration_rows[2]
    text = vf.summary(rows)
    first, second = text.split("\n\n")
    assert len(first.splitlines()) == 2 + 1  # header, rule, the one (fabric, GPUs, ran, mode)
    pairs = {(r["stage"], r["kind"]) for r in rows if r["kind"] != "*"}
    assert len(second.splitlines()) == 2 + len(pairs)
    whole = next(r for r in rows if r["stage"] == "*")
    assert f"| {whole['pfc_pauses']:,} | {whole['ecn_marks']:,} | {whole['drops']:,} |" in first
