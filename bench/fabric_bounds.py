"""How close each fabric's simulated collectives come to what its links allow.

For each of the six fabrics and each collective (all_reduce, all_gather, reduce_scatter,
all_to_all, broadcast over every GPU) and two permutations of point-to-point flows (see
permutation_flows),
simulate it on an idle fabric and divide a lower bound computed from the fabric's own link
table (rfabric.bounds: partition/NIC bounds and, for all_to_all and the permutation, a
max-concurrent-flow LP solved by HiGHS) by the simulated time: the efficiency.

    python bench/fabric_bounds.py                      # 128 GPUs, 256 MiB, the README table
    python bench/fabric_bounds.py --gpus 1024 --size 64MiB --kinds all_reduce,all_to_all
    python bench/fabric_bounds.py --markdown           # the table as Markdown

Targets (issue 8): >= 0.8 for every ring, tree and broadcast collective on every fabric, and
for all_to_all and the permutation on FT, FT-OS, RO and RFabric. Cells below their target
are marked with '!'; README.md says why each remaining one cannot reach it.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import rfabric as rf
from rfabric.bounds import FabricGraph, collective_bound, flows_bound
from rfabric.units import parse_size

KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "permutation",
    "gpu_permutation",
)
#: fabrics whose all_to_all / permutation must also reach the target
PACKET_FABRICS = ("FT", "FT-OS", "RO", "RFabric")
TARGET = 0.8


def fabrics(gpus: int, link: str) -> dict:
    T = rf.topologies
    return {
        "FT": T.FatTree(gpus, link),
        "FT-OS": T.FatTree(gpus, link, oversubscription=3),
        "RO": T.RailOptimized(gpus, link),
        "TopoOpt": T.TopoOpt(gpus, link),
        "MixNet": T.MixNet(gpus, link),
        "RFabric": T.RFabric(gpus, link),
    }


def target_of(fabric: str, kind: str) -> float | None:
    if kind == "gpu_permutation":
        return None  # shown, not targeted: see permutation_flows()
    if kind in ("all_to_all", "permutation") and fabric not in PACKET_FABRICS:
        return None
    return TARGET


def permutation_flows(fab, kind: str, size: int, seed: int) -> rf.Flows:
    """``permutation``: servers in a random derangement, GPU j of a server sending to GPU j of
    its partner (rail-aligned, as pipeline-parallel sends and weight transfers between
    instances are). ``gpu_permutation``: a random derangement of GPUs (rf.Flows.permutation),
    whose rails and destination switches collide by chance: no static routing spreads it and
    PXN piles a server's traffic to one rail onto one NIC, so it has no target."""
    if kind == "gpu_permutation":
        return rf.Flows.permutation(fab.gpus, size, seed=seed)
    g, servers = fab.gpus_per_server, fab.servers
    rng = np.random.default_rng(seed)
    while True:
        partner = rng.permutation(servers)
        if not np.any(partner == np.arange(servers)):
            break
    src = np.arange(fab.gpus)
    return rf.Flows(src, partner[src // g] * g + src % g, size)


def measure(name: str, fab, kind: str, size: int, *, lp: bool, seed: int, graph=None) -> dict:
    """Simulated time and lower bound (seconds) of one cell."""
    graph = graph or FabricGraph.of(fab)
    t0 = time.perf_counter()
    if kind in ("permutation", "gpu_permutation"):
        flows = permutation_flows(fab, kind, size, seed)
        res = rf.simulate(fab, flows, seed=seed)
        sim_s = res.run["makespan_ps"] * 1e-12
        bound = flows_bound(fab, flows, lp=lp, graph=graph)
        extra = {"busy_starts": res.run.get("busy_starts", 0)}
    else:
        # the fabric's efficiency: the bound counts its links only, so NCCL's protocol costs
        # (the GPUs' and software's, docs/nccl-model.md) are off
        table = rf.collective(fab, kind, sizes=[size], seed=seed, nccl_model=False)
        sim_s = table["time_ps"][0].as_py() * 1e-12
        bound = collective_bound(fab, kind, size, lp=lp, graph=graph)
        extra = {}
    return {
        "fabric": name,
        "kind": kind,
        "sim_s": sim_s,
        "bound_s": bound.time_s,
        "binding": bound.binding,
        "efficiency": bound.time_s / sim_s if sim_s > 0 else float("nan"),
        "wall_s": time.perf_counter() - t0,
        **extra,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--link", default="200Gbps")
    ap.add_argument(
        "--size", default="256MiB", help="collective size (nccl-tests convention); per-GPU flow size"
    )
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--fabrics", default="FT,FT-OS,RO,TopoOpt,MixNet,RFabric")
    ap.add_argument(
        "--lp",
        choices=("auto", "on", "off"),
        default="auto",
        help="max-concurrent-flow LP for all_to_all and the permutation (auto: up to 256 GPUs; "
        "at 1024 GPUs HiGHS needs over 15 minutes per LP)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown", action="store_true", help="print the efficiency table as Markdown")
    args = ap.parse_args(argv)
    size = parse_size(args.size, allow_zero=False)
    kinds = args.kinds.split(",")
    for k in kinds:
        if k not in KINDS:
            ap.error(f"unknown kind {k!r} (known: {', '.join(KINDS)})")
    all_fabs = fabrics(args.gpus, args.link)
    names = args.fabrics.split(",")
    for n in names:
        if n not in all_fabs:
            ap.error(f"unknown fabric {n!r} (known: {', '.join(all_fabs)})")

    lp = args.lp == "on" or (args.lp == "auto" and args.gpus <= 256)
    print(
        f"# {args.gpus} GPUs, {args.link}, size {args.size}, roce, seed {args.seed}"
        f"{'' if lp else ', no flow LP (partition bounds only)'}",
        flush=True,
    )
    rows = []
    for name in names:
        fab = all_fabs[name]
        graph = FabricGraph.of(fab)
        for kind in kinds:
            r = measure(name, fab, kind, size, lp=lp, seed=args.seed, graph=graph)
            rows.append(r)
            print(
                f"{name:8s} {kind:15s} sim {r['sim_s'] * 1e6:10.1f} us  bound {r['bound_s'] * 1e6:10.1f} us"
                f" ({r['binding']:9s})  efficiency {r['efficiency']:5.3f}  [{r['wall_s']:.1f} s]",
                file=sys.stderr,
                flush=True,
            )

    eff = {(r["fabric"], r["kind"]): r["efficiency"] for r in rows}
    met = total = 0
    lines = []
    sep = " | " if args.markdown else "  "
    head = ["fabric"] + list(kinds)
    if args.markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
    else:
        lines.append(f"{'fabric':8s}" + "".join(f"{k:>16s}" for k in kinds))
    for name in names:
        cells = []
        for kind in kinds:
            e = eff[(name, kind)]
            t = target_of(name, kind)
            mark = ""
            if t is not None:
                total += 1
                met += e >= t
                mark = "" if e >= t else " !"
            cells.append(f"{e:.2f}{mark}")
        if args.markdown:
            lines.append("| " + sep.join([name] + cells) + " |")
        else:
            lines.append(f"{name:8s}" + "".join(f"{c:>16s}" for c in cells))
    print("\n".join(lines))
    print(f"\n{met} of {total} targeted cells reach efficiency >= {TARGET} ('!': below its target)")
    busy = [r for r in rows if r.get("busy_starts")]
    if busy:
        print(f"frames started on a busy port: {sum(r['busy_starts'] for r in busy)}")
    print(f"mean efficiency {np.mean(list(eff.values())):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
