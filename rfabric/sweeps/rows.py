"""One sweep point run and priced into its row of the table (``SWEEP_SCHEMA`` in
``rfabric.results``): ``_run_point``.
"""

from __future__ import annotations

import copy
import math
import time

import pyarrow as pa

from .. import catalog
from ..errors import SpecError, SweepError
from ..jobs import as_jobs
from ..results import SWEEP_SCHEMA
from ..units import format_rate
from .digests import _config_id, _object_digest, fabric_digest, workload_digest
from .memory import over_bound_message, point_memory
from .points import _Point

#: Stages with a column of their own (``stage_<name>_ps``): the catalog's.
STAGES = catalog.STAGES


def _run_point(p: _Point) -> dict:
    """Build, price and simulate one point within its memory bound; returns its row
    (SWEEP_SCHEMA) with the point's resident peak."""
    t0 = time.perf_counter()
    try:
        with point_memory(p.max_memory) as mem:
            row = _point_row(p, t0)
    except MemoryError as exc:
        if p.max_memory is None:
            raise
        raise SweepError(over_bound_message(p.key, p.where, p.max_memory, exc)) from None
    row["peak_rss_bytes"] = mem.peak_bytes
    return row


def _point_row(p: _Point, t0: float) -> dict:
    from .. import cost
    from ..simulation import simulate
    from ..traces import Trace

    try:
        fab = p.fabric.build(p.gpus, p.link_bps)
        if p.fabric_digest is not None and fabric_digest(fab) != p.fabric_digest:
            raise SweepError(
                f"{p.where}: sweep point {p.key}: fabric {p.fabric.label!r} built different tables in "
                "the worker than in the sweep's process, so config_id would not describe the row: "
                "make its build() deterministic (seed its random choices)"
            )
        net_usd = cost.network_cost(fab, p.prices)
        workload = p.workload_obj if p.workload_obj is not None else p.workload.make(p.gpus, p.workload_seed)
        jobs = as_jobs(workload)
        traced = isinstance(workload, Trace) or (
            jobs is not None and any(isinstance(j.workload, Trace) for j in jobs)
        )
        kwargs = dict(p.settings)
        # rewrites change a trace's ops; a flow set has none to change
        kwargs["rewrites"] = list(p.rewrites) if isinstance(p.rewrites, tuple) else p.rewrites
        if not traced:
            kwargs["rewrites"] = "none"
        if p.controller == "own":
            if traced:  # flows have no periods to plan for: initial circuits
                kwargs["controller"] = fab.controller()
        elif p.controller is not None:
            ctrl = p.controller
            kwargs["controller"] = ctrl() if isinstance(ctrl, type) else copy.deepcopy(ctrl)
        res = simulate(fab, workload, seed=p.seed, **kwargs)
    except SweepError:
        raise
    except SpecError as exc:
        raise SpecError(f"{p.where}: sweep point {p.key}: {exc}") from None
    config_id = p.config_id
    if config_id is None:  # its fabric or workload failed to build in the sweep's process only
        own = _object_digest(fab.controller()) if p.controller == "own" else None
        config_id = _config_id(p, fabric_digest(fab), own, workload_digest(workload))
    run = res.run
    makespan_ps = int(run["makespan_ps"])
    complete = makespan_ps > 0
    makespan_s = makespan_ps / 1e12 if complete else math.nan
    iterations, samples = 1, None
    stage_ps: dict[str, int | None] = {}
    if traced:
        # the most iterations of any job (a trace without jobs: its own)
        iterations = max(1, max(res.jobs["iterations"].to_pylist(), default=1))
        batch = (workload.metadata.get("parameters") or {}).get("global_batch") if jobs is None else None
        if isinstance(batch, int):
            samples = batch * iterations
        # a stage's time: the sum over iterations of its first op's start to its last op's
        # end; None if any of its ops did not finish
        for row in res.stages.to_pylist():
            name = row["stage"]
            span = row["end_ps"] - row["start_ps"] if row["end_ps"] >= 0 else None
            if name not in stage_ps:
                stage_ps[name] = span
            elif stage_ps[name] is not None and span is not None:
                stage_ps[name] += span
            else:
                stage_ps[name] = None
    iter_s = makespan_s / iterations if complete else math.nan
    thr = 1.0 / iter_s if complete else math.nan
    # the makespan per iteration, rounded to the nearest ps (half up)
    iter_ps = (2 * makespan_ps + iterations) // (2 * iterations) if complete else None
    cluster = None if p.gpu_price_usd is None else net_usd + p.gpus * p.gpu_price_usd
    row = {
        "point": p.index,
        "config_id": config_id,
        "fabric": p.fabric.label,
        "family": fab.family,
        "topology": fab.name,
        "link_speed": format_rate(p.link_bps),
        "link_bps": p.link_bps,
        "gpus": p.gpus,
        "workload": p.workload.label,
        "controller": (run.get("controller") or "none") if p.controller == "own" else p.controller_name,
        "rewrite_rule": p.rewrite_rule,
        "rewrites": _rewrites_text(run.get("rewrites") or []),
        "seed": p.seed,
        "workload_seed": p.workload_seed,
        "network_cost_usd": net_usd,
        "cluster_cost_usd": cluster,
        "complete": complete,
        "makespan_ps": makespan_ps if complete else None,
        "iterations": iterations,
        "iteration_time_ps": iter_ps,
        "throughput_iter_per_s": thr,
        "samples_per_s": samples / makespan_s if samples is not None and complete else None,
        "throughput_per_musd": thr / (net_usd / 1e6) if net_usd > 0 else math.nan,
        **{f"stage_{s}_ps": stage_ps.get(s) for s in STAGES},
        "stage_ps": sorted((k, v) for k, v in stage_ps.items() if v is not None),
        "events": run["events"],
        "packets": run["packets"],
        "packet_hops": run["packet_hops"],
        "drops": run["drops"],
        "ecn_marks": run["ecn_marks"],
        "pfc_pauses": run["pfc_pauses"],
        "flows": run["flows"],
        "flows_done": run["flows_done"],
        "sim_ps": run["sim_ps"],
        "ops": run.get("ops", 0),
        "ops_done": run.get("ops_done", 0),
        "deadlock": bool(run.get("deadlock", False)),
        "controller_calls": run.get("controller_calls", 0),
        "plan_changes": run.get("plan_changes", 0),
        "controller_wall_s": run.get("controller_wall_s", 0.0),
        "jobs": [
            {
                k: r[k]
                for k in (
                    "job",
                    "n_gpus",
                    "start_ps",
                    "end_ps",
                    "iterations",
                    "iteration_time_ps",
                    "throughput_iter_per_s",
                )
            }
            for r in res.jobs.to_pylist()
        ],
        "wall_s": time.perf_counter() - t0,
    }
    return row


def _rewrites_text(done: list[dict]) -> str:
    """The ``rewrites`` column: each rewrite that ran, its parameters and what it replaced."""
    if not done:
        return "none"
    parts = []
    for d in done:
        p = ",".join(f"{k}={v}" for k, v in sorted((d.get("params") or {}).items()))
        where = f", {d['locality']}" if d.get("locality") else ""
        parts.append(f"{d['rewrite']}({p}): {d['ops_replaced']} ops -> {d['ops_produced']}{where}")
    return "; ".join(parts)


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SWEEP_SCHEMA)
