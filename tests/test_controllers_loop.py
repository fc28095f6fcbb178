"""The control loop: boundaries, intents, plan application and its errors (issue 9, deliverable 1)."""

import dataclasses
import sys

import numpy as np
import pytest
from conftest import tiny_rl_trace, weight_sync_trace

import rfabric as rf
from rfabric.controllers import Controller, StaticController, UniformController
from rfabric.controllers.loop import plan_key, same_plan

US = 1_000_000


@pytest.fixture(scope="module")
def rl_trace():
    # train and gen periods interleave: several periods are active at once; train in rail
    # group 0, gen in group 1: weights cross circuits
    return tiny_rl_trace(gen_ranks=range(64, 96), iterations=1)


@pytest.fixture(scope="module")
def rfab():
    # 128 GPUs: two rail groups joined by circuits (at 64 GPUs one group, no circuits)
    return rf.topologies.RFabric(128)


class Recorder(Controller):
    """Keeps the plan; records what it was shown."""

    def __init__(self, granularity="period"):
        self.granularity = granularity
        self.seen = []

    def plan(self, intent, view):
        self.seen.append((intent, view))
        return None


@pytest.fixture(scope="module")
def baseline(rfab, rl_trace):
    res = rf.simulate(rfab, rl_trace, t_ocs="10us", record_flows=True)
    assert res.flows.num_rows == res.run["flows"] > 0
    return res


def ready_ps(res, trace):
    """When each op's dependencies were done (0 for roots), from the ops table alone."""
    end = dict(zip(res.ops["op_id"].to_pylist(), res.ops["end_ps"].to_pylist(), strict=True))
    return [max((end[d] for d in deps), default=0) for deps in trace.table["deps"].to_pylist()]


def test_loop_stops_once_per_period_when_its_first_op_becomes_ready(rfab, rl_trace, baseline):
    rec = Recorder()
    res = rf.simulate(rfab, rl_trace, controller=rec, t_ocs="10us")
    periods = rl_trace.table["period"].to_numpy()
    assert res.run["controller_calls"] == len(rec.seen) == len(np.unique(periods))
    assert res.run["controller"] == "Recorder" and res.run["plan_changes"] == 0
    assert len({i.period for i, _ in rec.seen}) == len(rec.seen)
    ready = ready_ps(res, rl_trace)
    start, end = res.ops["start_ps"].to_numpy(), res.ops["end_ps"].to_numpy()
    for intent, view in rec.seen:
        mine = np.flatnonzero(periods == intent.period)
        # the boundary is the instant the period's first op became ready: no op of the period
        # was ready earlier, and one of them starts exactly slack later
        assert view.now_ps == min(ready[i] for i in mine)
        assert view.now_ps + view.slack_ps in set(start[mine].tolist())
        assert intent.period in view.active_periods
        # active: an op of the period was ready (deps done) and not finished; ops that change
        # state at this very instant may fall either side
        t = view.now_ps
        surely = {int(periods[i]) for i in range(len(start)) if ready[i] < t < end[i]}
        maybe = {int(periods[i]) for i in range(len(start)) if ready[i] <= t <= end[i]}
        assert surely <= set(view.active_periods) <= maybe
    # several periods run at once (gen and train overlap in this trace)
    assert max(len(v.active_periods) for _, v in rec.seen) >= 2


def test_op_granularity_stops_before_every_op(rfab, rl_trace):
    rec = Recorder("op")
    res = rf.simulate(rfab, rl_trace, controller=rec, t_ocs="10us")
    assert res.run["controller_calls"] == len(rec.seen) == rl_trace.num_ops
    ready = ready_ps(res, rl_trace)
    start = res.ops["start_ps"].to_numpy()
    rows = [int(i.ops[0]) for i, _ in rec.seen]
    assert sorted(rows) == list(range(rl_trace.num_ops))
    for (intent, view), row in zip(rec.seen, rows, strict=True):
        assert len(intent.ops) == 1
        assert view.now_ps == ready[row] and view.now_ps + view.slack_ps == start[row]


def test_a_controller_that_changes_nothing_changes_nothing(rfab, rl_trace, baseline):
    spec = rfab.to_spec()
    for ctl in (StaticController(spec.circuits), UniformController(), Recorder("op")):
        res = rf.simulate(rfab, rl_trace, controller=ctl, t_ocs="10us", record_flows=True)
        assert res.run["events"] == baseline.run["events"]
        assert res.run["plan_changes"] == 0 and len(res.circuits) == 0
        for col in ("src", "dst", "start_ps", "end_ps", "op_id"):
            assert np.array_equal(res.flows[col].to_numpy(), baseline.flows[col].to_numpy()), col
        assert res.ops.equals(baseline.ops)


def test_intent_bytes_are_what_the_executor_sends(rfab, rl_trace, baseline):
    rec = Recorder()
    rf.simulate(rfab, rl_trace, controller=rec, t_ocs="10us")
    # oracle: the run's own flows (baseline, no controller) summed per period and GPU pair
    period_of = dict(zip(baseline.ops["op_id"].to_pylist(), baseline.ops["period"].to_pylist(), strict=True))
    f = baseline.flows
    fp = np.array([period_of[o] for o in f["op_id"].to_pylist()])
    src, dst, size = (f[c].to_numpy() for c in ("src", "dst", "size_bytes"))
    kinds = rl_trace.table["kind"].to_pylist()
    for intent, _ in rec.seen:
        m = fp == intent.period
        want = {}
        for s, d, n in zip(src[m], dst[m], size[m], strict=True):
            if n:
                want[(int(s), int(d))] = want.get((int(s), int(d)), 0) + int(n)
        pairs = zip(intent.src.tolist(), intent.dst.tolist(), strict=True)
        got = dict(zip(pairs, intent.bytes.tolist(), strict=True))
        assert got == want, intent.period
        assert intent.demand(128).sum() == sum(want.values())
        rows = intent.ops
        assert np.array_equal(rows, np.flatnonzero(rl_trace.table["period"].to_numpy() == intent.period))
        assert intent.primitive in {kinds[r] for r in rows}
        assert intent.stage == rl_trace.table["stage"][int(rows[0])].as_py()
        ranks = {tuple(rl_trace.table["ranks"][int(r)].as_py()) for r in rows}
        assert {tuple(g.tolist()) for g in intent.groups} == ranks


# -- plans applied at a boundary: dark time and slack -------------------------------------------


@pytest.fixture(scope="module")
def dark_fabric():
    """RFabric at 128 GPUs started with no circuits: rail groups reach each other only once a
    plan lights the default circuits."""
    spec = rf.topologies.RFabric(128).to_spec()
    return spec, dataclasses.replace(spec, circuits=rf.spec.CircuitTable.empty())


class PlanAt(Controller):
    def __init__(self, plan, period):
        self.the_plan, self.period = plan, period

    def plan(self, intent, view):
        return self.the_plan if intent.period == self.period else None


def two_sends(gap_ps):
    # op 0 inside a server (NVLink); op 1, gap_ps after it, from rail group 0 to rail group 1
    return rf.traces.Trace.from_columns(
        op_id=[0, 1],
        stage=["train", "train"],
        phase=["a", "b"],
        kind=["send", "send"],
        ranks=[[0, 1], [0, 64]],
        size_bytes=[1024, 64 << 20],
        deps=[[], [0]],
        compute_ps=[0, gap_ps],
        period=[0, 1],
        gpus=128,
    )


def lit_at_period_1(dark_fabric, gap_us):
    """The dark fabric lit (t_ocs 50 us) at period 1's boundary, and the fabric lit from the
    start, running two_sends(gap_us)."""
    spec, dark = dark_fabric
    trace = two_sends(gap_us * US)
    res = rf.simulate(dark, trace, controller=PlanAt(spec.circuits, 1), t_ocs="50us")
    return res, rf.simulate(spec, trace, t_ocs="50us")


@pytest.mark.parametrize("gap_us", [100, 50])
def test_a_plan_with_slack_covering_t_ocs_costs_nothing(dark_fabric, gap_us):
    spec, _ = dark_fabric
    res, lit_from_start = lit_at_period_1(dark_fabric, gap_us)
    assert res.ops.equals(lit_from_start.ops)
    (change,) = res.circuits.to_pylist()
    assert change["added"] == len(spec.circuits) and change["period"] == 1
    assert change["time_ps"] == res.ops["end_ps"][0].as_py()  # the boundary: op 1 became ready
    assert res.run["held"] == 0 and res.run["plan_changes"] == 1


@pytest.mark.parametrize("gap_us", [10, 0])
def test_a_plan_with_slack_below_t_ocs_holds_traffic_until_light(dark_fabric, gap_us):
    res, lit_from_start = lit_at_period_1(dark_fabric, gap_us)
    applied = res.circuits["time_ps"][0].as_py()
    op1 = res.ops.to_pylist()[1]
    # frames wait for the light (the fixture asserts none crossed a dark circuit) and the
    # send takes longer than on circuits lit in time
    assert res.run["held"] > 0
    assert op1["end_ps"] > applied + 50 * US
    assert op1["time_ps"] > lit_from_start.ops["time_ps"][1].as_py()


# -- errors: named, and nothing applied ---------------------------------------------------------


class Raises(Controller):
    def plan(self, intent, view):
        if intent.period == 1:
            raise RuntimeError("no plan today")


class Returns(Controller):
    def __init__(self, value):
        self.value = value

    def plan(self, intent, view):
        return self.value(view) if intent.period == 1 else None


def bad_row(view):
    p = view.plan
    a = p.a.copy()
    a[3] = p.b[3]  # circuit 3 joins a link to itself
    return rf.spec.CircuitTable.build(p.ocs, a, p.b)


@pytest.mark.parametrize(
    "controller,match",
    [
        (Raises(), r"controller Raises, period 1: plan\(\) raised RuntimeError: no plan today"),
        (
            Returns(lambda v: "plan"),
            r"controller Returns, period 1: plan\(\) returned str, expected a CircuitTable",
        ),
        (Returns(bad_row), r"controller Returns, period 1: circuit 3 joins link \d+ to itself"),
    ],
)
def test_a_failing_controller_is_named_and_changes_nothing(dark_fabric, controller, match):
    spec, _ = dark_fabric
    sim = rf.Simulation(spec, two_sends(10 * US), controller=controller, t_ocs="50us")
    with pytest.raises(rf.SpecError, match=match):
        sim.run()
    # stopped at period 1's boundary with the plan, the log and the clock as they were
    res = sim.results()
    assert sim.now == res.ops["end_ps"][0].as_py() and res.ops["start_ps"][1].as_py() == -1
    assert same_plan(sim.current_circuits(), spec.circuits)
    assert len(res.circuits) == 0 and res.run["plan_changes"] == 0


def test_a_plan_using_a_failed_port_is_refused(dark_fabric):
    spec, _ = dark_fabric
    port = int(spec.circuits.a[5])
    sim = rf.Simulation(spec, two_sends(10 * US), controller=Returns(lambda v: spec.circuits), t_ocs="50us")
    sim.fail_link(port, at=0)
    named = rf"controller Returns, period 1: circuit 5 \(device \d+, links {port}-\d+\) uses failed"
    with pytest.raises(rf.SpecError, match=named):
        sim.run()
    assert len(sim.results().circuits) == 0
    # the view showed the port failed and not free
    rec = Recorder()
    sim = rf.Simulation(spec, two_sends(10 * US), controller=rec, t_ocs="50us")
    sim.fail_link(port, at=0)
    sim.run()
    view = rec.seen[1][1]
    i = int(np.flatnonzero(view.ocs_ports == port)[0])
    assert view.failed[i] and not view.free[i] and port in view.failed_ports
    assert view.lit.all() and len(view.plan) == len(spec.circuits)


@pytest.mark.parametrize("fabric", ["RFabric", "MixNet"])
def test_uniform_controller_masks_failed_ports_and_re_pairs_their_partners(fabric):
    spec = getattr(rf.topologies, fabric)(128).to_spec()
    port = int(spec.circuits.a[5])
    partner = int(spec.circuits.b[5])
    sim = rf.Simulation(spec, two_sends(10 * US), controller=UniformController(), t_ocs="50us")
    sim.fail_link(port, at=0)
    sim.run()
    res = sim.results()
    assert res.run["plan_changes"] == 1  # at the first boundary (the port is down from 0)
    plan = sim.current_circuits()
    used = set(plan.a.tolist()) | set(plan.b.tolist())
    assert port not in used
    assert len(plan) == len(spec.circuits) - 1 + (partner in used)
    assert res.run["ops_done"] == 2


def test_controller_needs_a_trace_and_a_plan_method(dark_fabric):
    spec, _ = dark_fabric
    flows = rf.Flows(np.arange(2), np.arange(2) + 8, 1 << 20)
    with pytest.raises(rf.SpecError, match="controller UniformController: a controller needs a trace"):
        rf.Simulation(spec, flows, controller=UniformController())

    class Bad(Controller):
        granularity = "stage"

        def plan(self, intent, view):
            return None

    with pytest.raises(rf.SpecError, match=r"controller Bad: granularity must be one of"):
        rf.Simulation(spec, two_sends(0), controller=Bad())

    class Prep(Controller):
        def prepare(self, trace, spec):
            return "not a trace"

    with pytest.raises(rf.SpecError, match=r"controller Prep: prepare\(\) returned str, expected a Trace"):
        rf.Simulation(spec, two_sends(0), controller=Prep())


def test_same_seed_same_plans(rfab, rl_trace):
    # a controller that changes the plan at every period: two runs agree exactly
    spec = rfab.to_spec()
    half = rf.spec.CircuitTable.build(spec.circuits.ocs[::2], spec.circuits.a[::2], spec.circuits.b[::2])

    class Flip(Controller):
        def plan(self, intent, view):
            return half if intent.period % 2 else spec.circuits

    a = rf.simulate(rfab, rl_trace, controller=Flip(), t_ocs="10us", seed=5, record_flows=True)
    b = rf.simulate(rfab, rl_trace, controller=Flip(), t_ocs="10us", seed=5, record_flows=True)
    assert a.run["plan_changes"] > 1
    assert a.circuits.equals(b.circuits) and a.ops.equals(b.ops)
    assert np.array_equal(a.flows["end_ps"].to_numpy(), b.flows["end_ps"].to_numpy())


def test_op_flows_dry_run_matches_each_ops_flows(rfab, rl_trace, baseline):
    # the executor's dry run of every op, before anything ran, against the run's own flows
    sim = rf.Simulation(rfab, rl_trace, t_ocs="10us")
    dry = sim.engine.op_flows(np.arange(rl_trace.num_ops))
    op_ids = rl_trace.table["op_id"].to_numpy()
    want = {}
    f = baseline.flows
    for o, s, d, n in zip(*(f[c].to_numpy() for c in ("op_id", "src", "dst", "size_bytes")), strict=True):
        if n:
            want[(int(o), int(s), int(d))] = want.get((int(o), int(s), int(d)), 0) + int(n)
    got = {
        (int(op_ids[o]), int(s), int(d)): int(n)
        for o, s, d, n in zip(dry["op"], dry["src"], dry["dst"], dry["size_bytes"], strict=True)
        if n
    }
    assert got == want
    assert sim.now == 0 and sim.engine.events_processed == 0  # the dry run touched nothing
    res = sim.run().results()
    assert res.ops.equals(baseline.ops)


def test_epochs_and_event_limits_go_through_boundaries(rfab, rl_trace, baseline, capsys):
    rec = Recorder()
    sim = rf.Simulation(rfab, rl_trace, controller=rec, t_ocs="10us")
    sim.run(max_events=1000)
    assert sim.engine.events_processed == 1000 and len(rec.seen) >= 1
    step = baseline.run["makespan_ps"] // 7
    while not sim.done:
        sim.run(until=sim.now + step)
    res = sim.results()
    assert res.ops.equals(baseline.ops) and res.run["controller_calls"] == len(rec.seen)
    assert len(rec.seen) == len(np.unique(rl_trace.table["period"].to_numpy()))
    res = rf.simulate(rfab, rl_trace, controller=Recorder(), t_ocs="10us", progress=True)
    assert res.ops.equals(baseline.ops) and "ops" in capsys.readouterr().err


def test_uniform_controller_joins_two_orphaned_ports_of_different_switches():
    spec = rf.topologies.RFabric(128).to_spec()
    c, src, dst = spec.circuits, spec.links.src, spec.links.dst

    def far(device, link):
        return int(dst[link] if src[link] == device else src[link])

    x = 5
    dev = int(c.ocs[x])
    ends = {far(dev, c.a[x]), far(dev, c.b[x])}
    same = [i for i in range(len(c)) if i != x and c.ocs[i] == dev]
    y = next(i for i in same if {far(dev, c.a[i]), far(dev, c.b[i])} == ends)
    # fail x's port at one switch and y's port at the other: their partners sit at different
    # switches, so the uniform plan joins them
    y_fail = int(c.a[y]) if far(dev, c.a[y]) == far(dev, c.b[x]) else int(c.b[y])
    y_orphan = int(c.b[y]) if y_fail == int(c.a[y]) else int(c.a[y])
    sim = rf.Simulation(spec, two_sends(10 * US), controller=UniformController(), t_ocs="50us")
    sim.fail_link(int(c.a[x]), at=0)
    sim.fail_link(y_fail, at=0)
    sim.run()
    plan = plan_key(sim.current_circuits()).tolist()
    assert [dev, *sorted((int(c.b[x]), y_orphan))] in plan
    assert len(plan) == len(c) - 1


def test_start_bounds_match_a_plain_walk_over_the_dependencies():
    # The executor's start_bounds (the look-ahead's bound), mid-run, against the recursion
    # written out in Python from the trace's own dependency lists and the op log.
    trace = tiny_rl_trace()
    sim = rf.Simulation(rf.topologies.FatTree(64), trace, backend="flow")
    sim.run("40ms")
    a = trace.arrays()
    n = trace.num_ops
    op_id = np.asarray(a["op_id"])
    off = np.asarray(a["deps_offsets"])
    deps = np.searchsorted(op_id, np.asarray(a["deps"]))
    comp = np.asarray(a["compute_ps"])
    log = sim.engine.op_log()
    start, end = log["start_ps"], log["end_ps"]
    assert (start >= 0).any() and (start < 0).any()  # mid-run
    dur = np.random.default_rng(5).integers(0, 10**9, n)
    now = int(sim.engine.now)
    memo = {}

    def bound(r):
        if r not in memo:
            if start[r] >= 0:
                memo[r] = int(start[r])
            else:
                ready = 0
                for d in deps[off[r] : off[r + 1]]:
                    e = end[d] if end[d] >= 0 else max(now, bound(d) + dur[d])
                    ready = max(ready, int(e))
                memo[r] = ready + int(comp[r])
        return memo[r]

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * n))
    rows = np.arange(n, dtype=np.uint32)
    got = sim.engine.start_bounds(rows, dur, now)
    assert got.tolist() == [bound(r) for r in range(n)]
    assert (got[start < 0] > now).any()  # some bound is ahead of now
    # the executor keeps its memo between calls (stamped per call): a second call with other
    # durations and a later now, on part of the rows, matches a fresh walk again
    dur = np.random.default_rng(6).integers(0, 10**10, n)
    now += 10**9
    memo.clear()
    part = rows[::3]
    assert sim.engine.start_bounds(part, dur, now).tolist() == [bound(int(r)) for r in part]


def test_views_read_once_per_boundary_equal_a_fresh_read():
    # the loop reads the circuits, their light, the failed and free ports and the active
    # periods once per boundary and plan applied; every view equals what the Simulation
    # says at that call, and no two views share an array (a controller may scribble on its)
    seen = []

    class Checking(rf.controllers.StageAwareController):
        def plan(self, intent, view):
            sim = self.sim
            now = int(sim.now)
            cur = sim.current_circuits()
            down = sim.down_links()
            failed = np.isin(view.ocs_ports, down) if down else np.zeros(len(view.ocs_ports), dtype=bool)
            used = np.zeros(sim.spec.num_links, dtype=bool)
            used[cur.a] = used[cur.b] = True
            assert view.now_ps == now and same_plan(view.plan, cur)
            assert np.array_equal(view.plan.ocs, cur.ocs) and np.array_equal(view.plan.a, cur.a)
            assert np.array_equal(view.plan.b, cur.b)
            assert np.array_equal(view.lit, sim.circuits_lit_at() <= now)
            assert np.array_equal(view.failed, failed)
            assert np.array_equal(view.free, ~used[view.ocs_ports] & ~failed)
            assert view.active_periods == tuple(int(p) for p in sim.engine.active_periods())
            for old in seen[-1:]:
                for a, b in ((old.lit, view.lit), (old.free, view.free), (old.failed, view.failed)):
                    assert not np.shares_memory(a, b)
                assert not np.shares_memory(old.plan.a, view.plan.a)
            seen.append(view)
            return super().plan(intent, view)

    # (forest="always" on PoDs of 128 GPUs: the forest's waves re-plan the circuits, one of
    # them mid-boundary; in PoDs of 64 no plan lands mid-boundary once each shard's sends
    # wait only for its holder)
    ctl = Checking(forest="always")
    fab = rf.topologies.RFabric(256, pod_servers=16)
    sim = rf.Simulation(fab, weight_sync_trace(192), controller=ctl, backend="flow", t_ocs="1ms")
    ctl.sim = sim
    sim.run()
    at = [v.now_ps for v in seen]
    assert len(at) > len(set(at))  # boundaries with more than one call
    plans = [(v.now_ps, plan_key(v.plan).tobytes()) for v in seen]
    assert any(
        a[0] == b[0] and a[1] != b[1] for a, b in zip(plans[:-1], plans[1:], strict=True)
    )  # applied mid-boundary


def test_the_loop_uses_only_the_simulations_public_surface():
    """controllers/loop.py reads no private member of the Simulation it drives (issue 24)."""
    import ast
    import inspect

    import rfabric.controllers.loop as loop

    tree = ast.parse(inspect.getsource(loop))
    private = sorted(
        {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and (
                (isinstance(node.value, ast.Name) and node.value.id == "sim")
                or (isinstance(node.value, ast.Attribute) and node.value.attr == "sim")
            )
        }
    )
    assert private == []
    for name in ("check_plan", "apply_circuits_now", "down_links", "circuits_lit_at", "current_circuits"):
        assert callable(getattr(rf.Simulation, name)) and getattr(rf.Simulation, name).__doc__
