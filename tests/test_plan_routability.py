"""Every circuit plan the stage-aware controller issues keeps the traffic routable.

The oracle (tests/plan_oracle.py) knows nothing of the controller: a networkx graph of the
spec's switches, electrical links and the plan's circuits, and the switches a GPU pair's
traffic leaves and enters by (PXN included). Checked on the run that used to end with
stranded traffic (issue 23: RFabric 256 without PXN, radix 8, ``t_ocs`` 1 ms: a train period
planned ahead re-planned PoD 0 into ToR-ToR circuits only while response-stream sends to it,
not ready at that instant, were still to come) and on the default configurations.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import tiny_rl_trace
from plan_oracle import PlanOracle

import rfabric as rf
from rfabric.controllers import StageAwareController


class Recording(StageAwareController):
    """Records every call: the intent, the view and the plan returned."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = []

    def plan(self, intent, view):
        out = super().plan(intent, view)
        self.calls.append((intent, view, out))
        return out


CASES = {
    # the run: finished with unroutable traffic before the fix
    "nopxn-radix8-256": (
        dict(gpus=256, link="200Gbps", pxn=False, radix=8),
        dict(train_gpus=128, gen_gpus=128, train=dict(tp=4, pp=1, dp=32), global_batch=64),
        "1ms",
        "packet",
    ),
    # the default fabric at two PoDs, with and without PXN
    "default-256": (
        dict(gpus=256),
        dict(train_gpus=128, gen_gpus=128, train=dict(tp=4, pp=1, dp=32), global_batch=64),
        "1ms",
        "flow",
    ),
    "nopxn-256": (
        dict(gpus=256, pxn=False),
        dict(train_gpus=128, gen_gpus=128, train=dict(tp=8, pp=2, dp=8), pod_gpus=64),
        "0us",
        "flow",
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def run(request):
    fab, trace_args, t_ocs, backend = CASES[request.param]
    top = rf.topologies.RFabric(**fab)
    ctl = Recording()
    res = rf.simulate(
        top, tiny_rl_trace(**trace_args), controller=ctl, t_ocs=t_ocs, backend=backend, record_flows=True
    )
    return request.param, top.to_spec(), ctl, res


def test_the_run_finishes_and_delivers_every_byte(run):
    name, _, ctl, res = run
    assert not res.run["unroutable"] and not res.run["deadlock"], name
    assert res.run["makespan_ps"] > 0 and res.complete
    assert (res.ops["end_ps"].to_numpy() >= 0).all()
    fl = res.flows
    size, got = fl["size_bytes"].to_numpy(), fl["delivered_bytes"].to_numpy()
    assert np.array_equal(size, got)
    # each op delivered exactly the bytes of its flows
    per_op = np.bincount(fl["op_id"].to_numpy(), weights=size, minlength=len(res.ops))
    op_ids = res.ops["op_id"].to_numpy()
    assert np.array_equal(per_op[op_ids].astype(np.int64), res.ops["delivered_bytes"].to_numpy())
    assert [d for d in ctl.log if d.action == "commit"], "the controller never planned: nothing checked"


def test_every_plan_keeps_the_running_periods_routable(run):
    # at every commit: the GPU pairs of the period planned and of every period running then
    name, spec, ctl, _ = run
    orc = PlanOracle(spec)
    seen = {}
    checked = 0
    for intent, view, out in ctl.calls:
        seen.setdefault(intent.period, intent)
        if out is None:
            continue
        for p in {intent.period, *map(int, view.active_periods)}:
            it = seen.get(p)
            if it is None or not len(it.src):
                continue
            assert not orc.apart(out, it.src, it.dst, view.failed_ports), (name, intent.period, p)
            checked += 1
    assert checked


def test_every_flow_had_a_route_under_every_plan_in_force_while_it_ran(run):
    # the plans in force, from the initial one to the last commit, against the flows the run
    # actually sent: a flow alive while a plan was in force must be routable on it
    name, spec, ctl, res = run
    orc = PlanOracle(spec)
    plans = [(0, spec.circuits)] + [(v.now_ps, out) for _, v, out in ctl.calls if out is not None]
    fl = res.flows
    start, end = fl["start_ps"].to_numpy(), fl["end_ps"].to_numpy()
    src, dst = fl["src"].to_numpy(), fl["dst"].to_numpy()
    for i, (t0, plan) in enumerate(plans):
        t1 = plans[i + 1][0] if i + 1 < len(plans) else np.iinfo(np.int64).max
        live = (start < t1) & (end > t0)
        pairs = np.unique(src[live] * spec.num_gpus + dst[live])
        apart = orc.apart(plan, pairs // spec.num_gpus, pairs % spec.num_gpus)
        assert not apart, (name, i, t0, apart[:3])


@pytest.mark.parametrize(
    "fab",
    [
        dict(gpus=256, pxn=False, radix=8),
        dict(gpus=512, radix=8),
        dict(gpus=1024, pxn=False),
        dict(gpus=1024, pod_servers=4),
        dict(gpus=256, core_ports=16),
    ],
)
def test_the_initial_plan_joins_every_group(fab):
    # the induction's base: the guard keeps what the plan in force joins, so every group
    # must start joined (with PXN each rail's ToRs, else all); checked with the oracle on
    # the switches of GPU NICs, pairs of one rail (PXN) or any two GPUs of other servers
    spec = rf.topologies.RFabric(**fab).to_spec()
    orc = PlanOracle(spec)
    g = spec.num_gpus
    src = np.arange(g)
    for shift in (8, g // 2, g - 8):
        assert not orc.apart(spec.circuits, src, (src + shift) % g)
