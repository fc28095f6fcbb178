"""Helpers the subcommands share: a fabric given by name or preset and the rewrites note
(tables are printed by rfabric.tables.format_table)."""

from __future__ import annotations

from pathlib import Path

from ..tables import _ms

__all__ = ["fabric_arg", "_ms", "_print_rewrites"]


def fabric_arg(text: str, gpus: int, link: str, where: str = "fabric"):
    """The fabric a command line names (``rfabric run``, ``collective --topology``, ``cost``):
    a topology preset's TOML path; the name of a preset shipped with rfabric
    (``rfabric presets``); or a fabric name ``rf.sweep`` accepts (``rfabric.catalog.FABRICS``
    such as FT, FT-OS, RO, RFabric; ``FT-OS<ratio>``; a family name) built at ``gpus`` and
    ``link``."""
    from ..errors import SpecError
    from ..sweeps import resolve_fabric
    from ..topologies import load, presets
    from ..units import parse_rate

    path = Path(text)
    if path.suffix == ".toml" or path.is_file():
        return load(path)
    shipped = presets()
    if text in shipped:
        return load(shipped[text])
    try:
        spec = resolve_fabric(text, where=where)
    except SpecError as exc:
        raise SpecError(
            f"{exc}; or a preset ({', '.join(shipped)}; rfabric presets), or a TOML path"
        ) from None
    return spec.build(gpus, parse_rate(link, name="--link"))


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
