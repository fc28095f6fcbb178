"""Circuit plans from ToR-level demand (paper appendix D; steps 4-9 of
:class:`~rfabric.controllers.StageAwareController`).

:func:`materialize` turns a ToR x ToR demand over some PoDs of an RFabric into concrete OCS
rows: rows kept as they are, the two-tier allocation (:func:`allocate_circuits` per PoD and
across the core, Core-Agg coupling), chains placed on ToR pairs (:func:`_pair_chains`),
ToR-ToR circuits with the relay legs of unchained traffic (:func:`_relay_demand`), the
default channels on leftover ports and the connectivity repair
(:func:`~rfabric.controllers.connectivity._connect`).
"""

from __future__ import annotations

import numpy as np

from .allocate import allocate_circuits
from .connectivity import _connect, _default_missing, _kept_pairs, _missing, _per_channel
from .plan_rows import _rows, _table

__all__ = ["materialize", "_pair_chains", "_relay_demand"]


def materialize(
    lay,
    view,
    base,
    D,
    pods,
    protected,
    forced_chains,
    running=None,
    pinned=frozenset(),
    blocked=frozenset(),
    out=None,
):
    """(plan, detail), or a str saying why the plan is infeasible.

    ``pinned``: rows of ``base`` kept as they are; ``blocked``: free ports the plan may not
    use (another job's share, :mod:`.tenants`). ``out``, a dict, receives ``"kept"``: the
    rows of ``base`` the plan keeps as they are, and ``"filled"``: the default channels put
    on leftover ports or added back for connectivity (the rest of the plan is allocated for
    ``D``)."""
    failed = set(view.failed_ports.tolist())
    pods = set(pods)
    if forced_chains is not None:
        pods |= {int(lay.tor_pod[lay.gpu_tor[s]]) for s, _, _ in forced_chains}
        pods |= {int(lay.tor_pod[lay.gpu_tor[d]]) for _, d, _ in forced_chains}
    protected_pods = {int(lay.tor_pod[t]) for t in protected} - pods
    pol = lay.port_of_link
    core_set = set(lay.core_nodes.tolist())

    # 1. rows kept as they are
    rows = _rows(base)
    partner_core = {}  # core port link -> its core row
    for r in rows:
        if r[0] in core_set:
            partner_core[r[1]] = r
            partner_core[r[2]] = r
    kept, kept_core_ports = [], set()
    for r in rows:
        if r[1] in failed or r[2] in failed:
            continue
        if r in pinned:
            kept.append(r)
            continue
        if r[0] in core_set:
            pa_, pb_ = pol[r[1]][1], pol[r[2]][1]
            inside = pa_ not in pods and pb_ not in pods
            chain_kept = (pa_ in pods) != (pb_ in pods) and (
                (pa_ in protected_pods) or (pb_ in protected_pods)
            )
            if inside or chain_kept:
                kept.append(r)
                if chain_kept:
                    kept_core_ports |= {r[1], r[2]}
            continue
        p = lay.agg_pod.get(r[0])
        if p is None or p not in pods:
            kept.append(r)
            continue
        ka, kb = pol.get(r[1]), pol.get(r[2])
        if ka and kb and ka[0] == kb[0] == "tor" and ka[1] in protected and kb[1] in protected:
            kept.append(r)
        elif (
            ka
            and kb
            and {ka[0], kb[0]} == {"tor", "core"}
            and (r[1] in kept_core_ports or r[2] in kept_core_ports)
        ):
            kept.append(r)
    # a chain kept on the core side keeps its lift row, which may come after it: second pass
    kept_set = set(kept)
    for r in rows:
        if r in kept_set or r[1] in failed or r[2] in failed or lay.agg_pod.get(r[0]) not in pods:
            continue
        if r[1] in kept_core_ports or r[2] in kept_core_ports:
            kept.append(r)
            kept_set.add(r)
    taken = {x for r in kept for x in (r[1], r[2])} | failed | blocked

    # 2. free ports of the re-planned PoDs
    free_tor: dict[tuple[int, int], list[int]] = {}  # (ToR, agg) -> links
    for link, t, g in zip(
        lay.tor_port_link.tolist(), lay.tor_port_tor.tolist(), lay.tor_port_agg.tolist(), strict=True
    ):
        if link not in taken and int(lay.tor_pod[t]) in pods:
            free_tor.setdefault((t, g), []).append(link)
    free_core: dict[tuple[int, int, int], list[int]] = {}  # (PoD, agg, core) -> links
    for link, p, g, c in zip(
        lay.core_port_link.tolist(),
        lay.core_port_pod.tolist(),
        lay.core_port_agg.tolist(),
        lay.core_port_core.tolist(),
        strict=True,
    ):
        if link not in taken and p in pods:
            free_core.setdefault((p, g, c), []).append(link)
    for lst in list(free_tor.values()) + list(free_core.values()):
        lst.sort()
    tor_budget = np.zeros(lay.num_tors, dtype=np.int64)
    for (t, _), lst in free_tor.items():
        tor_budget[t] += len(lst)
    pod_budget = np.zeros(lay.pods, dtype=np.int64)
    for (p, _, _), lst in free_core.items():
        pod_budget[p] += len(lst)

    # 3. core plan and lift slots
    rate = lay.link_rate_bps
    pod_of = lay.tor_pod
    if forced_chains is not None:
        chain_list = []
        if forced_chains:  # (the ToR pairs of every edge at once)
            fs, fd, fc = (np.array(x, dtype=np.int64) for x in zip(*forced_chains, strict=True))
            ts, td, _ = lay.tor_pairs(fs, fd)
            for t1, t2, c in zip(ts.tolist(), td.tolist(), fc.tolist(), strict=True):
                chain_list += [(t1, t2)] * c
        # the uplinks the chains leave carry the running periods' ToR-ToR bytes (Phase B
        # of the shards already seeded) and the relay legs of unchained edges
        own_D = running if running is not None else np.zeros_like(D)
        intra_C = {p: None for p in pods}
    else:
        # the PoD x PoD demand: bincount adds each bin's weights in input order, as np.add.at
        # did; over the ToR pairs with demand only, in row-major order (the zero terms it
        # skips change no sum), not every ToR pair (4 M at 16,384 GPUs)
        si, sj = np.nonzero(D)
        ps, pd = pod_of[si], pod_of[sj]
        w = D[si, sj] * (ps != pd)
        P = np.bincount((ps * lay.pods + pd).astype(np.intp), weights=w, minlength=lay.pods * lay.pods)
        P = P.reshape(lay.pods, lay.pods)

        def agg(p, u_budget):
            """allocate_circuits over PoD p's ToRs and its boundary endpoint U."""
            tors = lay.pod_tors[p]
            k = len(tors)
            inter = pod_of[tors][:, None] != pod_of[None, :]  # its ToRs' rows of "other PoD"
            Dp = np.zeros((k + 1, k + 1))
            Dp[:k, :k] = D[np.ix_(tors, tors)]
            Dp[:k, k] = (D[tors] * inter).sum(axis=1)
            Dp[k, :k] = (D[:, tors] * inter.T).sum(axis=0)
            elig = np.zeros((k + 1, k + 1), dtype=bool)
            elig[:k, :k] = lay.tor_eligible(tors)
            elig[:k, k] = elig[k, :k] = True
            return tors, allocate_circuits(Dp, elig, np.append(tor_budget[tors], u_budget), rate)

        # pass 1: what lift/drop access each PoD's ToRs give with U = its free core ports;
        # the core is then allocated within min(core ports, access) per PoD (coupled
        # budgets); pass 2 re-allocates each PoD with U = its planned core circuits
        core_c = np.zeros((lay.pods, lay.pods), dtype=np.int64)
        if lay.pods > 1 and P.sum() > 0:
            access = np.zeros(lay.pods, dtype=np.int64)
            for p in sorted(pods):
                tors, C = agg(p, pod_budget[p])
                access[p] = C[: len(tors), len(tors)].sum()
            core_c = allocate_circuits(P, ~np.eye(lay.pods, dtype=bool), np.minimum(pod_budget, access), rate)
        lifts = np.zeros(lay.num_tors, dtype=np.int64)
        intra_C = {}
        for p in sorted(pods):
            tors, C = agg(p, core_c[p].sum())
            k = len(tors)
            lift = int(C[:k, k].sum())
            if lift != int(core_c[p].sum()):
                return (
                    f"Core-Agg coupling: PoD {p} has {int(core_c[p].sum())} core circuits planned but its "
                    f"ToRs' free uplinks carry only {lift} lift/drop circuits"
                )
            lifts[tors] = C[:k, k]
            intra_C[p] = (tors, C[:k, :k])
        chain_list = _pair_chains(D, pod_of, lifts, core_c)
        own_D = D

    # 4. reuse: circuits and chains already in place between the same ToRs
    exist_intra: dict[tuple[int, int], list[tuple]] = {}
    exist_chain: dict[tuple[int, int], list[tuple]] = {}
    lift_of = {}  # core port link -> (agg row, ToR)
    for r in rows:
        g = lay.agg_pod.get(r[0])
        if g is None or g not in pods or r in kept_set:
            continue
        ka, kb = pol.get(r[1]), pol.get(r[2])
        if not ka or not kb:
            continue
        if ka[0] == kb[0] == "tor":
            exist_intra.setdefault((min(ka[1], kb[1]), max(ka[1], kb[1])), []).append(r)
        elif {ka[0], kb[0]} == {"tor", "core"}:
            core_port = r[1] if ka[0] == "core" else r[2]
            lift_of[core_port] = (r, ka[1] if ka[0] == "tor" else kb[1])
    for r in rows:
        if r[0] in core_set and r not in kept_set and r[1] in lift_of and r[2] in lift_of:
            (ra, ta), (rb, tb) = lift_of[r[1]], lift_of[r[2]]
            key = (ta, tb) if ta <= tb else (tb, ta)
            exist_chain.setdefault(key, []).append((ra, r, rb) if ta <= tb else (rb, r, ra))

    def take(lst, x):
        if x in lst:
            lst.remove(x)
            return True
        return False

    def port_free(t, g, link):
        return link in free_tor.get((t, g), [])

    # free_core's (agg, links) per (PoD, core), in its order: the chains' search below reads
    # one PoD's aggs for one core, not every entry (which grew with the fabric, per chain)
    aggs_of: dict[tuple[int, int], list[tuple[int, list[int]]]] = {}
    for (pp, g, cc), lst in free_core.items():
        aggs_of.setdefault((pp, cc), []).append((g, lst))
    new = []
    unchained = 0
    # 5. chains (core circuits) first: they are coupled across two PoDs
    for t1, t2 in chain_list:
        a, b = (t1, t2) if t1 <= t2 else (t2, t1)
        placed = False
        for ra, rc, rb in exist_chain.get((a, b), []):
            pa_, pb_ = pol[rc[1]][1], pol[rc[2]][1]
            ka = rc[1] if pa_ == pod_of[a] else rc[2]
            kb = rc[2] if ka == rc[1] else rc[1]
            ta_port = ra[1] if ra[2] == ka else ra[2]
            tb_port = rb[1] if rb[2] == kb else rb[2]
            ga, gb, c = ra[0], rb[0], rc[0]
            if (
                port_free(a, ga, ta_port)
                and port_free(b, gb, tb_port)
                and ka in free_core.get((int(pod_of[a]), ga, c), [])
                and kb in free_core.get((int(pod_of[b]), gb, c), [])
            ):
                take(free_tor[(a, ga)], ta_port)
                take(free_tor[(b, gb)], tb_port)
                take(free_core[(int(pod_of[a]), ga, c)], ka)
                take(free_core[(int(pod_of[b]), gb, c)], kb)
                new.append(((ra, rc, rb), a, b))
                exist_chain[(a, b)].remove((ra, rc, rb))
                placed = True
                break
        if placed:
            continue
        best = None
        pa_, pb_ = int(pod_of[a]), int(pod_of[b])
        for c in lay.core_nodes.tolist():
            ends = []
            for t, p in ((a, pa_), (b, pb_)):
                opts = [
                    (len(free_tor[(t, g)]), g)
                    for g, lst in aggs_of.get((p, c), ())
                    if lst and free_tor.get((t, g))
                ]
                if not opts:
                    break
                ends.append(max(opts, key=lambda o: (o[0], -o[1]))[1])
            if len(ends) == 2:
                room = min(len(free_core[(pa_, ends[0], c)]), len(free_core[(pb_, ends[1], c)]))
                if best is None or room > best[0]:
                    best = (room, c, ends[0], ends[1])
        if best is None and forced_chains is not None:
            unchained += 1  # a forest wave takes the ports left by running periods
            continue
        if best is None:
            return (
                f"Core-Agg coupling: no OCS-Core device has a free port from PoD {pa_} and from PoD "
                f"{pb_} reachable from free uplinks of ToRs {int(lay.tors[a])} and {int(lay.tors[b])}"
            )
        _, c, ga, gb = best
        ka = free_core[(pa_, ga, c)].pop(0)
        kb = free_core[(pb_, gb, c)].pop(0)
        pa_port = free_tor[(a, ga)].pop(0)
        pb_port = free_tor[(b, gb)].pop(0)
        new.append((((ga, pa_port, ka), (c, ka, kb), (gb, kb, pb_port)), a, b))

    # 6. intra-PoD ToR-ToR circuits, re-allocated now that the chains' ToRs are known:
    # the PoD's own ToR-ToR demand plus the relay legs of inter-PoD traffic whose ToR
    # pair got no chain (sender -> a chain's ToR in its PoD, chain's far ToR -> the
    # receiver), over the uplinks the chains left
    unplaced = 0
    relayed = 0.0
    ends = np.zeros(lay.num_tors, dtype=np.int64)
    for _, a, b in new:
        ends[a] += 1
        ends[b] += 1
    R, relayed = _relay_demand(D, pod_of, [(a, b) for _, a, b in new], lay)
    for p in sorted(intra_C):
        tors = lay.pod_tors[p]
        Dp = own_D[np.ix_(tors, tors)] + R[np.ix_(tors, tors)]
        room = np.maximum(tor_budget[tors] - ends[tors], 0)
        intra_C[p] = (tors, allocate_circuits(Dp, lay.tor_eligible(tors), room, rate))
    for p in sorted(intra_C):
        tors, C = intra_C[p]
        iu, ju = np.nonzero(np.triu(C, 1))
        for i, j in zip(iu.tolist(), ju.tolist(), strict=True):
            a, b = int(tors[i]), int(tors[j])
            need = int(C[i, j])
            for r in exist_intra.get((a, b), []):
                if need == 0:
                    break
                ta = pol[r[1]][1]
                pa_port, pb_port = (r[1], r[2]) if ta == a else (r[2], r[1])
                if port_free(a, r[0], pa_port) and port_free(b, r[0], pb_port):
                    take(free_tor[(a, r[0])], pa_port)
                    take(free_tor[(b, r[0])], pb_port)
                    new.append(((r,), a, b))
                    need -= 1
            for _ in range(need):
                opts = [
                    (min(len(free_tor[(a, g)]), len(free_tor.get((b, g), []))), -g, g)
                    for (t, g) in free_tor
                    if t == a and free_tor[(a, g)] and free_tor.get((b, g))
                ]
                if not opts:
                    unplaced += 1
                    continue
                g = max(opts)[2]
                new.append((((g, free_tor[(a, g)].pop(0), free_tor[(b, g)].pop(0)),), a, b))

    # 7. leftover ports: the fabric's default channels where all their ports are free
    n_alloc = len(new)
    used = {x for r in kept for x in (r[1], r[2])} | {x for u in new for r in u[0] for x in (r[1], r[2])}
    used |= failed | blocked
    agg_in = {g for g, p in lay.agg_pod.items() if p in pods}
    defaults = lay.default_channels()
    in_kept = {(r[0], min(r[1], r[2]), max(r[1], r[2])) for r in kept}
    do, da, db, dchan, disjoint = lay.default_rows()
    if disjoint and len(defaults):
        # no link is in two default channels, so one added takes no port another needs: each
        # is added iff its missing rows are on re-planned devices with free ports, read from
        # the rows' arrays (the same channels, in the same order, as channel by channel)
        miss = _default_missing(lay, in_kept)
        taken_arr = np.fromiter(used, dtype=np.int64, count=len(used))
        ok_dev = np.fromiter(agg_in | core_set, dtype=np.int64, count=len(agg_in | core_set))
        bad = np.isin(da, taken_arr) | np.isin(db, taken_arr) | ~np.isin(do, ok_dev)
        nd = len(defaults)
        fill = _per_channel(dchan, miss, nd) & ~_per_channel(dchan, miss & bad, nd)
        for i in np.flatnonzero(fill).tolist():
            rws, a, b = defaults[i]
            need = _missing(rws, in_kept)
            new.append((need, a, b))
            used |= {x for r in need for x in (r[1], r[2])}
    else:
        for rws, a, b in defaults:
            need = _missing(rws, in_kept)
            ports = {x for r in need for x in (r[1], r[2])}
            if not need or ports & used or not all(r[0] in agg_in or r[0] in core_set for r in need):
                continue
            new.append((need, a, b))
            used |= ports
    filled = len(new) - n_alloc

    # 8. connectivity (§5.4): ToRs that must reach each other (with PXN the ToRs of one
    # rail, else all) and do not get a default channel back, taking its ports from
    # allocated channels of ToR pairs that keep another channel
    n_intra = sum(1 for u in new[:n_alloc] if len(u[0]) == 1)
    stolen = _connect(
        lay,
        kept,
        new,
        n_alloc,
        failed | blocked,
        defaults,
        agg_in | core_set,
        in_kept,
        _kept_pairs(lay, base, set(kept)),
    )
    rows_new = [r for u in new for r in u[0]]
    detail = (
        f"PoDs {sorted(pods)}: {len(chain_list)} core chains, "
        f"{n_intra} ToR-ToR circuits, {filled} default "
        f"channels on leftover ports, {len(kept)} rows kept"
    )
    if stolen:
        detail += f", {stolen} allocated channels given up to keep ToRs connected"
    if unplaced:
        detail += f", {unplaced} ToR-ToR circuits found no OCS-Agg with a free port at both ToRs"
    if unchained:
        detail += f", {unchained} of the wave's core chains found no free ports (running periods keep theirs)"
    if out is not None:
        out["kept"] = set(kept)
        out["filled"] = {r for u in new[n_alloc - stolen :] for r in u[0]}
    return _table(kept + rows_new), detail


def _relay_demand(D, pod_of, chains, lay) -> tuple[np.ndarray, float]:
    """Intra-PoD relay legs of the inter-PoD demand that has no chain of its own.

    Bytes from ToR ``a`` (PoD ``p``) to ``b`` (PoD ``q``) without a chain ``(a, b)`` take a
    chain ``(x, y)`` between ``p`` and ``q`` and cross the PoDs' OCS-Agg on the legs
    ``a -> x`` and ``y -> b`` (those with ``x = a`` or ``y = b`` first: one leg, the shortest
    path, as the switches' routing prefers), split evenly over the chains that need the
    fewest legs; with PXN only chains whose ToRs are on the rails of ``a`` and ``b`` (a leg
    joins same-rail ToRs). Returns the leg demand ``R`` (ToR x ToR) and the relayed bytes.
    PoD pairs without any chain (traffic relayed through a third PoD) add nothing."""
    n = len(pod_of)
    R = np.zeros((n, n))
    by_pp: dict[tuple[int, int], list[tuple[int, int]]] = {}
    direct = set()
    for t1, t2 in chains:
        by_pp.setdefault((int(pod_of[t1]), int(pod_of[t2])), []).append((t1, t2))
        by_pp.setdefault((int(pod_of[t2]), int(pod_of[t1])), []).append((t2, t1))
        direct |= {(t1, t2), (t2, t1)}
    rail = lay.tor_rail
    src, dst = np.nonzero(D > 0)  # row-major, then the pairs across PoDs
    inter = pod_of[src] != pod_of[dst]
    src, dst = src[inter], dst[inter]
    if direct:
        dk = np.array(sorted(x * n + y for x, y in direct), dtype=np.int64)
        keep = ~np.isin(src * n + dst, dk)
        src, dst = src[keep], dst[keep]
    relayed = 0.0
    if src.size == 0:
        return R, relayed
    pp = pod_of[src] * (int(pod_of.max()) + 1) + pod_of[dst]
    order = np.argsort(pp, kind="stable")
    src, dst, pp = src[order], dst[order], pp[order]
    cut = np.flatnonzero(np.r_[True, pp[1:] != pp[:-1], True])
    for lo, hi in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):
        a, b = src[lo:hi], dst[lo:hi]
        lst = by_pp.get((int(pod_of[a[0]]), int(pod_of[b[0]])))
        if not lst:
            continue
        x = np.array([c[0] for c in lst], dtype=np.int64)
        y = np.array([c[1] for c in lst], dtype=np.int64)
        legs = (x[None, :] != a[:, None]).astype(np.int64) + (y[None, :] != b[:, None])
        if lay.pxn:
            legs[(rail[x][None, :] != rail[a][:, None]) | (rail[y][None, :] != rail[b][:, None])] = 3
        best = legs == legs.min(axis=1, keepdims=True)
        best &= legs < 3
        cnt = best.sum(axis=1)
        ok = cnt > 0
        d = np.where(ok, D[a, b] / np.maximum(cnt, 1), 0.0)
        relayed += float(D[a, b][ok].sum())
        i, j = np.nonzero(best)
        w = d[i]
        m1 = x[j] != a[i]
        np.add.at(R, (a[i][m1], x[j][m1]), w[m1])
        m2 = y[j] != b[i]
        np.add.at(R, (y[j][m2], b[i][m2]), w[m2])
    return R, relayed


def _pair_chains(D, pod_of, lifts, core_c) -> list[tuple[int, int]]:
    """ToR pairs of the core chains: one at a time to the pair across PoDs with core circuits
    left between them and lift circuits left at both ToRs, largest max-directional demand
    per chain (+1) first, lowest ids on ties.

    Incremental: the score matrix and each row's best column are kept, and a pick rescores
    only what it changed (its pair, the rows and columns of a ToR out of lift circuits, the
    PoD pair out of core circuits), so a pick costs O(ToRs) rather than O(ToRs^2). The picks
    are those of rescoring every pair each time (row-major first maximum, as np.argmax).

    Only ToRs with lift circuits can end a chain: the scores are kept over those alone (in
    ToR order, so ties break as over every ToR), a few ToRs of the re-planned PoDs rather than
    every ToR of the fabric squared."""
    out = []
    picks = int(np.triu(core_c, 1).sum())
    live = np.flatnonzero(np.asarray(lifts) > 0)
    if picks <= 0 or live.size == 0:
        return out
    pod_of = np.asarray(pod_of)[live]
    n = len(live)
    Dl = np.asarray(D)[np.ix_(live, live)]
    sym = np.maximum(Dl, Dl.T) * (pod_of[:, None] != pod_of[None, :])
    have = np.zeros((n, n))
    slots = np.asarray(lifts)[live].astype(np.int64)
    rem = core_c.astype(np.int64).copy()
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    ok = (slots[:, None] > 0) & (slots[None, :] > 0) & (rem[pod_of][:, pod_of] > 0) & upper
    score = np.where(ok, sym / (have + 1), -1.0)
    best_col = np.argmax(score, axis=1)
    best = score[np.arange(n), best_col]
    members = {int(p): np.flatnonzero(pod_of == p) for p in np.unique(pod_of)}

    def rescore_rows(rows) -> None:
        best_col[rows] = np.argmax(score[rows], axis=1)
        best[rows] = score[rows, best_col[rows]]

    for _ in range(picks):
        i = int(np.argmax(best))
        if best[i] < 0 and not ok[i, best_col[i]]:
            break  # (no pair is ok: every score is -1)
        j = int(best_col[i])
        out.append((int(live[i]), int(live[j])))
        have[i, j] += 1
        slots[i] -= 1
        slots[j] -= 1
        rem[pod_of[i], pod_of[j]] -= 1
        rem[pod_of[j], pod_of[i]] -= 1
        dirty = {i}
        if ok[i, j]:
            score[i, j] = sym[i, j] / (have[i, j] + 1)
        for t in (i, j):
            if slots[t] <= 0:
                ok[t, :] = False
                ok[:, t] = False
                score[t, :] = -1.0
                score[:, t] = -1.0
                dirty.add(t)
                dirty.update(np.flatnonzero(best_col == t).tolist())
        for pa_, pb_ in ((pod_of[i], pod_of[j]), (pod_of[j], pod_of[i])):
            if rem[pa_, pb_] <= 0:
                ra, rb = members[int(pa_)], members[int(pb_)]
                ok[np.ix_(ra, rb)] = False
                score[np.ix_(ra, rb)] = -1.0
                dirty.update(ra.tolist())
        rescore_rows(np.fromiter(sorted(dirty), dtype=np.int64))
    return out
