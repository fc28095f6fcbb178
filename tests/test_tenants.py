"""Circuits for several jobs: the stage-aware controller's tenant policy (issue 26 item 6).

The fabric: RFabric 32 (2-GPU servers, radix 8), two PoDs of two rail groups each, 8 core
ports per PoD. Job ``a`` runs on rail group 0 of both PoDs, job ``b`` on rail group 1: they
share no ToR, only each PoD's core ports, and each of their periods sends across the PoDs
(three 4 MiB sends on one rail), so every period wants core circuits. ``b`` starts 15 us after
``a``: their periods alternate and overlap.

Oracles: the composed trace's period -> job map (the log and ``res.circuits`` must name each
plan's job by it); core ports counted per job from the circuit tables themselves (a lift row
joins a ToR port to a core port; the ToR's job by the placement, not the controller's
bookkeeping); which periods run, from the op log; a job that has priority runs exactly as it
does alone; and runs where no pool is contested (one job; jobs on separate PoDs) equal the
policy-free ``tenants="shared"``.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric.controllers import StageAwareController
from rfabric.controllers.layout import RFabricLayout

CORE_PORTS = 8  # per PoD (RFabric's default: half the PoD's 16 ToR uplinks)


def _fabric():
    return rf.topologies.RFabric(32, gpus_per_server=2, radix=8, pod_servers=8)


A_GPUS = [g for g in range(32) if (g // 2) % 8 < 4]  # rail group 0 of each PoD
B_GPUS = [g for g in range(32) if (g // 2) % 8 >= 4]  # rail group 1


def _sends(periods: int):
    """Per period three sends on one rail (rails alternate), each period after the last: rank
    ``i`` to ``i + 8`` (directions alternate every two periods). Placed on ``A_GPUS`` or
    ``B_GPUS``, ranks 0..7 are in PoD 0 and 8..15 in PoD 1; on GPUs 0..15, 0..7 are rail group 0
    of PoD 0 and 8..15 its rail group 1."""
    ids, ranks, deps, per = [], [], [], []
    prev: list[int] = []
    for k in range(periods):
        cur = []
        for s in range(3):
            i = 2 * s + k % 2
            j = i + 8
            ids.append(len(ids))
            cur.append(ids[-1])
            ranks.append([i, j] if k % 4 < 2 else [j, i])
            deps.append(prev)
            per.append(k)
        prev = cur
    return rf.traces.Trace.from_columns(
        op_id=ids,
        stage="train",
        phase="fwd",
        kind="send",
        ranks=ranks,
        size_bytes="4MiB",
        deps=deps,
        compute_ps="30us",
        period=per,
        source="test_tenants",
    )


class Recorder(StageAwareController):
    """The stage-aware controller, keeping every plan it returns with its intent and view."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.plans = []
        self.seen: dict[int, str] = {}  # period -> job, of every call so far

    def plan(self, intent, view):
        p = super().plan(intent, view)
        if p is not None:
            self.plans.append((intent, view, p, dict(self.seen)))
        self.seen[intent.period] = intent.job
        return p


def _run(tenants, jobs=("a", "b"), trace=None):
    trace = trace if trace is not None else _sends(6)
    placed = {
        "a": rf.Job(trace, gpus=A_GPUS, name="a"),
        "b": rf.Job(trace, gpus=B_GPUS, name="b", start="15us"),
    }
    ctl = Recorder(tenants=tenants)
    res = rf.simulate(_fabric(), [placed[j] for j in jobs], backend="flow", controller=ctl, t_ocs="1us")
    assert res.jobs["complete"].to_pylist() == [True] * len(jobs)
    return res, ctl


@pytest.fixture(scope="module")
def lay():
    return RFabricLayout(_fabric().to_spec())


def _tor_job(lay):
    out = {}
    for name, gpus in (("a", A_GPUS), ("b", B_GPUS)):
        for t in np.unique(lay.gpu_tor[gpus]).tolist():
            out[t] = name
    assert len(out) == lay.num_tors  # the jobs share no ToR
    return out


def _core_ports(plan, lay) -> dict[tuple[int, str], int]:
    """(PoD, job) -> core ports its ToRs hold in ``plan`` by circuits allocated for demand:
    lift rows (an OCS-Agg circuit joining a ToR uplink and a core port) that are not rows of
    the fabric's default (uniform) plan, which the controller puts back on leftover ports and
    counts as no job's; the ToR's job by the placement."""
    tor_job = _tor_job(lay)
    spec = lay.spec
    default = {
        (o, min(x, y), max(x, y))
        for o, x, y in zip(
            spec.circuits.ocs.tolist(), spec.circuits.a.tolist(), spec.circuits.b.tolist(), strict=True
        )
    }
    out: dict[tuple[int, str], int] = {}
    for o, x, y in zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True):
        if o not in lay.agg_pod or (o, min(x, y), max(x, y)) in default:
            continue
        ends = sorted([lay.port_of_link[x], lay.port_of_link[y]])  # ("core", PoD) < ("tor", ToR)
        if [e[0] for e in ends] == ["core", "tor"]:
            key = (ends[0][1], tor_job[ends[1][1]])
            out[key] = out.get(key, 0) + 1
    return out


def _period_job(res) -> dict[int, str]:
    per, job = res.ops["period"].to_pylist(), res.ops["job"].to_pylist()
    out: dict[int, str] = {}
    for p, j in zip(per, job, strict=True):
        assert out.setdefault(p, j) == j  # a period is one job's
    return out


def _running(res, job: str, t: int) -> bool:
    """Whether ``job`` has a period sending at ``t`` (the op log: a period from its first
    op's start to its last op's end)."""
    ops = res.ops.filter(pc.equal(res.ops["job"], job))
    per = ops["period"].to_numpy()
    start, end = ops["start_ps"].to_numpy(), ops["end_ps"].to_numpy()
    return any(start[per == p].min() <= t < end[per == p].max() for p in np.unique(per))


def test_every_period_of_both_jobs_gets_a_plan_and_the_log_names_its_job():
    res, ctl = _run("fair")
    job_of = _period_job(res)
    assert sorted(set(job_of.values())) == ["a", "b"] and len(job_of) == 12
    # every period of both jobs is planned for: a commit each (they alternate rails)
    committed = [d for d in ctl.log if d.action == "commit"]
    assert sorted(d.period for d in committed) == sorted(job_of)
    # every entry of the decision log names the job of its period
    assert all(d.job == job_of[d.period] for d in ctl.log)
    # the commits interleave the jobs (their periods alternate on the same PoDs)
    seq = [d.job for d in committed]
    assert sum(x != y for x, y in zip(seq, seq[1:], strict=False)) >= 6
    # res.circuits: each plan's job is its period's
    rows = res.circuits.to_pylist()
    assert rows and all(r["job"] == job_of[r["period"]] for r in rows)
    assert {r["job"] for r in rows} == {"a", "b"}
    # an intent carries its period's job
    assert all(intent.job == job_of[intent.period] for intent, _, _, _ in ctl.plans)


@pytest.mark.parametrize("tenants, share", [("fair", {"a": 4, "b": 4}), ({"a": 3, "b": 1}, {"a": 6, "b": 2})])
def test_no_job_holds_more_than_its_share_while_the_other_runs(lay, tenants, share):
    res, ctl = _run(tenants)
    contested = 0
    for intent, view, plan, _ in ctl.plans:
        other = "b" if intent.job == "a" else "a"
        if not _running(res, other, view.now_ps):
            continue
        contested += 1
        before, after = _core_ports(view.plan, lay), _core_ports(plan, lay)
        for pod in range(lay.pods):
            # the planner holds at most its share of the PoD's core ports ...
            assert after.get((pod, intent.job), 0) <= CORE_PORTS - share[other]
            # ... and leaves the other what it held, up to the other's share
            assert after.get((pod, other), 0) >= min(before.get((pod, other), 0), share[other])
    assert contested >= 4  # the check did meet plans made while both jobs ran


def test_without_a_policy_one_job_takes_the_other_jobs_circuits(lay):
    # the counter-case the policy exists for: "shared" plans let a job's period take the
    # circuits the other job's running period holds, below its fair share
    res, ctl = _run("shared")
    taken = []
    for intent, view, plan, _ in ctl.plans:
        other = "b" if intent.job == "a" else "a"
        if _running(res, other, view.now_ps):
            before, after = _core_ports(view.plan, lay), _core_ports(plan, lay)
            for pod in range(lay.pods):
                if after.get((pod, other), 0) < min(before.get((pod, other), 0), CORE_PORTS // 2):
                    taken.append((intent.period, pod))
    assert taken


def test_priority_gives_the_first_job_its_circuits_as_if_alone(lay):
    both, ctl = _run(["a", "b"])
    alone, _ = _run(["a", "b"], jobs=("a",))
    a = both.ops.filter(pc.equal(both.ops["job"], "a"))
    for col in ("start_ps", "end_ps"):
        assert a[col].to_pylist() == alone.ops[col].to_pylist()
    # and b's plans never take a core port a holds while a runs
    for intent, view, plan, _ in ctl.plans:
        if intent.job == "b" and _running(both, "a", view.now_ps):
            for pod in range(lay.pods):
                assert _core_ports(plan, lay).get((pod, "b"), 0) <= CORE_PORTS - _core_ports(
                    view.plan, lay
                ).get((pod, "a"), 0)
    assert {d.job for d in ctl.log if d.action == "commit"} == {"a", "b"}


def _same_run(x, y):
    for name in ("ops", "circuits"):
        assert getattr(x, name).equals(getattr(y, name)), name


def test_one_job_runs_exactly_as_without_a_policy():
    fab = rf.topologies.RFabric(64, pod_servers=2)  # four PoDs: the plans change circuits
    trace = tiny_rl_trace()
    runs = {}
    for tenants in ("fair", "shared", ["job0"]):
        ctl = StageAwareController(tenants=tenants)
        res = rf.simulate(fab, trace, backend="flow", controller=ctl, t_ocs="1us")
        runs[str(tenants)] = (res, ctl)
    base, base_ctl = runs["shared"]
    assert base.circuits.num_rows > 0 and set(base.circuits["job"].to_pylist()) == {"job0"}
    for key in ("fair", "['job0']"):
        res, ctl = runs[key]
        _same_run(res, base)
        assert ctl.log == base_ctl.log


def test_jobs_on_separate_pods_run_as_without_a_policy():
    trace = _sends(4)  # placed so that each job's sends stay in one PoD
    spec_gpus = {"a": list(range(16)), "b": list(range(16, 32))}
    out = {}
    for tenants in ("fair", "shared"):
        ctl = StageAwareController(tenants=tenants)
        jobs = [rf.Job(trace, gpus=g, name=n, start="15us" if n == "b" else 0) for n, g in spec_gpus.items()]
        out[tenants] = rf.simulate(_fabric(), jobs, backend="flow", controller=ctl, t_ocs="1us")
    assert out["fair"].circuits.num_rows > 0
    _same_run(out["fair"], out["shared"])


@pytest.mark.parametrize(
    "tenants, match",
    [
        ("unfair", "tenants must be 'fair', 'shared'"),
        ({"a": 0, "b": 1}, "weight of job 'a' must be a positive number"),
        ({}, "dict of job weights is empty"),
        (["a", "a"], "job 'a' is listed twice"),
        (3, "got int"),
    ],
)
def test_bad_tenants_are_refused(tenants, match):
    with pytest.raises(rf.SpecError, match=match):
        StageAwareController(tenants=tenants)


def test_weights_take_any_real_number():
    ctl = StageAwareController(tenants={"a": np.int64(2), "b": 0.5})
    assert ctl.tenants.shares(10, "a", ["b"], {}) == {"b": 2}  # floor(10 * 0.5 / 2.5)
    assert ctl.tenants.shares(10, "b", ["a"], {}) == {"a": 8}
    prio = StageAwareController(tenants=["a", "b"]).tenants
    assert prio.shares(8, "b", ["a"], {"a": 3}) == {"a": 3}  # higher: all it holds
    assert prio.shares(8, "a", ["b"], {"b": 3}) == {}  # lower: nothing


@pytest.mark.parametrize(
    "tenants, match", [({"a": 1}, "no weight to job 'b'"), (["a"], "does not rank job 'b'")]
)
def test_a_policy_must_name_every_job(tenants, match):
    with pytest.raises(rf.SpecError, match=r"period \d+ of job 'b'.*" + match):
        _run(tenants)


# two jobs under the same ToRs: a on servers 0-1, b on servers 2-3 of rail group 0 of each PoD
SHARED_A = [g for g in range(32) if g // 2 in (0, 1, 8, 9)]
SHARED_B = [g for g in range(32) if g // 2 in (2, 3, 10, 11)]


def _shared_tor_sends(periods: int):
    """Per period two sends on one rail (rails alternate), rank ``i`` (PoD 0) to ``i + 4``
    (PoD 1), directions alternating every two periods."""
    ids, ranks, deps, per = [], [], [], []
    prev: list[int] = []
    for k in range(periods):
        cur = []
        for s in range(2):
            i = 2 * s + k % 2
            ids.append(len(ids))
            cur.append(ids[-1])
            ranks.append([i, i + 4] if k % 4 < 2 else [i + 4, i])
            deps.append(prev)
            per.append(k)
        prev = cur
    return rf.traces.Trace.from_columns(
        op_id=ids,
        stage="train",
        phase="fwd",
        kind="send",
        ranks=ranks,
        size_bytes="4MiB",
        deps=deps,
        compute_ps="30us",
        period=per,
        source="test_tenants",
    )


def _rows(plan) -> set:
    return {
        (o, min(x, y), max(x, y))
        for o, x, y in zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True)
    }


def _uplink_losses(tenants, lay):
    """Per plan made while the other job runs and each ToR both jobs use: whether the plan's
    period sends through the ToR, the uplink circuits the other job's last plan added (rows
    not in the plan before it, nor default channels) still in place before this plan, and
    those this plan keeps."""
    t = _shared_tor_sends(6)
    jobs = [rf.Job(t, gpus=SHARED_A, name="a"), rf.Job(t, gpus=SHARED_B, name="b", start="15us")]
    # every feasible plan commits (the gain check finds none faster on so little demand)
    ctl = Recorder(tenants=tenants, check_gain=False)
    res = rf.simulate(_fabric(), jobs, backend="flow", controller=ctl, t_ocs="1us")
    assert res.jobs["complete"].to_pylist() == [True, True]
    shared = set(lay.gpu_tor[SHARED_A].tolist()) & set(lay.gpu_tor[SHARED_B].tolist())
    assert len(shared) == 4
    spec = lay.spec
    default = _rows(spec.circuits)
    uplinks = {t: set(lay.tor_port_link[lay.tor_port_tor == t].tolist()) for t in shared}
    last_added: dict[str, set] = {}
    out = []
    for intent, view, plan, seen in ctl.plans:
        other = "b" if intent.job == "a" else "a"
        # the other job has a period running or ready (the engine's view.active_periods)
        # that the controller was called for before
        if other in last_added and any(seen.get(p) == other for p in view.active_periods):
            before, after = _rows(view.plan), _rows(plan)
            used = set(lay.gpu_tor[intent.src].tolist()) | set(lay.gpu_tor[intent.dst].tolist())
            for tor, links in uplinks.items():
                mine = {r for r in last_added[other] & before if r[1] in links or r[2] in links}
                out.append((tor in used, len(mine), len(mine & after)))
        last_added[intent.job] = _rows(plan) - _rows(view.plan) - default
    return out


def test_jobs_under_one_tor_keep_their_share_of_its_uplinks(lay):
    fair = _uplink_losses("fair", lay)
    assert any(used and before >= 2 for used, before, _ in fair)
    # each ToR has 4 uplinks, 2 each: a plan leaves the other running job 2 of its circuits
    # there, and takes back those beyond 2 on the ToRs its own period sends through
    assert all(kept >= min(before, 2) for _, before, kept in fair)
    assert all(kept <= 2 for used, _, kept in fair if used)
