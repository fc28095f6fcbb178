"""Figure 16 of the OrchestrRL paper: performance against network cost of the six fabrics at
100, 200, 400 and 800 Gb/s, the Pareto front, and cost efficiency relative to FT, RO and
MixNet.

    python bench/paper/fig16.py [--quick] [--dense-gpus 96] [--moe-gpus 128]

One ``rf.sweep`` per model over the six fabrics and four link speeds, each fabric with its own
controller (``controller="own"``), t_ocs 25 ms, full-size models on the flow backend
(``backend="flow"``); ``rf.pareto.front`` marks the non-dominated rows (network cost against
iterations per second) per model. Cost efficiency is throughput per million USD of network
(``throughput_per_musd``) over the same link speed's FT, RO and MixNet. The paper's text
gives neither the model nor the scale of this figure, nor whether its cost includes the
GPUs. Here: both models at their smallest scale of figure 13 (dense 96, MoE 128 GPUs;
``--models moe`` runs the MoE half alone, about 4.5 min of CPU; the dense half, four link
speeds of the 80-layer model, about 15), and the ``cluster_*`` columns price the same rows
with the GPUs at ``--gpu-price`` (30,000 USD, an assumption), ``pareto_cluster`` marking
the front on that cost. ``--quick``: 2 layers, batch 64, MoE only, 200 and 400 Gb/s (under ``--sweep-dir``
the 200 Gb/s points are figure 13's quick MoE points, read back).
"""

from __future__ import annotations

import common as C
import pyarrow as pa

import rfabric as rf

LINKS = ["100Gbps", "200Gbps", "400Gbps", "800Gbps"]
LINKS_QUICK = ["200Gbps", "400Gbps"]


def run(args) -> list[dict]:
    if args.quick:
        plan = [("qwen2-57b-a14b", C.moe_quick, 128)]
    else:
        plan = [("qwen2.5-72b", C.dense_full, args.dense_gpus), ("qwen2-57b-a14b", C.moe_full, args.moe_gpus)]
        kinds = {"qwen2.5-72b": "dense", "qwen2-57b-a14b": "moe"}
        plan = [p for p in plan if kinds[p[0]] in args.models.split(",")]
    rows = []
    for name, factory, gpus in plan:
        t = C.Timer(f"fig16 {name} {gpus} GPUs")
        table = rf.sweep(
            fabrics=C.FABRICS,
            links=LINKS_QUICK if args.quick else LINKS,
            gpus=[gpus],
            workload={name: factory},
            controller="own",
            out=C.sweep_out(args, name, gpus),
            settings={"backend": "flow", "t_ocs": C.T_OCS},
            **C.sweep_kw(args),
        )
        wall = t.done(table)
        table = rf.pareto.front(table, by="workload")
        # the same rows priced with the GPUs (an assumed price: the paper gives none)
        cluster = pa.array([c + gpus * args.gpu_price for c in table["network_cost_usd"].to_pylist()])
        with_gpus = rf.pareto.front(
            table.append_column("cluster_usd", cluster), cost="cluster_usd", by="workload"
        )
        got = table.to_pylist()
        on_cluster_front = with_gpus["pareto"].to_pylist()
        cl = cluster.to_pylist()
        per_cluster = {
            (r["fabric"], r["link_speed"]): r["throughput_iter_per_s"] / (c / 1e6)
            for r, c in zip(got, cl, strict=True)
        }
        ref = {(r["fabric"], r["link_speed"]): r for r in got}
        for r, c, front in zip(got, cl, on_cluster_front, strict=True):
            eff = r["throughput_per_musd"]
            pc = per_cluster[(r["fabric"], r["link_speed"])]
            rows.append(
                {
                    "model": name,
                    "gpus": gpus,
                    "link": r["link_speed"],
                    "fabric": r["fabric"],
                    "controller": r["controller"],
                    "rewrites": C.rewrites_of(r),
                    "backend": "flow",
                    "layers": "2" if args.quick else "full",
                    "network_cost_usd": r["network_cost_usd"],
                    "iteration_s": C.seconds(r["iteration_time_ps"]),
                    "throughput_iter_per_s": r["throughput_iter_per_s"],
                    "throughput_per_musd": eff,
                    "eff_vs_FT": eff / ref[("FT", r["link_speed"])]["throughput_per_musd"],
                    "eff_vs_RO": eff / ref[("RO", r["link_speed"])]["throughput_per_musd"],
                    "eff_vs_MixNet": eff / ref[("MixNet", r["link_speed"])]["throughput_per_musd"],
                    "pareto": r["pareto"],
                    "cluster_cost_usd": c,
                    "cluster_eff_vs_FT": pc / per_cluster[("FT", r["link_speed"])],
                    "cluster_eff_vs_MixNet": pc / per_cluster[("MixNet", r["link_speed"])],
                    "pareto_cluster": front,
                    "wall_s": r["wall_s"],
                    "sweep_wall_s": wall,
                }
            )
    return rows


COLS = [
    ("model", "{}"),
    ("link", "{}"),
    ("fabric", "{}"),
    ("controller", "{}"),
    ("rewrites", "{}"),
    ("network_cost_usd", "{:,.0f}"),
    ("iteration_s", "{:.3f}"),
    ("throughput_per_musd", "{:.4f}"),
    ("eff_vs_FT", "{:.2f}"),
    ("eff_vs_RO", "{:.2f}"),
    ("eff_vs_MixNet", "{:.2f}"),
    ("pareto", "{}"),
    ("cluster_eff_vs_FT", "{:.2f}"),
    ("cluster_eff_vs_MixNet", "{:.2f}"),
    ("pareto_cluster", "{}"),
]


def main(argv=None) -> list[dict]:
    ap = C.parser(__doc__, shares_points=True)
    ap.add_argument("--dense-gpus", type=int, default=96)
    ap.add_argument("--moe-gpus", type=int, default=128)
    ap.add_argument("--gpu-price", type=float, default=30_000.0, help="USD per GPU (an assumption)")
    ap.add_argument("--models", default="dense,moe", help="dense (Qwen2.5-72B), moe (Qwen2-57B-A14B)")
    args = ap.parse_args(argv)
    print(C.SETUP)
    rows = run(args)
    C.print_table(
        "Figure 16: cost against performance (flow backend; pareto: on the front of its model)", rows, COLS
    )
    C.write(rows, "fig16", args.out)
    return rows


if __name__ == "__main__":
    main()
