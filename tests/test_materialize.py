"""rfabric.controllers.materialize: concrete rows from ToR-level demand (appendix D), checked
against the fabric's budgets and for reuse (the same demand planned again changes nothing)."""

import numpy as np
import pytest
from test_stage_aware import assert_budgets, view_for  # noqa: I001

import rfabric as rf
from rfabric.controllers.layout import RFabricLayout
from rfabric.controllers.materialize import _pair_chains, materialize
from rfabric.controllers.plan_rows import _key_set


@pytest.fixture(scope="module")
def rf256_nopxn():
    return rf.topologies.RFabric(256, pxn=False).to_spec()


def demand(lay, seed=0, *, rng=None, draws=40):
    """Random ToR x ToR bytes: ``draws`` random ToR pairs (from ``rng``, else a generator of
    ``seed``), 1-99 MB each."""
    rng = np.random.default_rng(seed) if rng is None else rng
    n = lay.num_tors
    D = np.zeros((n, n))
    for _ in range(draws):
        a, b = rng.integers(0, n, 2)
        if a != b:
            D[a, b] += float(rng.integers(1, 100)) * 1e6
    return D


def test_plans_fit_the_budgets_and_reuse_what_is_in_place(rf256_nopxn):
    spec = rf256_nopxn
    lay = RFabricLayout(spec)
    D = demand(lay)
    view = view_for(spec)
    pods = frozenset(range(lay.pods))
    plan, detail = materialize(lay, view, spec.circuits, D, pods, frozenset(), None)
    assert "core chains" in detail
    assert_budgets(spec, lay, plan)
    # the plan joins every ToR pair with demand (no PXN: relays through any ToR)
    hot = np.argwhere(D > 0)
    assert not lay.apart(plan, hot[:, 0], hot[:, 1]).any()
    # planned again from its own plan: the same rows
    again, _ = materialize(lay, view_for(spec, plan=plan), plan, D, pods, frozenset(), None)
    assert _key_set(again) == _key_set(plan)


def test_failed_ports_are_not_used(rf256_nopxn):
    spec = rf256_nopxn
    lay = RFabricLayout(spec)
    failed = lay.tor_port_link[:6].tolist() + lay.core_port_link[:2].tolist()
    plan, _ = materialize(
        lay,
        view_for(spec, failed=failed),
        spec.circuits,
        demand(lay, 1),
        frozenset({0, 1}),
        frozenset(),
        None,
    )
    assert_budgets(spec, lay, plan, failed)


def test_chains_go_to_the_pairs_with_most_demand_per_chain():
    pod_of = np.array([0, 0, 1, 1])
    D = np.zeros((4, 4))
    D[0, 2] = 10.0
    D[1, 3] = 4.0
    lifts = np.array([2, 2, 2, 2])
    core = np.array([[0, 3], [3, 0]])
    # 10/1, then 10/2 = 5 > 4/1, then 4/1 > 10/3
    assert _pair_chains(D, pod_of, lifts, core) == [(0, 2), (0, 2), (1, 3)]
    # ToR 0 has lift circuits for one chain only: the second goes to (1, 3)
    assert _pair_chains(D, pod_of, np.array([1, 2, 2, 2]), core) == [(0, 2), (1, 3), (1, 3)]


def _pair_chains_by_rescoring(D, pod_of, lifts, core_c):
    """The oracle: every pair rescored at every pick (what _pair_chains keeps incrementally)."""
    n = len(pod_of)
    sym = np.maximum(D, D.T) * (pod_of[:, None] != pod_of[None, :])
    have = np.zeros((n, n))
    slots, rem, out = lifts.astype(np.int64).copy(), core_c.astype(np.int64).copy(), []
    for _ in range(int(np.triu(core_c, 1).sum())):
        ok = (slots[:, None] > 0) & (slots[None, :] > 0) & (rem[pod_of][:, pod_of] > 0)
        ok &= np.triu(np.ones((n, n), dtype=bool), 1)
        if not ok.any():
            break
        i, j = np.unravel_index(int(np.argmax(np.where(ok, sym / (have + 1), -1.0))), (n, n))
        out.append((int(i), int(j)))
        have[i, j] += 1
        slots[i] -= 1
        slots[j] -= 1
        rem[pod_of[i], pod_of[j]] -= 1
        rem[pod_of[j], pod_of[i]] -= 1
    return out


@pytest.mark.parametrize("seed", range(40))
def test_incremental_chain_pairing_matches_rescoring_every_pair(seed):
    rng = np.random.default_rng(seed)
    pods, per = int(rng.integers(1, 6)), int(rng.integers(1, 8))
    n = pods * per
    pod_of = np.repeat(np.arange(pods), per)
    D = rng.integers(0, 4, (n, n)).astype(float) * (rng.random((n, n)) < 0.6)  # (small ints: ties)
    lifts = rng.integers(0, 4, n)
    core = np.triu(rng.integers(0, 5, (pods, pods)), 1)
    core = core + core.T
    assert _pair_chains(D, pod_of, lifts, core) == _pair_chains_by_rescoring(D, pod_of, lifts, core)
