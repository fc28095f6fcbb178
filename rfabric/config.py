"""Engine settings: :class:`EngineConfig`, built from the engine's own list of fields (the run
layer's configuration; rfabric.forwarding and rfabric.simulation read it, and it imports
neither, nor the topologies or controllers).

The one list of the engine's settings and their defaults is ``RF_ENGINE_CONFIG_FIELDS`` in
csrc/fabric/spec.hpp (each documented there with its source); this module reads it
(``ENGINE_FIELDS``), gives each a Python field taking unit strings, and converts a config to
the engine's base units (:meth:`EngineConfig.to_engine`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import _engine
from .errors import SpecError
from .spec import ROUTING_MODES, NetworkSpec
from .units import format_time, parse_rate, parse_size, parse_time
from .validators import boolean, integer, known_keys

__all__ = [
    "EngineConfig",
    "ENGINE_FIELDS",
    "BACKENDS",
    "FLOW_MODELS",
    "ECMP_MODES",
    "PYTHON_ONLY",
    "as_spec",
    "make_config",
]

#: ``"packet"``: every frame through queues and transports; ``"flow"``: max-min fair rates over
#: the same paths (csrc/flow/flow_network.hpp; docs/explanation/flow-backend.md).
BACKENDS = ("packet", "flow")
#: ``backend="flow"``'s models (EngineConfig.flow_model): ``"max-min"`` (default): max-min fair
#: rates, event-driven; ``"dynamic"``: a time-stepped fluid with queues, PFC and DCQCN
#: (csrc/flow/fluid_network.hpp; docs/explanation/flow-dynamic.md).
FLOW_MODELS = ("max-min", "dynamic")
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
    "flow_pipeline_slices",
    "flow_merge_channels",
    "flow_model",
    "flow_step",
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
    dcqcn_timer, dcqcn_byte_counter, dcqcn_g, dcqcn_rai, dcqcn_rhai, dcqcn_min_rate,
    dcqcn_cnp_interval, dcqcn_f, dctcp_g, dctcp_init_cwnd_packets, dctcp_min_rto,
    dctcp_max_timeouts : time, rate, size or number
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
        large slices as with many small ones, and makes far fewer flows (docs/explanation/flow-backend.md
        has the validation).
    flow_pipeline_slices : int
        ``backend="flow"`` only: the most pieces the chunks of a pipelined tree or chain
        (tree all-reduce, chain and tree broadcast) between its first and last chunk are run
        as (default 4; 0: a flow per chunk, as the packet engine). The middle pieces stream,
        each leaving a node one piece behind its arrival, so the pipeline keeps its chunks'
        fill and tail; over an NVLink hop a piece keeps the SMs' copy pace, and a pipeline
        with NVLink hops in a row keeps a flow per chunk (docs/explanation/flow-backend.md
        has the rule and its validation).
    flow_merge_channels : bool
        ``backend="flow"`` only: run the channels of a ring collective whose rings have the
        same edges and the same paths (an NVLink ring inside a server) as one flow of n
        copies per message (default True). Exact in the fluid model, where flows on the same
        paths share them alike; n times fewer flows and events. False: a flow per channel.
        (The dynamic model runs a flow per channel.)
    flow_model : str
        ``backend="flow"`` only: ``"max-min"`` (default: max-min fair rates, event-driven) or
        ``"dynamic"`` (a time-stepped fluid with per-hop queues, PFC back-pressure, ECN and
        DCQCN, jumping from event to event while nothing is transient; transport ``"roce"``
        only; docs/explanation/flow-dynamic.md).
    flow_step : time
        ``flow_model="dynamic"`` only: the time step while anything is transient (default 1 us).
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
    flow_pipeline_slices: int = 4  # backend="flow": most streamed pieces per pipeline (0: per chunk)
    flow_merge_channels: bool = True  # backend="flow": channels with the same ring and paths as one flow
    flow_model: str = "max-min"  # backend="flow": "max-min" or "dynamic" (queues, PFC, DCQCN)
    flow_step: object = "1us"  # flow_model="dynamic": the step while anything is transient

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
        integer(self.flow_pipeline_slices, "flow_pipeline_slices", lo=0, hi=1 << 30)
        boolean(self.flow_merge_channels, "flow_merge_channels")
        if not isinstance(self.flow_model, str) or self.flow_model not in FLOW_MODELS:
            raise SpecError(
                f"flow_model must be one of {', '.join(map(repr, FLOW_MODELS))}, got {self.flow_model!r}"
            )
        parse_time(self.flow_step, allow_zero=False, name="flow_step")
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


def as_spec(topology) -> NetworkSpec:
    """The NetworkSpec of a Topology (``to_spec()``), or ``topology`` itself if it is one."""
    if isinstance(topology, NetworkSpec):
        return topology
    # a Topology (rfabric.topologies.base), known by its to_spec: this module stays below the
    # topology package, which imports the controllers, which import rfabric.forwarding
    to_spec = getattr(type(topology), "to_spec", None)
    if callable(to_spec):
        spec = topology.to_spec()
        if isinstance(spec, NetworkSpec):
            return spec
    raise SpecError(f"expected a Topology or NetworkSpec, got {type(topology).__name__}")


def make_config(config: EngineConfig | None, overrides: dict) -> EngineConfig:
    """``config`` (default: ``EngineConfig()``) with the fields in ``overrides`` replaced;
    an unknown field is refused by name with the closest one."""
    base = config or EngineConfig()
    known_keys(
        overrides,
        [f.name for f in dataclasses.fields(EngineConfig)],
        "rfabric.EngineConfig",
        "engine setting",
    )
    return dataclasses.replace(base, **overrides)
