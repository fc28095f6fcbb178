"""Jobs: several workloads placed on one fabric.

A :class:`Job` is a workload (a Trace or Flows) with the GPUs it runs on and the time it
starts: the workload's rank ``r`` runs on GPU ``gpus[r]``. :func:`compose` turns a list of
jobs into the one workload the engine replays (docs/explanation/shared-clusters.md):

* traces: each job's ops with their ranks mapped to its GPUs, op ids and periods shifted
  past the jobs before it (so every op and every communication period is one job's), and its
  first ops (those with no dependencies) delayed by the job's start; the ``job`` column
  names each op's job. A trace that already has a ``job`` column (a scheduler's several
  jobs) keeps its names, prefixed by ``"<name>/"`` when the Job is named.
* Flows: sources and destinations mapped, starts delayed. Flows among traces run as
  ``send`` ops (one per flow, no dependencies), so any mix of jobs shares one run.

The engine sees one workload; nothing in it knows about jobs, so jobs that share no link run
exactly as each alone (tests/test_jobs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import SpecError
from .units import MAX_TIME_PS, parse_time

__all__ = ["Job", "JobInfo", "as_jobs", "compose", "DEFAULT_JOB"]

#: The job name of a workload run without jobs (and the prefix of unnamed jobs: job0, job1, ...).
DEFAULT_JOB = "job0"


class Job:
    """A workload placed on a fabric: rank ``r`` of ``workload`` runs on GPU ``gpus[r]``
    from time ``start``.

    Parameters
    ----------
    workload : rfabric.traces.Trace or rfabric.Flows
        The job's ops (ranks ``0 .. n-1``) or flows (GPU ids ``0 .. n-1``).
    gpus : sequence of int, optional
        The fabric's GPU id of each rank, distinct (``rf.place`` makes them by policy).
        Default: rank r on GPU r. For a trace whose metadata gives its GPU count, exactly
        that many; otherwise at least one more than the largest rank.
    start : time, optional
        When the job starts (``"5ms"``, ps as an int; default 0): its ops without
        dependencies (its flows) start no earlier, their own compute gap (start time)
        counted from it.
    name : str, optional
        Unique among the run's jobs; default ``job<i>`` by position in the list.
    """

    __slots__ = ("workload", "gpus", "start_ps", "name")

    def __init__(self, workload, gpus=None, start=0, name: str | None = None):
        from .flows import Flows
        from .traces import Trace

        if not isinstance(workload, Trace | Flows):
            raise SpecError(
                f"Job: workload must be an rfabric.traces.Trace or rfabric.Flows, got {type(workload).__name__}"
            )
        if name is not None and (not isinstance(name, str) or not name or "/" in name):
            raise SpecError(f"Job: name must be a non-empty string without '/', got {name!r}")
        where = f"Job {name!r}" if name else "Job"
        self.workload = workload
        self.name = name
        self.start_ps = parse_time(start, name=f"{where}: start")
        if self.start_ps > MAX_TIME_PS:
            raise SpecError(
                f"{where}: start {self.start_ps} ps is beyond the engine's limit of {MAX_TIME_PS}"
            )
        need = _ranks_needed(workload)
        if gpus is None:
            self.gpus = np.arange(need, dtype=np.int64)
            return
        if isinstance(gpus, str | bytes) or not hasattr(gpus, "__len__"):
            raise SpecError(f"{where}: gpus must be a sequence of GPU ids, got {gpus!r}")
        arr = np.asarray(gpus)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise SpecError(f"{where}: gpus must be a flat sequence of integer GPU ids, got {gpus!r}")
        arr = arr.astype(np.int64)
        if arr.size and arr.min() < 0:
            raise SpecError(f"{where}: gpus[{int(np.argmin(arr))}] is negative ({int(arr.min())})")
        uniq, counts = np.unique(arr, return_counts=True)
        if (counts > 1).any():
            raise SpecError(f"{where}: GPU {int(uniq[counts > 1][0])} is listed twice in gpus")
        meta_gpus = workload.metadata.get("gpus") if isinstance(workload, Trace) else None
        if meta_gpus is not None and arr.size != meta_gpus:
            raise SpecError(f"{where}: the trace is for {meta_gpus} GPUs but gpus lists {arr.size}")
        if arr.size < need:
            raise SpecError(f"{where}: the workload uses ranks 0..{need - 1} but gpus lists only {arr.size}")
        self.gpus = arr

    @property
    def size(self) -> int:
        """The job's GPU count."""
        return int(self.gpus.size)

    def __repr__(self) -> str:
        return (
            f"Job({self.name!r}, {type(self.workload).__name__}, {self.size} GPUs, start={self.start_ps} ps)"
        )


@dataclass(frozen=True)
class JobInfo:
    """What a run knows of one job (``Results.jobs`` is built from these)."""

    name: str
    gpus: np.ndarray
    start_ps: int
    model: str | None


def _ranks_needed(workload) -> int:
    from .traces import Trace

    if isinstance(workload, Trace):
        if workload.metadata.get("gpus") is not None:
            return int(workload.metadata["gpus"])
        top = pc.max(pc.list_flatten(workload.table.column("ranks"))).as_py()
        return 0 if top is None else int(top) + 1
    if len(workload.src) == 0:
        return 0
    return int(max(workload.src.max(), workload.dst.max())) + 1


def as_jobs(workload) -> list[Job] | None:
    """The list of jobs in ``workload`` (a Job or a list/tuple of Jobs), else None (a plain
    Trace or Flows). SpecError for a list holding something else, or an empty one."""
    if isinstance(workload, Job):
        return [workload]
    if isinstance(workload, list | tuple):
        if not workload:
            raise SpecError("jobs: the list of jobs is empty")
        for i, j in enumerate(workload):
            if not isinstance(j, Job):
                raise SpecError(f"jobs[{i}]: expected an rfabric.Job, got {type(j).__name__}")
        return list(workload)
    return None


def compose(jobs: Sequence[Job], num_gpus: int, fabric: str = "the fabric", gpu_types=None):
    """The one workload that runs ``jobs`` together on a fabric of ``num_gpus`` GPUs, and
    one JobInfo per job name (the trace's ``job`` column names, or the jobs').

    Returns ``(workload, infos, flow_job)``: a Trace (any job a trace) or Flows (all Flows);
    ``flow_job``, for Flows, is the job index of each flow (else None).

    Raises SpecError for duplicate names, GPUs outside the fabric, GPUs two jobs share, and
    (``gpu_types``: the fabric's type per GPU) a generated pool on GPUs of another type.
    """
    from .flows import Flows
    from .traces import Trace

    names = [j.name if j.name is not None else f"job{i}" for i, j in enumerate(jobs)]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if n in seen:
            raise SpecError(f"jobs[{i}]: name {n!r} is also jobs[{seen[n]}]'s (job names must be unique)")
        seen[n] = i
    owner = np.full(num_gpus, -1, dtype=np.int64)
    for i, j in enumerate(jobs):
        if j.size and j.gpus.max() >= num_gpus:
            bad = int(j.gpus[j.gpus >= num_gpus][0])
            raise SpecError(f"job {names[i]!r}: GPU {bad} is not on {fabric} ({num_gpus} GPUs)")
        taken = owner[j.gpus]
        if (taken >= 0).any():
            k = int(np.flatnonzero(taken >= 0)[0])
            raise SpecError(
                f"job {names[i]!r}: GPU {int(j.gpus[k])} is also job {names[int(taken[k])]!r}'s "
                "(jobs may not share a GPU)"
            )
        owner[j.gpus] = i
        if isinstance(j.workload, Trace):
            check_pool_types(j.workload, j.gpus, gpu_types, f"job {names[i]!r}")
    if all(isinstance(j.workload, Flows) for j in jobs):
        src = np.concatenate([j.gpus[j.workload.src] for j in jobs])
        dst = np.concatenate([j.gpus[j.workload.dst] for j in jobs])
        size = np.concatenate([j.workload.size_bytes for j in jobs])
        start = np.concatenate([j.workload.start_ps + j.start_ps for j in jobs])
        if start.size and start.max() > MAX_TIME_PS:
            raise SpecError(f"jobs: a flow starts at {int(start.max())} ps, beyond the engine's limit")
        flow_job = np.concatenate(
            [np.full(len(j.workload.src), i, dtype=np.int64) for i, j in enumerate(jobs)]
        )
        infos = [JobInfo(n, j.gpus, j.start_ps, None) for n, j in zip(names, jobs, strict=True)]
        return Flows(src, dst, size, start), infos, flow_job

    parts, infos = [], []
    base_id, base_period = 0, 0
    for name, j in zip(names, jobs, strict=True):
        w = j.workload
        t = w.table if isinstance(w, Trace) else _flows_as_ops(w)
        part, base_id, base_period = _shift(t, j, name, base_id, base_period)
        parts.append(part)
        inner = w.jobs if isinstance(w, Trace) else None
        model = w.model if isinstance(w, Trace) else None
        if inner is None:
            infos.append(JobInfo(name, j.gpus, j.start_ps, model))
        else:
            infos += _infos_by_column(part, j.start_ps, model)
    has_m2n = any("m2n_senders" in p.column_names for p in parts)
    cols: dict[str, list] = {}
    for p in parts:
        if has_m2n and "m2n_senders" not in p.column_names:
            p = p.append_column("m2n_senders", pa.array(np.zeros(p.num_rows, np.int32)))
        for c in p.column_names:
            cols.setdefault(c, []).append(p.column(c))
    table = pa.table({c: pa.chunked_array(v) for c, v in cols.items()})
    meta = {
        "gpus": int(num_gpus),
        "model": None,
        "generator": "rfabric.jobs.compose",
        "parameters": {
            "jobs": [
                {"name": i.name, "gpus": int(i.gpus.size), "start_ps": int(i.start_ps), "model": i.model}
                for i in infos
            ]
        },
    }
    return Trace.from_table(table, meta, gpus=int(num_gpus), source="jobs"), infos, None


def _flows_as_ops(flows) -> pa.Table:
    """A Flows job as trace rows: one ``send`` op per flow, its start as compute before it."""
    from .traces import Trace

    n = len(flows.src)
    if n == 0:
        raise SpecError("Job: a Flows job among traces needs at least one flow")
    same = np.flatnonzero(flows.src == flows.dst)
    if same.size:
        raise SpecError(
            f"Job: flow {int(same[0])} goes from GPU {int(flows.src[same[0]])} to itself; among trace "
            "jobs flows run as send ops, which need two ranks"
        )
    return Trace.from_columns(
        op_id=np.arange(n),
        stage="flows",
        phase="flows",
        kind="send",
        ranks=np.stack([flows.src, flows.dst], axis=1).tolist(),
        size_bytes=flows.size_bytes,
        deps=[[] for _ in range(n)],
        compute_ps=flows.start_ps,
        source="Job (flows)",
    ).table


def _shift(t: pa.Table, job: Job, name: str, base_id: int, base_period: int):
    """One job's rows: ranks on its GPUs, op ids and deps from ``base_id``, periods from
    ``base_period``, roots delayed by its start, the job column. Returns (table, next id,
    next period)."""
    ids = t.column("op_id").to_numpy()
    if ids.size == 0:
        return t, base_id, base_period
    lo = int(ids.min())
    ranks = t.column("ranks").combine_chunks()
    flat = pc.list_flatten(ranks).to_numpy().astype(np.int64)
    new_ranks = pa.ListArray.from_arrays(ranks.offsets, pa.array(job.gpus[flat].astype(np.int32)))
    deps = t.column("deps").combine_chunks()
    dflat = pc.list_flatten(deps).to_numpy().astype(np.int64)
    new_deps = pa.ListArray.from_arrays(deps.offsets, pa.array(dflat - lo + base_id, type=pa.int64()))
    roots = pc.list_value_length(deps).to_numpy() == 0
    compute = t.column("compute_ps").to_numpy().astype(np.int64)
    compute = np.where(roots, compute + job.start_ps, compute)
    if compute.max() > MAX_TIME_PS:
        raise SpecError(
            f"job {name!r}: start + compute of a first op is beyond the engine's limit {MAX_TIME_PS} ps"
        )
    period = t.column("period").to_numpy().astype(np.int64)
    if "job" in t.column_names:
        inner = t.column("job").cast(pa.string()).to_numpy(zero_copy_only=False)
        job_col = inner if job.name is None else np.array([f"{job.name}/{x}" for x in inner], dtype=object)
    else:
        job_col = np.full(len(ids), name, dtype=object)
    out = {
        "op_id": pa.array(ids - lo + base_id, pa.int64()),
        "iteration": t.column("iteration"),
        "stage": t.column("stage").cast(pa.string()),
        "phase": t.column("phase").cast(pa.string()),
        "kind": t.column("kind").cast(pa.string()),
        "ranks": new_ranks,
        "size_bytes": t.column("size_bytes"),
        "algorithm": t.column("algorithm").cast(pa.string()),
        "deps": new_deps,
        "compute_ps": pa.array(compute, pa.int64()),
        "period": pa.array(period - int(period.min()) + base_period, pa.int32()),
        "job": pa.array(job_col, pa.string()),
    }
    if "m2n_senders" in t.column_names:
        out["m2n_senders"] = t.column("m2n_senders")
    next_id = int(ids.max()) - lo + base_id + 1
    next_period = int(period.max()) - int(period.min()) + base_period + 1
    return pa.table(out), next_id, next_period


def single_job_infos(workload) -> list[JobInfo]:
    """The JobInfos of a workload run without jobs: the names of a trace's ``job`` column
    (each on the GPUs its ops use), else one job ``DEFAULT_JOB`` on the GPUs it uses. Returns
    [] for anything else (the Simulation rejects it)."""
    from .flows import Flows
    from .traces import Trace

    if isinstance(workload, Flows):
        gp = np.unique(np.concatenate([workload.src, workload.dst])).astype(np.int64)
        return [JobInfo(DEFAULT_JOB, gp, 0, None)]
    if not isinstance(workload, Trace):
        return []
    if workload.jobs is None:
        flat = pc.list_flatten(workload.table.column("ranks")).to_numpy().astype(np.int64)
        return [JobInfo(DEFAULT_JOB, np.unique(flat), 0, workload.model)]
    return _infos_by_column(workload.table, 0, workload.model)


def _infos_by_column(table: pa.Table, start_ps: int, model) -> list[JobInfo]:
    """One JobInfo per name of ``table``'s ``job`` column, in the order of their first op,
    each on the GPUs its ops use."""
    col = table.column("job").cast(pa.string()).to_numpy(zero_copy_only=False)
    ranks = table.column("ranks")
    flat = pc.list_flatten(ranks).to_numpy().astype(np.int64)
    owner = np.repeat(col, pc.list_value_length(ranks).to_numpy())
    return [JobInfo(n, np.unique(flat[owner == n]), start_ps, model) for n in dict.fromkeys(col)]


def check_pool_types(trace, gpus: np.ndarray, gpu_types, where: str) -> None:
    """On a fabric with more than one GPU type, SpecError when a generated trace's train or
    gen pool (its metadata's ``train_hardware`` / ``gen_hardware``, whose compute model it
    carries) lands on GPUs of another type. ``gpus``: the fabric GPU of each rank. Traces
    without that metadata, hardware outside the catalog (custom figures) and fabrics of one
    GPU type are not checked (the figures may be set by hand there)."""
    from .traces.models import GPU_TYPES

    if gpu_types is None or len(set(gpu_types.tolist())) < 2:
        return
    p = trace.metadata.get("parameters") or {}
    train_n, gen_n = p.get("train_gpus"), p.get("gen_gpus")
    if not isinstance(train_n, int) or not isinstance(gen_n, int):
        return
    train = np.asarray(p.get("train_ranks") or range(train_n), dtype=np.int64)
    if p.get("placement") == "colocated":
        gen = train
    else:
        gen = np.asarray(p.get("gen_ranks") or range(train_n, train_n + gen_n), dtype=np.int64)
    for pool, ranks in (("train", train), ("gen", gen)):
        hw = p.get(f"{pool}_hardware")
        name = hw.get("name") if isinstance(hw, dict) else None
        want = next((k for k in GPU_TYPES if isinstance(name, str) and name.split("-")[0] == k), None)
        if want is None or not ranks.size or ranks.max() >= gpus.size:
            continue
        got = gpu_types[gpus[ranks]]
        bad = np.flatnonzero(got != want)
        if bad.size:
            r = int(ranks[bad[0]])
            raise SpecError(
                f"{where}: the trace's {pool} pool computes as {want} ({pool}_hardware) but its rank {r} "
                f"runs on GPU {int(gpus[r])}, an {got[bad[0]]}: place the pool on {want} GPUs, or "
                f"generate the trace with {pool}_hardware={got[bad[0]]!r}"
            )
