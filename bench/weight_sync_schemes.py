"""The weight-sync schemes of `generate_rl` side by side on one fat-tree (flow backend).

    python bench/weight_sync_schemes.py [--iterations 3] [--link 400Gbps]

Qwen2.5-14B, 16 train GPUs (TP 8, PP 2) and 32 gen GPUs (8 instances of TP 4, four
8-GPU machines), 128 responses per iteration (prompt 512, response median 1024, sigma 1,
max 8192), seed 1, on FatTree(48) with every link at ``--link``. Per scheme and mode
(``sync``, one-step ``async``) it prints: the trace's ops; the weight bytes the replay's
flows carry from train GPUs to gen GPUs in iteration 0, in units of M (the model's bytes);
the span of the last iteration's weight sync (nothing else runs then, so it is the
scheme's own time on an idle fabric); the end of the last training step (the iterations
without that final sync); the end of the run. docs/explanation/weight-sync-schemes.md
keeps a run's output.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rfabric as rf
import rfabric.traces as rt
from rfabric.traces.rl.weight_sync import WEIGHT_SYNC_MODES

TRAIN, GEN = 16, 32


def one(ws: str, mode: str, iterations: int, link: str) -> dict:
    tr = rt.generate_rl(
        "qwen2.5-14b",
        train_gpus=TRAIN,
        gen_gpus=GEN,
        train=dict(tp=8, pp=2),
        gen=dict(tp=4),
        iterations=iterations,
        mode=mode,
        global_batch=128,
        prompt_len=512,
        response=dict(median=1024, sigma=1.0, max=8192),
        weight_sync=ws,
        memory_check="off",
        seed=1,
    )
    t0 = time.perf_counter()
    res = rf.simulate(rf.topologies.FatTree(TRAIN + GEN, link=link), tr, backend="flow", record_flows=True)
    wall = time.perf_counter() - t0
    ops = tr.table
    ws0 = np.flatnonzero(
        (np.asarray(ops["stage"].cast("string").to_pylist()) == "weight_sync")
        & (ops["iteration"].to_numpy() == 0)
    )
    f = res.flows
    src, dst, op = (f[c].to_numpy() for c in ("src", "dst", "op_id"))
    cross = np.isin(op, ws0) & (src < TRAIN) & (dst >= TRAIN)
    M = rt.MODELS["qwen2.5-14b"].params * 2
    st = res.stages.to_pylist()
    last = [r for r in st if r["stage"] == "weight_sync"][-1]
    return dict(
        scheme=ws,
        mode=mode,
        ops=tr.num_ops,
        boundary_M=float(f["size_bytes"].to_numpy()[cross].sum()) / M,
        last_sync_s=(last["end_ps"] - last["start_ps"]) / 1e12,
        train_end_s=max(r["end_ps"] for r in st if r["stage"] == "train") / 1e12,
        end_s=max(r["end_ps"] for r in st) / 1e12,
        wall_s=wall,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--link", default="400Gbps")
    args = ap.parse_args()
    rows = [
        one(ws, mode, args.iterations, args.link) for mode in ("sync", "async") for ws in WEIGHT_SYNC_MODES
    ]
    print(
        rf.format_table(
            rows,
            columns=["scheme", "mode", "ops", "boundary_M", "last_sync_s", "train_end_s", "end_s", "wall_s"],
        )
    )


if __name__ == "__main__":
    main()
