"""Wall time of rf.controllers.allocate_circuits (Algorithm 3) at 128 and 1024 ToRs.

    python bench/allocator_time.py [--reps 11] [--ports 8]

Every ToR has `--ports` OCS ports (its port budget). Demands (bytes, seed 1):

* groups:   expert-parallel all-to-all inside groups of 16 ToRs (128) or 64 ToRs (1024),
            skewed: each directed pair sends 1 MiB x (Pareto(1.5) + 0.01), as a hot expert
            draws more. Timed with the demand passed as scipy.sparse (csr) and dense.
* uniform:  dense all-to-all among all ToRs, 1 MiB per directed pair (every pair ties).
* random:   dense all-to-all among all ToRs, 1 MiB x Uniform(0, 1) per directed pair.

Columns: candidate pairs (demanded, unordered), steps (circuits added), then the median and
the minimum wall time over `--reps` calls (time.perf_counter), input validation included.
"""

import argparse
import time

import numpy as np
import scipy.sparse as sp

from rfabric.controllers import allocate_circuits

MiB = 1 << 20


def demands(n, rng):
    g = 16 if n <= 128 else 64
    groups = np.zeros((n, n))
    for k in range(n // g):
        s = slice(k * g, (k + 1) * g)
        groups[s, s] = MiB * (rng.pareto(1.5, (g, g)) + 0.01)
    np.fill_diagonal(groups, 0)
    uniform = np.full((n, n), float(MiB))
    np.fill_diagonal(uniform, 0)
    random = MiB * rng.random((n, n))
    np.fill_diagonal(random, 0)
    return [
        (f"groups of {g}, sparse", sp.csr_matrix(groups)),
        (f"groups of {g}, dense", groups),
        ("uniform all-to-all", uniform),
        ("random all-to-all", random),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--ports", type=int, default=8)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    print("| ToRs | demand | pairs | steps | median ms | min ms |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in (128, 1024):
        budget = np.full(n, args.ports)
        for name, d in demands(n, rng):
            c, steps = allocate_circuits(d, None, budget, "200Gbps", return_steps=True)
            dd = d.toarray() if sp.issparse(d) else d
            pairs = int(np.count_nonzero(np.triu(dd + dd.T, 1)))
            assert (c.sum(axis=1) <= budget).all()
            wall = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                allocate_circuits(d, None, budget, "200Gbps")
                wall.append(time.perf_counter() - t0)
            print(
                f"| {n} | {name} | {pairs:,} | {steps:,} | {np.median(wall) * 1e3:.1f} | {min(wall) * 1e3:.1f} |"
            )


if __name__ == "__main__":
    main()
