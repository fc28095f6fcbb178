"""Network specs: the struct-of-arrays tables a topology emits, and their validation.

A topology is two tables. ``NodeTable`` has one row per node (GPU, NVSwitch, packet switch,
OCS, patch panel); ``LinkTable`` has one row per full-duplex link, with its rate, propagation
delay and per-port buffer. ``NetworkSpec.from_tables(...)`` validates both once and is what
the engine is built from. GPU ids are the order of the ``gpu`` rows in the node table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._graph import connected_components
from ._optional import require
from .errors import SpecError
from .units import MAX_RATE_BPS, MAX_SIZE_BYTES
from .validators import integer

__all__ = [
    "NODE_KINDS",
    "CIRCUIT_KINDS",
    "MAX_NODES",
    "MAX_LINKS",
    "MAX_LATENCY_PS",
    "NodeTable",
    "LinkTable",
    "CircuitTable",
    "NetworkSpec",
]

#: Node kind names and their integer codes (the engine's NodeKind enum).
NODE_KINDS: dict[str, int] = {"gpu": 0, "nvswitch": 1, "eps": 2, "ocs": 3, "patch_panel": 4}
_KIND_NAMES = {v: k for k, v in NODE_KINDS.items()}
#: Passive optical devices: their links are circuit ports, joined in pairs by circuits.
CIRCUIT_KINDS = ("ocs", "patch_panel")
#: The largest network a spec holds: 2^22 nodes and 2^24 links. The engine numbers nodes and
#: links with 32-bit integers; these limits sit well below that and above the largest
#: built-in fabric (``Topology.MAX_GPUS`` = 2^20 GPUs: a FatTree of 1,212,416 nodes and
#: 4,194,304 links, built in about 6 s and 1 GB), so a size typed wrong (2^40) is refused at
#: once instead of filling memory.
MAX_NODES = 1 << 22
MAX_LINKS = 1 << 24
#: The longest latency of one link or one node: 1 s. A path's latencies add up inside the
#: engine, which must stay below the time horizon (rfabric.units.MAX_TIME_PS); a real hop
#: takes nanoseconds to microseconds (a long-haul fibre milliseconds), so a larger value is a
#: unit mistake (2**62 per link used to wrap a run's makespan negative).
MAX_LATENCY_PS = 10**12


def _col(values, dtype, name: str, n: int | None = None) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except Exception as exc:  # ragged input and the like
        raise SpecError(f"column '{name}': cannot be made an array ({exc})") from None
    if arr.ndim == 0 and n is not None:
        arr = np.full(n, arr)
    if arr.ndim != 1:
        raise SpecError(f"column '{name}': expected a 1-d array, got shape {arr.shape}")
    if n is not None and len(arr) != n:
        raise SpecError(f"column '{name}': has {len(arr)} rows, expected {n}")
    if np.issubdtype(np.dtype(dtype), np.integer):
        if arr.size and not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.bool_)):
            if (
                np.issubdtype(arr.dtype, np.floating)
                and np.all(np.isfinite(arr))
                and np.all(arr == np.round(arr))
            ):
                arr = arr.astype(np.int64)
            else:
                raise SpecError(f"column '{name}': expected integers, got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=dtype)


@dataclass(frozen=True)
class NodeTable:
    """Nodes: ``kind`` (names from NODE_KINDS), ``name``, ``server`` (-1 if none), ``latency_ps``."""

    kind: np.ndarray
    name: np.ndarray
    server: np.ndarray
    latency_ps: np.ndarray

    @classmethod
    def build(cls, kind: Sequence[str], name: Sequence[str], server, latency_ps) -> NodeTable:
        n = len(kind)
        if n > MAX_NODES:
            raise SpecError(
                f"node table: {n} nodes, beyond the limit of {MAX_NODES} (rfabric.spec.MAX_NODES)"
            )
        codes = np.empty(n, dtype=np.uint8)
        for i, k in enumerate(kind):
            code = NODE_KINDS.get(k) if isinstance(k, str) else None
            if code is None:
                raise SpecError(
                    f"node {i} ({name[i] if i < len(name) else '?'}): unknown kind {k!r} "
                    f"(known: {', '.join(NODE_KINDS)})"
                )
            codes[i] = code
        return cls(
            kind=codes,
            name=np.asarray(list(name), dtype=object) if n else np.empty(0, dtype=object),
            server=_col(server, np.int32, "server", n),
            latency_ps=_col(latency_ps, np.int64, "latency_ps", n),
        )

    def __len__(self) -> int:
        return len(self.kind)

    def kind_names(self) -> np.ndarray:
        return np.array([_KIND_NAMES[int(c)] for c in self.kind], dtype=object)


@dataclass(frozen=True)
class LinkTable:
    """Full-duplex links: ``src``, ``dst`` (node rows), ``rate_bps``, ``latency_ps``
    (propagation), ``buffer_bytes`` (per port, each end) and a free-form ``kind`` label
    (e.g. ``nic``, ``nvlink``, ``tor-agg``) used in result tables and the cost model."""

    src: np.ndarray
    dst: np.ndarray
    rate_bps: np.ndarray
    latency_ps: np.ndarray
    buffer_bytes: np.ndarray
    kind: np.ndarray

    @classmethod
    def build(cls, src, dst, rate_bps, latency_ps, buffer_bytes, kind) -> LinkTable:
        src = _col(src, np.int64, "src")
        n = len(src)
        if n > MAX_LINKS:
            raise SpecError(
                f"link table: {n} links, beyond the limit of {MAX_LINKS} (rfabric.spec.MAX_LINKS)"
            )
        kinds = np.asarray(kind, dtype=object)
        if kinds.ndim == 0:
            kinds = np.full(n, kinds.item(), dtype=object)
        if len(kinds) != n:
            raise SpecError(f"column 'kind': has {len(kinds)} rows, expected {n}")
        return cls(
            src=src,
            dst=_col(dst, np.int64, "dst", n),
            rate_bps=_col(rate_bps, np.int64, "rate_bps", n),
            latency_ps=_col(latency_ps, np.int64, "latency_ps", n),
            buffer_bytes=_col(buffer_bytes, np.int64, "buffer_bytes", n),
            kind=kinds,
        )

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class CircuitTable:
    """Optical circuits: circuit ``i`` joins links ``a[i]`` and ``b[i]`` inside device
    ``ocs[i]`` (an ``ocs`` or ``patch_panel`` node that both links end at). Light passes
    through, so a chain of circuits (ToR - OCS-Agg - OCS-Core - OCS-Agg - ToR) is one
    end-to-end channel between the two electrical endpoints, with the summed propagation
    delay and the slowest link's rate. Each (device, link) end takes part in at most one circuit.
    """

    ocs: np.ndarray
    a: np.ndarray
    b: np.ndarray

    def __post_init__(self):
        # however it was made (build(), or the constructor with lists, floats, strings or
        # columns of different lengths), a table holds three equal int64 columns or is refused
        ocs = _col(self.ocs, np.int64, "ocs")
        object.__setattr__(self, "ocs", ocs)
        object.__setattr__(self, "a", _col(self.a, np.int64, "a", len(ocs)))
        object.__setattr__(self, "b", _col(self.b, np.int64, "b", len(ocs)))

    @classmethod
    def build(cls, ocs, a, b) -> CircuitTable:
        return cls(ocs=ocs, a=a, b=b)

    @classmethod
    def empty(cls) -> CircuitTable:
        return cls.build(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))

    def __len__(self) -> int:
        return len(self.ocs)


@dataclass(frozen=True)
class NetworkSpec:
    """A validated network. Build with ``NetworkSpec.from_tables`` (or ``Topology.to_spec()``).

    ``circuits`` is the circuit plan in force at time 0 (empty without optical devices).
    ``host_forwarding``: GPUs and NVSwitches may carry other GPUs' traffic between servers
    (TopoOpt, MixNet); otherwise inter-server traffic goes NIC -> packet switches -> NIC.
    ``pxn``: cross-rail traffic first crosses the NVSwitch to the GPU whose NIC sits on the
    destination's rail (NCCL's PXN, rail-optimized fabrics).
    ``deadlock_free``: packet switches route up*/down* (climb toward a root, then descend)
    instead of shortest paths, so lossless (PFC) traffic cannot deadlock on circuit meshes.
    ``routing``: how the fabric's deployments pick among equal-cost next hops (an
    ``EngineConfig.ecmp`` mode), used when the run's config leaves ``ecmp`` unset.
    ``link_lossy``, ``gpu_site``, ``cross_site_transport`` (``rf.topologies.Sites(...,
    transport=)``; None otherwise): links whose ports never PAUSE and drop when full even in a
    lossless run (bool per link), each GPU's site (int per GPU id), and the transport of the
    flows between GPUs of different sites (a lossy one, e.g. ``"dctcp"``; the run's inside).
    ``cross_site_ecn_ps``, ``cross_site_min_rto_ps`` (with a cross-site transport; None: its
    defaults): the lossy links' step ECN threshold as queueing delay, and the cross-site flows'
    minimum retransmission timeout.
    """

    nodes: NodeTable
    links: LinkTable
    name: str = "network"
    gpu_nodes: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    circuits: CircuitTable = field(repr=False, default=None)  # type: ignore[assignment]
    host_forwarding: bool = False
    pxn: bool = False
    deadlock_free: bool = False
    routing: str = "dmodk"
    #: the fabric's preferred ring orders (``Topology.ring_orders()``): int64 (channels, GPUs),
    #: each row a permutation of GPU ids; None: the collective executor's default order
    rings: np.ndarray | None = field(repr=False, default=None)
    #: GPU type name of each GPU (object array in GPU order; ``Topology(gpu=...)``), which
    #: ``rf.cost`` prices per type; None: not given (the default type, H800)
    gpu_types: np.ndarray | None = field(repr=False, default=None)
    link_lossy: np.ndarray | None = field(repr=False, default=None)
    gpu_site: np.ndarray | None = field(repr=False, default=None)
    cross_site_transport: str | None = None
    #: the lossy links' step ECN threshold and the cross-site flows' minimum RTO, in ps
    #: (``Sites`` scales both to the long link); None: the cross-site transport's and the
    #: run's (``EngineConfig.dctcp_min_rto``)
    cross_site_ecn_ps: int | None = None
    cross_site_min_rto_ps: int | None = None

    @classmethod
    def from_tables(
        cls,
        nodes: NodeTable,
        links: LinkTable,
        name: str = "network",
        circuits: CircuitTable | None = None,
        *,
        host_forwarding: bool = False,
        pxn: bool = False,
        deadlock_free: bool = False,
        routing: str = "dmodk",
        rings=None,
        gpu_types=None,
        link_lossy=None,
        gpu_site=None,
        cross_site_transport: str | None = None,
        cross_site_ecn_ps: int | None = None,
        cross_site_min_rto_ps: int | None = None,
    ) -> NetworkSpec:
        gpu_nodes = np.flatnonzero(nodes.kind == NODE_KINDS["gpu"]).astype(np.int64)
        spec = cls(
            nodes=nodes,
            links=links,
            name=name,
            gpu_nodes=gpu_nodes,
            circuits=circuits if circuits is not None else CircuitTable.empty(),
            host_forwarding=bool(host_forwarding),
            pxn=bool(pxn),
            deadlock_free=bool(deadlock_free),
            routing=check_routing(routing, name),
            rings=None if rings is None else check_rings(rings, len(gpu_nodes), name),
            gpu_types=None if gpu_types is None else check_gpu_types(gpu_types, len(gpu_nodes), name),
            link_lossy=None if link_lossy is None else np.asarray(link_lossy, dtype=bool),
            gpu_site=None if gpu_site is None else np.asarray(gpu_site, dtype=np.int64),
            cross_site_transport=cross_site_transport,
            cross_site_ecn_ps=cross_site_ecn_ps,
            cross_site_min_rto_ps=cross_site_min_rto_ps,
        )
        spec.validate()
        return spec

    @property
    def num_gpus(self) -> int:
        return len(self.gpu_nodes)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_links(self) -> int:
        return len(self.links)

    def node_id(self, node) -> int:
        """Node row of a name or id (raises SpecError naming the unknown node)."""
        if isinstance(node, (int, np.integer)) and not isinstance(node, bool):
            if not 0 <= int(node) < self.num_nodes:
                raise SpecError(f"{self.name}: node {node} does not exist (there are {self.num_nodes})")
            return int(node)
        hits = np.flatnonzero(self.nodes.name == node)
        if hits.size == 0:
            raise SpecError(f"{self.name}: no node named {node!r}")
        return int(hits[0])

    def links_of(self, node) -> np.ndarray:
        """Link rows that end at ``node`` (a name or id)."""
        n = self.node_id(node)
        return np.flatnonzero((self.links.src == n) | (self.links.dst == n))

    def link_between(self, a, b) -> int:
        """The link row joining nodes ``a`` and ``b`` (names or ids); the first if several."""
        na, nb = self.node_id(a), self.node_id(b)
        hits = np.flatnonzero(
            ((self.links.src == na) & (self.links.dst == nb))
            | ((self.links.src == nb) & (self.links.dst == na))
        )
        if hits.size == 0:
            raise SpecError(f"{self.name}: no link between {self.node_label(na)} and {self.node_label(nb)}")
        return int(hits[0])

    def nic_link(self, gpu: int) -> int:
        """The link row of GPU ``gpu``'s NIC (GPU id, not node row)."""
        gpu = integer(gpu, f"{self.name}: GPU")
        if not 0 <= gpu < self.num_gpus:
            raise SpecError(f"{self.name}: GPU {gpu} does not exist (it has {self.num_gpus})")
        node = self.gpu_nodes[gpu]
        nvs = NODE_KINDS["nvswitch"]
        for link in self.links_of(node):
            other = self.links.dst[link] if self.links.src[link] == node else self.links.src[link]
            if self.nodes.kind[other] != nvs:
                return int(link)
        raise SpecError(f"{self.name}: GPU {gpu} has no NIC link")

    def node_label(self, node: int) -> str:
        return f"node {node} ({self.nodes.name[node]})"

    def validate(self) -> None:
        """Raise SpecError naming the first offending node or link."""
        nodes, links = self.nodes, self.links
        n = len(nodes)
        if self.num_gpus == 0:
            raise SpecError(f"{self.name}: has no gpu nodes")
        bad = np.flatnonzero(nodes.latency_ps < 0)
        if bad.size:
            raise SpecError(f"{self.name}: {self.node_label(bad[0])} has negative latency_ps")
        bad = np.flatnonzero(nodes.latency_ps > MAX_LATENCY_PS)
        if bad.size:
            raise SpecError(
                f"{self.name}: {self.node_label(bad[0])}: latency_ps {nodes.latency_ps[bad[0]]} is beyond "
                f"{MAX_LATENCY_PS} ps (1 s, rfabric.spec.MAX_LATENCY_PS)"
            )
        names = nodes.name
        if len(set(names.tolist())) != n:
            seen: set = set()
            for i, nm in enumerate(names):
                if nm in seen:
                    raise SpecError(f"{self.name}: node name {nm!r} is used twice (node {i})")
                seen.add(nm)
        for col in ("src", "dst"):
            arr = getattr(links, col)
            bad = np.flatnonzero((arr < 0) | (arr >= n))
            if bad.size:
                raise SpecError(
                    f"{self.name}: link {bad[0]}: {col} {arr[bad[0]]} is not a node (there are {n})"
                )
        bad = np.flatnonzero(links.src == links.dst)
        if bad.size:
            raise SpecError(
                f"{self.name}: link {bad[0]} connects {self.node_label(links.src[bad[0]])} to itself"
            )
        for col, allow_zero in (("rate_bps", False), ("latency_ps", True), ("buffer_bytes", False)):
            arr = getattr(links, col)
            bad = np.flatnonzero(arr < 0 if allow_zero else arr <= 0)
            if bad.size:
                raise SpecError(
                    f"{self.name}: link {bad[0]}: {col} must be "
                    f"{'non-negative' if allow_zero else 'positive'}, got {arr[bad[0]]}"
                )
        for col, limit, why in (
            ("rate_bps", MAX_RATE_BPS, "2^50 bit/s, rfabric.units.MAX_RATE_BPS"),
            ("latency_ps", MAX_LATENCY_PS, "1 s, rfabric.spec.MAX_LATENCY_PS"),
            ("buffer_bytes", MAX_SIZE_BYTES, "2^48 bytes, rfabric.units.MAX_SIZE_BYTES"),
        ):
            arr = getattr(links, col)
            bad = np.flatnonzero(arr > limit)
            if bad.size:
                raise SpecError(f"{self.name}: link {bad[0]}: {col} {arr[bad[0]]} is beyond {limit} ({why})")
        # a node no link reaches carries nothing: a switch or optical device left unwired is
        # a mistake in build() (a GPU without links is named in _validate_gpus)
        degree = np.bincount(np.concatenate([links.src, links.dst]), minlength=n)
        bad = np.flatnonzero((degree == 0) & (nodes.kind != NODE_KINDS["gpu"]))
        if bad.size:
            kind = _KIND_NAMES[int(nodes.kind[bad[0]])]
            more = f" ({bad.size - 1} more such nodes)" if bad.size > 1 else ""
            raise SpecError(f"{self.name}: {kind} {self.node_label(bad[0])} has no links{more}")
        # and every node is wired, through links, to the GPUs: an island of switches carries
        # nothing either
        label = connected_components(n, links.src, links.dst)
        gpu_labels = np.unique(label[nodes.kind == NODE_KINDS["gpu"]])
        off = np.flatnonzero(~np.isin(label, gpu_labels))
        if off.size:
            kind = _KIND_NAMES[int(nodes.kind[off[0]])]
            island = np.flatnonzero(label == label[off[0]])
            names = ", ".join(str(x) for x in nodes.name[island[:4]]) + (", ..." if island.size > 4 else "")
            raise SpecError(
                f"{self.name}: {kind} {self.node_label(off[0])} is not wired to any GPU: its links "
                f"join only the {island.size} nodes {names}"
            )
        self._validate_gpus()

    def _validate_gpus(self) -> None:
        kind = self.nodes.kind
        gpu, nvs = NODE_KINDS["gpu"], NODE_KINDS["nvswitch"]
        src, dst = self.links.src, self.links.dst
        ends = np.concatenate([src, dst])
        peers = np.concatenate([dst, src])
        at_gpu = kind[ends] == gpu
        nic_mask = at_gpu & (kind[peers] != nvs)
        nvl_mask = at_gpu & (kind[peers] == nvs)
        nic_count = np.bincount(ends[nic_mask], minlength=len(kind))
        nvl_count = np.bincount(ends[nvl_mask], minlength=len(kind))
        for g_node in self.gpu_nodes[(nic_count[self.gpu_nodes] > 1)][:1]:
            raise SpecError(
                f"{self.name}: gpu {self.node_label(g_node)} has {nic_count[g_node]} NIC links; "
                "rfabric models one NIC per GPU"
            )
        for g_node in self.gpu_nodes[(nvl_count[self.gpu_nodes] > 1)][:1]:
            raise SpecError(
                f"{self.name}: gpu {self.node_label(g_node)} has {nvl_count[g_node]} NVLink links"
            )
        for g_node in self.gpu_nodes[(nic_count[self.gpu_nodes] + nvl_count[self.gpu_nodes]) == 0][:1]:
            raise SpecError(f"{self.name}: gpu {self.node_label(g_node)} has no links")
        allowed = [NODE_KINDS["eps"]] + [NODE_KINDS[k] for k in CIRCUIT_KINDS]
        nic_peers = peers[nic_mask]
        wrong = ~np.isin(kind[nic_peers], allowed)
        if np.any(wrong):
            g_node = ends[nic_mask][wrong][0]
            raise SpecError(
                f"{self.name}: gpu {self.node_label(g_node)}: its NIC connects to "
                f"{self.node_label(nic_peers[wrong][0])}; a NIC connects to a packet switch "
                f"(eps) or an optical device ({', '.join(CIRCUIT_KINDS)})"
            )
        # NVSwitches join GPUs of one server only.
        nvl_ends, nvl_peers = ends[nvl_mask], peers[nvl_mask]
        srv = self.nodes.server
        if nvl_ends.size:
            mismatch = srv[nvl_ends] != srv[nvl_peers]
            if np.any(mismatch):
                i = int(np.flatnonzero(mismatch)[0])
                raise SpecError(
                    f"{self.name}: {self.node_label(nvl_ends[i])} (server {srv[nvl_ends[i]]}) "
                    f"links to {self.node_label(nvl_peers[i])} of server {srv[nvl_peers[i]]}"
                )
        self.validate_circuits(self.circuits)
        self._validate_reachable()
        self._validate_sites()

    def _validate_sites(self) -> None:
        if self.link_lossy is not None and self.link_lossy.shape != (self.num_links,):
            raise SpecError(
                f"{self.name}: link_lossy has shape {self.link_lossy.shape}, expected one flag per link "
                f"({self.num_links})"
            )
        if self.gpu_site is not None:
            if self.gpu_site.shape != (self.num_gpus,):
                raise SpecError(
                    f"{self.name}: gpu_site has shape {self.gpu_site.shape}, expected one site per GPU "
                    f"({self.num_gpus})"
                )
            if self.gpu_site.size and (self.gpu_site.min() < 0 or self.gpu_site.max() >= 1 << 31):
                raise SpecError(f"{self.name}: gpu_site must be in 0..2^31-1")
        t = self.cross_site_transport
        if t is not None:
            from . import _engine

            if t not in _engine.transports():
                raise SpecError(
                    f"{self.name}: cross_site_transport {t!r} is not a transport "
                    f"(known: {', '.join(_engine.transports())})"
                )
            lossy = [k for k, v in _engine.transport_traits().items() if not v["lossless"]]
            if t not in lossy:
                raise SpecError(
                    f"{self.name}: cross_site_transport {t!r} assumes a lossless fabric and does not "
                    f"recover loss; the long link drops when full (lossy transports: "
                    f"{', '.join(lossy)})"
                )
            if self.gpu_site is None:
                raise SpecError(f"{self.name}: cross_site_transport {t!r} needs gpu_site")
        for key, lo in (("cross_site_ecn_ps", 0), ("cross_site_min_rto_ps", 1)):
            v = getattr(self, key)
            if v is None:
                continue
            if t is None:
                raise SpecError(f"{self.name}: {key} needs a cross_site_transport")
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not lo <= v < 1 << 62:
                raise SpecError(f"{self.name}: {key} must be an integer >= {lo} ps, got {v!r}")

    def is_circuit_device(self, node) -> np.ndarray:
        codes = [NODE_KINDS[k] for k in CIRCUIT_KINDS]
        return np.isin(self.nodes.kind[node], codes)

    def validate_circuits(self, plan: CircuitTable, where: str = "circuit plan") -> None:
        """Raise SpecError unless every circuit joins two distinct links of its optical
        device and no (device, link) end is used twice."""
        n_links = self.num_links
        src, dst = self.links.src, self.links.dst
        for col in ("a", "b"):
            arr = getattr(plan, col)
            bad = np.flatnonzero((arr < 0) | (arr >= n_links))
            if bad.size:
                raise SpecError(
                    f"{self.name}: {where}: circuit {bad[0]}: link {col}={arr[bad[0]]} does not exist "
                    f"(there are {n_links} links)"
                )
        bad = np.flatnonzero((plan.ocs < 0) | (plan.ocs >= self.num_nodes))
        if bad.size:
            raise SpecError(
                f"{self.name}: {where}: circuit {bad[0]}: device {plan.ocs[bad[0]]} is not a node"
            )
        if len(plan) and not np.all(self.is_circuit_device(plan.ocs)):
            i = int(np.flatnonzero(~self.is_circuit_device(plan.ocs))[0])
            raise SpecError(
                f"{self.name}: {where}: circuit {i}: {self.node_label(plan.ocs[i])} is not an "
                f"optical device ({', '.join(CIRCUIT_KINDS)})"
            )
        for col in ("a", "b"):
            arr = getattr(plan, col)
            touches = (src[arr] == plan.ocs) | (dst[arr] == plan.ocs)
            if not np.all(touches):
                i = int(np.flatnonzero(~touches)[0])
                raise SpecError(
                    f"{self.name}: {where}: circuit {i}: link {arr[i]} does not end at "
                    f"{self.node_label(plan.ocs[i])}"
                )
        same = np.flatnonzero(plan.a == plan.b)
        if same.size:
            raise SpecError(f"{self.name}: {where}: circuit {same[0]} joins link {plan.a[same[0]]} to itself")
        keys = np.concatenate([plan.ocs * n_links + plan.a, plan.ocs * n_links + plan.b])
        uniq, counts = np.unique(keys, return_counts=True)
        if np.any(counts > 1):
            k = int(uniq[counts > 1][0])
            raise SpecError(
                f"{self.name}: {where}: port of link {k % n_links} at "
                f"{self.node_label(k // n_links)} is used by two circuits"
            )

    def resolve_circuits(self, plan: CircuitTable | None = None) -> tuple[np.ndarray, np.ndarray, list]:
        """End-to-end optical channels of a circuit plan.

        Returns ``(u, v, chains)``: electrical endpoints u[i] <-> v[i] joined by the chain of
        link rows ``chains[i]`` (u's link first). Chains that end at an unpaired port are dark
        and left out.
        """
        plan = self.circuits if plan is None else plan
        src, dst = self.links.src.tolist(), self.links.dst.tolist()
        partner: dict[tuple[int, int], int] = {}
        for o, a, b in zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True):
            partner[(o, a)] = b
            partner[(o, b)] = a
        is_dev = self.is_circuit_device(np.arange(self.num_nodes))
        u_out, v_out, chains, seen = [], [], [], set()
        for link in range(self.num_links):
            for start, dev in ((src[link], dst[link]), (dst[link], src[link])):
                if is_dev[start] or not is_dev[dev]:
                    continue
                chain, cur, d = [link], link, dev
                while True:
                    nxt = partner.get((d, cur))
                    if nxt is None or len(chain) > 64:
                        chain = None
                        break
                    chain.append(nxt)
                    far = dst[nxt] if src[nxt] == d else src[nxt]
                    if not is_dev[far]:
                        break
                    cur, d = nxt, far
                if chain is None:
                    continue
                end = dst[chain[-1]] if src[chain[-1]] == d else src[chain[-1]]
                key = (min(chain[0], chain[-1]), max(chain[0], chain[-1]))
                if key in seen:
                    continue
                seen.add(key)
                u_out.append(start)
                v_out.append(end)
                chains.append(chain)
        return np.array(u_out, dtype=np.int64), np.array(v_out, dtype=np.int64), chains

    def _validate_reachable(self) -> None:
        """Every GPU reaches every other one under the forwarding model and the initial plan.

        Packet switches always forward; circuits act as links between their electrical
        endpoints; GPUs and NVSwitches forward for other servers only with host_forwarding
        (inter-server traffic otherwise goes NIC -> switches/circuits -> NIC).
        """
        kind = self.nodes.kind
        eps, gpu, nvs = NODE_KINDS["eps"], NODE_KINDS["gpu"], NODE_KINDS["nvswitch"]
        parent = np.arange(len(kind))

        def find(x: int) -> int:
            root = x
            while parent[root] != root:
                root = parent[root]
            while parent[x] != root:
                parent[x], x = root, parent[x]
            return root

        def union(a_arr, b_arr) -> None:
            for a, b in zip(np.asarray(a_arr).tolist(), np.asarray(b_arr).tolist(), strict=True):
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[ra] = rb

        src, dst = self.links.src, self.links.dst
        union(src[(kind[src] == eps) & (kind[dst] == eps)], dst[(kind[src] == eps) & (kind[dst] == eps)])
        cu, cv, _ = self.resolve_circuits()
        union(cu, cv)
        gpu_nic = (kind[src] == gpu) & (kind[dst] == eps), (kind[dst] == gpu) & (kind[src] == eps)
        union(src[gpu_nic[0]], dst[gpu_nic[0]])
        union(dst[gpu_nic[1]], src[gpu_nic[1]])
        if self.host_forwarding or self.pxn:
            nvl = ((kind[src] == gpu) & (kind[dst] == nvs)) | ((kind[dst] == gpu) & (kind[src] == nvs))
            union(src[nvl], dst[nvl])
        roots = np.array([find(int(g)) for g in self.gpu_nodes])
        bad = np.flatnonzero(roots != roots[0])
        if bad.size:
            g0, g1 = self.gpu_nodes[0], self.gpu_nodes[bad[0]]
            raise SpecError(
                f"{self.name}: GPU {bad[0]} ({self.nodes.name[g1]}) cannot reach "
                f"GPU 0 ({self.nodes.name[g0]}): the network is disconnected"
            )

    def to_networkx(self):
        """The fabric as a ``networkx.MultiDiGraph``, for analysis with networkx's algorithms
        (the ``graph`` extra: ``pip install 'rfabric[graph]'``).

        Nodes are the spec's node rows ``0 .. num_nodes - 1``, with attributes ``kind`` (a
        `NODE_KINDS` name), ``name``, ``server`` (-1: none), ``latency_ps`` (the node's
        processing latency) and ``gpu`` (the GPU id; -1 for other nodes). Each full-duplex
        link is two directed edges, ``src -> dst`` and ``dst -> src``, each with key and
        attribute ``link`` the link's row and attributes ``kind`` (the link's label: ``nic``,
        ``nvlink``, ``tor-agg``, ...), ``rate_bps``, ``latency_ps`` (propagation) and
        ``buffer_bytes``. A circuit is not an edge: an optical device is a node that its
        ports' links end at (`resolve_circuits` gives the channels a circuit plan lights).
        The graph's own attributes are ``name``, ``host_forwarding``, ``pxn``,
        ``deadlock_free`` and ``routing``.
        """
        nx = require("networkx", "graph", "NetworkSpec.to_networkx")
        g = nx.MultiDiGraph(
            name=self.name,
            host_forwarding=self.host_forwarding,
            pxn=self.pxn,
            deadlock_free=self.deadlock_free,
            routing=self.routing,
        )
        gpu = np.full(self.num_nodes, -1, dtype=np.int64)
        gpu[self.gpu_nodes] = np.arange(self.num_gpus)
        g.add_nodes_from(
            (i, {"kind": k, "name": str(name), "server": srv, "latency_ps": lat, "gpu": gid})
            for i, (k, name, srv, lat, gid) in enumerate(
                zip(
                    self.nodes.kind_names().tolist(),
                    self.nodes.name.tolist(),
                    self.nodes.server.tolist(),
                    self.nodes.latency_ps.tolist(),
                    gpu.tolist(),
                    strict=True,
                )
            )
        )
        links = self.links
        for row, (u, v, kind, rate, lat, buf) in enumerate(
            zip(
                links.src.tolist(),
                links.dst.tolist(),
                links.kind.tolist(),
                links.rate_bps.tolist(),
                links.latency_ps.tolist(),
                links.buffer_bytes.tolist(),
                strict=True,
            )
        ):
            attrs = {"link": row, "kind": str(kind), "rate_bps": rate, "latency_ps": lat, "buffer_bytes": buf}
            g.add_edge(u, v, key=row, **attrs)
            g.add_edge(v, u, key=row, **attrs)
        return g

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays the engine is built from (one crossing, copied into the engine)."""
        return {
            "node_kind": self.nodes.kind,
            "node_server": self.nodes.server,
            "node_latency_ps": self.nodes.latency_ps,
            "link_src": self.links.src.astype(np.uint32),
            "link_dst": self.links.dst.astype(np.uint32),
            "link_rate_bps": self.links.rate_bps,
            "link_latency_ps": self.links.latency_ps,
            "link_buffer_bytes": self.links.buffer_bytes,
            "circuit_ocs": self.circuits.ocs.astype(np.uint32),
            "circuit_a": self.circuits.a.astype(np.uint32),
            "circuit_b": self.circuits.b.astype(np.uint32),
            "host_forwarding": self.host_forwarding,
            "pxn": self.pxn,
            "deadlock_free": self.deadlock_free,
            # (only when set: a fabric without them hashes and builds as before)
            **({"link_lossy": self.link_lossy.astype(np.uint8)} if self.link_lossy is not None else {}),
            **({"gpu_site": self.gpu_site.astype(np.int32)} if self.gpu_site is not None else {}),
            **(
                {"cross_site_transport": self.cross_site_transport}
                if self.cross_site_transport is not None
                else {}
            ),
            **(
                {"cross_site_ecn_ps": int(self.cross_site_ecn_ps)}
                if self.cross_site_ecn_ps is not None
                else {}
            ),
            **(
                {"cross_site_min_rto_ps": int(self.cross_site_min_rto_ps)}
                if self.cross_site_min_rto_ps is not None
                else {}
            ),
        }


#: EngineConfig.ecmp modes (rfabric.simulation documents them)
ROUTING_MODES = ("dmodk", "flow", "packet", "adaptive", "multipath")


def check_routing(routing, where: str = "network") -> str:
    """``routing`` if it is one of ROUTING_MODES, else SpecError naming ``where``."""
    if routing not in ROUTING_MODES:
        raise SpecError(
            f"{where}: routing must be one of {', '.join(map(repr, ROUTING_MODES))}, got {routing!r}"
        )
    return routing


def check_rings(rings, gpus: int, where: str = "network") -> np.ndarray:
    """Validate ring orders: a (channels, gpus) integer array, every row a permutation of
    ``0 .. gpus-1``. Returns it as int64; raises SpecError naming the offending row."""
    try:
        arr = np.asarray(rings)
    except (TypeError, ValueError):
        raise SpecError(f"{where}: rings must be a (channels, GPUs) integer array") from None
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] != gpus or not np.issubdtype(arr.dtype, np.integer):
        raise SpecError(
            f"{where}: rings must be a (channels >= 1, {gpus}) integer array (one GPU order per "
            f"channel), got shape {arr.shape} and dtype {arr.dtype}"
        )
    want = np.arange(gpus)
    for c, row in enumerate(arr):
        if not np.array_equal(np.sort(row), want):
            raise SpecError(f"{where}: rings[{c}] is not a permutation of the GPU ids 0..{gpus - 1}")
    return arr.astype(np.int64)


def check_gpu_types(types, gpus: int, where: str = "network") -> np.ndarray:
    """``types`` as an object array of ``gpus`` non-empty GPU type names, else SpecError."""
    arr = np.asarray(types, dtype=object)
    if arr.shape != (gpus,):
        raise SpecError(f"{where}: gpu_types has shape {arr.shape}, expected ({gpus},) (one per GPU)")
    bad = [t for t in set(arr.tolist()) if not isinstance(t, str) or not t]
    if bad:
        i = next(i for i, t in enumerate(arr.tolist()) if t in bad)
        raise SpecError(f"{where}: gpu_types[{i}] = {arr[i]!r} must be a GPU type name")
    return arr
