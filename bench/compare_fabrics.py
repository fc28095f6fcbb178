"""Collective time on each of the six fabrics, relative to the non-blocking fat-tree.

Each cell is one collective over every GPU on an idle fabric (rf.collective), with the
routing each fabric declares as its own (``Topology.routing``) unless ``--ecmp`` is given.

    python bench/compare_fabrics.py                               # README / bench/README table
    python bench/compare_fabrics.py --kinds all_reduce,all_gather,all_to_all,permutation
    python bench/compare_fabrics.py --ecmp adaptive --fabrics MixNet,TopoOpt

``permutation`` is bench/fabric_bounds.py's rail-aligned server derangement (one flow of
``--size`` bytes per GPU); its time is the makespan.
"""

from __future__ import annotations

import argparse
import sys
import time

import rfabric as rf
from rfabric.units import parse_size

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "permutation")
FABRICS = rf.catalog.PAPER_FABRICS


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


def time_of(fab, kind: str, size: int, seed: int, settings: dict) -> float:
    """Simulated time (s) of one collective (or the permutation's makespan)."""
    if kind == "permutation":
        import numpy as np

        g, servers = fab.gpus_per_server, fab.servers
        rng = np.random.default_rng(seed)
        while True:
            partner = rng.permutation(servers)
            if not np.any(partner == np.arange(servers)):
                break
        src = np.arange(fab.gpus)
        res = rf.simulate(fab, rf.Flows(src, partner[src // g] * g + src % g, size), seed=seed, **settings)
        if res.run["makespan_ps"] < 0:
            raise RuntimeError(f"{fab.name}: the permutation did not finish")
        return res.run["makespan_ps"] * 1e-12
    table = rf.collective(fab, kind, sizes=[size], seed=seed, **settings)
    return table["time_ps"][0].as_py() * 1e-12


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--link", default="200Gbps")
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--kinds", default="all_reduce,all_to_all")
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument(
        "--ecmp",
        default=None,
        help="override every fabric's own routing (dmodk, flow, packet, adaptive, multipath)",
    )
    ap.add_argument("--seed", type=int, default=1)
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
    settings = {} if args.ecmp is None else {"ecmp": args.ecmp}
    print(
        f"# {args.gpus} GPUs, {args.link}, {args.size}, roce, seed {args.seed}, "
        f"routing {args.ecmp or 'each fabric its own'}; time relative to FT",
        flush=True,
    )
    ft = {}
    if "FT" not in names:
        for kind in kinds:
            ft[kind] = time_of(all_fabs["FT"], kind, size, args.seed, settings)
    print(f"{'fabric':8s} {'routing':>9s}" + "".join(f"{k:>16s}" for k in kinds), flush=True)
    for name in names:
        fab = all_fabs[name]
        cells = []
        for kind in kinds:
            t0 = time.perf_counter()
            t = time_of(fab, kind, size, args.seed, settings)
            if name == "FT":
                ft[kind] = t
            cells.append(f"{t / ft[kind]:.2f}x")
            wall = time.perf_counter() - t0
            print(f"  {name} {kind}: {t * 1e6:.1f} us [{wall:.1f} s]", file=sys.stderr, flush=True)
        routing = args.ecmp or getattr(fab, "routing", "dmodk")
        print(f"{name:8s} {routing:>9s}" + "".join(f"{c:>16s}" for c in cells), flush=True)
    print("FT times: " + ", ".join(f"{k} {ft[k] * 1e6:.0f} us" for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
