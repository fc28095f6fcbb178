"""``rfabric demo``: the six fabrics of the paper on one generated RL iteration (a sweep) or
on flow patterns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import catalog
from ..errors import MissingDependency
from ..tables import format_table
from .common import _ms, _print_rewrites

#: The rows ``rfabric demo --workload flows`` writes: one per fabric and pattern.
DEMO_FLOWS_SCHEMA_FIELDS = (
    ("fabric", "string"),
    ("pattern", "string"),
    ("flows", "int64"),
    ("makespan_ps", "int64"),  # last flow's end; null if a flow did not finish
    ("p50_fct_ps", "int64"),  # median flow completion time (finished flows), rounded to the ps
    ("p99_fct_ps", "int64"),  # 99th percentile of the same
    ("eps", "int64"),  # packet switches of the fabric
    ("ocs", "int64"),  # optical devices (OCS, patch panels)
    ("events", "int64"),
    ("wall_s", "float64"),  # host wall-clock seconds of the run (not simulated time)
)


def _demo_fabrics(gpus: int, link: str):
    """The paper's six fabrics (``rfabric.catalog.PAPER_FABRICS``) at ``gpus`` and ``link``."""
    from ..sweeps import resolve_fabric
    from ..units import parse_rate

    bps = parse_rate(link, name="--link")
    return [
        (name, resolve_fabric(name, where="rfabric demo").build(gpus, bps)) for name in catalog.PAPER_FABRICS
    ]


def demo_trace(
    gpus: int, model: str = "qwen2.5-14b", *, layers: int = 2, batch: int = 16, seed: int = 1, **options
):
    """The RL iteration ``rfabric demo`` replays: ``model``'s shape cut to ``layers`` layers,
    half the GPUs train (TP up to 8, PP 2 when there is room, the rest DP) and half generate
    (TP up to 8), ``batch`` responses, one iteration. ``options`` go to ``generate_rl``."""
    import dataclasses

    from .. import traces

    shape = traces.models.get_model(model)
    cut = dataclasses.replace(shape, name=f"{shape.name}-{layers}L", layers=layers)
    half = gpus // 2
    tp = min(8, half)
    pp = 2 if half >= 2 * tp and layers >= 2 else 1
    return traces.generate_rl(
        model=cut,
        train_gpus=half,
        gen_gpus=half,
        train=dict(tp=tp, pp=pp, dp=max(1, half // (pp * tp))),
        gen=dict(tp=tp),
        iterations=1,
        seed=seed,
        global_batch=batch,
        **options,
    )


def cmd_demo(args) -> int:
    """Compare the six fabrics of the paper on one generated RL iteration (or on flows)."""
    if args.workload == "flows":
        return _demo_flows(args)
    from .. import traces

    shape = traces.models.get_model(args.model)
    trace = demo_trace(args.gpus, args.model, layers=args.layers, batch=args.batch, seed=args.seed)
    name = f"{shape.name}-{args.layers}L"
    half = args.gpus // 2
    print(
        f"rfabric demo: one RL iteration of {name} (the {shape.name} shape with {args.layers} layers), "
        f"{half} train + {half} gen GPUs, batch {args.batch}, {trace.num_ops:,} collective ops; "
        f"{args.link} links, transport {args.transport}, seed {args.seed}\n"
    )
    import shutil

    from .. import pareto
    from ..sweeps import sweep

    links = list(dict.fromkeys([args.link, *(args.compare_link or ["400Gbps"])]))
    # the demo runs afresh (a sweep resumes from the rows of an earlier run with the same config)
    Path(args.output).unlink(missing_ok=True)
    shutil.rmtree(f"{args.output}.parts", ignore_errors=True)
    table = sweep(
        fabrics=list(catalog.PAPER_FABRICS),
        links=links,
        gpus=[args.gpus],
        workload={name: trace},
        controller="own",
        executor=args.executor,
        out=args.output,
        seed=args.seed,
        progress=not args.no_progress,
        settings={"transport": args.transport},
        rewrites=args.rewrites,
    )
    table = pareto.front(table, cost="network_cost_usd", perf="throughput_iter_per_s")
    rows = table.to_pylist()
    base = {r["link_speed"]: _ms(r["iteration_time_ps"]) for r in rows if r["fabric"] == "FT"}
    for r in rows:
        stage = dict(r["stage_ps"] or [])
        r["iteration_ms"] = _ms(r["iteration_time_ps"])
        r["vs_FT"] = r["iteration_ms"] / base[r["link_speed"]]
        r["cost_kusd"] = r["network_cost_usd"] / 1e3
        r["train_ms"] = _ms(stage.get("train"))
        r["gen_ms"] = _ms(stage.get("gen"))
        r["weight_sync_ms"] = _ms(stage.get("weight_sync"))
        r["pareto"] = "yes" if r["pareto"] else ""
    print(
        format_table(
            rows,
            [
                ("fabric", "{}"),
                ("link_speed", "{}"),
                ("controller", "{}"),
                ("cost_kusd", "{:,.1f}"),
                ("iteration_ms", "{:.2f}"),
                ("vs_FT", "{:.3f}"),
                ("train_ms", "{:.2f}"),
                ("gen_ms", "{:.2f}"),
                ("weight_sync_ms", "{:.2f}"),
                ("throughput_iter_per_s", "{:.3f}"),
                ("throughput_per_musd", "{:.3f}"),
                ("pareto", "{}"),
            ],
        )
    )
    print(
        "\ncost_kusd: network bill of materials (rf.cost, the paper's Table 4 prices); throughput: "
        "iterations/s; throughput_per_musd: per million USD of network; pareto: no fabric is both "
        "cheaper and faster. Stage times span first start to last end; train and gen overlap."
    )
    _print_rewrites(rows, args.rewrites)
    print(f"wrote {args.output} (the sweep's rows)")
    if args.plot:
        try:
            pareto.plot(table, args.plot, title=f"{name} RL iteration, {args.gpus} GPUs")
        except MissingDependency as exc:  # the demo's table stands without its picture
            print(f"no plot: {exc}")
        else:
            print(f"wrote {args.plot} (network cost against throughput, one curve per fabric)")
    return 0


def _demo_flows(args) -> int:
    from .. import simulate
    from ..sweeps import pattern_flows

    rows = []
    for pattern in ("permutation", "incast"):
        flows = pattern_flows(pattern, args.gpus, args.size, seed=args.seed, fan_in=16)
        for label, fab in _demo_fabrics(args.gpus, args.link):
            res = simulate(fab, flows, transport=args.transport, seed=args.seed)
            fct = res.fct_ps
            kinds = fab.to_spec().nodes.kind
            done = fct[fct >= 0]
            rows.append(
                {
                    "fabric": label,
                    "pattern": pattern,
                    "flows": len(flows),
                    "makespan_ps": res.run["makespan_ps"] if res.complete else None,
                    "p50_fct_ps": int(round(float(np.median(done)))),
                    "p99_fct_ps": int(round(float(np.percentile(done, 99)))),
                    "eps": int(np.sum(kinds == 2)),
                    "ocs": int(np.sum(kinds >= 3)),
                    "events": res.run["events"],
                    "wall_s": res.run["wall_s"],
                }
            )
    print(
        f"rfabric demo: {args.gpus} GPUs, {args.link} links, {args.size:,} B messages, "
        f"transport {args.transport}, seed {args.seed}\n"
    )
    shown = [
        dict(
            r,
            makespan_us=r["makespan_ps"] / 1e6 if r["makespan_ps"] is not None else float("nan"),
            p50_us=r["p50_fct_ps"] / 1e6,
            p99_us=r["p99_fct_ps"] / 1e6,
        )
        for r in rows
    ]
    print(
        format_table(
            shown,
            [
                ("fabric", "{}"),
                ("pattern", "{}"),
                ("flows", "{:,}"),
                ("makespan_us", "{:.1f}"),
                ("p50_us", "{:.1f}"),
                ("p99_us", "{:.1f}"),
                ("eps", "{}"),
                ("ocs", "{}"),
                ("events", "{:,}"),
                ("wall_s", "{:.3f}"),
            ],
        )
    )
    import pyarrow as pa

    from ..pareto import export

    schema = pa.schema([(n, pa.type_for_alias(t)) for n, t in DEMO_FLOWS_SCHEMA_FIELDS])
    table = pa.Table.from_pylist(rows, schema=schema)
    print(f"wrote {export(table, args.output)} (one row per fabric and pattern; times in ps)")
    return 0
