"""rfabric.controllers.regional: MixNet's greedy inside a region, against a literal reading
of its rule and against the MixNet topology's own demand plan."""

import itertools

import numpy as np
import pytest

import rfabric as rf
from rfabric.controllers.regional import Regions, greedy_circuits, plan_for_demand


def reference(demand, free):
    """The rule read literally: rescan every pair each step."""
    w = np.asarray(demand, dtype=float)
    w = w + w.T
    free = list(free)
    have = {}
    out = []
    while True:
        best = None
        for i, j in itertools.combinations(range(len(w)), 2):
            if free[i] <= 0 or free[j] <= 0 or w[i, j] <= 0:
                continue
            score = w[i, j] / (have.get((i, j), 0) + 1)
            if best is None or score > best[0]:  # first (lowest i, j) wins ties
                best = (score, i, j)
        if best is None:
            return out
        _, i, j = best
        out.append((i, j))
        free[i] -= 1
        free[j] -= 1
        have[(i, j)] = have.get((i, j), 0) + 1


@pytest.mark.parametrize("seed", range(6))
def test_greedy_matches_the_literal_rule(seed):
    rng = np.random.default_rng(seed)
    r = int(rng.integers(2, 7))
    demand = rng.integers(0, 5, (r, r)) * (rng.random((r, r)) < 0.6)
    free = rng.integers(0, 4, r)
    got = greedy_circuits(demand, free)
    assert got == reference(demand, free)
    used = np.zeros(r, dtype=int)
    for i, j in got:
        used[i] += 1
        used[j] += 1
    assert (used <= free).all()


def test_no_demand_no_circuit():
    assert greedy_circuits(np.zeros((4, 4)), [6] * 4) == []


def test_plan_for_demand_is_the_topologys_plan_and_fits_each_region():
    top = rf.topologies.MixNet(256)  # two regions of 16 servers
    spec = top.to_spec()
    rng = np.random.default_rng(1)
    demand = rng.random((top.servers, top.servers)) * (rng.random((top.servers, top.servers)) < 0.2)
    np.fill_diagonal(demand, 0)
    plan = plan_for_demand(spec, demand)
    want = top.plan_for_demand(demand)

    def key(p):
        lo, hi = np.minimum(p.a, p.b).tolist(), np.maximum(p.a, p.b).tolist()
        return sorted(zip(p.ocs.tolist(), lo, hi, strict=True))

    assert key(plan) == key(want) and len(plan) > 0
    spec.validate_circuits(plan)
    # every circuit joins two servers of one region
    reg = Regions(spec, "test")
    u, v, _ = spec.resolve_circuits(plan)
    srv = spec.nodes.server
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        assert reg.region_of_server[int(srv[a])] == reg.region_of_server[int(srv[b])]


def test_a_fabric_without_regional_ocs_is_named():
    with pytest.raises(rf.SpecError, match="no OCS whose ports are GPU NICs"):
        Regions(rf.topologies.FatTree(16).to_spec(), "test")
