"""The stage table's busy_ps and exclusive_ps against a brute-force sweep over time."""

import pytest
from conftest import tiny_rl_trace

import rfabric as rf


def _brute(trace, ops):
    """busy and exclusive per (iteration, stage), from each op's [compute start, end) with
    plain Python: every elementary segment between two span ends is checked against every
    span directly."""
    compute = dict(zip(trace.table["op_id"].to_pylist(), trace.table["compute_ps"].to_pylist(), strict=True))
    spans = {}
    for r in ops.to_pylist():
        if r["start_ps"] < 0:
            continue
        assert r["end_ps"] >= 0, "brute force takes finished runs only"
        a = max(r["start_ps"] - compute[r["op_id"]], 0)
        spans.setdefault((r["iteration"], r["stage"]), []).append((a, r["end_ps"]))
    cuts = sorted({t for v in spans.values() for s in v for t in s})
    busy = dict.fromkeys(spans, 0)
    alone = dict.fromkeys(spans, 0)
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        on = [g for g, v in spans.items() if any(a <= lo and hi <= b for a, b in v)]
        for g in on:
            busy[g] += hi - lo
        if len(on) == 1:
            alone[on[0]] += hi - lo
    return busy, alone


@pytest.mark.parametrize(
    "fab, backend",
    [
        (rf.topologies.FatTree(64), "flow"),
        (rf.topologies.RFabric(64), "packet"),
        (rf.topologies.FatTree(64, oversubscription=3), "flow"),
    ],
    ids=["FT-flow", "RFabric-packet", "FT-OS-flow"],
)
def test_busy_and_exclusive_match_a_brute_force_sweep(fab, backend):
    trace = tiny_rl_trace(iterations=2, mode="async") if backend == "flow" else tiny_rl_trace(iterations=1)
    # rewrites="none": the brute force reads each op's compute from the trace it was given
    res = rf.simulate(fab, trace, backend=backend, seed=1, controller=fab.controller(), rewrites="none")
    busy, alone = _brute(trace, res.ops)
    got = {(r["iteration"], r["stage"]): (r["busy_ps"], r["exclusive_ps"]) for r in res.stages.to_pylist()}
    assert got == {g: (busy[g], alone[g]) for g in busy}
    # exclusive times do not overlap: with the overlapped and idle time they make the makespan
    ex = res.stages["exclusive_ps"].to_numpy()
    assert ex.sum() <= res.run["makespan_ps"]
    assert (ex <= res.stages["busy_ps"].to_numpy()).all()


def test_two_stages_by_hand():
    """Stage a: op 0 computes 10 us then all-reduces; stage b: op 1 starts with op 0 (no deps)
    and computes 30 us, op 2 follows op 0. Exact spans from res.ops; busy and exclusive by
    hand from them."""
    trace = rf.traces.Trace.from_columns(
        op_id=[0, 1, 2],
        stage=["a", "b", "b"],
        phase="p",
        kind="all_reduce",
        ranks=[[0, 1], [2, 3], [0, 1]],
        size_bytes="1MiB",
        deps=[[], [], [0]],
        compute_ps=["10us", "30us", 0],
    )
    res = rf.simulate(rf.topologies.FatTree(16), trace, backend="flow")
    s, e = res.ops["start_ps"].to_pylist(), res.ops["end_ps"].to_pylist()
    a0, b1 = s[0] - 10_000_000, s[1] - 30_000_000
    assert a0 == 0 and b1 == 0  # both computed from t = 0
    span_a = (0, e[0])
    span_b = [(0, e[1]), (s[2], e[2])]  # op 2 starts when op 0 ends
    union_b = e[2] - 0 if s[2] <= e[1] else (e[1] + e[2] - s[2])
    got = {r["stage"]: (r["busy_ps"], r["exclusive_ps"]) for r in res.stages.to_pylist()}
    assert got["a"] == (e[0], 0)  # a runs entirely under b's first op (30 us > a's time)
    assert got["b"][0] == union_b
    assert got["b"][1] == union_b - (span_a[1] - span_a[0])
    assert span_b[0][1] > span_a[1]


def test_unfinished_stage_reads_minus_one():
    trace = tiny_rl_trace(iterations=1)
    res = rf.simulate(rf.topologies.FatTree(64), trace, backend="flow", until="200ms")
    st = res.stages.to_pylist()
    open_ = [r for r in st if r["end_ps"] < 0]
    assert open_, "the run must stop inside a stage"
    assert all(r["busy_ps"] == -1 and r["exclusive_ps"] == -1 for r in open_)
    assert all(r["busy_ps"] >= r["exclusive_ps"] >= 0 for r in st if r["end_ps"] >= 0)
