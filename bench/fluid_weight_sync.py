"""Qwen3-235B-A22B's weight sync alone (bench/qwen3_235b_flow.py's trace, --stage
weight_sync) on RFabric with the stage-aware controller: packets, the max-min flow model and
the dynamic fluid (docs/explanation/flow-dynamic.md). Prints each run's weight-sync time,
PFC pauses and wall time.

    python bench/fluid_weight_sync.py --gpus 64          # GPUs per side
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import only_stage, qwen3_trace  # bench/_common.py

import rfabric as rf
from rfabric.controllers import StageAwareController


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=64, help="GPUs per side (train, generation)")
    ap.add_argument("--models", default="packet,max-min,dynamic")
    ap.add_argument("--step", default="1us")
    args = ap.parse_args(argv)
    n = args.gpus
    tr = qwen3_trace(n)
    tr = only_stage(tr, "weight_sync")
    fab = rf.topologies.RFabric(2 * n)
    print("| model | weight_sync s | PFC pauses | stepped | wall s |")
    print("|---|---:|---:|---:|---:|")
    for model in args.models.split(","):
        kw = {} if model == "packet" else {"backend": "flow", "flow_model": model}
        if model == "dynamic":
            kw["flow_step"] = args.step
        t0 = time.perf_counter()
        sim = rf.Simulation(fab, tr, controller=StageAwareController(), t_ocs="25ms", **kw)
        sim.run()
        res = sim.results()
        wall = time.perf_counter() - t0
        st = {r["stage"]: r["end_ps"] - r["start_ps"] for r in res.stages.to_pylist()}
        r = res.run
        stepped = (
            f"{r['stepped_ps'] / max(1, r['stepped_ps'] + r['jumped_ps']):.0%}" if model == "dynamic" else ""
        )
        print(
            f"| {model} | {st['weight_sync'] / 1e12:.4f} | {r['pfc_pauses']} | {stepped} | {wall:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
