"""Circuit plans as rows: ``(device, link, link)`` tuples, the form the controllers edit.

Small helpers shared by the stage-aware controller's modules: a plan's rows, a table from
rows, whether one plan holds another, and the rows of a plan that belong to some PoDs of an
RFabric (:class:`~rfabric.controllers.layout.RFabricLayout`).
"""

from __future__ import annotations

import numpy as np

from ..spec import CircuitTable
from .layout import RFabricLayout

__all__ = ["_contains", "_in_pods", "_key_set", "_rows", "_rows_touching", "_table"]


def _rows(plan: CircuitTable) -> list[tuple[int, int, int]]:
    return list(zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True))


def _table(rows) -> CircuitTable:
    if not rows:
        return CircuitTable.empty()
    o, x, y = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    return CircuitTable.build(o, x, y)


def _key_set(plan: CircuitTable) -> set:
    return {(o, min(x, y), max(x, y)) for o, x, y in _rows(plan)}


_CODE_BITS = 21  # device and link ids below 2**21: a row's code fits an int64


def _codes(plan: CircuitTable) -> np.ndarray | None:
    """One int64 per row, ``device``, lower link and higher link in 21 bits each: the rows'
    keys of :func:`_key_set` as numbers; None when an id does not fit."""
    if len(plan) and max(int(plan.ocs.max()), int(plan.a.max()), int(plan.b.max())) >> _CODE_BITS:
        return None
    a, b = np.asarray(plan.a, np.int64), np.asarray(plan.b, np.int64)
    o = np.asarray(plan.ocs, np.int64)
    return (((o << _CODE_BITS) | np.minimum(a, b)) << _CODE_BITS) | np.maximum(a, b)


# the last plan _contains looked in, a copy of its columns and its rows' codes sorted (a
# controller asks of one plan in force many times; the reference keeps the object, so `is`
# cannot match another one, and the copy catches columns changed in place)
_last_plan: list = [None, None, None]


def _contains(plan: CircuitTable, part: CircuitTable) -> bool:
    """Every row of ``part`` is in ``plan`` (either way round): ``_key_set(part) <=
    _key_set(plan)``, on sorted codes (a plan at 16,384 GPUs has tens of thousands of rows,
    and the stage-aware controller asks at every period it is offered)."""
    if not len(part):
        return True
    cols = (plan.ocs, plan.a, plan.b)
    if _last_plan[0] is not plan or not all(map(np.array_equal, cols, _last_plan[1])):
        codes = _codes(plan)
        _last_plan[:] = plan, [c.copy() for c in cols], None if codes is None else np.sort(codes)
    have, want = _last_plan[2], _codes(part)
    if have is None or want is None:  # (ids too large for the codes: the sets)
        return _key_set(part) <= _key_set(plan)
    if not have.size:
        return False
    at = np.minimum(np.searchsorted(have, want), have.size - 1)
    return bool((have[at] == want).all())


def _in_pods(lay: RFabricLayout, row, pods) -> bool:
    """Whether a plan row belongs to the given PoDs: an OCS-Agg row of one of them, or an
    OCS-Core row with an end in one of them."""
    p = lay.agg_pod.get(row[0])
    if p is not None:
        return p in pods
    ends = [lay.port_of_link.get(row[1]), lay.port_of_link.get(row[2])]
    return any(e is not None and e[1] in pods for e in ends)


def _rows_touching(plan: CircuitTable, lay: RFabricLayout, pods) -> CircuitTable:
    return _table([r for r in _rows(plan) if _in_pods(lay, r, set(pods))])
