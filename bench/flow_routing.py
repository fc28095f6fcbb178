"""Load-aware routing in the flow backend against packets, on the fabrics that spread frames.

TopoOpt (multipath: a server's NVSwitch spreads frames over NICs whose paths cross one more
server, by load) and MixNet (adaptive: the least-queued equal-cost next hop). Each scenario
runs on the packet backend (the oracle) and the flow backend; the table gives both times and
the flow model's error, per stage for the RL iteration. Packet results can be kept in a JSON
file (--packet-cache) so that a change to the flow model reruns only the flow side.

    python bench/flow_routing.py                          # TopoOpt, MixNet, 128 GPUs, 64 MiB
    python bench/flow_routing.py --fabrics TopoOpt --scenarios all_to_all --packet-cache /tmp/pk.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import rfabric as rf
from rfabric.units import parse_size

SCENARIOS = ("all_to_all", "all_gather", "broadcast", "permutation", "rl")


def fabric(name: str, gpus: int):
    return {"TopoOpt": rf.topologies.TopoOpt, "MixNet": rf.topologies.MixNet}[name](gpus)


def workload(name: str, gpus: int, size: int, seed: int):
    if name == "all_gather":
        return rf.op_trace(name, range(gpus), size, "ring")
    if name in ("all_to_all", "broadcast", "permutation", "rl"):
        import validate_flow  # bench/validate_flow.py's scenarios (its RL iteration: a 4-layer model)

        return validate_flow.workload(name, gpus, size, seed)
    raise SystemExit(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")


def measure(fab, wl, backend: str, seed: int) -> dict:
    ctrl = fab.controller() if isinstance(wl, rf.traces.Trace) and len(wl.table) > 1 else None
    t0 = time.perf_counter()
    res = rf.simulate(fab, wl, backend=backend, seed=seed, controller=ctrl)
    out = {"wall_s": time.perf_counter() - t0, "makespan_ps": int(res.run["makespan_ps"])}
    if isinstance(wl, rf.traces.Trace) and len(wl.table) > 1:
        out["stages"] = {r["stage"]: int(r["end_ps"] - r["start_ps"]) for r in res.stages.to_pylist()}
    if backend == "flow":
        out["recomputes"] = int(res.run.get("recomputes", 0))
        out["component_subflows"] = int(res.run.get("component_subflows", 0))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--fabrics", default="TopoOpt,MixNet")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--packet-cache", default=None, help="JSON file keeping the packet results")
    args = ap.parse_args(argv)
    size = parse_size(args.size)
    cache = {}
    if args.packet_cache and os.path.exists(args.packet_cache):
        with open(args.packet_cache) as f:
            cache = json.load(f)
    print(
        "| fabric | scenario | packet ms | flow ms | error | stages (flow vs packet) | flow wall s | recomputes |"
    )
    print("|---|---|---:|---:|---:|---|---:|---:|")
    for fname in args.fabrics.split(","):
        fab = fabric(fname, args.gpus)
        for sname in args.scenarios.split(","):
            wl = workload(sname, args.gpus, size, args.seed)
            key = f"{fname}/{sname}/{args.gpus}/{size}/{args.seed}"
            if key not in cache:
                cache[key] = measure(fab, wl, "packet", args.seed)
                if args.packet_cache:
                    with open(args.packet_cache, "w") as f:
                        json.dump(cache, f, indent=1)
            pk = cache[key]
            fl = measure(fab, wl, "flow", args.seed)
            e = fl["makespan_ps"] / pk["makespan_ps"] - 1
            stages = ""
            if "stages" in pk:
                stages = "  ".join(
                    f"{k} {fl['stages'][k] / v - 1:+.1%}" for k, v in pk["stages"].items() if v > 0
                )
            print(
                f"| {fname} | {sname} | {pk['makespan_ps'] / 1e9:.3f} | {fl['makespan_ps'] / 1e9:.3f} | "
                f"{e:+.1%} | {stages} | {fl['wall_s']:.2f} | {fl['recomputes']} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
