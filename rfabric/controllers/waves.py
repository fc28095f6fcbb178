"""The weight-sync dissemination forest as the stage-aware controller plans it (paper
appendix E; step 12 of :class:`~rfabric.controllers.StageAwareController`).

* :func:`forest_schedule`: which periods of the rewritten trace are the forest's Phase A
  waves (each with its edges' chains) and which periods belong to a forest;
* :func:`fanout_flows`: per wave, the GPU pairs of the Phase B fan-out its shards (and the
  earlier waves') start, which its plan carries on the uplinks its chains leave;
* :func:`wave_pins`: what a wave keeps of the plan in force for the periods still running
  (their ToR-ToR bytes, and the fewest rows that keep their ToR pairs joined);
* :func:`scheme_choices`: the decision-log entries of the rewrite's choice between the
  forest and the trace's own weight sync;
* :func:`restore`: the forest torn down, the rows from before the weight sync back in the
  PoDs it used.
"""

from __future__ import annotations

import numpy as np

from ..spec import CircuitTable
from .connectivity import _ends, _spanning_rows
from .plan_rows import _in_pods, _rows, _table

__all__ = ["fanout_flows", "forest_schedule", "restore", "scheme_choices", "wave_pins"]


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


def scheme_choices(applied, spec) -> list:
    """One :class:`~rfabric.controllers.templates.Decision` per weight sync whose scheme the
    forest rewrite chose (``WeightSyncForest(choose="faster")``, ``applied`` as
    :func:`forest_schedule`): action ``"scheme: forest"`` (period: the forest's first) or
    ``"scheme: trace's own"`` (period: the weight sync's), the detail both predictions
    (:func:`rfabric.controllers.forest.sync_time`, in bytes at line rate and in seconds at
    the rate of ``spec``'s fastest GPU NIC)."""
    from .templates import Decision

    nic = np.asarray(spec.links.kind == "nic")
    rate = float(spec.links.rate_bps[nic].max()) if nic.any() else float(spec.links.rate_bps.max())
    out = []
    for r in applied:
        if r.rewrite.name != "weight_sync_forest":
            continue
        for c in r.schedule.get("choices", ()):
            forest = c["chosen"] == "forest"
            tf, to = c["forest_bytes"] * 8 / rate, c["own_bytes"] * 8 / rate
            detail = (
                f"iteration {c['iteration']}'s weight sync (period {c['period']}, {c['ops']} ops): predicted "
                f"{tf * 1e3:.3f} ms over the forest, {to * 1e3:.3f} ms over the trace's own ops "
                f"({c['forest_bytes']:.0f} and {c['own_bytes']:.0f} bytes at {rate / 1e9:g} Gb/s; "
                f"rfabric.controllers.forest.sync_time)"
            )
            period = c["forest_period"] if forest else c["period"]
            action = "scheme: forest" if forest else "scheme: trace's own"
            out.append(Decision(int(period), "weight_sync", action, 0, detail, c.get("job") or "job0"))
    return out


def fanout_flows(applied) -> dict:
    """The Phase B fan-out each wave's plan carries: ``{wave period: (src, dst, bytes, ready,
    phase B period)}``, the GPU pairs (int64) and bytes (float64) of every fan-out flow whose
    shard has reached its tree's root by the end of that wave, ``ready`` True for those it
    had reached before the wave (a holder inside the PoD, or an earlier wave: their fan-out
    may be running when the wave is planned), and the forest's Phase B period.

    Read from the rewritten trace (``applied``, as :func:`forest_schedule`): the ops of each
    forest's Phase B period, a Phase A op their (transitive) dependency within the period,
    whose period is its wave. A ``broadcast`` with algorithm ``chain`` sends between
    consecutive ranks, any other broadcast from its root to each receiver, a ``send`` from
    its first rank to its second; each flow carries the op's ``size_bytes``."""
    out: dict = {}
    for r in applied:
        if r.rewrite.name != "weight_sync_forest":
            continue
        a = r.trace.arrays()
        period = np.asarray(a["period"], dtype=np.int64)
        ids = np.asarray(a["op_id"], dtype=np.int64)
        row_of = {int(i): k for k, i in enumerate(ids.tolist())}
        kind_names, alg_names = a["kind_names"], a["algorithm_names"]
        ro, rk, do, dk = a["ranks_offsets"], a["ranks"], a["deps_offsets"], a["deps"]
        for f, first in r.schedule["forests"]:
            nw = f.n_waves
            if nw == 0:
                continue
            b_period = first + nw
            wave_of: dict[int, int] = {}  # row -> the wave that brings its shard (-1: none)
            srcs, dsts, sizes, waves = [], [], [], []  # per op: its flows' ends, bytes, wave
            for k in np.flatnonzero(period == b_period).tolist():
                w = -1
                for d in dk[do[k] : do[k + 1]].tolist():
                    j = row_of.get(int(d))
                    if j is None:
                        continue
                    pj = int(period[j])
                    w = max(w, pj - first if first <= pj < b_period else wave_of.get(j, -1))
                wave_of[k] = w
                rks = rk[ro[k] : ro[k + 1]].astype(np.int64)
                if rks.size < 2:
                    continue
                kind, alg = kind_names[a["kind"][k]], alg_names[a["algorithm"][k]]
                if kind == "broadcast" and alg == "chain":
                    src, dst = rks[:-1], rks[1:]
                elif kind == "broadcast":
                    src, dst = np.full(rks.size - 1, rks[0]), rks[1:]
                else:
                    src, dst = rks[:1], rks[1:2]
                srcs.append(src)
                dsts.append(dst)
                sizes.append(np.full(src.size, float(a["size_bytes"][k])))
                waves.append(np.full(src.size, w, dtype=np.int64))
            if not srcs:
                continue
            fs, fd, fb, fw = (np.concatenate(x) for x in (srcs, dsts, sizes, waves))
            for t in range(nw):
                m = fw <= t
                out[first + t] = (
                    fs[m].astype(np.int64),
                    fd[m].astype(np.int64),
                    fb[m].astype(np.float64),
                    fw[m] < t,
                    b_period,
                )
    return out


def wave_pins(lay, view, period: int, period_demand: dict, wave_pairs: np.ndarray, fanout=None):
    """``(running, tries)`` for a wave planned while other periods run: ``running`` their
    ToR x ToR bytes (what the uplinks the wave's chains leave should carry), ``tries`` the
    rows of ``view.plan`` to keep, first those that keep the running periods' ToR pairs
    joined, then those that also keep the wave's own (``wave_pairs``) joined.
    ``period_demand[p]`` is ``(ToR pair codes, bytes)`` of each period seen.

    ``fanout`` (an entry of :func:`fanout_flows`, its GPU pairs mapped to ToR pair codes:
    ``(codes, bytes, ready, phase B period)``) stands for the forest's Phase B period: the
    fan-out of the shards seeded by the end of this wave is carried (whether or not Phase B
    has started), the rest of Phase B (shards later waves bring) is not, and only the pairs
    of fan-outs that may already run (``ready``) are kept joined."""
    n = lay.num_tors
    running = np.zeros((n, n), dtype=np.float64)
    need, fan_need = [], []
    skip = -1
    if fanout is not None:
        codes, nbytes, ready, skip = fanout
        np.add.at(running, (codes // n, codes % n), nbytes)
        if ready.any():
            fan_need.append(codes[ready])
    for p in view.active_periods:
        if p != period and int(p) != skip and int(p) in period_demand:
            codes, nbytes = period_demand[int(p)]
            np.add.at(running, (codes // n, codes % n), nbytes)
            need.append(codes)
    # the fan-out's pairs are carried by the circuits allocated for ``running`` (the guard
    # checks they stay joined): its rows are pinned only when that strands traffic
    pin = [need, need + fan_need, need + fan_need + [wave_pairs]] if fan_need else [need, need + [wave_pairs]]
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
