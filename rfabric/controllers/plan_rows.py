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


def _codes(plan: CircuitTable, links: int) -> np.ndarray:
    """One int64 per row, ``(device * links + lower link) * links + higher link``: the
    rows' keys of :func:`_key_set` as numbers."""
    a, b = np.asarray(plan.a, np.int64), np.asarray(plan.b, np.int64)
    return (np.asarray(plan.ocs, np.int64) * links + np.minimum(a, b)) * links + np.maximum(a, b)


def _contains(plan: CircuitTable, part: CircuitTable) -> bool:
    """Every row of ``part`` is in ``plan`` (either way round): ``_key_set(part) <=
    _key_set(plan)``, on arrays (a plan at 16,384 GPUs has tens of thousands of rows, and
    the stage-aware controller asks at every period it is offered)."""
    if not len(part):
        return True
    if not len(plan):
        return False
    links = 1 + max(int(t.a.max()) for t in (plan, part))
    links = max(links, 1 + max(int(t.b.max()) for t in (plan, part)))
    devices = 1 + max(int(t.ocs.max()) for t in (plan, part))
    if devices * links * links >= 2**62:  # (beyond int64 codes: the sets)
        return _key_set(part) <= _key_set(plan)
    return bool(np.isin(_codes(part, links), _codes(plan, links)).all())


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
