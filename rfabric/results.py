"""Results of a run: documented Arrow tables and a run summary.

Result schemas are part of the API; ``FLOW_SCHEMA`` and ``LINK_SCHEMA`` below list every
column with its unit (suffixes: ``_ps`` picoseconds, ``_bytes`` bytes, ``_bps`` bit/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from . import _engine

__all__ = [
    "Results",
    "register_view",
    "FLOW_SCHEMA",
    "LINK_SCHEMA",
    "OP_SCHEMA",
    "STAGE_SCHEMA",
    "JOB_SCHEMA",
    "CIRCUIT_SCHEMA",
    "LINK_CHANGE_SCHEMA",
    "SWEEP_SCHEMA",
    "QUEUE_SAMPLE_SCHEMA",
    "RATE_SAMPLE_SCHEMA",
    "RUN_KEYS",
    "PACKET_ONLY_RUN_KEYS",
    "BUSBW_FACTOR",
]

FLOW_SCHEMA = pa.schema(
    [
        ("flow_id", pa.int64()),  # row in the input flow set
        ("op_id", pa.int64()),  # collective op the flow belongs to; -1 for plain flows
        ("src", pa.int32()),  # source GPU id
        ("dst", pa.int32()),  # destination GPU id
        ("size_bytes", pa.int64()),  # message bytes (payload, headers excluded)
        ("start_ps", pa.int64()),  # when the flow was released to its NIC
        ("end_ps", pa.int64()),  # when its last byte reached dst; -1 if it did not finish
        ("fct_ps", pa.int64()),  # end_ps - start_ps; -1 if it did not finish
        # a lone flow's time on its idle path, frame by frame as the packet engine moves it
        # (Forwarding::lone_packet_fct_ps: store-and-forward at every hop, propagation and
        # node latencies), on both backends
        ("ideal_fct_ps", pa.int64()),
        # fct_ps / ideal_fct_ps (dimensionless; >= 1 on one path, multi-path routing can beat
        # it: docs/reference/results-flows.md); null if unfinished or without a path now
        ("slowdown", pa.float64()),
        ("delivered_bytes", pa.int64()),  # payload bytes received by dst
        ("retransmits", pa.int64()),  # data packets sent more than once
        ("job", pa.string()),  # the job the flow belongs to (rf.Job; "job0" for a run without jobs)
    ]
)

LINK_SCHEMA = pa.schema(
    [
        ("link_id", pa.int64()),  # row of the topology's link table
        ("direction", pa.int8()),  # 0: link src -> dst, 1: dst -> src
        ("kind", pa.string()),  # the link's kind label (nic, nvlink, tor-agg, ...)
        ("src", pa.int64()),  # sending node
        ("dst", pa.int64()),  # receiving node
        ("src_name", pa.string()),
        ("dst_name", pa.string()),
        ("rate_bps", pa.int64()),
        ("bytes", pa.int64()),  # bytes put on the wire, headers included
        ("packets", pa.int64()),
        ("busy_ps", pa.int64()),  # time spent serializing
        ("utilization", pa.float64()),  # busy_ps / run sim_ps
        ("max_queue_bytes", pa.int64()),  # largest egress queue seen (excludes the frame in service)
        ("max_ingress_bytes", pa.int64()),  # largest PFC ingress occupancy at the receiving switch
        ("buffer_bytes", pa.int64()),  # per-port buffer
        ("drops", pa.int64()),
        ("ecn_marks", pa.int64()),
        ("pfc_pauses", pa.int64()),  # PAUSE frames the receiving end sent back over this direction
    ]
)

OP_SCHEMA = pa.schema(
    [
        ("op_id", pa.int64()),
        ("iteration", pa.int32()),
        ("stage", pa.string()),
        ("phase", pa.string()),
        ("kind", pa.string()),
        ("algorithm", pa.string()),  # the one that ran ("auto" resolved; as written if it never started)
        ("requested", pa.string()),  # as written in the trace ("auto": the tuner's choice)
        ("protocol", pa.string()),  # NCCL protocol that ran: ll, ll128, simple; null: none modelled
        ("channels", pa.int32()),  # channels its programs used; null if it never started
        ("size_bytes", pa.int64()),  # nccl-tests size convention (traces/README.md)
        ("n_ranks", pa.int32()),
        ("period", pa.int32()),
        ("start_ps", pa.int64()),  # when its first flow was released (after deps + compute gap); -1 if never
        ("end_ps", pa.int64()),  # when its last flow finished; -1 if it did not finish
        ("time_ps", pa.int64()),  # end_ps - start_ps; -1 if it did not finish
        ("algbw_GBps", pa.float64()),  # size_bytes / time, GB/s = 1e9 bytes/s (nccl-tests)
        ("busbw_GBps", pa.float64()),  # algbw x BUSBW_FACTOR[kind](n) (nccl-tests)
        # totals of the op's flows, folded in as each flow retires (no per-flow table needed)
        ("flows", pa.int64()),  # flows the op's algorithm created
        ("retransmits", pa.int64()),  # data packets sent more than once
        ("delivered_bytes", pa.int64()),  # payload received (first copies)
        ("resent_bytes", pa.int64()),  # payload sent again
        ("dropped_bytes", pa.int64()),  # payload lost in the fabric
        ("max_fct_ps", pa.int64()),  # its longest flow (end - start); -1 if none finished
        # the workload rewrite that produced the op (rfabric.rewrites, docs/fairness.md), e.g.
        # "weight_sync_forest"; null: the op as the trace had it
        ("rewrite", pa.string()),
        ("job", pa.string()),  # the job the op belongs to (rf.Job; "job0" for a run without jobs)
    ]
)

STAGE_SCHEMA = pa.schema(
    [
        ("job", pa.string()),  # as OP_SCHEMA's job: each job's stages are its own rows
        ("iteration", pa.int32()),
        ("stage", pa.string()),
        ("ops", pa.int64()),
        ("start_ps", pa.int64()),  # first op start of the stage in that iteration
        ("end_ps", pa.int64()),  # last op end; -1 if any op did not finish
        # time with at least one of the stage's ops in flight, its compute included (the union
        # of the ops' spans, each from the start of the compute before it); -1 if any op did
        # not finish
        ("busy_ps", pa.int64()),
        # the part of busy_ps when no op of another (iteration, stage) of the same job is in
        # flight: these do not overlap, so a job's add up to at most its span; -1 if any op did
        # not finish
        ("exclusive_ps", pa.int64()),
    ]
)

#: One row per job of a run (``rf.Job``; a run without jobs is one job, ``"job0"``, or the
#: jobs its trace's ``job`` column names), in the order given.
JOB_SCHEMA = pa.schema(
    [
        ("job", pa.string()),  # its name
        ("gpus", pa.list_(pa.int32())),  # the fabric's GPU ids it runs on (rank r on gpus[r])
        ("n_gpus", pa.int32()),
        ("start_ps", pa.int64()),  # when it was placed to start (rf.Job's start)
        ("first_start_ps", pa.int64()),  # its first op's (flow's) start; -1 if none started
        ("end_ps", pa.int64()),  # its last op's (flow's) end; -1 if any did not finish
        ("iterations", pa.int64()),  # distinct iterations of its ops (1 for flows)
        # (end_ps - start_ps) / iterations, rounded to the nearest ps; -1 if unfinished
        ("iteration_time_ps", pa.int64()),
        ("throughput_iter_per_s", pa.float64()),  # iterations per simulated second; NaN if unfinished
        ("ops", pa.int64()),  # its trace ops (0 for a Flows job)
        ("ops_done", pa.int64()),
        ("flows", pa.int64()),  # its flows (of its ops, for a trace)
        ("complete", pa.bool_()),  # every op (flow) finished
    ]
)

CIRCUIT_SCHEMA = pa.schema(
    [
        ("time_ps", pa.int64()),  # when the plan was applied: removed circuits go dark
        ("plan_id", pa.int64()),  # order in which plans were given (apply_circuits or a controller)
        ("added", pa.int64()),  # circuits in the new plan and not in the old
        ("removed", pa.int64()),  # circuits in the old plan and not in the new
        ("dark_ps", pa.int64()),  # added circuits carry light from time_ps + dark_ps
        ("period", pa.int64()),  # trace period a controller planned it for; -1: Simulation.apply_circuits
        # the job of that period (the trace's job column; "job0" without one); null: apply_circuits
        ("job", pa.string()),
    ]
)

#: One row per link state change scheduled on the run (``set_link_state``, ``fail_link``,
#: ``fail_nic``), by time (equal times in the order they were scheduled); one after the run's
#: end (``Results.run["sim_ps"]``) had not happened when the run stopped.
LINK_CHANGE_SCHEMA = pa.schema(
    [
        ("time_ps", pa.int64()),  # when the link goes down or up (both directions)
        ("link_id", pa.int64()),  # row of the topology's link table
        ("up", pa.bool_()),  # False: taken down; True: brought back up
    ]
)

#: ``sample_every``: one row per (sample time, link direction) whose egress queue was not empty
#: at the sample or that sent in the window ending there (packet backend).
QUEUE_SAMPLE_SCHEMA = pa.schema(
    [
        ("time_ps", pa.int64()),  # sample time: a multiple of the period
        ("link_id", pa.int64()),  # row of the topology's link table
        ("direction", pa.int8()),  # 0: link src -> dst, 1: dst -> src (as LINK_SCHEMA)
        ("queue_bytes", pa.int64()),  # egress queue at the sample (excludes the frame in service)
        # wire bytes of the frames that started serializing in the window (period) ending at
        # the sample: one frame may run on into the next window
        ("tx_bytes", pa.int64()),
        # tx_bytes x 8 / (rate_bps x period): the window's share busy (may exceed 1 by a frame)
        ("utilization", pa.float64()),
    ]
)

#: ``sample_every``: one row per (sample time, flow) alive at the sample that received payload
#: in the window ending there (packet backend).
RATE_SAMPLE_SCHEMA = pa.schema(
    [
        ("time_ps", pa.int64()),  # sample time: a multiple of the period
        ("flow_id", pa.int64()),  # as FLOW_SCHEMA's flow_id
        ("delivered_bytes", pa.int64()),  # payload first received by dst in the window
        ("rate_bps", pa.float64()),  # delivered_bytes x 8 / period: the flow's goodput, bit/s
    ]
)

#: One row per sweep point (``rf.sweep``). Simulated times in integer picoseconds (``_ps``), as
#: in every other table; money in US dollars (``_usd``); rates per second of simulated time
#: (``_per_s``). ``wall_s`` and ``controller_wall_s`` are host wall-clock seconds (a
#: measurement of the machine, not of the simulation: float seconds, as ``Results.run``'s). A
#: point whose workload did not finish has ``complete`` false, null times and NaN rates.
SWEEP_SCHEMA = pa.schema(
    [
        ("point", pa.int64()),  # index in the grid (fabric, link, gpus, workload; last fastest)
        ("config_id", pa.string()),  # hash of everything that determines the row (resume key)
        ("fabric", pa.string()),  # the fabric's label in the sweep ("FT", "FT-OS", ...)
        ("family", pa.string()),  # Topology.family
        ("topology", pa.string()),  # Topology.name
        ("link_speed", pa.string()),  # e.g. "200Gbps"
        ("link_bps", pa.int64()),
        ("gpus", pa.int64()),
        ("workload", pa.string()),  # the workload's label
        ("controller", pa.string()),  # controller class or name; "none" without one
        ("rewrite_rule", pa.string()),  # the sweep's rewrites= rule: offered, none, own, given
        # workload rewrites that ran, "name(params): N ops -> M, locality; ..." or "none"
        ("rewrites", pa.string()),
        ("seed", pa.int64()),  # engine seed, derived from the sweep seed and the point
        ("workload_seed", pa.int64()),  # seed of a generated workload (sweep seed, workload, gpus)
        ("network_cost_usd", pa.float64()),  # rf.cost.network_cost
        ("cluster_cost_usd", pa.float64()),  # network + GPUs; null without a GPU price
        ("complete", pa.bool_()),  # every flow / op finished
        ("makespan_ps", pa.int64()),  # simulated time from 0 to the last flow's or op's end
        ("iterations", pa.int64()),  # RL iterations in the trace; 1 for a flow set
        ("iteration_time_ps", pa.int64()),  # makespan_ps / iterations, rounded to the nearest ps
        ("throughput_iter_per_s", pa.float64()),  # iterations / makespan (per simulated second)
        ("samples_per_s", pa.float64()),  # global_batch x iterations / makespan; null if unknown
        ("throughput_per_musd", pa.float64()),  # throughput_iter_per_s per million USD of network
        ("stage_gen_ps", pa.int64()),  # per stage: sum over iterations of first start to last end
        ("stage_response_stream_ps", pa.int64()),
        ("stage_train_ps", pa.int64()),
        ("stage_weight_sync_ps", pa.int64()),
        ("stage_ps", pa.map_(pa.string(), pa.int64())),  # every stage of the trace, by name
        ("events", pa.int64()),  # engine counters (Results.run)
        ("packets", pa.int64()),
        ("packet_hops", pa.int64()),
        ("drops", pa.int64()),
        ("ecn_marks", pa.int64()),
        ("pfc_pauses", pa.int64()),
        ("flows", pa.int64()),
        ("flows_done", pa.int64()),
        ("sim_ps", pa.int64()),
        ("ops", pa.int64()),  # trace ops replayed and finished (0 for a flow set)
        ("ops_done", pa.int64()),
        ("deadlock", pa.bool_()),
        ("controller_calls", pa.int64()),  # period boundaries at which the controller was asked
        ("plan_changes", pa.int64()),  # circuit plans it returned that changed the fabric
        ("controller_wall_s", pa.float64()),  # wall-clock seconds inside the controller
        # one entry per job of the point (Results.jobs): a workload without jobs is one, "job0"
        (
            "jobs",
            pa.list_(
                pa.struct(
                    [
                        ("job", pa.string()),
                        ("n_gpus", pa.int32()),
                        ("start_ps", pa.int64()),
                        ("end_ps", pa.int64()),  # -1 if it did not finish
                        ("iterations", pa.int64()),
                        ("iteration_time_ps", pa.int64()),  # -1 if it did not finish
                        ("throughput_iter_per_s", pa.float64()),
                    ]
                )
            ),
        ),
        ("wall_s", pa.float64()),  # wall-clock seconds for the point (build, price, simulate)
        # resident high-water mark (bytes) of the point's process while it ran (sweeps.memory)
        ("peak_rss_bytes", pa.int64()),
    ]
)

#: Sweep columns that measure the host, not the simulation (they differ run to run).
SWEEP_HOST_COLUMNS = ("wall_s", "controller_wall_s", "peak_rss_bytes")

#: nccl-tests bus-bandwidth factors, as functions of the rank count n
BUSBW_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send": lambda n: 1.0,
    "m2n": lambda n: 1.0,
}

#: keys always present in Results.run
RUN_KEYS = (
    "backend",
    "transport",
    "events",
    "packets",
    "packet_hops",
    "drops",
    "ecn_marks",
    "pfc_pauses",
    "flows",
    "flows_done",
    "wall_s",
    "sim_ps",
    "makespan_ps",
    "seed",
    "events_per_s",
    "packet_hops_per_s",
)


#: Results.run keys only the packet backend counts; None under ``backend="flow"``, which has
#: no packets, queues, losses, ECN or PFC. Its own counters are ``recomputes`` (max-min
#: recomputations), ``rate_updates``, ``subflows``, ``max_component``, ``component_subflows``,
#: ``blocked_subflows``, ``reroutes``, ``quiet_ends`` and ``handoffs`` (docs/explanation/flow-backend.md).
PACKET_ONLY_RUN_KEYS = (
    "packets",
    "packet_hops",
    "packets_delivered",
    "packets_in_flight",
    "packets_held",
    "drops",
    "no_route_drops",
    "link_down_drops",
    "circuit_drops",
    "circuit_reroutes",
    "held",
    "dark_transmits",
    "busy_starts",
    "ecn_marks",
    "pfc_pauses",
    "packet_hops_per_s",
    "deadlock",
)
#: FLOW_SCHEMA / LINK_SCHEMA columns null under ``backend="flow"`` (packet-only).
PACKET_ONLY_FLOW_COLUMNS = ("retransmits",)
PACKET_ONLY_LINK_COLUMNS = (
    "packets",
    "max_queue_bytes",
    "max_ingress_bytes",
    "drops",
    "ecn_marks",
    "pfc_pauses",
)


@dataclass
class Results:
    """What a simulation returns.

    Attributes
    ----------
    flows : pyarrow.Table
        One row per flow (``FLOW_SCHEMA``), sorted by ``flow_id``, when the run recorded flows:
        by default for a Flows workload; for a trace only with ``record_flows=True`` (its
        results are per op and per stage). Empty otherwise, and when the rows were streamed
        to Parquet (``flows_path``).
    links : pyarrow.Table
        One row per link direction (``LINK_SCHEMA``).
    ops : pyarrow.Table
        One row per collective op of a trace workload (``OP_SCHEMA``); empty for plain flows.
    stages : pyarrow.Table
        Per (job, iteration, stage): first start and last end (``STAGE_SCHEMA``); empty for flows.
    circuits : pyarrow.Table
        Every applied circuit change (``CIRCUIT_SCHEMA``).
    link_changes : pyarrow.Table
        Every link failure and repair scheduled on the run (``LINK_CHANGE_SCHEMA``).
    jobs : pyarrow.Table
        One row per job (``JOB_SCHEMA``): its GPUs, start, end, iterations, iteration time
        and throughput. A run without jobs is one job, ``"job0"``. Empty for a Flows run
        that kept no flow rows (``record_flows=False`` or ``flows_path``).
    op_ranks : pyarrow.ChunkedArray or None
        The GPUs of each op, row for row with ``ops`` (the trace's ``ranks`` column, a list
        of GPU ids per op; None for plain flows): per-GPU views such as the timeline use it.
    queue_samples, rate_samples : pyarrow.Table
        With ``sample_every``: queue depth and traffic per link direction
        (``QUEUE_SAMPLE_SCHEMA``) and goodput per flow (``RATE_SAMPLE_SCHEMA``) at every
        multiple of the period. Empty without sampling, and when the samples were streamed
        to Parquet (``samples_path``).
    samples_path : str or None
        The directory the samples were streamed to (``samples_path=``): its ``queues`` and
        ``rates`` folders read back with ``pyarrow.parquet.read_table``.
    flows_path : str or None
        The directory the per-flow rows were streamed to (``flows_path=``): read them with
        ``pyarrow.parquet.read_table(res.flows_path)``.
    plot : rfabric.plot.ResultPlots
        The run's plots: ``res.plot.fct_cdf()``, ``link_utilization()``, ``stage_timeline()``;
        each returns a matplotlib Figure (a view registered by rfabric.plot, which depends on
        this module, not the reverse: ``register_view``).
    run : dict
        Run summary: ``backend``, ``transport``, ``events``, ``packets``, ``packet_hops``
        (packets leaving a link), ``drops``, ``ecn_marks``, ``pfc_pauses``, ``flows``,
        ``flows_done``, ``peak_live_flows`` (the most flows alive at once: the size of the
        engine's per-flow table), ``flows_recorded``, ``wall_s`` (engine wall time, s), ``sim_ps`` (engine clock at the
        end), ``makespan_ps`` (last flow end), ``seed``, ``events_per_s``, ``packet_hops_per_s``,
        ``deadlock`` (True when the run ended with frames stuck behind PFC pauses that can
        never lift: a cyclic buffer dependency of the lossless fabric), ``unroutable`` (True
        when frames ended held at switches with no route to their destination),
        ``controller`` (its name, None without one), ``controller_calls`` (every call,
        look-ahead calls included), ``controller_ahead_calls`` (calls for upcoming periods),
        ``controller_wall_s`` (wall time inside ``plan``, s; not part of ``wall_s``),
        ``plan_changes`` (plans the controller applied) and ``rewrites`` (one dict per workload
        rewrite the run applied: ``rewrite``, ``algorithm``, ``params``, ``ops_replaced``,
        ``ops_produced``, ``locality``, and for ``WeightSyncForest(choose="faster")``
        ``choices``, the scheme kept per weight sync and both predicted times;
        docs/fairness.md).
    """

    flows: pa.Table
    links: pa.Table
    run: dict = field(default_factory=dict)
    ops: pa.Table = field(default_factory=lambda: OP_SCHEMA.empty_table())
    stages: pa.Table = field(default_factory=lambda: STAGE_SCHEMA.empty_table())
    circuits: pa.Table = field(default_factory=lambda: CIRCUIT_SCHEMA.empty_table())
    flows_path: str | None = None
    queue_samples: pa.Table = field(default_factory=lambda: QUEUE_SAMPLE_SCHEMA.empty_table())
    rate_samples: pa.Table = field(default_factory=lambda: RATE_SAMPLE_SCHEMA.empty_table())
    samples_path: str | None = None
    link_changes: pa.Table = field(default_factory=lambda: LINK_CHANGE_SCHEMA.empty_table())
    op_ranks: pa.ChunkedArray | None = None
    jobs: pa.Table = field(default_factory=lambda: JOB_SCHEMA.empty_table())

    def write_timeline(self, path, **options) -> dict:
        """Write the run as a timeline: Chrome trace event JSON that Perfetto
        (ui.perfetto.dev) and chrome://tracing open (docs/timelines.md). ``options`` go to
        ``rfabric.timeline.build_timeline`` (``gpus``, ``max_flows``, ``max_gpu_slices``).
        Returns the file's summary (its ``otherData``: event counts and what was left out)."""
        from .timeline import write_timeline

        return write_timeline(self, path, **options)

    @property
    def fct_ps(self) -> np.ndarray:
        return self.flows.column("fct_ps").to_numpy()

    @property
    def complete(self) -> bool:
        return self.run["flows_done"] == self.run["flows"]

    def summary(self) -> str:
        r = self.run
        fct = self.fct_ps[self.fct_ps >= 0]
        lines = [
            f"backend={r['backend']} transport={r['transport']} seed={r['seed']}",
            f"flows {r['flows_done']}/{r['flows']} done, "
            + (
                f"makespan {r['makespan_ps'] / 1e6:.3f} us"
                if r["makespan_ps"] >= 0
                else f"not finished (stopped at {r['sim_ps'] / 1e6:.3f} us of simulated time)"
            ),
        ]
        if fct.size:
            slow = self.flows["slowdown"].drop_null().to_numpy()
            lines.append(
                f"FCT us: median {np.median(fct) / 1e6:.3f}, p99 {np.percentile(fct, 99) / 1e6:.3f}, "
                f"max {fct.max() / 1e6:.3f}"
                + (
                    f"; slowdown median {np.median(slow):.2f}, p99 {np.percentile(slow, 99):.2f}"
                    if slow.size
                    else ""
                )
            )
        if r["backend"] == "flow":
            lines.append(
                f"events {r['events']:,}  max-min recomputations {r['recomputes']:,}  "
                f"rate updates {r['rate_updates']:,}  wall {r['wall_s']:.3f} s"
            )
        else:
            lines.append(
                f"events {r['events']:,}  packet-hops {r['packet_hops']:,}  drops {r['drops']:,}  "
                f"pfc pauses {r['pfc_pauses']:,}  wall {r['wall_s']:.3f} s"
            )
        if r.get("unroutable") and r["backend"] == "flow":
            lines.append(
                "UNROUTABLE: flows whose paths end at a failed link or dark circuit could make no "
                "progress; incomplete flows have end_ps = -1"
            )
        elif r.get("unroutable"):
            lines.append(
                f"UNROUTABLE: {r['packets_held']:,} frames held at switches with no route to their "
                "destination (failed links or dark circuits); incomplete flows have end_ps = -1"
            )
        if r.get("deadlock"):
            stuck = r["packets_in_flight"] - r.get("packets_held", 0)
            lines.append(
                f"PFC DEADLOCK: {stuck:,} frames wait on pauses that never lift; "
                "incomplete flows have end_ps = -1"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Results({self.run.get('flows_done')}/{self.run.get('flows')} flows, backend={self.run.get('backend')})"


class _View:
    """A registered view of Results: ``res.<name>`` is ``cls(res)``; on the class, ``cls``."""

    def __init__(self, cls):
        self._cls = cls

    def __get__(self, obj, owner=None):
        return self._cls if obj is None else self._cls(obj)


def register_view(name: str):
    """Class decorator: make ``res.<name>`` a ``cls(res)`` for every Results. The layers above
    Results (rfabric.plot's ``plot``) register their views here, so this module imports none
    of them. A name Results already has (a field or a method) is refused."""

    def decorate(cls):
        existing = Results.__dict__.get(name)
        if name in Results.__dataclass_fields__ or (existing is not None and not isinstance(existing, _View)):
            raise ValueError(f"register_view: Results already has {name!r}")
        setattr(Results, name, _View(cls))
        return cls

    return decorate


def build_op_tables(
    trace, op_log: dict, flow_stats: dict | None = None, rewrite=None, job_start_ps=None
) -> tuple[pa.Table, pa.Table]:
    """ops and stages tables from a Trace, the engine's per-op start/end columns and, when
    given, its per-op flow totals (``Engine.op_flow_stats``; else those columns are null) and
    the rewrite that produced each op (``rewrite``: a name or None per op; else all null).
    Each op's job is the trace's ``job`` column, else ``"job0"``; ``job_start_ps`` (name ->
    ps) says when each job was placed to start: the compute before its first ops counts from
    there, not from 0."""
    from .jobs import DEFAULT_JOB

    t = trace.table
    job = trace.job_of_ops()
    if job is None:
        job = np.full(t.num_rows, DEFAULT_JOB, dtype=object)
    start = op_log["start_ps"]
    end = op_log["end_ps"]
    n_ranks = pa.compute.list_value_length(t.column("ranks")).to_numpy(zero_copy_only=False).astype(np.int32)
    kind = t.column("kind").cast(pa.string()).to_numpy(zero_copy_only=False)
    size = t.column("size_bytes").to_numpy()
    done = (end >= 0) & (start >= 0)
    time_ps = np.where(done, end - start, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(done & (time_ps > 0), size / np.maximum(time_ps, 1) * 1e12 / 1e9, np.nan)
    factor = np.array([BUSBW_FACTOR[k](n) for k, n in zip(kind, n_ranks, strict=True)], dtype=float)
    requested = t.column("algorithm").cast(pa.string())
    algorithm, protocol, channels = (
        requested,
        pa.nulls(len(start), pa.string()),
        pa.nulls(len(start), pa.int32()),
    )
    if "algorithm" in op_log:  # what ran (the engine's codes; -1: not started / no protocol)
        algos = np.array(_engine.op_algorithms(), dtype=object)
        protos = np.array(_engine.op_protocols(), dtype=object)
        a, p, c = (np.asarray(op_log[k]) for k in ("algorithm", "protocol", "channels"))
        ran = a >= 0
        algorithm = pa.array(
            np.where(ran, algos[np.where(ran, a, 0)], requested.to_numpy(zero_copy_only=False))
        )
        protocol = pa.array(protos[np.where(p >= 0, p, 0)], pa.string(), mask=p < 0)
        channels = pa.array(c, pa.int32(), mask=c < 0)
    ops = pa.table(
        {
            "op_id": t.column("op_id"),
            "iteration": t.column("iteration"),
            "stage": t.column("stage").cast(pa.string()),
            "phase": t.column("phase").cast(pa.string()),
            "kind": t.column("kind").cast(pa.string()),
            "algorithm": algorithm,
            "requested": requested,
            "protocol": protocol,
            "channels": channels,
            "size_bytes": t.column("size_bytes"),
            "n_ranks": n_ranks,
            "period": t.column("period"),
            "start_ps": start,
            "end_ps": end,
            "time_ps": time_ps,
            "algbw_GBps": algbw,
            "busbw_GBps": algbw * factor,
            **{
                name: (flow_stats[name] if flow_stats is not None else pa.nulls(len(start), pa.int64()))
                for name in (
                    "flows",
                    "retransmits",
                    "delivered_bytes",
                    "resent_bytes",
                    "dropped_bytes",
                    "max_fct_ps",
                )
            },
            "rewrite": pa.array(
                list(rewrite) if rewrite is not None else [None] * len(start), type=pa.string()
            ),
            "job": pa.array(job, pa.string()),
        },
        schema=OP_SCHEMA,
    )
    grouped = (
        pa.table(
            {
                "job": ops["job"],
                "iteration": ops["iteration"],
                "stage": ops["stage"],
                # not-started ops must not pull the stage's start down to -1
                "start_ps": np.where(start >= 0, start, np.iinfo(np.int64).max),
                "end_ps": np.where(done, end, np.iinfo(np.int64).max),
                "op_id": ops["op_id"],
            }
        )
        .group_by(["job", "iteration", "stage"], use_threads=False)
        .aggregate([("op_id", "count"), ("start_ps", "min"), ("end_ps", "max")])
    )
    stage_end = grouped["end_ps_max"].to_numpy()
    stage_start = grouped["start_ps_min"].to_numpy()
    compute = t.column("compute_ps").to_numpy() if "compute_ps" in t.column_names else 0
    floor = np.zeros(len(start), dtype=np.int64)
    for name, at in (job_start_ps or {}).items():
        floor[job == name] = at
    op_start = np.where(start >= 0, np.maximum(start - compute, floor), -1)
    g_job = grouped["job"].to_numpy(zero_copy_only=False)
    o_iter, o_stage = ops["iteration"].to_numpy(), ops["stage"].to_numpy(zero_copy_only=False)
    g_iter, g_stage = grouped["iteration"].to_numpy(), grouped["stage"].to_numpy(zero_copy_only=False)
    busy = np.zeros(grouped.num_rows, dtype=np.int64)
    exclusive = np.zeros(grouped.num_rows, dtype=np.int64)
    for name in dict.fromkeys(g_job):  # each job's stages overlap only its own
        mine, g_mine = job == name, g_job == name
        busy[g_mine], exclusive[g_mine] = stage_busy_exclusive(
            o_iter[mine], o_stage[mine], op_start[mine], end[mine], g_iter[g_mine], g_stage[g_mine]
        )
    stages = pa.table(
        {
            "job": grouped["job"],
            "iteration": grouped["iteration"],
            "stage": grouped["stage"],
            "ops": grouped["op_id_count"],
            "start_ps": np.where(stage_start == np.iinfo(np.int64).max, -1, stage_start),
            "end_ps": np.where(stage_end == np.iinfo(np.int64).max, -1, stage_end),
            "busy_ps": np.where(stage_end == np.iinfo(np.int64).max, -1, busy),
            "exclusive_ps": np.where(stage_end == np.iinfo(np.int64).max, -1, exclusive),
        },
        schema=STAGE_SCHEMA,
    ).sort_by([("iteration", "ascending"), ("start_ps", "ascending"), ("job", "ascending")])
    return ops, stages


def build_job_table(
    infos, ops: pa.Table | None, flows_job=None, flows_start=None, flows_end=None
) -> pa.Table:
    """``Results.jobs`` from the run's JobInfos and its ops table (a trace run), or, for a
    Flows run, each flow's job index, start and end."""
    rows = {f.name: [] for f in JOB_SCHEMA}
    if ops is not None and ops.num_rows:
        o_job = ops["job"].to_numpy(zero_copy_only=False)
        o_start, o_end = ops["start_ps"].to_numpy(), ops["end_ps"].to_numpy()
        o_iter = ops["iteration"].to_numpy()
        o_flows = ops["flows"].fill_null(0).to_numpy()
    for k, info in enumerate(infos):
        if ops is not None:
            mine = o_job == info.name if ops.num_rows else np.zeros(0, dtype=bool)
            st, en = o_start[mine], o_end[mine]
            n_ops, n_done = int(mine.sum()), int((en >= 0).sum())
            iterations = int(np.unique(o_iter[mine]).size)
            n_flows = int(o_flows[mine].sum())
        else:
            mine = flows_job == k
            st, en = flows_start[mine], flows_end[mine]
            n_ops, n_done, iterations, n_flows = 0, 0, 1, int(mine.sum())
        complete = bool(en.size and (en >= 0).all())
        end = int(en.max()) if complete else -1
        started = st[st >= 0]
        span = end - info.start_ps if complete else -1
        rows["job"].append(info.name)
        rows["gpus"].append(info.gpus.astype(np.int32).tolist())
        rows["n_gpus"].append(int(info.gpus.size))
        rows["start_ps"].append(int(info.start_ps))
        rows["first_start_ps"].append(int(started.min()) if started.size else -1)
        rows["end_ps"].append(end)
        rows["iterations"].append(iterations)
        rows["iteration_time_ps"].append(int(round(span / iterations)) if complete and iterations else -1)
        rows["throughput_iter_per_s"].append(
            iterations / (span / 1e12) if complete and span > 0 else float("nan")
        )
        rows["ops"].append(n_ops)
        rows["ops_done"].append(n_done)
        rows["flows"].append(n_flows)
        rows["complete"].append(complete)
    return pa.table(rows, schema=JOB_SCHEMA)


def stage_busy_exclusive(iteration, stage, start, end, g_iteration, g_stage):
    """Per group ``(g_iteration[i], g_stage[i])``: (busy_ps, exclusive_ps) of its ops' spans
    ``[start, end)`` (``start``: where the op's own compute began). busy is the length of their union; exclusive the part of it when no op of
    another group is in flight. Ops that never started count for nothing; an op that started
    and did not finish (``end < 0``) is in flight until the latest time any op reached, and
    makes its group's two values -1."""
    iteration = np.asarray(iteration)
    stage = np.asarray(stage, dtype=object)
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    n_groups = len(g_iteration)
    busy = np.zeros(n_groups, dtype=np.int64)
    exclusive = np.zeros(n_groups, dtype=np.int64)
    started = start >= 0
    if not started.any():
        return busy, exclusive
    horizon = max(int(start[started].max()), int(end.max()))
    index = {(int(i), str(s)): k for k, (i, s) in enumerate(zip(g_iteration, g_stage, strict=True))}
    group = np.array([index[(int(i), str(s))] for i, s in zip(iteration, stage, strict=True)], dtype=np.int64)
    unfinished = np.zeros(n_groups, dtype=bool)
    np.logical_or.at(unfinished, group[started & (end < 0)], True)
    g, a = group[started], start[started]
    b = np.where(end[started] >= 0, end[started], horizon)
    order = np.lexsort((a, g))
    g, a, b = g[order], a[order], b[order]
    # the union of each group's spans: a new interval where an op starts after every earlier
    # op of its group has ended
    reach = np.empty_like(b)
    for k in np.unique(g):
        sl = np.flatnonzero(g == k)
        reach[sl] = np.maximum.accumulate(b[sl])
    new = np.ones(len(g), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (a[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(g)) - 1
    ug, ua, ub = g[first], a[first], reach[last]
    np.add.at(busy, ug, ub - ua)
    # how many groups are in flight on each elementary segment between interval ends
    cuts = np.unique(np.concatenate([ua, ub]))
    i0, i1 = np.searchsorted(cuts, ua), np.searchsorted(cuts, ub)
    depth = np.zeros(len(cuts), dtype=np.int64)
    np.add.at(depth, i0, 1)
    np.add.at(depth, i1, -1)
    alone = np.where(np.cumsum(depth)[:-1] == 1, np.diff(cuts), 0)
    prefix = np.concatenate([[0], np.cumsum(alone)])
    np.add.at(exclusive, ug, prefix[i1] - prefix[i0])
    busy[unfinished] = -1
    exclusive[unfinished] = -1
    return busy, exclusive


def build_flow_table(log: dict, op_id: np.ndarray | None = None, job=None) -> pa.Table:
    """FLOW_SCHEMA rows from the engine's flow-log columns; ``job``: each flow's job name
    (default ``"job0"``)."""
    n = len(log["src"])
    end = log["end_ps"]
    fct = np.where(end >= 0, end - log["start_ps"], -1)
    ideal = log["ideal_fct_ps"]
    # an empty flow ends at its start: as fast as it can (1); a flow with no path left to
    # compute its ideal on (0: e.g. its circuit is dark now) has none (null)
    ratio = np.where(ideal > 0, fct / np.maximum(ideal, 1), 1.0)
    slowdown = pa.array(ratio, pa.float64(), mask=(end < 0) | ((ideal == 0) & (log["size_bytes"] > 0)))
    cols = {
        "flow_id": log["flow_id"] if "flow_id" in log else np.arange(n, dtype=np.int64),
        "op_id": op_id if op_id is not None else log.get("op_id", np.full(n, -1, dtype=np.int64)),
        "src": log["src"].astype(np.int32),
        "dst": log["dst"].astype(np.int32),
        "size_bytes": log["size_bytes"],
        "start_ps": log["start_ps"],
        "end_ps": end,
        "fct_ps": fct,
        "ideal_fct_ps": ideal,
        "slowdown": slowdown,
        "delivered_bytes": log["delivered_bytes"],
        # (the flow backend has no retransmissions: null)
        "retransmits": log["retransmits"].astype(np.int64)
        if "retransmits" in log
        else pa.nulls(n, pa.int64()),
        "job": pa.array(job if job is not None else np.full(n, "job0", dtype=object), pa.string()),
    }
    return pa.table(cols, schema=FLOW_SCHEMA)


def build_sample_tables(samples: dict, rate_bps: np.ndarray, period_ps: int) -> tuple[pa.Table, pa.Table]:
    """Queue and rate sample tables from the engine's columns (``Engine.take_samples``);
    ``rate_bps``: each port's rate, by port id."""
    port = samples["queue_port"].astype(np.int64)
    tx = samples["queue_tx_bytes"]
    queues = pa.table(
        {
            "time_ps": samples["queue_time_ps"],
            "link_id": port // 2,
            "direction": (port % 2).astype(np.int8),
            "queue_bytes": samples["queue_bytes"],
            "tx_bytes": tx,
            "utilization": tx * 8e12 / (rate_bps[port] * period_ps),
        },
        schema=QUEUE_SAMPLE_SCHEMA,
    )
    delivered = samples["rate_delivered_bytes"]
    rates = pa.table(
        {
            "time_ps": samples["rate_time_ps"],
            "flow_id": samples["rate_flow_id"],
            "delivered_bytes": delivered,
            "rate_bps": delivered * 8e12 / period_ps,
        },
        schema=RATE_SAMPLE_SCHEMA,
    )
    return queues, rates


def build_link_table(stats: dict, spec, sim_ps: int) -> pa.Table:
    link_id = stats["link_id"].astype(np.int64)
    names = spec.nodes.name
    busy = stats["busy_ps"]
    cols = {
        "link_id": link_id,
        "direction": (stats["port_id"] % 2).astype(np.int8),
        "kind": spec.links.kind[link_id].astype(str),
        "src": stats["src"].astype(np.int64),
        "dst": stats["dst"].astype(np.int64),
        "src_name": names[stats["src"]].astype(str),
        "dst_name": names[stats["dst"]].astype(str),
        "rate_bps": stats["rate_bps"],
        "bytes": stats["tx_bytes"],
        "packets": stats.get("tx_packets"),
        "busy_ps": busy,
        "utilization": busy / sim_ps if sim_ps > 0 else np.zeros(len(busy)),
        "max_queue_bytes": stats.get("max_queue_bytes"),
        "max_ingress_bytes": stats.get("max_ingress_bytes"),
        "buffer_bytes": stats["buffer_bytes"]
        if "buffer_bytes" in stats
        else spec.links.buffer_bytes[link_id],
        "drops": stats.get("drops"),
        "ecn_marks": stats.get("ecn_marks"),
        "pfc_pauses": stats.get("pfc_pauses_sent"),
    }
    n = len(link_id)
    # packet-only columns the flow backend does not have: null
    cols = {k: (pa.nulls(n, LINK_SCHEMA.field(k).type) if v is None else v) for k, v in cols.items()}
    return pa.table(cols, schema=LINK_SCHEMA)
