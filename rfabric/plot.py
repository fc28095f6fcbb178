"""What a researcher looks at after a run: ``res.plot.fct_cdf()``, ``res.plot.link_utilization()``
and ``res.plot.stage_timeline()``.

This module depends on rfabric.results, not the reverse: it registers ``ResultPlots`` as the
``plot`` view of every Results (``rfabric.results.register_view``) when rfabric is imported.

Each draws with matplotlib's Agg backend (no display needed) into a new Figure, or into the
axes given as ``ax=``, and returns the Figure. Axis labels carry units. A result that lacks what
a plot needs (no per-flow rows, no stages) raises ``SpecError`` saying what to enable.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import SpecError
from .results import QUEUE_SAMPLE_SCHEMA, register_view
from .units import format_time

__all__ = ["ResultPlots", "new_axes", "time_scale"]

_TIME_UNITS = ((10**12, "s"), (10**9, "ms"), (10**6, "µs"), (10**3, "ns"), (1, "ps"))


def new_axes(ax=None, figsize=(6.4, 4.0)):
    """``(fig, ax)``: ``ax`` and its figure when given, else a new Agg Figure (no pyplot, no
    display) with one constrained-layout axes."""
    if ax is not None:
        return ax.figure, ax
    from ._optional import require

    FigureCanvasAgg = require("matplotlib.backends.backend_agg", "plot", "Results.plot").FigureCanvasAgg
    Figure = require("matplotlib.figure", "plot", "Results.plot").Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def time_scale(max_ps: float) -> tuple[float, str]:
    """``(ps per unit, unit)`` of the largest time unit in which ``max_ps`` is at least 1."""
    for scale, unit in _TIME_UNITS:
        if max_ps >= scale:
            return float(scale), unit
    return 1.0, "ps"


def cdf_points(values) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` of the empirical CDF of ``values``: x sorted, y = (i + 1) / n (ends at 1)."""
    x = np.sort(np.asarray(values))
    return x, np.arange(1, len(x) + 1) / max(len(x), 1)


@register_view("plot")
class ResultPlots:
    """The plots of one ``Results`` (``res.plot``)."""

    def __init__(self, results):
        self._res = results

    def _flows(self) -> pa.Table:
        res = self._res
        if res.flows_path is not None:
            import pyarrow.parquet as pq

            return pq.read_table(res.flows_path)
        if res.flows.num_rows == 0 and not res.run.get("flows_recorded", True):
            raise SpecError(
                "this run kept no per-flow rows: simulate with record_flows=True (a trace "
                "workload records only per-op and per-stage results by default)"
            )
        return res.flows

    def _queue_samples(self) -> pa.Table:
        res = self._res
        if res.samples_path is None:
            return res.queue_samples
        import pyarrow.parquet as pq

        parts = sorted((Path(res.samples_path) / "queues").glob("*.parquet"))
        return (
            pa.concat_tables([pq.read_table(p) for p in parts])
            if parts
            else QUEUE_SAMPLE_SCHEMA.empty_table()
        )

    def fct_cdf(self, ax=None, *, slowdown: bool = False, log: bool = False):
        """CDF of the finished flows' completion times (``fct_ps``, in the largest time unit
        that fits), or of their ``slowdown`` (FCT over the ideal) with ``slowdown=True``.
        ``log``: logarithmic x axis. Unfinished flows are left out (the title counts them).
        Returns the Figure."""
        flows = self._flows()
        done = flows["end_ps"].to_numpy() >= 0
        if not done.any():
            raise SpecError("fct_cdf: no flow finished (nothing to plot)")
        fig, ax = new_axes(ax)
        if slowdown:
            x, y = cdf_points(flows["slowdown"].to_numpy(zero_copy_only=False)[done])
            ax.set_xlabel("slowdown (FCT / ideal FCT, dimensionless)")
        else:
            fct = flows["fct_ps"].to_numpy()[done]
            scale, unit = time_scale(fct.max())
            x, y = cdf_points(fct / scale)
            ax.set_xlabel(f"flow completion time ({unit})")
        ax.step(x, y, where="post", gid="cdf")
        ax.set_ylabel("fraction of flows")
        ax.set_ylim(0, 1.02)
        if log:
            ax.set_xscale("log")
        ax.grid(True, linewidth=0.4, alpha=0.5)
        ax.set_title(
            f"{int(done.sum()):,} of {len(done):,} flows finished ({self._res.run.get('backend')} backend)",
            fontsize=10,
        )
        return fig

    def link_utilisation(self, ax=None, *, kinds=None, over_time: bool = False):
        """Deprecated spelling of :meth:`link_utilization` (removed after 0.2)."""
        warnings.warn(
            "res.plot.link_utilisation() is now res.plot.link_utilization() (one spelling); "
            "the old name goes after rfabric 0.2",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.link_utilization(ax, kinds=kinds, over_time=over_time)

    def link_utilization(self, ax=None, *, kinds=None, over_time: bool = False):
        """CDF, per link kind (``nic``, ``tor-agg``, ...), of the link directions' utilization:
        the share of the run (its makespan, or its simulated time if unfinished) each spent
        serializing, in percent. ``over_time=True`` (a run with ``sample_every``): instead,
        per kind, the mean utilization of its link directions in each sampling window, in
        percent, against time. ``kinds``: the kinds to draw (default all, in table order).
        Returns the Figure."""
        res = self._res
        links = res.links
        if links.num_rows == 0:
            raise SpecError("link_utilization: the run has no links")
        kind = np.asarray(links["kind"].to_pylist(), dtype=object)
        names = list(dict.fromkeys(kind)) if kinds is None else list(kinds)
        unknown = [k for k in names if k not in set(kind)]
        if unknown:
            raise SpecError(
                f"link_utilization: no links of kind {', '.join(map(repr, unknown))} "
                f"(kinds: {', '.join(dict.fromkeys(kind))})"
            )
        fig, ax = new_axes(ax)
        if over_time:
            period = res.run.get("sample_every_ps")
            if period is None:
                raise SpecError(
                    "link_utilization(over_time=True) needs samples: simulate with "
                    "sample_every='10us' (or another period; packet backend)"
                )
            q = self._queue_samples()
            # res.links has a row per port: link_id * 2 + direction
            row = q["link_id"].to_numpy() * 2 + q["direction"].to_numpy()
            slot = q["time_ps"].to_numpy() // period - 1  # window index (samples from `period` on)
            n = int(slot.max()) + 1 if len(slot) else 0
            scale, unit = time_scale(n * period)
            t = np.arange(1, n + 1) * period / scale
            util = q["utilization"].to_numpy() * 100
            for k in names:
                sel = kind[row] == k
                mean = np.bincount(slot[sel], weights=util[sel], minlength=n) / np.sum(kind == k)
                ax.plot(t, mean, label=f"{k} ({np.sum(kind == k)})", gid=f"time:{k}")
            ax.set_xlabel(
                f"simulated time ({unit}; each point: the window of {format_time(period)} ending there)"
            )
            ax.set_ylabel("mean link utilization (% of the window)")
        else:
            util = links["utilization"].to_numpy() * 100
            for k in names:
                x, y = cdf_points(util[kind == k])
                ax.step(x, y, where="post", label=f"{k} ({len(x)})", gid=f"cdf:{k}")
            ax.set_xlabel("link utilization (% of the run spent serializing)")
            ax.set_ylabel("fraction of link directions")
            ax.set_ylim(0, 1.02)
        ax.grid(True, linewidth=0.4, alpha=0.5)
        ax.legend(title="link kind (directions)", fontsize=8)
        return fig

    def stage_timeline(self, ax=None, *, ops: bool = True):
        """Gantt chart of a trace run: one row per stage (in order of first start), a wide
        bar per iteration from the stage's first op start to its last op end, and
        (``ops=True``) each op as a thin bar inside it; x in the largest time unit that fits.
        A stage that did not finish is drawn hatched up to the end of the run; an op that did
        not finish, up to the end of the run too. Returns the Figure."""
        res = self._res
        stages = res.stages
        if stages.num_rows == 0:
            raise SpecError(
                "stage_timeline needs per-stage times, which only a trace workload "
                "(rfabric.traces.Trace) has: a Flows workload has no ops or stages"
            )
        end_of_run = res.run.get("sim_ps", 0)
        st_start = stages["start_ps"].to_numpy()
        st_end = stages["end_ps"].to_numpy()
        # rows top down in order of first start; stages that never started last
        first = {}
        for name, start in zip(stages["stage"].to_pylist(), st_start, strict=True):
            first[name] = min(first.get(name, np.inf), start if start >= 0 else np.inf)
        names = sorted(first, key=lambda n: first[n])
        scale, unit = time_scale(max(int(st_end.max()), end_of_run, 1))
        fig, ax = new_axes(ax, figsize=(8.0, 1.0 + 0.6 * len(names)))
        st_name = np.asarray(stages["stage"].to_pylist(), dtype=object)
        op_name = np.asarray(res.ops["stage"].to_pylist(), dtype=object)
        op_start = res.ops["start_ps"].to_numpy()
        op_end = res.ops["end_ps"].to_numpy()
        for row, name in enumerate(names):
            sel = (st_name == name) & (st_start >= 0)
            for unfinished in (False, True):
                part = sel & ((st_end < 0) == unfinished)
                if not part.any():
                    continue
                ends = np.where(st_end[part] >= 0, st_end[part], end_of_run)
                spans = list(zip(st_start[part] / scale, (ends - st_start[part]) / scale, strict=True))
                ax.broken_barh(
                    spans,
                    (row - 0.4, 0.8),
                    alpha=0.35,
                    color=f"C{row % 10}",
                    hatch="//" if unfinished else None,
                    gid=f"stage:{name}" + (":unfinished" if unfinished else ""),
                )
            if ops:
                osel = (op_name == name) & (op_start >= 0)
                ends = np.where(op_end[osel] >= 0, op_end[osel], end_of_run)
                spans = list(zip(op_start[osel] / scale, (ends - op_start[osel]) / scale, strict=True))
                ax.broken_barh(spans, (row - 0.15, 0.3), color=f"C{row % 10}", gid=f"ops:{name}")
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.invert_yaxis()
        ax.set_xlabel(f"simulated time ({unit})")
        ax.set_ylabel("stage")
        ax.grid(True, axis="x", linewidth=0.4, alpha=0.5)
        ax.set_title(
            f"{res.ops.num_rows:,} ops in {stages.num_rows} (iteration, stage) spans "
            f"({res.run.get('backend')} backend)",
            fontsize=10,
        )
        return fig
