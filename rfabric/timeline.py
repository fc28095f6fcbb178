"""A run as a timeline: Chrome trace event JSON that Perfetto (ui.perfetto.dev) and
chrome://tracing open (docs/timelines.md).

``build_timeline(res)`` returns the JSON object (a dict: ``traceEvents``, ``displayTimeUnit``,
``otherData``); ``write_timeline(res, path)`` writes it (``Results.write_timeline``). The
tracks, as processes of the trace (``pid``) and their threads (``tid``):

- ``run``: circuit plans (an instant per applied plan, a slice per plan's dark time), link
  failures (an instant per change, a slice per time a link is down) and the sampled counters
  (link utilization and queued bytes per link kind, total goodput);
- one process per stage (``stage gen``, ...): the stage's span in each iteration, then its
  ops, one slice each;
- one process per GPU (``GPU 12``): the ops it takes part in, and the flows it sends when the
  run recorded flows (``res.flows``; the first ``max_flows`` by start).

A thread of the format may hold only slices that nest, and ops and flows overlap freely, so a
track is a set of lanes (threads named ``ops``, ``ops 2``, ...): each slice goes to the
lowest-numbered lane free at its start. Times are microseconds (the format's unit) as
floats on whole nanoseconds, ``(ps // 1000) / 1000``, the resolution Perfetto keeps: flooring
keeps the picoseconds' order, and a slice's end ``(end_ps // 1000) / 1000`` is written as
``dur`` from its ``ts``, so Perfetto's ``round(ts * 1000) + round(dur * 1000)`` never passes
the next slice's start on its lane. Every slice's ``args`` carry its exact ``start_ps`` and
``end_ps``.

This module reads a Results' tables and imports only rfabric.errors (it sits beside
rfabric.results, which calls it); json and numpy, no other dependency.
"""

from __future__ import annotations

import heapq
import json
import math
from pathlib import Path

import numpy as np

from .errors import SpecError

__all__ = ["build_timeline", "write_timeline"]

#: pids of the trace's processes: the run's own tracks, the stages, then the GPUs
PID_RUN = 1
PID_STAGE0 = 10
PID_GPU0 = 1000


def _us(ps) -> float:
    """Picoseconds to the format's microseconds (a float), floored to whole nanoseconds."""
    return (int(ps) // 1000) / 1000


def _clean(value):
    """A JSON-safe value: numpy scalars to Python, NaN and infinities to null."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def lanes(starts, ends) -> list[int]:
    """The lane of each interval [start, end]: the lowest-numbered lane whose last interval
    ended at or before the start, so the intervals of one lane never overlap (touching is
    fine). Intervals are taken by start, then end, then position; returns a lane per input."""
    order = sorted(range(len(starts)), key=lambda i: (starts[i], ends[i], i))
    busy: list[tuple[int, int]] = []  # (end, lane) of lanes in use
    free: list[int] = []  # lanes free again
    out = [0] * len(starts)
    count = 0
    for i in order:
        while busy and busy[0][0] <= starts[i]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        out[i] = lane
        heapq.heappush(busy, (ends[i], lane))
    return out


class _Trace:
    """The events being built, and the threads (lanes) of each process."""

    def __init__(self):
        self.meta: list[dict] = []
        self.events: list[dict] = []
        self.next_tid: dict[int, int] = {}

    def process(self, pid: int, name: str) -> None:
        self.meta.append({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": name}})
        self.meta.append(
            {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}}
        )

    def thread(self, pid: int, name: str) -> int:
        tid = self.next_tid.get(pid, 1)
        self.next_tid[pid] = tid + 1
        self.meta.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
        self.meta.append(
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}
        )
        return tid

    def slices(self, pid: int, label: str, items: list[tuple[int, int, str, str, dict]]) -> None:
        """Slices (start_ps, end_ps, name, category, args) on lanes ``label``, ``label 2``, ..."""
        if not items:
            return
        lane = lanes([it[0] for it in items], [it[1] for it in items])
        tids = [self.thread(pid, label if k == 0 else f"{label} {k + 1}") for k in range(max(lane) + 1)]
        for (start, end, name, cat, args), k in zip(items, lane, strict=True):
            ts = _us(start)
            self.events.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": tids[k],
                    "ts": ts,
                    "dur": (int(end) // 1000 - int(start) // 1000) / 1000,
                    "name": name,
                    "cat": cat,
                    "args": {"start_ps": int(start), "end_ps": int(end), **args},
                }
            )

    def instant(self, pid: int, tid: int, t_ps: int, name: str, cat: str, args: dict) -> None:
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "pid": pid,
                "tid": tid,
                "ts": _us(t_ps),
                "name": name,
                "cat": cat,
                "args": {"time_ps": int(t_ps), **args},
            }
        )

    def counter(self, t_ps: int, name: str, value: float) -> None:
        self.events.append(
            {
                "ph": "C",
                "pid": PID_RUN,
                "tid": 0,
                "ts": _us(t_ps),
                "name": name,
                "args": {"value": _clean(value)},
            }
        )


def _rows(table, columns) -> list[dict]:
    return table.select([c for c in columns if c in table.column_names]).to_pylist()


_OP_ARGS = (
    "op_id",
    "iteration",
    "stage",
    "phase",
    "kind",
    "algorithm",
    "requested",
    "protocol",
    "channels",
    "size_bytes",
    "n_ranks",
    "period",
    "time_ps",
    "algbw_GBps",
    "busbw_GBps",
    "flows",
    "retransmits",
    "rewrite",
)


#: the args of an op's slice on a GPU track (its stage slice has them all)
_GPU_OP_ARGS = ("op_id", "stage", "size_bytes", "algorithm", "n_ranks", "busbw_GBps", "finished")


def _op_items(res, end_ps: int) -> tuple[list[tuple], int]:
    """(start, end, name, stage, args) per started op, in ops' row order, and the count of
    ops that never started (no slice). An unfinished op runs to the end of the run."""
    rows = _rows(res.ops, ("start_ps", "end_ps", *_OP_ARGS))
    items, never = [], 0
    for r in rows:
        start, end = r.pop("start_ps"), r.pop("end_ps")
        if start < 0:
            never += 1
            items.append(None)
            continue
        done = end >= 0
        args = {k: _clean(v) for k, v in r.items()} | {"finished": done}
        name = f"{r['kind']} {r['phase']}" + ("" if done else " (unfinished)")
        items.append((start, end if done else max(end_ps, start), name, r["stage"], args))
    return items, never


def _stage_processes(tr: _Trace, res, ops: list) -> None:
    stage_names = list(dict.fromkeys(res.stages["stage"].to_pylist() + res.ops["stage"].to_pylist()))
    spans: dict[str, list] = {s: [] for s in stage_names}
    for r in res.stages.to_pylist():
        if r["start_ps"] >= 0:
            end = r["end_ps"] if r["end_ps"] >= 0 else max(res.run.get("sim_ps", 0), r["start_ps"])
            spans[r["stage"]].append(
                (
                    r["start_ps"],
                    end,
                    f"{r['stage']} iteration {r['iteration']}",
                    r["stage"],
                    {"iteration": r["iteration"], "ops": r["ops"], "finished": r["end_ps"] >= 0},
                )
            )
    per_stage: dict[str, list] = {s: [] for s in stage_names}
    for item in ops:
        if item is not None:
            per_stage[item[3]].append(item)
    for k, stage in enumerate(stage_names):
        pid = PID_STAGE0 + k
        tr.process(pid, f"stage {stage}")
        tr.slices(pid, "iterations", spans[stage])
        tr.slices(pid, "ops", per_stage[stage])


def _gpu_items(res, ops: list, max_gpu_slices: int, notes: list) -> dict[int, list]:
    """Per GPU, the slices of the ops it takes part in (``res.op_ranks``)."""
    out: dict[int, list] = {}
    if res.op_ranks is None or not len(ops):
        return out
    ranks = res.op_ranks.to_pylist()
    total = sum(len(r) for r, item in zip(ranks, ops, strict=True) if item is not None)
    if total > max_gpu_slices:
        notes.append(
            f"GPU op slices left out: {total:,} (an op on each of its GPUs) > max_gpu_slices="
            f"{max_gpu_slices:,}; the stage tracks have every op"
        )
        return out
    for gpus, item in zip(ranks, ops, strict=True):
        if item is not None:
            # the op's row is on its stage slice: here what tells it apart, once per GPU
            start, end, name, stage, args = item
            short = (start, end, name, stage, {k: args[k] for k in _GPU_OP_ARGS})
            for g in gpus:
                out.setdefault(g, []).append(short)
    return out


def _flow_items(res, end_ps: int, max_flows: int, notes: list) -> dict[int, list]:
    """Per source GPU, the slices of its flows (the first ``max_flows`` by start)."""
    out: dict[int, list] = {}
    flows = res.flows
    if flows.num_rows == 0:
        if res.flows_path:
            notes.append(f"flows left out: they were streamed to {res.flows_path}")
        return out
    start = flows["start_ps"].to_numpy()
    keep = np.lexsort((flows["flow_id"].to_numpy(), start))
    if len(keep) > max_flows:
        notes.append(f"flows: the first {max_flows:,} of {len(keep):,} by start (max_flows)")
        keep = np.sort(keep[:max_flows])
    cols = (
        "flow_id",
        "op_id",
        "src",
        "dst",
        "size_bytes",
        "fct_ps",
        "ideal_fct_ps",
        "slowdown",
        "delivered_bytes",
        "retransmits",
        "job",
    )
    rows = _rows(flows.take(keep), (*cols, "start_ps", "end_ps"))
    for r in rows:
        s, e = r.pop("start_ps"), r.pop("end_ps")
        done = e >= 0
        args = {k: _clean(v) for k, v in r.items()} | {"finished": done}
        name = f"flow to GPU {r['dst']}" + ("" if done else " (unfinished)")
        out.setdefault(r["src"], []).append((s, e if done else max(end_ps, s), name, "flow", args))
    return out


def _circuits(tr: _Trace, res) -> int:
    rows = res.circuits.to_pylist()
    if not rows:
        return 0
    tid = tr.thread(PID_RUN, "circuit plans")
    for r in rows:
        tr.instant(
            PID_RUN,
            tid,
            r["time_ps"],
            f"plan {r['plan_id']}: +{r['added']} -{r['removed']}",
            "circuits",
            {k: r[k] for k in ("plan_id", "added", "removed", "dark_ps", "period")},
        )
    dark = [
        (
            r["time_ps"],
            r["time_ps"] + r["dark_ps"],
            f"dark: plan {r['plan_id']} (+{r['added']})",
            "circuits",
            {"plan_id": r["plan_id"], "added": r["added"], "dark_ps": r["dark_ps"]},
        )
        for r in rows
        if r["dark_ps"] > 0 and r["added"] > 0
    ]
    tr.slices(PID_RUN, "dark circuits", dark)
    return len(rows)


def _failures(tr: _Trace, res, end_ps: int) -> int:
    rows = res.link_changes.to_pylist()
    if not rows:
        return 0
    names = {}
    for r in _rows(res.links, ("link_id", "direction", "kind", "src_name", "dst_name")):
        if r["direction"] == 0:
            names[r["link_id"]] = f"link {r['link_id']} {r['src_name']}-{r['dst_name']} ({r['kind']})"
    tid = tr.thread(PID_RUN, "link changes")
    down: dict[int, int] = {}
    periods = []
    for r in rows:  # by time (LINK_CHANGE_SCHEMA)
        link = r["link_id"]
        name = names.get(link, f"link {link}")
        tr.instant(
            PID_RUN,
            tid,
            r["time_ps"],
            f"{name} {'up' if r['up'] else 'down'}",
            "failures",
            {"link_id": link, "up": r["up"]},
        )
        if not r["up"] and link not in down:
            down[link] = r["time_ps"]
        elif r["up"] and link in down:
            periods.append((down.pop(link), r["time_ps"], f"{name} down", "failures", {"link_id": link}))
    for link, t in down.items():
        periods.append(
            (
                t,
                max(end_ps, t),
                f"{names.get(link, f'link {link}')} down",
                "failures",
                {"link_id": link, "repaired": False},
            )
        )
    tr.slices(PID_RUN, "links down", periods)
    return len(rows)


def _step_counter(
    tr: _Trace, name: str, times: np.ndarray, values: np.ndarray, period: int, window: bool
) -> None:
    """A counter sampled every ``period`` with values at ``times`` and zero at the samples in
    between (a sample with no row had nothing to count): a zero follows each run of rows. A
    viewer holds a counter's value until its next one, so a ``window`` value (what the window
    ending at the sample measured) is drawn from the window's start, ``t - period``; a value at
    the sample instant (a queue) from ``t``."""
    shift = period if window else 0
    for i, (t, v) in enumerate(zip(times.tolist(), values.tolist(), strict=True)):
        tr.counter(t - shift, name, v)
        if i + 1 == len(times) or times[i + 1] > t + period:
            tr.counter(t + period - shift, name, 0.0)


def _samples(res, notes: list):
    queues, rates = res.queue_samples, res.rate_samples
    if queues.num_rows == 0 and rates.num_rows == 0 and res.samples_path:
        import pyarrow.parquet as pq

        base = Path(res.samples_path)
        try:
            queues = pq.read_table(base / "queues") if (base / "queues").exists() else queues
            rates = pq.read_table(base / "rates") if (base / "rates").exists() else rates
        except OSError as exc:
            notes.append(f"counters left out: could not read {base} ({exc})")
    return queues, rates


def _counters(tr: _Trace, res, notes: list) -> list[str]:
    period = res.run.get("sample_every_ps")
    if not period:
        return []
    queues, rates = _samples(res, notes)
    names = []
    if queues.num_rows:
        links = res.links
        kind_of = dict(zip(links["link_id"].to_pylist(), links["kind"].to_pylist(), strict=True))
        directions = {}
        for k in links["kind"].to_pylist():
            directions[k] = directions.get(k, 0) + 1
        link = queues["link_id"].to_numpy()
        kinds = np.array([kind_of[x] for x in link.tolist()], dtype=object)
        time = queues["time_ps"].to_numpy()
        util = queues["utilization"].to_numpy()
        qb = queues["queue_bytes"].to_numpy()
        for k in sorted(directions):
            sel = kinds == k
            if not sel.any():
                continue
            t, inv = np.unique(time[sel], return_inverse=True)
            u, q = util[sel], qb[sel]
            series = {
                f"utilization mean {k}": np.bincount(inv, u, len(t)) / directions[k],
                f"utilization max {k}": _group_max(inv, u, len(t)),
                f"queue bytes {k}": np.bincount(inv, q, len(t)),
                f"queue max bytes {k}": _group_max(inv, q.astype(float), len(t)),
            }
            for name, values in series.items():
                _step_counter(tr, name, t, values, period, window=name.startswith("utilization"))
                names.append(name)
    if rates.num_rows:
        t, inv = np.unique(rates["time_ps"].to_numpy(), return_inverse=True)
        _step_counter(
            tr,
            "goodput Gbps",
            t,
            np.bincount(inv, rates["rate_bps"].to_numpy(), len(t)) / 1e9,
            period,
            window=True,
        )
        names.append("goodput Gbps")
    return names


def _group_max(inv: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, -np.inf)
    np.maximum.at(out, inv, values)
    return out


def build_timeline(
    res, *, gpus: bool = True, max_flows: int = 100_000, max_gpu_slices: int = 500_000
) -> dict:
    """The run ``res`` (a Results) as a Chrome trace event JSON object (module docstring).

    ``gpus``: add the per-GPU tracks (ops on each of their GPUs, flows on their source GPU);
    ``max_flows``: the most flows drawn (the first by start); ``max_gpu_slices``: above this
    many (op, GPU) slices the per-GPU op tracks are left out. What was left out is listed in
    ``otherData["notes"]``.
    """
    for name, value in (("max_flows", max_flows), ("max_gpu_slices", max_gpu_slices)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise SpecError(f"build_timeline: {name} must be a non-negative integer, got {value!r}")
    run = res.run
    end_ps = max(int(run.get("sim_ps") or 0), int(run.get("makespan_ps") or 0))
    notes: list[str] = []
    tr = _Trace()
    tr.process(PID_RUN, "run")
    plans = _circuits(tr, res)
    changes = _failures(tr, res, end_ps)
    counters = _counters(tr, res, notes)
    ops, never = _op_items(res, end_ps)
    if never:
        notes.append(f"{never:,} op(s) never started: no slice")
    _stage_processes(tr, res, ops)
    flows_drawn = 0
    if gpus:
        on_gpu = _gpu_items(res, ops, max_gpu_slices, notes)
        flows = _flow_items(res, end_ps, max_flows, notes)
        flows_drawn = sum(len(v) for v in flows.values())
        for g in sorted(set(on_gpu) | set(flows)):
            pid = PID_GPU0 + g
            tr.process(pid, f"GPU {g}")
            tr.slices(pid, "ops", on_gpu.get(g, []))
            tr.slices(pid, "flows", flows.get(g, []))
    # per track by time (the format does not require it; readers and diffs like it)
    tr.events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], e["ph"] != "X", e["name"]))
    info = {
        "generator": "rfabric",
        "time_unit": "ts and dur in microseconds on whole ns; args start_ps/end_ps/time_ps exact",
        "backend": run.get("backend"),
        "seed": run.get("seed"),
        "makespan_ps": run.get("makespan_ps"),
        "sim_ps": run.get("sim_ps"),
        "ops": res.ops.num_rows,
        "op_slices": sum(item is not None for item in ops),
        "flows_drawn": flows_drawn,
        "plans": plans,
        "link_changes": changes,
        "counters": counters,
        "notes": notes,
    }
    # "ms" is the format's default display unit; some Perfetto releases read "ns" as the unit
    # of ts itself (timelines 1000x too short), so the file does not say "ns"
    return {"traceEvents": tr.meta + tr.events, "displayTimeUnit": "ms", "otherData": info}


def write_timeline(res, path, **options) -> dict:
    """Write ``build_timeline(res, **options)`` to ``path`` as JSON; returns its ``otherData``."""
    doc = build_timeline(res, **options)
    path = Path(path)
    # (one string, then one write: json.dump to a file writes in small pieces, 2-3x slower)
    path.write_text(json.dumps(doc, separators=(",", ":"), allow_nan=False))
    return doc["otherData"]
