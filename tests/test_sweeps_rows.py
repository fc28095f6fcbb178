"""rfabric/sweeps/rows.py: one point into its row, times in integer ps, checked against a
direct rf.simulate of the same fabric, workload and seed."""

import rfabric as rf
from rfabric.results import SWEEP_SCHEMA
from rfabric.sweeps.points import _grid, _identify
from rfabric.sweeps.rows import STAGES, _run_point, _table


def two_iterations():
    return rf.traces.Trace.from_columns(
        op_id=[0, 1, 2, 3],
        stage=["train", "weight_sync", "train", "weight_sync"],
        phase="p",
        kind=["all_reduce", "broadcast", "all_reduce", "broadcast"],
        ranks=[list(range(8)), list(range(16)), list(range(8)), list(range(16))],
        size_bytes="1MiB",
        deps=[[], [0], [1], [2]],
        iteration=[0, 0, 1, 1],
        period=[0, 1, 2, 3],
    )


def test_a_rows_times_are_the_simulations_in_integer_ps():
    trace = two_iterations()
    (p,) = _identify(_grid(["FT"], ["200Gbps"], [16], {"t": trace}, None, 1, None, None, None, "sweep"))
    row = _run_point(p)
    res = rf.simulate(rf.topologies.FatTree(16, "200Gbps"), trace, seed=p.seed, rewrites="none")
    makespan = res.run["makespan_ps"]
    assert row["makespan_ps"] == makespan and isinstance(row["makespan_ps"], int)
    assert row["iterations"] == 2
    assert row["iteration_time_ps"] == (makespan + 1) // 2  # rounded to the nearest ps
    assert row["throughput_iter_per_s"] == 1.0 / (makespan / 1e12 / 2)
    # a stage's time: over iterations, its first start to its last end
    for stage in ("train", "weight_sync"):
        spans = [r["end_ps"] - r["start_ps"] for r in res.stages.to_pylist() if r["stage"] == stage]
        assert row[f"stage_{stage}_ps"] == sum(spans) == dict(row["stage_ps"])[stage]
    assert row["stage_gen_ps"] is None and set(STAGES) == set(rf.catalog.STAGES)
    assert _table([row]).schema == SWEEP_SCHEMA


def test_an_unfinished_point_has_null_times():
    flows = rf.Flows([0], [1], [1 << 20])
    (p,) = _identify(_grid(["FT"], ["200Gbps"], [16], flows, None, 1, None, None, {"until": "1us"}, "sweep"))
    row = _run_point(p)
    assert not row["complete"] and row["makespan_ps"] is None and row["iteration_time_ps"] is None
    assert row["throughput_iter_per_s"] != row["throughput_iter_per_s"]  # NaN
