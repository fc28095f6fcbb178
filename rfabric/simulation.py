"""Running the packet engine: configuration, a steppable Simulation, and simulate().

Python builds the spec and the flows, the C++ engine runs the event loop with the GIL
released, and results come back as numpy columns wrapped into Arrow tables. Python never
runs per packet or per event; it may run between ``run(until=...)`` epochs.
"""

from __future__ import annotations

import dataclasses
import resource
import sys
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .errors import SpecError
from .flows import Flows
from .results import CIRCUIT_SCHEMA, Results, build_flow_table, build_link_table, build_op_tables
from .spec import ROUTING_MODES, NetworkSpec
from .topology.base import Topology
from .units import format_time, parse_rate, parse_size, parse_time

__all__ = ["EngineConfig", "Simulation", "simulate", "TRANSPORT_DEFAULTS", "BACKENDS"]

BACKENDS = ("packet",)
ECMP_MODES = ROUTING_MODES

#: Per-transport defaults for fields left as None in EngineConfig.
#: ECN thresholds are queueing delays at each port's own rate, so one value fits every speed.
TRANSPORT_DEFAULTS = {
    # DCQCN paper (Zhu et al., SIGCOMM 2015): Kmin 5 KB, Kmax 200 KB, Pmax 1% at 40 Gb/s,
    # i.e. 1 us and 40 us of queueing.
    "roce": {"ecn_kmin": "1us", "ecn_kmax": "40us", "ecn_pmax": 0.01},
    # DCTCP step marking at K; K ~ 0.4 RTT of a 3-tier fabric (DCTCP guideline K > C*RTT/7).
    "dctcp": {"ecn_kmin": "5us", "ecn_kmax": "5us", "ecn_pmax": 1.0},
}


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings. Times accept unit strings ("1us") or int ps; sizes "9216B" or bytes.

    Parameters
    ----------
    transport : str
        ``"roce"`` (RoCEv2 + DCQCN over PFC; default) or ``"dctcp"`` (lossy, ECN, retransmit).
    seed : int
        Seeds ECMP hashing and ECN marking draws; same seed, same results.
    mtu_bytes : int
        Frame size on the wire including headers (default 9216, paper §7.2).
    header_bytes : int, optional
        Header bytes per frame; default the transport's (roce 62, dctcp 58).
    control_bytes : int
        Size of ACK/CNP frames (64).
    lossless : bool, optional
        PFC on (True) or drop-tail (False); default the transport's (roce True, dctcp False).
    ecn_kmin, ecn_kmax : time, optional
        RED/ECN thresholds as queueing delay at the port's rate; default per transport.
    ecn_pmax : float, optional
        Marking probability at kmax.
    ecmp : str, optional
        How a switch picks among equal-cost next hops (bench/README.md compares them).
        ``None`` (default): the fabric's own (``Topology.routing``: D-mod-K on FatTree,
        RailOptimized and RFabric, multipath on TopoOpt, adaptive on MixNet; each class
        docstring says why).
        ``"dmodk"``: deterministic destination-based routing, as InfiniBand subnet managers
        program fat-trees and rail fabrics: a destination's routing index is its leaf switch's
        rank times the most GPUs under a leaf plus its position under that leaf, and at its
        h-th switch hop a switch with k next hops takes digit h of that index (the position
        under the leaf first, then the leaf's rank) mod k. Ring collectives run
        collision-free (~99% of the NICs' rate), all-to-all uses every uplink; each
        destination is reached over one tree. ``"flow"``: hash of the flow (of its
        connection, for collectives), as RoCE ECMP: hash collisions included (ring
        all-reduce drops to 20-50%). ``"packet"``: random per-packet spraying.
        ``"adaptive"``: per packet, the port with the least queued bytes (InfiniBand AR,
        Spectrum-X). ``"multipath"``: adaptive, and on fabrics whose hosts forward (TopoOpt,
        MixNet) each server's NVSwitch spreads frames over all its NICs whose paths are at
        most 4 hops (one more server crossed) longer than the shortest, the least loaded NIC
        weighted by the hops left (UGAL); a frame's hops are bounded, so no loop can form.
    pfc_xoff : time
        PFC XOFF threshold per ingress port as queueing time at the link rate (default 5 us;
        capped at buffer - headroom, where headroom covers a round trip plus two frames).
    dcqcn_* , dctcp_* :
        Transport parameters (see the field defaults and csrc/proto/*.cpp).
    coll_channels : int
        Rings per ring collective, as NCCL's channels (default 8; fewer when each ring would
        carry under 64 KiB per rank). Each channel's ring leaves every server from a
        different GPU, so inter-server hops use all NICs.
    coll_chunk : size
        Pipelining unit of ring slices and tree / chain broadcast chunks (default 512 KiB).
    t_ocs : time
        Reconfiguration time of optical circuit switches (default 25 ms, paper §7.2): a new
        circuit is dark this long after a plan is applied.
    """

    transport: str = "roce"
    seed: int = 1
    mtu_bytes: int = 9216
    header_bytes: int | None = None
    control_bytes: int = 64
    lossless: bool | None = None
    ecn_kmin: object = None
    ecn_kmax: object = None
    ecn_pmax: float | None = None
    ecmp: str | None = None  # None: the fabric's own (Topology.routing)
    # PFC XOFF per ingress port, as queueing time at the link's rate (like the ECN
    # thresholds): 5 us = 125 KB at 200 Gb/s. PFC is accounted per ingress, so a switch can
    # hold ports x XOFF of lossless backlog; 5 us x 64 ports x 200G = 8 MB, the order of a
    # shared-buffer ASIC's lossless pool. With XOFF = buffer - headroom (~1 MiB) a 16:1
    # incast parks ~48 MB in the fabric and DCQCN, marked while it drains, falls to its rate
    # floor (bench/README.md has the measurements).
    pfc_xoff: object = "5us"
    dcqcn_timer: object = "55us"
    # DCQCN byte counter: 32 KiB, as ConnectX NICs reset it (rpg_byte_reset 32767 B). The
    # DCQCN paper's 10 MB (chosen at 40 Gb/s for long flows) leaves a throttled flow in
    # additive increase for milliseconds: a 2 MB permutation on a 100G fat-tree then takes
    # 3.3 ms instead of the 0.66 ms its ECMP collisions allow (bench/README.md).
    dcqcn_byte_counter: object = "32KiB"
    dcqcn_g: float = 1 / 256
    # Additive / hyper increase steps: ConnectX defaults (rpg_ai_rate 5 Mb/s, rpg_hai_rate
    # 50 Mb/s). Steps scaled to the line rate (line/1000, line/100) overshoot into PFC.
    dcqcn_rai: object = "5Mbps"
    dcqcn_rhai: object = "50Mbps"
    dcqcn_min_rate: object = "100Mbps"
    dcqcn_cnp_interval: object = "50us"
    dcqcn_f: int = 5
    dctcp_g: float = 1 / 16
    dctcp_init_cwnd_packets: int = 10
    dctcp_min_rto: object = "200us"
    dctcp_max_timeouts: int = 15  # then the flow gives up, unfinished (Linux tcp_retries2)
    # Optical circuit switches: how long changed circuits stay dark (paper: 25 ms; table 2
    # spans 10 us .. 120 s across OCS technologies)
    t_ocs: object = "25ms"
    # Collective executor (trace workloads)
    coll_channels: int = 8  # NCCL channels per ring collective (fewer for small messages)
    coll_chunk: object = "512KiB"  # pipelining unit of tree / chain broadcast

    def to_engine(self, routing: str = "dmodk") -> dict:
        """The config dict the engine takes: base units only, transport defaults resolved;
        ``routing`` (the fabric's own, ``NetworkSpec.routing``) stands in for ``ecmp=None``."""
        from . import _engine

        if self.transport not in _engine.transports():
            raise SpecError(
                f"unknown transport {self.transport!r} (known: {', '.join(_engine.transports())})"
            )
        if self.ecmp is not None and self.ecmp not in ECMP_MODES:
            raise SpecError(f"ecmp must be one of {', '.join(map(repr, ECMP_MODES))}, got {self.ecmp!r}")
        ecmp = self.ecmp if self.ecmp is not None else routing
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise SpecError(f"seed must be a non-negative integer, got {self.seed!r}")
        d = TRANSPORT_DEFAULTS.get(self.transport, {})
        kmin = parse_time(self.ecn_kmin if self.ecn_kmin is not None else d.get("ecn_kmin", "5us"))
        kmax = parse_time(self.ecn_kmax if self.ecn_kmax is not None else d.get("ecn_kmax", "5us"))
        pmax = self.ecn_pmax if self.ecn_pmax is not None else d.get("ecn_pmax", 1.0)
        if kmax < kmin:
            raise SpecError(f"ecn_kmax ({format_time(kmax)}) is below ecn_kmin ({format_time(kmin)})")
        if not 0 <= pmax <= 1:
            raise SpecError(f"ecn_pmax must be in [0, 1], got {pmax!r}")
        out = {
            "transport": self.transport,
            "seed": int(self.seed),
            "mtu_bytes": parse_size(self.mtu_bytes, allow_zero=False),
            "control_bytes": parse_size(self.control_bytes, allow_zero=False),
            "ecn_kmin_ps": kmin,
            "ecn_kmax_ps": kmax,
            "ecn_pmax": float(pmax),
            "ecmp_per_packet": ecmp == "packet",
            "ecmp_adaptive": ecmp in ("adaptive", "multipath"),
            "ecmp_multipath": ecmp == "multipath",
            "ecmp_dmodk": ecmp == "dmodk",
            "pfc_xoff_ps": parse_time(self.pfc_xoff, allow_zero=False),
            "dcqcn_timer_ps": parse_time(self.dcqcn_timer, allow_zero=False),
            "dcqcn_byte_counter": parse_size(self.dcqcn_byte_counter, allow_zero=False),
            "dcqcn_g": float(self.dcqcn_g),
            "dcqcn_min_rate_bps": parse_rate(self.dcqcn_min_rate),
            "dcqcn_cnp_interval_ps": parse_time(self.dcqcn_cnp_interval),
            "dcqcn_f": int(self.dcqcn_f),
            "dctcp_g": float(self.dctcp_g),
            "dctcp_init_cwnd_packets": int(self.dctcp_init_cwnd_packets),
            "dctcp_min_rto_ps": parse_time(self.dctcp_min_rto, allow_zero=False),
            "dctcp_max_timeouts": int(self.dctcp_max_timeouts),
            "t_ocs_ps": parse_time(self.t_ocs),
        }
        if (
            isinstance(self.coll_channels, bool)
            or not isinstance(self.coll_channels, (int, np.integer))
            or self.coll_channels < 1
        ):
            raise SpecError(f"coll_channels must be a positive integer, got {self.coll_channels!r}")
        parse_size(self.coll_chunk, allow_zero=False)
        if self.header_bytes is not None:
            out["header_bytes"] = parse_size(self.header_bytes)
        if self.lossless is not None:
            out["lossless"] = int(bool(self.lossless))
        if self.dcqcn_rai is not None:
            out["dcqcn_rai_bps"] = parse_rate(self.dcqcn_rai)
        if self.dcqcn_rhai is not None:
            out["dcqcn_rhai_bps"] = parse_rate(self.dcqcn_rhai)
        return out


def _as_spec(topology) -> NetworkSpec:
    if isinstance(topology, NetworkSpec):
        return topology
    if isinstance(topology, Topology):
        return topology.to_spec()
    raise SpecError(f"expected a Topology or NetworkSpec, got {type(topology).__name__}")


def _make_config(config: EngineConfig | None, overrides: dict) -> EngineConfig:
    base = config or EngineConfig()
    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise SpecError(f"unknown engine setting(s): {', '.join(unknown)} (see rfabric.EngineConfig)")
    return dataclasses.replace(base, **overrides)


class Simulation:
    """A packet-level simulation that can be advanced in epochs.

    ``run(until=t)`` runs the C++ loop (GIL released) to simulated time ``t``; between
    epochs Python may read counters (``delivered_bytes()``), change link states, and so on.
    ``results()`` returns the tables at any point.

    Parameters
    ----------
    topology : Topology or NetworkSpec
    workload : Flows or rfabric.traces.Trace
        Plain point-to-point flows, or a trace of collective ops replayed by the engine's
        collective executor (ops start when their dependencies end plus their compute gap).
    config : EngineConfig, optional
    **settings
        Any EngineConfig field, e.g. ``transport="dctcp"``, ``seed=3``, ``mtu_bytes=4096``.
    """

    def __init__(self, topology, workload, config: EngineConfig | None = None, **settings):
        from . import _engine

        if "controller" in settings:
            raise SpecError(
                "controllers (StageAwareController and others) are not built yet; plan circuits "
                "yourself with Simulation.apply_circuits(plan, at=...)"
            )
        if "backend" in settings:
            backend = settings.pop("backend")
            if backend not in BACKENDS:
                raise SpecError(
                    f"unknown backend {backend!r} (available: {', '.join(BACKENDS)}; "
                    "the flow-level backend is not built yet)"
                )
        from .traces import Trace

        self.spec = _as_spec(topology)
        self.config = _make_config(config, settings)
        engine_config = self.config.to_engine(self.spec.routing)
        #: the routing the run uses: the config's ``ecmp``, else the fabric's own
        self.routing = self.config.ecmp if self.config.ecmp is not None else self.spec.routing
        self.trace: Trace | None = None
        self.flows: Flows | None = None
        if isinstance(workload, Trace):
            if workload.gpus is not None and workload.gpus > self.spec.num_gpus:
                raise SpecError(
                    f"the trace is for {workload.gpus} GPUs but {self.spec.name} has {self.spec.num_gpus}"
                )
            self.trace = workload
            self._engine = _engine.Engine(self.spec.arrays(), engine_config)
            self._engine.load_workload(
                workload.arrays(),
                int(self.config.coll_channels),
                parse_size(self.config.coll_chunk),
                None if self.spec.rings is None else self.spec.rings.astype(np.uint32),
            )
        elif isinstance(workload, Flows):
            workload.check_gpus(self.spec.num_gpus, self.spec.name)
            self.flows = workload
            self._engine = _engine.Engine(self.spec.arrays(), engine_config)
            self._engine.add_flows(
                workload.src.astype(np.uint32),
                workload.dst.astype(np.uint32),
                workload.size_bytes,
                workload.start_ps,
            )
        else:
            raise SpecError(
                f"workload must be rfabric.Flows or rfabric.traces.Trace, got {type(workload).__name__}"
            )
        self.wall_s = 0.0
        self._plans = 0
        # Link state changes scheduled so far, per link: [(at_ps, up)] in call order. A circuit
        # plan may not use an OCS port that is down at the plan's own time.
        self._link_changes: dict[int, list[tuple[int, bool]]] = {}

    @property
    def now(self) -> int:
        """Simulated time (ps)."""
        return self._engine.now

    @property
    def done(self) -> bool:
        """True when no event is pending: every flow finished or none can progress."""
        return self._engine.idle

    @property
    def engine(self):
        """The compiled engine handle (rfabric._engine.Engine)."""
        return self._engine

    def set_link_state(self, link: int, at, up: bool) -> None:
        """Take link row ``link`` down (``up=False``) or up at simulated time ``at``.

        Routing avoids a down link from that instant; frames on it are lost (lossy) or
        re-forwarded (lossless). A link that ends at an optical device is an OCS port: it is
        masked from circuit plans applied afterwards.
        """
        link = int(link)
        if not 0 <= link < self.spec.num_links:
            raise SpecError(f"link {link} does not exist ({self.spec.name} has {self.spec.num_links} links)")
        at_ps = parse_time(at)
        self._engine.set_link_state(link, at_ps, bool(up))
        self._link_changes.setdefault(link, []).append((at_ps, bool(up)))

    def _link_down_at(self, link: int, t: int) -> bool:
        """Whether link row ``link`` is down at time ``t`` by the changes scheduled so far (the
        latest change at or before ``t`` wins; equal times go by call order, as in the engine)."""
        state = True
        for at_ps, up in sorted(self._link_changes.get(link, ()), key=lambda c: c[0]):
            if at_ps > t:
                break
            state = up
        return not state

    def fail_link(self, link: int, at=0) -> None:
        """Take link row ``link`` down at time ``at`` (both directions). Find rows with
        ``spec.nic_link(gpu)``, ``spec.link_between(a, b)`` or ``spec.links_of(node)``."""
        self.set_link_state(link, at, False)

    def fail_nic(self, gpu: int, at=0) -> None:
        """Fail GPU ``gpu``'s NIC link at ``at``: its traffic then crosses the NVSwitch to
        another GPU of the server and leaves (and arrives) through that GPU's NIC."""
        self.fail_link(self.spec.nic_link(gpu), at)

    def apply_circuits(self, plan, at, t_ocs=None) -> int:
        """Switch to circuit plan ``plan`` (a CircuitTable) at simulated time ``at``.

        Circuits in the current plan but not in ``plan`` go dark at ``at``; circuits new in
        ``plan`` carry light from ``at + t_ocs`` (default: the config's ``t_ocs``); circuits in
        both keep carrying traffic throughout (non-blocking reconfiguration, paper §5.4).
        Frames on a circuit when it goes dark are lost on a lossy fabric and held back and
        re-forwarded by the sender on a lossless one. Returns the plan id.
        """
        from .spec import CircuitTable

        if not isinstance(plan, CircuitTable):
            raise SpecError(f"plan must be a CircuitTable, got {type(plan).__name__}")
        self.spec.validate_circuits(plan, where="apply_circuits")
        at_ps = parse_time(at)
        ports = set(plan.a.tolist()) | set(plan.b.tolist())
        masked = sorted(
            link for link in self._link_changes if link in ports and self._link_down_at(link, at_ps)
        )
        if masked:
            raise SpecError(
                f"apply_circuits: circuit plan uses failed OCS port(s) on link(s) {masked} at {at_ps} ps; "
                "failed ports are masked from later plans"
            )
        dark = parse_time(t_ocs if t_ocs is not None else self.config.t_ocs)
        self._engine.schedule_plan(
            at_ps,
            plan.ocs.astype(np.uint32),
            plan.a.astype(np.uint32),
            plan.b.astype(np.uint32),
            dark,
        )
        self._plans += 1
        return self._plans - 1

    def current_circuits(self):
        """The circuits in place now (lit or dark) as a CircuitTable."""
        from .spec import CircuitTable

        flat = self._engine.current_circuits().reshape(-1, 3).astype(np.int64)
        return CircuitTable.build(flat[:, 0], flat[:, 1], flat[:, 2])

    def delivered_bytes(self) -> np.ndarray:
        """Payload bytes delivered so far, per flow."""
        return self._engine.delivered_bytes()

    def run(self, until=None, *, progress: bool = False, max_events: int = 0) -> Simulation:
        """Advance to simulated time ``until`` (unit string or ps), or until idle if None."""
        limit = parse_time(until) if until is not None else np.iinfo(np.int64).max
        t0 = time.perf_counter()
        if progress:
            self._run_with_progress(limit)
        else:
            self._engine.run(limit, int(max_events))
        self.wall_s += time.perf_counter() - t0
        return self

    def _run_with_progress(self, limit: int) -> None:
        total = len(self.flows) if self.flows is not None else self.trace.num_ops
        unit = "flows" if self.flows is not None else "ops"
        chunk = 2_000_000
        t0 = time.perf_counter()
        while True:
            n = self._engine.run(limit, chunk)
            elapsed = time.perf_counter() - t0
            ev = self._engine.events_processed
            done = self._engine.flows_done if self.flows is not None else self._engine.ops_done
            width = 30
            filled = int(width * done / total) if total else width
            sys.stderr.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {unit} {done}/{total}  "
                f"sim {format_time(self._engine.now)}  events {ev / 1e6:.1f}M  "
                f"{ev / max(elapsed, 1e-9) / 1e6:.1f} Mev/s "
            )
            sys.stderr.flush()
            if n < chunk or self._engine.idle or self._engine.now >= limit:
                break
        sys.stderr.write("\n")

    def results(self) -> Results:
        log = self._engine.flow_log()
        c = self._engine.counters()
        end = log["end_ps"]
        sim_ps = int(self._engine.now) if self._engine.now < np.iinfo(np.int64).max else 0
        makespan = int(end.max()) if len(end) and np.all(end >= 0) else -1
        wall = self.wall_s
        run = {
            "backend": "packet",
            "transport": self.config.transport,
            "routing": self.routing,
            "events": int(c["events"]),
            "packets": int(c["packets"]),
            "packet_hops": int(c["packet_hops"]),
            "drops": int(c["drops"]),
            "no_route_drops": int(c["no_route_drops"]),
            "link_down_drops": int(c["link_down_drops"]),
            "ecn_marks": int(c["ecn_marks"]),
            "circuit_drops": int(c["circuit_drops"]),
            "circuit_reroutes": int(c["circuit_reroutes"]),
            "held": int(c["held"]),
            "dark_transmits": int(c["dark_transmits"]),
            "busy_starts": int(c["busy_starts"]),
            "packets_held": int(c["packets_held"]),
            "pfc_pauses": int(c["pfc_pauses"]),
            "packets_in_flight": int(c["packets_in_flight"]),
            "flows": len(log["src"]),
            "flows_done": int(c["flows_done"]),
            "packets_delivered": int(c["packets_delivered"]),
            "lossless": bool(self._engine.lossless),
            "header_bytes": int(self._engine.header_bytes),
            "wall_s": wall,
            "sim_ps": sim_ps,
            "makespan_ps": makespan,
            "seed": self.config.seed,
            "events_per_s": c["events"] / wall if wall > 0 else float("nan"),
            "packet_hops_per_s": c["packet_hops"] / wall if wall > 0 else float("nan"),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
        # Nothing left to happen, yet frames are stranded in the fabric: held at a switch with no
        # route to their destination (a lossless fabric holds rather than drops), or queued
        # behind PAUSEs that will never lift (a cyclic buffer dependency).
        stranded = self._engine.idle and c["packets_in_flight"] > 0 and self._engine.lossless
        run["unroutable"] = bool(stranded and c["packets_held"] > 0)
        run["deadlock"] = bool(stranded and c["packets_in_flight"] > c["packets_held"])
        links = build_link_table(self._engine.port_stats(), self.spec, makespan if makespan > 0 else sim_ps)
        res = Results(flows=build_flow_table(log), links=links, run=run)
        circuit_log = self._engine.circuit_log()
        res.circuits = pa.table(
            {k: np.asarray(v, dtype=np.int64) for k, v in circuit_log.items()}, schema=CIRCUIT_SCHEMA
        )
        if self.trace is not None:
            res.ops, res.stages = build_op_tables(self.trace, self._engine.op_log())
            end = res.ops["end_ps"].to_numpy()
            run["ops"] = len(end)
            run["ops_done"] = int(np.sum(end >= 0))
            run["makespan_ps"] = int(end.max()) if len(end) and np.all(end >= 0) else -1
        return res


def simulate(
    topology,
    workload,
    *,
    transport: str = "roce",
    backend: str = "packet",
    seed: int = 1,
    mtu_bytes=9216,
    progress: bool = False,
    until=None,
    config: EngineConfig | None = None,
    failures=(),
    **settings,
) -> Results:
    """Simulate ``workload`` on ``topology`` and return Results.

    Parameters
    ----------
    topology : Topology or NetworkSpec
    workload : Flows or rfabric.traces.Trace
        Point-to-point flows, or a trace of collective ops (then ``Results.ops`` and
        ``Results.stages`` are filled).
    transport : str
        ``"roce"`` (default) or ``"dctcp"``.
    backend : str
        ``"packet"`` (the only backend built so far).
    seed : int
        Same seed, same results.
    mtu_bytes : int or str
        Frame size including headers (default 9216).
    progress : bool
        Show a progress bar on stderr (flows done, simulated time, event rate).
    until : time, optional
        Stop at this simulated time instead of running to completion.
    config : EngineConfig, optional
        Base configuration; ``settings`` override its fields.
    failures : iterable of (link, time)
        Failure schedule: link rows that go down at the given times (see
        ``Simulation.fail_link``; ``spec.nic_link(gpu)`` finds a GPU's NIC link).
    """
    sim = Simulation(
        topology,
        workload,
        config,
        transport=transport,
        backend=backend,
        seed=seed,
        mtu_bytes=mtu_bytes,
        **settings,
    )
    for item in failures:
        try:
            link, at = item
        except (TypeError, ValueError):
            raise SpecError(f"failures: expected (link, time) pairs, got {item!r}") from None
        sim.fail_link(link, at)
    sim.run(until, progress=progress)
    return sim.results()
