"""RollMux-style phase multiplexing of several RL jobs over two shared pools (`multiplex_rl`).

RollMux (Wu et al., arXiv:2512.11306; its later version WEAVE) runs several synchronous RL
jobs in a *co-execution group*: one rollout (generation) pool and one training pool, each
shared by the group's jobs. Every job alternates rollout -> train -> sync, so on its own it
leaves one pool idle while the other works; in the group, job B's rollout fills the bubble
job A's training leaves on the rollout pool, and the other way round. Each pool serves the
jobs' phases in the group's round-robin order, and before a job's phase on a pool its state
is swapped in from host memory (a context switch: RollMux keeps every job's state resident
in host DRAM for a "warm start").

`multiplex_rl` is a scheduler above `generate_rl`: it generates each job's own
one-iteration-at-a-time (``mode="sync"``) trace on the shared pools' ranks, and composes
them into one trace with a ``job`` column whose cross-job dependencies serialise each pool
(docs/explanation/rl-multiplexing.md):

* a job's **rollout phase** of iteration i is its ``gen`` stage; a job's **training phase**
  is its ``experience``, ``train`` and ``weight_sync`` stages (`POOL_STAGES`): the weights
  leave from the training GPUs, so the next job's training waits until they have left. The
  response stream (gen -> train samples) belongs to neither: it ends on the job's own
  training phase, which waits for it;
* on each pool the phases run in the order (iteration 0: job 0, job 1, ..., job N-1;
  iteration 1: job 0, ...): the first ops of a phase (its ops with no dependency inside the
  phase) depend on the last ops of the pool's previous phase, and carry the incoming job's
  context-switch time as extra compute when that phase was another job's (the very first
  phase on a pool, and every phase of a group of one job, switch nothing).

Everything else is each job's own trace, unchanged: its ops (kind, size, ranks, stage,
phase, iteration), its dependencies, its compute. Op ids are renumbered so that the blocks
(iteration i, job k) follow one another in that order, and each job's communication periods
are shifted past the previous jobs' (each period is one job's).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import SpecError
from ...units import MAX_TIME_PS, parse_time
from ...validators import integer, known_keys
from ..models import get_model
from ..schema import SCHEMA_VERSION, encode_metadata
from ..trace import Trace
from .generate import generate_rl

__all__ = ["multiplex_rl", "POOL_STAGES", "WARM_START_S", "COLD_START_S", "context_switch_ps"]

#: The stages of each pool's phase: a job holds the rollout pool ("gen") for its ``gen``
#: stage and the training pool ("train") for its make-experience passes, training and the
#: weight sync that leaves from the training GPUs.
POOL_STAGES: dict[str, tuple[str, ...]] = {
    "gen": ("gen",),
    "train": ("experience", "train", "weight_sync"),
}

#: RollMux figure 4 (arXiv:2512.11306v2), warm start (state cached in host memory) on
#: an 8-GPU node, H20 rollout and H800 training: (model parameters, rollout s, training s)
#: for the 3B, 7B, 14B and 32B models.
WARM_START_S = ((3e9, 0.8, 1.9), (7e9, 0.9, 4.1), (14e9, 1.8, 4.7), (32e9, 1.7, 5.9))

#: The same figure, cold start (state loaded from storage).
COLD_START_S = ((3e9, 25.3, 26.7), (7e9, 38.8, 32.7), (14e9, 60.4, 59.0), (32e9, 81.7, 81.2))

# Arguments of generate_rl that multiplex_rl sets for every job.
_SET_BY_US = ("train_gpus", "gen_gpus", "train_ranks", "gen_ranks", "iterations")
_JOB_KEYS = tuple(p for p in inspect.signature(generate_rl).parameters if p not in _SET_BY_US) + ("name",)


def context_switch_ps(model, table=WARM_START_S) -> dict[str, int]:
    """The context-switch time of ``model`` on each pool, ``{"gen": ps, "train": ps}``, from
    the row of ``table`` (`WARM_START_S` or `COLD_START_S`) whose model size is nearest the
    model's parameter count (in log scale; models beyond 32B take the 32B row, the largest
    measured)."""
    params = get_model(model, "context_switch_ps: model").params
    row = min(table, key=lambda r: abs(math.log(params / r[0])))
    return {"gen": int(round(row[1] * 1e12)), "train": int(round(row[2] * 1e12))}


def _switch_times(context_switch, models: list) -> list[dict[str, int]]:
    """Per job, ``{"gen": ps, "train": ps}``."""
    if isinstance(context_switch, str) and context_switch in ("warm", "cold"):
        table = WARM_START_S if context_switch == "warm" else COLD_START_S
        return [context_switch_ps(m, table) for m in models]
    if isinstance(context_switch, Mapping):
        known_keys(context_switch, ("gen", "train"), "context_switch", "pool")
        missing = [p for p in ("gen", "train") if p not in context_switch]
        if missing:
            raise SpecError(
                f"context_switch: a dict needs a time for both pools, 'gen' and 'train'; {missing[0]!r} is missing"
            )
        per = {p: parse_time(context_switch[p], name=f"context_switch[{p!r}]") for p in ("gen", "train")}
    else:
        if isinstance(context_switch, str) and not any(c.isdigit() for c in context_switch):
            raise SpecError(
                f"context_switch must be 'warm', 'cold', a time ('2s') or a dict of times per pool "
                f"{{'gen': ..., 'train': ...}}, got {context_switch!r}"
            )
        t = parse_time(context_switch, name="context_switch")
        per = {"gen": t, "train": t}
    for p, v in per.items():
        if v > MAX_TIME_PS:
            raise SpecError(f"context_switch[{p!r}] = {v} ps is beyond the engine's limit {MAX_TIME_PS} ps")
    return [dict(per) for _ in models]


def _job_specs(jobs) -> list[tuple[str, dict[str, Any]]]:
    """(name, generate_rl arguments) per job, checked."""
    if isinstance(jobs, Mapping):
        items = []
        for name, spec in jobs.items():
            if not isinstance(spec, Mapping):
                raise SpecError(
                    f"multiplex_rl: job {name!r}: expected a dict of generate_rl arguments, got {type(spec).__name__}"
                )
            if "name" in spec and spec["name"] != name:
                raise SpecError(f"multiplex_rl: job {name!r} also says name={spec['name']!r}")
            items.append(dict(spec, name=name))
    elif isinstance(jobs, Sequence) and not isinstance(jobs, str | bytes):
        items = []
        for i, spec in enumerate(jobs):
            if not isinstance(spec, Mapping):
                raise SpecError(
                    f"multiplex_rl: jobs[{i}]: expected a dict of generate_rl arguments, got {type(spec).__name__}"
                )
            items.append(dict(spec))
    else:
        raise SpecError(
            f"multiplex_rl: jobs must be a list of dicts or a dict name -> dict, got {type(jobs).__name__}"
        )
    if not items:
        raise SpecError("multiplex_rl: jobs is empty")
    out, seen = [], {}
    for i, spec in enumerate(items):
        name = spec.pop("name", f"job{i}")
        where = f"multiplex_rl: job {name!r}" if isinstance(name, str) else f"multiplex_rl: jobs[{i}]"
        if not isinstance(name, str) or not name or "/" in name:
            raise SpecError(f"{where}: name must be a non-empty string without '/', got {name!r}")
        if name in seen:
            raise SpecError(f"{where}: the name is also jobs[{seen[name]}]'s (job names must be unique)")
        seen[name] = i
        for key in _SET_BY_US:
            if key in spec:
                raise SpecError(
                    f"{where}: {key!r} is set by multiplex_rl for every job (the shared pools), not per job"
                )
        known_keys(spec, _JOB_KEYS, where, "generate_rl argument")
        if "model" not in spec:
            raise SpecError(f"{where}: needs a 'model'")
        if spec.get("mode", "sync") != "sync":
            raise SpecError(
                f"{where}: mode={spec['mode']!r}; phase multiplexing interleaves synchronous jobs "
                "(rollout, then training, then sync), so mode must be 'sync'"
            )
        if spec.get("placement", "disaggregated") != "disaggregated":
            raise SpecError(
                f"{where}: placement={spec['placement']!r}; the jobs share a rollout pool and a "
                "training pool, so placement must be 'disaggregated'"
            )
        out.append((name, spec))
    return out


def _phase_bounds(in_phase: np.ndarray, offsets: np.ndarray, deps: np.ndarray, lo: int, hi: int):
    """Rows (old ids) of one block's phase with no dependency inside it (roots) and those no
    op of it depends on (sinks). ``in_phase``: the block's phase rows as a mask over the job."""
    rows = np.flatnonzero(in_phase[lo:hi]) + lo
    if rows.size == 0:
        return rows, rows
    d_lo, d_hi = offsets[lo], offsets[hi]
    d = deps[d_lo:d_hi]
    owner = np.repeat(np.arange(lo, hi), np.diff(offsets[lo : hi + 1]))
    inside = in_phase[owner] & (d >= lo) & (d < hi)
    inside[inside] = in_phase[d[inside]]
    has_inside = np.zeros(hi - lo, dtype=bool)
    has_inside[owner[inside] - lo] = True
    roots = rows[~has_inside[rows - lo]]
    depended = np.zeros(hi - lo, dtype=bool)
    depended[d[inside] - lo] = True
    sinks = rows[~depended[rows - lo]]
    return roots, sinks


def multiplex_rl(
    jobs: Sequence[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    *,
    train_gpus: int,
    gen_gpus: int,
    iterations: int = 1,
    context_switch: str | int | Mapping[str, Any] = "warm",
    train_ranks: Sequence[int] | None = None,
    gen_ranks: Sequence[int] | None = None,
) -> Trace:
    r"""Several synchronous RL jobs multiplexed, RollMux-style, over one shared training pool
    and one shared rollout pool: one trace with a ``job`` column.

    Each job is `generate_rl` on the whole of both pools (its own model, layouts, batch,
    response lengths and seed); the pools take the jobs' phases in round-robin order, each
    phase preceded by the incoming job's context switch, so that one job's training overlaps
    another's rollout. Run the trace with ``rf.simulate(fabric, trace)``: ``res.jobs`` has one
    row per job, ``res.stages`` each job's stages per iteration. The model is in the module
    docstring and docs/explanation/rl-multiplexing.md.

    Parameters
    ----------
    jobs : list of dict, or dict name -> dict
        Per job, `generate_rl` keyword arguments (``model`` required; ``train``, ``gen``,
        ``global_batch``, ``response``, ``seed``, ...), and optionally ``name`` (default
        ``job<i>``; unique, no ``/``). The list order is the round-robin order. Not allowed
        per job: ``train_gpus``, ``gen_gpus``, ``train_ranks``, ``gen_ranks``,
        ``iterations`` (set here for all), ``mode`` other than ``"sync"``, ``placement``
        other than ``"disaggregated"``. A job's rollout must have ops of its own: a gen
        layout of TP 1 (no collective) carries its decode time on the streamed samples
        and cannot be serialised, so it is refused.
    train_gpus, gen_gpus : int
        Sizes of the shared training and rollout pools; every job uses all of each.
    iterations : int
        RL iterations of every job.
    context_switch : "warm", "cold", time, or dict
        Time to swap a job's state onto a pool before its phase there. ``"warm"`` (default):
        RollMux figure 4's warm start (state cached in host memory) on an 8-GPU node, per
        job the row of the model size nearest its parameter count (`WARM_START_S`: 3B
        0.8 s rollout / 1.9 s training, 7B 0.9 / 4.1 s, 14B 1.8 / 4.7 s, 32B 1.7 / 5.9 s);
        ``"cold"``: the same figure's cold start (`COLD_START_S`, 25-82 s). A time
        (``"2s"``, ps) applies to both pools and every job, a dict ``{"gen": t, "train":
        t}`` to each pool; 0 switches for free.
    train_ranks, gen_ranks : sequence of int, optional
        The fabric GPU ids of the pools (default train ``0 .. train_gpus-1``, gen next).

    Returns
    -------
    Trace
        With a ``job`` column (the job names); metadata ``generator``
        ``"rfabric.traces.multiplex_rl"``, ``model`` (the jobs' common model, else None) and
        ``parameters``: the pools, ``iterations``, ``order`` (the job names), per job its
        ``context_switch_ps`` per pool and its `generate_rl` parameters.

    Raises
    ------
    SpecError
        On a bad argument (naming the job and the argument), or a job `generate_rl` refuses.
    """
    iterations = integer(iterations, "multiplex_rl: iterations", lo=1)
    train_gpus = integer(train_gpus, "multiplex_rl: train_gpus", lo=1)
    gen_gpus = integer(gen_gpus, "multiplex_rl: gen_gpus", lo=1)
    specs = _job_specs(jobs)
    models = [get_model(spec["model"], f"multiplex_rl: job {name!r}: model") for name, spec in specs]
    switch = _switch_times(context_switch, models)

    traces = []
    for (name, spec), model in zip(specs, models, strict=True):
        args = dict(spec, model=model, mode="sync", placement="disaggregated")
        try:
            t = generate_rl(
                **args,
                train_gpus=train_gpus,
                gen_gpus=gen_gpus,
                iterations=iterations,
                train_ranks=train_ranks,
                gen_ranks=gen_ranks,
            )
        except SpecError as e:
            raise type(e)(f"multiplex_rl: job {name!r}: {e}") from None
        stages = t.table.column("stage").cast(pa.string()).to_numpy(zero_copy_only=False)
        if not np.isin(stages, POOL_STAGES["gen"]).any():
            raise SpecError(
                f"multiplex_rl: job {name!r}: its rollout has no ops of its own (gen layout "
                f"{t.metadata['parameters']['gen']}): with TP 1 and no EP the decode time rides on "
                "the streamed samples, so the rollout pool cannot be handed over at its end; "
                "use a gen tp >= 2"
            )
        traces.append((t, stages))

    n_jobs = len(specs)
    # Per job: iteration block bounds (rows are in iteration order in sync mode).
    blocks = []
    for t, _ in traces:
        it = t.table.column("iteration").to_numpy()
        if (np.diff(it) < 0).any():  # generate_rl's sync mode emits iteration after iteration
            raise SpecError("multiplex_rl: a job's trace is not in iteration order")
        blocks.append(np.searchsorted(it, np.arange(iterations + 1)))
    new_ids = [np.empty(t.num_ops, dtype=np.int64) for t, _ in traces]
    base = 0
    for i in range(iterations):
        for k in range(n_jobs):
            lo, hi = blocks[k][i], blocks[k][i + 1]
            new_ids[k][lo:hi] = np.arange(base, base + hi - lo)
            base += hi - lo

    # Cross-job dependencies: per pool, each phase's roots after the previous phase's sinks.
    csr = []
    for t, _ in traces:
        deps = t.table.column("deps").combine_chunks()
        csr.append(
            (deps.offsets.to_numpy().astype(np.int64), pc.list_flatten(deps).to_numpy().astype(np.int64))
        )
    extra_rows = [[] for _ in range(n_jobs)]
    extra_vals = [[] for _ in range(n_jobs)]
    add_compute = [np.zeros(t.num_ops, dtype=np.int64) for t, _ in traces]
    for pool, stage_set in POOL_STAGES.items():
        masks = [np.isin(st, stage_set) for _, st in traces]
        prev = None  # (job, sink rows as new ids)
        for i in range(iterations):
            for k in range(n_jobs):
                lo, hi = blocks[k][i], blocks[k][i + 1]
                roots, sinks = _phase_bounds(masks[k], *csr[k], lo, hi)
                if roots.size == 0:
                    raise SpecError(f"multiplex_rl: job {specs[k][0]!r} has no {pool} ops in iteration {i}")
                if prev is not None:
                    pk, psinks = prev
                    extra_rows[k].append(np.repeat(roots, psinks.size))
                    extra_vals[k].append(np.tile(psinks, roots.size))
                    if pk != k:
                        add_compute[k][roots] += switch[k][pool]
                prev = (k, new_ids[k][sinks])

    parts = []
    period_base = 0
    for k, ((t, _), (name, _)) in enumerate(zip(traces, specs, strict=True)):
        tb = t.table
        n = tb.num_rows
        offsets, values = csr[k]
        rows = [np.repeat(np.arange(n), np.diff(offsets))] + extra_rows[k]
        vals = [new_ids[k][values]] + extra_vals[k]
        rows, vals = np.concatenate(rows), np.concatenate(vals)
        order = np.lexsort((vals, rows))
        rows, vals = rows[order], vals[order]
        keep = np.ones(rows.size, dtype=bool)
        keep[1:] = (rows[1:] != rows[:-1]) | (vals[1:] != vals[:-1])
        rows, vals = rows[keep], vals[keep]
        d_off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=d_off[1:])
        compute = tb.column("compute_ps").to_numpy().astype(np.int64) + add_compute[k]
        if compute.size and compute.max() > MAX_TIME_PS:
            raise SpecError(
                f"multiplex_rl: job {name!r}: compute plus context switch exceeds the engine's limit"
            )
        period = tb.column("period").to_numpy().astype(np.int64)
        cols = {
            "op_id": pa.array(new_ids[k]),
            "iteration": tb.column("iteration"),
            "stage": tb.column("stage").cast(pa.string()),
            "phase": tb.column("phase").cast(pa.string()),
            "kind": tb.column("kind").cast(pa.string()),
            "ranks": tb.column("ranks"),
            "size_bytes": tb.column("size_bytes"),
            "algorithm": tb.column("algorithm").cast(pa.string()),
            "deps": pa.LargeListArray.from_arrays(pa.array(d_off), pa.array(vals, pa.int64())),
            "compute_ps": pa.array(compute),
            "period": pa.array((period + period_base).astype(np.int32)),
            "m2n_senders": tb.column("m2n_senders"),
            "job": pa.array(np.full(n, name, dtype=object), pa.string()),
        }
        period_base += int(period.max()) + 1 if n else 0
        parts.append(pa.table(cols))
    table = pa.concat_tables(parts).combine_chunks()
    perm = np.argsort(table.column("op_id").to_numpy(), kind="stable")
    table = table.take(pa.array(perm))

    gpus = max(int(t.metadata["gpus"]) for t, _ in traces)
    names = [n for n, _ in specs]
    model_names = {t.model for t, _ in traces}
    meta = {
        "schema_version": SCHEMA_VERSION,
        "gpus": gpus,
        "model": model_names.pop() if len(model_names) == 1 else None,
        "generator": "rfabric.traces.multiplex_rl",
        "parameters": {
            "train_gpus": train_gpus,
            "gen_gpus": gen_gpus,
            "iterations": iterations,
            "train_ranks": traces[0][0].metadata["parameters"]["train_ranks"],
            "gen_ranks": traces[0][0].metadata["parameters"]["gen_ranks"],
            "order": names,
            "context_switch": context_switch if isinstance(context_switch, str) else "given",
            "pool_stages": {p: list(s) for p, s in POOL_STAGES.items()},
            "jobs": [
                {
                    "name": name,
                    "model": t.model,
                    "context_switch_ps": switch[k],
                    "generate_rl": t.metadata["parameters"],
                }
                for k, (name, (t, _)) in enumerate(zip(names, traces, strict=True))
            ],
        },
    }
    table = table.replace_schema_metadata(encode_metadata(meta))
    return Trace.from_table(table, meta, gpus=gpus, source="multiplex_rl")
