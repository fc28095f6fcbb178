"""The flow backend's two models (max-min and dynamic) against packets on stress cases.

Each case runs on the packet backend, the max-min flow model and the dynamic fluid
(``flow_model="dynamic"``: queues, PFC, DCQCN; docs/explanation/flow-dynamic.md) with the
same fabric, workload, routing and seed. error = model / packet - 1 of the makespan (flow
sets) or the op's time (collectives); the per-flow column is the median and 10th / 90th
percentiles of each flow's FCT error. ``stepped`` is the share of the dynamic run's
simulated time spent time-stepping (the rest was jumped over, rates steady).

    python bench/fluid_dynamic.py                     # every case (a few minutes)
    python bench/fluid_dynamic.py --cases incast,pxn_off_permutation --step 500ns
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import rfabric as rf
from rfabric.units import parse_size


def _incast(size):
    fab = rf.topologies.FatTree(128)
    src = np.arange(8, 128, 7)[:16]
    return fab, rf.Flows(src, np.zeros(16, dtype=np.int64), size), {"ecmp": "flow"}, None


def _pxn_off_permutation(size):
    return rf.topologies.RFabric(128, pxn=False), rf.Flows.permutation(128, size, seed=1), {}, None


def _ftos_permutation(size):
    fab = rf.topologies.FatTree(128, oversubscription=3)
    return fab, rf.Flows.permutation(128, size, seed=1), {}, None


def _victim(size):
    # 15 GPUs of other servers send to GPU 0 (an incast behind GPU 0's ToR port) while GPU 1
    # sends to GPU 64 (another ToR): under PFC the incast's back-pressure can reach the
    # victim's ports; without PFC the victim runs at line rate.
    fab = rf.topologies.FatTree(128)
    src = np.r_[np.arange(8, 128, 8)[:15], 1]
    dst = np.r_[np.zeros(15, dtype=np.int64), 64]
    return fab, rf.Flows(src, dst, size), {"ecmp": "flow"}, None


def _dcqcn_recovery(size):
    # one long flow into GPU 0; a second sender joins for an eighth of its bytes, then leaves:
    # DCQCN's cut and slow recovery decide the long flow's end
    fab = rf.topologies.FatTree(128)
    return (
        fab,
        rf.Flows([8, 16], [0, 0], [size, size // 8], start_ps=[0, 20_000_000]),
        {"ecmp": "flow"},
        None,
    )


def _ftos_all_to_all(size):
    return (
        rf.topologies.FatTree(128, oversubscription=3),
        rf.op_trace("all_to_all", range(128), size, "direct"),
        {},
        None,
    )


def _broadcast(size):
    return rf.topologies.FatTree(128), rf.op_trace("broadcast", range(128), size, "chain"), {}, None


def _rfabric_broadcast(size):
    # latency-bound: 64 KiB chunks relayed by PXN through GPUs' NIC queues
    return rf.topologies.RFabric(128), rf.op_trace("broadcast", range(128), size, "chain"), {}, None


def _all_reduce(size):
    return rf.topologies.FatTree(128), rf.op_trace("all_reduce", range(128), size, "ring"), {}, None


def _failure(size):
    # an all-to-all on 64 GPUs; a ToR uplink fails 50 us in
    fab = rf.topologies.FatTree(64)
    spec = fab.to_spec()
    uplink = int(spec.links_of(spec.node_id("tor0"))[-1])

    def setup(sim):
        sim.fail_link(uplink, at="50us")

    return fab, rf.op_trace("all_to_all", range(64), size, "direct"), {}, setup


def _rl(size):
    # one RL iteration (bench/validate_flow.py's: a 4-layer model, train 64 GPUs, gen 64) on
    # RFabric with its controller: circuits change between stages, mid-run
    import validate_flow

    fab = rf.topologies.RFabric(128)
    return fab, validate_flow.workload("rl", 128, size, 1), {"controller": fab.controller()}, None


CASES = {
    "incast": (_incast, "16MiB"),
    "victim": (_victim, "16MiB"),
    "dcqcn_recovery": (_dcqcn_recovery, "16MiB"),
    "pxn_off_permutation": (_pxn_off_permutation, "8MiB"),
    "ftos_permutation": (_ftos_permutation, "8MiB"),
    "ftos_all_to_all": (_ftos_all_to_all, "64MiB"),
    "broadcast": (_broadcast, "64MiB"),
    "rfabric_broadcast": (_rfabric_broadcast, "4MiB"),
    "all_reduce": (_all_reduce, "64MiB"),
    "failure": (_failure, "16MiB"),
    "rl": (_rl, "64MiB"),
}


def run(fab, wl, kw, setup, seed, **model):
    t0 = time.perf_counter()
    sim = rf.Simulation(fab, wl, seed=seed, record_flows=True, **kw, **model)
    if setup is not None:
        setup(sim)
    sim.run()
    res = sim.results()
    return res, time.perf_counter() - t0


def time_of(res, wl) -> float:
    if isinstance(wl, rf.Flows) or wl.num_ops > 1:
        return res.run["makespan_ps"] / 1e9
    return float(res.ops["time_ps"].to_numpy()[0]) / 1e9


def stages(res, pk) -> str:
    """Each stage's error against packets (an RL iteration)."""
    if res.stages is None or not len(res.stages):
        return ""
    sp = {r["stage"]: r["end_ps"] - r["start_ps"] for r in pk.stages.to_pylist()}
    sf = {r["stage"]: r["end_ps"] - r["start_ps"] for r in res.stages.to_pylist()}
    return " ".join(f"{k} {sf[k] / sp[k] - 1:+.1%}" for k in sp if sp[k] > 0)


def per_flow(res, pk) -> str:
    if res.stages is not None and len(res.stages) > 1:
        return stages(res, pk)
    a, b = pk.fct_ps.astype(float), res.fct_ps.astype(float)
    if len(a) != len(b) or len(a) > 20000:
        return ""
    e = b / a - 1
    return f"{np.median(e):+.1%} / {np.percentile(e, 10):+.1%} / {np.percentile(e, 90):+.1%}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--size", default=None, help="override every case's size")
    ap.add_argument("--step", default="1us", help="the dynamic model's flow_step")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    print(
        "| case | packet ms | max-min ms | error | dynamic ms | error | per-flow error max-min "
        "(median / p10 / p90) | per-flow error dynamic | PFC pauses packet / dynamic | stepped "
        "| wall s packet / max-min / dynamic |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---|---|---:|---|")
    for name in args.cases.split(","):
        make, default = CASES[name]
        fab, wl, kw, setup = make(parse_size(args.size or default))
        pk, wp = run(fab, wl, kw, setup, args.seed)
        mm, wm = run(fab, wl, kw, setup, args.seed, backend="flow")
        dy, wd = run(fab, wl, kw, setup, args.seed, backend="flow", flow_model="dynamic", flow_step=args.step)
        tp, tm, td = time_of(pk, wl), time_of(mm, wl), time_of(dy, wl)
        r = dy.run
        stepped = r["stepped_ps"] / max(1, r["stepped_ps"] + r["jumped_ps"])
        print(
            f"| {name} | {tp:.3f} | {tm:.3f} | {tm / tp - 1:+.1%} | {td:.3f} | {td / tp - 1:+.1%} | "
            f"{per_flow(mm, pk)} | {per_flow(dy, pk)} | {pk.run['pfc_pauses']} / {r['pfc_pauses']} | "
            f"{stepped:.0%} | {wp:.2f} / {wm:.2f} / {wd:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
