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

from .errors import SpecError

__all__ = ["NODE_KINDS", "NodeTable", "LinkTable", "NetworkSpec"]

#: Node kind names and their integer codes (the engine's NodeKind enum).
NODE_KINDS: dict[str, int] = {"gpu": 0, "nvswitch": 1, "eps": 2, "ocs": 3, "patch_panel": 4}
_KIND_NAMES = {v: k for k, v in NODE_KINDS.items()}


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
            if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
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
        codes = np.empty(n, dtype=np.uint8)
        for i, k in enumerate(kind):
            code = NODE_KINDS.get(k)
            if code is None:
                raise SpecError(f"node {i} ({name[i] if i < len(name) else '?'}): unknown kind {k!r} "
                                f"(known: {', '.join(NODE_KINDS)})")
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
class NetworkSpec:
    """A validated network. Build with ``NetworkSpec.from_tables`` (or ``Topology.to_spec()``)."""

    nodes: NodeTable
    links: LinkTable
    name: str = "network"
    gpu_nodes: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]

    @classmethod
    def from_tables(cls, nodes: NodeTable, links: LinkTable, name: str = "network") -> NetworkSpec:
        gpu_nodes = np.flatnonzero(nodes.kind == NODE_KINDS["gpu"]).astype(np.int64)
        spec = cls(nodes=nodes, links=links, name=name, gpu_nodes=gpu_nodes)
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
                raise SpecError(f"{self.name}: link {bad[0]}: {col} {arr[bad[0]]} is not a node (there are {n})")
        bad = np.flatnonzero(links.src == links.dst)
        if bad.size:
            raise SpecError(f"{self.name}: link {bad[0]} connects {self.node_label(links.src[bad[0]])} to itself")
        for col, allow_zero in (("rate_bps", False), ("latency_ps", True), ("buffer_bytes", False)):
            arr = getattr(links, col)
            bad = np.flatnonzero(arr < 0 if allow_zero else arr <= 0)
            if bad.size:
                raise SpecError(f"{self.name}: link {bad[0]}: {col} must be "
                                f"{'non-negative' if allow_zero else 'positive'}, got {arr[bad[0]]}")
        self._validate_gpus()

    def _validate_gpus(self) -> None:
        kind = self.nodes.kind
        gpu, nvs, eps = NODE_KINDS["gpu"], NODE_KINDS["nvswitch"], NODE_KINDS["eps"]
        src, dst = self.links.src, self.links.dst
        ends = np.concatenate([src, dst])
        peers = np.concatenate([dst, src])
        at_gpu = kind[ends] == gpu
        nic_mask = at_gpu & (kind[peers] != nvs)
        nvl_mask = at_gpu & (kind[peers] == nvs)
        nic_count = np.bincount(ends[nic_mask], minlength=len(kind))
        nvl_count = np.bincount(ends[nvl_mask], minlength=len(kind))
        for g_node in self.gpu_nodes[(nic_count[self.gpu_nodes] > 1)][:1]:
            raise SpecError(f"{self.name}: gpu {self.node_label(g_node)} has {nic_count[g_node]} NIC links; "
                            "rfabric models one NIC per GPU")
        for g_node in self.gpu_nodes[(nvl_count[self.gpu_nodes] > 1)][:1]:
            raise SpecError(f"{self.name}: gpu {self.node_label(g_node)} has {nvl_count[g_node]} NVLink links")
        for g_node in self.gpu_nodes[(nic_count[self.gpu_nodes] + nvl_count[self.gpu_nodes]) == 0][:1]:
            raise SpecError(f"{self.name}: gpu {self.node_label(g_node)} has no links")
        nic_peers = peers[nic_mask]
        wrong = nic_peers[kind[nic_peers] != eps]
        if wrong.size:
            g_node = ends[nic_mask][kind[nic_peers] != eps][0]
            raise SpecError(f"{self.name}: gpu {self.node_label(g_node)}: its NIC connects to "
                            f"{self.node_label(wrong[0])}, which is not a packet switch (eps)")
        # NVSwitches join GPUs of one server only.
        nvl_ends, nvl_peers = ends[nvl_mask], peers[nvl_mask]
        srv = self.nodes.server
        if nvl_ends.size:
            mismatch = srv[nvl_ends] != srv[nvl_peers]
            if np.any(mismatch):
                i = int(np.flatnonzero(mismatch)[0])
                raise SpecError(f"{self.name}: {self.node_label(nvl_ends[i])} (server {srv[nvl_ends[i]]}) "
                                f"links to {self.node_label(nvl_peers[i])} of server {srv[nvl_peers[i]]}")
        self._validate_reachable(nic_mask, ends, peers)

    def _validate_reachable(self, nic_mask, ends, peers) -> None:
        """Every GPU with a NIC reaches every other one: NIC -> packet switches -> NIC.

        GPUs of one server also reach each other over their NVSwitch; inter-server traffic
        never transits a host or an NVSwitch, so only switch-switch links join switches here.
        """
        kind = self.nodes.kind
        eps = NODE_KINDS["eps"]
        parent = np.arange(len(kind))

        def find(x: int) -> int:
            root = x
            while parent[root] != root:
                root = parent[root]
            while parent[x] != root:
                parent[x], x = root, parent[x]
            return root

        src, dst = self.links.src, self.links.dst
        sw = (kind[src] == eps) & (kind[dst] == eps)
        for a, b in zip(src[sw].tolist(), dst[sw].tolist()):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
        gpu_of_node = np.full(len(kind), -1)
        gpu_of_node[self.gpu_nodes] = np.arange(self.num_gpus)
        nic_gpu_nodes, attach = ends[nic_mask], peers[nic_mask]
        if attach.size == 0:
            return
        roots = np.array([find(int(a)) for a in attach])
        bad = np.flatnonzero(roots != roots[0])
        if bad.size:
            g0, g1 = nic_gpu_nodes[0], nic_gpu_nodes[bad[0]]
            raise SpecError(f"{self.name}: GPU {gpu_of_node[g1]} ({self.nodes.name[g1]}) cannot reach "
                            f"GPU {gpu_of_node[g0]} ({self.nodes.name[g0]}): the switch network is disconnected")

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
        }
