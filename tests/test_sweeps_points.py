"""rfabric/sweeps/points.py: the grid, its seeds and controllers by name."""

import hashlib

import pytest

import rfabric as rf
from rfabric.controllers import CONTROLLER_CLASSES, StageAwareController, UniformController
from rfabric.sweeps import derive_seed
from rfabric.sweeps.points import _grid, _resolve_controller, controller_class

PERM = {"flows": {"pattern": "permutation", "size": "64KiB"}}


def test_seeds_are_sha256_of_the_parts():
    digest = hashlib.sha256(b"7\x1fengine\x1fkey").digest()
    assert derive_seed(7, "engine", "key") == int.from_bytes(digest[:8], "little") % 2**31
    assert derive_seed(7, "engine", "key") != derive_seed(8, "engine", "key")


def test_controller_names_come_from_the_catalog():
    assert set(CONTROLLER_CLASSES) | {"none"} == set(rf.catalog.CONTROLLERS)
    for name in ("stage_aware", "stage-aware", "StageAwareController"):
        assert controller_class(name) is StageAwareController
    assert controller_class("uniform") is UniformController and controller_class("none") is None
    with pytest.raises(rf.SpecError, match="c: unknown controller 'smart' .*stage_aware"):
        controller_class("smart", "c")
    assert _resolve_controller("own", "c") == "own" and _resolve_controller("None", "c") is None
    with pytest.raises(rf.SpecError, match="keeps a given plan: pass a StaticController"):
        _resolve_controller("static", "c")


def test_the_grid_is_the_product_with_the_last_axis_fastest():
    points = _grid(
        ["FT", "RO"], ["100Gbps", "200Gbps"], [16, 32], PERM, "uniform", 3, None, None, None, "sweep"
    )
    assert len(points) == 2 * 2 * 2
    assert [(p.fabric.label, p.link_bps, p.gpus) for p in points[:3]] == [
        ("FT", 100 * 10**9, 16),
        ("FT", 100 * 10**9, 32),
        ("FT", 200 * 10**9, 16),
    ]
    assert {p.controller for p in points} == {UniformController}
    assert {p.controller_name for p in points} == {"UniformController"}
    # the workload seed depends on the workload and the scale only
    assert len({p.workload_seed for p in points if p.gpus == 16}) == 1
    assert len({p.seed for p in points}) == len(points)
