"""Keeping a plan's ToRs connected (paper §5.4, steps 9, 11 and 12 of
:class:`~rfabric.controllers.StageAwareController`).

* :func:`_connect` adds the fabric's default channels back until the ToRs that must reach
  each other do, taking ports from allocated channels of ToR pairs that keep another one;
* :func:`_spanning_rows` picks the fewest rows of a plan that keep some ToR pairs joined (a
  spanning forest of its channels): what a forest wave, or a plan that would otherwise split
  the fabric, keeps of the plan in force.
"""

from __future__ import annotations

import numpy as np

from ..spec import CircuitTable

__all__ = ["_connect", "_ends", "_kept_pairs", "_missing", "_spanning_rows", "_union_find"]


def _missing(rws, present) -> tuple:
    """The rows of a chain not already among ``present`` ((device, low link, high link) keys)."""
    return tuple(r for r in rws if (r[0], min(r[1], r[2]), max(r[1], r[2])) not in present)


def _ends(rows) -> set:
    """The (device, link) ends the rows occupy (a link has one end at each of its devices)."""
    return {e for r in rows for e in ((r[0], r[1]), (r[0], r[2]))}


def _key_codes(o, a, b, num_links: int) -> np.ndarray:
    """One integer per row ``(device, link, link)``, equal for equal (device, low link, high
    link) keys."""
    o, a, b = (np.asarray(x, dtype=np.int64) for x in (o, a, b))
    return (o * num_links + np.minimum(a, b)) * num_links + np.maximum(a, b)


def _default_missing(lay, present) -> np.ndarray:
    """Per row of :meth:`RFabricLayout.default_rows`: whether its key is not among
    ``present`` ((device, low link, high link) keys), as :func:`_missing` asks row by row."""
    o, a, b, _, _ = lay.default_rows()
    nl = lay.spec.num_links
    if not present:
        return np.ones(len(o), dtype=bool)
    k = np.array(list(present), dtype=np.int64).reshape(-1, 3)
    return ~np.isin(_key_codes(o, a, b, nl), _key_codes(k[:, 0], k[:, 1], k[:, 2], nl))


def _per_channel(chan, mask, n) -> np.ndarray:
    """Per default channel, whether any of its rows is in ``mask``."""
    return np.bincount(chan, weights=mask, minlength=n) > 0


def _kept_pairs(lay, base, kept_set) -> list[tuple[int, int]]:
    """The ToR pairs joined by the channels of ``kept_set`` (rows of the plan ``base``, as
    :func:`~rfabric.controllers.plan_rows._rows` gives them): the channels of ``base`` whose
    every row is kept. A channel is a chain of circuits end to end, so the channels of a
    subset of a plan's rows are the plan's channels that lie wholly in it; ``base``'s
    channels are cached (the plan in force is resolved at every call), a subset's would be
    resolved again."""
    return [(a, b) for rows, a, b in lay._channels(base) if all(r in kept_set for r in rows)]


def _union_find(n: int):
    """(find, parent) over ``0 .. n-1``: join ``a`` and ``b`` with
    ``parent[find(a)] = find(b)``."""
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    return find, parent


def _connect(lay, kept, new, n_alloc, failed, defaults, devices, in_kept, kept_pairs=None) -> int:
    """Add default channels (``defaults``: (rows, ToR, ToR)) until the ToRs that must reach
    each other do (with PXN the ToRs of each rail, else all), freeing ends from allocated
    channels (``new[:n_alloc]``) whose ToR pair keeps another channel; kept rows, failed
    links and default channels already added are never touched. Modifies ``new``; returns
    the number of allocated channels removed. ``kept_pairs``: the ToR pairs the channels of
    ``kept`` join (:meth:`RFabricLayout.channels_of`, computed when not given).

    Whether a group is still apart is kept incrementally: per component the groups it
    touches, and the count of (component, group) pairs beyond one component per group,
    updated at each join (not every ToR's root recomputed after each channel added)."""
    n = lay.num_tors
    find, parent = _union_find(n)

    owner = {}  # (device, link) end -> index of the unit in `new` using it
    pair_count: dict[tuple[int, int], int] = {}
    for i, (rws, a, b) in enumerate(new):
        for e in _ends(rws):
            owner[e] = i
        pair_count[(min(a, b), max(a, b))] = pair_count.get((min(a, b), max(a, b)), 0) + 1
    blocked = _ends(kept)
    if kept_pairs is None:
        kept_pairs = lay.channels_of(kept)
    for a, b in list(kept_pairs) + [(a, b) for _, a, b in new]:
        parent[find(a)] = find(b)
    group = lay.tor_rail if lay.pxn else np.zeros(n, dtype=np.int64)
    touches: dict[int, set] = {}  # component root -> the groups of its ToRs
    for t, g in enumerate(group.tolist()):
        touches.setdefault(find(t), set()).add(g)
    # sum over groups of (components holding one of its ToRs - 1): 0 when no group is split
    apart = sum(len(gs) for gs in touches.values()) - len(set(group.tolist()))

    def join(a, b) -> None:
        nonlocal apart
        ra, rb = find(a), find(b)
        if ra == rb:
            return
        ga, gb = touches.pop(ra), touches.pop(rb)
        apart -= len(ga & gb)
        parent[ra] = rb
        touches[rb] = ga | gb

    if not apart:
        return 0
    cands = _candidates(lay, defaults, blocked, failed, devices, in_kept)
    removed = set()
    missing: dict[int, tuple] = {}
    # candidates that free the fewest allocated channels first (none, then one, ...)
    for budget in range(4):
        for i in cands:
            full, a, b = defaults[i]
            if find(a) == find(b):
                continue
            rws = missing.get(i)
            if rws is None:
                rws = missing[i] = _missing(full, in_kept)
            ends = _ends(rws)
            victims = {owner[e] for e in ends if e in owner}
            if len(victims) > budget:
                continue
            ok = True
            for v in victims:
                va, vb = new[v][1], new[v][2]
                if v in removed or v >= n_alloc or pair_count[(min(va, vb), max(va, vb))] < 2:
                    ok = False
                    break
            if not ok:
                continue
            for v in victims:
                va, vb = new[v][1], new[v][2]
                pair_count[(min(va, vb), max(va, vb))] -= 1
                removed.add(v)
                for e in _ends(new[v][0]):
                    owner.pop(e, None)
            new.append((rws, a, b))
            for e in ends:
                owner[e] = len(new) - 1
            join(a, b)
            if not apart:
                break
        if not apart:
            break
    for v in sorted(removed, reverse=True):
        del new[v]
    return len(removed)


def _candidates(lay, defaults, blocked, failed, devices, in_kept) -> list[int]:
    """Indices of the ``defaults`` the repair may add, whatever it adds or gives up: some row
    missing from ``in_kept``, and every missing row on one of ``devices``, clear of
    ``blocked`` ends and of ``failed`` links. For the fabric's own default channels this
    is read from their rows' arrays, else channel by channel."""
    if defaults is lay.default_channels() and len(defaults):
        o, a, b, chan, _ = lay.default_rows()
        nl = lay.spec.num_links
        miss = _default_missing(lay, in_kept)
        dev = np.isin(o, np.fromiter(devices, dtype=np.int64, count=len(devices)))
        dead = np.fromiter(failed, dtype=np.int64, count=len(failed))
        bad = np.isin(a, dead) | np.isin(b, dead) | ~dev
        if blocked:
            ends = np.array(list(blocked), dtype=np.int64).reshape(-1, 2)
            codes = ends[:, 0] * nl + ends[:, 1]
            bad |= np.isin(o * nl + a, codes) | np.isin(o * nl + b, codes)
        n = len(defaults)
        return np.flatnonzero(_per_channel(chan, miss, n) & ~_per_channel(chan, miss & bad, n)).tolist()
    out = []
    for i, (full, _, _) in enumerate(defaults):
        rws = _missing(full, in_kept)
        if not rws or not all(r[0] in devices for r in rws):
            continue
        if _ends(rws) & blocked or any(r[1] in failed or r[2] in failed for r in rws):
            continue
        out.append(i)
    return out


def _spanning_rows(lay, plan: CircuitTable, codes: np.ndarray, failed_ports) -> frozenset:
    """Rows of ``plan`` that keep joined every ToR pair (``codes``: ``ts * num_tors + td``)
    it joins now: a spanning forest of its channels (single circuits before chains, so a
    PoD's own ToR-ToR circuits carry its fan-out), pruned of the branches that lead to no
    ToR of a pair."""
    n = lay.num_tors
    dead = set(np.asarray(failed_ports).tolist())
    find, parent = _union_find(n)

    units = sorted(lay._channels(plan), key=lambda u: len(u[0]))
    adj: dict[int, list[tuple[int, int]]] = {}
    forest = []
    for rows, a, b in units:
        if a == b or any(r[1] in dead or r[2] in dead for r in rows) or find(a) == find(b):
            continue
        parent[find(a)] = find(b)
        adj.setdefault(a, []).append((b, len(forest)))
        adj.setdefault(b, []).append((a, len(forest)))
        forest.append(rows)
    wanted = set((codes // n).tolist()) | set((codes % n).tolist())
    alive = [True] * len(forest)
    degree = {t: len(e) for t, e in adj.items()}
    leaves = [t for t, d in degree.items() if d == 1 and t not in wanted]
    while leaves:
        t = leaves.pop()
        for u, k in adj[t]:
            if alive[k]:
                alive[k] = False
                degree[t] -= 1
                degree[u] -= 1
                if degree[u] == 1 and u not in wanted:
                    leaves.append(u)
    return frozenset(r for k, rows in enumerate(forest) if alive[k] for r in rows)
