"""rfabric.controllers.connectivity: the rows that keep ToRs joined (spanning forests) and the
repair that adds default channels back until the ToRs that must reach each other do."""

import numpy as np
import pytest

import rfabric as rf
from rfabric.controllers.connectivity import _connect, _spanning_rows, _union_find
from rfabric.controllers.layout import RFabricLayout


@pytest.fixture(scope="module")
def rf256():
    return rf.topologies.RFabric(256).to_spec()


def test_union_find_joins_and_finds():
    find, parent = _union_find(6)
    parent[find(0)] = find(1)
    parent[find(2)] = find(1)
    parent[find(4)] = find(5)
    assert find(0) == find(2) == find(1) and find(4) == find(5) and find(3) == 3
    assert find(0) != find(4)


def test_repair_adds_a_spanning_forest_of_default_channels(rf256):
    # from nothing, the repair adds default channels until each rail's ToRs (PXN) are joined,
    # one channel per join: a spanning forest, num_tors - rails channels
    lay = RFabricLayout(rf256)
    new = []
    devices = set(lay.agg_pod) | set(lay.core_nodes.tolist())
    removed = _connect(lay, [], new, 0, set(), lay.default_channels(), devices, set())
    assert removed == 0
    rails = len(np.unique(lay.tor_rail))
    assert len(new) == lay.num_tors - rails
    rows = [r for u in new for r in u[0]]
    o, a, b = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    label = lay.components(rf.CircuitTable.build(o, a, b))
    for rail in range(rails):
        assert len(set(label[lay.tor_rail == rail].tolist())) == 1
    assert not lay.splits(lay.components(rf256.circuits), label)


def test_a_wave_keeps_the_fewest_rows_that_join_the_running_pairs(rf256):
    # the rows a forest wave pins for the periods still running: every ToR pair they use
    # stays joined (on the kept rows alone), and only a spanning forest's pruned share is kept
    lay = RFabricLayout(rf256)
    plan = rf256.circuits
    rng = np.random.default_rng(3)
    ts = rng.integers(0, lay.num_tors, 12)
    # with PXN the uniform plan joins the ToRs of one rail: pairs within a rail
    td = np.array([rng.choice(np.flatnonzero(lay.tor_rail == lay.tor_rail[t])) for t in ts])
    joined = ~lay.apart(plan, ts, td)
    assert joined.sum() >= 10
    codes = ts[joined] * lay.num_tors + td[joined]
    pinned = sorted(_spanning_rows(lay, plan, codes, np.zeros(0, dtype=np.int64)))
    o, a, b = (np.array(c, dtype=np.int64) for c in zip(*pinned, strict=True))
    assert not lay.apart(rf.CircuitTable.build(o, a, b), ts[joined], td[joined]).any()
    assert 0 < len(pinned) < len(plan) // 2
    # a failed port's channel is never pinned
    dead = np.array([pinned[0][1]])
    assert not {r for r in _spanning_rows(lay, plan, codes, dead) if dead[0] in (r[1], r[2])}
