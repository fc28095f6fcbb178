"""The stage-aware controller's re-plans and its never-worse rule: a period planned while other
periods held its ports is offered again when they end, and a plan is committed only when the
gain check predicts it faster than the plan in force (by more than the reconfiguration it
adds), the fabric's initial plan being one of the candidates."""

import numpy as np
import pytest
from conftest import tiny_rl_trace
from test_stage_aware import COLD, HOT, a2a_intent, view_for

import rfabric as rf
from rfabric.controllers import StageAwareController
from rfabric.controllers.gain import Predictor
from rfabric.controllers.loop import same_plan


@pytest.fixture(scope="module")
def rf128_nopxn():
    return rf.topologies.RFabric(128, pxn=False).to_spec()


def test_the_initial_plan_is_committed_where_predicted_faster_than_both(rf128_nopxn, monkeypatch):
    """A skewed all-to-all's plan is in force; an even all-to-all over every server comes. A
    materialiser that proposes the plan in force again (no gain) leaves the fabric's initial
    plan as the only faster candidate: it is committed. Oracle: the spec's own circuits and
    an independent Predictor's times of both plans."""
    spec = rf128_nopxn
    ctl = StageAwareController()
    skewed = ctl.plan(a2a_intent([HOT, *COLD], [256 << 20] + [1 << 20] * len(COLD)), view_for(spec))
    assert skewed is not None and not same_plan(skewed, spec.circuits)
    even = a2a_intent([list(range(128))], [8 << 20], period=1)
    view = view_for(spec, plan=skewed, active=(1,))
    monkeypatch.setattr(ctl, "_materialize", lambda lay, view, *a, **k: (view.plan, "the plan in force"))
    plan = ctl.plan(even, view)
    assert plan is not None and same_plan(plan, spec.circuits)
    assert ctl.log[-1].action == "commit" and "the fabric's initial plan" in ctl.log[-1].detail
    check = ctl.checks[-1]
    assert check.committed and check.initial is not None and check.initial < check.candidate
    # oracle: a fresh predictor on the even demand's GPU pairs (all traced: 128 x 127 < budget)
    pred = Predictor(spec)
    paths = (even.src.tolist(), even.dst.tolist(), even.bytes.astype(np.float64))
    assert pred.time_ps(spec.circuits, view, paths) < pred.time_ps(skewed, view, paths)
    # without the gain check nothing is compared: the materialiser's plan (the one in force)
    blind = StageAwareController(check_gain=False)
    monkeypatch.setattr(blind, "_materialize", lambda lay, view, *a, **k: (view.plan, "the plan in force"))
    assert same_plan(blind.plan(even, view), skewed)


@pytest.fixture(scope="module")
def replan_run():
    """A tiny RL iteration whose train stage (pp 4) crosses PoDs, on RFabric 256 in PoDs of 64
    GPUs with 32 core ports, t_ocs 0.1 ms, with and without re-plans."""
    trace = tiny_rl_trace(
        train_gpus=128, gen_gpus=128, train=dict(tp=4, pp=4, dp=8), pod_gpus=64, iterations=1
    )
    out = {}
    for replan in (False, True):
        ctl = StageAwareController(forest="always", replan=replan)
        sim = rf.Simulation(
            rf.topologies.RFabric(256, core_ports=32, pod_servers=8),
            trace,
            controller=ctl,
            backend="flow",
            t_ocs="0.1ms",
        )
        sim.run()
        out[replan] = (ctl, sim.results())
    return out


def test_every_commit_is_predicted_faster_than_the_plan_in_force(replan_run):
    """The never-worse rule's invariant, over every gain check of a run with re-plans: a
    commit is the faster of the two candidates and beats the plan in force by more than the
    delay it adds; a keep is not. Commits logged with a prediction match the checks one to
    one."""
    ctl, res = replan_run[True]
    assert ctl.checks
    for c in ctl.checks:
        best = c.candidate if c.initial is None else min(c.candidate, c.initial)
        faster = best[0] + c.late < c.kept[0] if c.late else best < c.kept
        assert c.committed == faster, c
    assert any(c.committed for c in ctl.checks) and not all(c.committed for c in ctl.checks)
    assert (res.ops["end_ps"].to_numpy() > 0).all()


def test_a_period_is_offered_again_when_the_periods_holding_its_ports_end(replan_run):
    """With re-plans the train periods planned while generation and experience still ran are
    offered again when those end: some commit (the gain check predicted them faster by more
    than t_ocs), each logs why, and the iteration is no longer than without."""
    ctl, res = replan_run[True]
    old_ctl, old = replan_run[False]
    again = [d for d in ctl.log if "holding its ports ended" in d.detail]
    assert again and not [d for d in old_ctl.log if "holding its ports ended" in d.detail]
    assert any(d.action == "commit" for d in again)
    assert all(d.action in ("commit", "keep: no gain") for d in again)
    end = res.ops["end_ps"].to_numpy().max()
    assert end <= old.ops["end_ps"].to_numpy().max()
    # the periods re-planned were running then: each re-plan's check counts t_ocs as its delay
    late = {c.late for c in ctl.checks if c.late}
    assert 100_000_000 in late


def test_replan_off_offers_nothing(replan_run):
    """Re-plans off: the controller picks no running period to offer again."""
    ctl, _ = replan_run[False]
    ctl._holders[5] = frozenset({4})
    assert ctl.replan_periods((4,), (5,)) == []


def test_a_wave_met_by_training_is_planned_when_training_ends_and_ends_sooner(replan_run):
    """The forest's first wave becomes ready while training's fwd/bwd period still runs in
    its PoDs (each shard's sends wait for their own holder only). Before, it was planned
    then, around training's circuits, and kept that plan; now it waits ("keep: busy"), is
    planned when training's period ends (predicted faster by more than t_ocs) and, with
    training no longer giving up ports to it, both end sooner. Oracle: the same run without
    re-plans (the old behaviour)."""
    ctl, res = replan_run[True]
    old_ctl, old = replan_run[False]
    first = min(ctl._ws_first)
    mine = [d for d in ctl.log if d.period == first and "look-ahead" not in d.detail]
    assert [d.action for d in mine if d.action != "cached template"] == ["keep: busy", "commit"]
    assert "holding its ports ended" in mine[-1].detail
    assert not [
        d
        for d in old_ctl.log
        if d.period == first and d.action == "keep: busy" and "look-ahead" not in d.detail
    ]

    def ends(r):
        ops = r.ops
        period, end = ops["period"].to_numpy(), ops["end_ps"].to_numpy()
        stage = np.array(ops["stage"].to_pylist())
        return end[period == first].max(), end[stage == "train"].max()

    (wave, train), (wave0, train0) = ends(res), ends(old)
    assert wave < wave0 and train < train0
