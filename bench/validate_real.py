"""rfabric against published measurements, one table per group.

Imports every module in bench/validation/ that defines ``rows()`` (each row a dict with
group, what, hardware, setup, measured, unit, source, calibrated, simulated, note), prints
one table per group, then per group the median and largest absolute error over the
held-out rows (rows that set no rfabric constant) and the rows over 15 % with their notes.

    python bench/validate_real.py                    # every group
    python bench/validate_real.py --group compute    # one group
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VALIDATION = HERE / "validation"
KEYS = ("group", "what", "hardware", "setup", "measured", "unit", "source", "calibrated", "simulated", "note")
#: A held-out row over this absolute error is listed with its note.
LIMIT = 15.0


def load_rows(group: str | None = None) -> list[dict]:
    """Rows of every bench/validation module with ``rows()`` (of ``group`` if given: only
    modules whose ``GROUP`` (default: the file name) is ``group`` are run)."""
    rows = []
    for path in sorted(VALIDATION.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"rfabric_validation_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if not callable(getattr(mod, "rows", None)):
            continue
        # a module's group is its GROUP, else its file name: skip other groups unrun
        if group is not None and getattr(mod, "GROUP", path.stem) != group:
            continue
        for r in mod.rows():
            missing = [k for k in KEYS if k not in r]
            if missing:
                raise ValueError(f"{path.name}: row {r.get('what')!r} lacks {', '.join(missing)}")
            if group is None or r["group"] == group:
                rows.append(r)
    return rows


def error_pct(r: dict) -> float:
    """Signed error of the simulated value, % of the measured one."""
    return (r["simulated"] - r["measured"]) / r["measured"] * 100.0


def summary(rows: list[dict]) -> dict:
    """Median and largest absolute error (%) over held-out rows, and the rows over LIMIT."""
    held = [abs(error_pct(r)) for r in rows if not r["calibrated"]]
    over = [r for r in rows if not r["calibrated"] and abs(error_pct(r)) > LIMIT]
    return {
        "held_out": len(held),
        "calibration": len(rows) - len(held),
        "median_abs_error": statistics.median(held) if held else float("nan"),
        "max_abs_error": max(held) if held else float("nan"),
        "over_limit": over,
    }


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def table(rows: list[dict]) -> str:
    """The rows as a fixed-width text table; full setups and the sources (numbered S1, S2,
    ... in order of first use) are listed below it."""
    sources = list(dict.fromkeys(r["source"] for r in rows))
    cols = ("#", "what", "hardware", "measured", "simulated", "unit", "error %", "role", "src")
    body = [
        (
            str(i),
            r["what"],
            r["hardware"],
            _fmt(r["measured"]),
            _fmt(r["simulated"]),
            r["unit"],
            f"{error_pct(r):+.1f}",
            "calibration" if r["calibrated"] else "held-out",
            f"S{sources.index(r['source']) + 1}",
        )
        for i, r in enumerate(rows, 1)
    ]
    widths = [max(len(c), *(len(b[j]) for b in body)) for j, c in enumerate(cols)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    out = [line(cols), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    out.append("\nsetups:")
    out += [f"  {i}. {r['setup']}" for i, r in enumerate(rows, 1)]
    out.append("sources:")
    out += [f"  S{j}. {src}" for j, src in enumerate(sources, 1)]
    return "\n".join(out)


def report(rows: list[dict]) -> str:
    groups = list(dict.fromkeys(r["group"] for r in rows))
    parts = []
    for g in groups:
        rs = [r for r in rows if r["group"] == g]
        s = summary(rs)
        parts.append(f"== {g}: {len(rs)} rows ({s['calibration']} calibration, {s['held_out']} held out) ==")
        parts.append(table(rs))
        parts.append(
            f"\n{g}: held-out |error| median {s['median_abs_error']:.1f} %, max {s['max_abs_error']:.1f} % "
            f"(target: median <= 5 %, every row <= {LIMIT:.0f} % or a stated reason)"
        )
        if s["over_limit"]:
            parts.append(f"held-out rows over {LIMIT:.0f} %:")
            for r in s["over_limit"]:
                parts.append(f"  {r['what']}: {error_pct(r):+.1f} %: {r['note'] or '(no note)'}")
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--group", default=None, help="only this group (compute, collectives, ...)")
    args = ap.parse_args(argv)
    rows = load_rows(args.group)
    if not rows:
        print(
            f"no validation rows{'' if args.group is None else f' in group {args.group!r}'}", file=sys.stderr
        )
        return 1
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
