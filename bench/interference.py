"""Two-job interference (issue 26 item 7): each job alone against both together, packed
against interleaved ("spread") placement, on FT, FT-OS and RFabric.

Two identical training-step jobs of ``--job-gpus`` GPUs each share a fabric of twice that
many GPUs. A job's iteration is an all-to-all (expert parallelism, ``--a2a`` per GPU) after
``--compute`` of compute, then an all-reduce of the gradients (``--ar``); ``--iterations``
of them in a chain. Each (fabric, placement) runs the two jobs together and each job alone on
the GPUs the placement gave it (rf.sweeps.placement_sweep), so the slowdown is what sharing
the fabric costs under that placement; FCT slowdowns come from the recorded flows, queue
depths from the links table (ToR ports, and packet switches above the ToRs).

    python bench/interference.py                     # docs/explanation/shared-clusters.md
    python bench/interference.py --workload rl       # two small RL iterations instead (5 min of CPU)
    python bench/interference.py --markdown
"""

from __future__ import annotations

import argparse
import sys
import time

import rfabric as rf
from rfabric.sweeps.placement import placement_sweep

FABRICS = ("FT", "FT-OS", "RFabric")


def step_trace(gpus: int, iterations: int, a2a: str, ar: str, compute: str) -> rf.traces.Trace:
    """A training-step chain over ranks 0..gpus-1: per iteration, compute then an
    all-to-all, then an all-reduce."""
    cols = {k: [] for k in ("op_id", "iteration", "phase", "kind", "size_bytes", "deps", "compute_ps")}
    prev: list[int] = []
    for it in range(iterations):
        for kind, size, comp in (("all_to_all", a2a, compute), ("all_reduce", ar, "0us")):
            op = len(cols["op_id"])
            for k, v in (
                ("op_id", op),
                ("iteration", it),
                ("phase", kind),
                ("kind", kind),
                ("size_bytes", size),
                ("deps", prev),
                ("compute_ps", comp),
            ):
                cols[k].append(v)
            prev = [op]
    n = len(cols["op_id"])
    return rf.traces.Trace.from_columns(stage="train", ranks=[list(range(gpus))] * n, gpus=gpus, **cols)


def rl_trace(gpus: int, seed: int) -> rf.traces.Trace:
    """One RL iteration of Qwen2.5-14B cut to 2 layers (rfabric demo's model), half the GPUs
    training and half generating."""
    return rf.traces.generate_rl(
        {"base": "qwen2.5-14b", "layers": 2}, train_gpus=gpus // 2, gen_gpus=gpus // 2, seed=seed
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument("--job-gpus", type=int, default=64)
    ap.add_argument("--link", default="200Gbps")
    ap.add_argument("--workload", choices=("step", "rl"), default="step")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--a2a", default="8MiB")
    ap.add_argument("--ar", default="64MiB")
    ap.add_argument("--compute", default="200us")
    ap.add_argument("--policies", default="packed,spread")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)

    n = args.job_gpus
    if args.workload == "step":
        make = lambda: step_trace(n, args.iterations, args.a2a, args.ar, args.compute)  # noqa: E731
    else:
        make = lambda: rl_trace(n, args.seed)  # noqa: E731
    jobs = {"A": make(), "B": make()}
    t0 = time.perf_counter()
    rows = placement_sweep(
        args.fabrics.split(","),
        jobs,
        args.policies.split(","),
        gpus=2 * n,
        link=args.link,
        seed=args.seed,
    ).to_pylist()
    wall = time.perf_counter() - t0

    def ms(ps):
        return "-" if ps is None else f"{ps / 1e9:.3f}"

    def num(x, fmt):
        return "-" if x is None else format(x, fmt)

    def kib(b):
        return "-" if b is None else f"{b / 1024:.0f}"

    head = [
        "fabric",
        "placement",
        "job",
        "servers",
        "ToRs",
        "shared ToRs",
        "alone ms",
        "together ms",
        "slowdown",
        "FCT mean together",
        "FCT p99 alone",
        "FCT p99 together",
        "ToR queue KiB",
        "spine queue KiB",
    ]
    body = [
        [
            r["fabric"],
            r["policy"],
            r["job"],
            str(r["servers"]),
            str(r["tors"]),
            str(r["shared_tors"]),
            ms(r["alone_iteration_time_ps"]),
            ms(r["iteration_time_ps"]),
            num(r["slowdown_vs_alone"], ".3f"),
            num(r["fct_slowdown_mean"], ".2f"),
            num(r["alone_fct_slowdown_p99"], ".2f"),
            num(r["fct_slowdown_p99"], ".2f"),
            kib(r["tor_max_queue_bytes"]),
            kib(r["spine_max_queue_bytes"]),
        ]
        for r in rows
    ]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for b in body:
            print("| " + " | ".join(b) + " |")
    else:
        w = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
        print("  ".join(h.rjust(w[i]) for i, h in enumerate(head)))
        for b in body:
            print("  ".join(c.rjust(w[i]) for i, c in enumerate(b)))
    print(f"\n{len(rows)} rows, {wall:.0f} s wall", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
