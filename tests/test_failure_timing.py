"""A link change at the instant flows start applies to them, on both backends and whichever
was scheduled first (docs/how-to/failures.md: routing avoids a failed link from that instant).

The packet backend used to start a flow scheduled before a failure at the same time on the
old topology: with GPU 3's NIC failing at T and flows from GPU 3 starting at T, the first
frame went out of the dead NIC and was lost there (one frame on the failed link, the flow
one frame time late), where a failure 1 ps earlier, or the flow backend, sent it over NVLink
to another NIC. The oracles: the same run with the change 1 ps earlier (which no ordering
question touches), the run without the change where the changes cancel out, the flow
backend, and conservation (every byte delivered, none on the failed link)."""

import numpy as np
import pytest

import rfabric as rf

MB = 10**6
US = 1_000_000
MTU = 9216
T = 10 * US
GPU = 3


def _fabric(name):
    return rf.topologies.FatTree(64) if name == "FatTree" else rf.topologies.RailOptimized(32)


def _flows():
    # from and to GPU 3, across servers (RailOptimized(32): with PXN, on other rails too)
    return rf.Flows([GPU, GPU, 20, 12], [20, 29, GPU, GPU], [2 * MB] * 4, [T] * 4)


def _run(fab, flows, backend, changes, changes_first=False):
    """Results of ``flows`` with link changes ``[(link, at, up), ...]``, scheduled after the
    flows (as Simulation(fab, flows) then set_link_state does) or, ``changes_first``, before
    them (on the engine directly: the public API adds the flows when it is built)."""
    sim = rf.Simulation(fab, flows, backend=backend)
    if changes_first:
        sim._engine = type(sim.engine)(sim.spec.arrays(), sim.config.to_engine(sim.spec.routing))
    for link, at, up in changes:
        sim.set_link_state(link, at, up)
    if changes_first:
        sim.engine.add_flows(
            flows.src.astype(np.uint32), flows.dst.astype(np.uint32), flows.size_bytes, flows.start_ps
        )
    sim.run()
    res = sim.results()
    assert res.complete
    # conservation: every byte of every flow delivered
    assert res.flows["delivered_bytes"].to_pylist() == flows.size_bytes.tolist()
    return res


def _link_bytes(res):
    """{(link, direction): bytes} of the links that carried any."""
    t = res.links
    rows = zip(t["link_id"].to_numpy(), t["direction"].to_numpy(), t["bytes"].to_numpy(), strict=True)
    return {(int(k), int(d)): float(b) for k, d, b in rows if b > 0}


def _same(a, b):
    """Two runs of one backend moved every byte on the same links at the same times."""
    assert _link_bytes(a) == _link_bytes(b)
    assert a.fct_ps.tolist() == b.fct_ps.tolist()


def _on(res, link):
    got = _link_bytes(res)
    return got.get((link, 0), 0) + got.get((link, 1), 0)


@pytest.mark.parametrize("fabric", ["FatTree", "RailOptimized"])
@pytest.mark.parametrize("changes_first", [False, True])
def test_nic_failing_as_flows_start_is_avoided_from_their_first_frame(fabric, changes_first):
    fab = _fabric(fabric)
    nic = int(fab.to_spec().nic_link(GPU))
    flows = _flows()
    early = _run(fab, flows, "packet", [(nic, T - 1, False)])
    at_t = _run(fab, flows, "packet", [(nic, T, False)], changes_first)
    assert _on(at_t, nic) == 0  # (was one frame, lost, on FatTree)
    _same(at_t, early)
    # the flow backend routes around it too, over the same links
    fluid = _run(fab, flows, "flow", [(nic, T, False)], changes_first)
    assert _on(fluid, nic) == 0
    got, want = _link_bytes(fluid), _link_bytes(at_t)
    assert got.keys() == want.keys()
    for k, b in want.items():
        assert got[k] == pytest.approx(b, abs=2 * MTU), k
    _same(fluid, _run(fab, flows, "flow", [(nic, T - 1, False)]))


def test_a_failure_after_the_start_still_catches_the_first_frame():
    # 1 ps after the start the first frame is on the wire: it is lost there and sent again
    # (the boundary is the instant itself, not a tolerance)
    fab = _fabric("FatTree")
    nic = int(fab.to_spec().nic_link(GPU))
    late = _run(fab, _flows(), "packet", [(nic, T + 1, False)])
    assert _on(late, nic) == MTU


@pytest.mark.parametrize("changes_first", [False, True])
def test_nic_repaired_as_flows_start_is_used_from_their_first_frame(changes_first):
    # Failed from 0 and repaired at T: no frame of a flow starting at T crosses NVLink to
    # another NIC (before the fix the first one did).
    fab = _fabric("FatTree")
    spec = fab.to_spec()
    nic = int(spec.nic_link(GPU))
    flows = _flows()
    healthy = _run(fab, flows, "packet", [])
    repaired = _run(fab, flows, "packet", [(nic, 0, False), (nic, T, True)], changes_first)
    _same(repaired, healthy)
    _same(repaired, _run(fab, flows, "packet", [(nic, 0, False), (nic, T - 1, True)]))
    nvlinks = {int(k) for k in spec.links_of(int(spec.gpu_nodes[GPU]))} - {nic}
    assert nvlinks and not any(_on(repaired, k) for k in nvlinks)


def test_changes_at_one_instant_go_by_call_order():
    # Down then up at T leaves the NIC up for the flows starting at T (as no change does);
    # up then down leaves it down (as a failure at T does). Simulation._link_down_at, which
    # plans are checked against, reads the changes the same way.
    fab = _fabric("FatTree")
    nic = int(fab.to_spec().nic_link(GPU))
    flows = _flows()
    flap = _run(fab, flows, "packet", [(nic, T, False), (nic, T, True)])
    _same(flap, _run(fab, flows, "packet", []))
    down = _run(fab, flows, "packet", [(nic, T, True), (nic, T, False)])
    _same(down, _run(fab, flows, "packet", [(nic, T, False)]))
    assert _on(down, nic) == 0
    sim = rf.Simulation(fab, flows)
    sim.set_link_state(nic, T, False)
    sim.set_link_state(nic, T, True)
    assert not sim._link_down_at(nic, T)


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_switch_link_failing_as_flows_start_carries_nothing(backend):
    # The most loaded ToR-aggregation link of the healthy run fails as the flows start.
    fab = _fabric("FatTree")
    spec = fab.to_spec()
    flows = _flows()
    kinds = spec.nodes.kind_names()
    healthy = _link_bytes(_run(fab, flows, backend, []))
    link = max(
        (b, k)
        for (k, _), b in healthy.items()
        if kinds[spec.links.src[k]] == "eps" and kinds[spec.links.dst[k]] == "eps"
    )[1]
    at_t = _run(fab, flows, backend, [(link, T, False)])
    assert _on(at_t, link) == 0
    _same(at_t, _run(fab, flows, backend, [(link, T - 1, False)]))


def _topoopt_plans():
    """TopoOpt(32) (its NICs end at optical devices, so a circuit is a flow's first hop), its
    plan, that plan without GPU 3's circuit, and GPU 3's NIC link."""
    from rfabric.spec import CircuitTable

    fab = rf.topologies.TopoOpt(32)
    spec = fab.to_spec()
    plan, nic = spec.circuits, int(spec.nic_link(GPU))
    keep = (plan.a != nic) & (plan.b != nic)
    assert not keep.all()
    return fab, plan, CircuitTable.build(plan.ocs[keep], plan.a[keep], plan.b[keep]), nic


def _run_plans(fab, flows, backend, plans):
    """As _run, with circuit plans ``[(plan, at, t_ocs), ...]`` applied after the flows."""
    sim = rf.Simulation(fab, flows, backend=backend)
    for plan, at, t_ocs in plans:
        sim.apply_circuits(plan, at=at, t_ocs=t_ocs)
    sim.run()
    res = sim.results()
    assert res.complete
    assert res.flows["delivered_bytes"].to_pylist() == flows.size_bytes.tolist()
    return res


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_circuit_taken_down_as_flows_start_carries_nothing(backend):
    # A plan without GPU 3's circuit takes effect as its flows start: their first frames
    # leave over NVLink, as with the plan 1 ps earlier (before, the first went into the
    # circuit as it went dark and was lost).
    fab, _, without, nic = _topoopt_plans()
    flows = _flows()
    at_t = _run_plans(fab, flows, backend, [(without, T, "0ps")])
    assert _on(at_t, nic) == 0
    _same(at_t, _run_plans(fab, flows, backend, [(without, T - 1, "0ps")]))


def test_circuit_lit_as_flows_start_carries_their_first_frame():
    # GPU 3's circuit comes back (its dark time ends) as its flows start: the first frame
    # takes it, as when it is lit 1 ps earlier (before, that frame went the long way round).
    fab, plan, without, nic = _topoopt_plans()
    flows = _flows()

    def lit_at(t):
        return _run_plans(fab, flows, "packet", [(without, 0, "0ps"), (plan, "1ps", t - 1)])

    at_t = lit_at(T)
    _same(at_t, lit_at(T - 1))
    assert _on(at_t, nic) > 0


def test_a_change_made_after_the_run_reached_its_instant_is_like_a_later_one():
    # run(until=T) runs the events at T: the flows starting at T have sent their first
    # frame, so a failure at T scheduled now finds it on the wire, as a failure at T + 1 ps
    # does (docs/how-to/failures.md); stopping 1 ps earlier leaves the instant whole.
    fab = _fabric("FatTree")
    nic = int(fab.to_spec().nic_link(GPU))
    flows = _flows()
    runs = {}
    for stop in (T - 1, T):
        sim = rf.Simulation(fab, flows)
        sim.run(until=stop)
        sim.fail_nic(GPU, at=T)
        sim.run()
        runs[stop] = sim.results()
    _same(runs[T - 1], _run(fab, flows, "packet", [(nic, T, False)]))
    assert _on(runs[T], nic) == MTU
    assert runs[T].flows["delivered_bytes"].to_pylist() == flows.size_bytes.tolist()
