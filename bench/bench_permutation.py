"""Benchmark: permutation traffic on a 3-tier FatTree (radix 16).

Every GPU sends one 2 MB message to a distinct GPU (a random derangement), 100 Gb/s links,
4096-byte MTU, RoCE/DCQCN over PFC. Prints wall time, events, packet-hops (packets leaving
a link), their rates and peak memory, for 128 and 1024 GPUs (or --gpus).

    python bench/bench_permutation.py                # both sizes, 3 repetitions each
    python bench/bench_permutation.py --gpus 1024 --reps 5

The issue's targets for 1024 GPUs on a 2-core machine: under 1.5 s wall, and at most 300
instructions per packet-hop under callgrind (see bench/README.md for the callgrind command).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import rfabric as rf


def run_once(gpus: int, transport: str, seed: int):
    fab = rf.topologies.FatTree(gpus=gpus, link="100Gbps", radix=16)
    flows = rf.Flows.permutation(gpus, 2_000_000, seed=seed)
    t0 = time.perf_counter()
    res = rf.simulate(fab, flows, transport=transport, seed=seed, mtu_bytes=4096)
    total = time.perf_counter() - t0
    return res, total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, nargs="*", default=[128, 1024])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--transport", default="roce")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    print(
        f"{'gpus':>6} {'engine s (median)':>18} {'total s':>8} {'events':>12} {'packet-hops':>12} "
        f"{'Mev/s':>7} {'Mhops/s':>8} {'makespan us':>12} {'flows':>7}"
    )
    for gpus in args.gpus:
        walls, totals = [], []
        for _ in range(args.reps):
            res, total = run_once(gpus, args.transport, args.seed)
            walls.append(res.run["wall_s"])
            totals.append(total)
        r = res.run
        w = statistics.median(walls)
        print(
            f"{gpus:>6} {w:>18.3f} {statistics.median(totals):>8.3f} {r['events']:>12,} {r['packet_hops']:>12,} "
            f"{r['events'] / w / 1e6:>7.2f} {r['packet_hops'] / w / 1e6:>8.2f} {r['makespan_ps'] / 1e6:>12.1f} "
            f"{r['flows_done']:>4}/{r['flows']}"
        )
        print(
            f"       engine wall s over {args.reps} runs: {', '.join(f'{x:.3f}' for x in walls)}; "
            f"drops {r['drops']}, pfc pauses {r['pfc_pauses']}, ecn marks {r['ecn_marks']}"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
