"""Figure 14 of the OrchestrRL paper: per-stage time (Train, Gen in AFD mode, Weight Sync) of
Qwen2-57B-A14B on the six fabrics, relative to the non-blocking fat-tree (FT).

    python bench/paper/fig14.py [--quick] [--gpus 256]

One ``rf.sweep`` over FT, FT-OS (3:1), RO, TopoOpt, MixNet and RFabric at 200 Gb/s, each with
its own controller (``controller="own"``), t_ocs 25 ms, rf.sweep's defaults otherwise. The
full 28-layer model on the flow backend (``backend="flow"``; in packets an iteration takes
hours). Train TP4 EP16 on half the GPUs, generation in AFD mode (attention 16 + experts 16
GPUs per instance) on the other half, batch 4 x GPUs (common.py). A stage's time is its
first op's start to its last op's end. Default 256 GPUs (the paper's text gives no scale for
this figure); ``--quick``: 128 GPUs, 2 layers, batch 64.
"""

from __future__ import annotations

import common as C

import rfabric as rf

STAGES = ("train", "gen", "weight_sync")


def run(args) -> list[dict]:
    gpus = 128 if args.quick else args.gpus
    factory = C.moe_quick if args.quick else C.moe_full
    t = C.Timer(f"fig14 qwen2-57b-a14b {gpus} GPUs")
    table = rf.sweep(
        fabrics=C.FABRICS,
        links=["200Gbps"],
        gpus=[gpus],
        workload={"qwen2-57b-a14b": factory},
        controller="own",
        out=C.sweep_out(args, "qwen2-57b-a14b", gpus),
        settings={"backend": "flow", "t_ocs": C.T_OCS},
        **C.sweep_kw(args),
    )
    wall = t.done(table)
    got = table.to_pylist()
    ft = next(r for r in got if r["fabric"] == "FT")
    rows = []
    for r in got:
        row = {
            "gpus": gpus,
            "fabric": r["fabric"],
            "controller": r["controller"],
            "rewrites": C.rewrites_of(r),
            "backend": "flow",
            "layers": "2" if args.quick else "full",
        }
        for s in STAGES:
            row[f"{s}_s"] = C.seconds(r[f"stage_{s}_ps"])
            row[f"{s}_vs_FT"] = C.seconds(r[f"stage_{s}_ps"]) / C.seconds(ft[f"stage_{s}_ps"])
        row["iteration_vs_FT"] = C.seconds(r["iteration_time_ps"]) / C.seconds(ft["iteration_time_ps"])
        row["wall_s"] = r["wall_s"]
        row["sweep_wall_s"] = wall
        rows.append(row)
    return rows


COLS = [
    ("gpus", "{}"),
    ("fabric", "{}"),
    ("controller", "{}"),
    ("rewrites", "{}"),
    ("train_s", "{:.3f}"),
    ("train_vs_FT", "{:.3f}"),
    ("gen_s", "{:.3f}"),
    ("gen_vs_FT", "{:.3f}"),
    ("weight_sync_s", "{:.3f}"),
    ("weight_sync_vs_FT", "{:.3f}"),
    ("iteration_vs_FT", "{:.3f}"),
]


def main(argv=None) -> list[dict]:
    ap = C.parser(__doc__, shares_points=True)
    ap.add_argument("--gpus", type=int, default=256)
    args = ap.parse_args(argv)
    print(C.SETUP)
    rows = run(args)
    C.print_table("Figure 14: Qwen2-57B-A14B stage time relative to FT (flow backend, 200 Gb/s)", rows, COLS)
    C.write(rows, "fig14", args.out)
    return rows


if __name__ == "__main__":
    main()
