"""rfabric.controllers.default_for / by_name: the policy layer picks each fabric's controller
from the name the fabric declares (rfabric.catalog.CONTROLLERS)."""

import pytest

import rfabric as rf
from rfabric.catalog import CONTROLLERS
from rfabric.controllers import (
    MixNetController,
    StageAwareController,
    StaticController,
    UniformController,
    by_name,
    default_for,
)
from rfabric.controllers.loop import same_plan

T = rf.topologies


@pytest.mark.parametrize(
    "fabric, kind",
    [
        (T.FatTree(64), type(None)),
        (T.RailOptimized(64), type(None)),
        (T.TopoOpt(64), StaticController),
        (T.MixNet(64), MixNetController),
        (T.RFabric(64), StageAwareController),
    ],
)
def test_each_fabric_gets_its_declared_controller(fabric, kind):
    ctl = default_for(fabric)
    assert isinstance(ctl, kind)
    assert isinstance(fabric.controller(), kind)  # the compatibility path, same answer
    assert fabric.default_controller in (None, *CONTROLLERS)
    if ctl is not None:
        assert default_for(fabric) is not ctl  # a fresh instance each time


def test_topoopt_keeps_its_own_circuits():
    top = T.TopoOpt(64)
    assert same_plan(default_for(top).static_plan, top.circuits())


def test_every_catalog_name_builds():
    top = T.RFabric(64)
    kinds = {
        "none": type(None),
        "static": StaticController,
        "uniform": UniformController,
        "stage_aware": StageAwareController,
        "mixnet": MixNetController,
    }
    assert set(kinds) == set(CONTROLLERS)
    for name, kind in kinds.items():
        assert isinstance(by_name(name, top), kind)
    assert isinstance(by_name("stage-aware"), StageAwareController)  # the CLI's old spelling
    assert by_name("stage_aware", lookahead=False).lookahead is False


def test_bad_names_are_named():
    with pytest.raises(rf.SpecError, match="unknown name 'ideal'"):
        by_name("ideal")
    with pytest.raises(rf.SpecError, match="give plan= or a fabric"):
        by_name("static")

    class Odd(T.FatTree):
        default_controller = "oracle"

    with pytest.raises(rf.SpecError, match=r"Odd.default_controller = 'oracle'"):
        default_for(Odd(16))


def test_a_user_fabric_declares_its_controller_by_name():
    class Flexible(T.RFabric):
        default_controller = "uniform"

    assert isinstance(default_for(Flexible(64)), UniformController)
