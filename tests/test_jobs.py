"""Several jobs on one fabric (rf.Job): placement of ranks, start times, per-job results.

Oracles: a job that shares no link with another runs exactly as it does alone (same op
times, shifted by its start); jobs that share links run slower than alone; every table's job
column agrees with the placement; bytes are conserved per job.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric.jobs import compose


@pytest.fixture(scope="module")
def rl_trace():
    return tiny_rl_trace()


def _op_times(res, job=None):
    ops = res.ops if job is None else res.ops.filter(pa.compute.equal(res.ops["job"], job))
    return ops["start_ps"].to_numpy(), ops["end_ps"].to_numpy()


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_disjoint_jobs_run_exactly_as_alone(rl_trace, backend):
    # FatTree(128): GPUs 0-63 and 64-127 hang off disjoint ToRs and aggregation switches:
    # with each job's traffic inside its half, the two share no link.
    fab = rf.topologies.FatTree(128)
    alone = rf.simulate(fab, rl_trace, backend=backend)
    jobs = [rf.Job(rl_trace, gpus=range(64), name="a"), rf.Job(rl_trace, gpus=range(64, 128), name="b")]
    two = rf.simulate(fab, jobs, backend=backend)
    a_start, a_end = _op_times(alone)
    for name in ("a", "b"):
        s, e = _op_times(two, name)
        np.testing.assert_array_equal(s, a_start)
        np.testing.assert_array_equal(e, a_end)
    assert two.jobs["job"].to_pylist() == ["a", "b"]
    assert two.jobs["iteration_time_ps"].to_pylist() == 2 * alone.jobs["iteration_time_ps"].to_pylist()
    assert two.jobs["gpus"].to_pylist()[1] == list(range(64, 128))
    # the links the two use are disjoint
    used = two.links.filter(pa.compute.greater(two.links["bytes"], 0))
    assert used.num_rows == 2 * alone.links.filter(pa.compute.greater(alone.links["bytes"], 0)).num_rows


def test_start_delays_a_job_by_exactly_its_start():
    fab = rf.topologies.FatTree(32)
    t = rf.op_trace("all_reduce", range(8), 8 << 20)
    alone = rf.simulate(fab, t)
    res = rf.simulate(fab, [rf.Job(t, name="x"), rf.Job(t, gpus=range(16, 24), start="7us", name="y")])
    (s0,), (e0,) = _op_times(alone)
    (s,), (e,) = _op_times(res, "y")
    assert (s, e) == (s0 + 7_000_000, e0 + 7_000_000)
    row = res.jobs.to_pylist()[1]
    assert row["start_ps"] == 7_000_000 and row["first_start_ps"] == s and row["end_ps"] == e
    assert row["iteration_time_ps"] == e0  # measured from the job's start
    # the stage's busy time counts from the job's start, not from 0
    st = res.stages.filter(pa.compute.equal(res.stages["job"], "y")).to_pylist()[0]
    assert st["busy_ps"] == e0


def test_ranks_run_on_the_jobs_gpus(rl_trace):
    fab = rf.topologies.FatTree(128)
    gpus = np.random.default_rng(5).permutation(128)[:64]
    res = rf.simulate(fab, rf.Job(rl_trace, gpus=gpus, name="p"), backend="flow")
    want = [[int(gpus[r]) for r in ranks] for ranks in rl_trace.table["ranks"].to_pylist()]
    assert res.op_ranks.to_pylist() == want
    assert sorted(res.jobs["gpus"].to_pylist()[0]) == sorted(gpus.tolist())


def test_contention_slows_jobs_that_share_links():
    # two all-to-alls spread over the same ToRs of an oversubscribed fat-tree: each alone is
    # faster than the two together
    fab = rf.topologies.FatTree(64, oversubscription=3)
    t = rf.op_trace("all_to_all", range(32), 1 << 20)
    a = rf.Job(t, gpus=[g for g in range(64) if g % 8 < 4], name="a")  # 4 GPUs of every server
    b = rf.Job(t, gpus=[g for g in range(64) if g % 8 >= 4], name="b")  # the other 4
    for backend in ("packet", "flow"):
        alone = rf.simulate(fab, [a], backend=backend).jobs["iteration_time_ps"][0].as_py()
        both = rf.simulate(fab, [a, b], backend=backend).jobs["iteration_time_ps"].to_pylist()
        assert min(both) > 1.2 * alone, (backend, alone, both)


def test_flows_jobs_carry_their_job_and_conserve_bytes():
    fab = rf.topologies.FatTree(32)
    f1 = rf.Flows([0, 1], [2, 3], [1 << 20, 2 << 20])
    f2 = rf.Flows([0], [1], 3 << 20, start_ps="1us")
    res = rf.simulate(fab, [rf.Job(f1, gpus=[8, 9, 10, 11], name="f1"), rf.Job(f2, gpus=[20, 21], name="f2")])
    assert res.flows["job"].to_pylist() == ["f1", "f1", "f2"]
    assert res.flows["src"].to_pylist() == [8, 9, 20]
    assert res.flows["start_ps"].to_pylist() == [0, 0, 1_000_000]
    for name, total in (("f1", 3 << 20), ("f2", 3 << 20)):
        mine = res.flows.filter(pa.compute.equal(res.flows["job"], name))
        assert sum(mine["delivered_bytes"].to_pylist()) == total
    assert res.jobs["flows"].to_pylist() == [2, 1]
    assert res.jobs["end_ps"].to_pylist() == [
        max(res.flows["end_ps"].to_pylist()[:2]),
        res.flows["end_ps"].to_pylist()[2],
    ]


def test_flows_among_trace_jobs_run_as_send_ops():
    fab = rf.topologies.FatTree(32)
    t = rf.op_trace("all_reduce", range(8), 1 << 20)
    f = rf.Flows([0, 1], [1, 0], 1 << 20, start_ps=[0, 2_000_000])
    res = rf.simulate(fab, [rf.Job(t, name="coll"), rf.Job(f, gpus=[16, 17], name="bg")])
    bg = res.ops.filter(pa.compute.equal(res.ops["job"], "bg"))
    assert bg["kind"].to_pylist() == ["send", "send"]
    assert bg["start_ps"].to_pylist() == [0, 2_000_000]
    assert bg["delivered_bytes"].to_pylist() == [1 << 20, 1 << 20]


def test_a_trace_job_column_names_its_jobs():
    fab = rf.topologies.FatTree(32)
    t = rf.traces.Trace.from_columns(
        op_id=[0, 1],
        stage="s",
        phase="p",
        kind="all_reduce",
        ranks=[[0, 1], [2, 3]],
        size_bytes=1 << 20,
        deps=[[], [0]],
        job=["first", "second"],
    )
    assert t.jobs == ["first", "second"]
    res = rf.simulate(fab, t)
    assert res.jobs["job"].to_pylist() == ["first", "second"]
    assert res.jobs["gpus"].to_pylist() == [[0, 1], [2, 3]]
    # the second job starts when the first's op ends (a cross-job dependency)
    assert res.ops["start_ps"][1].as_py() == res.ops["end_ps"][0].as_py()
    # a Job wrapping it keeps the names, prefixed by its own
    res2 = rf.simulate(fab, rf.Job(t, gpus=[4, 5, 6, 7], name="outer"))
    assert res2.jobs["job"].to_pylist() == ["outer/first", "outer/second"]
    assert res2.jobs["gpus"].to_pylist() == [[4, 5], [6, 7]]


def test_job_column_round_trips_through_a_file(tmp_path):
    t = rf.traces.Trace.from_columns(
        op_id=[0, 1],
        stage="s",
        phase="p",
        kind="send",
        ranks=[[0, 1], [1, 0]],
        size_bytes=1,
        deps=[[], []],
        job=["a", "b"],
    )
    path = tmp_path / "t.arrow"
    rf.traces.write(t, path)
    back = rf.traces.read(path)
    assert back.jobs == ["a", "b"] and back.equals(t)


def test_periods_and_op_ids_do_not_collide(rl_trace):
    j = [rf.Job(rl_trace, gpus=range(64), name="a"), rf.Job(rl_trace, gpus=range(64, 128), name="b")]
    composed, infos, _ = compose(j, 128)
    tb = composed.table
    per = tb["period"].to_numpy()
    job = tb["job"].cast(pa.string()).to_numpy(zero_copy_only=False)
    assert set(per[job == "a"]).isdisjoint(set(per[job == "b"]))
    assert np.all(np.diff(tb["op_id"].to_numpy()) > 0)
    assert [i.name for i in infos] == ["a", "b"]


def test_stage_aware_controller_runs_two_jobs(rl_trace):
    fab = rf.topologies.RFabric(128)
    j = [rf.Job(rl_trace, gpus=range(64), name="a"), rf.Job(rl_trace, gpus=range(64, 128), name="b")]
    res = rf.simulate(fab, j, backend="flow", controller=fab.controller())
    assert res.jobs["complete"].to_pylist() == [True, True]
    # the weight-sync forest rewrite keeps every op's job
    forest = res.ops.filter(pa.compute.equal(res.ops["rewrite"], "weight_sync_forest"))
    assert forest.num_rows > 0 and set(forest["job"].to_pylist()) == {"a", "b"}


def test_sweep_takes_a_list_of_jobs(rl_trace):
    t = rf.op_trace("all_reduce", range(8), 1 << 20)
    jobs = [rf.Job(t, name="a"), rf.Job(t, gpus=range(8, 16), name="b", start="1us")]
    table = rf.sweep(
        fabrics=["FT"],
        gpus=[16],
        workload={"two": jobs},
        settings={"backend": "flow"},
        out=None,
        progress=False,
    )
    (row,) = table.to_pylist()
    assert row["workload"] == "two"
    assert [j["job"] for j in row["jobs"]] == ["a", "b"]
    assert row["jobs"][1]["start_ps"] == 1_000_000 and row["complete"]


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda t: [rf.Job(t, name="a"), rf.Job(t, name="a")], "name 'a' is also jobs"),
        (lambda t: [rf.Job(t, gpus=range(4)), rf.Job(t, gpus=range(2, 6))], "GPU 2 is also job 'job0'"),
        (lambda t: [rf.Job(t, gpus=range(30, 34))], "GPU 32 is not on"),
        (lambda t: rf.Job(t, gpus=[0, 1]), "uses ranks 0..3 but gpus lists only 2"),
        (lambda t: rf.Job(t, gpus=[0, 0, 1, 2]), "GPU 0 is listed twice"),
        (lambda t: rf.Job(t, start="-1us"), "start"),
        (lambda t: rf.Job(t, name=""), "name must be"),
        (lambda t: rf.Job("trace.arrow"), "workload must be"),
        (lambda t: [], "list of jobs is empty"),
        (lambda t: [rf.Job(t), t], r"jobs\[1\]: expected an rfabric.Job"),
    ],
)
def test_bad_jobs_are_named(make, match):
    t = rf.op_trace("all_reduce", range(4), 1 << 20)
    with pytest.raises(rf.SpecError, match=match):
        rf.simulate(rf.topologies.FatTree(32), make(t))
