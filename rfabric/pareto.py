"""Cost/performance Pareto fronts of sweep tables: mark, export, plot.

``front(table)`` adds a bool column ``pareto``: a row is on the front when no other row is at
most as expensive and at least as good, and strictly better in one of the two. ``export``
writes a table to Parquet or CSV; ``plot`` draws cost (x) against performance (y), one curve
per fabric and one marker per link speed, with the front as a wide grey band (the paper's
figure 16), to PNG, SVG or PDF with matplotlib's Agg backend (no display needed).

Which way is better comes from the column's name (``direction``, used by both ``front`` and
``plot``): costs (``*_usd``) and times (``*_s``, ``*_ps``) are minimised, throughputs
(``throughput*``, ``*_per_s``, ``*_per_musd``) maximised; another column needs
``higher_is_better=``. Rows of different workloads or scales are not comparable: ``front``
gives each (``workload``, ``gpus``) its own front unless ``by=`` says otherwise.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import SpecError

__all__ = ["front", "export", "plot", "direction", "LABELS", "DIRECTIONS", "DEFAULT_BY", "RENAMED"]

#: Axis labels (with units) of the sweep columns one usually plots.
LABELS = {
    "network_cost_usd": "network cost",
    "cluster_cost_usd": "cluster cost (network + GPUs)",
    "throughput_iter_per_s": "throughput (RL iterations/s)",
    "samples_per_s": "throughput (samples/s)",
    "iteration_time_ps": "iteration time",
    "makespan_ps": "makespan",
    "throughput_per_musd": "throughput per network dollar (iterations/s per M USD)",
}

#: Which way the sweep's columns are better: "min" (costs, times) or "max" (throughputs).
#: Other names follow ``direction``'s suffix rules.
DIRECTIONS = {
    "network_cost_usd": "min",
    "cluster_cost_usd": "min",
    "iteration_time_ps": "min",
    "makespan_ps": "min",
    "throughput_iter_per_s": "max",
    "samples_per_s": "max",
    "throughput_per_musd": "max",
}
_MAX_SUFFIXES = ("_per_s", "_per_musd")
_MIN_SUFFIXES = ("_usd", "_s", "_ps")

#: Sweep columns renamed in rfabric 0.2 (simulated times in integer ps, as in every table):
#: ``front`` and ``plot`` still take the old name for a table that has the new column, with a
#: DeprecationWarning, until the release after.
RENAMED = {
    "makespan_s": "makespan_ps",
    "iteration_time_s": "iteration_time_ps",
    "stage_gen_s": "stage_gen_ps",
    "stage_response_stream_s": "stage_response_stream_ps",
    "stage_train_s": "stage_train_ps",
    "stage_weight_sync_s": "stage_weight_sync_ps",
}

#: Columns whose distinct values get separate fronts by default (when the table has them).
DEFAULT_BY = ("workload", "gpus")

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def _renamed(table: pa.Table, name, where: str):
    """``name``, or the column it was renamed to (``RENAMED``) when the table has only that,
    with a DeprecationWarning."""
    new = RENAMED.get(name) if isinstance(name, str) else None
    if new is None or name in table.column_names or new not in table.column_names:
        return name
    warnings.warn(
        f"{where}: column {name!r} is now {new!r} (integer ps, as every time column); the old name "
        "goes after rfabric 0.2",
        DeprecationWarning,
        stacklevel=3,
    )
    return new


def _time_scale(values: np.ndarray) -> tuple[float, str]:
    from .plot import time_scale

    top = np.nanmax(values) if np.any(np.isfinite(values)) else 0.0
    return time_scale(top)


def _column(table: pa.Table, name: str, what: str) -> np.ndarray:
    if name not in table.column_names:
        raise SpecError(f"pareto: no {what} column {name!r} (columns: {', '.join(table.column_names)})")
    col = table[name]
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise SpecError(f"pareto: {what} column {name!r} is {col.type}, not numeric")
    return col.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls become NaN


def direction(column: str) -> str:
    """``"min"`` or ``"max"``: whether lower or higher values of ``column`` are better.
    ``DIRECTIONS`` first; then throughputs (a name starting with ``throughput`` or ending in
    ``_per_s`` or ``_per_musd``) are maximised, costs (``_usd``) and times (``_s``, ``_ps``)
    minimised. Any other name raises SpecError: pass ``higher_is_better=``."""
    if column in DIRECTIONS:
        return DIRECTIONS[column]
    if column.startswith("throughput") or column.endswith(_MAX_SUFFIXES):
        return "max"
    if column.endswith(_MIN_SUFFIXES):
        return "min"
    raise SpecError(
        f"pareto: cannot tell whether higher or lower {column!r} is better (known: costs *_usd and "
        "times *_s or *_ps are minimised, throughput* and *_per_s maximised); pass higher_is_better=True "
        "or False"
    )


def _higher_is_better(perf: str, higher_is_better: bool | None) -> bool:
    if higher_is_better is None:
        return direction(perf) == "max"
    if not isinstance(higher_is_better, (bool, np.bool_)):
        raise SpecError(f"pareto: higher_is_better must be True, False or None, got {higher_is_better!r}")
    return bool(higher_is_better)


def _check_cost(cost: str) -> None:
    try:
        better = direction(cost)
    except SpecError:
        return  # a cost column of the user's: lower is better by definition
    if better == "max":
        raise SpecError(
            f"pareto: cost column {cost!r} is better when higher (a throughput): give it as perf= and a "
            "cost (e.g. network_cost_usd) as cost="
        )


def _groups(table: pa.Table, by) -> list[str]:
    if by is None:
        return [g for g in DEFAULT_BY if g in table.column_names]
    groups = [by] if isinstance(by, str) else list(by)
    for name in groups:
        if name not in table.column_names:
            raise SpecError(f"pareto: no 'by' column {name!r} (columns: {', '.join(table.column_names)})")
    return groups


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
    higher_is_better: bool | None = None,
    by=None,
) -> pa.Table:
    """Return ``table`` with a bool column ``pareto`` (replaced if present) marking its
    non-dominated rows: lower ``cost`` is better, and higher or lower ``perf`` as
    ``higher_is_better`` says; None (default): as ``direction(perf)`` says (times such as
    ``iteration_time_ps`` lower, throughputs higher; another column raises SpecError asking for
    it). Rows with a null or NaN cost or performance are not on the front.

    ``by``: column name(s) whose distinct values get separate fronts. None (default): those of
    ``DEFAULT_BY`` (``workload``, ``gpus``) the table has, since performances of different
    workloads, and costs of different scales, are not comparable; ``by=[]``: one front over
    all rows. The ``pareto`` field's metadata records cost, perf, direction and groups (what
    ``plot`` checks its axes against). A column's name before rfabric 0.2 (``RENAMED``, e.g.
    ``iteration_time_s``) reads as its new one, with a DeprecationWarning."""
    cost = _renamed(table, cost, "pareto.front")
    perf = _renamed(table, perf, "pareto.front")
    c = _column(table, cost, "cost")
    p = _column(table, perf, "performance")
    _check_cost(cost)
    higher = _higher_is_better(perf, higher_is_better)
    if not higher:
        p = -p
    mask = np.zeros(table.num_rows, dtype=bool)
    groups = _groups(table, by)
    if groups:
        keys = list(zip(*(table[g].to_pylist() for g in groups), strict=True))
        for key in dict.fromkeys(keys):
            idx = np.flatnonzero(np.array([k == key for k in keys], dtype=bool))
            mask[idx] = _front_mask(c[idx], p[idx])
    else:
        mask = _front_mask(c, p)
    if "pareto" in table.column_names:
        table = table.drop_columns(["pareto"])
    meta = {"cost": cost, "perf": perf, "higher_is_better": json.dumps(higher), "by": json.dumps(groups)}
    field = pa.field("pareto", pa.bool_(), metadata={f"rfabric.pareto.{k}": v for k, v in meta.items()})
    return table.append_column(field, pa.array(mask, pa.bool_()))


def _front_meta(table: pa.Table) -> dict | None:
    """What ``front`` recorded on the table's ``pareto`` field, or None (a column made otherwise)."""
    md = table.schema.field("pareto").metadata or {}
    out = {
        k.decode()[len("rfabric.pareto.") :]: v.decode()
        for k, v in md.items()
        if k.startswith(b"rfabric.pareto.")
    }
    if not {"cost", "perf", "higher_is_better", "by"} <= set(out):
        return None
    return {**out, "higher_is_better": json.loads(out["higher_is_better"]), "by": json.loads(out["by"])}


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
    higher_is_better: bool | None = None,
    fabric: str = "fabric",
    link: str = "link_speed",
    title: str | None = None,
):
    """Draw cost (x) against performance (y) to ``path`` (.png, .svg or .pdf).

    One curve per fabric (its points in cost order, one colour each), one marker per link
    speed, and the Pareto front as a wide grey band behind them (a line with gid ``"front"``
    through the front's rows in cost order; one per group, gid ``"front:<group>"``, when the
    front has several groups, e.g. scales); two legends say which colour is which fabric and
    which marker which speed. Axis labels carry units.

    The front is the table's ``pareto`` column when it has one (as ``front`` marked it; if
    ``front`` recorded other axes or another direction than this plot's, SpecError), else
    ``front(table, cost, perf, higher_is_better)``. ``higher_is_better``: as in ``front``
    (None: from the column's name, ``direction``). The table must hold a single workload
    (performances of different workloads are not comparable); filter it first. Returns the
    matplotlib Figure. Time axes (``*_ps``) are drawn in the largest unit that fits; a
    column's name before rfabric 0.2 (``RENAMED``) reads as its new one, with a
    DeprecationWarning.
    """
    from ._optional import require

    matplotlib = require("matplotlib", "plot", "rf.pareto.plot")
    Line2D = require("matplotlib.lines", "plot", "rf.pareto.plot").Line2D

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
    cost = _renamed(table, cost, "pareto.plot")
    perf = _renamed(table, perf, "pareto.plot")
    x = _column(table, cost, "cost")
    y = _column(table, perf, "performance")
    if "pareto" not in table.column_names:
        table = front(table, cost, perf, higher_is_better)
    meta = _front_meta(table)
    if meta is not None:
        asked = None if higher_is_better is None else _higher_is_better(perf, higher_is_better)
        if (meta["cost"], meta["perf"]) != (cost, perf) or asked not in (None, meta["higher_is_better"]):
            better = "higher" if meta["higher_is_better"] else "lower"
            raise SpecError(
                f"pareto.plot: the table's pareto column marks the front of {meta['perf']!r} ({better} is "
                f"better) against {meta['cost']!r}, but the plot draws {perf!r} against {cost!r}: mark it "
                f"again with rf.pareto.front(table, cost={cost!r}, perf={perf!r}) or drop the column"
            )
        group_cols = [g for g in meta["by"] if g in table.column_names]
    else:  # a pareto column made otherwise: drawn as given
        if not pa.types.is_boolean(table["pareto"].type):
            raise SpecError(f"pareto.plot: the pareto column is {table['pareto'].type}, not bool")
        group_cols = [g for g in DEFAULT_BY if g in table.column_names]
    on_front = table["pareto"].fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
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
    elif cost.endswith("_ps"):
        scale, unit = _time_scale(x)
        xlabel = f"{LABELS.get(cost, cost)} ({unit})"
    else:
        scale, xlabel = 1.0, LABELS.get(cost, cost)
    xs = x / scale
    ylabel = LABELS.get(perf, perf)
    if perf.endswith("_ps"):
        yscale, unit = _time_scale(y)
        y = y / yscale
        ylabel = f"{ylabel} ({unit})"

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
    keys = list(zip(*(table[g].to_pylist() for g in group_cols), strict=True)) or [()] * table.num_rows
    distinct = list(dict.fromkeys(k for k, on in zip(keys, on_front, strict=True) if on))
    for key in distinct:
        fr = np.flatnonzero(on_front & np.array([k == key for k in keys], dtype=bool))
        fr = fr[np.lexsort((y[fr], xs[fr]))]
        gid = "front" if len(distinct) == 1 else "front:" + ",".join(map(str, key))
        ax.plot(xs[fr], y[fr], "-", color="black", alpha=0.18, linewidth=8, zorder=0, gid=gid)
    front_handle = Line2D([], [], color="black", alpha=0.18, linewidth=8, label="Pareto front")
    speed_handles = [
        Line2D([], [], linestyle="none", marker=marker[s], color="grey", markeredgecolor="black", label=s)
        for s in speeds
    ]
    # figure legends outside the axes (right; constrained layout makes room): no point hidden
    fig.legend(handles=[*fabric_handles, front_handle], title="fabric", loc="outside right upper", fontsize=8)
    fig.legend(handles=speed_handles, title="link speed", loc="outside right lower", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
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
