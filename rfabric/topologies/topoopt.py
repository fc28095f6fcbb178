"""TopoOpt: servers joined NIC-to-NIC through optical patch panels, packets forwarded by hosts."""

from __future__ import annotations

import heapq

import numpy as np

from ..errors import SpecError
from ._common import check_server_matrix, ring_row, totient_offsets
from .base import Topology, TopologyBuilder

__all__ = ["TopoOpt"]


class TopoOpt(Topology):
    """A direct-connect server graph through optical patch panels (Wang et al., NSDI'23; paper §7.2).

    Structure
    ---------
    * No packet switches. Each server has ``d = gpus_per_server`` NICs (one per GPU) and
      ``d/2`` patch panels serve the cluster: panel ``c`` (``panel{c}``) holds NIC ``2c`` and
      NIC ``2c+1`` of every server (``2 · servers`` ports, 256 at 1024 GPUs: well within one
      robotic panel's 1008 ports, paper Table 2; above 504 servers a "panel" stands for several
      physical panels wired as one). A circuit in panel ``c`` joins NIC ``2c`` of
      one server (its "out" port) to NIC ``2c+1`` of another (its "in" port), so each panel
      carries a union of directed cycles, and the circuits form a degree-``d`` server
      multigraph. Packets between servers that are not adjacent are forwarded by the GPUs and
      NVSwitches of intermediate servers (``host_forwarding = True``); the paper's TopoOpt
      connects "all NICs optimistically ... directly via optical patch panels" (§7.2).
    * Patch panels are reconfigured in minutes (Table 2), so the plan is fixed per job: it is
      the initial circuit plan and no controller is expected to change it.

    Circuit plan (the server graph)
    -------------------------------
    * Default, all-reduce rings (TotientPerms): ``k = d/2`` ring permutations
      ``i -> i + p (mod S)`` over the ``S`` servers, ring ``m`` on panel ``m``; every ring
      uses 2 NICs per server (out and in), so the graph is ``d``-regular. The offsets ``p``
      are coprime with ``S`` (each ring is a Hamiltonian cycle: the graph is connected and
      ring all-reduce runs on any single ring) and at most ``S/2``; ring ``m`` takes the unused
      one nearest to ``S^(m/k)``, so offsets grow geometrically from 1 and host-forwarded
      paths stay short, following TotientPerms' goal. At 128 GPUs (S = 16) the offsets are
      1, 3, 5, 7; at 1024 GPUs (S = 128) 1, 3, 11, 39. With fewer coprime offsets than rings
      (S <= 6) offsets repeat, giving parallel circuits.
    * ``mp_demand=`` (a server x server matrix of model-parallel bytes): ``mp_degree`` NICs of
      each server (panels ``k..d/2-1``) are reserved for it and the rings use the rest
      (``k = (d - mp_degree)/2``). Model-parallel edges are added greedily: one circuit at a
      time to the server pair with the largest symmetric demand per circuit,
      ``(D[a,b] + D[b,a]) / (circuits(a,b) + 1)``, while both servers have free reserved NICs;
      reserved NICs still free afterwards are paired between the servers with the most free
      NICs (distinct servers), so no port stays dark unless one server alone has some left.
    * ``edges=`` (a list of server pairs): exactly that multigraph, replacing the rings;
      a server's degree may not exceed ``d`` and unused NICs stay dark.

    Routing (``routing = "multipath"``)
    -----------------------------------
    Hosts forward (TopoOpt's host-based forwarding), and a server's NVSwitch spreads the
    frames it relays over every NIC of the server whose path is at most one more server
    longer than the shortest, the least loaded first (weighted by the hops left); a flow
    leaves its own GPU as shortest paths say, so rings on their circuits stay on them.
    Between two servers the shortest path is mostly one circuit, so spreading among equal
    next hops alone changes nothing: D-mod-K, flow hashing, spraying and adaptive routing give
    the same times within 1%. Measured at 128 GPUs (bench/compare_fabrics.py and
    bench/README.md), against D-mod-K: a rail-aligned server permutation of 256 MiB per GPU
    takes 40.7 ms instead of 86.5 ms (8 flows no longer share one circuit), all_to_all
    16.3 ms instead of 16.5 ms, all_reduce and all_gather are unchanged at 4 MiB-256 MiB,
    and a failed NIC costs a 16 MiB all_reduce 1.07x instead of 1.79x (its ring's detour
    spreads over the server's other NICs); small all_to_all is slower (1 MiB: 88 us instead
    of 71 us).

    Collective placement (``ring_orders()``)
    ----------------------------------------
    As the TopoOpt paper co-optimises the rings with the circuits, ring collectives run one
    channel per (ring permutation, direction): channel ``2m`` follows ring ``m`` forward
    (servers ``0, p, 2p, ...``), entering each server at NIC ``2m+1`` and leaving through NIC
    ``2m`` over the circuit to the next server; channel ``2m+1`` runs it backwards over the
    same full-duplex circuits (entering at NIC ``2m``, leaving through ``2m+1``). With the
    default plan every NIC of every server sends on one channel and every inter-server hop is
    one circuit. Channels are capped at ``2k`` (8 at ``d = 8``). With ``edges=`` there are no
    ring permutations and the executor's default order applies.

    Edges are mapped to panels by orienting them along Euler tours (every server then has at
    most ``ceil(deg/2)`` out- and in-edges) and colouring the resulting bipartite out/in
    multigraph with ``d/2`` colours (König's theorem), colour ``c`` being panel ``c``.

    Parameters
    ----------
    gpus : int
        GPUs (= NICs); a multiple of ``gpus_per_server``, which must be even.
    link : str or int
        Rate of every NIC link (default "200Gbps", paper §7.2).
    mp_demand : array-like, optional
        Model-parallel traffic, servers x servers, non-negative (any unit: only ratios matter).
    mp_degree : int, optional
        NICs per server reserved for ``mp_demand`` (even, 2 .. d-2; at least one ring keeps the
        graph connected). Default ``d/2`` rounded down to even (4 of 8), an even split between
        data-parallel rings and model-parallel edges (assumption: TopoOpt searches this split
        per job). Only with ``mp_demand``.
    edges : array-like of shape (E, 2), optional
        Explicit server graph; exclusive with ``mp_demand``.
    **kwargs
        Physical parameters of :class:`~rfabric.topologies.base.Topology`.

    Attributes
    ----------
    offsets : list of int
        The ring offsets ``p`` chosen (empty with ``edges=``).
    """

    family = "topoopt"
    #: TopoOpt's circuits are planned offline with its rings and kept (``StaticController``)
    default_controller = "static"
    host_forwarding = True
    routing = "multipath"

    def __init__(
        self, gpus: int, link="200Gbps", mp_demand=None, mp_degree: int | None = None, edges=None, **kwargs
    ):
        super().__init__(gpus, link, **kwargs)
        d, s = self.gpus_per_server, self.servers
        if d % 2:
            raise SpecError(f"TopoOpt: gpus_per_server={d} must be even (a patch panel holds NIC pairs)")
        if edges is not None and (mp_demand is not None or mp_degree is not None):
            raise SpecError(
                "TopoOpt: edges= is an explicit server graph; it excludes mp_demand= and mp_degree="
            )
        if mp_degree is not None and mp_demand is None:
            raise SpecError(f"TopoOpt: mp_degree={mp_degree!r} needs mp_demand=")
        self.mp_demand = None
        self.mp_degree = 0
        self.edges = None
        if mp_demand is not None:
            self.mp_demand = self._check_demand(mp_demand)
            if mp_degree is None:
                mp_degree = (d // 2) - (d // 2) % 2
            if (
                isinstance(mp_degree, bool)
                or not isinstance(mp_degree, (int, np.integer))
                or mp_degree % 2
                or not 2 <= mp_degree <= d - 2
            ):
                raise SpecError(
                    f"TopoOpt: mp_degree must be an even integer in 2..{d - 2} "
                    f"(gpus_per_server={d} minus one ring), got {mp_degree!r}"
                )
            self.mp_degree = int(mp_degree)
        if edges is not None:
            self.edges = self._check_edges(edges)
        self.offsets = totient_offsets(s, (d - self.mp_degree) // 2) if self.edges is None else []

    def _check_demand(self, demand) -> np.ndarray:
        return check_server_matrix("TopoOpt", "mp_demand", demand, self.servers)

    def _check_edges(self, edges) -> np.ndarray:
        s, d = self.servers, self.gpus_per_server
        try:
            arr = np.asarray(edges)
        except (TypeError, ValueError):
            raise SpecError("TopoOpt: edges must be an (E, 2) array of server pairs") from None
        if arr.size == 0:
            arr = arr.reshape(0, 2)
        if arr.ndim != 2 or arr.shape[1] != 2 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
            raise SpecError(
                f"TopoOpt: edges must be an (E, 2) integer array of server pairs, got shape "
                f"{arr.shape} and dtype {arr.dtype}"
            )
        arr = arr.astype(np.int64)
        bad = np.flatnonzero(((arr < 0) | (arr >= s)).any(axis=1))
        if bad.size:
            raise SpecError(
                f"TopoOpt: edges[{bad[0]}] = {arr[bad[0]].tolist()} names a server outside 0..{s - 1}"
            )
        bad = np.flatnonzero(arr[:, 0] == arr[:, 1])
        if bad.size:
            raise SpecError(f"TopoOpt: edges[{bad[0]}] joins server {arr[bad[0], 0]} to itself")
        deg = np.bincount(arr.ravel(), minlength=s)
        if deg.max(initial=0) > d:
            srv = int(np.argmax(deg))
            raise SpecError(f"TopoOpt: edges give server {srv} degree {deg[srv]}, more than its {d} NICs")
        return arr

    # -- the server graph ------------------------------------------------------------------

    def _mp_edges(self) -> np.ndarray:
        """Greedy model-parallel edges on the reserved NICs (see the class docstring)."""
        s = self.servers
        w = self.mp_demand + self.mp_demand.T
        free = np.full(s, self.mp_degree, dtype=np.int64)
        count: dict[tuple[int, int], int] = {}
        a_idx, b_idx = np.nonzero(np.triu(w, 1) > 0)
        heap = [(-w[a, b], int(a), int(b)) for a, b in zip(a_idx, b_idx, strict=True)]
        heapq.heapify(heap)
        out = []
        while heap:
            _, a, b = heapq.heappop(heap)
            if free[a] == 0 or free[b] == 0:
                continue
            out.append((a, b))
            free[a] -= 1
            free[b] -= 1
            c = count[(a, b)] = count.get((a, b), 0) + 1
            heapq.heappush(heap, (-w[a, b] / (c + 1), a, b))
        while np.count_nonzero(free) >= 2:
            order = np.argsort(-free, kind="stable")
            a, b = int(order[0]), int(order[1])
            out.append((min(a, b), max(a, b)))
            free[a] -= 1
            free[b] -= 1
        return np.array(out, dtype=np.int64).reshape(-1, 2)

    def locality(self):
        """One domain: a direct-connect fabric has no aggregation tier (every server's NICs go
        to the patch panels, and traffic between servers without a circuit relays through
        hosts)."""
        from ..rewrites import Locality

        return Locality.one_domain(self.gpus, "TopoOpt: direct-connect, one domain")

    def ring_orders(self) -> np.ndarray | None:
        """One ring per (ring permutation, direction) over its circuits (class docstring)."""
        s, d = self.servers, self.gpus_per_server
        if s < 2 or not self.offsets:
            return None
        rows = []
        for m, p in enumerate(self.offsets):
            fwd = ring_row((np.arange(s) * p) % s, 2 * m + 1, 2 * m, d)
            rows += [fwd, fwd[::-1]]
        return np.stack(rows)

    def server_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The initial server graph: ``(edges (E, 2) as (out server, in server), panel (E,))``."""
        s, d = self.servers, self.gpus_per_server
        parts, panels = [], []
        i = np.arange(s)
        for m, p in enumerate(self.offsets):
            parts.append(np.stack([i, (i + p) % s], axis=1))
            panels.append(np.full(s, m))
        if self.mp_demand is not None and s > 1:
            mp = self._mp_edges()
            oriented, color = _orient_and_color(mp, s, self.mp_degree // 2)
            parts.append(oriented)
            panels.append(color + len(self.offsets))
        if self.edges is not None:
            oriented, color = _orient_and_color(self.edges, s, d // 2)
            parts.append(oriented)
            panels.append(color)
        if not parts:
            return np.empty((0, 2), np.int64), np.empty(0, np.int64)
        return np.concatenate(parts).astype(np.int64), np.concatenate(panels).astype(np.int64)

    def build(self, net: TopologyBuilder) -> None:
        s, d = self.servers, self.gpus_per_server
        gpu = net.add_servers(s, d)
        panel = net.add_nodes("patch_panel", d // 2, prefix="panel")
        # NIC link of (server, j) is nic[server, j]
        nic = net.add_links(
            gpu.ravel(), panel[np.tile(np.arange(d) // 2, s)], rate=self.link_bps, kind="nic"
        ).reshape(s, d)
        edges, color = self.server_edges()
        if len(edges):
            net.add_circuits(panel[color], nic[edges[:, 0], 2 * color], nic[edges[:, 1], 2 * color + 1])


def _orient_and_color(edges: np.ndarray, n: int, colors: int) -> tuple[np.ndarray, np.ndarray]:
    """Orient an undirected multigraph (no loops) along Euler tours and colour its out/in
    bipartite multigraph properly with ``colors`` colours. Returns (oriented edges, colour).

    Euler orientation: odd-degree vertices are joined to a dummy vertex, every component then
    has an Euler circuit, and following it gives each real vertex |out - in| <= 1, so
    out, in <= ceil(deg/2) <= ``colors`` when deg <= 2·``colors``. The bipartite colouring is
    the alternating-path proof of König's edge-colouring theorem.
    """
    m = len(edges)
    if m == 0:
        return edges.reshape(0, 2), np.empty(0, np.int64)
    ends = [(int(a), int(b)) for a, b in edges]
    deg = np.bincount(edges.ravel(), minlength=n)
    dummy = n
    for v in np.flatnonzero(deg % 2):
        ends.append((int(v), dummy))
    adj: list[list[int]] = [[] for _ in range(n + 1)]
    for e, (a, b) in enumerate(ends):
        adj[a].append(e)
        adj[b].append(e)
    used = [False] * len(ends)
    head = [0] * (n + 1)
    oriented = [(0, 0)] * len(ends)
    for start in range(n + 1):
        # Hierholzer: walk unused edges; every edge is oriented the way the walk crosses it.
        stack = [start]
        while stack:
            v = stack[-1]
            while head[v] < len(adj[v]) and used[adj[v][head[v]]]:
                head[v] += 1
            if head[v] == len(adj[v]):
                stack.pop()
                continue
            e = adj[v][head[v]]
            used[e] = True
            a, b = ends[e]
            w = b if a == v else a
            oriented[e] = (v, w)
            stack.append(w)
    out_edges = np.array(oriented[:m], dtype=np.int64)

    # König colouring of the bipartite multigraph (out side u, in side v).
    left = np.full((n, colors), -1, dtype=np.int64)
    right = np.full((n, colors), -1, dtype=np.int64)
    color = np.full(m, -1, dtype=np.int64)
    for e, (u, v) in enumerate(out_edges.tolist()):
        free_u = np.flatnonzero(left[u] < 0)
        free_v = np.flatnonzero(right[v] < 0)
        if not free_u.size or not free_v.size:
            raise SpecError(
                f"TopoOpt: server {u if not free_u.size else v} needs more than {colors} "
                "patch-panel ports on one side"
            )
        alpha, beta = int(free_u[0]), int(free_v[0])
        if right[v, alpha] >= 0:
            # Swap alpha/beta along the path from v: v -alpha- u1 -beta- v1 -alpha- ...
            path, side, node, col = [], "right", v, alpha
            while True:
                table = right if side == "right" else left
                f = int(table[node, col])
                if f < 0:
                    break
                path.append(f)
                fu, fv = out_edges[f]
                node, side = (int(fu), "left") if side == "right" else (int(fv), "right")
                col = beta if col == alpha else alpha
            for f in path:
                fu, fv = out_edges[f]
                left[fu, color[f]] = -1
                right[fv, color[f]] = -1
            for f in path:
                fu, fv = out_edges[f]
                color[f] = beta if color[f] == alpha else alpha
                left[fu, color[f]] = f
                right[fv, color[f]] = f
        color[e] = alpha
        left[u, alpha] = e
        right[v, alpha] = e
    return out_edges, color
