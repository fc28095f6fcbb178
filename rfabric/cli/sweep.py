"""``rfabric sweep CONFIG.toml``: run a sweep, print its rows with the Pareto front marked,
optionally plot the fronts.
"""

from __future__ import annotations

from pathlib import Path

from ..tables import format_table
from .common import _ms, _print_rewrites


def cmd_sweep(args) -> int:
    """Run a sweep described by a TOML file; print one line per point (Pareto-optimal ones
    marked, per workload and scale), say where the rows went, and optionally plot the fronts."""
    from .. import pareto
    from ..sweeps import load_config, sweep

    kwargs = load_config(args.config)
    overrides = {
        "executor": args.executor,
        "out": args.output,
        "workers": args.workers,
        "rewrites": args.rewrites,
    }
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    if args.no_progress:
        kwargs["progress"] = False
    table = pareto.front(sweep(**kwargs), by=["workload", "gpus"])
    meta = table.schema.metadata or {}
    ran = {k: meta.get(f"rfabric.sweep.{k}".encode(), b"?").decode() for k in ("resumed", "ran")}
    rows = table.to_pylist()
    for r in rows:
        r["iteration_ms"] = _ms(r["iteration_time_ps"])
        r["cost_kusd"] = r["network_cost_usd"] / 1e3
        r["iter_per_s_per_musd"] = r["throughput_per_musd"]
        r["pareto"] = "yes" if r["pareto"] else ""
    print(
        format_table(
            rows,
            [
                ("fabric", "{}"),
                ("link_speed", "{}"),
                ("gpus", "{}"),
                ("workload", "{}"),
                ("cost_kusd", "{:,.1f}"),
                ("iteration_ms", "{:.3f}"),
                ("throughput_iter_per_s", "{:.3f}"),
                ("iter_per_s_per_musd", "{:.3f}"),
                ("pareto", "{}"),
                ("wall_s", "{:.2f}"),
            ],
        )
    )
    rule = kwargs.get("rewrites", "offered")
    if isinstance(rule, str):
        _print_rewrites(rows, rule)
    out = kwargs.get("out", "sweep.parquet")
    counted = f"{len(rows)} points ({ran['resumed']} resumed, {ran['ran']} run)"
    print(f"{counted}; rows in {out}" if out else counted)
    if args.plot:
        path = Path(args.plot)
        groups = list(dict.fromkeys((r["workload"], r["gpus"]) for r in rows))
        for workload, gpus in groups:
            import pyarrow.compute as pc

            part = table.filter(pc.and_(pc.equal(table["workload"], workload), pc.equal(table["gpus"], gpus)))
            target = path
            if len(groups) > 1:
                tag = "".join(c if c.isalnum() or c in "-._" else "_" for c in f"{workload}-{gpus}gpus")
                target = path.with_name(f"{path.stem}-{tag}{path.suffix}")
            pareto.plot(part, target)
            print(f"wrote {target}")
    return 0
