"""rfabric.controllers.plan_rows: plans as (device, link, link) rows."""

import numpy as np

import rfabric as rf
from rfabric.controllers.layout import RFabricLayout
from rfabric.controllers.plan_rows import _contains, _in_pods, _key_set, _rows, _rows_touching, _table


def test_rows_and_table_round_trip():
    spec = rf.topologies.RFabric(256).to_spec()
    plan = spec.circuits
    rows = _rows(plan)
    assert len(rows) == len(plan)
    back = _table(rows)
    assert _key_set(back) == _key_set(plan)
    assert len(_table([])) == 0


def test_containment_ignores_row_order_and_link_order():
    spec = rf.topologies.RFabric(256).to_spec()
    rows = _rows(spec.circuits)
    part = _table([(o, b, a) for o, a, b in rows[::3]])
    assert _contains(spec.circuits, part)
    assert not _contains(part, spec.circuits)


def test_rows_touching_some_pods_are_those_pods_rows():
    spec = rf.topologies.RFabric(256).to_spec()
    lay = RFabricLayout(spec)
    plan = spec.circuits
    mine = _rows_touching(plan, lay, {0})
    rest = [r for r in _rows(plan) if not _in_pods(lay, r, {0})]
    assert len(mine) + len(rest) == len(plan)
    # every OCS-Agg row of PoD 0 is in; no OCS-Agg row of PoD 1 is
    agg0 = {n for n, p in lay.agg_pod.items() if p == 0}
    assert {r for r in _rows(plan) if r[0] in agg0} <= set(_rows(mine))
    assert not [r for r in _rows(mine) if lay.agg_pod.get(r[0]) == 1]
    # the core rows in it each have an end in PoD 0
    for o, a, b in _rows(mine):
        if o in set(lay.core_nodes.tolist()):
            assert 0 in (lay.port_of_link[a][1], lay.port_of_link[b][1])
    assert np.isin(lay.core_nodes, mine.ocs).any()


def test_containment_on_arrays_matches_the_row_sets():
    """_contains works on int64 codes; oracle: the subset test of the rows' key sets, on random
    tables (rows either way round, repeats, rows that differ in one field, empty tables, ids
    too large for the codes)."""
    rng = np.random.default_rng(3)

    def key_set_contains(plan, part):
        return _key_set(part) <= _key_set(plan)

    for trial in range(300):
        n = int(rng.integers(0, 30))
        big = trial % 50 == 49  # ids beyond the int64 codes: the sets answer
        hi = 2**40 if big else 12
        rows = [tuple(int(x) for x in rng.integers(0, hi, 3)) for _ in range(n)]
        plan = _table(rows)
        pick = [r for r in rows if rng.random() < 0.5]
        part_rows = [(o, b, a) if rng.random() < 0.5 else (o, a, b) for o, a, b in pick]
        if rows and rng.random() < 0.5:  # one row that may not be in the plan
            o, a, b = rows[int(rng.integers(len(rows)))]
            part_rows.append((o + int(rng.integers(0, 2)), a, b + int(rng.integers(0, 2))))
        part = _table(part_rows)
        assert _contains(plan, part) == key_set_contains(plan, part), (trial, rows, part_rows)
        assert _contains(part, plan) == key_set_contains(part, plan), (trial, rows, part_rows)


def test_containment_asked_of_one_plan_many_times():
    """The same plan object asked about many parts (the sorted codes of the last plan are
    kept), then its columns changed in place: each answer is the row sets' answer."""
    spec = rf.topologies.RFabric(256).to_spec()
    plan = _table(_rows(spec.circuits))
    rows = _rows(plan)
    rng = np.random.default_rng(5)
    for _ in range(20):
        pick = [rows[i] for i in rng.choice(len(rows), 5, replace=False)]
        if rng.random() < 0.5:
            o, a, b = pick[0]
            pick[0] = (o, a, b + 1)
        part = _table(pick)
        assert _contains(plan, part) == (_key_set(part) <= _key_set(plan))
    part = _table(rows[:3])
    assert _contains(plan, part)
    plan.b[:3] += 1  # (no controller does this; the kept codes must not hide it)
    assert not _contains(plan, part)
    assert _contains(plan, _table(_rows(plan)[:3]))
