"""Placement: which GPUs of a fabric each job of a shared cluster runs on (issue 26 item 2).

``rf.place(fabric, sizes, policy)`` returns one array of GPU ids per job: job ``i``'s rank
``r`` runs on GPU ``place(...)[i][r]``, what ``rf.Job(workload, gpus=...)`` takes. Policies:

* ``"packed"``: jobs in order take consecutive GPUs of the fabric's locality order (whole
  servers, servers ordered by PoD, then by ToR), so a job fills servers, then ToRs, then PoDs.
* ``"spread"``: every rank goes to the next ToR round-robin (one cursor shared by the jobs), so
  a job's GPUs are spread evenly over the ToRs and jobs interleave on every ToR.
* ``"rail"``: rank ``r`` of every job sits on rail ``r mod rails`` (a GPU's rail is its
  index inside its server); blocks of ``rails`` consecutive ranks take a whole server where
  one has those rails free.
* ``"pod"``: each job inside one PoD where it fits, a PoD no other job uses while there is
  one; a job larger than any PoD's free GPUs takes unused PoDs first.
* ``"random"``: a seeded random permutation of the GPUs dealt to the jobs (same seed, same
  placement).
* explicit: a list of GPU id lists, checked (ids exist, no GPU twice, sizes match).

``taken=`` lists GPUs already in use: the policies place the new jobs around them.

Servers, ToRs, rails and PoDs are read from the fabric's node and link tables
(:func:`gpu_groups`), not from the family's parameters, so a user's own Topology is placed
by the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._graph import connected_components
from .errors import SpecError
from .spec import NODE_KINDS, NetworkSpec
from .validators import integer

__all__ = ["POLICIES", "GpuGroups", "gpu_groups", "place", "footprint"]

#: The named placement policies of :func:`place` (an explicit placement is a list of lists).
POLICIES = ("packed", "spread", "rail", "pod", "random")


def _spec(fabric) -> NetworkSpec:
    if isinstance(fabric, NetworkSpec):
        return fabric
    to_spec = getattr(type(fabric), "to_spec", None)
    if callable(to_spec):
        spec = fabric.to_spec()
        if isinstance(spec, NetworkSpec):
            return spec
    raise SpecError(f"placement: expected a Topology or NetworkSpec, got {type(fabric).__name__}")


def _dense(keys: np.ndarray) -> np.ndarray:
    """Relabel ``keys`` (one per GPU) 0, 1, ... in the order of each group's lowest GPU id."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


@dataclass(frozen=True)
class GpuGroups:
    """Where each GPU of a fabric sits, read from its spec (:func:`gpu_groups`). Every array
    is indexed by GPU id; groups are numbered 0, 1, ... in the order of their lowest GPU id.

    Attributes
    ----------
    server : int64 array
        The GPU's server (the spec's ``server`` column; a GPU without one is its own server).
    tor : int64 array
        The GPU's ToR: the packet switch its NIC attaches to. A GPU whose NIC ends on an
        optical device (MixNet's regional OCS) or that has no NIC takes the ToR of its
        server's first GPU with a NIC on a packet switch, the switch through which its server
        reaches the packet fabric; a server with no packet switch at all (TopoOpt, whose NICs
        meet at patch panels and whose hosts forward) is its own ToR.
    tor_node : int64 array
        Node row of the GPU's ToR switch, -1 where the server stands in for a ToR.
    rail : int64 array
        The GPU's index inside its server, by GPU id (rail ``j`` = NIC ``j`` of every server:
        on rail-optimized fabrics and RFabric, the rail-``j`` ToR).
    pod : int64 array
        The GPU's PoD: GPUs whose ToRs share a device one tier above them (an aggregation
        switch, a spine, an OCS-Agg), or whose NICs share a device, joined over servers. A
        fat-tree's pods; RFabric's PoDs; a leaf-spine fabric or TopoOpt is one PoD; a
        rail-optimized fabric's rail-aligned pods joined by their servers.
    """

    server: np.ndarray
    tor: np.ndarray
    tor_node: np.ndarray
    rail: np.ndarray
    pod: np.ndarray

    @property
    def gpus(self) -> int:
        return int(self.server.size)

    @property
    def servers(self) -> int:
        return int(self.server.max()) + 1

    @property
    def tors(self) -> int:
        return int(self.tor.max()) + 1

    @property
    def rails(self) -> int:
        return int(self.rail.max()) + 1

    @property
    def pods(self) -> int:
        return int(self.pod.max()) + 1

    def order(self) -> np.ndarray:
        """GPU ids in locality order: by PoD, then the server's first ToR, then server, then
        GPU id (what ``"packed"`` fills)."""
        first_tor = np.full(self.servers, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_tor, self.server, self.tor)
        ids = np.arange(self.gpus)
        return np.lexsort((ids, self.server, first_tor[self.server], self.pod))


def gpu_groups(fabric) -> GpuGroups:
    """The server, ToR, rail and PoD of every GPU of ``fabric`` (a Topology or NetworkSpec),
    from its node and link tables (:class:`GpuGroups` says how each is defined)."""
    spec = _spec(fabric)
    kind = spec.nodes.kind
    gpu_nodes = np.asarray(spec.gpu_nodes, dtype=np.int64)
    n = gpu_nodes.size
    n_nodes = kind.size
    gpu_of = np.full(n_nodes, -1, dtype=np.int64)
    gpu_of[gpu_nodes] = np.arange(n)
    src = spec.links.src.astype(np.int64)
    dst = spec.links.dst.astype(np.int64)
    is_gpu = kind == NODE_KINDS["gpu"]
    nvs = NODE_KINDS["nvswitch"]
    eps = kind == NODE_KINDS["eps"]

    # servers: the spec's column; a GPU without one is a server of its own
    raw = spec.nodes.server[gpu_nodes].astype(np.int64)
    lone = raw < 0
    key = np.where(lone, -1 - np.arange(n), raw)
    server = _dense(key)

    # the NIC's first hop (validation allows at most one NIC link per GPU)
    nic = np.flatnonzero((is_gpu[src] ^ is_gpu[dst]) & (kind[src] != nvs) & (kind[dst] != nvs))
    own = np.where(is_gpu[src[nic]], src[nic], dst[nic])
    far = np.where(is_gpu[src[nic]], dst[nic], src[nic])
    first_hop = np.full(n, -1, dtype=np.int64)
    first_hop[gpu_of[own]] = far
    tor_node = np.where((first_hop >= 0) & eps[np.maximum(first_hop, 0)], first_hop, -1)
    # a GPU without a packet switch of its own: its server's first GPU with one
    ids = np.arange(n)
    has = tor_node >= 0
    big = np.iinfo(np.int64).max
    first_gpu = np.full(server.max() + 1, big, dtype=np.int64)
    np.minimum.at(first_gpu, server[has], ids[has])
    lend = ~has & (first_gpu[server] < big)
    tor_node = tor_node.copy()
    tor_node[lend] = tor_node[first_gpu[server[lend]]]
    tor = _dense(np.where(tor_node >= 0, tor_node, -1 - server))

    # rails: index inside the server, in GPU id order
    order = np.lexsort((ids, server))
    starts = np.searchsorted(server[order], server[order], side="left")
    rail = np.empty(n, dtype=np.int64)
    rail[order] = np.arange(n) - starts

    # PoDs: join each GPU to its NIC's first hop and to its server's first GPU, and each ToR
    # to the devices one hop above it
    edges_a = [gpu_nodes[first_hop >= 0]]
    edges_b = [first_hop[first_hop >= 0]]
    head = np.full(server.max() + 1, big, dtype=np.int64)
    np.minimum.at(head, server, ids)
    edges_a.append(gpu_nodes)
    edges_b.append(gpu_nodes[head[server]])
    tors = np.unique(tor_node[tor_node >= 0])
    is_tor = np.zeros(n_nodes, dtype=bool)
    is_tor[tors] = True
    up = (is_tor[src] & ~is_gpu[dst]) | (is_tor[dst] & ~is_gpu[src])
    # a site's gateway (rf.topologies.Sites) is no tier of the site: ToRs wired to it are not
    # one PoD for that
    up &= ~np.isin(spec.links.kind.astype(str), ("gateway", "long-haul"))
    edges_a.append(src[up])
    edges_b.append(dst[up])
    label = connected_components(n_nodes, np.concatenate(edges_a), np.concatenate(edges_b))
    pod = _dense(label[gpu_nodes])
    return GpuGroups(server=server, tor=tor, tor_node=tor_node, rail=rail, pod=pod)


def _sizes(sizes, gpus: int, taken: int = 0) -> list[int]:
    if isinstance(sizes, (int, np.integer)) and not isinstance(sizes, bool):
        sizes = [sizes]
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (Sequence, np.ndarray)):
        raise SpecError(f"place: sizes must be a list of GPU counts, one per job, got {sizes!r}")
    out = [integer(s, f"place: sizes[{i}] (GPUs of job {i})", lo=1) for i, s in enumerate(sizes)]
    if not out:
        raise SpecError("place: sizes is empty (no jobs to place)")
    if sum(out) > gpus - taken:
        have = f"the fabric has {gpus}" + (f", {taken} of them taken" if taken else "")
        raise SpecError(f"place: the jobs need {sum(out)} GPUs ({' + '.join(map(str, out))}), {have}")
    return out


def _explicit(lists, sizes, gpus: int, name: str, taken=None) -> list[np.ndarray]:
    if isinstance(lists, np.ndarray) and lists.ndim == 2:
        lists = list(lists)
    if not isinstance(lists, (Sequence, np.ndarray)) or isinstance(lists, (str, bytes)) or not len(lists):
        raise SpecError(f"place: an explicit placement is a list of GPU id lists, got {lists!r}")
    if sizes is not None:
        want = _sizes(sizes, gpus)
        if len(want) != len(lists):
            raise SpecError(f"place: {len(want)} job sizes but {len(lists)} GPU lists")
    out: list[np.ndarray] = []
    owner = np.full(gpus, -1, dtype=np.int64)
    if taken is not None:
        owner[taken] = -2
    for j, ids in enumerate(lists):
        arr = np.asarray(ids)
        if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
            raise SpecError(f"place: job {j}: expected a non-empty list of integer GPU ids, got {ids!r}")
        arr = arr.astype(np.int64)
        bad = arr[(arr < 0) | (arr >= gpus)]
        if bad.size:
            raise SpecError(f"place: job {j}: GPU {bad[0]} does not exist ({name} has GPUs 0..{gpus - 1})")
        uniq, counts = np.unique(arr, return_counts=True)
        if np.any(counts > 1):
            raise SpecError(f"place: job {j}: GPU {uniq[counts > 1][0]} is listed twice")
        clash = owner[arr] != -1
        if clash.any():
            g = int(arr[clash][0])
            whose = "in taken" if owner[g] == -2 else f"already job {owner[g]}'s (jobs overlap)"
            raise SpecError(f"place: job {j}: GPU {g} is {whose}")
        if sizes is not None and arr.size != want[j]:
            raise SpecError(f"place: job {j}: {arr.size} GPUs listed, sizes[{j}] is {want[j]}")
        owner[arr] = j
        out.append(arr)
    return out


def place(fabric, sizes, policy="packed", seed=None, taken=None, gpu_type=None) -> list[np.ndarray]:
    """Place jobs on ``fabric``: one int64 array of GPU ids per job, rank ``r`` of job ``i``
    on GPU ``result[i][r]``; no GPU serves two jobs.

    Parameters
    ----------
    fabric : Topology or NetworkSpec
        The fabric; its servers, ToRs, rails and PoDs come from its spec (:func:`gpu_groups`).
    sizes : int or list of int
        GPUs of each job, in the order jobs are placed (an int: one job). May be None with an
        explicit placement.
    policy : str or list of lists
        ``"packed"``, ``"spread"``, ``"rail"``, ``"pod"``, ``"random"`` (see the module
        docstring), or an explicit list of GPU id lists, one per job, which is checked and
        returned as arrays.
    seed : int, optional
        Seed of ``"random"`` (default 0; same seed, same placement). Ignored by the other
        policies, which are deterministic.
    taken : list of int, optional
        GPUs already in use (by jobs placed before): the policies place around them, as if
        the fabric had only the other GPUs (``"pod"`` counts a PoD with a taken GPU as used by
        another job), and an explicit placement may not name them.
    gpu_type : str, optional
        Place on GPUs of this type only (the fabric's ``gpu=`` pools, ``spec.gpu_types``):
        the others count as taken. Place a generated trace's pools one call each, e.g. its
        train ranks with ``gpu_type="H800"`` and its gen ranks with ``gpu_type="H20"``.

    Raises
    ------
    SpecError
        The jobs do not fit (more GPUs than the fabric has, or a rail without enough free
        GPUs), an explicit placement names an unknown GPU, lists one twice or overlaps another
        job's, or the policy is unknown.
    """
    spec = _spec(fabric)
    gpus = spec.num_gpus
    free = np.ones(gpus, dtype=bool)
    if taken is not None:
        busy = _explicit([taken], None, gpus, spec.name)[0] if len(taken) else np.empty(0, np.int64)
        free[busy] = False
    if gpu_type is not None:
        from .traces.models import DEFAULT_GPU  # (the GPU catalog lives with the roofline)

        types = spec.gpu_types if spec.gpu_types is not None else np.full(gpus, DEFAULT_GPU, dtype=object)
        if gpu_type not in set(types.tolist()):
            raise SpecError(
                f"place: gpu_type {gpu_type!r}: {spec.name} has no GPU of that type "
                f"(its types: {', '.join(sorted(set(types.tolist())))})"
            )
        free &= types == gpu_type
    if not isinstance(policy, str):
        return _explicit(policy, sizes, gpus, spec.name, np.flatnonzero(~free))
    if policy not in POLICIES:
        raise SpecError(
            f"place: unknown policy {policy!r} (known: {', '.join(map(repr, POLICIES))}, or a list "
            "of GPU id lists)"
        )
    want = _sizes(sizes, gpus, int((~free).sum()))
    if policy == "random":
        seed = 0 if seed is None else integer(seed, "place: seed", lo=0)
        perm = np.random.default_rng(seed).permutation(np.flatnonzero(free)).astype(np.int64)
        cut = np.cumsum([0] + want)
        return [perm[a:b] for a, b in zip(cut[:-1], cut[1:], strict=True)]
    groups = gpu_groups(spec)
    if policy == "packed":
        order = groups.order()
        order = order[free[order]]
        cut = np.cumsum([0] + want)
        return [order[a:b].astype(np.int64) for a, b in zip(cut[:-1], cut[1:], strict=True)]
    if policy == "spread":
        return _spread(groups, want, free)
    if policy == "rail":
        return _rail(groups, want, spec.name, free)
    return _pod(groups, want, free)


def _spread(groups: GpuGroups, want: list[int], free: np.ndarray) -> list[np.ndarray]:
    order = groups.order()
    # each ToR's free GPUs in locality order; ToRs by (PoD, ToR id)
    queues: dict[int, list[int]] = {t: [] for t in range(groups.tors)}
    for g in order[free[order]].tolist():
        queues.setdefault(int(groups.tor[g]), []).append(g)
    tor_pod = np.zeros(groups.tors, dtype=np.int64)
    tor_pod[groups.tor] = groups.pod
    tors = np.lexsort((np.arange(groups.tors), tor_pod)).tolist()
    nxt = dict.fromkeys(tors, 0)
    out, cursor = [], 0
    for size in want:
        job = []
        while len(job) < size:
            t = tors[cursor % len(tors)]
            cursor += 1
            if nxt[t] < len(queues[t]):
                job.append(queues[t][nxt[t]])
                nxt[t] += 1
        out.append(np.asarray(job, dtype=np.int64))
    return out


def _rail(groups: GpuGroups, want: list[int], name: str, free_gpu: np.ndarray) -> list[np.ndarray]:
    rails = groups.rails
    order = groups.order()
    servers = list(dict.fromkeys(groups.server[order].tolist()))  # servers in locality order
    slot = np.full((groups.servers, rails), -1, dtype=np.int64)  # (server, rail) -> GPU
    slot[groups.server, groups.rail] = np.arange(groups.gpus)
    free = (slot >= 0) & free_gpu[np.maximum(slot, 0)]
    # GPUs only ever get taken, so the first server with rails 0..need-1 free (and the first
    # with rail r free) never moves back: scan on from where the last search stopped
    first_whole: dict[int, int] = {}
    first_on: dict[int, int] = {}

    def scan(start: int, ok) -> tuple[int, int | None]:
        i = start
        while i < len(servers) and not ok(servers[i]):
            i += 1
        return i, (servers[i] if i < len(servers) else None)

    out = []
    for j, size in enumerate(want):
        job = np.empty(size, dtype=np.int64)
        for b in range(0, size, rails):
            need = min(rails, size - b)
            first_whole[need], whole = scan(first_whole.get(need, 0), lambda s, n=need: free[s, :n].all())
            for r in range(need):
                s = whole
                if s is None:
                    first_on[r], s = scan(first_on.get(r, 0), lambda s, r=r: free[s, r])
                    if s is None:
                        raise SpecError(
                            f"place: policy 'rail': job {j}'s rank {b + r} needs rail {r} and {name} has "
                            f"no free GPU left on rail {r} ({int((slot[:, r] >= 0).sum())} GPUs on it)"
                        )
                job[b + r] = slot[s, r]
                free[s, r] = False
        out.append(job)
    return out


def _pod(groups: GpuGroups, want: list[int], free: np.ndarray) -> list[np.ndarray]:
    order = groups.order()
    pods = groups.pods
    members = [order[(groups.pod[order] == p) & free[order]].tolist() for p in range(pods)]
    used = [0] * pods  # GPUs taken so far in each PoD, from the front of members[p]
    # a PoD with a GPU taken before is another job's too
    touched = [bool((~free[groups.pod == p]).any()) for p in range(pods)]
    out = []
    for size in want:
        fits = [p for p in range(pods) if len(members[p]) - used[p] >= size]
        alone = [p for p in fits if not touched[p]]
        if alone or fits:
            picks = [(alone or fits)[0]]
        else:  # larger than any PoD's free GPUs: unused PoDs first, then the others
            picks = [p for p in range(pods) if not touched[p]] + [p for p in range(pods) if touched[p]]
        job: list[int] = []
        for p in picks:
            take = min(size - len(job), len(members[p]) - used[p])
            job.extend(members[p][used[p] : used[p] + take])
            used[p] += take
            if take:
                touched[p] = True
            if len(job) == size:
                break
        out.append(np.asarray(job, dtype=np.int64))
    return out


def footprint(fabric, placement) -> list[dict]:
    """How many servers, ToRs, rails and PoDs each job of ``placement`` (a list of GPU id
    lists, as :func:`place` returns) spans on ``fabric``, and how many GPUs of its ToRs other
    jobs use: one dict per job (``job``, ``gpus``, ``servers``, ``tors``, ``rails``, ``pods``,
    ``shared_tors``: the job's ToRs that another job also has GPUs on)."""
    spec = _spec(fabric)
    jobs = _explicit(placement, None, spec.num_gpus, spec.name)
    groups = gpu_groups(spec)
    tor_sets = [set(groups.tor[g].tolist()) for g in jobs]
    rows = []
    for j, g in enumerate(jobs):
        others = set().union(*(s for i, s in enumerate(tor_sets) if i != j))
        rows.append(
            {
                "job": j,
                "gpus": int(g.size),
                "servers": int(np.unique(groups.server[g]).size),
                "tors": len(tor_sets[j]),
                "rails": int(np.unique(groups.rail[g]).size),
                "pods": int(np.unique(groups.pod[g]).size),
                "shared_tors": len(tor_sets[j] & others),
            }
        )
    return rows
