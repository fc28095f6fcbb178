"""Cost/performance Pareto fronts of sweep tables: mark, export, plot.

``front(table)`` adds a bool column ``pareto``: a row is on the front when no other row is at
most as expensive and at least as good, and strictly better in one of the two. ``export``
writes a table to Parquet or CSV; ``plot`` draws cost (x) against performance (y), one curve
per fabric and one marker per link speed, with the front as a wide grey band (the paper's
figure 16), to PNG, SVG or PDF with matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import SpecError

__all__ = ["front", "export", "plot", "LABELS"]

#: Axis labels (with units) of the sweep columns one usually plots.
LABELS = {
    "network_cost_usd": "network cost",
    "cluster_cost_usd": "cluster cost (network + GPUs)",
    "throughput_iter_per_s": "throughput (RL iterations/s)",
    "samples_per_s": "throughput (samples/s)",
    "iteration_time_s": "iteration time (s)",
    "makespan_s": "makespan (s)",
    "throughput_per_musd": "throughput per network dollar (iterations/s per M USD)",
}

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def _column(table: pa.Table, name: str, what: str) -> np.ndarray:
    if name not in table.column_names:
        raise SpecError(f"pareto: no {what} column {name!r} (columns: {', '.join(table.column_names)})")
    col = table[name]
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise SpecError(f"pareto: {what} column {name!r} is {col.type}, not numeric")
    return col.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls become NaN


def _front_mask(cost: np.ndarray, perf: np.ndarray) -> np.ndarray:
    """Non-dominated rows, minimising cost and maximising perf; NaN rows are never on it and
    dominate nothing. Equal rows do not dominate each other (both stay)."""
    mask = np.zeros(len(cost), dtype=bool)
    ok = np.flatnonzero(np.isfinite(cost) & np.isfinite(perf))
    if not len(ok):
        return mask
    order = ok[np.lexsort((-perf[ok], cost[ok]))]  # cost ascending, perf descending
    best_cheaper = -math.inf  # best perf among rows strictly cheaper than the current group
    i = 0
    while i < len(order):
        j = i
        c = cost[order[i]]
        while j < len(order) and cost[order[j]] == c:
            j += 1
        group = order[i:j]
        top = perf[group[0]]  # the group's best (sorted descending)
        if top > best_cheaper:
            mask[group[perf[group] == top]] = True
            best_cheaper = top
        i = j
    return mask


def front(
    table: pa.Table,
    cost: str = "network_cost_usd",
    perf: str = "throughput_iter_per_s",
    higher_is_better: bool = True,
    by=None,
) -> pa.Table:
    """Return ``table`` with a bool column ``pareto`` (replaced if present) marking its
    non-dominated rows: lower ``cost`` is better, higher ``perf`` (or lower, with
    ``higher_is_better=False``, e.g. for ``iteration_time_s``). Rows with a null or NaN
    cost or performance are not on the front. ``by``: column name(s) whose distinct values
    get separate fronts (e.g. ``"workload"``, whose performances are not comparable)."""
    c = _column(table, cost, "cost")
    p = _column(table, perf, "performance")
    if not higher_is_better:
        p = -p
    mask = np.zeros(table.num_rows, dtype=bool)
    groups = [by] if isinstance(by, str) else list(by or [])
    if groups:
        for name in groups:
            if name not in table.column_names:
                raise SpecError(f"pareto: no 'by' column {name!r}")
        keys = list(zip(*(table[g].to_pylist() for g in groups), strict=True))
        for key in dict.fromkeys(keys):
            rows = np.array([k == key for k in keys])
            idx = np.flatnonzero(rows)
            mask[idx] = _front_mask(c[idx], p[idx])
    else:
        mask = _front_mask(c, p)
    if "pareto" in table.column_names:
        table = table.drop_columns(["pareto"])
    return table.append_column(pa.field("pareto", pa.bool_()), pa.array(mask, pa.bool_()))


def export(table: pa.Table, path) -> Path:
    """Write ``table`` as Parquet (``.parquet``, ``.pq``) or CSV (``.csv``; map and list
    columns become JSON text). Returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    elif suffix == ".csv":
        import pyarrow.csv as pacsv

        cols = {}
        for name in table.column_names:
            col = table[name]
            if pa.types.is_map(col.type) or pa.types.is_list(col.type) or pa.types.is_struct(col.type):
                is_map = pa.types.is_map(col.type)
                values = [
                    None if v is None else json.dumps({str(k): x for k, x in v} if is_map else v)
                    for v in col.to_pylist()
                ]
                cols[name] = pa.array(values, pa.string())
            else:
                cols[name] = col
        pacsv.write_csv(pa.table(cols), path)
    else:
        raise SpecError(f"pareto.export: {path}: unknown suffix {path.suffix!r} (use .parquet, .pq or .csv)")
    return path


def _money_scale(values: np.ndarray) -> tuple[float, str]:
    top = np.nanmax(values) if np.any(np.isfinite(values)) else 0.0
    if top >= 1e6:
        return 1e6, "million USD"
    if top >= 1e3:
        return 1e3, "thousand USD"
    return 1.0, "USD"


def plot(
    table: pa.Table,
    path,
    cost: str = "network_cost_usd",
    perf: str = "throughput_iter_per_s",
    *,
    higher_is_better: bool = True,
    fabric: str = "fabric",
    link: str = "link_speed",
    title: str | None = None,
):
    """Draw cost (x) against performance (y) to ``path`` (.png, .svg or .pdf).

    One curve per fabric (its points in cost order, one colour each), one marker per link
    speed, and the Pareto front (over all rows) as a wide grey band behind them; two legends say
    which colour is which fabric and which marker which speed. Axis labels carry units.
    The table must hold a single workload (performances of different workloads are not
    comparable); filter it first. Returns the matplotlib Figure.
    """
    import matplotlib
    from matplotlib.lines import Line2D

    from .plot import new_axes

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg", "pdf"):
        raise SpecError(f"pareto.plot: {path}: unknown suffix {path.suffix!r} (use .png, .svg or .pdf)")
    if table.num_rows == 0:
        raise SpecError("pareto.plot: the table has no rows")
    for name, what in ((fabric, "fabric"), (link, "link speed")):
        if name not in table.column_names:
            raise SpecError(f"pareto.plot: no {what} column {name!r}")
    if "workload" in table.column_names and len(set(table["workload"].to_pylist())) > 1:
        raise SpecError(
            "pareto.plot: the table holds several workloads ("
            + ", ".join(sorted(set(map(str, table["workload"].to_pylist()))))
            + "); plot one at a time, e.g. table.filter(pc.field('workload') == NAME)"
        )
    x = _column(table, cost, "cost")
    y = _column(table, perf, "performance")
    on_front = front(table, cost, perf, higher_is_better)["pareto"].to_numpy(zero_copy_only=False)
    fabrics = list(dict.fromkeys(map(str, table[fabric].to_pylist())))
    links = table[link].to_pylist()
    speeds = list(dict.fromkeys(map(str, links)))
    if "link_bps" in table.column_names:
        bps = dict(zip(map(str, links), table["link_bps"].to_pylist(), strict=True))
        speeds.sort(key=lambda s: bps[s])
    marker = {s: _MARKERS[i % len(_MARKERS)] for i, s in enumerate(speeds)}
    fab_col = np.array([str(v) for v in table[fabric].to_pylist()])
    link_col = np.array([str(v) for v in links])

    if cost.endswith("_usd"):
        scale, unit = _money_scale(x)
        xlabel = f"{LABELS.get(cost, cost)} ({unit})"
    else:
        scale, xlabel = 1.0, LABELS.get(cost, cost)
    xs = x / scale

    fig, ax = new_axes(figsize=(8.5, 5.0))
    cycle = [c["color"] for c in matplotlib.rcParams["axes.prop_cycle"]]
    fabric_handles = []
    for i, name in enumerate(fabrics):
        color = cycle[i % len(cycle)]
        rows = np.flatnonzero((fab_col == name) & np.isfinite(xs) & np.isfinite(y))
        rows = rows[np.lexsort((y[rows], xs[rows]))]
        (curve,) = ax.plot(
            xs[rows], y[rows], "-", color=color, linewidth=1.4, alpha=0.8, label=name, gid=f"curve:{name}"
        )
        fabric_handles.append(curve)
        for s in speeds:
            sel = rows[link_col[rows] == s]
            if len(sel):
                ax.plot(
                    xs[sel],
                    y[sel],
                    linestyle="none",
                    marker=marker[s],
                    color=color,
                    markersize=7,
                    markeredgecolor="black",
                    markeredgewidth=0.6,
                    gid=f"points:{name}:{s}",
                )
    fr = np.flatnonzero(on_front)
    if len(fr):
        fr = fr[np.lexsort((y[fr], xs[fr]))]
        ax.plot(xs[fr], y[fr], "-", color="black", alpha=0.18, linewidth=8, zorder=0, gid="front")
    front_handle = Line2D([], [], color="black", alpha=0.18, linewidth=8, label="Pareto front")
    speed_handles = [
        Line2D([], [], linestyle="none", marker=marker[s], color="grey", markeredgecolor="black", label=s)
        for s in speeds
    ]
    # figure legends outside the axes (right; constrained layout makes room): no point hidden
    fig.legend(handles=[*fabric_handles, front_handle], title="fabric", loc="outside right upper", fontsize=8)
    fig.legend(handles=speed_handles, title="link speed", loc="outside right lower", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(LABELS.get(perf, perf))
    ax.grid(True, linewidth=0.4, alpha=0.5)
    if title is None:
        parts = []
        if "workload" in table.column_names:
            parts.append(str(table["workload"][0].as_py()))
        if "gpus" in table.column_names:
            g = sorted(set(table["gpus"].to_pylist()))
            parts.append(f"{', '.join(map(str, g))} GPUs")
        title = "cost vs performance" + (f": {'; '.join(parts)}" if parts else "")
    ax.set_title(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=fmt, dpi=120)
    return fig
