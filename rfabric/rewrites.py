"""Workload rewrites: fabric-independent changes to a trace's algorithms (DESIGN §12).

A :class:`Rewrite` replaces part of a trace by another algorithm that moves the same bytes to
the same GPUs, e.g. :class:`WeightSyncForest`, the weight sync replayed over the appendix-E
dissemination forest. A rewrite knows nothing about circuits or controllers: what it needs
from a fabric is its :class:`Locality` (which GPUs share a PoD, and how many circuits or
links each PoD may keep busy across its boundary at once), which every fabric gives
(:meth:`rfabric.topologies.Topology.locality`; a bare ``NetworkSpec`` through
:func:`locality`). So a rewrite one controller wants can be offered to every fabric of a
comparison: ``rf.simulate(..., rewrites=...)`` and ``rf.sweep(..., rewrites="offered")``
apply it, ``Results.ops["rewrite"]`` names the rewrite that produced each op and
``Results.run["rewrites"]`` summarises what was replaced (docs/fairness.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import SpecError
from .spec import CIRCUIT_KINDS, NODE_KINDS, NetworkSpec

__all__ = [
    "Locality",
    "Rewrite",
    "Rewritten",
    "WeightSyncForest",
    "locality",
    "locality_from_spec",
    "apply_rewrites",
    "resolve_rewrites",
]


# -- locality --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Locality:
    """Which GPUs share a PoD and each PoD's boundary budget: for the weight-sync forest, the
    islands a fabric joins only by optical circuits (packet-switched GPUs are one domain;
    :func:`locality_from_spec` says why).

    Attributes
    ----------
    pod_of : numpy.ndarray
        int64 per GPU: its PoD (0 .. pods-1).
    pod_budget : numpy.ndarray
        int64 per PoD (>= 1): links (or circuits) at line rate leaving the PoD, the ``d_p``
        a dissemination forest may keep busy at once across the PoD's boundary.
    source : str
        How it was derived, for the results (e.g. ``"FatTree: one domain (non-blocking)"``).
    """

    pod_of: np.ndarray
    pod_budget: np.ndarray
    source: str = ""

    def __post_init__(self):
        pod_of = np.asarray(self.pod_of, dtype=np.int64)
        budget = np.asarray(self.pod_budget, dtype=np.int64)
        if pod_of.ndim != 1 or pod_of.size == 0 or (pod_of < 0).any():
            raise SpecError("Locality: pod_of must be a non-empty list of PoD ids >= 0, one per GPU")
        if budget.ndim != 1 or budget.size != int(pod_of.max()) + 1:
            raise SpecError(
                f"Locality: pod_budget has {budget.size} entries, expected {int(pod_of.max()) + 1} (one per PoD)"
            )
        if (budget < 1).any():
            p = int(np.flatnonzero(budget < 1)[0])
            raise SpecError(f"Locality: pod_budget[{p}] = {int(budget[p])}; every PoD needs at least 1")
        object.__setattr__(self, "pod_of", pod_of)
        object.__setattr__(self, "pod_budget", budget)

    @property
    def pods(self) -> int:
        return int(self.pod_budget.size)

    @classmethod
    def one_domain(cls, gpus: int, source: str) -> Locality:
        """Every GPU in one PoD: no boundary worth economising (a dissemination forest is then
        one fan-out tree per shard, no inter-PoD phase)."""
        return cls(np.zeros(int(gpus), dtype=np.int64), np.ones(1, dtype=np.int64), source)

    def describe(self) -> str:
        if self.pods == 1:
            return f"1 PoD ({self.source})" if self.source else "1 PoD"
        b = np.unique(self.pod_budget)
        budget = f"{int(b[0])}" if b.size == 1 else f"{int(b.min())}-{int(b.max())}"
        return f"{self.pods} PoDs, boundary budget {budget} ({self.source})"


def locality(fabric) -> Locality:
    """The :class:`Locality` of a fabric: ``fabric.locality()`` for a
    :class:`~rfabric.topologies.Topology` (each family says what its PoDs are), else
    :func:`locality_from_spec` for a ``NetworkSpec``."""
    if isinstance(fabric, NetworkSpec):
        return locality_from_spec(fabric)
    if callable(getattr(fabric, "locality", None)) and hasattr(fabric, "gpus"):  # a Topology
        loc = fabric.locality()
        if not isinstance(loc, Locality):
            raise SpecError(
                f"{type(fabric).__name__}.locality() returned {type(loc).__name__}, expected rfabric.rewrites.Locality"
            )
        if loc.pod_of.size != fabric.gpus:
            raise SpecError(
                f"{type(fabric).__name__}.locality(): pod_of has {loc.pod_of.size} entries, the fabric has {fabric.gpus} GPUs"
            )
        return loc
    raise SpecError(f"locality: expected a Topology or NetworkSpec, got {type(fabric).__name__}")


def rfabric_locality(spec: NetworkSpec, who: str = "RFabric") -> Locality:
    """An RFabric's PoDs (from :class:`~rfabric.controllers.layout.RFabricLayout`), each with its
    PoD-boundary (OCS-Core) ports as budget, at least 1 (a single PoD crosses no boundary)."""
    from .controllers.layout import RFabricLayout

    lay = RFabricLayout(spec, who)
    d_p = (
        np.bincount(lay.core_port_pod, minlength=lay.pods)
        if lay.core_port_pod.size
        else np.zeros(lay.pods, np.int64)
    )
    # PoD ids may skip PoDs that hold no GPU (never for RFabric itself); keep them as PoDs
    return Locality(lay.tor_pod[lay.gpu_tor], np.maximum(d_p, 1), "RFabric: PoDs, OCS-Core ports")


def locality_from_spec(spec: NetworkSpec) -> Locality:
    """A fabric's locality read from its node and link tables (the default of
    :meth:`Topology.locality`, and what a bare ``NetworkSpec`` gets).

    The PoDs a dissemination forest seeds across are the *packet islands*: GPUs whose NICs
    reach each other through packet switches are one domain, whatever the tiers or the
    oversubscription between them, because a pipelined chain broadcast over receivers in GPU
    order crosses such a boundary once per shard anyway, without Phase A's store-and-forward
    hop (measured on FatTree 128 at 3:1, ``rfabric demo``'s iteration: weight sync 43.9 ms with
    one domain, 122.2 ms with its two fat-tree pods as PoDs, 87.5 ms for the generator's
    two-level broadcast). Only capacity that exists as optical circuits a controller lights
    wave by wave is a boundary worth seeding across.

    * A spec laid out as an RFabric (``pod{P}/tor...`` and ``pod{P}/ocs_agg...`` nodes) gets
      :meth:`RFabric.locality`'s answer: its PoDs, budget = OCS-Core ports.
    * Otherwise, when every GPU's NIC ends on a packet switch: the connected components of the
      packet switches (``eps`` nodes and the links between them) are the domains, each with its
      links to optical devices (its OCS ports, at least 1) as budget; one component: one domain.
    * GPUs with NICs on optical devices (direct-connect fabrics such as TopoOpt, whose servers
      relay through hosts over circuits in place): one domain.
    """
    from .controllers.layout import RFabricLayout

    try:
        RFabricLayout(spec)
    except SpecError:
        pass
    else:
        return rfabric_locality(spec)
    gpus = np.asarray(spec.gpu_nodes, dtype=np.int64)
    n_gpu = gpus.size
    kind = spec.nodes.kind
    src = spec.links.src.astype(np.int64)
    dst = spec.links.dst.astype(np.int64)
    eps = kind == NODE_KINDS["eps"]
    optical = np.isin(kind, [NODE_KINDS[k] for k in CIRCUIT_KINDS])
    is_gpu = kind == NODE_KINDS["gpu"]
    gpu_index = np.full(kind.size, -1, dtype=np.int64)
    gpu_index[gpus] = np.arange(n_gpu)
    # a GPU's NIC links: to anything but a GPU or an NVSwitch
    nvs = NODE_KINDS["nvswitch"]
    nic = np.flatnonzero((is_gpu[src] ^ is_gpu[dst]) & (kind[src] != nvs) & (kind[dst] != nvs))
    far = np.where(is_gpu[src[nic]], dst[nic], src[nic])
    own = np.where(is_gpu[src[nic]], src[nic], dst[nic])
    first = np.full(n_gpu, -1, dtype=np.int64)
    first[gpu_index[own]] = far  # a GPU with several NICs keeps its last one's first hop
    if (first < 0).any() or not eps[np.maximum(first, 0)].all() or not eps[far].all():
        return Locality.one_domain(n_gpu, "NICs on optical devices (direct-connect): one domain")
    parent = np.arange(kind.size)

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    pp = np.flatnonzero(eps[src] & eps[dst])
    for a, b in zip(src[pp].tolist(), dst[pp].tolist(), strict=True):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    roots = np.array([find(int(t)) for t in first.tolist()], dtype=np.int64)
    uniq, pod_of = np.unique(roots, return_inverse=True)
    if uniq.size == 1:
        return Locality.one_domain(n_gpu, "packet switches join every GPU: one domain")
    ports = np.zeros(uniq.size, dtype=np.int64)
    for a, b in ((src, dst), (dst, src)):
        m = eps[a] & optical[b]
        r = np.array([find(int(x)) for x in a[m].tolist()], dtype=np.int64)
        hit = np.isin(r, uniq)
        np.add.at(ports, np.searchsorted(uniq, r[hit]), 1)
    return Locality(pod_of, np.maximum(ports, 1), "packet islands, OCS ports of each")


# -- rewrites --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Rewritten:
    """What one rewrite did to a trace.

    Attributes
    ----------
    trace : rfabric.traces.Trace
        The rewritten trace.
    rewrite : Rewrite
        The rewrite that made it.
    origin : numpy.ndarray
        int64 per row of ``trace``: the row of the input trace it is (unchanged, maybe
        renumbered), or -1 for an op the rewrite produced.
    replaced : int
        Ops of the input trace the rewrite replaced.
    locality : Locality
        The locality it was given.
    schedule : dict
        What a controller may plan for (rewrite-specific; :class:`WeightSyncForest`: the
        forests and their periods).
    """

    trace: object
    rewrite: Rewrite
    origin: np.ndarray
    replaced: int
    locality: Locality
    schedule: dict = field(default_factory=dict)

    @property
    def produced(self) -> int:
        return int((self.origin < 0).sum())

    def summary(self) -> dict:
        out = {
            "rewrite": self.rewrite.name,
            "algorithm": self.rewrite.algorithm,
            "params": self.rewrite.params(),
            "ops_replaced": int(self.replaced),
            "ops_produced": self.produced,
            "locality": self.locality.describe(),
        }
        if self.schedule.get("choices"):  # WeightSyncForest(choose="faster"): what it chose
            out["choices"] = [dict(c) for c in self.schedule["choices"]]
        return out


class Rewrite:
    """Base class of workload rewrites. A rewrite is a value: two with equal :meth:`key` are
    the same rewrite. Subclasses set ``name`` and ``algorithm`` and implement :meth:`apply`.
    """

    #: short identifier, the value of ``Results.ops["rewrite"]`` for the ops it produces
    name = "rewrite"
    #: what it replays, for the results
    algorithm = ""

    def params(self) -> dict:
        """The parameters that make the rewrite (JSON-friendly)."""
        return {}

    def key(self) -> str:
        p = ",".join(f"{k}={v}" for k, v in sorted(self.params().items()))
        return f"{self.name}({p})"

    def __eq__(self, other):
        return isinstance(other, Rewrite) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return self.key()

    def apply(self, trace, loc: Locality) -> Rewritten | None:
        """Rewrite ``trace`` for a fabric of locality ``loc``; ``None`` when nothing in the
        trace is for this rewrite."""
        raise NotImplementedError(f"{type(self).__name__} must implement apply(trace, locality)")


class WeightSyncForest(Rewrite):
    """The weight sync replayed over the dissemination forest of paper appendix E (§5.2).

    For every (iteration, period) of ``weight_sync`` ops:

    * **Shards.** Each ``broadcast`` (root first) or ``send`` whose sender receives nothing in
      that weight sync is one shard: held by its sender, ``size_bytes`` long. Its receivers are
      closed under relaying: a receiver that is itself the root of a weight-sync op of the same
      period forwards to that op's receivers (the generator's ``two_level`` mode). The shard's
      final receivers are every GPU it reaches.
    * **Forest.** :func:`~rfabric.controllers.dissemination_forest` over the fabric's locality
      (``pod_of``, budgets ``d_p``), ``seeds_per_pod``, ``fanout``, the shard sizes and
      ``max_circuits_per_edge=1`` (a transfer leaves through one GPU NIC).
    * **Ops.** :func:`~rfabric.controllers.forest_ops`: one ``send`` per Phase A (inter-PoD)
      edge; wave ``t`` gets a fresh period per wave and Phase B one more (ids above every
      period of the trace). Phase B, with ``fanout_ops="broadcast"`` (default), is one
      pipelined ``chain`` broadcast per fan-out tree (root first, then the tree's receivers in
      breadth-first order), after the send that brings the shard to its root; with
      ``fanout_ops="send"`` one store-and-forward ``send`` per tree edge. Ops that depended on
      any op of the weight sync depend on all its new ops. A shard's sends wait for what
      the weight sync's ops of its holder and its receivers waited for outside the weight
      sync (its holder's training, its receivers' last ops), not for the whole weight sync's: its root's send
      starts as its holder's training ends, as the trace's own send would (appendix E's
      senders are the GPUs that hold the shard); a send of wave ``t + 1`` also waits for
      wave ``t``. The ops that wait for nothing of the forest keep the ``compute_ps`` of the
      weight sync's first op. Other ops keep their rows, renumbered in order.
    * **Choice** (``choose="faster"``, what :class:`~rfabric.controllers.StageAwareController`
      asks for). The forest replaces a weight sync only where
      :func:`~rfabric.controllers.forest.sync_time` predicts it faster than the trace's own
      ops on the same locality (a tie keeps the trace's ops); otherwise that weight sync is
      kept as the trace has it. The rule reads only the ops and the locality, so it runs the
      same on every fabric the rewrite is offered to. Both predictions and the choice of
      each weight sync are in ``schedule["choices"]`` and :meth:`Rewritten.summary`
      (``Results.run["rewrites"]``). ``choose="always"`` (default) always replaces it.

    Each receiver gets each of its shards once, as before: the weight sync's ``sent_bytes``
    is unchanged. On a fabric of one PoD there is no Phase A: each shard is one chain broadcast
    from its holder to all its receivers.
    """

    name = "weight_sync_forest"
    algorithm = "dissemination forest (appendix E): inter-PoD seeding waves, intra-PoD fan-out"

    def __init__(
        self, seeds_per_pod: int = 1, fanout: int = 2, fanout_ops: str = "broadcast", choose: str = "always"
    ):
        from .validators import integer

        self.seeds_per_pod = integer(seeds_per_pod, "WeightSyncForest: seeds_per_pod", lo=1)
        self.fanout = integer(fanout, "WeightSyncForest: fanout", lo=1)
        if fanout_ops not in ("broadcast", "send"):
            raise SpecError(f"WeightSyncForest: fanout_ops must be 'broadcast' or 'send', got {fanout_ops!r}")
        self.fanout_ops = fanout_ops
        if choose not in ("always", "faster"):
            raise SpecError(f"WeightSyncForest: choose must be 'always' or 'faster', got {choose!r}")
        self.choose = choose

    def params(self) -> dict:
        out = {"seeds_per_pod": self.seeds_per_pod, "fanout": self.fanout, "fanout_ops": self.fanout_ops}
        if self.choose != "always":  # (the keys of rewrites made before the rule stay as they were)
            out["choose"] = self.choose
        return out

    def apply(self, trace, loc: Locality) -> Rewritten | None:
        from .controllers.forest import dissemination_forest, forest_ops, sync_time
        from .traces import Trace

        a = trace.arrays()
        stage_names = list(a["stage_names"])
        if "weight_sync" not in stage_names:
            return None
        ws_code = stage_names.index("weight_sync")
        is_ws = a["stage"] == ws_code
        if not is_ws.any():
            return None
        n = trace.num_ops
        pod_of = loc.pod_of
        if trace.gpus is not None and trace.gpus > pod_of.size:
            raise SpecError(
                f"WeightSyncForest: the trace is for {trace.gpus} GPUs, the locality has {pod_of.size}"
            )
        ids = a["op_id"].astype(np.int64)
        t = trace.table
        stage = t["stage"].cast("string").to_pylist()
        phase = t["phase"].cast("string").to_pylist()
        kind = t["kind"].cast("string").to_pylist()
        algorithm = t["algorithm"].cast("string").to_pylist()
        ranks = t["ranks"].to_pylist()
        deps = t["deps"].to_pylist()
        size = a["size_bytes"].astype(np.int64)
        comp = a["compute_ps"].astype(np.int64)
        period = a["period"].astype(np.int64)
        iteration = a["iteration"].astype(np.int64)
        next_period = int(period.max()) + 1
        blocks: dict[tuple, list[int]] = {}
        for r in np.flatnonzero(is_ws).tolist():
            blocks.setdefault((int(iteration[r]), int(period[r])), []).append(r)
        cols = ("op_id", "iteration", "stage", "phase", "kind", "ranks", "size_bytes", "algorithm", "deps")
        out: dict[str, list] = {k: [] for k in (*cols, "compute_ps", "period")}
        m2n = a["m2n_senders"].astype(np.int64)
        has_m2n = "m2n_senders" in t.schema.names
        out_m2n: list[int] = []
        job = trace.job_of_ops()  # (a forest's ops are its weight sync's job's)
        out_job: list = []
        origin: list[int] = []
        new_id: dict[int, list[int]] = {}  # old op id -> the new op ids it stands for
        # per weight sync, its forest, and (choose="faster") the scheme predicted faster
        plans: dict[tuple, tuple] = {}
        choices = []
        for key, rws in blocks.items():
            shards, sizes, shard_ext, _ = _shards(rws, ranks, kind, size, deps, ids)
            if not shards:
                continue
            f = dissemination_forest(
                shards,
                pod_of,
                loc.pod_budget,
                seeds_per_pod=self.seeds_per_pod,
                fanout=self.fanout,
                shard_bytes=sizes,
                max_circuits_per_edge=1,
            )
            if self.choose == "faster":
                # the same prediction on the forest's ops (as the loop below emits them, without
                # the deps outside the weight sync) and on the trace's own
                c = forest_ops(f, sizes)
                if self.fanout_ops == "broadcast":
                    c = _broadcast_fanout(f, c, 0, [[] for _ in shards], sizes)
                cols = (c["ranks"], c["kind"], c["algorithm"], c["size_bytes"], c["deps"], c["op_id"])
                t_forest = sync_time(*cols, pod_of, loc.pod_budget)
                rs = sorted(rws)
                own = ([ranks[r] for r in rs], [kind[r] for r in rs], [algorithm[r] for r in rs])
                own += (size[rs], [deps[r] for r in rs], ids[rs])
                t_own = sync_time(*own, pod_of, loc.pod_budget)
                # a tie keeps the trace's own ops: no rewrite for nothing
                chosen = "forest" if t_forest < t_own else "own"
                choices.append(
                    {
                        "iteration": key[0],
                        "period": key[1],
                        "chosen": chosen,
                        "forest_bytes": t_forest,
                        "own_bytes": t_own,
                        "ops": len(rws),
                        "forest_period": None,  # the forest's first period, when it runs
                        "job": None if job is None else str(job[rws[0]]),
                    }
                )
                if chosen == "own":
                    continue
            plans[key] = (f, sizes, shard_ext)
        block_of_row = {r: key for key, rws in blocks.items() if key in plans for r in rws}
        emitted = set()
        forests = []  # (Forest, first period, shard sizes)
        replaced = 0
        nid = 0
        for r in range(n):
            if r in block_of_row:
                key = block_of_row[r]
                if key in emitted:
                    continue
                emitted.add(key)
                rws = blocks[key]
                f, sizes, shard_ext = plans[key]
                # each shard's sends wait for what its own ops waited for (its holder's
                # training), not for the whole weight sync's
                own_new = [sorted({x for d in e for x in new_id.get(d, [])}) for e in shard_ext]
                ext_new = sorted({x for e in own_new for x in e})
                c = forest_ops(
                    f,
                    sizes,
                    first_op_id=nid,
                    deps=ext_new,
                    iteration=key[0],
                    period=next_period,
                    compute_ps=0,
                    shard_deps=own_new,
                )
                if self.fanout_ops == "broadcast":
                    c = _broadcast_fanout(f, c, nid, own_new, sizes)
                k = len(c["op_id"])
                first_comp = int(comp[rws[0]])
                # the roots: ops that wait for nothing of the forest
                cps = [first_comp if all(d < nid for d in c["deps"][e]) else 0 for e in range(k)]
                forests.append((f, next_period))
                for ch in choices:
                    if (ch["iteration"], ch["period"]) == key:
                        ch["forest_period"] = next_period
                next_period += f.n_waves + 1
                new_ids = list(range(nid, nid + k))
                for rr in rws:
                    new_id[int(ids[rr])] = new_ids
                replaced += len(rws)
                out["op_id"] += new_ids
                out["iteration"] += [key[0]] * k
                for col in ("stage", "phase", "kind", "ranks", "deps"):
                    out[col] += list(c[col])
                out["size_bytes"] += np.asarray(c["size_bytes"]).tolist()
                alg = c["algorithm"]
                out["algorithm"] += list(alg) if isinstance(alg, list) else [alg] * k
                out["compute_ps"] += cps
                out["period"] += np.asarray(c["period"]).tolist()
                out_m2n += [0] * k
                if job is not None:
                    out_job += [job[rws[0]]] * k
                origin += [-1] * k
                nid += k
                continue
            new_id[int(ids[r])] = [nid]
            out["op_id"].append(nid)
            out["iteration"].append(int(iteration[r]))
            out["stage"].append(stage[r])
            out["phase"].append(phase[r])
            out["kind"].append(kind[r])
            out["ranks"].append(ranks[r])
            out["size_bytes"].append(int(size[r]))
            out["algorithm"].append(algorithm[r])
            out["deps"].append(sorted({x for d in deps[r] for x in new_id[int(d)]}))
            out["compute_ps"].append(int(comp[r]))
            out["period"].append(int(period[r]))
            out_m2n.append(int(m2n[r]))
            if job is not None:
                out_job.append(job[r])
            origin.append(r)
            nid += 1
        if not forests:
            if not choices:
                return None
            # the trace's own scheme kept for every weight sync: the trace as it is, the choice recorded
            return Rewritten(
                trace=trace,
                rewrite=self,
                origin=np.arange(n, dtype=np.int64),
                replaced=0,
                locality=loc,
                schedule={"forests": [], "choices": choices},
            )
        new = Trace.from_columns(
            **out,
            m2n_senders=out_m2n if has_m2n else None,
            job=out_job if job is not None else None,
            metadata=trace.metadata,
            gpus=trace.gpus,
        )
        return Rewritten(
            trace=new,
            rewrite=self,
            origin=np.asarray(origin, dtype=np.int64),
            replaced=replaced,
            locality=loc,
            schedule={"forests": forests, "choices": choices},
        )


def _shards(rws, ranks, kind, size, deps, ids):
    """Shards (holders, receivers), their sizes, each shard's external deps (what the
    weight-sync ops of its holder and of its receivers waited for outside the weight sync:
    the holder's training, the receivers' last ops) and each shard's op row, for one weight
    sync."""
    own = {int(ids[r]) for r in rws}
    fwd: dict[int, list[int]] = {}  # root -> rows it sends
    recv_all = set()
    for r in rws:
        if kind[r] not in ("broadcast", "send"):
            raise SpecError(
                f"WeightSyncForest: weight-sync op {int(ids[r])} has kind {kind[r]!r}; the forest "
                "replays broadcast and send ops only (run without this rewrite to keep it)"
            )
        fwd.setdefault(ranks[r][0], []).append(r)
        recv_all |= set(ranks[r][1:])
    # what each GPU's weight-sync ops waited for outside the weight sync (its training, its
    # last decode): a shard's sends wait for its holder's and its receivers'
    # (a dep is a GPU's when the GPU is among the dep's ranks; one among none of the op's
    # ranks is every rank's)
    row_of = {int(i): k for k, i in enumerate(ids.tolist())}
    dep_ranks: dict[int, set] = {}
    gpu_ext: dict[int, set] = {}
    for r in rws:
        for d in deps[r]:
            d = int(d)
            if d in own:
                continue
            if d not in dep_ranks:
                dep_ranks[d] = set(ranks[row_of[d]]) if d in row_of else set()
            mine = [g for g in ranks[r] if g in dep_ranks[d]] or ranks[r]
            for g in mine:
                gpu_ext.setdefault(g, set()).add(d)
    shards, sizes, shard_ext, rows = [], [], [], []
    for r in rws:
        root = ranks[r][0]
        if root in recv_all:
            continue
        reached, todo = set(), list(ranks[r][1:])
        while todo:
            g = todo.pop()
            if g in reached or g == root:
                continue
            reached.add(g)
            for rr in fwd.get(g, []):
                todo += ranks[rr][1:]
        ext = set(gpu_ext.get(root, ()))
        for g in reached:
            ext |= gpu_ext.get(g, set())
        shards.append(([root], sorted(reached)))
        sizes.append(int(size[r]))
        shard_ext.append(sorted(ext))
        rows.append(r)
    return shards, np.array(sizes, dtype=np.int64), shard_ext, rows


def _broadcast_fanout(f, cols: dict, first_id: int, shard_deps: list, sizes) -> dict:
    """``forest_ops`` columns with Phase B's sends replaced by one pipelined ``chain``
    broadcast per Phase B tree: ranks ``[tree root] + its receivers`` in the tree's
    breadth-first order, ``size_bytes`` the shard's, depending on the Phase A op that
    brings the shard to the root (or on the shard's ``shard_deps`` when a local holder is
    the root). Phase A rows are kept as they are (they come first in the forest's edge order)."""
    from .controllers.forest import op_rows

    # Phase A's ops and the barriers between its waves come first (forest_ops' rows)
    edge_row, barriers = op_rows(f)
    m = int((f.wave >= 0).sum()) + len(barriers)
    out = {k: (list(v[:m]) if not np.isscalar(v) and not isinstance(v, str) else v) for k, v in cols.items()}
    out["algorithm"] = ["direct"] * m
    top = {}  # Phase B edge -> (shard, root GPU, Phase A edge or -1)
    trees: dict[tuple, list[int]] = {}
    for e in np.flatnonzero(f.wave < 0).tolist():
        par = int(f.parent[e])
        if par < 0 or f.wave[par] >= 0:
            key = (int(f.shard[e]), int(f.src[e]), par)
        else:
            key = top[par]
        top[e] = key
        trees.setdefault(key, []).append(int(f.dst[e]))
    b_period = int(np.max(cols["period"])) if len(cols["period"]) else 0
    for i, ((shard, root, via), receivers) in enumerate(trees.items()):
        out["op_id"].append(first_id + m + i)
        out["stage"].append("weight_sync")
        out["phase"].append("intra_pod")
        out["kind"].append("broadcast")
        out["ranks"].append([root, *receivers])
        out["deps"].append([first_id + int(edge_row[via])] if via >= 0 else list(shard_deps[shard]))
        out["algorithm"].append("chain")
        out["size_bytes"].append(int(sizes[shard]))
        out["period"].append(b_period)
    out["op_id"] = np.asarray(out["op_id"], dtype=np.int64)
    out["size_bytes"] = np.asarray(out["size_bytes"], dtype=np.int64)
    out["period"] = np.asarray(out["period"], dtype=np.int64)
    return out


# -- applying a list -------------------------------------------------------------------------


def resolve_rewrites(spec, where: str = "rewrites") -> list[Rewrite] | str:
    """``"own"``, ``"none"``, a :class:`Rewrite` or a list of them (validated, duplicates
    refused: two rewrites of one name would rewrite each other's output)."""
    if isinstance(spec, str):
        if spec in ("own", "none"):
            return spec
        raise SpecError(f"{where}: expected 'own', 'none', a Rewrite or a list of them, got {spec!r}")
    if isinstance(spec, Rewrite):
        spec = [spec]
    try:
        items = list(spec)
    except TypeError:
        raise SpecError(
            f"{where}: expected 'own', 'none', a Rewrite or a list of them, got {type(spec).__name__}"
        ) from None
    out: list[Rewrite] = []
    for i, rw in enumerate(items):
        if not isinstance(rw, Rewrite):
            raise SpecError(f"{where}[{i}]: expected an rfabric.rewrites.Rewrite, got {type(rw).__name__}")
        same = [o for o in out if o.name == rw.name]
        if same and same[0] != rw:
            raise SpecError(
                f"{where}: two different {rw.name} rewrites ({same[0].key()} and {rw.key()}); give one"
            )
        if not same:
            out.append(rw)
    return out


def apply_rewrites(trace, rewrites, loc: Locality) -> tuple[object, list[Rewritten], np.ndarray]:
    """Apply ``rewrites`` in order. Returns (the final trace, the :class:`Rewritten` of each
    rewrite that changed something, the producing rewrite's name per final op or None)."""
    label = np.full(trace.num_ops, None, dtype=object)
    done = []
    for rw in rewrites:
        r = rw.apply(trace, loc)
        if r is None:
            continue
        keep = r.origin >= 0
        new = np.full(r.origin.size, rw.name, dtype=object)
        new[keep] = label[r.origin[keep]]
        label, trace = new, r.trace
        done.append(r)
    return trace, done, label
