"""The flow-level backend against the packet backend, scenario by scenario.

Each scenario runs on both backends with the same fabric, workload, routing and seed; the
table gives the packet and flow times, the flow model's error, and each backend's wall time.
Flow sets get per-flow FCT errors (median, 90th percentile of the absolute error, worst);
the RL iteration per-op errors over ops that take at least --min-op of packet time, and
each stage's error.

    python bench/validate_flow.py                      # README / bench/README table (~8 min)
    python bench/validate_flow.py --fabrics FT --scenarios all_reduce,incast --size 16MiB
    python bench/validate_flow.py --fabrics RO,TopoOpt,MixNet --size 256MiB   # the other three

Scenarios (128 GPUs by default):
  all_reduce   ring all-reduce over every GPU (8 NCCL channels)
  all_to_all   direct all-to-all over every GPU
  broadcast    weight-sync-style broadcast from GPU 0 to every GPU (pipelined chain)
  permutation  a random GPU derangement, one flow of --size per GPU
  incast       16 GPUs of other servers send --size each to GPU 0
  rl           one RL iteration (a 4-layer model, train 64 GPUs tp8 pp2 dp4, gen 64 GPUs
               tp8, weight sync, response stream), with the fabric's own controller
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import rfabric as rf
from rfabric.units import parse_size, parse_time

SCENARIOS = ("all_reduce", "all_to_all", "broadcast", "permutation", "incast", "rl")
FABRICS = ("FT", "FT-OS", "RFabric")


def fabric(name: str, gpus: int):
    T = rf.topologies
    return {
        "FT": lambda: T.FatTree(gpus),
        "FT-OS": lambda: T.FatTree(gpus, oversubscription=3),
        "RFabric": lambda: T.RFabric(gpus),
        "RO": lambda: T.RailOptimized(gpus),
        "TopoOpt": lambda: T.TopoOpt(gpus),
        "MixNet": lambda: T.MixNet(gpus),
    }[name]()


def workload(name: str, gpus: int, size: int, seed: int):
    if name in ("all_reduce", "all_to_all", "broadcast"):
        algo = {"all_reduce": "ring", "all_to_all": "direct", "broadcast": "chain"}[name]
        return rf.op_trace(name, range(gpus), size, algo)
    if name == "permutation":
        return rf.Flows.permutation(gpus, size, seed=seed)
    if name == "incast":
        rng = np.random.default_rng(seed)
        src = rng.choice(np.arange(8, gpus), size=16, replace=False)
        return rf.Flows(src, np.zeros(16, dtype=np.int64), size)
    if name == "rl":
        tiny = rf.traces.ModelConfig(
            name="tiny", layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000
        )
        half = gpus // 2
        return rf.traces.generate_rl(
            model=tiny,
            train_gpus=half,
            gen_gpus=half,
            train=dict(tp=8, pp=2, dp=half // 16),
            gen=dict(tp=8),
            iterations=1,
            seed=seed,
            global_batch=16,
            decode_steps_per_op=256,
        )
    raise SystemExit(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")


def run(fab, wl, backend: str, seed: int):
    ctrl = fab.controller() if isinstance(wl, rf.traces.Trace) and len(wl.table) > 1 else None
    t0 = time.perf_counter()
    res = rf.simulate(fab, wl, backend=backend, seed=seed, controller=ctrl)
    return res, time.perf_counter() - t0


def speedup(packet_s: float, flow_s: float) -> str:
    x = packet_s / max(flow_s, 1e-9)
    return f"{x:.0f}x" if x >= 10 else f"{x:.1f}x"


def err(flow, packet):
    return (flow - packet) / packet


def compare(pk, fl, wl, min_op_ps: int) -> dict:
    """Time of each backend and the flow model's errors."""
    out = {}
    if isinstance(wl, rf.Flows):
        fp, ff = pk.fct_ps, fl.fct_ps
        out["packet_ms"] = pk.run["makespan_ps"] / 1e9
        out["flow_ms"] = fl.run["makespan_ps"] / 1e9
        e = err(ff.astype(float), fp.astype(float))
        out["op_err"] = (np.median(e), np.percentile(np.abs(e), 90), e[np.argmax(np.abs(e))])
        out["detail"] = f"mean FCT {err(ff.mean(), fp.mean()):+.1%}"
        return out
    tp = pk.ops["time_ps"].to_numpy().astype(float)
    tf = fl.ops["time_ps"].to_numpy().astype(float)
    out["packet_ms"] = pk.run["makespan_ps"] / 1e9
    out["flow_ms"] = fl.run["makespan_ps"] / 1e9
    # ops long enough (packet time) for bandwidth rather than a few microseconds of latency
    keep = (tp >= min_op_ps) | (len(tp) == 1)
    e = err(tf[keep], tp[keep]) if keep.any() else np.array([np.nan])
    out["op_err"] = (np.median(e), np.percentile(np.abs(e), 90), e[np.argmax(np.abs(e))])
    out["ops_compared"] = int(keep.sum())
    if len(tp) > 1:
        sp = {r["stage"]: r["end_ps"] - r["start_ps"] for r in pk.stages.to_pylist()}
        sf = {r["stage"]: r["end_ps"] - r["start_ps"] for r in fl.stages.to_pylist()}
        out["detail"] = "  ".join(f"{k} {err(sf[k], sp[k]):+.1%}" for k in sp if sp[k] > 0)
    else:
        out["detail"] = (
            f"busbw {pk.ops['busbw_GBps'][0].as_py():.1f} / {fl.ops['busbw_GBps'][0].as_py():.1f} GB/s"
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--size", default="64MiB", help="collective buffer / flow size")
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-op", default="50us", help="RL ops shorter than this (packet time) are left out")
    args = ap.parse_args(argv)
    size = parse_size(args.size)
    min_op = parse_time(args.min_op)
    print(
        "| fabric | scenario | packet ms | flow ms | error | per-op error median / p90 abs / worst "
        "| detail (flow vs packet) | packet wall s | flow wall s | speed-up |"
    )
    print("|---|---|---:|---:|---:|---|---|---:|---:|---:|")
    for fname in args.fabrics.split(","):
        fab = fabric(fname, args.gpus)
        for sname in args.scenarios.split(","):
            wl = workload(sname, args.gpus, size, args.seed)
            pk, wp = run(fab, wl, "packet", args.seed)
            fl, wf = run(fab, wl, "flow", args.seed)
            assert pk.run["makespan_ps"] > 0 and fl.run["makespan_ps"] > 0, (fname, sname)
            c = compare(pk, fl, wl, min_op)
            med, p90, worst = c["op_err"]
            n = f" ({c['ops_compared']} ops)" if "ops_compared" in c and c["ops_compared"] > 1 else ""
            print(
                f"| {fname} | {sname} | {c['packet_ms']:.3f} | {c['flow_ms']:.3f} | "
                f"{err(c['flow_ms'], c['packet_ms']):+.1%} | {med:+.1%} / {p90:.1%} / {worst:+.1%}{n} | "
                f"{c['detail']} | {wp:.2f} | {wf:.2f} | {speedup(wp, wf)} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
