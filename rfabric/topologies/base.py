"""The Topology base class: subclass it, emit nodes and links, get a validated spec.

A fabric is a Python class whose ``build(net)`` method adds nodes and links through a
``TopologyBuilder`` (vectorised: one call adds a whole tier). ``to_spec()`` runs ``build``
once, validates the tables and returns the ``NetworkSpec`` the engine is built from, so a
user's subclass gets routing, simulation and cost for free::

    class LeafSpine(rf.Topology):
        def __init__(self, gpus, link="200Gbps", spines=4):
            super().__init__(gpus=gpus, link=link)
            self.spines = spines

        def build(self, net):
            gpu = net.add_servers(self.gpus // 8)          # GPUs + NVSwitch per server
            leaves = net.add_nodes("eps", self.gpus // 8, prefix="leaf")
            spines = net.add_nodes("eps", self.spines, prefix="spine")
            net.add_links(gpu.ravel(), np.repeat(leaves, 8), rate=self.link, kind="nic")
            net.add_links(np.repeat(leaves, self.spines), np.tile(spines, len(leaves)),
                          rate=self.link, kind="leaf-spine")
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import SpecError
from ..spec import MAX_LINKS, MAX_NODES, NODE_KINDS, CircuitTable, LinkTable, NetworkSpec, NodeTable
from ..units import check_bare, parse_rate, parse_size, parse_time
from ..validators import boolean, integer

__all__ = ["Topology", "TopologyBuilder", "DEFAULTS"]

#: Physical defaults shared by every fabric (DESIGN §2; paper §7.2).
DEFAULTS = {
    "gpus_per_server": 8,
    "link": "200Gbps",  # NIC and switch link rate B
    "link_latency": "1us",  # propagation per link
    "switch_latency": "0.8us",  # per-hop processing in a packet switch
    # Per-port buffer: 1 MiB, an even split of a 64 MiB shared buffer over 64 ports, the
    # order of magnitude of 25.6-51.2 Tb/s datacenter switch ASICs. Under PFC it is the
    # ingress buffer (XOFF leaves headroom for a round trip); under drop-tail the egress limit.
    "buffer": "1MiB",
    # NVLink: 400 GB/s bidirectional per GPU = 200 GB/s = 1.6 Tb/s each way (paper §7.2), the
    # default GPU type's (H800, rfabric.traces.models.GPU_TYPES); a fabric built with gpu=
    # another type takes that type's rate unless nvlink= is given.
    "nvlink": "1600Gbps",
    "gpu": "H800",
    "nvlink_latency": "0.1us",  # assumption: NVLink wire + SerDes
    "nvswitch_latency": "0.2us",  # assumption: NVSwitch port-to-port
    "nic_latency": "0us",
}


def _node_ids(values, what: str) -> np.ndarray:
    """``values`` as an int64 array of ids (a scalar or an array of integers), else SpecError
    naming ``what`` (a float, a string, None or a ragged list is not an id)."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError):
        raise SpecError(f"{what}: expected node ids (integers), got {values!r}") from None
    if arr.dtype == object or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise SpecError(f"{what}: expected node ids (integers), got {values!r}")
    if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise SpecError(f"{what}: id {arr.max()} is not a node")
    return np.atleast_1d(arr.astype(np.int64))


class TopologyBuilder:
    """Collects node and link rows; every ``add_*`` call is vectorised over numpy arrays."""

    def __init__(
        self,
        *,
        link_latency_ps: int,
        switch_latency_ps: int,
        buffer_bytes: int,
        nvlink_bps: int,
        nvlink_latency_ps: int,
        nvswitch_latency_ps: int,
        nic_latency_ps: int,
        link_bps: int | None = None,
        server_nvlink_bps: np.ndarray | None = None,
    ):
        #: Per server (in `add_servers` order): its NVLink rate (bit/s), from the fabric's
        #: ``gpu=``; None: every server ``nvlink_bps``.
        self.server_nvlink_bps = server_nvlink_bps
        self._kind: list[str] = []
        self._name: list[str] = []
        self._server: list[np.ndarray] = []
        self._lat: list[np.ndarray] = []
        self._links: list[tuple] = []
        self._circuits: list[tuple] = []
        self.link_latency_ps = link_latency_ps
        self.switch_latency_ps = switch_latency_ps
        self.buffer_bytes = buffer_bytes
        self.nvlink_bps = nvlink_bps
        self.nvlink_latency_ps = nvlink_latency_ps
        self.nvswitch_latency_ps = nvswitch_latency_ps
        self.nic_latency_ps = nic_latency_ps
        # The bare-number rule's floors here (docs/units.md): the library's, or lower where
        # the fabric was given smaller quantities with their units ("1kbps", "100ps"), so its
        # own base-unit values (rate=self.link_bps) pass
        rates = [r for r in (link_bps, nvlink_bps) if r]
        times = [t for t in (link_latency_ps, switch_latency_ps, nvlink_latency_ps, nvswitch_latency_ps) if t]
        self._floors = {
            "rate": min(rates, default=None),
            "time": min(times, default=None),
            "buffer": buffer_bytes or None,
        }
        self._servers = 0

    @property
    def num_nodes(self) -> int:
        return len(self._kind)

    def add_nodes(
        self, kind: str, count: int, *, prefix: str | None = None, names=None, server=-1, latency=None
    ) -> np.ndarray:
        """Add ``count`` nodes of ``kind``; returns their node ids (int64 array).

        ``latency`` (per-hop processing) defaults to the switch latency for ``eps``, the
        NVSwitch latency for ``nvswitch``, the NIC latency for ``gpu`` and 0 otherwise.
        """
        if not isinstance(kind, str) or kind not in NODE_KINDS:
            raise SpecError(f"unknown node kind {kind!r} (known: {', '.join(NODE_KINDS)})")
        count = integer(count, f"add_nodes({kind!r}): count", lo=0)
        first = len(self._kind)
        if first + count > MAX_NODES:
            raise SpecError(
                f"add_nodes({kind!r}): {count} more nodes make {first + count}, beyond the limit of "
                f"{MAX_NODES} (rfabric.spec.MAX_NODES)"
            )
        if names is None:
            prefix = prefix or kind
            names = [f"{prefix}{i}" for i in range(count)]
        elif len(names) != count:
            raise SpecError(f"add_nodes({kind!r}): {len(names)} names for {count} nodes")
        if latency is None:
            latency = {
                "eps": self.switch_latency_ps,
                "nvswitch": self.nvswitch_latency_ps,
                "gpu": self.nic_latency_ps,
            }.get(kind, 0)
        else:
            check_bare(latency, "time", "latency", self._floors["time"])
            latency = parse_time(latency)
        self._kind.extend([kind] * count)
        self._name.extend(names)
        try:
            server = np.broadcast_to(
                _node_ids(server, f"add_nodes({kind!r}): server").astype(np.int32), (count,)
            )
        except ValueError:
            raise SpecError(f"add_nodes({kind!r}): server must be one id or one per node") from None
        self._server.append(server)
        self._lat.append(np.full(count, latency, dtype=np.int64))
        return np.arange(first, first + count, dtype=np.int64)

    def add_servers(self, count: int, gpus_per_server: int = 8, *, nvlink: bool = True) -> np.ndarray:
        """Add ``count`` servers: ``gpus_per_server`` GPUs each plus an NVSwitch joining them.

        Returns GPU node ids shaped (count, gpus_per_server); GPU ids follow server order.
        Each server's NVLink rate is its GPU type's (the fabric's ``gpu=``) unless the fabric
        was given ``nvlink=``.
        """
        count = integer(count, "add_servers: count", lo=0)
        gpus_per_server = integer(gpus_per_server, "add_servers: gpus_per_server", lo=1)
        nvlink = boolean(nvlink, "add_servers: nvlink")
        if self.num_nodes + count * (gpus_per_server + 1) > MAX_NODES:
            raise SpecError(
                f"add_servers: {count} servers of {gpus_per_server} GPUs make more than the limit of "
                f"{MAX_NODES} nodes (rfabric.spec.MAX_NODES)"
            )
        base = self._servers
        self._servers += count
        servers = np.repeat(np.arange(base, base + count, dtype=np.int32), gpus_per_server)
        gpu_names = [f"srv{s}/gpu{g}" for s in range(base, base + count) for g in range(gpus_per_server)]
        gpus = self.add_nodes("gpu", count * gpus_per_server, names=gpu_names, server=servers)
        gpus = gpus.reshape(count, gpus_per_server)
        if nvlink and gpus_per_server > 1:
            nvs = self.add_nodes(
                "nvswitch",
                count,
                names=[f"srv{s}/nvswitch" for s in range(base, base + count)],
                server=np.arange(base, base + count, dtype=np.int32),
            )
            rate = np.full(count, self.nvlink_bps, dtype=np.int64)
            if self.server_nvlink_bps is not None:
                known = max(0, min(count, len(self.server_nvlink_bps) - base))
                rate[:known] = self.server_nvlink_bps[base : base + known]
            self.add_links(
                gpus.ravel(),
                np.repeat(nvs, gpus_per_server),
                rate=np.repeat(rate, gpus_per_server),
                latency=self.nvlink_latency_ps,
                kind="nvlink",
            )
        return gpus

    def add_links(self, src, dst, *, rate, latency=None, buffer=None, kind: str = "link") -> np.ndarray:
        """Add full-duplex links between node id arrays ``src`` and ``dst`` (broadcast)."""
        src = _node_ids(src, f"add_links({kind!r}): src")
        dst = _node_ids(dst, f"add_links({kind!r}): dst")
        try:
            src, dst = np.broadcast_arrays(src, dst)
        except ValueError:
            raise SpecError(
                f"add_links({kind!r}): src ({len(src)} ids) and dst ({len(dst)} ids) do not broadcast"
            ) from None
        n = len(src)
        have = sum(len(x[0]) for x in self._links)
        if have + n > MAX_LINKS:
            raise SpecError(
                f"add_links({kind!r}): {n} more links make {have + n}, beyond the limit of "
                f"{MAX_LINKS} (rfabric.spec.MAX_LINKS)"
            )
        # (arrays are in base units, checked by the bare-number rule element by element)
        check_bare(rate, "rate", "rate", self._floors["rate"])
        rate_bps = parse_rate(rate) if not isinstance(rate, np.ndarray) else rate
        check_bare(latency, "time", "latency", self._floors["time"])
        lat = (
            self.link_latency_ps
            if latency is None
            else (parse_time(latency) if not isinstance(latency, np.ndarray) else latency)
        )
        check_bare(buffer, "buffer", "buffer", self._floors["buffer"])
        buf = (
            self.buffer_bytes
            if buffer is None
            else (parse_size(buffer) if not isinstance(buffer, np.ndarray) else buffer)
        )
        first = have
        self._links.append(
            (
                src.copy(),
                dst.copy(),
                np.broadcast_to(rate_bps, (n,)),
                np.broadcast_to(lat, (n,)),
                np.broadcast_to(buf, (n,)),
                [kind] * n,
            )
        )
        return np.arange(first, first + n, dtype=np.int64)

    def add_circuits(self, ocs, a, b) -> None:
        """Add circuits to the initial plan: inside device(s) ``ocs``, join link rows ``a`` and
        ``b`` (both must end at that device). Arrays broadcast."""
        try:
            ocs, a, b = np.broadcast_arrays(
                _node_ids(ocs, "add_circuits: ocs"),
                _node_ids(a, "add_circuits: a"),
                _node_ids(b, "add_circuits: b"),
            )
        except ValueError:
            raise SpecError("add_circuits: ocs, a and b do not broadcast") from None
        self._circuits.append((ocs.copy(), a.copy(), b.copy()))

    def circuit_table(self) -> CircuitTable:
        if not self._circuits:
            return CircuitTable.empty()
        cols = list(zip(*self._circuits, strict=True))
        return CircuitTable.build(np.concatenate(cols[0]), np.concatenate(cols[1]), np.concatenate(cols[2]))

    def tables(self) -> tuple[NodeTable, LinkTable]:
        nodes = NodeTable.build(
            self._kind,
            self._name,
            np.concatenate(self._server) if self._server else np.empty(0, np.int32),
            np.concatenate(self._lat) if self._lat else np.empty(0, np.int64),
        )
        if self._links:
            cols = list(zip(*self._links, strict=True))
            links = LinkTable.build(
                np.concatenate(cols[0]),
                np.concatenate(cols[1]),
                np.concatenate(cols[2]),
                np.concatenate(cols[3]),
                np.concatenate(cols[4]),
                sum(cols[5], []),
            )
        else:
            links = LinkTable.build([], [], [], [], [], [])
        return nodes, links


class Topology:
    """Base class of every fabric. Subclasses set their parameters in ``__init__`` (calling
    ``super().__init__``) and implement ``build(net)``; everything else is inherited.

    Parameters
    ----------
    gpus : int
        Number of GPUs (one NIC each).
    link : str or int
        NIC and switch link rate B ("200Gbps" or bit/s).
    gpus_per_server : int
        GPUs per server, joined by an NVSwitch (default 8).
    link_latency, switch_latency : str or int
        Propagation per link (default 1 µs) and processing per packet-switch hop (0.8 µs).
    buffer : str or int
        Per-port buffer (default 1 MiB; see ``DEFAULTS``).
    gpu : str, Hardware, dict or list of (gpus, type), optional
        GPU type of the servers, by name from ``rfabric.traces.models.GPU_TYPES`` ("H800",
        "H20", "H100", "A100") or an ``rf.traces.Hardware``: one type for all servers, or
        pools in GPU order, ``{"H800": 64, "H20": 64}`` (the first 64 GPUs H800, the next 64
        H20) or ``[(64, "H800"), (64, "H20")]``; each pool a multiple of
        ``gpus_per_server`` GPUs, together ``gpus``. Default ``DEFAULTS["gpu"]`` (H800). Each
        server's NVLink rate is its type's ``nvlink_bps`` unless ``nvlink`` is given; the
        type of every GPU is in ``to_spec().gpu_types`` (`gpu_types`), which
        ``rf.cost.bill_of_materials`` prices per type.
    nvlink : str or int, optional
        NVLink rate per GPU and direction for all servers, overriding the GPU types' (whose
        default, H800's, is ``DEFAULTS["nvlink"]``).
    nvlink_latency, nvswitch_latency, nic_latency : str or int
        Scale-up domain and NIC parameters (defaults in ``DEFAULTS``).
    """

    #: short name used in result tables and presets
    family = "topology"
    #: The circuit controller this fabric's deployments run, by its name in
    #: ``rfabric.catalog.CONTROLLERS`` (``None``: no controller, a fabric without
    #: reconfigurable optics): what :func:`rfabric.controllers.default_for` builds. TopoOpt
    #: says ``"static"`` (its TotientPerms circuits kept), MixNet ``"mixnet"``, RFabric
    #: ``"stage_aware"``.
    default_controller: str | None = None
    #: GPUs and NVSwitches may forward other servers' traffic (TopoOpt, MixNet)
    host_forwarding = False
    #: cross-rail traffic crosses the NVSwitch to the NIC on the destination's rail (PXN)
    pxn = False
    #: route packet switches up*/down* so PFC cannot deadlock (meshes of circuits between switches)
    deadlock_free = False
    #: how this fabric's deployments pick among equal-cost next hops (an ``EngineConfig.ecmp``
    #: mode): runs use it unless their config sets ``ecmp``. D-mod-K, as InfiniBand subnet
    #: managers program fat-trees and rail fabrics; subclasses whose operators run otherwise
    #: say so (TopoOpt, MixNet). Document the choice in the subclass docstring.
    routing = "dmodk"
    #: The largest fabric built: 2^20 GPUs (a FatTree of that size builds in about 6 s and
    #: 1 GB, a TopoOpt in 10 s). A larger ``gpus`` is a SpecError stating this limit, in
    #: every subclass (the check is here), before anything is sized by it.
    MAX_GPUS = 1 << 20

    def __init__(
        self,
        gpus: int,
        link="200Gbps",
        *,
        gpus_per_server: int = 8,
        link_latency=DEFAULTS["link_latency"],
        switch_latency=DEFAULTS["switch_latency"],
        buffer=DEFAULTS["buffer"],
        nvlink=None,
        nvlink_latency=DEFAULTS["nvlink_latency"],
        nvswitch_latency=DEFAULTS["nvswitch_latency"],
        nic_latency=DEFAULTS["nic_latency"],
        gpu=None,
    ):
        integer(gpus, f"{type(self).__name__}: gpus", lo=1)
        if gpus > self.MAX_GPUS:
            raise SpecError(
                f"{type(self).__name__}: gpus={gpus} is beyond the largest fabric rfabric builds, "
                f"{self.MAX_GPUS} GPUs ({type(self).__name__}.MAX_GPUS)"
            )
        integer(gpus_per_server, f"{type(self).__name__}: gpus_per_server", lo=1)
        if gpus % gpus_per_server:
            raise SpecError(
                f"{type(self).__name__}: gpus={gpus} is not a multiple of gpus_per_server={gpus_per_server}"
            )
        self.gpus = int(gpus)
        self.gpus_per_server = int(gpus_per_server)
        where = type(self).__name__
        self.link_bps = parse_rate(link, name=f"{where}: link")
        self.link = link
        self.link_latency_ps = parse_time(link_latency, name=f"{where}: link_latency")
        self.switch_latency_ps = parse_time(switch_latency, name=f"{where}: switch_latency")
        self.buffer_bytes = parse_size(buffer, allow_zero=False, name=f"{where}: buffer", buffer=True)
        self.gpu = gpu
        #: GPU pools in GPU order: [(gpus, Hardware), ...]
        self.gpu_pools = _gpu_pools(gpu, self.gpus, self.gpus_per_server, where)
        per_server = np.repeat(
            np.arange(len(self.gpu_pools)), [n // self.gpus_per_server for n, _ in self.gpu_pools]
        )
        self._server_gpu_type = np.array([hw.name for _, hw in self.gpu_pools], dtype=object)[per_server]
        self.nvlink = nvlink
        if nvlink is None:
            rates = np.array([int(round(hw.nvlink_bps)) for _, hw in self.gpu_pools], dtype=np.int64)
            self._server_nvlink_bps = rates[per_server]
            self.nvlink_bps = int(rates[0])
        else:
            self.nvlink_bps = parse_rate(nvlink, name=f"{where}: nvlink")
            self._server_nvlink_bps = None
        self.nvlink_latency_ps = parse_time(nvlink_latency, name=f"{where}: nvlink_latency")
        self.nvswitch_latency_ps = parse_time(nvswitch_latency, name=f"{where}: nvswitch_latency")
        self.nic_latency_ps = parse_time(nic_latency, name=f"{where}: nic_latency")
        self._spec: NetworkSpec | None = None

    @property
    def servers(self) -> int:
        return self.gpus // self.gpus_per_server

    @property
    def name(self) -> str:
        return f"{self.family}-{self.gpus}"

    def build(self, net: TopologyBuilder) -> None:
        """Add this fabric's nodes and links to ``net``. Subclasses implement this."""
        raise NotImplementedError(f"{type(self).__name__} must implement build(net)")

    def builder(self) -> TopologyBuilder:
        return TopologyBuilder(
            link_latency_ps=self.link_latency_ps,
            switch_latency_ps=self.switch_latency_ps,
            buffer_bytes=self.buffer_bytes,
            nvlink_bps=self.nvlink_bps,
            nvlink_latency_ps=self.nvlink_latency_ps,
            nvswitch_latency_ps=self.nvswitch_latency_ps,
            nic_latency_ps=self.nic_latency_ps,
            link_bps=self.link_bps,
            server_nvlink_bps=self._server_nvlink_bps,
        )

    @property
    def gpu_types(self) -> np.ndarray:
        """The GPU type name of each GPU (object array, GPU order): ``to_spec().gpu_types``."""
        return self.to_spec().gpu_types

    def controller(self):
        """The circuit controller this fabric's deployments run (a fresh instance), or
        ``None``: :func:`rfabric.controllers.default_for` of this fabric, what
        ``rf.sweep(controller="own")`` and ``rfabric demo`` give each fabric. The fabric
        declares it by name (:attr:`default_controller`); a subclass may still override
        this method. Kept for compatibility: new code calls ``rf.controllers.default_for``."""
        from ..controllers import default_for  # the policy layer, imported when asked for

        return default_for(self)

    def locality(self):
        """Which GPUs share a PoD and how many circuits at line rate each PoD may keep busy
        across its boundary: an :class:`rfabric.rewrites.Locality`, what workload rewrites
        such as the weight-sync dissemination forest take from a fabric (docs/fairness.md).

        This default reads it from the spec (:func:`rfabric.rewrites.locality_from_spec`):
        GPUs that packet switches join are one domain (a chain broadcast crosses any packet
        boundary once per shard); islands joined only by optical circuits are separate PoDs,
        each with its OCS ports as budget. Override it when the fabric's PoDs are something
        else."""
        from ..rewrites import locality_from_spec

        return locality_from_spec(self.to_spec())

    def ring_orders(self) -> np.ndarray | None:
        """The fabric's preferred ring orders for collectives, as NCCL's topology search gives
        its rings: an int array (channels, GPUs), row ``c`` the order in which channel ``c``'s
        ring visits the GPUs (a permutation of the GPU ids). A ring collective over some ranks
        runs channel ``c`` through those ranks in row ``c``'s order (so a row should visit each
        server's GPUs consecutively, entering at one GPU and leaving through another NIC); a
        broadcast's channel ``c`` runs down that ring from the root. The rows also cap the
        channels an op uses (``min(coll_channels, rows)``).

        ``None`` (this default) lets the executor choose: servers in the order the op lists
        its ranks, each server's GPUs rotated by the channel, so that channel ``c`` leaves
        every server through a different GPU's NIC (on FatTree, RailOptimized and RFabric,
        whose GPU ids follow servers, ToRs and rails, neighbours are then close).
        Override it when a fabric's links favour other neighbours (TopoOpt, MixNet)."""
        return None

    def tables(self) -> tuple[NodeTable, LinkTable, CircuitTable]:
        """Run build() on a fresh builder: (nodes, links, initial circuit plan)."""
        net = self.builder()
        try:
            self.build(net)
            nodes, links = net.tables()
            circuits = net.circuit_table()
        except SpecError as exc:
            raise SpecError(f"{self.name}: build(): {exc}") from None
        return nodes, links, circuits

    def gpu_types_of(self, nodes: NodeTable) -> np.ndarray:
        """The GPU type name of each GPU of ``nodes`` (this fabric's node table; object
        array in GPU order), what `to_spec` records as ``gpu_types``: the type of the GPU's
        server by ``gpu=`` (servers numbered as `TopologyBuilder.add_servers` numbers them),
        or the first pool's type for a GPU of no server or one beyond the pools. A fabric
        composed of others' tables overrides it."""
        gpu = np.flatnonzero(nodes.kind == NODE_KINDS["gpu"])
        types = self._server_gpu_type
        srv = nodes.server[gpu].astype(np.int64)
        known = (srv >= 0) & (srv < len(types))
        out = np.full(len(gpu), types[0], dtype=object)
        out[known] = types[srv[known]]
        return out

    def nodes(self) -> NodeTable:
        return self.to_spec().nodes

    def links(self) -> LinkTable:
        return self.to_spec().links

    def circuits(self) -> CircuitTable:
        """The circuit plan in force at time 0 (empty for all-electrical fabrics)."""
        return self.to_spec().circuits

    def to_spec(self) -> NetworkSpec:
        """Build (once), validate and return the NetworkSpec; raises SpecError."""
        if self._spec is None:
            nodes, links, circuits = self.tables()
            spec = NetworkSpec.from_tables(
                nodes,
                links,
                name=self.name,
                circuits=circuits,
                host_forwarding=self.host_forwarding,
                pxn=self.pxn,
                deadlock_free=self.deadlock_free,
                routing=self.routing,
                rings=self.ring_orders(),
                gpu_types=self.gpu_types_of(nodes),
            )
            if spec.num_gpus != self.gpus:
                raise SpecError(f"{self.name}: build() made {spec.num_gpus} GPUs, expected {self.gpus}")
            self._spec = spec
        return self._spec

    def summary(self) -> dict:
        """Node counts by kind, link counts by kind label."""
        spec = self.to_spec()
        kinds = spec.nodes.kind_names()
        out = {f"nodes_{k}": int(np.sum(kinds == k)) for k in NODE_KINDS if np.any(kinds == k)}
        labels, counts = np.unique(spec.links.kind.astype(str), return_counts=True)
        out.update({f"links_{lab}": int(c) for lab, c in zip(labels, counts, strict=True)})
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(gpus={self.gpus}, link={self.link!r})"


def _gpu_pools(gpu, gpus: int, per_server: int, where: str) -> list:
    """``gpu=`` of a fabric as [(gpus, Hardware), ...] in GPU order (see `Topology`)."""
    from ..traces.models import Hardware, get_gpu  # the GPU catalog lives with the roofline

    field = f"{where}: gpu"
    if gpu is None:
        gpu = DEFAULTS["gpu"]
    if isinstance(gpu, (str, Hardware)):
        return [(gpus, get_gpu(gpu, field))]
    if isinstance(gpu, Mapping):
        pairs = [(n, t) for t, n in gpu.items()]
    elif isinstance(gpu, (list, tuple)):
        pairs = []
        for i, item in enumerate(gpu):
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise SpecError(
                    f"{field}[{i}]: expected a (gpus, type) pair such as (64, 'H20'), got {item!r}"
                )
            pairs.append(tuple(item))
    else:
        raise SpecError(
            f"{field}: expected a GPU type name, an rf.traces.Hardware, a dict {{type: gpus}} or a "
            f"list of (gpus, type) pairs, not {type(gpu).__name__}"
        )
    if not pairs:
        raise SpecError(f"{field}: no GPU pools given")
    pools = []
    for i, (n, t) in enumerate(pairs):
        hw = get_gpu(t, f"{field}[{i}]")
        n = integer(n, f"{field}[{i}] ({hw.name}): gpus", lo=1)
        if n % per_server:
            raise SpecError(
                f"{field}[{i}] ({hw.name}): {n} GPUs is not a multiple of gpus_per_server={per_server} "
                "(a server holds one GPU type)"
            )
        pools.append((n, hw))
    total = sum(n for n, _ in pools)
    if total != gpus:
        raise SpecError(f"{field}: the pools hold {total} GPUs, the fabric gpus={gpus}")
    return pools
