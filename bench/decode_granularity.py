"""The error of aggregating decode steps: one RL iteration's gen stage replayed with one
collective per decoding step and layer (``decode_granularity="step"``, what vLLM/SGLang
issue) against the generator's aggregations (``decode_steps_per_op`` x
``decode_layers_per_op``), on a small fat-tree with the flow backend.

    python bench/decode_granularity.py [--layers 4] [--batch 8] [--backend flow]

Model: the Qwen2.5-14B shape cut to ``--layers`` layers (the per-layer sizes are the real
ones). Two gen layouts: TP 4 inside one 8-GPU server (NVSwitch) and TP 16 across two
servers (the all-reduces cross the fabric). Per granularity it prints the gen stage's ops,
bytes (the same at every granularity), the gen stage's span in the replay and its ratio to
the per-step span; ``bench/README.md`` keeps a run's output.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import rfabric as rf

GRANULARITIES = [
    ("step (1 step x 1 layer)", dict(decode_granularity="step")),
    ("8 steps x 1 layer", dict(decode_steps_per_op=8, decode_layers_per_op=1)),
    ("1 step x all layers", dict(decode_steps_per_op=1)),
    ("64 steps x all layers (default)", dict()),
    ("256 steps x all layers", dict(decode_steps_per_op=256)),
]
LAYOUTS = [("gen TP 4 (in a server)", 16, 4), ("gen TP 16 (two servers)", 32, 16)]


def gen_span(trace: rf.traces.Trace, backend: str, gpus: int) -> tuple[int, float]:
    """(gen ops, gen stage span in seconds) of one replay."""
    res = rf.simulate(rf.topologies.FatTree(gpus), trace, backend=backend)
    assert (res.ops["end_ps"].to_numpy() >= 0).all(), "some ops did not finish"
    span = {r["stage"]: r["end_ps"] - r["start_ps"] for r in res.stages.to_pylist()}
    ops = sum(1 for s in trace.table.column("stage").to_pylist() if s == "gen")
    return ops, span["gen"] / 1e12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=4, help="layers of the cut Qwen2.5-14B shape")
    ap.add_argument("--batch", type=int, default=8, help="responses per iteration")
    ap.add_argument("--backend", default="flow", choices=("flow", "packet"))
    args = ap.parse_args()
    shape = rf.traces.MODELS["qwen2.5-14b"]
    model = dataclasses.replace(shape, name=f"{shape.name}-{args.layers}L", layers=args.layers)
    for title, gpus, tp in LAYOUTS:
        print(f"{model.name}, {title}: FatTree({gpus}), {args.backend} backend, batch {args.batch}")
        print(
            f"  {'granularity':<32} {'gen ops':>8} {'gen bytes':>12} {'gen s':>10} {'/ step':>7} {'wall s':>7}"
        )
        base = None
        for name, opts in GRANULARITIES:
            t0 = time.perf_counter()
            trace = rf.traces.generate_rl(
                model,
                train_gpus=gpus // 2,
                gen_gpus=gpus // 2,
                train=dict(tp=min(8, gpus // 2)),
                gen=dict(tp=tp),
                global_batch=args.batch,
                prompt_len=256,
                response=dict(median=128, max=256),
                algorithm="none",
                memory_check="off",
                **opts,
            )
            gen_bytes = sum(
                n
                for s, n in zip(
                    trace.table.column("stage").to_pylist(),
                    trace.table.column("size_bytes").to_pylist(),
                    strict=True,
                )
                if s == "gen"
            )
            ops, span = gen_span(trace, args.backend, gpus)
            base = base or span
            wall = time.perf_counter() - t0
            print(f"  {name:<32} {ops:>8} {gen_bytes:>12} {span:>10.6f} {span / base:>7.3f} {wall:>7.1f}")


if __name__ == "__main__":
    main()
