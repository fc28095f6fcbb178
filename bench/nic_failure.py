"""What a failed NIC costs on each fabric: collective time with one GPU's NIC link down,
relative to the healthy fabric, for a failure before the collective starts and one a third
of the way through it.

    python bench/nic_failure.py                                   # README / bench/README table
    python bench/nic_failure.py --kinds all_reduce,all_gather,reduce_scatter,all_to_all,broadcast
    python bench/nic_failure.py --size 256MiB --fabrics FT,RFabric

The failed GPU's traffic leaves and enters its server through the server's other NICs over
NVLink, spread frame by frame, so each of them carries its share: 8/7 = 1.14 of its load on
an 8-NIC server is what a NIC-bound collective should pay. Every run must finish (a run that
does not raises).
"""

from __future__ import annotations

import argparse
import sys

import rfabric as rf
from rfabric.units import parse_size

T = rf.topologies
FABRICS = {
    "FT": lambda g: T.FatTree(g),
    "FT-OS": lambda g: T.FatTree(g, oversubscription=3),
    "RO": lambda g: T.RailOptimized(g),
    "RO-nopxn": lambda g: T.RailOptimized(g, pxn=False),
    "TopoOpt": lambda g: T.TopoOpt(g),
    "MixNet": lambda g: T.MixNet(g),
    "RFabric": lambda g: T.RFabric(g),
    "RFabric-nopxn": lambda g: T.RFabric(g, pxn=False),
}


def op(kind: str, gpus: int, size: int):
    return rf.op_trace(kind, range(gpus), size, gpus=gpus)


def makespan(fab, trace, failures=()) -> int:
    res = rf.simulate(fab, trace, failures=failures)
    if res.run["makespan_ps"] < 0:
        raise RuntimeError(f"{fab.name}: the run did not finish ({res.summary()})")
    return res.run["makespan_ps"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--size", default="16MiB")
    ap.add_argument("--kinds", default="all_reduce,all_to_all")
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument("--gpu", type=int, default=3, help="the GPU whose NIC fails")
    args = ap.parse_args(argv)
    size = parse_size(args.size, allow_zero=False)
    kinds = args.kinds.split(",")
    print(f"# {args.gpus} GPUs, {args.size}, GPU {args.gpu}'s NIC fails at t=0 / a third of the way in")
    print(f"{'fabric':14s}" + "".join(f"{k:>24s}" for k in kinds))
    for name in args.fabrics.split(","):
        fab = FABRICS[name](args.gpus)
        link = fab.to_spec().nic_link(args.gpu)
        cells = []
        for kind in kinds:
            trace = op(kind, args.gpus, size)
            base = makespan(fab, trace)
            at0 = makespan(fab, trace, [(link, 0)]) / base
            mid = makespan(fab, trace, [(link, base // 3)]) / base
            cells.append(f"{at0:.2f}x / {mid:.2f}x")
        print(f"{name:14s}" + "".join(f"{c:>24s}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
