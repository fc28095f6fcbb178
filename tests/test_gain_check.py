"""The StageAwareController's gain check on auto-tuned all-reduces (figure 23's PXN-off
TP4_DP32 case): the executor picks ring or tree per op on the paths at its start, so a
candidate plan must be judged on what each op may send on it, not on the dry run's flows on
the plan in force. Oracle: the simulation of each plan (the flow backend), not the predictor."""

import numpy as np
import pytest

import rfabric as rf
from rfabric.controllers import StageAwareController, UniformController
from rfabric.traces import Trace

GB = 10**9
T_OCS = "25ms"


def dp_all_reduce(gpus=128, size=32, stride=4, nbytes=GB):
    """fig23's TP4_DPx workload: one all-reduce per DP group of ``size`` ranks ``stride``
    apart (Megatron order), each after a compute gap of t_ocs."""
    lead = rf.units.parse_time(T_OCS)
    groups = [[first + k * stride for k in range(size)] for first in range(stride)]
    n = len(groups)
    return Trace.from_columns(
        op_id=np.arange(n),
        stage="train",
        phase="grad_sync",
        kind="all_reduce",
        ranks=groups,
        size_bytes=[nbytes] * n,
        deps=[[]] * n,
        compute_ps=lead,
        gpus=gpus,
    ), lead


def seconds(res, lead):
    assert res.run["makespan_ps"] > 0
    return (res.run["makespan_ps"] - lead) / 1e12


@pytest.fixture(scope="module")
def dp32():
    fab = rf.topologies.RFabric(128, "200Gbps", pxn=False)
    tr, lead = dp_all_reduce()
    kw = dict(backend="flow", t_ocs=T_OCS, seed=1)
    uni = rf.simulate(fab, tr, controller=UniformController(), **kw)
    ctl = StageAwareController()
    aware = rf.simulate(fab, tr, controller=ctl, **kw)
    forced = StageAwareController(check_gain=False)
    blind = rf.simulate(fab, tr, controller=forced, **kw)
    return dict(
        uniform=seconds(uni, lead),
        aware=seconds(aware, lead),
        blind=seconds(blind, lead),
        ctl=ctl,
        forced=forced,
        algos=(uni.ops["algorithm"].to_pylist(), blind.ops["algorithm"].to_pylist()),
    )


def test_the_check_charges_each_group_the_algorithm_its_tuner_picks(dp32):
    # the candidate is faster: committed without the check, the four DP groups' all-reduces
    # stay trees and the period takes 0.16 s against uniform's 0.24 s at 1 GB; with the
    # check it is committed too, and the run is the blind run
    assert dp32["forced"].log[-1].action == "commit"
    uni_algos, blind_algos = dp32["algos"]
    assert uni_algos == blind_algos == ["tree"] * 4
    assert dp32["blind"] < 0.75 * dp32["uniform"]
    assert dp32["ctl"].log[-1].action == "commit"
    assert dp32["aware"] == dp32["blind"]


def test_the_predictions_follow_the_simulated_times(dp32):
    # oracle: the simulation of each plan; the prediction of the candidate (the plan the blind
    # run committed) and of the plan kept (uniform) each within 10% of its simulated time
    ((period, new, kept),) = dp32["ctl"].predictions
    assert new[0] / 1e12 == pytest.approx(dp32["blind"], rel=0.1)
    assert kept[0] / 1e12 == pytest.approx(dp32["uniform"], rel=0.1)
    assert new < kept


@pytest.mark.parametrize("backend", ["packet", "flow", "dynamic"])
def test_an_op_starting_as_its_circuits_light_is_tuned_on_them(backend):
    """The ops start 25 ms in (their compute gap) and the plan committed at 0 lights after
    t_ocs: at 25 ms, the instant they start, or at 24 ms, before. The tuner chooses on the
    paths of its op's start instant, so both run alike (oracle: the run whose circuits lit
    first). Were the choice made before the change queued for that instant, one DP group
    would pick a ring on the paths going dark (3.8x slower at 16 MiB)."""
    tr, lead = dp_all_reduce(nbytes=16 * 2**20)
    kw = dict(backend="flow", flow_model="dynamic") if backend == "dynamic" else dict(backend=backend)
    runs = []
    for t_ocs in ("25ms", "24ms"):
        fab = rf.topologies.RFabric(128, "200Gbps", pxn=False)
        ctl = StageAwareController(check_gain=False)
        res = rf.simulate(fab, tr, controller=ctl, t_ocs=t_ocs, seed=1, **kw)
        assert ctl.log[-1].action == "commit"
        runs.append((res.ops["algorithm"].to_pylist(), (res.ops["end_ps"].to_numpy() - lead).tolist()))
    (algos, ends), (algos_lit, ends_lit) = runs
    assert algos == algos_lit == ["tree"] * 4
    assert ends == ends_lit


def test_intent_lists_the_tuned_all_reduces_with_their_ring_and_tree_flows():
    fab = rf.topologies.RFabric(128, "200Gbps", pxn=False)
    tr, _ = dp_all_reduce(nbytes=GB)
    seen = []

    class Spy(StageAwareController):
        def plan(self, intent, view):
            seen.append(intent)
            return super().plan(intent, view)

    rf.simulate(fab, tr, controller=Spy(), backend="flow", t_ocs=T_OCS, seed=1)
    (intent,) = seen
    assert len(intent.tuned) == 4  # four DP groups, each its own ranks
    n = 32
    for group, (own, ring, tree) in zip(range(4), intent.tuned, strict=True):
        ranks = set(range(group, 128, 4))
        # the dry run's choice is one of the two, and is what src/dst/bytes count
        assert any(
            np.array_equal(own[0], x[0]) and np.array_equal(own[1], x[1]) and np.array_equal(own[2], x[2])
            for x in (ring, tree)
        )
        for src, dst, _ in (ring, tree):
            assert set(src.tolist()) <= ranks and set(dst.tolist()) <= ranks
        # analytical oracle, the ring: every rank sends 2 (n-1)/n of the buffer (reduce-scatter
        # then all-gather), to ring neighbours only
        sent = np.bincount(ring[0], weights=ring[2], minlength=128)[sorted(ranks)]
        assert np.allclose(sent, 2 * (n - 1) / n * GB, rtol=1e-3)
    own_total = sum(int(g[0][2].sum()) for g in intent.tuned)
    assert own_total == int(intent.bytes.sum())


def test_op_flows_forces_an_algorithm_and_leaves_the_op_its_own():
    fab = rf.topologies.RFabric(32, "200Gbps", pxn=False)
    tr, _ = dp_all_reduce(gpus=32, size=8, stride=4, nbytes=64 * 2**20)
    sim = rf.Simulation(fab, tr, backend="flow")
    rows = np.array([0], dtype=np.int64)
    own = sim.engine.op_flows(rows)
    ring = sim.engine.op_flows(rows, algorithm=1)
    tree = sim.engine.op_flows(rows, algorithm=4)
    assert not np.array_equal(ring["dst"], tree["dst"]) or not np.array_equal(ring["src"], tree["src"])
    again = sim.engine.op_flows(rows)  # the forced algorithm does not stick
    for k in ("src", "dst", "size_bytes"):
        assert np.array_equal(own[k], again[k])
    with pytest.raises(Exception, match="algorithm"):
        sim.engine.op_flows(rows, algorithm=99)


def test_predictor_states_route_as_fresh_forwarding():
    """The predictor keeps two forwarding states and reuses the one already set to a check's
    (failed links, plan). Oracle: a Forwarding built fresh for each check, the failures and
    plan applied to it alone; every sampled pair's ports must match, through a random sequence
    of plans (subsets of the fabric's circuits) and failed circuit links, with repeats."""
    from types import SimpleNamespace

    from rfabric.controllers.gain import Predictor
    from rfabric.forwarding import Forwarding
    from rfabric.spec import CircuitTable

    spec = rf.topologies.RFabric(128, "200Gbps").to_spec()
    pred = Predictor(spec)
    full = Forwarding(spec).current_circuits()
    rng = np.random.default_rng(7)
    links = np.unique(np.r_[full.a, full.b])
    keep = [np.flatnonzero(rng.random(len(full)) < 0.7) for _ in range(3)]
    plans = [full] + [CircuitTable.build(full.ocs[k], full.a[k], full.b[k]) for k in keep]
    downs = [np.zeros(len(links), bool)] + [rng.random(len(links)) < 0.05 for _ in range(2)]
    pairs = [tuple(int(x) for x in rng.choice(128, 2, replace=False)) for _ in range(40)]
    seen = {}
    for step in range(14):
        pi, di = int(rng.integers(len(plans))), int(rng.integers(len(downs)))
        plan, failed = plans[pi], downs[di]
        fwd = pred._forwarding(plan, set(links[failed].tolist()))
        if (pi, di) in seen and seen[(pi, di)][1] == step - 1:
            assert fwd is seen[(pi, di)][0], "a state set to the same check again is reused"
        seen[(pi, di)] = (fwd, step)
        fresh = Forwarding(spec)
        for link in links[failed]:
            fresh.fail_link(int(link))
        fresh.apply_circuits(plan)
        for a, b in pairs:
            assert np.array_equal(fwd.ports(a, b), fresh.ports(a, b)), (step, a, b)
        assert len(pred._fwds) <= pred.states
        # the view form time_ps takes gives the same forwarding state
        view = SimpleNamespace(ocs_ports=links, failed=failed)
        s, d = [a for a, _ in pairs], [b for _, b in pairs]
        assert pred.time_ps(plan, view, (s, d, np.ones(len(s)))) == Predictor(spec).time_ps(
            plan, view, (s, d, np.ones(len(s)))
        )


def test_the_pick_is_the_algorithm_the_tuner_runs():
    """Oracle: the algorithm the executor's tuner picked for each DP group, on the plan the
    pick is made on (the plan in force). RFabric 64 with radix-8 ToRs, TP4_DP16 at 1 GB: the
    tree's leaders' NICs carry 16/15 of what a ring's busiest NIC does, so the tuner runs
    rings. Laid out pair by pair the pick agrees; on the paths the gain check samples (only
    pairs that leave their ToR) the tree's NIC loads look lighter, and a candidate equal to
    the plan in force was predicted faster than it."""
    from rfabric.controllers.gain import Predictor
    from rfabric.controllers.layout import RFabricLayout

    fab = rf.topologies.RFabric(64, "200Gbps", radix=8)
    tr, _ = dp_all_reduce(gpus=64, size=16, stride=4, nbytes=GB)
    seen = []

    class Spy(StageAwareController):
        def plan(self, intent, view):
            seen.append((intent, view))
            return super().plan(intent, view)

    ctl = Spy()
    res = rf.simulate(fab, tr, controller=ctl, backend="flow", t_ocs=T_OCS, seed=1)
    ((intent, view),) = seen
    ran = res.ops["algorithm"].to_pylist()
    assert ran == ["ring"] * 4
    pred = Predictor(view.spec)
    _, groups = pred.variants(intent, RFabricLayout(view.spec))
    fwd = pred._forwarding(view.plan, set(view.ocs_ports[view.failed].tolist()))
    names = ("ring", "tree")
    whole = [names[pred._tuner_pick([pred._load(fwd, w) for _, w in alts])] for alts in groups]
    sampled = [names[pred._tuner_pick([pred._load(fwd, s) for s, _ in alts])] for alts in groups]
    assert whole == ran
    assert sampled == ["tree"] * 4
    assert ctl.log[-1].action == "keep: no gain"
