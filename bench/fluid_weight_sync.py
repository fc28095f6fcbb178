"""Qwen3-235B-A22B's weight sync alone (bench/qwen3_235b_flow.py's trace, --stage
weight_sync) on RFabric with the stage-aware controller: packets, the max-min flow model and
the dynamic fluid (docs/explanation/flow-dynamic.md). Prints each run's weight-sync time,
PFC pauses and wall time.

    python bench/fluid_weight_sync.py --gpus 64          # GPUs per side
    python bench/fluid_weight_sync.py --gpus 512 --models dynamic --progress 10ms
        # a line per 10 ms simulated: how far a long run got, its CPU time and counters
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

from _common import only_stage, qwen3_trace  # bench/_common.py

import rfabric as rf
from rfabric.controllers import StageAwareController
from rfabric.units import parse_time


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_with_progress(sim, every_ps: int, t0: float) -> None:
    """Run in slices of simulated time, a line each (to stderr): what a long run has done."""
    cpu0 = cpu_s()
    until = every_ps
    while not sim.done:
        sim.run(until=until)
        c = sim.engine.counters()
        print(
            f"sim {sim.now / 1e9:.3f} ms wall {time.perf_counter() - t0:.0f} s cpu {cpu_s() - cpu0:.0f} s "
            f"flows_done {c['flows_done']} stepped {c['stepped_ps'] / 1e9:.3f} ms "
            f"jumped {c['jumped_ps'] / 1e9:.3f} ms steps {c['steps']} lane_hops {c['lane_hops']} "
            f"lanes {c['active_lanes']} pauses {c['pauses']}",
            file=sys.stderr,
            flush=True,
        )
        until += every_ps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=64, help="GPUs per side (train, generation)")
    ap.add_argument("--models", default="packet,max-min,dynamic")
    ap.add_argument("--step", default="1us")
    ap.add_argument("--progress", default=None, help="simulated time between progress lines (dynamic)")
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
        if args.progress and model == "dynamic":
            run_with_progress(sim, parse_time(args.progress), t0)
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
