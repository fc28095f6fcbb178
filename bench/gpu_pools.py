"""Heterogeneous pools: the same disaggregated RL iteration with the gen pool on H800, H20 or
H100 GPUs (the train pool stays H800), replayed on a fat-tree whose servers carry those types.

    python bench/gpu_pools.py [--gpus 64] [--batch 256] [--iterations 2] [--backend flow]

Half the GPUs train (Qwen2.5-14B, TP 8 x PP 2 x DP), half generate (TP-4 instances). For each
gen type the trace is generated with ``train_hardware="H800", gen_hardware=TYPE`` (so prefill
and decode run on the type's roofline) and replayed on ``FatTree(gpus, gpu=[(half, "H800"),
(half, TYPE)])`` (so the gen servers' NVLink runs at the type's rate). It prints the
iteration time, each stage's wall span in the last iteration, the cluster cost
(``rf.cost.cluster_cost``: network plus each GPU at its type's price from
``rfabric/data/prices.toml``) and iterations per second per million USD.
docs/explanation/gpu-pools.md keeps a run's output.
"""

from __future__ import annotations

import argparse
import time

import rfabric as rf

TYPES = ("H800", "H20", "H100")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--backend", default="flow", choices=("flow", "packet"))
    args = ap.parse_args()
    half = args.gpus // 2
    print(f"qwen2.5-14b, {half} H800 train + {half} gen GPUs, batch {args.batch}, {args.backend} backend")
    head = f"{'gen GPU':8} {'iter s':>7} {'gen s':>6} {'exp s':>6} {'train s':>7} {'sync s':>6} {'cluster USD':>12} {'iter/s/M$':>9}"
    print(head)
    for gen in TYPES:
        t0 = time.perf_counter()
        trace = rf.traces.generate_rl(
            "qwen2.5-14b",
            train_gpus=half,
            gen_gpus=half,
            train=dict(tp=8, pp=2, dp=half // 16),
            gen=dict(tp=4),
            iterations=args.iterations,
            seed=0,
            global_batch=args.batch,
            response={"median": 2048, "max": 8192},
            train_hardware="H800",
            gen_hardware=gen,
        )
        fab = rf.topologies.FatTree(args.gpus, gpu=[(half, "H800"), (half, gen)])
        res = rf.simulate(fab, trace, backend=args.backend, seed=1)
        it_s = res.run["makespan_ps"] / args.iterations / 1e12
        last = {
            r["stage"]: (r["end_ps"] - r["start_ps"]) / 1e12
            for r in res.stages.to_pylist()
            if r["iteration"] == args.iterations - 1
        }
        usd = rf.cost.cluster_cost(fab)
        print(
            f"{gen:8} {it_s:7.2f} {last['gen']:6.2f} {last['experience']:6.2f} {last['train']:7.2f} "
            f"{last['weight_sync']:6.2f} {usd:12,.0f} {1 / it_s / (usd / 1e6):9.4f}"
            f"   ({time.perf_counter() - t0:.0f} s wall)"
        )


if __name__ == "__main__":
    main()
