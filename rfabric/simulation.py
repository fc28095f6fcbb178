"""Running the engine: configuration, a steppable Simulation, and simulate(); the packet
backend (every frame) or the flow backend (max-min fair rates, ``backend="flow"``).

Python builds the spec and the flows, the C++ engine runs the event loop with the GIL
released, and results come back as numpy columns wrapped into Arrow tables. Python never
runs per packet or per event; it may run between ``run(until=...)`` epochs.
"""

from __future__ import annotations

import dataclasses
import pathlib
import resource
import sys
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import _engine
from .errors import SpecError
from .flows import Flows
from .results import (
    CIRCUIT_SCHEMA,
    FLOW_SCHEMA,
    PACKET_ONLY_RUN_KEYS,
    Results,
    build_flow_table,
    build_link_table,
    build_op_tables,
    build_sample_tables,
)
from .spec import ROUTING_MODES, NetworkSpec
from .topology.base import Topology
from .units import format_time, parse_rate, parse_size, parse_time
from .validators import boolean, integer, known_keys

__all__ = ["EngineConfig", "Simulation", "simulate", "BACKENDS"]

#: ``"packet"``: every frame through queues and transports; ``"flow"``: max-min fair rates over
#: the same paths (csrc/flow/flow_network.hpp; README "Flow-level backend").
BACKENDS = ("packet", "flow")
ECMP_MODES = ROUTING_MODES

#: The engine's config fields and their defaults in base units (-1: the transport's choice).
#: The one list is RF_ENGINE_CONFIG_FIELDS in csrc/fabric/spec.hpp, which also documents each
#: default and its source; EngineConfig takes its defaults from here.
ENGINE_FIELDS: dict = _engine.config_fields()

#: EngineConfig fields the engine does not take: the routing mode (sent as the engine's
#: ecmp_* switches; None: the fabric's own), the OCS reconfiguration time (applied by Simulation.apply_circuits) and
#: the collective executor's settings (passed to load_workload).
PYTHON_ONLY = (
    "ecmp",
    "t_ocs",
    "coll_channels",
    "coll_chunk",
    "coll_protocol",
    "nccl_model",
    "flow_ring_slices",
    "flow_merge_channels",
)
#: Time and size fields that may be zero (the others must be positive).
_MAY_BE_ZERO = ("header_bytes", "ecn_kmin_ps", "ecn_kmax_ps", "dcqcn_cnp_interval_ps")


def _python_name(engine_name: str) -> str:
    """EngineConfig's name for an engine field: without the _ps / _bps unit suffix (the
    Python field takes unit strings), else the same."""
    for suffix in ("_ps", "_bps"):
        if engine_name.endswith(suffix):
            return engine_name[: -len(suffix)]
    return engine_name


def _default(engine_name: str):
    """The engine's default for a field, None where it is the transport's choice (-1)."""
    value = ENGINE_FIELDS[engine_name]
    return None if value == -1 and not isinstance(value, bool) else value


def _default_ecmp() -> str:
    """The routing mode the engine's ecmp_* defaults select."""
    for mode in ("adaptive", "per_packet", "dmodk"):
        if ENGINE_FIELDS[f"ecmp_{mode}"]:
            return "packet" if mode == "per_packet" else mode
    return "flow"


def _to_engine_value(engine_name: str, value):
    """One EngineConfig value in the engine's base unit and type."""
    default = ENGINE_FIELDS[engine_name]
    positive = engine_name not in _MAY_BE_ZERO
    try:
        name = _python_name(engine_name)  # (mtu_bytes keeps its unit: explicit, no floor)
        if engine_name.endswith("_ps"):
            return parse_time(value, allow_zero=not positive, name=name)
        if engine_name.endswith("_bps"):
            return parse_rate(value, name=name)
        if engine_name.endswith("_bytes") or engine_name.endswith("_byte_counter"):
            return parse_size(value, allow_zero=not positive, name=name)
    except SpecError as exc:
        raise SpecError(f"EngineConfig.{_python_name(engine_name)}: {exc}") from None
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, int) and not isinstance(value, bool):
        if isinstance(value, (int, np.integer)):
            # the engine's fields are C++ ints (counts, steps, timeouts: at least 1), the seed
            # a uint64; a value beyond them is refused by name rather than by pybind's cast
            lo, hi = (0, 2**64 - 1) if engine_name == "seed" else (1, 2**31 - 1)
            return integer(value, f"EngineConfig.{_python_name(engine_name)}", lo, hi)
    elif isinstance(default, float) and isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    elif isinstance(default, str) and isinstance(value, str):
        return value
    raise SpecError(
        f"EngineConfig.{_python_name(engine_name)}: expected {type(default).__name__}, got {value!r}"
    )


@dataclass(frozen=True)
class EngineConfig:
    """Engine settings. Times accept unit strings ("1us") or int ps; sizes "9216B" or bytes;
    rates "5Mbps" or bit/s. Defaults are the engine's (``ENGINE_FIELDS``, from
    ``RF_ENGINE_CONFIG_FIELDS`` in csrc/fabric/spec.hpp, where each is documented with its source).

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
        RED/ECN thresholds as queueing delay at the port's rate; default the transport's
        (roce 1 µs and 40 µs, from the DCQCN paper; dctcp a step at 5 µs).
    ecn_pmax : float, optional
        Marking probability at kmax; default the transport's (roce 0.01, dctcp 1).
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
        Transport parameters (defaults and their sources in csrc/fabric/spec.hpp).
    coll_channels : int
        Rings per ring collective, as NCCL's channels (default 8; fewer when each ring would
        carry under 64 KiB per rank). Each channel's ring leaves every server from a
        different GPU, so inter-server hops use all NICs.
    coll_chunk : size
        Pipelining unit of ring slices and tree / chain broadcast chunks (default 512 KiB;
        with the NCCL model, the Simple protocol's step; LL and LL128 have their own).
    nccl_model : bool
        Model what NCCL pays (default True; docs/nccl-model.md): its protocols' wire bytes
        (LL 2x, LL128 128/120), per-step and launch latencies, step sizes and channel
        thresholds, the SM-driven NVLink copy, and the tuner's choice of algorithm and
        protocol per op. False: the previous behaviour, line-rate Simple with no protocol
        overhead (for comparisons).
    coll_protocol : str
        ``"auto"`` (default: the tuner's choice per op, as NCCL's) or a forced ``"ll"``,
        ``"ll128"``, ``"simple"`` (as NCCL_PROTO); needs ``nccl_model``.
    flow_ring_slices : int
        ``backend="flow"`` only: the most slices a ring step is cut into (default 4; 0: slices
        of ``coll_chunk``, as the packet engine). A fluid ring runs at the same pace with a few
        large slices as with many small ones, and makes far fewer flows (README "Flow-level
        backend" has the validation).
    flow_merge_channels : bool
        ``backend="flow"`` only: run the channels of a ring collective whose rings have the
        same edges and the same paths (an NVLink ring inside a server) as one flow of n
        copies per message (default True). Exact in the fluid model, where flows on the same
        paths share them alike; n times fewer flows and events. False: a flow per channel.
    t_ocs : time
        Reconfiguration time of optical circuit switches (default 25 ms, paper §7.2): a new
        circuit is dark this long after a plan is applied.
    """

    transport: str = _default("transport")
    seed: int = _default("seed")
    mtu_bytes: int = _default("mtu_bytes")
    header_bytes: int | None = _default("header_bytes")
    control_bytes: int = _default("control_bytes")
    lossless: bool | None = _default("lossless")
    ecn_kmin: object = _default("ecn_kmin_ps")
    ecn_kmax: object = _default("ecn_kmax_ps")
    ecn_pmax: float | None = _default("ecn_pmax")
    ecmp: str | None = None  # None: the fabric's own (Topology.routing)
    pfc_xoff: object = _default("pfc_xoff_ps")
    dcqcn_timer: object = _default("dcqcn_timer_ps")
    dcqcn_byte_counter: object = _default("dcqcn_byte_counter")
    dcqcn_g: float = _default("dcqcn_g")
    dcqcn_rai: object = _default("dcqcn_rai_bps")
    dcqcn_rhai: object = _default("dcqcn_rhai_bps")
    dcqcn_min_rate: object = _default("dcqcn_min_rate_bps")
    dcqcn_cnp_interval: object = _default("dcqcn_cnp_interval_ps")
    dcqcn_f: int = _default("dcqcn_f")
    dctcp_g: float = _default("dctcp_g")
    dctcp_init_cwnd_packets: int = _default("dctcp_init_cwnd_packets")
    dctcp_min_rto: object = _default("dctcp_min_rto_ps")
    dctcp_max_timeouts: int = _default("dctcp_max_timeouts")
    # Optical circuit switches: how long changed circuits stay dark (paper: 25 ms; table 2
    # spans 10 us .. 120 s across OCS technologies)
    t_ocs: object = "25ms"
    # Collective executor (trace workloads)
    coll_channels: int = 8  # NCCL channels per ring collective (fewer for small messages)
    coll_chunk: object = "512KiB"  # pipelining unit of tree / chain broadcast
    nccl_model: bool = True  # NCCL's protocol costs (docs/nccl-model.md); False: line-rate Simple
    coll_protocol: str = "auto"  # "auto" (the tuner's) or a forced "ll", "ll128", "simple"
    flow_ring_slices: int = 4  # backend="flow": most slices per ring step (0: slices of coll_chunk)
    flow_merge_channels: bool = True  # backend="flow": channels with the same ring and paths as one flow

    def to_engine(self, routing: str | None = None) -> dict:
        """The config dict the engine takes, built from the engine's own field list: base
        units only; fields left None are left out (the engine's default: the transport's).
        ``routing`` (the fabric's own, ``NetworkSpec.routing``) stands in for ``ecmp=None``;
        without either, the engine's default routing (D-mod-K)."""
        if self.transport not in _engine.transports():
            raise SpecError(
                f"unknown transport {self.transport!r} (known: {', '.join(_engine.transports())})"
            )
        if self.ecmp is not None and self.ecmp not in ECMP_MODES:
            raise SpecError(f"ecmp must be one of {', '.join(map(repr, ECMP_MODES))}, got {self.ecmp!r}")
        ecmp = self.ecmp if self.ecmp is not None else (routing or _default_ecmp())
        integer(self.seed, "seed", lo=0)
        switches = {
            "ecmp_per_packet": ecmp == "packet",
            "ecmp_adaptive": ecmp in ("adaptive", "multipath"),
            "ecmp_multipath": ecmp == "multipath",
            "ecmp_dmodk": ecmp == "dmodk",
        }
        out = {}
        for name in ENGINE_FIELDS:
            if name in switches:
                out[name] = switches[name]
                continue
            value = getattr(self, _python_name(name))
            if value is None:
                continue
            out[name] = (
                int(boolean(value, "EngineConfig.lossless"))
                if name == "lossless"
                else _to_engine_value(name, value)
            )
        kmin, kmax = out.get("ecn_kmin_ps"), out.get("ecn_kmax_ps")
        if kmin is not None and kmax is not None and kmax < kmin:
            raise SpecError(f"ecn_kmax ({format_time(kmax)}) is below ecn_kmin ({format_time(kmin)})")
        if "ecn_pmax" in out and not 0 <= out["ecn_pmax"] <= 1:
            raise SpecError(f"ecn_pmax must be in [0, 1], got {self.ecn_pmax!r}")
        integer(self.coll_channels, "coll_channels", lo=1, hi=2**31 - 1)
        parse_size(self.coll_chunk, allow_zero=False, name="coll_chunk")
        integer(self.flow_ring_slices, "flow_ring_slices", lo=0, hi=1 << 30)
        boolean(self.flow_merge_channels, "flow_merge_channels")
        boolean(self.nccl_model, "nccl_model")
        protocols = ("auto", *_engine.op_protocols())
        if not isinstance(self.coll_protocol, str) or self.coll_protocol not in protocols:
            raise SpecError(
                f"coll_protocol must be one of {', '.join(map(repr, protocols))}, got {self.coll_protocol!r}"
            )
        if self.coll_protocol != "auto" and not self.nccl_model:
            raise SpecError(
                f"coll_protocol={self.coll_protocol!r} needs nccl_model=True (off, every op runs line-rate Simple)"
            )
        parse_time(self.t_ocs, name="t_ocs")
        return out


def _checked_init(init):
    """EngineConfig's generated __init__, refusing an unknown keyword by name with the
    closest setting (as Simulation(**settings) does) instead of Python's TypeError."""
    import functools

    @functools.wraps(init)
    def __init__(self, *args, **kw):
        known_keys(
            kw, [f.name for f in dataclasses.fields(EngineConfig)], "rfabric.EngineConfig", "engine setting"
        )
        init(self, *args, **kw)

    return __init__


EngineConfig.__init__ = _checked_init(EngineConfig.__init__)


def _as_spec(topology) -> NetworkSpec:
    if isinstance(topology, NetworkSpec):
        return topology
    if isinstance(topology, Topology):
        return topology.to_spec()
    raise SpecError(f"expected a Topology or NetworkSpec, got {type(topology).__name__}")


def _make_config(config: EngineConfig | None, overrides: dict) -> EngineConfig:
    base = config or EngineConfig()
    known_keys(
        overrides,
        [f.name for f in dataclasses.fields(EngineConfig)],
        "rfabric.EngineConfig",
        "engine setting",
    )
    return dataclasses.replace(base, **overrides)


class Simulation:
    """A simulation (packet-level, or flow-level with ``backend="flow"``) that can be
    advanced in epochs.

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
    controller : rfabric.controllers.Controller, optional
        Circuit controller called at each communication-period boundary of a trace workload
        (README "Circuit controllers"): its workload rewrites are applied (``rewrites``), then ``run()`` stops in C++ whenever an op of a new period becomes ready,
        calls ``controller.plan(intent, view)`` and applies a returned plan at once with
        ``t_ocs``. ``Results.circuits`` logs the changes and ``Results.run`` counts the calls.
    rewrites : "own", "none" or list of rfabric.rewrites.Rewrite
        Workload rewrites applied to a trace workload before the run, each at the fabric's
        locality (``Topology.locality()``): ``"own"`` (default) the controller's
        (``controller.rewrites()``: the stage-aware controller's weight-sync forest), ``"none"``
        none, or exactly the given ones (with or without a controller; the controller is told
        which ran through ``controller.adopt``). ``Results.ops["rewrite"]`` names the rewrite
        that produced each op (null: the op as the trace had it) and ``Results.run["rewrites"]``
        lists what each did (docs/fairness.md).
    backend : str
        ``"packet"`` (default) or ``"flow"`` (see ``simulate``).
    record_flows : bool, optional
        Keep one row per flow (``Results.flows``). Default: True for a Flows workload (the
        flows are the result), False for a trace, whose results are per op and per stage
        (``Results.ops``, ``Results.stages``; per-op flow totals are kept either way). The
        engine holds a flow's state only while it is alive, so without recording, memory is
        bounded by the flows in flight, not by the trace's length.
    flows_path : str or path, optional
        Stream the per-flow rows to Parquet files in this directory (created; it must not
        hold files) as flows finish, instead of keeping them in memory: for runs whose
        flow table would not fit. Implies ``record_flows``; packet backend only. Each batch of
        ``FLOW_BATCH_ROWS`` finished flows becomes ``part-NNNNN.parquet``; ``results()``
        writes the rows still buffered, and the flows still alive (mostly unfinished: end_ps
        -1) as ``alive.parquet``, a snapshot rewritten at each call (removed once none is). Read them with ``pyarrow.parquet.read_table(flows_path)``;
        ``Results.flows`` is then empty and ``Results.flows_path`` names the directory.
    sample_every : time, optional
        Sample, at every multiple of this period (e.g. ``"10us"``), each link direction's
        egress queue and the bytes it sent in the window, and each live flow's goodput over
        it (``Results.queue_samples``, ``Results.rate_samples``; packet backend only). The
        engine then runs one periodic event; off (the default) it runs none, so a run without
        sampling pays nothing. The samples are moved into Arrow tables after every
        ``run()`` call, so the engine holds at most one epoch's worth.
    samples_path : str or path, optional
        With ``sample_every``: stream the samples to Parquet in this directory (created; it
        must not hold files) instead of keeping them in memory: ``queues/part-NNNNN.parquet``
        and ``rates/part-NNNNN.parquet``, a part per ``run()`` call and per
        ``_STREAM_CHUNK_EVENTS`` events within one. Read them with
        ``pyarrow.parquet.read_table(f"{samples_path}/queues")``; ``Results.queue_samples``
        and ``rate_samples`` are then empty and ``Results.samples_path`` names the directory.
    **settings
        Any EngineConfig field, e.g. ``transport="dctcp"``, ``seed=3``, ``mtu_bytes=4096``.
    """

    #: finished flows buffered in the engine before they are written out as one Parquet part
    FLOW_BATCH_ROWS = 1 << 20
    #: events per engine call while streaming flows (the buffer is checked between calls)
    _STREAM_CHUNK_EVENTS = 4_000_000

    def __init__(
        self,
        topology,
        workload,
        config: EngineConfig | None = None,
        *,
        controller=None,
        record_flows: bool | None = None,
        flows_path=None,
        sample_every=None,
        samples_path=None,
        rewrites="own",
        **settings,
    ):
        backend = settings.pop("backend", "packet")
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise SpecError(
                f"backend: unknown backend {backend!r} (allowed: {', '.join(map(repr, BACKENDS))})"
            )
        #: ``"packet"`` or ``"flow"``
        self.backend = backend
        engine_class = _engine.Engine if backend == "packet" else _engine.FlowEngine
        from .traces import Trace

        self.spec = _as_spec(topology)
        self.config = _make_config(config, settings)
        engine_config = self.config.to_engine(self.spec.routing)
        #: the routing the run uses: the config's ``ecmp``, else the fabric's own
        self.routing = self.config.ecmp if self.config.ecmp is not None else self.spec.routing
        self.trace: Trace | None = None
        self.flows: Flows | None = None
        #: the OCS reconfiguration (dark) time, ps
        self.t_ocs_ps = parse_time(self.config.t_ocs, name="t_ocs")
        self.controller = controller
        #: the rewrites this run applied (rfabric.rewrites.Rewritten), in order
        self.rewritten: list = []
        self._rewrite_label = None  # per op of the replayed trace: the rewrite that produced it
        self._private_rewrites: list[dict] = []
        if controller is not None:
            self._check_controller(controller, workload)
        workload = self._rewrite(topology, controller, workload, rewrites)
        if controller is not None:
            workload = self._prepare(controller, workload)
        if isinstance(workload, Trace):
            if workload.gpus is not None and workload.gpus > self.spec.num_gpus:
                raise SpecError(
                    f"the trace is for {workload.gpus} GPUs but {self.spec.name} has {self.spec.num_gpus}"
                )
            self.trace = workload
            self._engine = engine_class(self.spec.arrays(), engine_config)
            flow_args = (
                {
                    "ring_slices": int(self.config.flow_ring_slices),
                    "merge_channels": bool(self.config.flow_merge_channels),
                }
                if backend == "flow"
                else {}
            )
            self._engine.load_workload(
                workload.arrays(),
                int(self.config.coll_channels),
                parse_size(self.config.coll_chunk),
                None if self.spec.rings is None else self.spec.rings.astype(np.uint32),
                "none" if controller is None else getattr(controller, "granularity", "period"),
                controller is not None
                and bool(getattr(controller, "lookahead", False))
                and getattr(controller, "granularity", "period") == "period",
                nccl_model=bool(self.config.nccl_model),
                protocol=str(self.config.coll_protocol),
                **flow_args,
            )
        elif isinstance(workload, Flows):
            workload.check_gpus(self.spec.num_gpus, self.spec.name)
            self.flows = workload
            self._engine = engine_class(self.spec.arrays(), engine_config)
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
        self._flows_dir = None
        self._flow_parts = 0
        if flows_path is not None and backend == "flow":
            raise SpecError(
                "flows_path: streaming flows to Parquet is for the packet backend; the flow "
                "backend keeps its per-flow table in memory (record_flows=True)"
            )
        if flows_path is not None:
            self._flows_dir = _stream_dir(flows_path, "flows_path")
            record_flows = True
        elif record_flows is None:
            record_flows = self.flows is not None
        #: whether the run keeps a row per flow (in memory, or streamed to ``flows_path``)
        self.record_flows = boolean(record_flows, "record_flows")
        self._engine.record_flows = self.record_flows
        #: the sampling period (ps), None when off
        self.sample_every_ps = None
        if sample_every is not None:
            self.sample_every_ps = parse_time(sample_every, allow_zero=False, name="sample_every")
        self._samples: list[tuple[pa.Table, pa.Table]] = []
        self._samples_dir = None
        self._sample_parts = 0
        if samples_path is not None and self.sample_every_ps is None:
            raise SpecError("samples_path: give sample_every too (the period to sample at)")
        if self.sample_every_ps is not None:
            if backend != "packet":
                raise SpecError(
                    "sample_every: sampling queues and flow rates is for the packet backend "
                    "(the flow backend has no queues)"
                )
            self._engine.enable_sampling(self.sample_every_ps)
            self._port_rate_bps = self._engine.port_stats()["rate_bps"].astype(np.float64)
            if samples_path is not None:
                self._samples_dir = _stream_dir(samples_path, "samples_path")
                for sub in ("queues", "rates"):
                    (self._samples_dir / sub).mkdir()
        self.wall_s = 0.0
        self._plans = 0
        self._plan_periods: list[int] = []  # per plan id: the period a controller planned it for, or -1
        self._loop = None
        if controller is not None:
            from .controllers.loop import ControlLoop

            self._loop = ControlLoop(self, controller)
        # Link state changes scheduled so far, per link: [(at_ps, up)] in call order. A circuit
        # plan may not use an OCS port that is down at the plan's own time.
        self._link_changes: dict[int, list[tuple[int, bool]]] = {}

    def _check_controller(self, controller, workload):
        from .controllers.loop import GRANULARITIES, _name
        from .traces import Trace

        name = _name(controller)
        if not callable(getattr(controller, "plan", None)):
            raise SpecError(
                f"controller must be an rfabric.controllers.Controller (with plan(intent, view)), "
                f"got {type(controller).__name__}"
            )
        if not isinstance(workload, Trace):
            raise SpecError(
                f"controller {name}: a controller needs a trace workload (rfabric.traces.Trace) whose "
                f"periods it plans for, got {type(workload).__name__}"
            )
        granularity = getattr(controller, "granularity", "period")
        if granularity not in GRANULARITIES:
            raise SpecError(
                f"controller {name}: granularity must be one of {GRANULARITIES}, got {granularity!r}"
            )

    def _rewrite(self, topology, controller, workload, rewrites):
        """Apply the run's workload rewrites (docs/fairness.md): ``"own"`` the controller's
        (``controller.rewrites()``), ``"none"`` none, or the given list, each at the fabric's
        locality; then tell the controller which ran (``controller.adopt``)."""
        from .controllers.loop import _name
        from .rewrites import apply_rewrites, locality, resolve_rewrites
        from .traces import Trace

        mode = resolve_rewrites(rewrites)
        if mode == "none":
            rws = []
        elif mode == "own":
            rws = []
            ask = getattr(controller, "rewrites", None) if controller is not None else None
            if ask is not None:
                name = _name(controller)
                try:
                    got = ask()
                except SpecError:
                    raise
                except Exception as exc:
                    raise SpecError(
                        f"controller {name}: rewrites() raised {type(exc).__name__}: {exc}"
                    ) from exc
                rws = resolve_rewrites(got if got is not None else [], f"controller {name}: rewrites()")
                if isinstance(rws, str):
                    raise SpecError(
                        f"controller {name}: rewrites() must return a list of Rewrite, got {got!r}"
                    )
        else:
            rws = mode
        if rws and not isinstance(workload, Trace):
            raise SpecError(
                f"rewrites: {', '.join(r.key() for r in rws)} rewrite a trace's ops; the workload is "
                f"{type(workload).__name__} (pass rewrites='none')"
            )
        applied = []
        if rws:
            workload, applied, label = apply_rewrites(workload, rws, locality(topology))
            self._rewrite_label = label
        self.rewritten = applied
        adopt = getattr(controller, "adopt", None) if controller is not None else None
        if callable(adopt):
            try:
                adopt(applied, self.spec)
            except SpecError:
                raise
            except Exception as exc:
                raise SpecError(
                    f"controller {_name(controller)}: adopt() raised {type(exc).__name__}: {exc}"
                ) from exc
        return workload

    def _prepare(self, controller, workload):
        """The trace a controller's own ``prepare`` wants replayed (only when it overrides
        ``Controller.prepare``: the rewrites were applied already), checked and recorded as a
        private rewrite."""
        from .controllers.base import Controller
        from .controllers.loop import _name
        from .traces import Trace

        name = _name(controller)
        prepare = getattr(controller, "prepare", None)
        if prepare is None or getattr(prepare, "__func__", None) is Controller.prepare:
            return workload
        try:
            out = prepare(workload, self.spec)
        except SpecError:
            raise
        except Exception as exc:
            raise SpecError(f"controller {name}: prepare() raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(out, Trace):
            raise SpecError(f"controller {name}: prepare() returned {type(out).__name__}, expected a Trace")
        if out is not workload:
            label = _changed_ops(workload, out, f"{name}.prepare", self._rewrite_label)
            changed = int(sum(v == f"{name}.prepare" for v in label))
            self._rewrite_label = label
            self._private_rewrites.append(
                {
                    "rewrite": f"{name}.prepare",
                    "algorithm": "private to the controller (not offered to other fabrics)",
                    "params": {},
                    "ops_replaced": workload.num_ops - (out.num_ops - changed),
                    "ops_produced": changed,
                    "locality": None,
                }
            )
        return out

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
        link = integer(link, "link")
        if not 0 <= link < self.spec.num_links:
            raise SpecError(f"link {link} does not exist ({self.spec.name} has {self.spec.num_links} links)")
        up = boolean(up, "set_link_state: up")
        at_ps = parse_time(at, name="at")
        self._engine.set_link_state(link, at_ps, up)
        self._link_changes.setdefault(link, []).append((at_ps, up))

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
        at_ps = parse_time(at, name="at")
        self._check_plan(plan, at_ps, "apply_circuits")
        dark = parse_time(t_ocs if t_ocs is not None else self.config.t_ocs, name="t_ocs")
        self._engine.schedule_plan(
            at_ps,
            plan.ocs.astype(np.uint32),
            plan.a.astype(np.uint32),
            plan.b.astype(np.uint32),
            dark,
        )
        return self._new_plan_id(-1)

    def _check_plan(self, plan, at_ps: int, where: str) -> None:
        """SpecError (naming ``where`` and the first bad row) unless ``plan`` is a valid plan
        for this fabric that uses no OCS port down at ``at_ps`` (failed ports are masked)."""
        self.spec.validate_circuits(plan, where=where)
        down = [link for link in self._link_changes if self._link_down_at(link, at_ps)]
        bad = np.isin(plan.a, down) | np.isin(plan.b, down)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            masked = sorted(set(plan.a[bad].tolist() + plan.b[bad].tolist()) & set(down))
            raise SpecError(
                f"{where}: circuit {i} (device {plan.ocs[i]}, links {plan.a[i]}-{plan.b[i]}) uses failed "
                f"OCS port(s) on link(s) {masked} at {at_ps} ps; failed ports are masked from later plans"
            )

    def _new_plan_id(self, period: int) -> int:
        self._plans += 1
        self._plan_periods.append(period)
        return self._plans - 1

    def _apply_plan_now(self, plan, where: str, period: int) -> int:
        """Check ``plan`` as apply_circuits does and switch to it at once (the control
        loop's path: before any event already queued for this instant). On error nothing
        changes."""
        self._check_plan(plan, int(self._engine.now), where)
        try:
            self._engine.apply_plan(
                plan.ocs.astype(np.uint32), plan.a.astype(np.uint32), plan.b.astype(np.uint32), self.t_ocs_ps
            )
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
        return self._new_plan_id(period)

    def current_circuits(self):
        """The circuits in place now (lit or dark) as a CircuitTable."""
        from .spec import CircuitTable

        flat = self._engine.current_circuits().reshape(-1, 3).astype(np.int64)
        return CircuitTable.build(flat[:, 0], flat[:, 1], flat[:, 2])

    def delivered_bytes(self) -> np.ndarray:
        """Payload bytes delivered so far, per flow of a Flows workload (indexed by flow id).

        For a trace the packet engine's flow table holds only the flows alive, in reused
        slots: use ``results().ops`` (per-op ``delivered_bytes``) or ``engine.flow_log()``
        instead. (``backend="flow"``: the payload that has left the source, the fluid's
        progress; it arrives its path delay later.)"""
        return self._engine.delivered_bytes()

    def run(self, until=None, *, progress: bool = False, max_events: int = 0) -> Simulation:
        """Advance to simulated time ``until`` (unit string or ps), or until idle if None.

        With a controller, the engine stops at every boundary on the way, the controller
        plans, and the run goes on; ``max_events`` counts events across those stops.
        """
        limit = parse_time(until, name="until") if until is not None else np.iinfo(np.int64).max
        t0 = time.perf_counter()
        control0 = self._loop.wall_s if self._loop else 0.0
        try:
            if progress:
                self._run_with_progress(limit)
            else:
                left = int(max_events)  # 0: no limit; with a controller, counted across boundaries
                while True:
                    n = self._run_engine(limit, left)
                    if not self._boundary():
                        break
                    if left:
                        left -= n
                        if left <= 0:
                            break
        finally:
            # engine time only: the controller's own time is Results.run["controller_wall_s"]
            control = (self._loop.wall_s if self._loop else 0.0) - control0
            self.wall_s += time.perf_counter() - t0 - control
            self._take_samples()
        return self

    def _take_samples(self) -> None:
        """Move the engine's samples so far into Arrow tables (nothing when sampling is off)."""
        if self.sample_every_ps is None:
            return
        tables = build_sample_tables(self._engine.take_samples(), self._port_rate_bps, self.sample_every_ps)
        if self._samples_dir is None:
            self._samples.append(tables)
            return
        import pyarrow.parquet as pq

        if tables[0].num_rows or tables[1].num_rows:
            for sub, table in zip(("queues", "rates"), tables, strict=True):
                pq.write_table(table, self._samples_dir / sub / f"part-{self._sample_parts:05d}.parquet")
            self._sample_parts += 1

    def _run_engine(self, limit: int, max_events: int) -> int:
        """engine.run(limit, max_events); when streaming flows or samples, in chunks, writing
        out the finished flows' rows and the samples between them. Returns the events
        processed."""
        if self._flows_dir is None and self._samples_dir is None:
            return self._engine.run(limit, max_events)
        total = 0
        while True:
            step = self._STREAM_CHUNK_EVENTS
            if max_events:
                step = min(step, max_events - total)
            n = self._engine.run(limit, step)
            total += n
            if self._flows_dir is not None and self._engine.flow_log_rows >= self.FLOW_BATCH_ROWS:
                self._write_flow_part()
            self._take_samples()
            if n < step or (max_events and total >= max_events):
                return total
            if self._engine.idle or self._engine.now >= limit:
                return total
            if self._loop is not None and any(map(len, self._engine.boundary().values())):
                return total

    def _write_flow_part(self) -> None:
        """Write the rows the engine buffered as the next part file (none: nothing)."""
        if not self._engine.flow_log_rows:
            return
        import pyarrow.parquet as pq

        table = self._flow_table(self._engine.take_flow_log())
        pq.write_table(table, self._flows_dir / f"part-{self._flow_parts:05d}.parquet")
        self._flow_parts += 1

    def _flow_table(self, log: dict) -> pa.Table:
        """FLOW_SCHEMA rows from engine flow-log columns (op rows mapped to trace op_ids)."""
        op = log["op"]
        if self.trace is not None:
            ids = self.trace.table.column("op_id").to_numpy()
            op_id = np.where(op >= 0, ids[np.maximum(op, 0)], -1) if len(ids) else np.full(len(op), -1)
        else:
            op_id = np.full(len(op), -1, dtype=np.int64)
        return build_flow_table(log, op_id.astype(np.int64))

    def _boundary(self) -> bool:
        """At a pending control-loop boundary: call the controller, apply its plan, let the
        engine go on and return True. Otherwise False. On error the boundary stays pending."""
        if self._loop is None:
            return False
        b = self._engine.boundary()
        if not len(b["op"]) and not len(b["ended"]):
            return False
        self._loop.handle(b)
        self._engine.resume()
        return True

    def _run_with_progress(self, limit: int) -> None:
        total = len(self.flows) if self.flows is not None else self.trace.num_ops
        unit = "flows" if self.flows is not None else "ops"
        chunk = 2_000_000
        t0 = time.perf_counter()
        while True:
            n = self._run_engine(limit, chunk)
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
            if self._boundary():
                continue
            if n < chunk or self._engine.idle or self._engine.now >= limit:
                break
        sys.stderr.write("\n")

    def results(self) -> Results:
        if self.backend == "flow":
            return self._flow_results()
        c = self._engine.counters()
        flows_path = None
        if self._flows_dir is not None:
            import pyarrow.parquet as pq

            self._write_flow_part()
            alive = self._flow_table(self._engine.flow_log())  # (the buffer is empty now)
            path = self._flows_dir / "alive.parquet"
            if alive.num_rows:
                pq.write_table(alive, path)
            elif path.exists():
                path.unlink()
            flow_table = FLOW_SCHEMA.empty_table()
            flows_path = str(self._flows_dir)
        elif self.record_flows:
            flow_table = self._flow_table(self._engine.flow_log())
        else:
            flow_table = FLOW_SCHEMA.empty_table()
        run = self._run_keys(c, "packet")
        wall, sim_ps, makespan = run["wall_s"], run["sim_ps"], run["makespan_ps"]
        run |= {
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
            "packets_delivered": int(c["packets_delivered"]),
            "packet_hops_per_s": c["packet_hops"] / wall if wall > 0 else float("nan"),
        }
        # Nothing left to happen, yet frames are stranded in the fabric: held at a switch with no
        # route to their destination (a lossless fabric holds rather than drops), or queued
        # behind PAUSEs that will never lift (a cyclic buffer dependency).
        stranded = self._engine.idle and c["packets_in_flight"] > 0 and self._engine.lossless
        run["unroutable"] = bool(stranded and c["packets_held"] > 0)
        run["deadlock"] = bool(stranded and c["packets_in_flight"] > c["packets_held"])
        links = build_link_table(self._engine.port_stats(), self.spec, makespan if makespan > 0 else sim_ps)
        res = Results(flows=flow_table, links=links, run=run, flows_path=flows_path)
        if self.sample_every_ps is not None:
            self._take_samples()
        if self._samples_dir is not None:
            res.samples_path = str(self._samples_dir)
        elif self.sample_every_ps is not None:
            res.queue_samples = pa.concat_tables([q for q, _ in self._samples])
            res.rate_samples = pa.concat_tables([r for _, r in self._samples])
        return self._finish_results(res)

    def _finish_results(self, res: Results) -> Results:
        """The parts of Results both backends fill alike: circuits, controller, ops, stages."""
        run = res.run
        circuit_log = {k: np.asarray(v, dtype=np.int64) for k, v in self._engine.circuit_log().items()}
        periods = np.asarray(self._plan_periods, dtype=np.int64)
        circuit_log["period"] = periods[circuit_log["plan_id"]]
        res.circuits = pa.table(circuit_log, schema=CIRCUIT_SCHEMA)
        loop = self._loop
        run["controller"] = loop.name if loop else None
        run["controller_calls"] = loop.calls if loop else 0
        run["controller_ahead_calls"] = loop.ahead_calls if loop else 0
        run["controller_wall_s"] = loop.wall_s if loop else 0.0
        run["plan_changes"] = loop.changes if loop else 0
        run["rewrites"] = [r.summary() for r in self.rewritten] + list(self._private_rewrites)
        if self.trace is not None:
            res.ops, res.stages = build_op_tables(
                self.trace,
                self._engine.op_log(),
                self._engine.op_flow_stats() if self.backend == "packet" else self._flow_op_stats(),
                rewrite=self._rewrite_label,
            )
            end = res.ops["end_ps"].to_numpy()
            run["ops"] = len(end)
            run["ops_done"] = int(np.sum(end >= 0))
            run["makespan_ps"] = int(end.max()) if len(end) and np.all(end >= 0) else -1
        return res

    def _run_keys(self, c: dict, backend: str) -> dict:
        """The ``Results.run`` keys both backends fill alike, from the engine's counters."""
        sim_ps = int(self._engine.now) if self._engine.now < np.iinfo(np.int64).max else 0
        # the last flow's end, once every flow has finished
        all_done = c["flows_done"] == c["flows"] and c["flows"] > 0
        wall = self.wall_s
        return {
            "backend": backend,
            "transport": self.config.transport,
            "routing": self.routing,
            "events": int(c["events"]),
            "flows": int(c["flows"]),
            "flows_done": int(c["flows_done"]),
            "peak_live_flows": int(c["peak_live_flows"]),
            "flows_recorded": self.record_flows,
            "lossless": bool(self._engine.lossless),
            "header_bytes": int(self._engine.header_bytes),
            "wall_s": wall,
            "sim_ps": sim_ps,
            "makespan_ps": int(c["last_flow_end_ps"]) if all_done else -1,
            "seed": self.config.seed,
            "sample_every_ps": self.sample_every_ps,
            "events_per_s": c["events"] / wall if wall > 0 else float("nan"),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }

    def _flow_results(self) -> Results:
        """Results of the flow backend: the packet backend's tables and keys, with what only
        packets have (packets, hops, queues, drops, ECN marks, PFC pauses, retransmits) null,
        and the flow model's own counters added (README "Flow-level backend")."""
        c = self._engine.counters()
        run = self._run_keys(c, "flow")
        sim_ps, makespan = run["sim_ps"], run["makespan_ps"]
        run |= {
            # the flow model's own counters
            "recomputes": int(c["recomputes"]),
            "rate_updates": int(c["rate_updates"]),
            "subflows": int(c["subflows"]),
            "max_component": int(c["max_component"]),
            "component_subflows": int(c["component_subflows"]),
            "blocked_subflows": int(c["blocked"]),
            "reroutes": int(c["reroutes"]),
            "quiet_ends": int(c["quiet_ends"]),
            "handoffs": int(c["handoffs"]),
            # flows that can make no progress: their paths end at a failed link or dark circuit
            "unroutable": bool(self._engine.idle and c["blocked_now"] > 0),
        }
        for key in PACKET_ONLY_RUN_KEYS:
            run[key] = None
        links = build_link_table(self._engine.port_stats(), self.spec, makespan if makespan > 0 else sim_ps)
        flows = self._flow_table(self._engine.flow_log()) if self.record_flows else FLOW_SCHEMA.empty_table()
        res = Results(flows=flows, links=links, run=run)
        return self._finish_results(res)

    def _flow_op_stats(self) -> dict:
        """Per-op flow totals of the flow backend (``Engine.op_flow_stats`` of the packet
        engine), folded in C++ as each flow finishes: flows, delivered bytes and the longest
        FCT; retransmits, resent and dropped bytes are packet-only (null)."""
        n = self.trace.num_ops
        return {
            **self._engine.op_flow_stats(),
            **{k: pa.nulls(n, pa.int64()) for k in ("retransmits", "resent_bytes", "dropped_bytes")},
        }


def _stream_dir(path, name: str) -> pathlib.Path:
    """The directory rows are streamed to (argument ``name``): created, and without files in it."""
    try:
        d = pathlib.Path(path)
    except TypeError:
        raise SpecError(f"{name} must be a path, got {type(path).__name__}") from None
    if d.exists() and not d.is_dir():
        raise SpecError(f"{name}: {d} exists and is not a directory")
    if d.exists() and any(d.iterdir()):
        raise SpecError(f"{name}: directory {d} is not empty (Parquet parts are written there)")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _changed_ops(before, after, name: str, label) -> np.ndarray:
    """Per op of ``after``: ``name`` when no op of ``before`` has its stage, phase, kind,
    ranks, size and algorithm (counted as a multiset), else the label it had (or None)."""
    from collections import Counter

    def rows(t):
        tb = t.table
        cols = [tb[c].cast("string").to_pylist() for c in ("stage", "phase", "kind", "algorithm")]
        return [
            (a, b, c, d, tuple(r), int(z))
            for a, b, c, d, r, z in zip(
                *cols, tb["ranks"].to_pylist(), tb["size_bytes"].to_pylist(), strict=True
            )
        ]

    old = rows(before)
    where: dict[tuple, list[int]] = {}
    for i, r in enumerate(old):
        where.setdefault(r, []).append(i)
    left = Counter(old)
    out = np.full(after.num_ops, None, dtype=object)
    for j, r in enumerate(rows(after)):
        if left[r] > 0:
            i = where[r][len(where[r]) - left[r]]
            left[r] -= 1
            out[j] = label[i] if label is not None else None
        else:
            out[j] = name
    return out


def simulate(
    topology,
    workload,
    *,
    transport: str | None = None,
    backend: str = "packet",
    seed: int | None = None,
    mtu_bytes=None,
    progress: bool = False,
    until=None,
    config: EngineConfig | None = None,
    failures=(),
    controller=None,
    record_flows: bool | None = None,
    flows_path=None,
    sample_every=None,
    samples_path=None,
    rewrites="own",
    **settings,
) -> Results:
    """Simulate ``workload`` on ``topology`` and return Results.

    Parameters
    ----------
    topology : Topology or NetworkSpec
    workload : Flows or rfabric.traces.Trace
        Point-to-point flows, or a trace of collective ops (then ``Results.ops`` and
        ``Results.stages`` are filled).
    transport : str, optional
        ``"roce"`` or ``"dctcp"``; default the config's (EngineConfig: ``"roce"``).
    backend : str
        ``"packet"`` (default: every frame through queues, PFC and the transport) or
        ``"flow"`` (max-min fair rates over the same paths, collective executor and
        controllers; orders of magnitude fewer events; packet-only results are null: README
        "Flow-level backend" says what it models and how close it is).
    seed : int, optional
        Same seed, same results; default the config's (EngineConfig: 1).
    mtu_bytes : int or str, optional
        Frame size including headers; default the config's (EngineConfig: 9216).
    progress : bool
        Show a progress bar on stderr (flows done, simulated time, event rate).
    until : time, optional
        Stop at this simulated time instead of running to completion.
    config : EngineConfig, optional
        Base configuration. ``transport``, ``seed``, ``mtu_bytes`` and ``settings`` override
        its fields only when given; left out, the config's values stand.
    failures : iterable of (link, time)
        Failure schedule: link rows that go down at the given times (see
        ``Simulation.fail_link``; ``spec.nic_link(gpu)`` finds a GPU's NIC link).
    controller : rfabric.controllers.Controller, optional
        Circuit controller called at each communication-period boundary (see Simulation).
    record_flows : bool, optional
        Keep the per-flow table ``Results.flows``: default True for Flows, False for a trace
        (see Simulation).
    flows_path : str or path, optional
        Stream the per-flow rows to Parquet files in this directory instead (see Simulation).
    sample_every : time, optional
        Sample queues and flow goodputs at every multiple of this period (``"10us"``; packet
        backend; off by default): ``Results.queue_samples`` and ``Results.rate_samples``.
    samples_path : str or path, optional
        Stream those samples to Parquet files in this directory instead (see Simulation).
    rewrites : "own", "none" or list of rfabric.rewrites.Rewrite
        Workload rewrites applied to a trace before the run, at the fabric's locality (see
        Simulation; docs/fairness.md).
    """
    given = {"transport": transport, "seed": seed, "mtu_bytes": mtu_bytes}
    settings.update({k: v for k, v in given.items() if v is not None})
    sim = Simulation(
        topology,
        workload,
        config,
        controller=controller,
        backend=backend,
        record_flows=record_flows,
        flows_path=flows_path,
        sample_every=sample_every,
        samples_path=samples_path,
        rewrites=rewrites,
        **settings,
    )
    try:
        items = list(failures)
    except TypeError:
        raise SpecError(f"failures: expected an iterable of (link, time) pairs, got {failures!r}") from None
    for item in items:
        try:
            link, at = item
        except (TypeError, ValueError):
            raise SpecError(f"failures: expected (link, time) pairs, got {item!r}") from None
        sim.fail_link(link, at)
    sim.run(until, progress=progress)
    return sim.results()
