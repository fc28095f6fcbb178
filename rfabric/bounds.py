"""Lower bounds on communication time, computed from a fabric's own link table.

A simulated time means little without something to hold it against. This module computes,
for a collective or a set of flows on a fabric, a time that no algorithm, routing or
transport could beat on that fabric's links, so that ``bound / simulated`` is an
efficiency in (0, 1] (``bench/fabric_bounds.py`` prints it for every fabric and collective).

The fabric is read as a graph: GPUs, NVSwitches and packet switches are nodes; every link is
two directed edges of its rate; an optical device is replaced by the channels its current
circuit plan lights (a chain of circuits is one edge between its two electrical ends, at the
slowest rate along it; dark ports carry nothing). Two kinds of bound are taken, and the
larger wins:

* **Partition bounds** (every collective). Split the ranks' servers into groups: blocks of
  ``b`` consecutive servers for every ``b`` up to 16 and every power of two up to half the
  servers (every built-in fabric numbers servers so that its ToRs, rail groups, pods and
  regions are such blocks). The most a group can send out or take in
  per second is its min-cut capacity to the rest of the fabric (max-flow, scipy: the ``lp``
  extra, ``pip install 'rfabric[lp]'``). Each
  collective has a volume that must cross each group's boundary, whatever the algorithm:

  ==============  =======================================  ==================================
  kind            into group X (x of n ranks, size S)       out of group X
  ==============  =======================================  ==================================
  all_reduce      S (X needs every reduced byte)            S
  all_gather      (n - x)/n S                               x/n S (X's shards, once)
  reduce_scatter  x/n S                                     (n - x)/n S
  all_to_all      x (n - x) S / n                           x (n - x) S / n
  broadcast       S unless X holds the root                 S if X holds the root
  flows           bytes of flows entering X                 bytes of flows leaving X
  ==============  =======================================  ==================================

  plus a total-volume bound over the partition: all-reduce over ``d`` groups moves at least
  ``2 (d - 1) S`` bytes between groups (each byte's ``d`` partial sums meet somewhere and
  the result returns to the other ``d - 1`` groups; switches do not reduce), broadcast
  ``(d - 1) S``, and the others the sum of their per-group inflows; the sum of the groups'
  cut capacities carries it. With servers as the groups this is the *NIC bound* (e.g.
  all-reduce: ``2 (s-1)/s S / (m B)`` for ``s`` servers of ``m`` NICs of rate ``B``).

* **Max-concurrent-flow bound** (all-to-all and flows: their demand matrix is fixed). A
  linear program (scipy's HiGHS) routes the whole demand over the graph, splitting it over
  any paths, and minimises the time at which every edge has carried at most rate x time.
  One commodity per source server. On fabrics without host forwarding a server's GPUs and
  NVSwitch may relay only traffic of their own server (PXN, NIC failover), not transit
  traffic of others.

Every bound counts payload bytes only: a transport's header bytes, latencies and
congestion control come on top, so even a perfect simulation stays slightly below 1
(RoCE's 62 B of headers per 9216 B frame cap it at 0.993).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import catalog
from ._optional import require
from .errors import SpecError
from .spec import NODE_KINDS, NetworkSpec

__all__ = ["FabricGraph", "Bound", "collective_bound", "flows_bound", "COLLECTIVE_KINDS"]

COLLECTIVE_KINDS = catalog.COLLECTIVES
_GPU, _NVS = NODE_KINDS["gpu"], NODE_KINDS["nvswitch"]


@dataclass(frozen=True)
class FabricGraph:
    """The directed capacity graph of a fabric under its current circuit plan.

    ``src``, ``dst``: edge endpoints (node rows of the spec; optical devices never appear),
    ``cap``: bytes/s per edge. ``server``: server of each node (-1 for switches).
    """

    spec: NetworkSpec
    src: np.ndarray
    dst: np.ndarray
    cap: np.ndarray
    server: np.ndarray
    gpu_nodes: np.ndarray
    gpu_server: np.ndarray
    _server_cuts: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, fabric, plan=None) -> FabricGraph:
        from .config import as_spec as _as_spec

        spec = _as_spec(fabric)
        links = spec.links
        optical = spec.is_circuit_device(np.arange(spec.num_nodes))
        plain = ~(optical[links.src] | optical[links.dst])
        u, v = links.src[plain], links.dst[plain]
        rate = links.rate_bps[plain].astype(np.float64)
        cu, cv, chains = spec.resolve_circuits(plan)
        crate = np.array([links.rate_bps[c].min() for c in chains], dtype=np.float64)
        su = np.concatenate([u, cu]).astype(np.int64)
        sv = np.concatenate([v, cv]).astype(np.int64)
        cap = np.concatenate([rate, crate]) / 8.0  # bytes/s
        server = spec.nodes.server.astype(np.int64)
        return cls(
            spec=spec,
            src=np.concatenate([su, sv]),
            dst=np.concatenate([sv, su]),
            cap=np.concatenate([cap, cap]),
            server=server,
            gpu_nodes=spec.gpu_nodes,
            gpu_server=server[spec.gpu_nodes],
        )

    def server_cut(self, servers) -> float:
        """cut_capacity() of the GPUs of these servers (cached: every bound reuses them)."""
        key = tuple(int(x) for x in servers)
        if key not in self._server_cuts:
            self._server_cuts[key] = self.cut_capacity(np.flatnonzero(np.isin(self.gpu_server, key)))
        return self._server_cuts[key]

    def cut_capacity(self, gpus) -> float:
        """Max-flow (bytes/s) from GPU set ``gpus`` to all other GPUs: the most the set can
        send out per second. Links are full duplex with equal rates, so it is also the most
        the set can take in."""
        csr_matrix = require("scipy.sparse", "lp", "rf.bounds").csr_matrix
        maximum_flow = require("scipy.sparse.csgraph", "lp", "rf.bounds").maximum_flow

        n = self.spec.num_nodes
        inside = np.zeros(n, dtype=bool)
        inside[self.gpu_nodes[np.asarray(gpus, dtype=np.int64)]] = True
        others = np.zeros(n, dtype=bool)
        others[self.gpu_nodes] = True
        others &= ~inside
        if not inside.any() or not others.any():
            return float("inf")
        # integer capacities in units of 1 Mb/s (scipy's max-flow is exact on integers)
        unit = 1e6 / 8
        cap = np.maximum(np.round(self.cap / unit), 0).astype(np.int64)
        # a GPU's super-source (super-sink) edge carries what its own links can: no limit
        node_cap = np.bincount(self.src, weights=cap, minlength=n).astype(np.int64)
        s, t = n, n + 1
        ins, outs = np.flatnonzero(inside), np.flatnonzero(others)
        rows = np.concatenate([self.src, np.full(len(ins), s), outs])
        cols = np.concatenate([self.dst, ins, np.full(len(outs), t)])
        vals = np.concatenate([cap, node_cap[ins], node_cap[outs]])
        if vals.max() >= 2**31:
            raise SpecError(f"{self.spec.name}: a link of over 2 Pb/s is beyond the cut computation")
        m = csr_matrix((vals.astype(np.int32), (rows, cols)), shape=(n + 2, n + 2))
        m.sum_duplicates()
        return float(maximum_flow(m, s, t).flow_value) * unit


@dataclass
class Bound:
    """A lower bound on completion time (seconds) and the bounds it is the largest of."""

    time_s: float
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def binding(self) -> str:
        """Name of the bound that binds (the largest)."""
        return max(self.parts, key=self.parts.get) if self.parts else ""


def _partitions(servers: np.ndarray) -> list[list[np.ndarray]]:
    """Groups of servers (arrays of server ids): consecutive blocks of ``b`` servers, for
    every ``b`` up to 16 and every power of two up to half the servers. Every built-in fabric
    numbers servers so that its ToRs, rail groups, pods and regions are such blocks."""
    half = len(servers) // 2
    sizes = sorted(
        {b for b in range(1, min(16, half) + 1)}
        | {1 << k for k in range(half.bit_length()) if 1 << k <= half}
    )
    return [[servers[i : i + b] for i in range(0, len(servers), b)] for b in sizes]


def _partition_bound(graph: FabricGraph, ranks: np.ndarray, need, volume=None) -> tuple[float, float]:
    """(largest per-group bound, largest total-volume bound) over the candidate partitions.

    ``need(mask)`` gives (bytes in, bytes out) for a group given as a boolean mask over
    ``ranks``. The bytes that cross group boundaries are at least the sum of the inflows and
    at least the sum of the outflows, and at least ``volume(d)`` for ``d`` groups if given.
    """
    rank_server = graph.gpu_server[ranks]
    servers = np.unique(rank_server)
    best_group = best_total = 0.0
    for part in _partitions(servers):
        cap_sum = sum_in = sum_out = 0.0
        for group in part:
            cap = graph.server_cut(group)
            need_in, need_out = need(np.isin(rank_server, group))
            cap_sum += cap
            sum_in += need_in
            sum_out += need_out
            if cap > 0:
                best_group = max(best_group, need_in / cap, need_out / cap)
            elif need_in or need_out:
                raise SpecError(f"{graph.spec.name}: servers {group.tolist()} are cut off from the rest")
        total = max(sum_in, sum_out, volume(len(part)) if volume else 0.0)
        if cap_sum > 0:
            best_total = max(best_total, total / cap_sum)
    return best_group, best_total


def _lp_bound(graph: FabricGraph, demand_src: np.ndarray, demand_dst: np.ndarray, demand_bytes) -> float:
    """Minimum time (s) to route the GPU-to-GPU demands over the graph (multi-commodity flow,
    one commodity per source server; HiGHS)."""
    linprog = require("scipy.optimize", "lp", "rf.bounds").linprog
    sparse = require("scipy.sparse", "lp", "rf.bounds")
    coo_matrix, hstack = sparse.coo_matrix, sparse.hstack

    spec = graph.spec
    n = spec.num_nodes
    bytes_ = np.asarray(demand_bytes, dtype=np.float64)
    keep = (bytes_ > 0) & (demand_src != demand_dst)
    s_gpu, d_gpu, bytes_ = demand_src[keep], demand_dst[keep], bytes_[keep]
    if not len(bytes_):
        return 0.0
    scale = float(bytes_.max())
    bytes_ = bytes_ / scale  # keep the LP well conditioned; time scales back below
    src_node, dst_node = graph.gpu_nodes[s_gpu], graph.gpu_nodes[d_gpu]
    commodities = np.unique(graph.gpu_server[s_gpu])
    kinds = spec.nodes.kind
    relay = (kinds == _GPU) | (kinds == _NVS)
    e_src, e_dst, cap = graph.src, graph.dst, graph.cap
    blocks, rhs, var_edges = [], [], []
    offset = 0
    for c in commodities:
        # edges this commodity may use: without host forwarding, a server's GPUs and NVSwitch
        # send into the network only for their own server's traffic
        ok = np.ones(len(e_src), dtype=bool)
        if not spec.host_forwarding:
            ok = ~(relay[e_src] & (graph.server[e_src] != c) & ~relay[e_dst])
        edges = np.flatnonzero(ok)
        k = len(edges)
        # node-edge incidence: +1 leaving, -1 entering
        rows = np.concatenate([e_src[edges], e_dst[edges]])
        cols = np.concatenate([np.arange(k), np.arange(k)]) + offset
        vals = np.concatenate([np.ones(k), -np.ones(k)])
        blocks.append((rows, cols, vals))
        mine = graph.gpu_server[s_gpu] == c
        b = np.zeros(n)
        np.add.at(b, src_node[mine], bytes_[mine])
        np.add.at(b, dst_node[mine], -bytes_[mine])
        rhs.append(b)
        var_edges.append(edges)
        offset += k
    nvar = offset
    c_count = len(commodities)
    eq_rows = np.concatenate([blk[0] + i * n for i, blk in enumerate(blocks)])
    eq_cols = np.concatenate([blk[1] for blk in blocks])
    eq_vals = np.concatenate([blk[2] for blk in blocks])
    a_eq = coo_matrix((eq_vals, (eq_rows, eq_cols)), shape=(c_count * n, nvar))
    a_eq = hstack([a_eq, coo_matrix((c_count * n, 1))]).tocsr()
    b_eq = np.concatenate(rhs)
    # capacity: sum over commodities of flow on edge e <= cap_e * T
    all_edges = np.concatenate(var_edges)
    a_ub = coo_matrix((np.ones(nvar), (all_edges, np.arange(nvar))), shape=(len(e_src), nvar))
    a_ub = hstack([a_ub, coo_matrix(-cap.reshape(-1, 1) / scale)]).tocsr()
    used = np.unique(all_edges)
    a_ub = a_ub[used]
    b_ub = np.zeros(len(used))
    cost = np.zeros(nvar + 1)
    cost[-1] = 1.0
    keep_rows = np.flatnonzero(np.abs(a_eq).sum(axis=1).A1 > 0)
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=b_ub,
        A_eq=a_eq[keep_rows],
        b_eq=b_eq[keep_rows],
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise SpecError(f"{spec.name}: the flow bound's linear program failed ({res.message})")
    return float(res.x[-1])


def _check_ranks(graph: FabricGraph, ranks) -> np.ndarray:
    g = graph.spec.num_gpus
    ranks = np.arange(g) if ranks is None else np.asarray(ranks, dtype=np.int64)
    if ranks.ndim != 1 or len(ranks) < 2:
        raise SpecError("bounds: need at least two ranks")
    if len(np.unique(ranks)) != len(ranks):
        raise SpecError("bounds: ranks repeat")
    if ranks.min() < 0 or ranks.max() >= g:
        raise SpecError(f"bounds: rank {int(ranks.max())} is not a GPU of {graph.spec.name} (it has {g})")
    return ranks


def collective_bound(fabric, kind: str, size, ranks=None, *, lp: bool = True, graph=None) -> Bound:
    """Lower bound (seconds) on one collective of ``size`` (nccl-tests convention, see
    traces/README.md) over ``ranks`` (default: every GPU; for broadcast the first is the root)
    on ``fabric`` (a Topology or NetworkSpec) with its current circuit plan.

    ``lp``: also solve the max-concurrent-flow LP for all-to-all (the other kinds have no
    fixed demand matrix). ``graph``: a FabricGraph to reuse across calls.
    """
    from .units import parse_size

    if isinstance(kind, str) and kind.replace("-", "_") in COLLECTIVE_KINDS:
        kind = kind.replace("-", "_")
    if kind not in COLLECTIVE_KINDS:
        raise SpecError(f"bounds: unknown collective {kind!r} (known: {', '.join(COLLECTIVE_KINDS)})")
    graph = graph or FabricGraph.of(fabric)
    ranks = _check_ranks(graph, ranks)
    s = float(parse_size(size, allow_zero=False, name="size"))
    n = len(ranks)

    def need(mask):
        x = int(mask.sum())
        if x == 0 or x == n:  # a group without ranks, or with all of them, moves nothing
            return 0.0, 0.0
        if kind == "all_reduce":
            return s, s
        if kind == "all_gather":
            return (n - x) / n * s, x / n * s
        if kind == "reduce_scatter":
            return x / n * s, (n - x) / n * s
        if kind == "all_to_all":
            v = x * (n - x) * s / n
            return v, v
        holds_root = bool(mask[0])
        return (0.0 if holds_root else s), (s if holds_root else 0.0)

    def volume(d):
        return 2 * (d - 1) * s if kind == "all_reduce" else 0.0

    parts = {}
    parts["partition"], parts["volume"] = _partition_bound(graph, ranks, need, volume)
    if kind == "all_to_all" and lp:
        src = np.repeat(ranks, n)
        dst = np.tile(ranks, n)
        parts["flow_lp"] = _lp_bound(graph, src, dst, np.full(n * n, s / n))
    return Bound(max(parts.values()), parts)


def flows_bound(fabric, flows, *, lp: bool = True, graph=None) -> Bound:
    """Lower bound (seconds) on the makespan of ``flows`` (rfabric.Flows, all starting at
    their start_ps; the bound is for the bytes, measured from the earliest start)."""
    graph = graph or FabricGraph.of(fabric)
    src, dst, size = flows.src.astype(np.int64), flows.dst.astype(np.int64), flows.size_bytes.astype(float)
    ranks = np.unique(np.concatenate([src, dst]))
    ranks = _check_ranks(graph, ranks)

    def need(mask):
        members = ranks[mask]
        a, b = np.isin(src, members), np.isin(dst, members)
        inflow = float(size[b & ~a].sum())
        outflow = float(size[a & ~b].sum())
        return inflow, outflow

    parts = {}
    parts["partition"], parts["volume"] = _partition_bound(graph, ranks, need)
    if lp:
        parts["flow_lp"] = _lp_bound(graph, src, dst, size)
    return Bound(max(parts.values()), parts)
