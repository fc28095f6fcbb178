"""Helpers the subcommands share: a plain-text table and the rewrites note."""

from __future__ import annotations


def _table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    widths = [
        max(len(title), *(len(fmt.format(r[key])) for r in rows))
        for (key, fmt), title in zip([(k, f) for k, f in cols], [c[0] for c in cols], strict=True)
    ]
    head = "  ".join(title.rjust(w) for (title, _), w in zip(cols, widths, strict=True))
    lines = [head, "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append(
            "  ".join(fmt.format(r[key]).rjust(w) for (key, fmt), w in zip(cols, widths, strict=True))
        )
    return "\n".join(lines)


def _print_rewrites(rows: list[dict], rule: str) -> None:
    """Say which workload rewrites ran on which fabrics (docs/fairness.md)."""
    by = {}
    for r in rows:
        by.setdefault(r["rewrites"], []).append(f"{r['fabric']} {r['link_speed']}")
    how = {
        "offered": "every fabric runs the rewrites any fabric's controller asks for",
        "none": "no fabric runs a rewrite: the trace's own algorithms everywhere",
        "own": "each fabric runs its own controller's rewrites only (not a fair comparison)",
    }[rule]
    print(f"\nworkload rewrites (--rewrites {rule}: {how}; docs/fairness.md):")
    for text, fabs in by.items():
        who = "all fabrics" if len(fabs) == len(rows) else ", ".join(fabs)
        print(f"  {who}: {text}")


def _ms(ps) -> float:
    """A time column's value (int ps, or None when the run did not finish) in ms for printing."""
    return float("nan") if ps is None else ps / 1e9
