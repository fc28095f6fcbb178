"""A sweep's rows as one self-contained HTML page: ``rf.report.write(table, "report.html")``.

The page shows, for a sweep table (``rf.sweep``'s rows, or its Parquet or CSV file):

* the cost/performance Pareto front, one plot per workload and scale (the groups of
  ``rf.pareto.front``): each fabric a line through its points in cost order, one marker per
  link speed, and the front as a wide grey band through the rows its ``pareto`` column marks;
* the per-stage times of each fabric (the ``stage_<name>_ps`` columns) as grouped bars, with
  the makespan beside them (stage spans overlap, so they do not add up to it);
* every row as a table whose columns sort on a click (a few lines of inline JavaScript).

The plots are plotly's (the ``report`` extra, imported when a page is written); plotly.js is
embedded in the page, which needs no network to open. Each figure's JSON sits in a
``<script type="application/json">`` block that a few lines of script hand to
``Plotly.newPlot``, so the data are readable in the file itself. docs/report.md has the details.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import pareto
from ._version import __version__
from .errors import SpecError

__all__ = ["write", "render", "read"]

_STAGE_COLUMN = re.compile(r"^stage_(.+)_ps$")
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "triangle-down", "star", "pentagon")
_COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: Columns shown first in the rows table (when the table has them); the others follow in order.
_FIRST = (
    "pareto",
    "fabric",
    "link_speed",
    "gpus",
    "workload",
    "controller",
    "network_cost_usd",
    "throughput_iter_per_s",
    "iteration_time_ps",
)


def read(path) -> pa.Table:
    """A sweep table from a Parquet (``.parquet``, ``.pq``) or CSV (``.csv``) file."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"report: {path}: no such file (give a sweep's .parquet or .csv)")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(path)
        if suffix == ".csv":
            import pyarrow.csv as pacsv

            return pacsv.read_csv(path)
    except pa.ArrowInvalid as exc:
        raise SpecError(f"report: {path}: not a readable {suffix[1:]} file: {exc}") from None
    raise SpecError(f"report: {path}: unknown suffix {path.suffix!r} (use .parquet, .pq or .csv)")


_money = pareto._money_scale  # the axis units rf.pareto.plot draws in


def _time(values) -> tuple[float, str]:
    """(divisor, unit) of a readable time unit for ps values (None left out), as rf.pareto.plot."""
    return pareto._time_scale(np.array([v for v in values if v is not None], dtype=float))


def _readable(ps: int) -> str:
    """A time in ps as text in its own unit: ``78.2 ms``."""
    scale, unit = _time([ps])
    return f"{ps / scale:.4g} {unit}"


def _axis(table: pa.Table, name: str, values: np.ndarray, better: str) -> tuple[float, str]:
    """(divisor, axis title) of a plotted column: money and times in a readable unit."""
    label = pareto.LABELS.get(name, name)
    if name.endswith("_usd"):
        scale, unit = _money(values)
        label = f"{label} ({unit})"
    elif name.endswith("_ps"):
        scale, unit = _time(values)
        label = f"{label} ({unit})"
    else:
        scale = 1.0
    return scale, f"{label}, {better} is better"


def _fmt_number(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def _prepare(table: pa.Table, cost, perf, higher_is_better):
    """The table with its ``pareto`` column (the table's own, or ``front``'s), the axes, the
    direction and the front's groups."""
    if table.num_rows == 0:
        raise SpecError("report: the table has no rows")
    if "fabric" not in table.column_names:
        raise SpecError(f"report: no 'fabric' column (columns: {', '.join(table.column_names)})")
    meta = pareto._front_meta(table) if "pareto" in table.column_names else None
    if meta is not None:
        cost = meta["cost"] if cost is None else cost
        perf = meta["perf"] if perf is None else perf
        asked = None if higher_is_better is None else pareto._higher_is_better(perf, higher_is_better)
        if (meta["cost"], meta["perf"]) != (cost, perf) or asked not in (None, meta["higher_is_better"]):
            better = "higher" if meta["higher_is_better"] else "lower"
            raise SpecError(
                f"report: the table's pareto column marks the front of {meta['perf']!r} ({better} is "
                f"better) against {meta['cost']!r}, not of {perf!r} against {cost!r}: mark it again "
                f"with rf.pareto.front(table, cost={cost!r}, perf={perf!r}) or drop the column"
            )
        return table, cost, perf, meta["higher_is_better"], [g for g in meta["by"] if g in table.column_names]
    cost = "network_cost_usd" if cost is None else cost
    perf = "throughput_iter_per_s" if perf is None else perf
    given = None
    if "pareto" in table.column_names:  # without front's record of its axes (e.g. read from CSV)
        if not pa.types.is_boolean(table["pareto"].type):
            raise SpecError(f"report: the pareto column is {table['pareto'].type}, not bool")
        given = table["pareto"].fill_null(False).to_pylist()
        table = table.drop_columns(["pareto"])
    table = pareto.front(table, cost, perf, higher_is_better)
    if given is not None and given != table["pareto"].to_pylist():
        raise SpecError(
            f"report: the table's pareto column (which does not record its axes, e.g. read from CSV) "
            f"is not the front of {perf!r} against {cost!r} per {', '.join(pareto.DEFAULT_BY)}: give "
            "the axes it was marked with (cost=, perf=; --cost, --perf) or drop the column"
        )
    meta = pareto._front_meta(table)
    return table, cost, perf, meta["higher_is_better"], meta["by"]


def _group_rows(table: pa.Table, groups: list[str]) -> list[tuple[str, np.ndarray]]:
    """(title, row indices) of each group, in first-seen order."""
    if not groups:
        return [("all rows", np.arange(table.num_rows))]
    keys = list(zip(*(table[g].to_pylist() for g in groups), strict=True))
    out = []
    for key in dict.fromkeys(keys):
        idx = np.flatnonzero(np.array([k == key for k in keys], dtype=bool))
        parts = [
            f"{v} GPUs" if g == "gpus" else f"{g} {v}" if g != "workload" else str(v)
            for g, v in zip(groups, key, strict=True)
        ]
        out.append((", ".join(parts), idx))
    return out


def _row_labels(table: pa.Table, idx: np.ndarray) -> list[str]:
    """Names of rows ``idx`` within their group: the fabric, and the link speed, controller,
    ... when those vary in the group; the point number when that still leaves two alike."""
    rows = [table.slice(int(i), 1).to_pylist()[0] for i in idx]
    cols = ["fabric"] + [
        c
        for c in ("link_speed", "controller", "rewrite_rule", "workload", "gpus")
        if c in table.column_names and len({str(r[c]) for r in rows}) > 1
    ]
    labels = [" · ".join(str(r[c]) + (" GPUs" if c == "gpus" else "") for c in cols) for r in rows]
    if len(set(labels)) < len(labels) and "point" in table.column_names:
        labels = [f"{label} #{r['point']}" for label, r in zip(labels, rows, strict=True)]
    return labels


def _front_figure(go, table, idx, cost, perf, higher, title):
    x_all = pareto._column(table, cost, "cost")
    y_all = pareto._column(table, perf, "performance")
    x, y = x_all[idx], y_all[idx]
    xscale, xtitle = _axis(table, cost, x, "lower")
    yscale, ytitle = _axis(table, perf, y, "higher" if higher else "lower")
    fabrics = [str(v) for v in table["fabric"].to_pylist()]
    links = [str(v) for v in table["link_speed"].to_pylist()] if "link_speed" in table.column_names else None
    points = table["point"].to_pylist() if "point" in table.column_names else list(range(table.num_rows))
    on = table["pareto"].fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    speeds = list(dict.fromkeys(links[i] for i in idx)) if links else []
    if links and "link_bps" in table.column_names:
        bps = dict(zip(links, table["link_bps"].to_pylist(), strict=True))
        speeds.sort(key=lambda s: bps[s] if bps[s] is not None else -1)
    symbol = {s: _SYMBOLS[i % len(_SYMBOLS)] for i, s in enumerate(speeds)}
    labels = dict(zip(idx.tolist(), _row_labels(table, idx), strict=True))
    fig = go.Figure()
    ok = [int(i) for i in idx if math.isfinite(x_all[i]) and math.isfinite(y_all[i])]
    front = sorted((i for i in ok if on[i]), key=lambda i: (x_all[i], y_all[i]))
    fig.add_trace(
        go.Scatter(
            x=[x_all[i] / xscale for i in front],
            y=[y_all[i] / yscale for i in front],
            customdata=[points[i] for i in front],
            mode="lines+markers",
            name="Pareto front",
            line={"color": "rgba(0,0,0,0.18)", "width": 14},
            marker={"color": "rgba(0,0,0,0.18)", "size": 18},
            hoverinfo="skip",
            meta="front",
        )
    )
    for k, fab in enumerate(dict.fromkeys(fabrics[i] for i in ok)):
        rows = sorted((i for i in ok if fabrics[i] == fab), key=lambda i: (x_all[i], y_all[i]))
        text = [
            f"{labels[i]}<br>{xtitle.split(',')[0]}: {_fmt_number(x_all[i] / xscale)}"
            f"<br>{ytitle.split(',')[0]}: {_fmt_number(y_all[i] / yscale)}"
            + ("<br><b>on the Pareto front</b>" if on[i] else "")
            for i in rows
        ]
        fig.add_trace(
            go.Scatter(
                x=[x_all[i] / xscale for i in rows],
                y=[y_all[i] / yscale for i in rows],
                customdata=[points[i] for i in rows],
                mode="lines+markers",
                name=fab,
                line={"color": _COLORS[k % len(_COLORS)], "width": 1.5},
                marker={
                    "symbol": [symbol[links[i]] for i in rows] if links else "circle",
                    "size": 10,
                    "color": _COLORS[k % len(_COLORS)],
                    "line": {"color": "black", "width": 0.7},
                },
                hovertext=text,
                hoverinfo="text",
                meta="fabric",
            )
        )
    for s in speeds if len(speeds) > 1 else ():  # legend entries for the markers
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=f"link {s}",
                marker={
                    "symbol": symbol[s],
                    "size": 10,
                    "color": "lightgrey",
                    "line": {"color": "black", "width": 0.7},
                },
                meta="legend",
            )
        )
    skipped = len(idx) - len(ok)
    fig.update_layout(
        title={
            "text": title
            + (
                f" ({skipped} {'row' if skipped == 1 else 'rows'} without a value not drawn)"
                if skipped
                else ""
            )
        },
        xaxis_title=xtitle,
        yaxis_title=ytitle,
        template="plotly_white",
        height=460,
        margin={"t": 60, "r": 20, "b": 60, "l": 70},
        legend={"title": {"text": "fabric"}},
    )
    return fig


def _stage_columns(table: pa.Table) -> list[tuple[str, str]]:
    """(stage, column) of the table's ``stage_<name>_ps`` columns with at least one value."""
    out = []
    for name in table.column_names:
        m = _STAGE_COLUMN.match(name)
        col = table[name]
        if m and pa.types.is_integer(col.type) and col.null_count < len(col):
            out.append((m.group(1), name))
    return out


def _stage_figure(go, table, idx, stages, title):
    labels = _row_labels(table, idx)
    values = {col: [table[col][int(i)].as_py() for i in idx] for _, col in stages}
    makespan = (
        [table["makespan_ps"][int(i)].as_py() for i in idx] if "makespan_ps" in table.column_names else None
    )
    scale, unit = _time([v for vs in values.values() for v in vs] + (makespan or []))
    fig = go.Figure()
    for k, (stage, col) in enumerate(stages):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[None if v is None else v / scale for v in values[col]],
                customdata=values[col],
                text=[None if v is None else _readable(v) for v in values[col]],
                textposition="outside",
                name=stage,
                marker={"color": _COLORS[k % len(_COLORS)]},
                hovertemplate=f"{stage}: %{{y:.4g}} {unit}<extra>%{{x}}</extra>",
                meta=col,
            )
        )
    if makespan is not None:
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=[None if v is None else v / scale for v in makespan],
                customdata=makespan,
                mode="markers",
                name="makespan",
                marker={"symbol": "line-ew", "size": 40, "line": {"color": "black", "width": 3}},
                hovertemplate=f"makespan: %{{y:.4g}} {unit}<extra>%{{x}}</extra>",
                meta="makespan_ps",
            )
        )
    fig.update_layout(
        title={"text": title},
        barmode="group",
        yaxis_title=f"time ({unit})",
        template="plotly_white",
        height=420,
        margin={"t": 60, "r": 20, "b": 80, "l": 70},
        legend={"title": {"text": "stage"}},
    )
    return fig


def _cell(value, is_time: bool = False) -> tuple[str, str]:
    """(data-v, shown text) of one table cell: data-v is the exact value (the sort key and
    what a program reads back), the text a readable one (a time in its own unit)."""
    if value is None:
        return "", ""
    if isinstance(value, bool):
        return ("true" if value else "false"), ("yes" if value else "")
    if isinstance(value, int):
        if is_time:
            return str(value), _readable(value)
        return str(value), f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "", "nan"
        if math.isinf(value):
            return ("Infinity" if value > 0 else "-Infinity"), str(value)
        return repr(value), _fmt_number(value)
    if isinstance(value, list):  # a map column: [(key, value), ...]
        text = (
            ", ".join(f"{k}: {v}" for k, v in value)
            if all(isinstance(p, tuple) for p in value)
            else json.dumps(value)
        )
        return text, text
    return str(value), str(value)


def _rows_table(table: pa.Table) -> str:
    names = [c for c in _FIRST if c in table.column_names]
    names += [c for c in table.column_names if c not in names]
    times = {c for c in names if c.endswith("_ps") and pa.types.is_integer(table[c].type)}
    head = "".join(
        f'<th data-col="{html.escape(c)}" title="{html.escape(c)}'
        + (" (integer ps, shown in a readable unit)" if c in times else "")
        + f'; click to sort">{html.escape(c)}</th>'
        for c in names
    )
    cols = [table[c].to_pylist() for c in names]
    body = []
    for r in range(table.num_rows):
        cells = []
        for c, col in zip(names, cols, strict=True):
            v, text = _cell(col[r], c in times)
            cls = ' class="front"' if c == "pareto" and col[r] else ""
            cells.append(f'<td data-v="{html.escape(v)}"{cls}>{html.escape(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<div class="scroll"><table id="rows" class="sortable"><thead><tr>'
        + head
        + "</tr></thead><tbody>\n"
        + "\n".join(body)
        + "\n</tbody></table></div>"
    )


_SORT_JS = """
function rfCompare(x, y) {
  if (x === y) return 0;
  if (x === "") return 1;  // empty cells last, whichever the direction
  if (y === "") return -1;
  const nx = Number(x), ny = Number(y);
  if (!Number.isNaN(nx) && !Number.isNaN(ny)) return nx < ny ? -1 : nx > ny ? 1 : 0;
  return x < y ? -1 : 1;
}
function rfSort(th) {
  const table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
  const asc = th.getAttribute("aria-sort") !== "ascending";
  for (const h of table.tHead.rows[0].cells) h.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
    if (x === "" || y === "") return rfCompare(x, y);
    return asc ? rfCompare(x, y) : rfCompare(y, x);
  });
  body.append(...rows);
}
for (const th of document.querySelectorAll("table.sortable th")) th.addEventListener("click", () => rfSort(th));
for (const spec of document.querySelectorAll("script.rf-figure")) {
  const fig = JSON.parse(spec.textContent);
  Plotly.newPlot(spec.dataset.div, fig.data, fig.layout, {responsive: true, displaylogo: false, showSendToCloud: false});
}
"""

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
p.note { color: #555; max-width: 60em; }
.figure { margin-bottom: 1em; }
.scroll { overflow: auto; max-height: 80vh; border: 1px solid #ddd; }
table.sortable { border-collapse: collapse; font-size: 12px; white-space: nowrap; }
table.sortable th { position: sticky; top: 0; background: #f3f3f3; cursor: pointer; padding: 4px 6px;
  border-bottom: 1px solid #bbb; text-align: left; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
table.sortable td { padding: 3px 6px; border-bottom: 1px solid #eee; }
table.sortable tbody tr:hover { background: #f7f7ff; }
td.front { font-weight: bold; color: #1a7f37; }
"""


def _figure_block(pio, fig, div_id: str) -> str:
    spec = pio.to_json(fig, validate=True).replace("</", "<\\/")
    return (
        f'<div class="figure" id="{div_id}"></div>\n'
        f'<script type="application/json" class="rf-figure" data-div="{div_id}">{spec}</script>'
    )


def render(
    table: pa.Table,
    *,
    title: str | None = None,
    cost: str | None = None,
    perf: str | None = None,
    higher_is_better: bool | None = None,
    source: str | None = None,
) -> str:
    """The report page of ``table`` as an HTML string (``write`` writes it to a file).

    ``cost`` and ``perf``: the front's axes; None takes those the table's ``pareto`` column
    was marked with (``rf.pareto.front``), else ``network_cost_usd`` and
    ``throughput_iter_per_s``. A table without a ``pareto`` column gets ``rf.pareto.front``'s
    (one front per workload and scale); ``higher_is_better`` as there. ``source``: a line
    saying where the rows came from."""
    from ._optional import require

    go = require("plotly.graph_objects", "report", "rf.report")
    pio = require("plotly.io", "report", "rf.report")
    plotly_js = require("plotly.offline", "report", "rf.report").get_plotlyjs()
    plotly_version = require("plotly", "report", "rf.report").__version__

    table, cost, perf, higher, groups = _prepare(table, cost, perf, higher_is_better)
    if title is None:
        title = "rfabric sweep report" + (f": {Path(source).name}" if source else "")
    parts = [f"<h1>{html.escape(title)}</h1>"]
    fabrics = list(dict.fromkeys(map(str, table["fabric"].to_pylist())))
    facts = [f"{table.num_rows} rows", f"fabrics: {', '.join(fabrics)}"]
    for col, what in (("workload", "workloads"), ("gpus", "scales (GPUs)"), ("link_speed", "link speeds")):
        if col in table.column_names:
            facts.append(f"{what}: {', '.join(dict.fromkeys(map(str, table[col].to_pylist())))}")
    if source:
        facts.insert(0, f"from {source}")
    parts.append(
        f'<p class="note">{html.escape("; ".join(facts))}. Made by rfabric {__version__} with plotly {plotly_version}.</p>'
    )

    better = "higher" if higher else "lower"
    parts.append("<h2>Cost and performance</h2>")
    parts.append(
        '<p class="note">'
        + html.escape(
            f"{perf} ({better} is better) against {cost} (lower is better). Each fabric is a line "
            "through its rows in cost order, each link speed a marker; the wide grey band joins "
            "the rows on the Pareto front (the table's pareto column): no other row of its group "
            "is at most as expensive and at least as good, and better in one. "
            + (
                "Groups: " + ", ".join(groups) + " (one front each)."
                if groups
                else "One front over all rows."
            )
        )
        + "</p>"
    )
    grouped = _group_rows(table, groups)
    for k, (name, idx) in enumerate(grouped):
        fig = _front_figure(go, table, idx, cost, perf, higher, name)
        parts.append(_figure_block(pio, fig, f"front-{k}"))

    parts.append("<h2>Stage times</h2>")
    stages = _stage_columns(table)
    shown = 0
    if stages:
        parts.append(
            '<p class="note">'
            + html.escape(
                "Each bar is a stage's span (the stage_<name>_ps columns): from its first op's start "
                "to its last op's end, summed over the iterations. Stages overlap (generation "
                "streams responses while training runs), so the bars do not add up to the makespan "
                "(the black dash)."
            )
            + "</p>"
        )
        for name, idx in grouped:
            present = [(s, c) for s, c in stages if any(table[c][int(i)].as_py() is not None for i in idx)]
            if present:
                parts.append(
                    _figure_block(pio, _stage_figure(go, table, idx, present, name), f"stages-{shown}")
                )
                shown += 1
    if not shown:
        parts.append('<p class="note">No row has a stage time (flow workloads have no stages).</p>')

    parts.append("<h2>Rows</h2>")
    parts.append(
        '<p class="note">Click a column\'s name to sort by it (again: the other way; empty cells '
        "last). Times (*_ps, integer picoseconds in the table) are shown in a readable unit; "
        "sorting uses the exact values.</p>"
    )
    parts.append(_rows_table(table))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n"
        f'<script type="text/javascript">{plotly_js}</script>\n</head>\n<body>\n'
        + "\n".join(parts)
        + f"\n<script>{_SORT_JS}</script>\n</body>\n</html>\n"
    )


def write(
    table,
    path="report.html",
    *,
    title: str | None = None,
    cost: str | None = None,
    perf: str | None = None,
    higher_is_better: bool | None = None,
) -> Path:
    """Write the report page of a sweep to ``path`` (HTML, self-contained: it opens offline).

    ``table``: a sweep table (``rf.sweep``'s rows) or the path of one (.parquet or .csv).
    ``title``, ``cost``, ``perf``, ``higher_is_better``: as in ``render``. Needs plotly
    (``pip install 'rfabric[report]'``). Returns the path."""
    source = None
    if isinstance(table, (str, Path)):
        source = str(table)
        table = read(table)
    elif not isinstance(table, pa.Table):
        raise SpecError(f"report: expected a pyarrow Table or a file path, got {type(table).__name__}")
    text = render(table, title=title, cost=cost, perf=perf, higher_is_better=higher_is_better, source=source)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
