"""Plain-text tables: ``format_table`` prints rows (a sweep's, a bill's, any) as the command
line does, columns right-aligned under their titles::

    rows = rf.sweep(fabrics=["FT", "RFabric"], ...)
    print(rf.format_table(rows))                     # the sweep's usual columns
    print(rf.format_table(rows, ["fabric", "iteration_ms", ("network_cost_usd", "{:,.0f}")]))

A column is a name, or ``(name, format)`` with a ``str.format`` spec. Besides a row's own
columns, sweep rows have derived ones: ``iteration_ms`` (``iteration_time_ps`` in ms),
``cost_kusd`` (``network_cost_usd`` in thousands) and ``<stage>_ms`` for each stage of
``rfabric.catalog.STAGES`` (from ``stage_ps``; a stage's span, and spans overlap).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from . import catalog
from .errors import SpecError

__all__ = ["format_table", "SWEEP_COLUMNS"]

#: The columns ``format_table`` shows for sweep rows when none are given (``rfabric sweep``'s).
SWEEP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("fabric", "{}"),
    ("link_speed", "{}"),
    ("gpus", "{}"),
    ("workload", "{}"),
    ("cost_kusd", "{:,.1f}"),
    ("iteration_ms", "{:.3f}"),
    ("throughput_iter_per_s", "{:.3f}"),
    ("throughput_per_musd", "{:.3f}"),
    ("pareto", "{}"),
    ("wall_s", "{:.2f}"),
)


def _ms(ps) -> float:
    """A time in ps (None when the run did not finish) in ms."""
    return float("nan") if ps is None else ps / 1e9


def _stage_ms(stage: str) -> Callable[[dict], float]:
    return lambda r: _ms(dict(r.get("stage_ps") or []).get(stage))


_DERIVED: dict[str, tuple[Callable[[dict], object], str]] = {
    "iteration_ms": (lambda r: _ms(r.get("iteration_time_ps")), "{:.3f}"),
    "cost_kusd": (lambda r: r["network_cost_usd"] / 1e3, "{:,.1f}"),
    **{f"{s}_ms": (_stage_ms(s), "{:.3f}") for s in catalog.STAGES},
}
_NEEDS = {"iteration_ms": "iteration_time_ps", "cost_kusd": "network_cost_usd"}
_NEEDS.update({f"{s}_ms": "stage_ps" for s in catalog.STAGES})


def _rows(rows_or_table) -> list[dict]:
    if hasattr(rows_or_table, "to_pylist"):  # a pyarrow Table or RecordBatch
        return rows_or_table.to_pylist()
    if hasattr(rows_or_table, "to_dict") and hasattr(rows_or_table, "columns"):  # a pandas DataFrame
        return rows_or_table.to_dict("records")
    if isinstance(rows_or_table, Mapping) or not isinstance(rows_or_table, Sequence):
        raise SpecError(
            "format_table: expected a list of row dicts, a pyarrow Table or a pandas DataFrame, "
            f"got {type(rows_or_table).__name__}"
        )
    rows = list(rows_or_table)
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise SpecError(f"format_table: row {i} is a {type(r).__name__}, not a dict")
    return rows


def _default_format(values) -> str:
    if any(isinstance(v, float) for v in values):
        return "{:.3f}"
    if any(isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000 for v in values):
        return "{:,}"
    return "{}"


def _cell(value, fmt: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def format_table(rows_or_table, columns=None, *, align: str = "right") -> str:
    """The rows as a plain-text table, one line per row under a title line and a rule.

    Parameters
    ----------
    rows_or_table : list of dict, pyarrow.Table or pandas.DataFrame
        The rows (e.g. what ``rf.sweep`` returns, or ``table.to_pylist()``).
    columns : sequence of str or (str, str), optional
        The columns in order: names, or ``(name, format)`` pairs with a ``str.format`` spec
        (``"{:,.1f}"``). A derived sweep column (``iteration_ms``, ``cost_kusd``,
        ``train_ms``, ...) may be named as well. Default: for sweep rows, `SWEEP_COLUMNS`
        (those present); for other rows, every column.
    align : "right" or "left"
        Right-aligned as numbers (the CLI's tables) or left-aligned as words.

    Cells: None is empty, True is ``yes`` and False empty (a Pareto flag), floats default
    to 3 decimals. Raises SpecError naming a column no row has.
    """
    if align not in ("right", "left"):
        raise SpecError(f"format_table: align must be 'right' or 'left', got {align!r}")
    rows = _rows(rows_or_table)
    have = set().union(*(r.keys() for r in rows)) if rows else set()
    if columns is None:
        if {"fabric", "iteration_time_ps", "network_cost_usd"} <= have:
            columns = [(k, f) for k, f in SWEEP_COLUMNS if k in have or _NEEDS.get(k) in have]
        else:
            columns = list(dict.fromkeys(k for r in rows for k in r))
    cols: list[tuple[str, str | None]] = []
    for c in columns:
        if isinstance(c, str):
            cols.append((c, None))
        elif isinstance(c, Sequence) and len(c) == 2 and all(isinstance(x, str) for x in c):
            cols.append((c[0], c[1]))
        else:
            raise SpecError(f"format_table: a column is a name or (name, format), got {c!r}")
    values: list[list] = []
    for name, _ in cols:
        if name in have or not rows:
            values.append([r.get(name) for r in rows])
        elif name in _DERIVED and _NEEDS[name] in have:
            values.append([_DERIVED[name][0](r) for r in rows])
        else:
            known = sorted(have | {d for d, need in _NEEDS.items() if need in have})
            raise SpecError(f"format_table: no column {name!r} (the rows have: {', '.join(known)})")
    cells = []
    for (name, fmt), vals in zip(cols, values, strict=True):
        fmt = fmt or (_DERIVED[name][1] if name in _DERIVED and name not in have else _default_format(vals))
        cells.append([_cell(v, fmt) for v in vals])
    widths = [max([len(name)] + [len(s) for s in col]) for (name, _), col in zip(cols, cells, strict=True)]
    pad = str.rjust if align == "right" else str.ljust
    lines = [
        "  ".join(pad(name, w) for (name, _), w in zip(cols, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    for i in range(len(rows)):
        lines.append("  ".join(pad(col[i], w) for col, w in zip(cells, widths, strict=True)).rstrip())
    return "\n".join(lines)
