"""Peak memory of a trace replay against the number of RL iterations replayed.

Each point runs in a fresh subprocess (peak RSS is a high-water mark per process) and
replays 1, 2, 4, 8, ... iterations of a small generated RL trace (a 4-layer model on 32 train
+ 32 gen GPUs, FatTree(64)). With the per-flow table off (the default for traces) the engine
holds a flow only while it is alive, so peak RSS and the engine's per-flow table
(``peak_live_flows``) stay flat while the flows created grow with the iterations; with
``--record`` the per-flow result table is kept as well and grows with them.

    python bench/bench_memory.py                    # 1, 2, 4, 8 iterations, flows not recorded
    python bench/bench_memory.py --record           # the same, keeping res.flows (grows)
    python bench/bench_memory.py --iterations 1 2 4 8 16
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

TINY = dict(name="tiny", layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000)


def trace(iterations: int):
    import rfabric as rf

    return rf.traces.generate_rl(
        model=rf.traces.ModelConfig(**TINY),
        train_gpus=32,
        gen_gpus=32,
        train=dict(tp=8, pp=2, dp=2),
        gen=dict(tp=8),
        iterations=iterations,
        seed=3,
        global_batch=16,
        decode_steps_per_op=256,
    )


def one(iterations: int, record: bool) -> dict:
    """One replay in this process: what the parent prints."""
    import rfabric as rf

    fab = rf.topologies.FatTree(gpus=64, link="200Gbps", radix=16)
    tr = trace(iterations)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    res = rf.simulate(fab, tr, seed=1, record_flows=record)
    r = res.run
    return {
        "iterations": iterations,
        "ops": tr.num_ops,
        "flows": r["flows"],
        "peak_live_flows": r["peak_live_flows"],
        "flow_rows": res.flows.num_rows,
        "events": r["events"],
        "wall_s": r["wall_s"],
        "rss_before_run": before,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "complete": r["flows_done"] == r["flows"] and r["makespan_ps"] > 0,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--record", action="store_true", help="record_flows=True (keep res.flows)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(one(args.child, args.record)))
        return 0
    mode = "record_flows=True" if args.record else "record_flows=False (default for traces)"
    print(f"RL replay on FatTree(64), {mode}; each row a fresh process")
    head = (
        f"{'iters':>5} {'ops':>7} {'flows':>10} {'peak live':>9} {'flow rows':>10} "
        f"{'events':>12} {'wall s':>7} {'RSS pre-run MB':>14} {'peak RSS MB':>11}"
    )
    print(head)
    print("-" * len(head))
    rows = []
    for n in args.iterations:
        cmd = [sys.executable, __file__, "--child", str(n)] + (["--record"] if args.record else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        rows.append(r)
        print(
            f"{n:>5} {r['ops']:>7,} {r['flows']:>10,} {r['peak_live_flows']:>9,} {r['flow_rows']:>10,} "
            f"{r['events']:>12,} {r['wall_s']:>7.2f} {r['rss_before_run'] / 2**20:>14.1f} "
            f"{r['peak_rss'] / 2**20:>11.1f}" + ("" if r["complete"] else "  INCOMPLETE")
        )
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(
            f"{b['iterations']}x / {a['iterations']}x iterations: flows x{b['flows'] / a['flows']:.2f}, "
            f"peak RSS x{b['peak_rss'] / a['peak_rss']:.2f}, "
            f"peak RSS - pre-run RSS x{(b['peak_rss'] - b['rss_before_run']) / max(a['peak_rss'] - a['rss_before_run'], 1):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
