"""The Simulation class: a run that can be advanced in epochs (setup and state).

Its methods come from one mixin per concern: ``circuits.py`` (failures and circuit plans),
``stepping.py`` (``run``), ``streams.py`` (rows and samples out of the engine) and
``collect.py`` (``results()``); ``setup.py`` prepares the workload and ``rfabric/config.py`` holds
the engine settings.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import _engine
from ..config import BACKENDS, EngineConfig, as_spec, make_config
from ..errors import SpecError
from ..flows import Flows
from ..jobs import JobInfo, as_jobs, check_pool_types, compose, single_job_infos
from ..units import parse_size, parse_time
from ..validators import boolean
from .circuits import CircuitsAndFailures
from .collect import ResultsAssembly
from .setup import check_controller, prepare_workload, rewrite_workload
from .stepping import Stepping
from .streams import Streams, stream_dir

__all__ = ["Simulation"]


class Simulation(CircuitsAndFailures, Stepping, Streams, ResultsAssembly):
    """A simulation (packet-level, or flow-level with ``backend="flow"``) that can be
    advanced in epochs.

    ``run(until=t)`` runs the C++ loop (GIL released) to simulated time ``t``; between
    epochs Python may read counters (``delivered_bytes()``), change link states, and so on.
    ``results()`` returns the tables at any point.

    Parameters
    ----------
    topology : Topology or NetworkSpec
    workload : Flows, rfabric.traces.Trace, rfabric.Job or list of Job
        Plain point-to-point flows, or a trace of collective ops replayed by the engine's
        collective executor (ops start when their dependencies end plus their compute gap),
        or jobs: workloads placed on GPUs from a start time, composed into one
        (``rfabric.jobs.compose``); every result table then says which job each row is
        (``Results.jobs`` has a row per job).
    config : EngineConfig, optional
    controller : rfabric.controllers.Controller, optional
        Circuit controller called at each communication-period boundary of a trace workload
        (docs/tutorials/own-controller.md): its workload rewrites are applied (``rewrites``), then ``run()`` stops in C++ whenever an op of a new period becomes ready,
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
        ``"packet"`` (default: every frame through queues, PFC and the transport) or
        ``"flow"`` (max-min fair rates over the same paths; see ``simulate``).
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
        backend: str = "packet",
        **settings,
    ):
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise SpecError(
                f"backend: unknown backend {backend!r} (allowed: {', '.join(map(repr, BACKENDS))})"
            )
        #: ``"packet"`` or ``"flow"``
        self.backend = backend
        from ..traces import Trace

        self.spec = as_spec(topology)
        self.config = make_config(config, settings)
        engine_config = self.config.to_engine(self.spec.routing)
        if self.config.flow_model != "max-min" and backend != "flow":
            raise SpecError(f"flow_model={self.config.flow_model!r} is a setting of backend='flow'")
        #: the flow backend's model ("max-min" or "dynamic"; None for packets)
        self.flow_model = self.config.flow_model if backend == "flow" else None
        engine_class = (
            _engine.Engine
            if backend == "packet"
            else _engine.FluidEngine
            if self.flow_model == "dynamic"
            else _engine.FlowEngine
        )
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
        jobs = as_jobs(workload)
        #: the run's jobs (rfabric.jobs.JobInfo), one per job name, in order
        self.job_infos: list[JobInfo]
        self._flow_job = None  # per flow of a Flows workload: its job's index
        if jobs is not None:
            workload, self.job_infos, self._flow_job = compose(
                jobs, self.spec.num_gpus, self.spec.name, self.spec.gpu_types
            )
        else:
            self.job_infos = single_job_infos(workload)
            if isinstance(workload, Trace):
                check_pool_types(workload, np.arange(self.spec.num_gpus), self.spec.gpu_types, "trace")
        if controller is not None:
            check_controller(controller, workload)
        workload, self.rewritten, self._rewrite_label = rewrite_workload(
            topology, self.spec, controller, workload, rewrites
        )
        if controller is not None:
            workload, self._rewrite_label, self._private_rewrites = prepare_workload(
                controller, workload, self.spec, self._rewrite_label
            )
        if isinstance(workload, Trace):
            if workload.gpus is not None and workload.gpus > self.spec.num_gpus:
                raise SpecError(
                    f"the trace is for {workload.gpus} GPUs but {self.spec.name} has {self.spec.num_gpus}"
                )
            self.trace = workload
            self._engine = engine_class(self.spec.arrays(), engine_config)
            self._set_fluid_step()
            flow_args = (
                {
                    "ring_slices": int(self.config.flow_ring_slices),
                    "pipeline_slices": int(self.config.flow_pipeline_slices),
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
                and bool(getattr(controller, "lookahead", False) or getattr(controller, "replan", False))
                and getattr(controller, "granularity", "period") == "period",
                nccl_model=bool(self.config.nccl_model),
                protocol=str(self.config.coll_protocol),
                **flow_args,
            )
        elif isinstance(workload, Flows):
            workload.check_gpus(self.spec.num_gpus, self.spec.name)
            self.flows = workload
            self._engine = engine_class(self.spec.arrays(), engine_config)
            self._set_fluid_step()
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
            self._flows_dir = stream_dir(flows_path, "flows_path")
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
                self._samples_dir = stream_dir(samples_path, "samples_path")
                for sub in ("queues", "rates"):
                    (self._samples_dir / sub).mkdir()
        self.wall_s = 0.0
        self._plans = 0
        self._plan_periods: list[int] = []  # per plan id: the period a controller planned it for, or -1
        self._plan_jobs: list[str | None] = []  # per plan id: that period's job, or None
        self._loop = None
        if controller is not None:
            from ..controllers.loop import ControlLoop

            self._loop = ControlLoop(self, controller)
        # Link state changes scheduled so far, per link: [(at_ps, up)] in call order. A circuit
        # plan may not use an OCS port that is down at the plan's own time.
        self._link_changes: dict[int, list[tuple[int, bool]]] = {}
        self._link_change_log: list[tuple[int, int, bool]] = []  # (at_ps, link, up) in call order

    def _set_fluid_step(self) -> None:
        """The dynamic fluid's step (EngineConfig.flow_step), before anything runs."""
        if self.flow_model == "dynamic":
            self._engine.set_step(parse_time(self.config.flow_step, allow_zero=False, name="flow_step"))

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
        """The compiled engine handle (``rfabric._engine.Engine``; ``FlowEngine`` with
        ``backend="flow"``, ``FluidEngine`` with ``flow_model="dynamic"``): its dry runs (``op_flows``, ``start_bounds``) and counters."""
        return self._engine

    def delivered_bytes(self) -> np.ndarray:
        """Payload bytes delivered so far, per flow of a Flows workload (indexed by flow id).

        For a trace the packet engine's flow table holds only the flows alive, in reused
        slots: use ``results().ops`` (per-op ``delivered_bytes``) or ``engine.flow_log()``
        instead. (``backend="flow"``: the payload that has left the source, the fluid's
        progress; it arrives its path delay later.)"""
        return self._engine.delivered_bytes()
