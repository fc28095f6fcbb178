"""OCS ports shared by several jobs: the stage-aware controller's tenant policy
(docs/explanation/multi-tenant-circuits.md).

A run of several jobs (``rf.Job``) gives each communication period one job. With a tenant
policy the controller remembers which job's plan put each circuit in place (its *owner*) and,
when one job's period re-plans a PoD, leaves the ports that the policy gives to the other
jobs with an active period there as they are. The ports are counted in *pools*: the
PoD-boundary (core) ports of each PoD, which every ToR of the PoD competes for, and the
uplinks of each ToR (contested only when several jobs' GPUs sit under one ToR).

Policies:

* ``"fair"``: each job with an active period using a pool gets ``floor(n / jobs)`` of its
  ``n`` working ports (the planning job the rest); a job's share is lent to the others while
  it has no active period there, and taken back by its next plan.
* ``{"a": 2, "b": 1}``: the same with shares ``floor(n * w / W)`` by weight.
* ``["a", "b"]``: priority, first highest: a job's plan leaves every port that an active
  job of higher priority holds, and may take all of a lower one's.

This module only chooses the ports; :func:`~rfabric.controllers.materialize.materialize`
keeps the rows on them (``pinned``) and allocates around the free ones (``blocked``).
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import SpecError
from ..spec import CircuitTable
from .plan_rows import _rows

__all__ = ["TenantPolicy", "reserve", "row_key"]


def row_key(r) -> tuple[int, int, int]:
    """A circuit row as ``(device, lower link, higher link)``."""
    return (int(r[0]), min(int(r[1]), int(r[2])), max(int(r[1]), int(r[2])))


class TenantPolicy:
    """A parsed ``tenants=`` argument: ``"fair"``, ``{job: weight}`` or ``[job, ...]``
    (priority order, first highest)."""

    __slots__ = ("kind", "weights", "rank")

    def __init__(self, tenants):
        self.weights: dict[str, float] = {}
        self.rank: dict[str, int] = {}
        if isinstance(tenants, str):
            if tenants != "fair":
                raise SpecError(
                    f"StageAwareController: tenants must be 'fair', 'shared', a dict of job weights or a "
                    f"list of jobs in priority order, got {tenants!r}"
                )
            self.kind = "fair"
        elif isinstance(tenants, dict):
            if not tenants:
                raise SpecError("StageAwareController: tenants: the dict of job weights is empty")
            for job, w in tenants.items():
                if not isinstance(job, str):
                    raise SpecError(f"StageAwareController: tenants: job names are strings, got {job!r}")
                if isinstance(w, bool) or not isinstance(w, numbers.Real) or not np.isfinite(w) or w <= 0:
                    raise SpecError(
                        f"StageAwareController: tenants: the weight of job {job!r} must be a positive "
                        f"number, got {w!r}"
                    )
                self.weights[job] = float(w)
            self.kind = "weights"
        elif isinstance(tenants, list | tuple):
            if not tenants:
                raise SpecError("StageAwareController: tenants: the priority list is empty")
            for i, job in enumerate(tenants):
                if not isinstance(job, str):
                    raise SpecError(f"StageAwareController: tenants[{i}]: job names are strings, got {job!r}")
                if job in self.rank:
                    raise SpecError(f"StageAwareController: tenants: job {job!r} is listed twice")
                self.rank[job] = i
            self.kind = "priority"
        else:
            raise SpecError(
                f"StageAwareController: tenants must be 'fair', 'shared', a dict of job weights or a "
                f"list of jobs in priority order, got {type(tenants).__name__}"
            )

    def check(self, job: str) -> None:
        """SpecError unless the policy names ``job`` (weights and priority name every job)."""
        if self.kind == "weights" and job not in self.weights:
            raise SpecError(f"tenants gives no weight to job {job!r} (weights for {sorted(self.weights)})")
        if self.kind == "priority" and job not in self.rank:
            raise SpecError(f"tenants does not rank job {job!r} (priority {list(self.rank)})")

    def shares(self, n: int, job: str, others: list[str], held: dict[str, int]) -> dict[str, int]:
        """Ports of a pool of ``n`` kept for each other job in ``others`` when ``job`` plans."""
        if self.kind == "priority":
            return {k: held.get(k, 0) for k in others if self.rank[k] < self.rank[job]}
        w = (lambda k: self.weights[k]) if self.kind == "weights" else (lambda k: 1.0)
        total = w(job) + sum(w(k) for k in others)
        return {k: int(n * w(k) // total) for k in others}

    def __repr__(self) -> str:
        if self.kind == "fair":
            return "'fair'"
        return repr(self.weights) if self.kind == "weights" else repr(list(self.rank))


def reserve(
    lay,
    plan: CircuitTable,
    failed: set,
    owner: dict,
    policy: TenantPolicy,
    job: str,
    pods,
    tors,
    pod_jobs: dict[int, set],
    tor_jobs: dict[int, set],
) -> tuple[frozenset, frozenset, str]:
    """The rows of ``plan`` that ``job``'s plan over ``pods`` must keep and the free ports it
    may not use, so that every other job with an active period in a pool keeps its share.

    ``owner``: row key -> the job whose plan put it in place (rows not in it belong to no
    job); ``tors``: the ToRs of ``job``'s traffic; ``pod_jobs`` / ``tor_jobs``: per PoD / ToR
    the other jobs with an active period whose traffic uses it. Per pool (each PoD's core
    ports; the uplinks of each ToR of ``tors``, the only ToRs whose uplinks ``job``'s plan
    allocates) with other jobs, each such job ``k`` keeps ``shares()[k]`` ports: those it
    holds (by circuit, lowest row first, so that every pool keeps the same chains), then, when it holds fewer, ports of default channels (rows
    no job owns: kept as they are), free ports (left dark), other jobs' rows beyond their
    share (kept) and last ``job``'s own (freed and left dark). A kept row keeps every row
    that shares a link with it (a chain's lift, core and drop rows stay whole).

    Returns ``(rows to keep, free ports to leave, detail)``.
    """
    rows = [r for r in _rows(plan) if r[1] not in failed and r[2] not in failed]
    by_link: dict[int, list[tuple]] = {}
    for r in rows:
        by_link.setdefault(r[1], []).append(r)
        by_link.setdefault(r[2], []).append(r)
    # shared ToRs' uplinks first: a chain through an uplink another job holds beyond its
    # share there is not that job's to keep in the PoD's core ports either
    tor_pools, pod_pools = [], []
    for p in sorted(pods):
        others = pod_jobs.get(p, set()) - {job}
        if others:
            pod_pools.append((f"PoD {p}", lay.core_port_link[lay.core_port_pod == p], sorted(others)))
        for t in lay.pod_tors[p].tolist():
            others = tor_jobs.get(t, set()) - {job}
            if others and t in tors:
                links = lay.tor_port_link[lay.tor_port_tor == t]
                tor_pools.append((f"ToR {int(lay.tors[t])}", links, sorted(others)))
    reserved: set[int] = set()
    dark: set[int] = set()
    notes = []
    excess: set[int] = set()  # uplinks of shared ToRs held by other jobs beyond their share

    def via_excess(x) -> bool:
        return any(y in excess for r in by_link.get(x, ()) for y in (r[1], r[2]))

    chain_of: dict[int, tuple] = {}

    def chain(x) -> tuple:
        """The lowest row of the circuit (a chain's three rows) on port ``x``: every pool
        orders a job's ports by it, so two pools keep the same chains."""
        if x not in chain_of:
            seen, todo = set(), list(by_link.get(x, ()))
            while todo:
                r = todo.pop()
                if r not in seen:
                    seen.add(r)
                    todo += [q for y in (r[1], r[2]) for q in by_link[y]]
            chain_of[x] = min(seen) if seen else (x,)
        return chain_of[x]

    for name, links, others in tor_pools + pod_pools:
        links = sorted(x for x in links.tolist() if x not in failed)
        holder = {x: owner.get(row_key(by_link[x][0])) if x in by_link else None for x in links}
        if excess:
            holder = {x: (job if h is not None and via_excess(x) else h) for x, h in holder.items()}
        held: dict[str, list[int]] = {}
        for x in links:
            if holder[x] is not None:
                held.setdefault(holder[x], []).append(x)
        share = policy.shares(len(links), job, others, {k: len(v) for k, v in held.items()})
        keep: set[int] = set()  # ports whose rows stay as they are
        block: set[int] = set()  # ports left dark (or freed) for the others
        for k in others:
            keep |= set(sorted(held.get(k, []), key=chain)[: share.get(k, 0)])
        want = sum(share.values())
        if len(keep) < want:

            def rank(x, holder=holder):
                if x not in by_link:
                    return 1  # free: left dark
                h = holder[x]
                return 0 if h is None else 3 if h == job else 2

            for x in sorted((x for x in links if x not in keep), key=lambda x: (rank(x), x))[
                : want - len(keep)
            ]:
                (block if rank(x) in (1, 3) else keep).add(x)
        if keep or block:
            n_left = len(keep) + len(block)
            notes.append(f"{name}: {n_left} of {len(links)} ports left to {', '.join(others)}")
        reserved |= keep
        dark |= block
        if name.startswith("ToR"):
            excess |= {x for x in links if holder[x] not in (None, job) and x not in keep}
    if not reserved and not dark:
        return frozenset(), frozenset(), ""
    # rows on reserved ports, closed over shared links (a chain's lift, core and drop rows)
    pinned: set[tuple] = set()
    todo = [r for x in reserved for r in by_link.get(x, ())]
    while todo:
        r = todo.pop()
        if r in pinned:
            continue
        pinned.add(r)
        todo += [q for x in (r[1], r[2]) for q in by_link[x] if q not in pinned]
    blocked = frozenset(dark | {x for x in reserved if x not in by_link})
    return frozenset(pinned), blocked, f"tenants {policy!r}: " + "; ".join(notes)
