"""Engine speed and memory against fabric size: the permutation at 1,024 to 16,384 GPUs.

Every GPU sends one 4 MiB message to a distinct GPU (a random derangement, seed 1) on a
non-blocking 3-tier FatTree (the smallest radix that holds the GPUs), 200 Gb/s links, 9216 B
MTU, RoCE/DCQCN over PFC. Each run is a fresh subprocess; for each size the script prints
the engine's events/s and packet-hops/s (engine wall time, median over --reps runs; the CPU
time of simulate() beside it, steadier on a shared machine), peak RSS of the process
and of the part before the run (interpreter, imports, spec), and with --valgrind, from one run
under callgrind with its cache simulator (counting inside Engine::run only), instructions,
D1 misses and misses past a 1 MiB L2 (--ll) per packet-hop.

    python bench/bench_scale.py                          # 1024, 4096, 16384 GPUs
    python bench/bench_scale.py --gpus 1024 4096 --reps 5
    python bench/bench_scale.py --gpus 1024 4096 --reps 1 --size 524288 --valgrind
    python bench/bench_scale.py --gpus 1024 2048 4096 --probe   # with the host's cache curve

--probe builds bench/cache_probe.cpp (with $CXX, else c++) and prints, before and after the
runs, the latency of a dependent random walk over 1 to 64 MiB: where it jumps is the cache
this process gets on this host at that moment (the L3 is shared with other tenants of a
cloud host), which is what decides how the engine's speed holds from one size to the next.

callgrind's cache model (--cache-sim=yes: the host's L1, and --ll as the last level) is a
simulation, not the hardware's counters (perf stat sees no hardware events in the development VM);
it finds which accesses miss, not their cost. Under valgrind a run takes ~50x longer: use
--size 524288 with --valgrind for 4,096 GPUs (about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def one(gpus: int, size: int) -> dict:
    """One permutation run in this process (what the parent reads)."""
    import rfabric as rf

    t0 = time.perf_counter()
    fab = rf.topologies.FatTree(gpus=gpus, link="200Gbps")
    flows = rf.Flows.permutation(gpus, size, seed=1)
    spec = fab.to_spec()
    built = time.perf_counter() - t0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    u0 = resource.getrusage(resource.RUSAGE_SELF)
    res = rf.simulate(spec, flows, mtu_bytes=9216, seed=1)
    u1 = resource.getrusage(resource.RUSAGE_SELF)
    r = res.run
    return {
        "gpus": gpus,
        "radix": fab.radix,
        "build_s": built,
        "wall_s": r["wall_s"],
        # CPU time of simulate() (engine plus result tables): steadier than wall on a shared machine
        "cpu_s": (u1.ru_utime + u1.ru_stime) - (u0.ru_utime + u0.ru_stime),
        "events": r["events"],
        "packet_hops": r["packet_hops"],
        "makespan_ps": r["makespan_ps"],
        "complete": r["flows_done"] == r["flows"],
        "rss_before_run": before,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def child(gpus: int, size: int, prefix: list[str] | None = None) -> dict:
    cmd = [
        *(prefix or []),
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        str(gpus),
        "--size",
        str(size),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def callgrind(gpus: int, size: int, ll: str) -> dict:
    """Instructions and simulated cache misses inside Engine::run for one run."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cg.out")
        prefix = [
            "valgrind",
            "--tool=callgrind",
            "--cache-sim=yes",
            f"--LL={ll}",
            f"--callgrind-out-file={path}",
            "--toggle-collect=*Engine::run*",
        ]
        run = child(gpus, size, prefix)
        events = totals = None
        with open(path) as f:
            for line in f:
                if line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith(("summary:", "totals:")):
                    totals = [int(x) for x in line.split()[1:]]
    c = dict(zip(events, totals, strict=False))
    hops = run["packet_hops"]
    return {
        "Ir": c["Ir"],
        "ir_per_hop": c["Ir"] / hops,
        "d1_per_hop": (c.get("D1mr", 0) + c.get("D1mw", 0)) / hops,
        "ll_per_hop": (c.get("DLmr", 0) + c.get("DLmw", 0)) / hops,
        "hops": hops,
    }


def probe(sizes_mib: list[float]) -> None:
    """Build and run cache_probe.cpp: ns per dependent load over each working-set size."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache_probe.cpp")
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "cache_probe")
        subprocess.run([os.environ.get("CXX", "c++"), "-O2", "-o", exe, src], check=True)
        out = subprocess.run([exe, *map(str, sizes_mib)], check=True, capture_output=True, text=True).stdout
    print("cache probe (random dependent loads; where the latency jumps is the cache this process gets):")
    for line in out.rstrip().splitlines():
        print("   " + line)
    sys.stdout.flush()


PROBE_MIB = [1, 2, 4, 8, 12, 16, 24, 32, 64]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--size", type=int, default=4 << 20, help="bytes per flow (default 4 MiB)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--valgrind", action="store_true", help="also run each size once under callgrind")
    ap.add_argument(
        "--ll",
        default="1048576,16,64",
        help="callgrind's last-level cache (size,assoc,line); default a 1 MiB 16-way L2, the "
        "development machine's per-core L2: its misses are what goes to L3 or memory",
    )
    ap.add_argument(
        "--probe", action="store_true", help="print the host's cache curve before and after (cache_probe.cpp)"
    )
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(one(args.child, args.size)))
        return 0
    if args.probe:
        probe(PROBE_MIB)
    print(
        f"permutation, {args.size / 2**20:g} MiB per GPU, FatTree 200 Gb/s, 9216 B MTU, RoCE; medians of {args.reps}"
    )
    head = (
        f"{'gpus':>6} {'radix':>5} {'events':>12} {'packet-hops':>12} {'engine s':>9} {'cpu s':>7} {'Mev/s':>7} "
        f"{'Mhops/s':>8} {'ns/event':>8} {'pre-run MB':>10} {'peak MB':>8}"
        + (f" {'Ir/hop':>7} {'D1 miss/hop':>11} {'L2 miss/hop':>11}" if args.valgrind else "")
    )
    print(head)
    print("-" * len(head))
    first = None
    for gpus in args.gpus:
        runs = [child(gpus, args.size) for _ in range(args.reps)]
        r = runs[-1]
        wall = statistics.median(x["wall_s"] for x in runs)
        cpu = statistics.median(x["cpu_s"] for x in runs)
        rss = statistics.median(x["peak_rss"] for x in runs)
        ev_s = r["events"] / wall
        first = first or ev_s
        line = (
            f"{gpus:>6} {r['radix']:>5} {r['events']:>12,} {r['packet_hops']:>12,} {wall:>9.3f} {cpu:>7.3f} "
            f"{ev_s / 1e6:>7.2f} {r['packet_hops'] / wall / 1e6:>8.2f} {1e9 / ev_s:>8.1f} {r['rss_before_run'] / 2**20:>10.1f} "
            f"{rss / 2**20:>8.1f}"
        )
        if args.valgrind:
            cg = callgrind(gpus, args.size, args.ll)
            line += f" {cg['ir_per_hop']:>7.1f} {cg['d1_per_hop']:>11.2f} {cg['ll_per_hop']:>11.3f}"
        if not r["complete"]:
            line += "  INCOMPLETE"
        print(
            line
            + f"   (events/s x{ev_s / first:.2f} of the first size; walls {[round(x['wall_s'], 3) for x in runs]})"
        )
        sys.stdout.flush()
    if args.probe:
        probe(PROBE_MIB)
    return 0


if __name__ == "__main__":
    sys.exit(main())
