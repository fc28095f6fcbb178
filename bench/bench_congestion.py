"""Congestion-control behaviour behind rfabric's transport defaults.

Three scenarios on 200 Gb/s fat-trees, for the default settings and for alternatives:
  * 16:1 incast into one GPU, 2 MB / 4 MiB / 16 MiB messages: makespan / bottleneck bound
  * 4 MiB permutation on FT and on FT-OS 3:1 (128 GPUs, radix 16): makespan and their ratio
  * 8 long flows into one GPU, each on its own switch ingress: Jain index and utilization
    of the bottleneck over 2..6 ms

    python bench/bench_congestion.py
"""

from __future__ import annotations

import numpy as np

import rfabric as rf


def jain(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def incast(kw, size):
    fab = rf.topologies.FatTree(gpus=128)
    src = np.arange(8, 128, 7)[:16]
    res = rf.simulate(fab, rf.Flows(src, np.zeros(16, int), size), **kw)
    header = res.run["header_bytes"]
    payload = 9216 - header
    wire = 16 * (size + -(-size // payload) * header)
    return res.run["makespan_ps"] / (wire * 8 * 1e12 / 200e9)


def permutation(kw, oversubscription):
    fab = rf.topologies.FatTree(gpus=128, oversubscription=oversubscription, radix=16)
    return rf.simulate(fab, rf.Flows.permutation(128, 4 << 20, seed=1), **kw).run["makespan_ps"] / 1e6


def fairness(kw):
    fab = rf.topologies.FatTree(gpus=16, gpus_per_server=1, radix=32)
    sim = rf.Simulation(fab, rf.Flows(np.arange(1, 9), np.zeros(8, int), 400_000_000), **kw)
    sim.run("2ms")
    before = sim.delivered_bytes().copy()
    sim.run("6ms")
    got = sim.delivered_bytes() - before
    return jain(got), got.sum() * 8 / 4e-3 / 200e9


SETTINGS = {
    "roce (defaults)": {},
    "roce, paper byte counter 10MB": dict(dcqcn_byte_counter="10MB"),
    "roce, XOFF 40us (~buffer)": dict(pfc_xoff="40us"),
    "roce, PFC only (no ECN)": dict(ecn_kmin="1s", ecn_kmax="1s"),
    "dctcp (defaults)": dict(transport="dctcp"),
}


def main() -> None:
    print(
        f"{'setting':32s} {'incast 2MB':>10} {'4MiB':>6} {'16MiB':>6}   {'perm FT us':>10} {'FT-OS us':>9} "
        f"{'ratio':>5}   {'Jain':>5} {'util':>5}"
    )
    for name, kw in SETTINGS.items():
        i2, i4, i16 = (incast(kw, s) for s in (2_000_000, 4 << 20, 16 << 20))
        ft, os3 = permutation(kw, 1), permutation(kw, 3)
        j, u = fairness(kw)
        print(
            f"{name:32s} {i2:10.2f} {i4:6.2f} {i16:6.2f}   {ft:10.0f} {os3:9.0f} {os3 / ft:5.2f}   {j:5.3f} {u:5.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
