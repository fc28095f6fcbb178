"""The weight-sync dissemination forest (paper §5.2 item 3 and appendix E).

Pure functions: :func:`dissemination_forest` plans, per weight shard, Phase A (inter-PoD
seeding over OCS-Core, in waves that respect per-PoD boundary budgets) and Phase B (intra-PoD
fan-out trees from the seeds); :func:`forest_ops` turns a plan into trace columns for
:meth:`rfabric.traces.Trace.from_columns`. Neither knows about the engine or a fabric.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from ..validators import integer

__all__ = ["Forest", "dissemination_forest", "forest_ops", "sync_time"]

#: forest_ops: consecutive Phase A waves whose sizes multiply to more than this wait on each
#: other through a barrier op (2^16: 256 x 256 sends; the built-in test fabrics stay below).
BARRIER_ABOVE = 1 << 16


@dataclass(frozen=True, eq=False)
class Forest:
    """A dissemination forest: one edge table, one row per point-to-point transfer.

    Attributes
    ----------
    shard, src, dst : numpy.ndarray
        int64 per edge: the shard index and the sending and receiving GPUs.
    wave : numpy.ndarray
        int64 per edge: the Phase A wave (0, 1, ...) of an inter-PoD edge; -1 for Phase B.
    level : numpy.ndarray
        int64 per edge: 0 for Phase A; for Phase B the receiver's depth in its PoD's tree
        (1 = child of a seed or of a local holder).
    circuits : numpy.ndarray
        int64 per edge: parallel OCS-Core circuits ``c_uv^(t)`` of a Phase A edge (>= 1);
        0 for Phase B (intra-PoD capacity is left to the Agg allocator).
    parent : numpy.ndarray
        int64 per edge: index of the edge that delivers the shard to ``src``, or -1 when
        ``src`` holds the shard (a Phase A root or a holder inside the destination PoD).
    pod_of : numpy.ndarray
        int64 per GPU: its PoD.
    pod_budget : numpy.ndarray
        int64 per PoD: ``d_p``, the cap on concurrently active inter-PoD circuits incident
        to the PoD (one unit at each end of a circuit).

    Edges are ordered so that every edge comes after its parent: Phase A by wave, then
    Phase B by level.
    """

    shard: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    wave: np.ndarray
    level: np.ndarray
    circuits: np.ndarray
    parent: np.ndarray
    pod_of: np.ndarray
    pod_budget: np.ndarray

    @property
    def n_waves(self) -> int:
        """Number of Phase A waves."""
        return int(self.wave.max()) + 1 if self.wave.size and self.wave.max() >= 0 else 0

    @property
    def waves(self) -> list[np.ndarray]:
        """Edge indices of each Phase A wave, in wave order."""
        return [np.flatnonzero(self.wave == t) for t in range(self.n_waves)]

    @property
    def phase_b(self) -> np.ndarray:
        """Edge indices of Phase B (intra-PoD fan-out), parents first."""
        return np.flatnonzero(self.wave < 0)

    @property
    def seeds(self) -> np.ndarray:
        """Phase A receivers as rows ``(shard, pod, seed_gpu, root_gpu)`` (int64)."""
        a = self.wave >= 0
        return np.stack([self.shard[a], self.pod_of[self.dst[a]], self.dst[a], self.src[a]], axis=1)

    def pod_load(self, wave: int) -> np.ndarray:
        """Circuits incident to each PoD in ``wave`` (source plus destination ends)."""
        e = self.wave == wave
        load = np.zeros(self.pod_budget.size, dtype=np.int64)
        np.add.at(load, self.pod_of[self.src[e]], self.circuits[e])
        np.add.at(load, self.pod_of[self.dst[e]], self.circuits[e])
        return load


def dissemination_forest(
    shards,
    pod_of,
    pod_budget,
    *,
    seeds_per_pod: int = 1,
    fanout: int = 2,
    shard_bytes=None,
    max_circuits_per_edge: int | None = None,
) -> Forest:
    """Plan the two-level weight-sync forest of paper appendix E (§5.2, item 3).

    Each shard travels down its own tree. **Phase A** (E.1) sends it from an active root (a
    Train GPU that holds it) to a few seed receivers in every destination PoD over
    point-to-point OCS-Core circuits, in waves: in each wave every PoD ``p`` has at most
    ``d_p`` active inter-PoD circuits incident to it, counting a circuit once at its source
    PoD and once at its destination PoD. **Phase B** (E.2) fans the shard out inside each
    destination PoD from its seeds to every other Gen GPU there that needs it.

    Parameters
    ----------
    shards : sequence of (holders, receivers)
        Per shard: the GPUs that hold it (Train side, at least one; replicas allowed) and
        the GPUs that need it (Gen side). A receiver that also holds the shard is dropped
        (it has it); a GPU listed twice in one list is an error.
    pod_of : array_like of int, shape (gpus,)
        PoD of every GPU (>= 0).
    pod_budget : int or array_like of int, shape (pods,)
        ``d_p`` per PoD (``pods = max(pod_of) + 1``), or one value for every PoD; >= 0.
        A PoD that must send or receive across its boundary needs ``d_p >= 1``.
    seeds_per_pod : int, default 1
        Seeds per (shard, destination PoD) -- the paper's "small set", typically a
        constant; fewer when the PoD has fewer receivers of that shard.
    fanout : int, default 2
        Children per node of a Phase B tree: 2 is a binary tree, 1 a chain.
    shard_bytes : array_like of int, shape (shards,), optional
        Bytes per shard ``S``, which order the wave scheduler and size the circuit
        equaliser; default 1 for every shard (all shards alike).
    max_circuits_per_edge : int, optional
        The NIC-rate circuits one GPU's NIC fills (usually 1): the cap on ``c_uv^(t)``, and
        what the NIC rule (Notes) allows the edges a GPU sends (or receives) in one wave;
        default none (the paper's per-PoD budgets only). Circuits beyond what the NIC can
        drive idle, and the edges of one GPU in one wave share its NIC: a root with four
        edges in a wave sends each at a quarter of its rate.

    Returns
    -------
    Forest
        The edge table (see :class:`Forest`).

    Raises
    ------
    rfabric.SpecError
        On malformed input, naming the argument and the shard, GPU or PoD; or when a PoD
        must cross its boundary with ``d_p = 0``.

    Notes
    -----
    Choices the paper leaves open, made here (all deterministic, no randomness):

    * **Seeds.** Per (shard, destination PoD) with ``r`` receivers, ``k = min(seeds_per_pod,
      r)`` seeds are the receivers with the fewest bytes seeded so far (earlier shards),
      ties broken in the order of the receivers sorted by GPU id from offset ``(shard * k)
      mod r`` (cyclically), so seeding spreads over the PoD's NICs and no Gen NIC is the
      ingress of every shard. (The offset alone repeats with the shard ids: Kimi K2 on
      RFabric 2,048 gives each shard two receivers per PoD, one per rail group, and the
      offset's parity, the rail's, put every seed of a rail behind one ToR, whose uplinks
      the chains then filled, leaving its fan-out no circuit.)
    * **PoDs that already hold a shard** (a holder inside a destination PoD) get no Phase A
      edge: the lowest-id local holder is the Phase B root there.
    * **Active roots.** Seeds are assigned one by one (shard order, then destination PoD,
      then seed id) to the holder with the fewest bytes assigned so far, ties broken by the
      fewest bytes leaving its PoD, then the lowest GPU id: load is spread over replicas and
      over Train PoDs. ``S_act`` is the set of holders that get a seed.
    * **Waves** (greedy, budget-aware): edges are taken largest shard first, then first
      seeds of every PoD before second seeds (so every PoD can start its fan-out early), then
      by shard, destination PoD and seed id; each goes into the first wave where both its
      PoDs still have a free unit of budget, and a new wave opens when none has. Each edge
      is in exactly one wave.
    * **NIC rule** (with ``max_circuits_per_edge``): the waves are also built a second time
      with each GPU's edges in one wave kept within ``max_circuits_per_edge`` circuits sent
      and received, and that schedule is taken when it is predicted faster: waves back to
      back, each as long as its slowest edge (bytes over circuits) or NIC (the bytes a GPU
      sends or receives in it over the circuits it fills), in units of a circuit's rate; a
      tie keeps the fewer waves. On budgets alone a shard's edges to every destination PoD
      fell in one wave, sharing the root's NIC, while the PoD's other roots waited for later
      waves (Kimi K2 on RFabric 2,048: five waves of 1.35 s, four shard times each, where
      the NIC rule gives four of 0.34 s); where budgets bind nothing, the NIC rule only
      splits a wave that the NICs make as long as the two (``bench/validate_flow.py``'s
      RFabric 512).
    * **Circuits per edge.** Every edge of a wave gets one circuit; the PoDs' leftover budget
      is then given one circuit at a time to the edge with the largest ``S / c`` (then the
      larger ``S``, then the edge planned first) whose both PoDs (and, under the NIC rule,
      both NICs) have budget left -- the pair bottleneck greedy of appendix D applied to
      edges with per-PoD budgets.
    * **Phase B trees.** The remaining receivers of a PoD (sorted by GPU id, minus the seeds)
      are split into ``k`` contiguous blocks whose sizes differ by at most one, one per seed;
      each block is a ``fanout``-ary tree in breadth-first order under its seed (node ``j``
      of the list ``[seed] + block`` has parent ``(j - 1) // fanout``), so each seed serves
      about ``1/k`` of the PoD and tree depth is ``O(log_fanout(r / k))``.
    """
    pod_of = _int_vector(pod_of, "pod_of")
    if pod_of.size == 0:
        raise SpecError("dissemination_forest: pod_of is empty (one PoD id per GPU expected)")
    if (pod_of < 0).any():
        g = int(np.flatnonzero(pod_of < 0)[0])
        raise SpecError(f"dissemination_forest: pod_of[{g}] = {int(pod_of[g])} is negative")
    n_pods = int(pod_of.max()) + 1
    gpus = pod_of.size
    budget = _budgets(pod_budget, n_pods)
    seeds_per_pod = _positive_int(seeds_per_pod, "seeds_per_pod")
    fanout = _positive_int(fanout, "fanout")
    if max_circuits_per_edge is not None:
        max_circuits_per_edge = _positive_int(max_circuits_per_edge, "max_circuits_per_edge")
    plan = _shard_lists(shards, gpus)
    if shard_bytes is None:
        size = np.ones(len(plan), dtype=np.int64)
    else:
        size = _int_vector(shard_bytes, "shard_bytes")
        if size.size != len(plan):
            raise SpecError(
                f"dissemination_forest: shard_bytes has {size.size} entries, expected {len(plan)} (one per shard)"
            )
        if (size < 0).any():
            i = int(np.flatnonzero(size < 0)[0])
            raise SpecError(f"dissemination_forest: shard_bytes[{i}] = {int(size[i])} is negative")

    # -- Phase A: seeds and roots -----------------------------------------------------------
    a_shard, a_src, a_dst, a_rank = [], [], [], []  # a_rank: the seed's index in its PoD
    b_roots = []  # (shard, root gpu, phase-A edge index or -1, receivers of its block)
    gpu_load = {}  # bytes assigned to each holder as a root
    seed_load = {}  # bytes each receiver takes in as a seed
    pod_out = np.zeros(n_pods, dtype=np.int64)  # bytes leaving each PoD in Phase A
    for i, (holders, receivers) in enumerate(plan):
        if receivers.size == 0:
            continue
        rpods = pod_of[receivers]
        hpods = pod_of[holders]
        for p in np.unique(rpods).tolist():
            r = np.sort(receivers[rpods == p])
            local = holders[hpods == p]
            if local.size:  # the shard is already in this PoD: a holder there is the root
                b_roots.append((i, int(local.min()), -1, r))
                continue
            k = min(seeds_per_pod, r.size)
            start = (i * k) % r.size
            ring = (start + np.arange(r.size)) % r.size  # the receivers from the offset on
            load = np.array([seed_load.get(int(g), 0) for g in r[ring].tolist()], dtype=np.int64)
            pick = ring[np.argsort(load, kind="stable")[:k]]
            seeds = r[pick]
            for g in seeds.tolist():
                seed_load[g] = seed_load.get(g, 0) + int(size[i])
            blocks = np.array_split(np.delete(r, pick), k)
            for j, s in enumerate(seeds.tolist()):
                h = min(
                    holders.tolist(),
                    key=lambda g: (gpu_load.get(g, 0), int(pod_out[pod_of[g]]), g),
                )
                gpu_load[h] = gpu_load.get(h, 0) + int(size[i])
                pod_out[pod_of[h]] += size[i]
                b_roots.append((i, s, len(a_shard), blocks[j]))
                a_shard.append(i)
                a_src.append(h)
                a_dst.append(s)
                a_rank.append(j)
    a_shard = np.array(a_shard, dtype=np.int64)
    a_src = np.array(a_src, dtype=np.int64)
    a_dst = np.array(a_dst, dtype=np.int64)
    a_rank = np.array(a_rank, dtype=np.int64)
    ps, pd = pod_of[a_src], pod_of[a_dst]
    for pods in (ps, pd):
        short = np.flatnonzero(budget[pods] < 1)
        if short.size:
            e = int(short[0])
            p = int(pods[e])
            raise SpecError(
                f"dissemination_forest: pod_budget[{p}] = {int(budget[p])}, but shard {int(a_shard[e])} must "
                f"cross PoD {p}'s boundary (GPU {int(a_src[e])} -> {int(a_dst[e])}): need at least 1"
            )

    # -- Phase A: waves and circuits per edge (_phase_a_waves) --------------------------------
    m = a_shard.size
    cap = max_circuits_per_edge
    order = np.lexsort((a_dst, pd, a_shard, a_rank, -size[a_shard])) if m else np.zeros(0, np.int64)
    edge_bytes = size[a_shard]
    args = (order, ps, pd, a_src, a_dst, edge_bytes, budget, cap)
    wave, circuits = _phase_a_waves(*args, nic_rule=False)
    if cap is not None and m:
        # the NIC rule's schedule, taken where its NICs predict it faster (see Notes)
        wave_n, circuits_n = _phase_a_waves(*args, nic_rule=True)
        if _nic_time(wave_n, circuits_n, a_src, a_dst, edge_bytes, cap) < _nic_time(
            wave, circuits, a_src, a_dst, edge_bytes, cap
        ):
            wave, circuits = wave_n, circuits_n

    # -- Phase B: fan-out trees ---------------------------------------------------------------
    # A parent is an edge index: Phase A edges are 0..m-1, Phase B edges m.. in creation order.
    b_shard, b_src, b_dst, b_level, b_parent = [], [], [], [], []
    for i, root, via, block in b_roots:
        nodes = [root] + block.tolist()
        depth = [0] * len(nodes)
        into = [via] + [-1] * block.size  # the edge that brings the shard to each node
        for j in range(1, len(nodes)):
            par = (j - 1) // fanout
            depth[j] = depth[par] + 1
            into[j] = m + len(b_shard)
            b_shard.append(i)
            b_src.append(nodes[par])
            b_dst.append(nodes[j])
            b_level.append(depth[j])
            b_parent.append(into[par])
    nb = len(b_shard)
    # Final order: Phase A by wave, then Phase B by level (both stable): parents come first.
    order = np.concatenate(
        [np.argsort(wave, kind="stable"), m + np.argsort(np.array(b_level), kind="stable")]
    )
    order = order.astype(np.int64)
    new_pos = np.empty(m + nb, dtype=np.int64)
    new_pos[order] = np.arange(m + nb)
    parent = np.concatenate([np.full(m, -1, dtype=np.int64), np.array(b_parent, dtype=np.int64)])
    parent = np.where(parent >= 0, new_pos[np.maximum(parent, 0)], -1)

    def col(a_part, b_part):
        return np.concatenate([np.asarray(a_part, dtype=np.int64), np.asarray(b_part, dtype=np.int64)])[order]

    return Forest(
        shard=col(a_shard, b_shard),
        src=col(a_src, b_src),
        dst=col(a_dst, b_dst),
        wave=col(wave, np.full(nb, -1)),
        level=col(np.zeros(m), b_level),
        circuits=col(circuits, np.zeros(nb)),
        parent=parent[order],
        pod_of=pod_of,
        pod_budget=budget,
    )


def forest_ops(
    forest: Forest,
    shard_bytes,
    *,
    first_op_id: int = 0,
    deps: Sequence[int] = (),
    iteration: int = 0,
    period: int = 0,
    compute_ps: int = 0,
    barrier_above: int | None = None,
    shard_deps: Sequence[Sequence[int]] | None = None,
) -> dict:
    """Trace columns that replay a :class:`Forest`, one ``send`` op per edge.

    Parameters
    ----------
    forest : Forest
        From :func:`dissemination_forest`.
    shard_bytes : array_like of int, shape (shards,)
        Bytes of each shard (every edge of shard ``i`` sends ``shard_bytes[i]``).
    first_op_id : int
        op_id of the first op; the others follow consecutively in the forest's edge order.
    deps : sequence of int
        op_ids (all ``< first_op_id``) that must finish before the weight sync starts (e.g.
        the last optimizer step); added to every op whose sender holds the shard already.
    iteration, period, compute_ps : int
        ``iteration`` and ``compute_ps`` for every op. Wave ``t`` of Phase A gets period
        ``period + t`` and Phase B period ``period + n_waves``, so a controller called per
        period sees each wave (and the fan-out) as its own communication period.
    barrier_above : int, optional
        Waves ``t`` and ``t + 1`` whose sizes multiply to more than this (default
        ``BARRIER_ABOVE``) are joined by a barrier op (see Notes) instead of ``|t| x |t + 1|``
        dependency entries.
    shard_deps : sequence of sequences of int, optional
        Per shard, the op_ids (all ``< first_op_id``) its own sends wait for (its holder's
        training): an edge whose sender holds the shard waits for its shard's, in place of
        ``deps``, and so does every Phase A edge of a later wave, besides the wave before it.

    Returns
    -------
    dict
        Keyword arguments for :meth:`rfabric.traces.Trace.from_columns` (ops in edge order,
        with the barriers of the Notes between waves): ``op_id``,
        ``iteration``, ``stage`` (``"weight_sync"``), ``phase`` (``"inter_pod"`` for Phase
        A, ``"intra_pod"`` for Phase B, as :func:`rfabric.traces.generate_rl` names the two
        levels of its ``two_level`` weight sync), ``kind`` (``"send"``), ``ranks``
        (``[src, dst]``), ``size_bytes``, ``algorithm`` (``"direct"``), ``deps``,
        ``compute_ps`` and ``period``; plus nothing else, so more ops can be appended.

    Notes
    -----
    Dependencies: every op of wave ``t + 1`` waits for every op of wave ``t`` (the wave's
    circuits are torn down before the next wave's are lit, as appendix E's ``T_A = sum_t
    T_A^(t)`` assumes); a Phase B op waits for the op that brought the shard to its sender
    (a seed forwards only once it has the whole shard: store and forward, no chunk
    pipelining). Phase B of a PoD may run while later waves still seed other PoDs.

    Between large waves (sizes multiplying to more than ``barrier_above``) that wait goes
    through a barrier: a zero-byte ``send`` (between the first edge's GPUs of wave ``t``,
    in wave ``t``'s period) that depends on every op of wave ``t`` and on which every op of
    wave ``t + 1`` depends. A zero-byte op sends nothing and ends the instant it starts, so
    the waits are the same; the dense form grows with the square of the fabric (16 waves of
    4,096 sends at 16,384 GPUs: 250 M entries). A barrier's op comes right after its wave's
    (:func:`op_rows` says where each edge's op is).
    """
    size = _int_vector(shard_bytes, "shard_bytes")
    n_shards = int(forest.shard.max()) + 1 if forest.shard.size else 0
    if size.size < n_shards:
        raise SpecError(
            f"forest_ops: shard_bytes has {size.size} entries, the forest has shard {n_shards - 1}"
        )
    if (size < 0).any():
        i = int(np.flatnonzero(size < 0)[0])
        raise SpecError(f"forest_ops: shard_bytes[{i}] = {int(size[i])} is negative")
    ext = [int(d) for d in deps]
    if shard_deps is not None:
        if len(shard_deps) < n_shards:
            raise SpecError(
                f"forest_ops: shard_deps has {len(shard_deps)} entries, the forest has {n_shards} shards"
            )
        own = [[int(d) for d in x] for x in shard_deps]
        ext = sorted({d for x in own for d in x} | set(ext))
    bad = [d for d in ext if not 0 <= d < first_op_id]
    if bad:
        raise SpecError(
            f"forest_ops: deps entry {bad[0]} must be an earlier op_id (0 <= dep < first_op_id={first_op_id})"
        )
    n = forest.shard.size
    n_waves = forest.n_waves
    waves = forest.waves
    edge_row, barriers = op_rows(forest, barrier_above)
    k = n + len(barriers)
    ids = first_op_id + np.arange(k, dtype=np.int64)
    edge_id = ids[edge_row]
    barrier_row = [int(edge_row[waves[t][-1]]) + 1 for t in barriers]  # (right after its wave)
    # what wave t + 1 waits on: wave t's op ids, or its barrier's id
    wait_on: dict[int, list[int]] = {}
    for j, t in enumerate(barriers):
        wait_on[t] = [int(ids[barrier_row[j]])]
    for t in range(n_waves - 1):
        if t not in wait_on:
            wait_on[t] = edge_id[waves[t]].tolist()
    deps: list = [None] * k
    ranks: list = [None] * k
    phase: list = [None] * k
    op_period = np.empty(k, dtype=np.int64)
    size_bytes = np.zeros(k, dtype=np.int64)
    pairs = np.stack([forest.src, forest.dst], axis=1).tolist() if n else []
    for e in range(n):
        t, r = int(forest.wave[e]), int(edge_row[e])
        if t > 0:
            deps[r] = wait_on[t - 1] if shard_deps is None else wait_on[t - 1] + own[int(forest.shard[e])]
        elif forest.parent[e] >= 0:
            deps[r] = [int(edge_id[forest.parent[e]])]
        else:
            deps[r] = list(ext) if shard_deps is None else list(own[int(forest.shard[e])])
        ranks[r] = pairs[e]
        phase[r] = "inter_pod" if t >= 0 else "intra_pod"
        op_period[r] = period + t if t >= 0 else period + n_waves
        size_bytes[r] = size[forest.shard[e]]
    for j, t in enumerate(barriers):
        r = barrier_row[j]
        deps[r] = edge_id[waves[t]].tolist()
        ranks[r] = pairs[int(waves[t][0])]
        phase[r] = "inter_pod"
        op_period[r] = period + t
    return {
        "op_id": ids,
        "iteration": iteration,
        "stage": ["weight_sync"] * k,
        "phase": phase,
        "kind": ["send"] * k,
        "ranks": ranks,
        "size_bytes": size_bytes,
        "algorithm": "direct",
        "deps": deps,
        "compute_ps": compute_ps,
        "period": op_period,
    }


def _phase_a_waves(order, ps, pd, src, dst, edge_bytes, budget, cap, *, nic_rule):
    """``(wave, circuits)`` of the Phase A edges: the first-fit waves and the pair-bottleneck
    circuits per edge of :func:`dissemination_forest`'s Notes; with ``nic_rule`` a GPU's
    edges in one wave also keep within ``cap`` circuits sent and received."""
    m = src.size
    wave = np.full(m, -1, dtype=np.int64)
    left: list[np.ndarray] = []  # budget left per PoD in each open wave
    nic_out: list[dict] = []  # circuits each GPU's NIC sends (receives) on, per open wave
    nic_in: list[dict] = []

    def nic_free(t, s, d):
        return not nic_rule or (nic_out[t].get(s, 0) < cap and nic_in[t].get(d, 0) < cap)

    for e in order.tolist():
        u, v, s, d = int(ps[e]), int(pd[e]), int(src[e]), int(dst[e])
        t = next(
            (t for t, res in enumerate(left) if res[u] > 0 and res[v] > 0 and nic_free(t, s, d)),
            len(left),
        )
        if t == len(left):
            left.append(budget.copy())
            nic_out.append({})
            nic_in.append({})
        left[t][u] -= 1
        left[t][v] -= 1
        nic_out[t][s] = nic_out[t].get(s, 0) + 1
        nic_in[t][d] = nic_in[t].get(d, 0) + 1
        wave[e] = t
    circuits = np.ones(m, dtype=np.int64)
    for t, res in enumerate(left):
        res = res.tolist()
        heap = []
        for e in np.flatnonzero(wave == t).tolist():
            b = int(edge_bytes[e])
            heap.append((-b, -b, e))
        heapq.heapify(heap)
        while heap:
            _, negs, e = heapq.heappop(heap)
            u, v, s, d = int(ps[e]), int(pd[e]), int(src[e]), int(dst[e])
            if (
                res[u] <= 0
                or res[v] <= 0
                or (cap is not None and circuits[e] >= cap)
                or not nic_free(t, s, d)
            ):
                continue  # budgets only shrink: this edge can never grow again
            res[u] -= 1
            res[v] -= 1
            nic_out[t][s] += 1
            nic_in[t][d] += 1
            circuits[e] += 1
            heapq.heappush(heap, (negs / int(circuits[e]), negs, e))
    return wave, circuits


def _nic_time(wave, circuits, src, dst, edge_bytes, cap) -> float:
    """Phase A's time in units of one circuit's rate, waves back to back: per wave the
    longest of its edges (bytes over circuits) and of its NICs (the bytes a GPU sends, or
    receives, in the wave over the ``cap`` circuits it fills)."""
    total = 0.0
    for t in range(int(wave.max()) + 1 if wave.size else 0):
        e = wave == t
        b = edge_bytes[e].astype(np.float64)
        out = np.bincount(src[e], weights=b).max() / cap
        inn = np.bincount(dst[e], weights=b).max() / cap
        total += max(float((b / circuits[e]).max()), out, inn)
    return total


def op_rows(forest: Forest, barrier_above: int | None = None) -> tuple[np.ndarray, list[int]]:
    """Where :func:`forest_ops` puts each edge's op: ``(row of each edge, waves followed by a
    barrier)``. Rows go in edge order, with the barrier after wave ``t`` (when there is one)
    right after wave ``t``'s last op, so every op comes after what it depends on."""
    n = forest.shard.size
    if barrier_above is None:
        barrier_above = BARRIER_ABOVE
    barriers = [
        t
        for t in range(forest.n_waves - 1)
        if int((forest.wave == t).sum()) * int((forest.wave == t + 1).sum()) > barrier_above
    ]
    shift = np.zeros(n, dtype=np.int64)
    for t in barriers:  # (Phase B edges, wave -1, come after every barrier)
        shift += (forest.wave > t) | (forest.wave < 0)
    return np.arange(n, dtype=np.int64) + shift, barriers


def _int_vector(x, what):
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise SpecError(f"dissemination_forest: {what} must be one-dimensional, got shape {arr.shape}")
    if arr.size and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            return arr.astype(np.int64)
        raise SpecError(f"dissemination_forest: {what} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _positive_int(x, what):
    return integer(x, f"dissemination_forest: {what}", lo=1)


def _budgets(pod_budget, n_pods):
    if np.ndim(pod_budget) == 0:
        b = _int_vector(np.full(n_pods, pod_budget), "pod_budget")
    else:
        b = _int_vector(pod_budget, "pod_budget")
        if b.size != n_pods:
            raise SpecError(
                f"dissemination_forest: pod_budget has {b.size} entries, expected {n_pods} (one per PoD of pod_of)"
            )
    if (b < 0).any():
        p = int(np.flatnonzero(b < 0)[0])
        raise SpecError(f"dissemination_forest: pod_budget[{p}] = {int(b[p])} is negative")
    return b


def _shard_lists(shards, gpus):
    out = []
    try:
        items = list(shards)
    except TypeError:
        raise SpecError("dissemination_forest: shards must be a sequence of (holders, receivers)") from None
    for i, item in enumerate(items):
        try:
            holders, receivers = item
        except (TypeError, ValueError):
            raise SpecError(
                f"dissemination_forest: shards[{i}] must be a pair (holders, receivers)"
            ) from None
        lists = []
        for what, x in (("holders", holders), ("receivers", receivers)):
            arr = np.asarray(x, dtype=np.int64) if len(x) else np.zeros(0, dtype=np.int64)
            if arr.ndim != 1:
                raise SpecError(f"dissemination_forest: shard {i}: {what} must be a flat list of GPU ids")
            bad = np.flatnonzero((arr < 0) | (arr >= gpus))
            if bad.size:
                raise SpecError(
                    f"dissemination_forest: shard {i}: {what} has GPU {int(arr[bad[0]])}, outside 0..{gpus - 1} (pod_of)"
                )
            uniq, counts = np.unique(arr, return_counts=True)
            if (counts > 1).any():
                raise SpecError(
                    f"dissemination_forest: shard {i}: {what} lists GPU {int(uniq[counts > 1][0])} more than once"
                )
            lists.append(arr)
        holders, receivers = lists
        if holders.size == 0:
            raise SpecError(
                f"dissemination_forest: shard {i}: holders is empty (someone must hold the shard)"
            )
        out.append((holders, receivers[~np.isin(receivers, holders)]))
    return out


def sync_time(ranks, kind, algorithm, size_bytes, deps, op_id, pod_of, pod_budget) -> float:
    """A weight sync's predicted time, in bytes at one link's line rate (divide by the rate
    for seconds): its ops laid one after another, in order, on the NICs and PoD boundaries
    they use, from a common start.

    Each op starts when the ops of the list it depends on have ended (dependencies outside
    the list count as met at 0: the same for every scheme of the same shards), the sending
    side of each of its senders' NICs and the receiving side of each of its receivers' NICs
    are free, and, for each PoD its transfers cross into or out of, as many of the PoD's
    ``d_p`` boundary circuits as it has crossing transfers there are free (appendix E's
    budget, one unit at each end). It then holds all of them for its bytes times the most
    transfers one of its NICs carries (a ``send`` from its first rank to its second: its
    bytes; a ``direct`` broadcast from its root to each receiver: the root's NIC carries
    them all; any other broadcast, the executor's pipelined chain between consecutive
    ranks: its bytes), longer when it has more crossing transfers at a PoD than the PoD has
    circuits. The prediction is the last end.

    Two ops that share a NIC run one after the other here where a fabric shares the NIC's
    rate between them; the last of them ends at the same time either way. The model sees
    neither the fabric's links past the NICs and PoD boundaries, nor when each op's
    dependencies outside the list end (a scheme whose sends start as each holder's training
    ends gains what it overlaps with training), so it serves to compare two schemes of the
    same weight sync on the same locality, not to time one: the rule
    :class:`rfabric.rewrites.WeightSyncForest` uses to choose between the forest and the
    trace's own scheme (``choose="faster"``).

    Parameters
    ----------
    ranks, kind, algorithm, size_bytes, deps, op_id : sequences, one entry per op
        The ops in dependency order (every op after those it depends on), as trace columns:
        ``ranks`` a list of GPUs per op, ``kind`` ``"send"`` or ``"broadcast"``,
        ``algorithm`` a string per op (or one for all), ``deps`` a list of op ids per op.
    pod_of, pod_budget : array_like
        The locality (:class:`rfabric.rewrites.Locality`).
    """
    pod_of = np.asarray(pod_of, dtype=np.int64)
    budget = np.asarray(pod_budget, dtype=np.int64)
    if isinstance(algorithm, str):
        algorithm = [algorithm] * len(ranks)
    out_free: dict[int, float] = {}  # when each GPU's NIC may send again
    in_free: dict[int, float] = {}  # ... and receive again
    lanes: dict[int, list[float]] = {}  # per PoD: when each of its d_p circuits is free, sorted
    end_of: dict[int, float] = {}
    last = 0.0
    for i, rk in enumerate(ranks):
        rk = [int(g) for g in rk]
        start = max((end_of.get(int(d), 0.0) for d in deps[i]), default=0.0)
        if len(rk) < 2:
            end_of[int(op_id[i])] = start
            continue
        if kind[i] == "send":
            pairs = [(rk[0], rk[1])]
        elif algorithm[i] == "direct":
            pairs = [(rk[0], g) for g in rk[1:]]
        else:
            pairs = list(zip(rk[:-1], rk[1:], strict=True))
        n_out: dict[int, int] = {}
        n_in: dict[int, int] = {}
        cross: dict[int, int] = {}
        for a, b in pairs:
            n_out[a] = n_out.get(a, 0) + 1
            n_in[b] = n_in.get(b, 0) + 1
            pa, pb = int(pod_of[a]), int(pod_of[b])
            if pa != pb:
                cross[pa] = cross.get(pa, 0) + 1
                cross[pb] = cross.get(pb, 0) + 1
        size = float(size_bytes[i])
        start = max(
            start,
            max(out_free.get(a, 0.0) for a in n_out),
            max(in_free.get(b, 0.0) for b in n_in),
        )
        dur = size * max(max(n_out.values()), max(n_in.values()))
        for p, k in cross.items():
            free = lanes.setdefault(p, [0.0] * int(budget[p]))
            start = max(start, free[min(k, len(free)) - 1])
            dur = max(dur, size * k / len(free))
        end = start + dur
        for a in n_out:
            out_free[a] = end
        for b in n_in:
            in_free[b] = end
        for p, k in cross.items():
            free = lanes[p]
            free[: min(k, len(free))] = [end] * min(k, len(free))
            free.sort()
        end_of[int(op_id[i])] = end
        last = max(last, end)
    return last
