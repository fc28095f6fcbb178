"""Regenerate the sample traces of this folder (deterministic: same files every run).

Usage, from the repository root::

    python traces/gen_samples.py [--out DIR]

``sample.arrow`` is written by hand, op by op, to show every kind of op; the ``rl_*`` files
come from `rfabric.traces.generate_rl` with fixed seeds. Every file stays well under 1 MB.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if importlib.util.find_spec("rfabric") is None:  # run from a source checkout
    sys.path.insert(0, str(HERE.parent))

from rfabric.traces import Trace, generate_rl, write  # noqa: E402

MIB = 1 << 20
MS = 10**9  # picoseconds per millisecond


def hand_written() -> Trace:
    """Twelve ops on 16 GPUs: a 2-stage training step, weight sync, AFD decode, a stream."""
    ops = [
        # (stage, phase, kind, ranks, size_bytes, algorithm, deps, compute_ps, period, m2n_senders)
        ("train", "fwd", "all_reduce", [0, 1, 2, 3], 16 * MIB, "auto", [], 2 * MS, 0, 0),
        ("train", "fwd", "all_to_all", [0, 1, 2, 3], 8 * MIB, "auto", [0], 1 * MS, 0, 0),
        ("train", "fwd", "send", [0, 4], 4 * MIB, "direct", [1], 0, 0, 0),
        ("train", "bwd", "all_reduce", [4, 5, 6, 7], 16 * MIB, "ring", [2], 4 * MS, 0, 0),
        ("train", "bwd", "send", [4, 0], 4 * MIB, "direct", [3], 0, 0, 0),
        ("train", "grad_sync", "reduce_scatter", [0, 4], 32 * MIB, "auto", [4], 1 * MS, 1, 0),
        ("train", "grad_sync", "all_gather", [0, 4], 16 * MIB, "auto", [5], 0, 1, 0),
        ("weight_sync", "broadcast", "broadcast", [0, 8, 12], 64 * MIB, "direct", [6], 0, 2, 0),
        ("gen", "decode", "all_reduce", [8, 9, 10, 11], 1 * MIB, "auto", [7], MS // 2, 3, 0),
        ("gen", "decode", "m2n", [8, 9, 10, 11, 12, 13, 14, 15], 2 * MIB, "direct", [8], 0, 3, 4),
        ("gen", "decode", "m2n", [12, 13, 14, 15, 8, 9, 10, 11], 2 * MIB, "direct", [9], MS // 4, 3, 4),
        ("response_stream", "stream", "send", [8, 0], 64 * 1024, "direct", [10], 0, 4, 0),
    ]
    cols = list(zip(*ops, strict=True))
    return Trace.from_columns(
        op_id=list(range(len(ops))),
        stage=cols[0],
        phase=cols[1],
        kind=cols[2],
        ranks=cols[3],
        size_bytes=cols[4],
        algorithm=cols[5],
        deps=cols[6],
        compute_ps=cols[7],
        period=cols[8],
        m2n_senders=cols[9],
        metadata={"gpus": 16, "generator": "traces/gen_samples.py", "parameters": {"hand_written": True}},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: this folder)")
    out = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    samples = {
        "sample.arrow": hand_written(),
        "rl_qwen2.5-14b_64gpu.arrow": generate_rl(
            "qwen2.5-14b",
            train_gpus=32,
            gen_gpus=32,
            train=dict(tp=8, pp=2),
            gen=dict(tp=8),
            iterations=1,
            seed=1,
            global_batch=64,
        ),
        "rl_qwen2-57b-a14b_afd_64gpu.parquet": generate_rl(
            "qwen2-57b-a14b",
            train_gpus=32,
            gen_gpus=32,
            train=dict(tp=4, ep=8),
            gen=dict(tp=2, afd=dict(attn=4, ffn=4)),
            iterations=2,
            seed=2,
            mode="async",
            global_batch=64,
            weight_sync="flat",
            recompute="full",  # 119.4 GB per GPU without (55.3 GB activations); 73 GB with
        ),
    }
    for name, trace in samples.items():
        path = write(trace, out / name)
        print(f"{path}: {trace.num_ops} ops, {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
