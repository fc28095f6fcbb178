"""Routing modes compared: ring all-reduce busbw, incast, permutation, FT-OS ratio, fairness.

    python bench/bench_routing.py

Columns: ring16/ring64: 256 MiB ring all-reduce busbw as a fraction of the server's NIC
rate (8 x 200 Gb/s) on 16 and 64 GPUs; inc2M/4M/16M: 16:1 incast makespan over its
bottleneck bound; permFT/FT-OS: 4 MiB permutation makespan (us) on 128 GPUs; jain: 8 flows
into one GPU (bench_congestion.fairness).
"""

import importlib.util

import rfabric as rf
from rfabric.traces import Trace

spec = importlib.util.spec_from_file_location(
    "bc", __file__.replace("bench_routing.py", "bench_congestion.py")
)
bc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bc)


def ring(kw, gpus):
    fab = rf.topologies.FatTree(gpus=gpus, radix=16)
    t = Trace.from_columns(
        op_id=[0],
        iteration=[0],
        stage=["train"],
        phase=["x"],
        kind=["all_reduce"],
        ranks=[list(range(gpus))],
        size_bytes=[256 << 20],
        algorithm=["ring"],
        deps=[[]],
        compute_ps=[0],
        period=[0],
    )
    return rf.simulate(fab, t, **kw).ops["busbw_GBps"][0].as_py() / 200


print(
    f"{'ecmp':9s} {'ring16':>6} {'ring64':>6} {'inc2M':>6} {'4M':>5} {'16M':>5} {'permFT':>7} {'FT-OS':>7} {'ratio':>5} {'jain':>5}"
)
for mode in ["dmodk", "flow", "packet", "adaptive"]:
    kw = dict(ecmp=mode)
    i = [bc.incast(kw, s) for s in (2_000_000, 4 << 20, 16 << 20)]
    ft, os3 = bc.permutation(kw, 1), bc.permutation(kw, 3)
    j, u = bc.fairness(kw)
    print(
        f"{mode:9s} {ring(kw, 16):6.2f} {ring(kw, 64):6.2f} {i[0]:6.2f} {i[1]:5.2f} {i[2]:5.2f} {ft:7.0f} {os3:7.0f} {os3 / ft:5.2f} {j:5.3f}",
        flush=True,
    )
