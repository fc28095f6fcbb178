"""rf.Forwarding: the engine's forwarding layer without a simulation gives the packet
engine's paths exactly, on every fabric, after failures and after circuit changes."""

import numpy as np
import pytest

import rfabric as rf

FABRICS = {
    "FT": lambda g: rf.topologies.FatTree(g),
    "FT-OS": lambda g: rf.topologies.FatTree(g, oversubscription=3),
    "RO": lambda g: rf.topologies.RailOptimized(g),
    "TopoOpt": lambda g: rf.topologies.TopoOpt(g),
    "MixNet": lambda g: rf.topologies.MixNet(g),
    "RFabric": lambda g: rf.topologies.RFabric(g),
}

LATER = 10**12  # the probe flow starts long after the changes: queues stay empty


def _probe_sim(fab):
    return rf.Simulation(fab, rf.Flows([0], [1], [1], start_ps=[LATER]))


def _pairs(n, count, seed):
    rng = np.random.default_rng(seed)
    out = [(int(a), int(b), int(a * 131 + b)) for a, b in rng.integers(0, n, size=(count, 2)) if a != b]
    return out + [(0, n - 1, 0), (n - 1, 0, 7), (0, 1, 3)]


def _assert_same_paths(fwd, sim, pairs):
    for src, dst, h in pairs:
        assert fwd.ports(src, dst, h).tolist() == sim.engine.trace_path(src, dst, h), (src, dst, h)


@pytest.mark.parametrize("name", list(FABRICS))
def test_paths_equal_the_packet_engines(name):
    fab = FABRICS[name](128)
    fwd, sim = rf.Forwarding(fab), _probe_sim(fab)
    _assert_same_paths(fwd, sim, _pairs(128, 600, 1))
    latency, rate = fwd.path_cost(0, 127)
    assert latency > 0 and rate > 0


@pytest.mark.parametrize("name", ["FT", "RO", "RFabric", "TopoOpt"])
def test_paths_equal_after_a_link_and_a_nic_failure(name):
    fab = FABRICS[name](128)
    fwd, sim = rf.Forwarding(fab), _probe_sim(fab)
    # a link in the middle of a path that crosses the fabric, and a NIC
    link = int(fwd.path(0, 127)[len(fwd.path(0, 127)) // 2])
    nic = fwd.spec.nic_link(3)
    fwd.fail_link(link)
    fwd.fail_nic(3)
    sim.fail_link(link, at=0)
    sim.fail_link(nic, at=0)
    sim.run(until="1ps")  # (a bare 1 is refused: docs/units.md)
    before = rf.Forwarding(fab).ports(3, 127).tolist()
    assert fwd.ports(3, 127).tolist() != before  # the relay changed GPU 3's path
    _assert_same_paths(fwd, sim, _pairs(128, 400, 2) + [(3, 90, 0), (90, 3, 5)])
    assert not fwd.channels()["up"][2 * link]
    # restored: the same paths as a fabric that only lost the middle link
    fwd.restore_link(nic)
    only_link = rf.Forwarding(fab)
    only_link.fail_link(link)
    for src, dst, h in _pairs(128, 100, 4):
        assert fwd.ports(src, dst, h).tolist() == only_link.ports(src, dst, h).tolist()


@pytest.mark.parametrize("name", ["RFabric", "MixNet"])
def test_paths_equal_after_a_circuit_change(name):
    fab = FABRICS[name](128)
    fwd, sim = rf.Forwarding(fab), _probe_sim(fab)
    plan = fwd.current_circuits()
    assert len(plan) > 4
    keep = rf.CircuitTable.build(plan.ocs[::2], plan.a[::2], plan.b[::2])  # half the circuits go
    added, removed = fwd.apply_circuits(keep)
    assert (added, removed) == (0, len(plan) - len(keep))
    sim.apply_circuits(keep, at=0, t_ocs=0)
    sim.run(until="1ps")  # (a bare 1 is refused: docs/units.md)
    assert np.array_equal(sim.current_circuits().a, fwd.current_circuits().a)
    _assert_same_paths(fwd, sim, _pairs(128, 600, 3))


def test_forwarding_checks_its_input():
    fwd = rf.Forwarding(rf.topologies.FatTree(32))
    with pytest.raises(rf.SpecError, match="GPU id"):
        fwd.path(0, 32)
    with pytest.raises(rf.SpecError, match="both GPU"):
        fwd.path(5, 5)
    with pytest.raises(rf.SpecError, match="does not exist"):
        fwd.fail_link(10**6)
    with pytest.raises(rf.SpecError, match="CircuitTable"):
        fwd.apply_circuits([1, 2, 3])
