"""rfabric/sweeps/executors.py: where points run, and what cannot travel to a worker."""

import pytest

import rfabric as rf
from rfabric.results import SWEEP_HOST_COLUMNS
from rfabric.sweeps.executors import EXECUTORS, _check_picklable, _in_spawned_worker, _run_serial
from rfabric.sweeps.points import _grid, _identify
from rfabric.sweeps.rows import _run_point

PERM = {"flows": {"pattern": "permutation", "size": "16KiB"}}


def test_serial_runs_every_point_in_order_as_run_point_does():
    points = _identify(_grid(["FT"], ["100Gbps", "200Gbps"], [16], PERM, None, 1, None, None, None, "sweep"))
    rows = []
    _run_serial(points, rows.append)
    assert [r["point"] for r in rows] == [0, 1]
    one = _run_point(points[1])
    assert {k: v for k, v in rows[1].items() if k not in SWEEP_HOST_COLUMNS} == {
        k: v for k, v in one.items() if k not in SWEEP_HOST_COLUMNS
    }
    assert EXECUTORS == ("local", "serial", "ray")


def test_what_cannot_be_pickled_is_named_before_anything_runs():
    points = _grid(
        [lambda g, link: rf.topologies.FatTree(g, link)],
        ["100Gbps"],
        [16],
        PERM,
        None,
        1,
        None,
        None,
        None,
        "sweep",
    )
    with pytest.raises(
        rf.SpecError, match="its fabric cannot be sent to executor='local' workers.*module level"
    ):
        _check_picklable(points, "local")
    _check_picklable(_grid(["FT"], ["100Gbps"], [16], PERM, None, 1, None, None, None, "sweep"), "local")


def test_the_main_process_is_not_a_spawned_worker():
    _in_spawned_worker("sweep")  # no error here: only a worker importing the main script raises
