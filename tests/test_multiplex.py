"""RollMux-style phase multiplexing (rf.traces.multiplex_rl).

Oracles: in the simulated run, per pool, no two phases overlap and they follow the
round-robin order, each starting no earlier than the previous phase's end plus the incoming
job's context switch; every job completes its iterations; each job's ops are exactly its
own generate_rl ops (kind, size, ranks, stage, phase, iteration; compute plus the switch on
the phase's first ops); one job alone multiplexed runs exactly as generate_rl; two jobs with
free switches finish sooner than one after the other, and one job's training overlaps the
other's rollout.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import rfabric as rf
from rfabric.traces.rl.multiplex import COLD_START_S, POOL_STAGES, WARM_START_S, context_switch_ps

TINY = rf.traces.ModelConfig(name="tiny", layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000)
COMMON = dict(model=TINY, train=dict(tp=2, dp=4), gen=dict(tp=2), global_batch=16, decode_steps_per_op=256)
POOLS = dict(train_gpus=8, gen_gpus=8)
SWITCH = {"gen": 50_000_000_000, "train": 120_000_000_000}  # 50 ms, 120 ms


def _jobs(n=3):
    # different seeds (response lengths) and batches: the jobs' phases differ in length
    return [dict(COMMON, seed=s, global_batch=8 * (s + 1), name=f"j{s}") for s in range(n)]


@pytest.fixture(scope="module")
def run3():
    trace = rf.traces.multiplex_rl(_jobs(3), **POOLS, iterations=2, context_switch=SWITCH)
    return trace, rf.simulate(rf.topologies.FatTree(16), trace, backend="flow")


def _phase_spans(res):
    """{pool: [(start, end, job, iteration)]} from res.ops: a phase spans its ops, each from
    the start of the compute before it (start_ps - compute_ps) to its end."""
    ops = res.ops
    job = ops["job"].to_numpy(zero_copy_only=False)
    it = ops["iteration"].to_numpy()
    stage = ops["stage"].cast(pa.string()).to_numpy(zero_copy_only=False)
    start, end = ops["start_ps"].to_numpy(), ops["end_ps"].to_numpy()
    out = {}
    for pool, stages in POOL_STAGES.items():
        m = np.isin(stage, stages)
        spans = []
        for key in sorted({(j, i) for j, i in zip(job[m], it[m], strict=True)}):
            sel = m & (job == key[0]) & (it == key[1])
            spans.append((int(start[sel].min()), int(end[sel].max()), key[0], int(key[1])))
        out[pool] = sorted(spans)
    return out


def test_pools_take_phases_in_round_robin_order_with_switches(run3):
    trace, res = run3
    names = ["j0", "j1", "j2"]
    assert trace.jobs == names
    assert res.jobs["complete"].to_pylist() == [True] * 3
    assert res.jobs["iterations"].to_pylist() == [2] * 3
    compute = dict(zip(res.ops["op_id"].to_pylist(), trace.table["compute_ps"].to_pylist(), strict=True))
    for pool, spans in _phase_spans(res).items():
        assert [(j, i) for _, _, j, i in spans] == [(j, i) for i in range(2) for j in names], pool
        for (_, e0, j0, _), (s1, _, j1, _) in zip(spans, spans[1:], strict=False):
            assert s1 >= e0 + (SWITCH[pool] if j1 != j0 else 0), (pool, j0, j1)
            assert s1 > e0  # no overlap
    # the phase's first ops carry the switch: their compute starts no earlier than the
    # previous phase's end (start - compute >= prev end)
    st = res.ops["start_ps"].to_numpy() - np.array([compute[o] for o in res.ops["op_id"].to_pylist()])
    job = res.ops["job"].to_numpy(zero_copy_only=False)
    it = res.ops["iteration"].to_numpy()
    stage = res.ops["stage"].cast(pa.string()).to_numpy(zero_copy_only=False)
    for pool, spans in _phase_spans(res).items():
        for (_, e0, _, _), (_, _, j1, i1) in zip(spans, spans[1:], strict=False):
            sel = (job == j1) & (it == i1) & np.isin(stage, POOL_STAGES[pool])
            assert st[sel].min() >= e0


def test_training_overlaps_another_jobs_rollout(run3):
    _, res = run3
    spans = _phase_spans(res)
    overlaps = {
        (jt, jg)
        for s, e, jt, _ in spans["train"]
        for s2, e2, jg, _ in spans["gen"]
        if jt != jg and s < e2 and s2 < e
    }
    # j0 trains while j1 generates (iteration 0), j1 while j2 does
    assert {("j0", "j1"), ("j1", "j2")} <= overlaps


def test_each_jobs_ops_are_its_own_generate_rl(run3):
    trace, _ = run3
    tb = trace.table
    job = tb["job"].cast(pa.string()).to_numpy(zero_copy_only=False)
    cols = ["iteration", "stage", "phase", "kind", "size_bytes", "algorithm", "ranks"]
    for spec in _jobs(3):
        name = spec.pop("name")
        own = rf.traces.generate_rl(**spec, **POOLS, iterations=2).table
        mine = tb.filter(pa.array(job == name))

        def rows(t):
            d = {
                c: t[c].cast(pa.string()).to_pylist()
                if c in ("stage", "phase", "kind", "algorithm")
                else t[c].to_pylist()
                for c in cols
            }
            return Counter(
                tuple(tuple(v) if isinstance(v, list) else v for v in r)
                for r in zip(*d.values(), strict=True)
            )

        assert rows(mine) == rows(own)
        # row by row (a job's ops keep their order): the job's own compute, plus the pool's
        # switch on some ops of every phase that follows another job's on its pool (all but
        # j0's iteration 0), and nothing elsewhere; its own dependencies, renumbered, and more
        assert mine["stage"].to_pylist() == own["stage"].to_pylist()
        stage = np.array(own["stage"].cast(pa.string()).to_pylist(), dtype=object)
        it = own["iteration"].to_numpy()
        extra = mine["compute_ps"].to_numpy() - own["compute_ps"].to_numpy()
        for pool, stages in POOL_STAGES.items():
            in_pool = np.isin(stage, stages)
            assert set(extra[in_pool].tolist()) <= {0, SWITCH[pool]}
            for i in range(2):
                switched = (extra[in_pool & (it == i)] > 0).any()
                assert switched == (name != "j0" or i > 0), (name, pool, i)
        assert not extra[~np.isin(stage, sum(POOL_STAGES.values(), ()))].any()
        new_id = dict(zip(own["op_id"].to_pylist(), mine["op_id"].to_pylist(), strict=True))
        added = 0
        for d_own, d_mine in zip(own["deps"].to_pylist(), mine["deps"].to_pylist(), strict=True):
            assert {new_id[d] for d in d_own} <= set(d_mine)
            added += len(d_mine) - len(d_own)
        assert added > 0
    # periods: each one job's
    per = {}
    for j, p in zip(job, tb["period"].to_pylist(), strict=True):
        per.setdefault(p, set()).add(j)
    assert all(len(v) == 1 for v in per.values())


def test_one_job_runs_exactly_as_generate_rl():
    spec = dict(COMMON, seed=4)
    own = rf.traces.generate_rl(**spec, **POOLS, iterations=2)
    mux = rf.traces.multiplex_rl([spec], **POOLS, iterations=2, context_switch="5s")
    fab = rf.topologies.FatTree(16)
    a, b = rf.simulate(fab, own, backend="flow"), rf.simulate(fab, mux, backend="flow")
    assert mux.table["compute_ps"].to_pylist() == own.table["compute_ps"].to_pylist()  # nothing to switch
    np.testing.assert_array_equal(a.ops["start_ps"].to_numpy(), b.ops["start_ps"].to_numpy())
    np.testing.assert_array_equal(a.ops["end_ps"].to_numpy(), b.ops["end_ps"].to_numpy())


@pytest.mark.parametrize("backend", ["flow", "packet"])
def test_free_switches_beat_running_the_jobs_one_after_the_other(backend):
    jobs = _jobs(2)
    fab = rf.topologies.FatTree(16)
    mux = rf.simulate(
        fab, rf.traces.multiplex_rl(jobs, **POOLS, iterations=2, context_switch=0), backend=backend
    )
    alone = []
    for spec in jobs:
        spec = dict(spec)
        spec.pop("name")
        alone.append(rf.simulate(fab, rf.traces.generate_rl(**spec, **POOLS, iterations=2), backend=backend))
    makespan = max(mux.jobs["end_ps"].to_pylist())
    serial = sum(r.jobs["end_ps"][0].as_py() for r in alone)
    assert makespan < serial
    # each job alone is no slower than multiplexed (the schedule only adds dependencies)
    for k, r in enumerate(alone):
        assert mux.jobs["end_ps"][k].as_py() >= r.jobs["end_ps"][0].as_py()


def test_default_switch_is_rollmux_warm_start_by_model_size():
    # RollMux figure 4: 14B warm start 1.8 s rollout, 4.7 s training; 32B 1.7 / 5.9 s
    assert context_switch_ps("qwen2.5-14b") == {"gen": 1_800_000_000_000, "train": 4_700_000_000_000}
    assert context_switch_ps("qwen2.5-32b") == {"gen": 1_700_000_000_000, "train": 5_900_000_000_000}
    assert context_switch_ps("qwen2.5-72b") == context_switch_ps("qwen2.5-32b")  # largest measured
    assert context_switch_ps("qwen2.5-14b", COLD_START_S) == {
        "gen": 60_400_000_000_000,
        "train": 59_000_000_000_000,
    }
    assert [r[0] for r in WARM_START_S] == [r[0] for r in COLD_START_S]
    t = rf.traces.multiplex_rl(_jobs(2), **POOLS)
    sw = [j["context_switch_ps"] for j in t.metadata["parameters"]["jobs"]]
    assert sw == [context_switch_ps(TINY)] * 2 == [{"gen": 800_000_000_000, "train": 1_900_000_000_000}] * 2


@pytest.mark.parametrize(
    "jobs, kwargs, match",
    [
        ([], {}, "empty"),
        ("a", {}, "list of dicts"),
        ([COMMON, 3], {}, r"jobs\[1\]"),
        ([dict(COMMON, name="x"), dict(COMMON, name="x")], {}, "unique"),
        ([dict(COMMON, name="a/b")], {}, "without '/'"),
        ([dict(COMMON, train_gpus=8)], {}, "'train_gpus' is set by multiplex_rl"),
        ([dict(COMMON, iterations=2)], {}, "'iterations' is set by multiplex_rl"),
        ([dict(COMMON, trian=dict(tp=2))], {}, "trian"),
        ([{k: v for k, v in COMMON.items() if k != "model"}], {}, "needs a 'model'"),
        ([dict(COMMON, mode="async")], {}, "must be 'sync'"),
        ([dict(COMMON, placement="colocated")], {}, "must be 'disaggregated'"),
        ([dict(COMMON, gen=dict(tp=1))], {}, "gen tp >= 2"),
        ([dict(COMMON, train=dict(tp=3))], {}, "job 'job0'"),
        ([COMMON], {"context_switch": "fast"}, "context_switch"),
        ([COMMON], {"context_switch": {"gen": "1s"}}, "'train' is missing"),
        ([COMMON], {"context_switch": {"gen": "1s", "train": "1s", "disk": "1s"}}, "disk"),
        ([COMMON], {"context_switch": "-1s"}, "context_switch"),
        ([COMMON], {"iterations": 0}, "iterations"),
        ([COMMON], {"train_gpus": 0}, "train_gpus"),
        ({"a": 3}, {}, "job 'a'"),
    ],
)
def test_bad_arguments_raise_spec_error(jobs, kwargs, match):
    args = dict(POOLS, **kwargs)
    with pytest.raises(rf.SpecError, match=match):
        rf.traces.multiplex_rl(jobs, **args)


def test_pools_placed_on_given_gpus():
    t = rf.traces.multiplex_rl(
        _jobs(2), **POOLS, train_ranks=range(8, 16), gen_ranks=range(8), context_switch=0
    )
    tb = t.table
    stage = tb["stage"].cast(pa.string()).to_numpy(zero_copy_only=False)
    ranks = tb["ranks"].to_pylist()
    assert all(max(r) < 8 for r, s in zip(ranks, stage, strict=True) if s == "gen")
    assert all(min(r) >= 8 for r, s in zip(ranks, stage, strict=True) if s in ("train", "experience"))
