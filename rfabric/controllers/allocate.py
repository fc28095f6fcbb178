"""OCS circuit allocation: the pair-bottleneck greedy of Algorithm 3 (paper appendix D).

A pure function of a demand matrix, an eligibility mask, per-endpoint port budgets and the
line rate; it knows nothing about the engine, fabrics or controllers, so a controller, a
benchmark or a user can call it alone.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..errors import SpecError
from ..units import parse_rate

__all__ = ["allocate_circuits"]

# Phase 1 walks the pairs in greedy order in blocks of _BLOCK: each block is filtered with
# numpy to "both ends still have a free port", and filtered again after _MISS dead pairs in a
# row, so Python walks live pairs plus short dead runs; it converts _WINDOW pairs at a time
# to Python ints. _FIRST is the smallest prefix taken.
_FIRST = 256
_BLOCK = 1024
_MISS = 16
_WINDOW = 64


def allocate_circuits(demand, eligible=None, port_budget=None, link_rate=None, *, return_steps=False):
    """Integer circuit multiplicities from the pair-bottleneck greedy (paper appendix D, Algorithm 3).

    Starting from no circuits, repeatedly add one full-duplex circuit to the endpoint pair
    ``{u, v}`` (``u != v``) that is eligible, has a free port at both ends and is demanded
    (``D[u, v] + D[v, u] > 0``), choosing the pair with the largest pair time

    ``T[u, v] = max(D[u, v], D[v, u]) / (c[u, v] * B)``  (``+inf`` while ``c[u, v] == 0``),

    and stop when no such pair is left (eq. 7 and Algorithm 3 of the paper).

    Parameters
    ----------
    demand : array_like or scipy.sparse matrix, shape (n, n)
        Directed demand ``D[u, v]``: bytes ``u`` sends to ``v`` in the coming period. Finite
        and non-negative; integer or float. The diagonal is ignored (an endpoint's traffic to
        itself never crosses the OCS). Dense or any ``scipy.sparse`` format (duplicates of a
        sparse entry are summed).
    eligible : array_like of bool, shape (n, n), optional
        Symmetric mask of the pairs the topology template lets the OCS join
        (``Eligible(tpl, u, v)``); ``None`` makes every pair eligible. The diagonal is ignored.
    port_budget : array_like of int, shape (n,)
        ``deg(v)``: allocatable OCS ports at each endpoint after reservations (free ports,
        failed ports masked), each ``>= 0``.
    link_rate : int or str
        Line rate ``B`` of one circuit in each direction, bit/s or a unit string such as
        ``"200Gbps"``. ``B`` divides every pair time alike, so it never changes the plan; it
        is validated so that callers pass the value the plan is meant for.
    return_steps : bool, default False
        Also return the number of greedy iterations (= circuits added = ``C.sum() // 2``),
        which is at most ``sum(port_budget) // 2`` (the bound of appendix D.2).

    Returns
    -------
    numpy.ndarray of int64, shape (n, n)
        ``C[u, v] = C[v, u]``: parallel circuits between ``u`` and ``v``; zero diagonal, zero
        on ineligible or undemanded pairs; row sums never exceed ``port_budget``.
        With ``return_steps=True``, the tuple ``(C, steps)``.

    Raises
    ------
    rfabric.SpecError
        If a shape disagrees, a demand is negative, NaN or infinite, ``eligible`` is not
        symmetric, a budget is negative or not a whole number, or ``link_rate`` is not a
        positive rate. The message names the argument and the offending row/column.

    Notes
    -----
    Choices the paper leaves open, made here:

    * **Order.** Pairs compare by ``(T, max(D[u, v], D[v, u]))``, both larger first, as in
      Algorithm 3, then by ``(min(u, v), max(u, v))`` ascending (lowest endpoint ids first),
      so the plan is a deterministic function of the inputs. The optional utilisation-aware
      tie-breaker the paper mentions for bipartite templates is not applied.
    * **Exact pair times.** Since ``B`` is common to every pair, pairs are ranked by
      ``max(D[u, v], D[v, u]) / c[u, v]`` computed in float64; integer demands above 2**53
      bytes are rounded to float64 first.
    * **Which circuits are added first.** All pairs start at ``T = +inf``, and a pair stays
      at ``+inf`` until it gets its first circuit, so every demanded eligible pair that still
      has free ports at both ends receives one circuit before any pair receives a second
      (phase 1, in order of decreasing ``max(D[u, v], D[v, u])``). Phase 2 then adds circuits
      to the pair of largest finite ``T`` from a heap with lazy deletion: a pair whose end has
      run out of ports is dropped when popped and never comes back, because budgets only go
      down. Both phases follow Algorithm 3 step for step; they are split only for speed.

    Cost: building the candidate pairs is vectorised over the demanded entries only (the
    paper's sparse enumeration of demanded edges and their reverses); phase 1 selects and
    sorts only growing prefixes of its order (``O(m)`` partial selection per prefix, the rest
    pruned to live pairs in between); phase 2 is ``O(k log k)`` for
    ``k <= sum(port_budget) / 2`` steps. Measured figures: ``bench/allocator_time.py``.
    """
    a, b, maxdir, budget, n = _candidates(demand, eligible, port_budget, link_rate)
    circuits = np.zeros((n, n), dtype=np.int64)
    if a.size == 0:
        return (circuits, 0) if return_steps else circuits

    free = budget.tolist()  # ports still free per endpoint (Python ints: scalar access is hot)
    alive = budget > 0  # numpy mirror of free > 0, for the vectorised block filter

    # Phase 1: T = +inf for every pair with no circuit; order by max directional demand
    # (descending), then (a, b) ascending. Only a prefix of that order can matter before the
    # ports run out, so it is materialised lazily: the next `want` candidates in order are
    # selected in O(m) (np.partition), sorted and walked; the rest is filtered down to pairs
    # whose ends both still have a free port, and the next, larger, prefix is taken.
    neg = -maxdir
    rest = np.arange(a.size)  # candidate ids still in play, ascending = (a, b) order
    first = []  # candidate ids that got their first circuit, in the order they got it
    want = max(_FIRST, int(budget.sum()))
    while rest.size:
        sel, rest = _take_first(neg, rest, want)
        want *= 4
        for pos in range(0, sel.size, _BLOCK):
            chunk = sel[pos : pos + _BLOCK]
            while chunk.size:
                # Filter to pairs whose ends both have a free port, walk them (converted to
                # Python _WINDOW at a time), and filter the remainder again once _MISS pairs
                # in a row were found dead (an endpoint ran out meanwhile): Python only walks
                # live pairs and short dead runs.
                chunk = chunk[alive[a[chunk]] & alive[b[chunk]]]
                pos, miss, stop = 0, 0, chunk.size
                while pos < stop:
                    w = chunk[pos : pos + _WINDOW]
                    for i, (k, u, v) in enumerate(zip(w.tolist(), a[w].tolist(), b[w].tolist(), strict=True)):
                        if free[u] and free[v]:
                            free[u] -= 1
                            free[v] -= 1
                            first.append(k)
                            miss = 0
                            if not free[u]:
                                alive[u] = False
                            if not free[v]:
                                alive[v] = False
                        else:
                            miss += 1
                            if miss == _MISS:
                                stop = pos + i + 1
                                break
                    pos += w.size
                chunk = chunk[stop:] if stop < chunk.size else chunk[:0]
        rest = rest[alive[a[rest]] & alive[b[rest]]]

    count = dict.fromkeys(first, 1)
    # Phase 2: finite pair times. Only pairs with a circuit can still be candidates: a pair
    # left at zero circuits after phase 1 has an end without a free port, for good.
    fk = np.asarray(first, dtype=np.int64)
    fk = fk[alive[a[fk]] & alive[b[fk]]]
    # Heap entries: (-T, -maxdir, a, b, id) with T = maxdir / c; the smallest is Algorithm
    # 3's argmax, ties broken by (a, b) ascending.
    heap = [
        (-m, -m, u, v, k)
        for k, u, v, m in zip(fk.tolist(), a[fk].tolist(), b[fk].tolist(), maxdir[fk].tolist(), strict=True)
    ]
    heapq.heapify(heap)
    steps = len(first)
    while heap:
        _, negm, u, v, k = heapq.heappop(heap)
        if not (free[u] and free[v]):
            continue
        free[u] -= 1
        free[v] -= 1
        c = count[k] + 1
        count[k] = c
        steps += 1
        if free[u] and free[v]:
            heapq.heappush(heap, (negm / c, negm, u, v, k))

    ks = np.fromiter(count.keys(), dtype=np.int64, count=len(count))
    cs = np.fromiter(count.values(), dtype=np.int64, count=len(count))
    circuits[a[ks], b[ks]] = cs
    circuits[b[ks], a[ks]] = cs
    return (circuits, steps) if return_steps else circuits


def _take_first(key, ids, k):
    """Split ``ids`` (ascending) into the ``k`` first by ``(key, id)``, in that order, and the
    others (ascending): an O(len) partial selection instead of a full sort."""
    if ids.size <= k:
        return ids[np.argsort(key[ids], kind="stable")], ids[:0]
    kv = key[ids]
    thr = np.partition(kv, k - 1)[k - 1]
    if thr == kv.max():  # the k-th is a tie with the last (all-to-all of equal sizes):
        return ids[np.argsort(kv, kind="stable")], ids[:0]  # one sort, no further prefixes
    take = kv < thr
    ties = np.flatnonzero(kv == thr)[: k - int(np.count_nonzero(take))]
    take[ties] = True
    sel = ids[take]
    return sel[np.argsort(kv[take], kind="stable")], ids[~take]


def _candidates(demand, eligible, port_budget, link_rate):
    """Validate the inputs; return the demanded eligible pairs ``a < b`` sorted by ``(a, b)``,
    their ``max(D[a, b], D[b, a])`` (float64, > 0), the budgets (int64) and ``n``."""
    if link_rate is None:
        raise SpecError("allocate_circuits: link_rate is required (bit/s or a string like '200Gbps')")
    try:
        parse_rate(link_rate)  # (no bare-number floor: B never changes the plan, see above)
    except SpecError as err:
        raise SpecError(f"allocate_circuits: link_rate: {err}") from None

    a, b, m, n = _demand_pairs(demand)

    if port_budget is None:
        raise SpecError("allocate_circuits: port_budget is required (one int per endpoint)")
    budget = np.asarray(port_budget)
    if budget.ndim != 1 or budget.shape[0] != n:
        raise SpecError(
            f"allocate_circuits: port_budget has shape {budget.shape}, expected ({n},) to match demand"
        )
    if budget.dtype == bool or not (
        np.issubdtype(budget.dtype, np.integer) or np.issubdtype(budget.dtype, np.floating)
    ):
        raise SpecError(f"allocate_circuits: port_budget has dtype {budget.dtype}, expected integers")
    if np.issubdtype(budget.dtype, np.floating):
        bad = np.flatnonzero(~np.isfinite(budget) | (budget != np.round(budget)))
        if bad.size:
            v = int(bad[0])
            raise SpecError(
                f"allocate_circuits: port_budget[{v}] = {budget[v].item()!r} is not a whole number of ports"
            )
    bad = np.flatnonzero(budget < 0)
    if bad.size:
        v = int(bad[0])
        raise SpecError(f"allocate_circuits: port_budget[{v}] = {budget[v].item()!r} is negative")
    budget = budget.astype(np.int64)

    if eligible is not None:
        elig = _dense(eligible, "eligible")
        if elig.shape != (n, n):
            raise SpecError(
                f"allocate_circuits: eligible has shape {elig.shape}, expected ({n}, {n}) to match demand"
            )
        if elig.dtype != bool:
            if not (np.issubdtype(elig.dtype, np.integer) or np.issubdtype(elig.dtype, np.floating)):
                raise SpecError(f"allocate_circuits: eligible has dtype {elig.dtype}, expected bool")
            bad = np.argwhere((elig != 0) & (elig != 1))
            if bad.size:
                u, v = (int(x) for x in bad[0])
                raise SpecError(
                    f"allocate_circuits: eligible[{u}, {v}] = {elig[u, v].item()!r} is not a bool (0 or 1)"
                )
            elig = elig != 0
        off = elig != elig.T
        np.fill_diagonal(off, False)
        if off.any():
            u, v = (int(x) for x in np.argwhere(off)[0])
            raise SpecError(
                f"allocate_circuits: eligible is not symmetric: eligible[{u}, {v}] = {bool(elig[u, v])} "
                f"but eligible[{v}, {u}] = {bool(elig[v, u])}"
            )
        keep = elig[a, b]
        a, b, m = a[keep], b[keep], m[keep]

    keep = (budget[a] > 0) & (budget[b] > 0)
    return a[keep], b[keep], m[keep], budget, n


def _dense(x, what):
    if hasattr(x, "toarray") and hasattr(x, "nnz"):  # scipy.sparse
        x = x.toarray()
    x = np.asarray(x)
    if x.ndim != 2:
        raise SpecError(f"allocate_circuits: {what} has shape {x.shape}, expected a square matrix")
    return x


def _demand_pairs(demand):
    """Demanded pairs ``a < b`` in ``(a, b)`` order with ``max(D[a, b], D[b, a])``, and ``n``."""
    if hasattr(demand, "tocoo") and hasattr(demand, "nnz"):  # scipy.sparse, any format
        if demand.ndim != 2 or demand.shape[0] != demand.shape[1]:
            raise SpecError(f"allocate_circuits: demand has shape {demand.shape}, expected (n, n)")
        n = int(demand.shape[0])
        coo = demand.tocoo()
        coo.sum_duplicates()
        rows = np.asarray(coo.row, dtype=np.int64)
        cols = np.asarray(coo.col, dtype=np.int64)
        vals = _check_values(np.asarray(coo.data), lambda i: (int(rows[i]), int(cols[i])))
        return _pairs(rows, cols, vals, n)

    d = np.asarray(demand)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise SpecError(f"allocate_circuits: demand has shape {d.shape}, expected (n, n)")
    n = int(d.shape[0])
    _check_values(d, lambda i: tuple(int(x) for x in np.unravel_index(i, d.shape)))
    flat = d.reshape(-1)
    if np.count_nonzero(flat) * 8 <= flat.size:  # mostly zeros: go by the entries, as sparse
        idx = np.flatnonzero(flat)
        rows, cols = np.divmod(idx, n)
        return _pairs(rows, cols, flat[idx], n)
    d = d.astype(np.float64, copy=False)
    upper = np.triu(np.maximum(d, d.T), 1)
    idx = np.flatnonzero(upper)
    a, b = np.divmod(idx, n)
    return a, b, upper.ravel()[idx], n


def _pairs(rows, cols, vals, n):
    """Entries ``(rows, cols, vals)`` of D (no duplicates) -> the pairs as `_demand_pairs`."""
    keep = (vals > 0) & (rows != cols)
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    if rows.size == 0:
        return rows, cols, np.zeros(0), n
    key = np.minimum(rows, cols) * n + np.maximum(rows, cols)
    order = np.argsort(key, kind="stable")
    key, vals = key[order], vals[order]
    start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    m = np.maximum.reduceat(vals, start)
    key = key[start]
    return key // n, key % n, m.astype(np.float64), n


def _check_values(vals, where):
    if vals.dtype == bool or not (
        np.issubdtype(vals.dtype, np.integer) or np.issubdtype(vals.dtype, np.floating)
    ):
        raise SpecError(f"allocate_circuits: demand has dtype {vals.dtype}, expected bytes as numbers")
    flat = vals.reshape(-1)
    if np.issubdtype(vals.dtype, np.floating):
        bad = np.flatnonzero(~np.isfinite(flat))
        if bad.size:
            u, v = where(int(bad[0]))
            raise SpecError(f"allocate_circuits: demand[{u}, {v}] = {flat[bad[0]].item()!r} is not finite")
    bad = np.flatnonzero(flat < 0)
    if bad.size:
        u, v = where(int(bad[0]))
        raise SpecError(f"allocate_circuits: demand[{u}, {v}] = {flat[bad[0]].item()!r} is negative")
    return vals
