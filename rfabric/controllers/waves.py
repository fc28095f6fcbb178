"""The weight-sync dissemination forest as the stage-aware controller plans it (paper
appendix E; step 12 of :class:`~rfabric.controllers.StageAwareController`).

* :func:`forest_schedule`: which periods of the rewritten trace are the forest's Phase A
  waves (each with its edges' chains) and which periods belong to a forest;
* :func:`wave_pins`: what a wave keeps of the plan in force for the periods still running
  (their ToR-ToR bytes, and the fewest rows that keep their ToR pairs joined);
* :func:`restore`: the forest torn down, the rows from before the weight sync back in the
  PoDs it used.
"""

from __future__ import annotations

import numpy as np

from ..spec import CircuitTable
from .connectivity import _ends, _spanning_rows
from .plan_rows import _in_pods, _rows, _table

__all__ = ["forest_schedule", "restore", "wave_pins"]


def forest_schedule(applied) -> tuple[dict, set, set, object]:
    """``(waves, periods, firsts, forest)`` of the forests the run's rewrites made
    (``applied``: the :class:`rfabric.rewrites.Rewritten` of each rewrite applied):
    ``waves[period]`` the ``(src GPU, dst GPU, circuits)`` edges of the Phase A wave replayed
    as that period, ``periods`` every period of a forest (its waves and its Phase B), ``firsts``
    the first period of each forest, ``forest`` the last :class:`~rfabric.controllers.Forest`
    (None without one)."""
    waves, periods, firsts, last = {}, set(), set(), None
    for r in applied:
        if r.rewrite.name != "weight_sync_forest":
            continue
        for f, first in r.schedule["forests"]:
            last = f
            for e in range(f.n_waves):
                w = np.flatnonzero(f.wave == e)
                waves[first + e] = [(int(f.src[i]), int(f.dst[i]), int(f.circuits[i])) for i in w.tolist()]
            periods |= set(range(first, first + f.n_waves + 1))
            firsts.add(first)
    return waves, periods, firsts, last


def wave_pins(lay, view, period: int, period_demand: dict, wave_pairs: np.ndarray):
    """``(running, tries)`` for a wave planned while other periods run: ``running`` their
    ToR x ToR bytes (what the uplinks the wave's chains leave should carry), ``tries`` the
    rows of ``view.plan`` to keep, first those that keep the running periods' ToR pairs
    joined, then those that also keep the wave's own (``wave_pairs``) joined.
    ``period_demand[p]`` is ``(ToR pair codes, bytes)`` of each period seen."""
    n = lay.num_tors
    running = np.zeros((n, n), dtype=np.float64)
    need = []
    for p in view.active_periods:
        if p != period and int(p) in period_demand:
            codes, nbytes = period_demand[int(p)]
            np.add.at(running, (codes // n, codes % n), nbytes)
            need.append(codes)
    pin = [need, need + [wave_pairs]]
    tries = [
        _spanning_rows(lay, view.plan, np.unique(np.concatenate(c)), view.failed_ports) if c else frozenset()
        for c in pin
    ]
    return running, tries


def restore(lay, view, pre_ws: CircuitTable, pods) -> CircuitTable:
    """``view.plan`` with ``pods`` (those the forest used that the coming period does not
    re-plan) set back to their rows of ``pre_ws`` (the plan before the weight sync), where
    those ports work and their ends at the row's device are free."""
    if not pods:
        return view.plan
    failed = set(view.failed_ports.tolist())
    keep = [r for r in _rows(view.plan) if not _in_pods(lay, r, pods)]
    # a link has an end at each of its two devices: a core row and the lift row of the same
    # chain share their ocs-ocs link, at different devices (the ends, not the links, are used)
    used = _ends(keep)
    for r in _rows(pre_ws):
        ends = _ends([r])
        if _in_pods(lay, r, pods) and not ends & used and not ({r[1], r[2]} & failed):
            keep.append(r)
            used |= ends
    return _table(keep)
