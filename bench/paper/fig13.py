"""Figure 13 of the OrchestrRL paper: RL-iteration throughput of the six fabrics relative to
the non-blocking fat-tree (FT), across scales, dense (Qwen2.5-72B) and MoE (Qwen2-57B-A14B).

    python bench/paper/fig13.py [--quick] [--dense-scales 96,192,...] [--moe-scales 128,...]

One ``rf.sweep`` per (model, scale) over FT, FT-OS (3:1), RO, TopoOpt, MixNet and RFabric at
200 Gb/s, each fabric with its own controller (``controller="own"``: StageAware on RFabric,
MixNet's on MixNet, TopoOpt's static plan), t_ocs 25 ms, everything else at rf.sweep's
defaults. Full-size models (80 and 28 layers) on the flow backend (``backend="flow"``): in
packets a full iteration takes hours per point (README "Flow-level backend").

Layouts (common.py): dense trains TP8 PP2 CP3 on half the GPUs (so scales are multiples of
96), MoE trains TP4 EP16 and generates in AFD mode (multiples of 128); the batch is 4 x GPUs.
Default scales: dense 96, MoE 128 and 256 GPUs (the paper's text gives no scale list), the
ones measured on the shared 2-core machine this was written on: MoE at 256 GPUs took 12 min
wall (2 min of CPU), 8.5 min of it TopoOpt and 2.9 min MixNet, whose host forwarding splits
each flow over many paths. Larger scales run with, e.g., ``--dense-scales 96,192,384,768
--moe-scales 128,256,512,1024`` (not measured: the batch, and so the work of a point, grows
with the GPUs). ``--quick``: 2 layers, batch 64, dense 96 and MoE 128 only.
"""

from __future__ import annotations

import common as C

import rfabric as rf


def run(args) -> list[dict]:
    rows = []
    if args.quick:
        plan = [("qwen2.5-72b", C.dense_quick, [96]), ("qwen2-57b-a14b", C.moe_quick, [128])]
    else:
        plan = [
            ("qwen2.5-72b", C.dense_full, [int(x) for x in args.dense_scales.split(",") if x]),
            ("qwen2-57b-a14b", C.moe_full, [int(x) for x in args.moe_scales.split(",") if x]),
        ]
    for name, factory, scales in plan:
        for gpus in scales:
            t = C.Timer(f"fig13 {name} {gpus} GPUs")
            table = rf.sweep(
                fabrics=C.FABRICS,
                links=["200Gbps"],
                gpus=[gpus],
                workload={name: factory},
                controller="own",
                out=C.sweep_out(args, name, gpus),
                settings={"backend": "flow", "t_ocs": C.T_OCS},
                **C.sweep_kw(args),
            )
            wall = t.done(table)
            got = table.to_pylist()
            ft = next(r for r in got if r["fabric"] == "FT")
            for r in got:
                rows.append(
                    {
                        "model": name,
                        "gpus": gpus,
                        "fabric": r["fabric"],
                        "controller": r["controller"],
                        "rewrites": C.rewrites_of(r),
                        "backend": "flow",
                        "layers": "2" if args.quick else "full",
                        "complete": r["complete"],
                        "iteration_s": C.seconds(r["iteration_time_ps"]),
                        "throughput_vs_FT": C.seconds(ft["iteration_time_ps"])
                        / C.seconds(r["iteration_time_ps"]),
                        "train_s": C.seconds(r["stage_train_ps"]),
                        "gen_s": C.seconds(r["stage_gen_ps"]),
                        "weight_sync_s": C.seconds(r["stage_weight_sync_ps"]),
                        "plans": r["plan_changes"],
                        "wall_s": r["wall_s"],
                        "sweep_wall_s": wall,
                    }
                )
    return rows


COLS = [
    ("model", "{}"),
    ("gpus", "{}"),
    ("fabric", "{}"),
    ("controller", "{}"),
    ("rewrites", "{}"),
    ("iteration_s", "{:.3f}"),
    ("throughput_vs_FT", "{:.3f}"),
    ("train_s", "{:.3f}"),
    ("gen_s", "{:.3f}"),
    ("weight_sync_s", "{:.3f}"),
    ("plans", "{}"),
    ("wall_s", "{:.1f}"),
]


def main(argv=None) -> list[dict]:
    ap = C.parser(__doc__, shares_points=True)
    ap.add_argument("--dense-scales", default="96")
    ap.add_argument("--moe-scales", default="128,256")
    args = ap.parse_args(argv)
    print(C.SETUP)
    rows = run(args)
    C.print_table(
        "Figure 13: throughput relative to FT (flow backend, 200 Gb/s, each fabric's own controller)",
        rows,
        COLS,
    )
    C.write(rows, "fig13", args.out)
    return rows


if __name__ == "__main__":
    main()
