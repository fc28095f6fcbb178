"""A sweep at frontier scale: the six fabrics x two link speeds x {2,048, 8,192} GPUs, one RL
iteration per point, every point's memory bounded; prints each point's wall time and peak
resident memory, and the sweep's points per hour (bench/README.md, "Sweeps at scale").

    python bench/sweep_scale.py                                   # local executor, 2 workers
    python bench/sweep_scale.py --executor ray                    # a local Ray instance
    python bench/sweep_scale.py --gpus 256,512 --model qwen2.5-7b # a quick check
    python bench/sweep_scale.py --set flow_model=dynamic          # another mode (a setting)
    python bench/sweep_scale.py --gpus 2048 --model qwen3-235b-a22b  # a MoE, communication-bound

The workload: ``rf.traces.generate_rl`` of --model (one iteration; train and generation on
half the GPUs each, 256 decode steps per op; a dense model tensor parallel 8, a MoE model in
LAYOUTS with expert parallelism: bench/frontier.py's layout), the same traffic at every
fabric and speed of one scale; each fabric runs its own controller (``controller="own"``) and
the sweep's fairness rule (the weight-sync forest offered to every point). Rows go to --out
(resumable: a rerun skips finished points).
"""

from __future__ import annotations

import argparse
import sys
import time

import rfabric as rf
from rfabric.units import format_size

#: generate_rl arguments of the MoE models (pipeline and expert parallel training, expert
#: parallel generation, two samples per GPU of each side; the two large ones are
#: bench/frontier.py's layouts); any other model runs dense, tensor parallel 8.
LAYOUTS = {
    # (our choice, for sweeps from 256 GPUs: expert groups of 8 over 4 servers)
    "qwen2-57b-a14b": dict(train={"tp": 4, "pp": 2, "ep": 8}, gen={"tp": 4, "ep": 8}, recompute="full"),
    "qwen3-235b-a22b": dict(train={"tp": 4, "pp": 8, "ep": 32}, gen={"tp": 4, "ep": 32}, recompute="full"),
    "kimi-k2": dict(
        train={"tp": 1, "pp": 16, "ep": 16}, gen={"tp": 8, "ep": 64}, recompute="full", zero_stage=1
    ),
}


def rl_args(model: str, gpus: list[int]) -> dict:
    out = {"model": model, "iterations": 1, "decode_steps_per_op": 256}
    if model not in LAYOUTS:
        return {**out, "train": {"tp": 8}, "gen": {"tp": 8}}
    if len(gpus) > 1:
        raise SystemExit(f"--model {model}: one scale per run (its batch is two samples per GPU)")
    n = gpus[0] // 2
    return {**out, **LAYOUTS[model], "global_batch": 2 * n, "pod_gpus": min(512, n)}


def parse_settings(items: list[str]) -> dict:
    out: dict = {"backend": "flow"}
    for item in items:
        key, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="2048,8192")
    ap.add_argument("--links", default="200Gbps,400Gbps")
    ap.add_argument("--fabrics", default=",".join(rf.catalog.PAPER_FABRICS))
    ap.add_argument("--model", default="qwen2.5-14b")
    ap.add_argument("--executor", default="local", choices=("local", "serial", "ray"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-memory", default="6GiB", help="each point's bound")
    ap.add_argument("--set", action="append", default=[], help="an rf.simulate setting, KEY=VALUE")
    ap.add_argument("--out", default="sweep_scale.parquet")
    args = ap.parse_args(argv)
    gpus = [int(g) for g in args.gpus.split(",")]
    workload = {args.model: {"generate_rl": rl_args(args.model, gpus)}}
    t0 = time.perf_counter()
    table = rf.sweep(
        fabrics=args.fabrics.split(","),
        links=args.links.split(","),
        gpus=gpus,
        workload=workload,
        controller="own",
        executor=args.executor,
        workers=args.workers,
        max_memory=args.max_memory,
        settings=parse_settings(args.set),
        out=args.out,
        progress=True,
    )
    wall = time.perf_counter() - t0
    meta = table.schema.metadata or {}
    ran = int(meta.get(b"rfabric.sweep.ran", b"0"))
    print("| fabric | link | GPUs | iteration ms | events | point wall s | peak RSS |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in table.to_pylist():
        it = r["iteration_time_ps"]
        peak = r["peak_rss_bytes"]
        print(
            f"| {r['fabric']} | {r['link_speed']} | {r['gpus']:,} | "
            f"{'-' if it is None else f'{it / 1e9:.3f}'} | {r['events']:,} | {r['wall_s']:.1f} | "
            f"{'-' if peak is None else format_size(peak)} |"
        )
    walls = table["wall_s"].to_pylist()
    peaks = [p for p in table["peak_rss_bytes"].to_pylist() if p is not None]
    print(
        f"\n{table.num_rows} points ({ran} run here) in {wall:.0f} s with {args.workers} {args.executor} "
        f"worker(s): {3600 * ran / wall:.1f} points per hour; point wall time sum {sum(walls):.0f} s; "
        f"largest point peak {format_size(max(peaks)) if peaks else '-'} (bound {args.max_memory})"
    )
    for g in gpus:
        sub = [r for r in table.to_pylist() if r["gpus"] == g]
        s = sum(r["wall_s"] for r in sub)
        print(
            f"  {g:,} GPUs: {len(sub)} points, {s:.0f} s of point wall time, {3600 * len(sub) / s:.1f} points/h/worker"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
