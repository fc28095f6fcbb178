"""allocate_circuits (paper appendix D, Algorithm 3): hand-computed plans, an independent
O(n^2)-per-step oracle, the properties the issue lists, and input validation."""

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rfabric as rf
from rfabric.controllers import allocate_circuits

INF = float("inf")


def reference(demand, eligible, budget):
    """Algorithm 3 read literally: rescan every pair each step (exact rational pair times)."""
    d = np.asarray(demand)
    n = d.shape[0]
    c = np.zeros((n, n), dtype=np.int64)
    free = [int(x) for x in budget]
    steps = 0
    while True:
        best = None
        for u in range(n):
            for v in range(u + 1, n):
                if eligible is not None and not eligible[u][v]:
                    continue
                if free[u] <= 0 or free[v] <= 0 or d[u, v] + d[v, u] <= 0:
                    continue
                m = max(int(d[u, v]), int(d[v, u]))
                t = INF if c[u, v] == 0 else Fraction(m, int(c[u, v]))
                key = (t, m, -u, -v)
                if best is None or key > best[0]:
                    best = (key, u, v)
        if best is None:
            return c, steps
        _, u, v = best
        c[u, v] += 1
        c[v, u] += 1
        free[u] -= 1
        free[v] -= 1
        steps += 1


def pair_times(c, demand, eligible):
    """Exact pair time (bytes per circuit; B is common) of every demanded eligible pair."""
    d = np.asarray(demand)
    n = d.shape[0]
    out = {}
    for u in range(n):
        for v in range(u + 1, n):
            m = max(int(d[u, v]), int(d[v, u]))
            if m == 0 or (eligible is not None and not eligible[u][v]):
                continue
            out[(u, v)] = INF if c[u, v] == 0 else Fraction(m, int(c[u, v]))
    return out


@st.composite
def cases(draw, max_n=7):
    n = draw(st.integers(2, max_n))
    density = draw(st.sampled_from([0.2, 0.5, 1.0]))
    vals = draw(st.lists(st.integers(1, 1000), min_size=n * n, max_size=n * n))
    mask = draw(st.lists(st.floats(0, 1), min_size=n * n, max_size=n * n))
    d = np.array([v if m < density else 0 for v, m in zip(vals, mask, strict=True)], dtype=np.int64)
    d = d.reshape(n, n)
    budget = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), dtype=np.int64)
    if draw(st.booleans()):
        eligible = None
    else:
        bits = draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n))
        e = np.array(bits).reshape(n, n)
        eligible = np.triu(e, 1)
        eligible = eligible | eligible.T
    return d, eligible, budget


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_two_endpoints_fill_both_budgets():
    c, steps = allocate_circuits(np.array([[0, 3], [1, 0]]), None, [4, 4], "200Gbps", return_steps=True)
    assert c.tolist() == [[0, 4], [4, 0]]
    assert steps == 4
    assert c.dtype == np.int64


def test_star_equalises_pair_times():
    # Centre 0 sends 4, 3, 2, 1 to leaves 1-4. Every leaf first gets one circuit (T = inf);
    # the centre's 4 spare ports then go to the largest bytes/circuit: 4/1 -> leaf 1,
    # 3/1 -> leaf 2, then 4/2 = 2/1 tie broken by the larger demand (leaf 1), then 2/1.
    d = np.zeros((5, 5), dtype=np.int64)
    d[0, 1:] = [4, 3, 2, 1]
    c = allocate_circuits(d, None, [8, 3, 3, 3, 3], 1)
    assert c[0].tolist() == [0, 3, 2, 2, 1]
    assert (c[1:, 1:] == 0).all()


def test_star_short_of_ports_serves_largest_demands_first():
    d = np.zeros((5, 5), dtype=np.int64)
    d[1:, 0] = [1, 4, 2, 4]  # leaves -> centre; leaves 2 and 4 tie on demand: lower id first
    c = allocate_circuits(d, None, [2, 1, 1, 1, 1], "100Gbps")
    assert c[0].tolist() == [0, 0, 1, 0, 1]


def test_ineligible_undemanded_and_zero_budget_pairs_get_nothing():
    d = np.array([[0, 5, 5, 0], [0, 0, 0, 0], [0, 0, 0, 7], [0, 0, 0, 0]])
    elig = np.ones((4, 4), dtype=bool)
    elig[0, 2] = elig[2, 0] = False
    c = allocate_circuits(d, elig, [2, 2, 2, 0], 1)
    assert c.tolist() == [[0, 2, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


def test_link_rate_string_and_int_and_sparse_demand_agree():
    rng = np.random.default_rng(3)
    d = rng.integers(0, 100, size=(30, 30)) * (rng.random((30, 30)) < 0.2)
    budget = rng.integers(0, 6, size=30)
    base = allocate_circuits(d, None, budget, "200Gbps")
    assert np.array_equal(base, allocate_circuits(d, None, budget, 200 * 10**9))
    for fmt in (sp.csr_matrix, sp.coo_matrix, sp.csc_array):
        assert np.array_equal(base, allocate_circuits(fmt(d), None, budget, "200Gbps"))
    assert np.array_equal(base, allocate_circuits(d.astype(np.float64), None, budget, "200Gbps"))


def test_eligible_and_budget_forms_agree():
    rng = np.random.default_rng(8)
    n = 20
    d = rng.integers(0, 50, size=(n, n))
    e = np.triu(rng.random((n, n)) < 0.5, 1)
    e = e | e.T
    budget = rng.integers(0, 5, size=n)
    base = allocate_circuits(d, e, budget, 1)
    assert np.array_equal(base, allocate_circuits(d, e.astype(np.int8), budget, 1))
    assert np.array_equal(base, allocate_circuits(d, sp.csr_matrix(e), budget, 1))
    assert np.array_equal(base, allocate_circuits(d, e, budget.astype(float), 1))
    assert np.array_equal(base, allocate_circuits(d, e, budget.tolist(), 1))


def test_sparse_duplicates_are_summed():
    rows, cols, vals = [0, 0, 1], [1, 1, 2], [3, 4, 5]  # 0->1 is 7 bytes in total, 1->2 is 5
    d = sp.coo_matrix((vals, (rows, cols)), shape=(3, 3))
    c = allocate_circuits(d, None, [1, 1, 1], 1)
    assert c[0, 1] == 1 and c[1, 2] == 0


def test_diagonal_demand_is_ignored():
    c = allocate_circuits(np.diag([9, 9, 9]), None, [3, 3, 3], 1)
    assert (c == 0).all()


def test_large_random_matches_reference_on_medium_case():
    rng = np.random.default_rng(11)
    n = 24
    d = rng.integers(1, 50, size=(n, n)) * (rng.random((n, n)) < 0.4)
    budget = rng.integers(0, 7, size=n)
    e = rng.random((n, n)) < 0.8
    e = np.triu(e, 1)
    e = e | e.T
    got, steps = allocate_circuits(d, e, budget, 1, return_steps=True)
    want, want_steps = reference(d, e, budget)
    assert np.array_equal(got, want)
    assert steps == want_steps


@pytest.mark.parametrize(
    ("seed", "levels", "density"),
    # Few distinct sizes: ties across prefix boundaries. Density 0.05: a dense matrix that is
    # mostly zeros, read entry by entry as a sparse one.
    [(1, 3, 0.6), (2, 1000, 0.6), (3, 1, 0.6), (4, 2, 0.6), (5, 3, 0.05), (6, 1, 0.1)],
)
def test_matches_reference_beyond_the_first_prefix(seed, levels, density):
    # Enough demanded pairs (> 256, the first prefix phase 1 sorts) that the later, lazily
    # selected prefixes and the pruning between them decide the plan.
    rng = np.random.default_rng(seed)
    n = 60
    d = rng.integers(1, levels + 1, size=(n, n)) * (rng.random((n, n)) < density)
    budget = rng.integers(0, 4, size=n)
    got, steps = allocate_circuits(d, None, budget, 1, return_steps=True)
    want, want_steps = reference(d, None, budget)
    assert np.array_equal(got, want)
    assert steps == want_steps
    assert np.array_equal(got, allocate_circuits(sp.csr_matrix(d), None, budget, 1))


@FAST
@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=300),
    st.integers(1, 310),
    st.data(),
)
def test_prefix_selection_is_a_sorted_prefix(keys, k, data):
    from rfabric.controllers.allocate import _take_first

    key = -np.array(keys, dtype=np.float64)
    ids = np.array(sorted(data.draw(st.sets(st.integers(0, len(keys) - 1)))), dtype=np.int64)
    sel, rest = _take_first(key, ids, k)
    full = sorted(ids.tolist(), key=lambda i: (key[i], i))
    assert sel.tolist() == full[: len(sel)]
    assert len(sel) >= min(k, len(ids))
    assert sorted(rest.tolist()) == rest.tolist() == sorted(full[len(sel) :])


@FAST
@given(cases())
def test_matches_reference_oracle(case):
    d, eligible, budget = case
    got, steps = allocate_circuits(d, eligible, budget, "200Gbps", return_steps=True)
    want, want_steps = reference(d, eligible, budget)
    assert np.array_equal(got, want)
    assert steps == want_steps


@FAST
@given(cases())
def test_plan_properties(case):
    d, eligible, budget = case
    n = d.shape[0]
    c, steps = allocate_circuits(d, eligible, budget, 10**9, return_steps=True)
    assert c.dtype == np.int64 and c.shape == (n, n)
    assert np.array_equal(c, c.T)
    assert (np.diag(c) == 0).all() and (c >= 0).all()
    assert (c.sum(axis=1) <= budget).all()  # budgets never exceeded
    demanded = (d + d.T) > 0
    allowed = demanded if eligible is None else demanded & eligible
    assert (c[~allowed] == 0).all()  # nothing on ineligible or undemanded pairs
    # Termination: no demanded eligible pair has a free port at both ends.
    free = budget - c.sum(axis=1)
    for u in range(n):
        for v in range(u + 1, n):
            if allowed[u, v]:
                assert free[u] == 0 or free[v] == 0, (u, v)
    # Iterations: one circuit per step, at most half the total port budget.
    assert steps == c.sum() // 2 <= budget.sum() // 2


@FAST
@given(cases(max_n=6))
def test_no_single_move_lowers_max_pair_time(case):
    d, eligible, budget = case
    n = d.shape[0]
    c = allocate_circuits(d, eligible, budget, 1)
    times = pair_times(c, d, eligible)
    if not times:
        return
    worst = max(times.values())
    used = c.sum(axis=1)
    pairs = list(times)
    # Take one circuit from pair q (or from nowhere: use free ports only) and give it to p.
    sources = [None] + [(u, v) for u in range(n) for v in range(u + 1, n) if c[u, v] > 0]
    for q in sources:
        for p in pairs:
            if p == q:
                continue
            c2 = c.copy()
            if q is not None:
                c2[q] -= 1
                c2[q[::-1]] -= 1
            c2[p] += 1
            c2[p[::-1]] += 1
            if (c2.sum(axis=1) > budget).any():
                continue
            assert max(pair_times(c2, d, eligible).values()) >= worst, (q, p)
    assert (used <= budget).all()


def test_dense_all_to_all_uses_every_port_it_can():
    n, deg = 64, 8
    d = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)
    c, steps = allocate_circuits(d, None, np.full(n, deg), "200Gbps", return_steps=True)
    assert (c.sum(axis=1) <= deg).all()
    assert steps == c.sum() // 2
    assert c.max() == 1  # uniform demand: spread, never doubled while a fresh pair is possible
    free = deg - c.sum(axis=1)
    assert (free > 0).sum() <= 1  # every pair is demanded: two endpoints with free ports would pair


def test_deterministic():
    rng = np.random.default_rng(5)
    d = rng.integers(0, 3, size=(100, 100))  # many ties
    budget = rng.integers(0, 9, size=100)
    first = allocate_circuits(d, None, budget, 1)
    for _ in range(3):
        assert np.array_equal(first, allocate_circuits(d, None, budget, 1))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"demand": np.zeros((3, 2))}, r"demand has shape \(3, 2\)"),
        ({"demand": np.zeros(3)}, r"demand has shape \(3,\)"),
        ({"demand": np.array([[0, -1, 0], [0, 0, 0], [0, 0, 0]])}, r"demand\[0, 1\] = -1 is negative"),
        ({"demand": np.array([[0, 1, 0], [0, 0, np.nan], [0, 0, 0]])}, r"demand\[1, 2\] = nan is not finite"),
        (
            {"demand": sp.csr_matrix(np.array([[0, 0, 0], [0, 0, 0], [-2, 0, 0]]))},
            r"demand\[2, 0\] = -2 is negative",
        ),
        ({"demand": np.array([["a"] * 3] * 3)}, r"demand has dtype"),
        ({"port_budget": [1, 2]}, r"port_budget has shape \(2,\), expected \(3,\)"),
        ({"port_budget": [1, -2, 0]}, r"port_budget\[1\] = -2 is negative"),
        ({"port_budget": [1, 1.5, 0]}, r"port_budget\[1\] = 1.5 is not a whole number"),
        ({"port_budget": None}, r"port_budget is required"),
        ({"eligible": np.ones((2, 2), dtype=bool)}, r"eligible has shape \(2, 2\), expected \(3, 3\)"),
        ({"eligible": np.triu(np.ones((3, 3), dtype=bool))}, r"eligible is not symmetric: eligible\[0, 1\]"),
        ({"eligible": np.full((3, 3), 2)}, r"eligible\[0, 0\] = 2 is not a bool"),
        ({"link_rate": None}, r"link_rate is required"),
        ({"link_rate": "fast"}, r"link_rate: rate 'fast' is malformed"),
        ({"link_rate": 0}, r"link_rate: rate 0 must be positive"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = {
        "demand": np.array([[0, 1, 2], [3, 0, 4], [5, 6, 0]]),
        "eligible": None,
        "port_budget": [2, 2, 2],
        "link_rate": "200Gbps",
    }
    args.update(kwargs)
    with pytest.raises(rf.SpecError, match=match):
        allocate_circuits(**args)
