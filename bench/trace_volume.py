"""What a trace moves: the sizes of its ops and the payload their ranks send, per stage.

    python bench/trace_volume.py                 # the README's RL iteration (closed form, ~2 s)
    python bench/trace_volume.py --replay        # also replay it on FatTree(64) (slow: see below)
    python bench/trace_volume.py --trace traces/sample.arrow --replay

The README's "replaying this iteration moves ..." sentence comes from this script. Sizes
follow the nccl-tests convention (traces/README.md); "sent" is ``Trace.sent_bytes()``, the
payload every rank of every op sends in total, headers excluded, which is what the
executor's flows add up to (tests/test_traces.py checks it op by op). An op whose ranks all
sit in one server (8 GPUs by default) moves its bytes over NVLink only; the others cross the
network for at least part of it.

``--replay`` runs the trace packet by packet and prints the engine's own counts (delivered
payload, packets, packet-hops, wall time), so the closed form is checked against a replay.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rfabric as rf

README_TRACE = dict(
    model="qwen2.5-14b",
    train_gpus=32,
    gen_gpus=32,
    train=dict(tp=8, pp=2, dp=2),
    gen=dict(tp=8),
    iterations=1,
    seed=1,
)


def tb(x: float) -> str:
    return f"{x / 1e12:.2f} TB"


def volume(trace: rf.traces.Trace, gpus_per_server: int = 8) -> dict:
    """Sizes and sent payload, split by whether an op stays inside one server."""
    a = trace.arrays()
    off = a["ranks_offsets"]
    servers = a["ranks"] // gpus_per_server
    one_server = np.array(
        [len(np.unique(servers[off[i] : off[i + 1]])) == 1 for i in range(trace.num_ops)], dtype=bool
    )
    sent = trace.sent_bytes()
    return {
        "ops": trace.num_ops,
        "size_bytes": int(a["size_bytes"].sum()),
        "sent_bytes": int(sent.sum()),
        "sent_one_server": int(sent[one_server].sum()),
        "sent_across": int(sent[~one_server].sum()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", help="an Arrow/Parquet trace (default: generate the README's iteration)")
    ap.add_argument("--replay", action="store_true", help="also replay it on a fat-tree and print the counts")
    args = ap.parse_args()

    if args.trace:
        trace = rf.traces.read(args.trace)
        what = args.trace
    else:
        trace = rf.traces.generate_rl(**README_TRACE)
        what = "generate_rl(" + ", ".join(f"{k}={v!r}" for k, v in README_TRACE.items()) + ")"
    print(what)
    for r in trace.summary().to_pylist():
        print(
            f"  {r['stage']:>15} {r['phase']:>10} {r['kind']:>14} {r['ops']:>6} ops"
            f"  size {tb(r['size_bytes']):>10}  sent {tb(r['sent_bytes']):>10}"
        )
    v = volume(trace)
    print(
        f"total: {v['ops']} ops, sizes {tb(v['size_bytes'])}, sent {tb(v['sent_bytes'])} "
        f"({tb(v['sent_one_server'])} in ops inside one server: NVLink only; "
        f"{tb(v['sent_across'])} in ops that span servers)"
    )
    if args.replay:
        gpus = max(8, -(-trace.gpus // 8) * 8)
        fab = rf.topologies.FatTree(gpus)
        t0 = time.perf_counter()
        res = rf.simulate(fab, trace, progress=True)
        wall = time.perf_counter() - t0
        run = res.run
        delivered = int(res.ops["delivered_bytes"].to_numpy().sum())
        print(
            f"replay on FatTree({gpus}): delivered {tb(delivered)} (closed form {tb(v['sent_bytes'])}), "
            f"{run['packets']:,} packets, {run['packet_hops']:,} packet-hops, "
            f"makespan {run['makespan_ps'] / 1e9:.1f} ms, engine {run['wall_s']:.1f} s, "
            f"whole call {wall:.1f} s, peak RSS {run['peak_rss_bytes'] / 2**30:.1f} GiB"
        )


if __name__ == "__main__":
    main()
