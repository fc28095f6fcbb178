"""The flow-level backend against the packet backend, scenario by scenario.

Each scenario runs on both backends with the same fabric, workload, routing and seed; the
table gives the packet and flow times, the flow model's error, and each backend's wall time.
Flow sets get per-flow FCT errors (median, 90th percentile of the absolute error, worst);
the RL iteration per-op errors over ops that take at least --min-op of packet time, and
each stage's error.

    python bench/validate_flow.py                      # README / bench/README table (~8 min)
    python bench/validate_flow.py --fabrics FT --scenarios all_reduce,incast --size 16MiB
    python bench/validate_flow.py --fabrics RO,TopoOpt,MixNet --size 256MiB   # the other three
    python bench/validate_flow.py --scale 128,256,512 --fabrics FT,RFabric   # error against scale
    python bench/validate_flow.py --scale 128 --modes flow,flow+flow_ring_slices=0

--scale N,N,...: per size N, one RL iteration of a small MoE model (every op kind the
generator emits: all_reduce, reduce_scatter, all_gather, all_to_all, send, broadcast) on N
GPUs of each fabric with its own controller, run whole (--replay iteration) or stage by stage
(--replay stages: each stage alone, its dependencies on other stages dropped; --replay auto:
whole up to --whole-max GPUs, default 2,048, where a packet iteration takes about a minute),
in packets and in each --modes mode. One row per stage and per (stage, op kind), with the packet run's PFC pauses, ECN marks and drops beside the error;
Markdown on stdout, the same rows as CSV in --csv (default bench/validation/flow_scale.csv).
A mode is a backend and config settings: `flow`, `flow+flow_ring_slices=0`, ...; errors are
always against `packet`.

Scenarios (128 GPUs by default):
  all_reduce   ring all-reduce over every GPU (8 NCCL channels)
  all_to_all   direct all-to-all over every GPU
  broadcast    weight-sync-style broadcast from GPU 0 to every GPU (pipelined chain)
  permutation  a random GPU derangement, one flow of --size per GPU
  incast       16 GPUs of other servers send --size each to GPU 0
  rl           one RL iteration (a 4-layer model, train 64 GPUs tp8 pp2 dp4, gen 64 GPUs
               tp8, weight sync, response stream), with the fabric's own controller

Stress scenarios (each on its own 128-GPU fabric; --fabrics and --gpus do not apply; packets
against each --modes mode, with the packet run's PFC pauses, ECN marks and drops):
  victims         FT-OS 3:1: a 16:1 incast into GPU 0 and 16 victim flows that share its
                  upstream ports, not its bottleneck (detail: the victims' mean FCT)
  dcqcn_recovery  FT: a long flow into GPU 0 and a 16:1 burst into GPU 0 that ends while the
                  long flow goes on (detail: the long flow's FCT)
  pfc_spreading   RFabric, PXN off: an 8 MB random permutation (seed 4)
  link_failure    FT: ring all-reduce of --size, a ToR-aggregation link fails a third of the way in
  circuit_change  RFabric, PXN off: the 8 MB permutation, 8 circuits re-paired a third of the
                  way in (50 us dark)
    python bench/validate_flow.py --scenarios victims,dcqcn_recovery,pfc_spreading,link_failure,circuit_change
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import sys
import time

import numpy as np
import pyarrow as pa

import rfabric as rf
from rfabric.units import parse_size, parse_time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import only_stage  # noqa: E402  (bench/_common.py, shared with qwen3_235b_flow.py)

SCENARIOS = ("all_reduce", "all_to_all", "broadcast", "permutation", "incast", "rl")
FABRICS = ("FT", "FT-OS", "RFabric")
ALL_FABRICS = ("FT", "FT-OS", "RO", "TopoOpt", "MixNet", "RFabric")
CSV_DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "validation", "flow_scale.csv")


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


# ---------------------------------------------------------------------------------------
# Stress scenarios (issue 27 item 2): each on its own fabric, with events scheduled at a
# third of the flow backend's healthy makespan (the same simulated instant for every mode).

MB = 1_000_000


def _stress_fat_tree_incast_victims(size: int, seed: int):
    """16 GPUs of servers 8-9 send to GPU 0 (an incast behind GPU 0's ToR port) while the
    16 GPUs of servers 10-11 send to GPUs 8-23 (victims: they share the senders'
    ToR uplinks and the spine's downlinks to GPU 0's ToR with the incast, not its
    bottleneck). FT-OS 3:1, 128 GPUs."""
    fab = rf.topologies.FatTree(128, oversubscription=3)
    inc = np.arange(64, 80)
    vic = np.arange(80, 96)
    src = np.concatenate([inc, vic])
    dst = np.concatenate([np.zeros(16, dtype=np.int64), np.arange(8, 24)])
    return fab, rf.Flows(src, dst, size), [], np.arange(16, 32), "victims"


def _stress_dcqcn_recovery(size: int, seed: int):
    """A long flow GPU 8 -> GPU 0 of 8 x --size, and a 16:1 burst of --size / 8 each into GPU 0
    from other servers starting 20 us in: DCQCN cuts the long flow's rate under the burst and
    recovers it after the burst ends; the fluid model hands the rate back at once. FT, 128."""
    fab = rf.topologies.FatTree(128)
    burst = np.arange(32, 48)
    src = np.concatenate([[8], burst])
    dst = np.zeros(17, dtype=np.int64)
    sizes = np.concatenate([[8 * size], np.full(16, max(size // 8, 4096))])
    start = np.concatenate([[0], np.full(16, 20_000_000)])
    return fab, rf.Flows(src, dst, sizes, start_ps=start), [], np.array([0]), "long flow"


def _stress_pfc_spreading(size: int, seed: int):
    """RFabric with PXN off (cross-rail traffic crosses circuits), an 8 MB permutation: PFC
    pauses spread from the congested circuits to flows that do not cross them."""
    fab = rf.topologies.RFabric(128, pxn=False)
    return fab, rf.Flows.permutation(128, 8 * MB, seed=4), [], None, ""


def _stress_link_failure(size: int, seed: int):
    """Ring all-reduce of --size over 128 GPUs of FT; the first ToR-aggregation link fails a
    third of the way in and the rings re-route around it."""
    fab = rf.topologies.FatTree(128)
    link = int(np.flatnonzero(fab.to_spec().links.kind == "tor-agg")[0])

    def fail(sim, at):
        sim.fail_link(link, at=at)

    return fab, rf.op_trace("all_reduce", range(128), size, "ring"), [fail], None, ""


def _stress_circuit_change(size: int, seed: int):
    """RFabric with PXN off, an 8 MB permutation; a third of the way in the first 8 circuits
    of the first OCS are re-paired (their b ends rotated) with a 50 us dark time: flows on
    them re-route or wait for light."""
    fab = rf.topologies.RFabric(128, pxn=False)
    c = fab.to_spec().circuits
    same = np.flatnonzero(c.ocs == c.ocs[0])[:8]
    b = c.b.copy()
    b[same] = np.roll(b[same], 1)
    plan = rf.CircuitTable.build(c.ocs, c.a, b)

    def change(sim, at):
        sim.apply_circuits(plan, at=at, t_ocs="50us")

    return fab, rf.Flows.permutation(128, 8 * MB, seed=4), [change], None, ""


STRESS = {
    "victims": _stress_fat_tree_incast_victims,
    "dcqcn_recovery": _stress_dcqcn_recovery,
    "pfc_spreading": _stress_pfc_spreading,
    "link_failure": _stress_link_failure,
    "circuit_change": _stress_circuit_change,
}
STRESS_FABRIC = {
    "victims": "FT-OS",
    "dcqcn_recovery": "FT",
    "pfc_spreading": "RFabric no PXN",
    "link_failure": "FT",
    "circuit_change": "RFabric no PXN",
}


def run_events(fab, wl, mode: str, seed: int, events, at_ps: int):
    """Run ``wl`` in ``mode`` with each event (a function of the Simulation and a time)
    scheduled at ``at_ps`` before the run."""
    backend, settings = parse_mode(mode)
    t0 = time.perf_counter()
    sim = rf.Simulation(fab, wl, backend=backend, seed=seed, **settings)
    for ev in events:
        ev(sim, at_ps)
    sim.run()
    res = sim.results()
    return res, time.perf_counter() - t0


def stress(name: str, modes: list[str], size: int, seed: int, min_op_ps: int) -> list[str]:
    """Markdown rows of one stress scenario: packets against each mode."""
    fab, wl, events, focus, focus_name = STRESS[name](size, seed)
    at = 0
    if events:  # a third of the healthy flow run
        healthy, _ = run_events(fab, wl, "flow", seed, [], 0)
        at = healthy.run["makespan_ps"] // 3
    pk, wp = run_events(fab, wl, "packet", seed, events, at)
    out = []
    for mode in modes:
        fl, wf = run_events(fab, wl, mode, seed, events, at)
        if not (pk.complete and fl.complete):
            raise AssertionError(f"{name}: a run did not finish (packet {pk.complete}, {mode} {fl.complete})")
        c = compare(pk, fl, wl, min_op_ps)
        med, p90, worst = c["op_err"]
        detail = c["detail"]
        if focus is not None:
            fp, ff = pk.fct_ps[focus].astype(float), fl.fct_ps[focus].astype(float)
            detail = f"{focus_name} mean FCT {err(ff.mean(), fp.mean()):+.1%}; all: {detail}"
        if events:
            detail += f"; event at {at / 1e9:.3f} ms"
        out.append(
            f"| {name} | {STRESS_FABRIC[name]} | {mode} | {c['packet_ms']:.3f} | {c['flow_ms']:.3f} | "
            f"{err(c['flow_ms'], c['packet_ms']):+.1%} | {med:+.1%} / {p90:.1%} / {worst:+.1%} | {detail} | "
            f"{pk.run['pfc_pauses']:,} | {pk.run['ecn_marks']:,} | {pk.run['drops']:,} | {wp:.2f} | {wf:.2f} |"
        )
    return out


# ---------------------------------------------------------------------------------------
# --scale: the flow model's error against scale, per stage and per op kind

# A small MoE model (4 layers, 16 experts, top-2): small enough that a whole iteration in
# packets takes seconds at 128 GPUs, with every op kind the generator emits for an MoE model.
MOE_SMALL = rf.traces.ModelConfig(
    name="moe-small",
    layers=4,
    hidden=1024,
    heads=8,
    kv_heads=8,
    ffn=4096,
    vocab=32000,
    experts=16,
    top_k=2,
    expert_ffn=1024,
)


def moe_iteration(gpus: int, seed: int) -> rf.traces.Trace:
    """One sync GRPO iteration of MOE_SMALL on ``gpus`` GPUs: half train (tp 4, pp 2, dp the
    rest, ep up to 8, distributed optimizer: reduce-scatter and all-gather), half generation
    (tp 4, ep up to 8), the response stream and the weight sync; the batch grows with the
    GPUs (a quarter of the generation GPUs' count, at least 16)."""
    if gpus < 16 or gpus % 16:
        raise SystemExit(f"--scale: {gpus} GPUs: need a multiple of 16 (two sides of tp 4 x pp 2)")
    half = gpus // 2
    dp = half // 8
    return rf.traces.generate_rl(
        model=MOE_SMALL,
        train_gpus=half,
        gen_gpus=half,
        train=dict(tp=4, pp=2, ep=min(8, dp)),
        gen=dict(tp=4, ep=min(8, half // 4)),
        iterations=1,
        seed=seed,
        global_batch=max(16, half // 4),
        decode_steps_per_op=256,
        distributed_optimizer=True,
    )


def parse_value(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def parse_mode(mode: str) -> tuple[str, dict]:
    """``flow+flow_ring_slices=0+...`` -> ("flow", {"flow_ring_slices": 0}): a backend and
    config settings given to rf.simulate."""
    backend, *parts = mode.split("+")
    settings = {}
    for part in parts:
        key, eq, val = part.partition("=")
        if not eq or not key:
            raise SystemExit(f"--modes: {mode!r}: expected backend+setting=value+..., got {part!r}")
        settings[key] = parse_value(val)
    if backend not in ("flow", "packet"):
        raise SystemExit(f"--modes: {mode!r}: unknown backend {backend!r} (flow or packet)")
    return backend, settings


def run_mode(fab, tr, mode: str, seed: int):
    backend, settings = parse_mode(mode)
    t0 = time.perf_counter()
    res = rf.simulate(fab, tr, backend=backend, seed=seed, controller=fab.controller(), **settings)
    return res, time.perf_counter() - t0


def _ops(res) -> dict:
    t = res.ops.select(["op_id", "stage", "kind", "time_ps", "delivered_bytes"]).sort_by("op_id")
    return {c: t[c].to_numpy(zero_copy_only=False) for c in t.column_names}


def _spans(res) -> dict:
    spans: dict = {}
    for r in res.stages.to_pylist():
        a, b = spans.get(r["stage"], (r["start_ps"], r["end_ps"]))
        spans[r["stage"]] = (min(a, r["start_ps"]), max(b, r["end_ps"]))
    return spans


def _op_errors(tp, tf, min_op_ps: int):
    keep = tp >= min_op_ps
    if not keep.any():
        return float("nan"), float("nan"), float("nan"), 0
    e = err(tf[keep].astype(float), tp[keep].astype(float))
    return (
        float(np.median(e)),
        float(np.percentile(np.abs(e), 90)),
        float(e[np.argmax(np.abs(e))]),
        int(keep.sum()),
    )


SCALE_COLUMNS = (
    "fabric",
    "gpus",
    "ran",
    "mode",
    "stage",
    "kind",
    "ops",
    "bytes",
    "flow_bytes",
    "packet_ms",
    "flow_ms",
    "error",
    "ops_compared",
    "op_err_median",
    "op_err_p90_abs",
    "op_err_worst",
    "pfc_pauses",
    "ecn_marks",
    "drops",
    "packet_wall_s",
    "flow_wall_s",
)


def scale_rows(fabric_name, gpus, ran, mode, pk, fl, wall_p, wall_f, min_op_ps) -> list[dict]:
    """Rows comparing one packet run with one flow-mode run of the same trace: the whole run
    (stage ``*``) when it is an iteration, each stage (kind ``*``: its span, first op start
    to last op end) and each (stage, op kind) (the sum of its op times). Per-op errors over
    the ops of at least ``min_op_ps`` in packets. The packet run's PFC pauses, ECN marks and
    drops are on every row."""
    P, F = _ops(pk), _ops(fl)
    if not np.array_equal(P["op_id"], F["op_id"]):
        raise AssertionError(f"{fabric_name} {gpus} {mode}: the two runs report different ops")
    differ = np.flatnonzero(P["delivered_bytes"] != F["delivered_bytes"])
    if differ.size:  # recorded in the rows (flow_bytes), said on stderr; not expected
        i = int(differ[0])
        print(
            f"warning: {fabric_name} {gpus} {mode}: {differ.size} ops delivered other bytes than in packets, "
            f"e.g. op {P['op_id'][i]}: {P['delivered_bytes'][i]} B in packets, {F['delivered_bytes'][i]} B",
            file=sys.stderr,
            flush=True,
        )
    sp, sf = _spans(pk), _spans(fl)
    common = dict(
        fabric=fabric_name,
        gpus=gpus,
        ran=ran,
        mode=mode,
        pfc_pauses=pk.run["pfc_pauses"],
        ecn_marks=pk.run["ecn_marks"],
        drops=pk.run["drops"],
        packet_wall_s=round(wall_p, 2),
        flow_wall_s=round(wall_f, 2),
    )

    def row(stage, kind, sel, p_ps, f_ps):
        med, p90, worst, n = _op_errors(P["time_ps"][sel], F["time_ps"][sel], min_op_ps)
        return dict(
            common,
            stage=stage,
            kind=kind,
            ops=int(sel.sum()),
            bytes=int(P["delivered_bytes"][sel].sum()),
            flow_bytes=int(F["delivered_bytes"][sel].sum()),
            packet_ms=p_ps / 1e9,
            flow_ms=f_ps / 1e9,
            error=err(f_ps, p_ps) if p_ps > 0 else float("nan"),
            ops_compared=n,
            op_err_median=med,
            op_err_p90_abs=p90,
            op_err_worst=worst,
        )

    out = []
    everything = np.ones(len(P["op_id"]), dtype=bool)
    if ran == "iteration":
        out.append(row("*", "*", everything, pk.run["makespan_ps"], fl.run["makespan_ps"]))
    for stage in sp:  # the packet run's order: the order stages start in
        sel = P["stage"] == stage
        out.append(row(stage, "*", sel, sp[stage][1] - sp[stage][0], sf[stage][1] - sf[stage][0]))
        for kind in sorted(set(P["kind"][sel])):
            k = sel & (P["kind"] == kind)
            out.append(row(stage, kind, k, int(P["time_ps"][k].sum()), int(F["time_ps"][k].sum())))
    return out


def _fmt_err(x: float) -> str:
    return "" if x != x else f"{x:+.1%}"


def markdown_header() -> str:
    return (
        "| fabric | GPUs | ran | mode | stage | kind | ops | packet ms | flow ms | error "
        "| per-op error median / p90 abs / worst | PFC pauses | ECN marks | drops | packet wall s | flow wall s |\n"
        "|---|---:|---|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
    )


def markdown_row(r: dict) -> str:
    per_op = ""
    if r["ops_compared"]:
        per_op = (
            f"{_fmt_err(r['op_err_median'])} / {r['op_err_p90_abs']:.1%} / {_fmt_err(r['op_err_worst'])} "
            f"({r['ops_compared']})"
        )
    return (
        f"| {r['fabric']} | {r['gpus']} | {r['ran']} | {r['mode']} | {r['stage']} | {r['kind']} | {r['ops']} "
        f"| {r['packet_ms']:.3f} | {r['flow_ms']:.3f} | {_fmt_err(r['error'])} | {per_op} "
        f"| {r['pfc_pauses']:,} | {r['ecn_marks']:,} | {r['drops']:,} | {r['packet_wall_s']:.2f} | {r['flow_wall_s']:.2f} |"
    )


def write_csv(path: str, rows: list[dict], command: str | list[str]) -> None:
    """The rows as CSV text, the command(s) that made them in '#' comment lines on top."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        for c in [command] if isinstance(command, str) else command:
            f.write(f"# {c}\n")
        f.write("# error = flow / packet - 1; per-op errors over ops of at least --min-op in packets\n")
        w = csv.DictWriter(f, fieldnames=SCALE_COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    os.replace(tmp, path)


_INT_COLUMNS = {"gpus", "ops", "bytes", "flow_bytes", "ops_compared", "pfc_pauses", "ecn_marks", "drops"}
_STR_COLUMNS = {"fabric", "ran", "mode", "stage", "kind"}


def read_csv(path: str) -> list[dict]:
    """The rows write_csv wrote, with their types (ints, floats: repr round-trips)."""
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    rows = []
    for r in csv.DictReader(lines):
        rows.append(
            {k: (v if k in _STR_COLUMNS else int(v) if k in _INT_COLUMNS else float(v)) for k, v in r.items()}
        )
    return rows


STAGE_ORDER = ("gen", "response_stream", "experience", "train", "weight_sync")


def summary(rows: list[dict]) -> str:
    """Two Markdown tables from --scale rows: per (fabric, GPUs, mode) the whole run's and
    each stage's error with the packet run's pauses, marks and drops; per (stage, op kind)
    the error of its summed op time over every fabric and size (median, worst)."""
    out = []
    stages = [s for s in STAGE_ORDER if any(r["stage"] == s for r in rows)]
    stages += sorted({r["stage"] for r in rows} - set(stages) - {"*"})
    out.append(
        "| fabric | GPUs | ran | mode | iteration | "
        + " | ".join(stages)
        + " | worst stage/kind | PFC pauses | ECN marks | drops | packet wall s | flow wall s |"
    )
    out.append("|---|---:|---|---|---:|" + "---:|" * len(stages) + "---|---:|---:|---:|---:|---:|")
    keys = list(dict.fromkeys((r["fabric"], r["gpus"], r["ran"], r["mode"]) for r in rows))
    order = {f: i for i, f in enumerate(ALL_FABRICS)}
    first_seen = {k: i for i, k in enumerate(keys)}
    keys.sort(key=lambda k: (k[1], order.get(k[0], len(order)), first_seen[k]))  # by size, then fabric
    for key in keys:
        rs = [r for r in rows if (r["fabric"], r["gpus"], r["ran"], r["mode"]) == key]
        whole = next((r for r in rs if r["stage"] == "*"), None)
        per_stage = {r["stage"]: r for r in rs if r["stage"] != "*" and r["kind"] == "*"}
        kinds = [r for r in rs if r["kind"] != "*" and r["packet_ms"] >= 0.05 and r["error"] == r["error"]]
        worst = max(kinds, key=lambda r: abs(r["error"]), default=None)
        # a stage replay's runs: pauses, marks and drops summed over the stages' packet runs
        runs = [whole] if whole else list(per_stage.values())
        pfc = sum(r["pfc_pauses"] for r in runs)
        ecn = sum(r["ecn_marks"] for r in runs)
        drops = sum(r["drops"] for r in runs)
        wp = sum(r["packet_wall_s"] for r in runs)
        wf = sum(r["flow_wall_s"] for r in runs)
        cells = [_fmt_err(per_stage[s]["error"]) if s in per_stage else "" for s in stages]
        w = f"{worst['stage']}/{worst['kind']} {_fmt_err(worst['error'])}" if worst else ""
        out.append(
            f"| {key[0]} | {key[1]:,} | {key[2]} | {key[3]} | {_fmt_err(whole['error']) if whole else ''} | "
            + " | ".join(cells)
            + f" | {w} | {pfc:,} | {ecn:,} | {drops:,} | {wp:.1f} | {wf:.1f} |"
        )
    out.append("")
    out.append(
        "| mode | stage | kind | rows | error median | worst error (fabric, GPUs) | per-op p90 abs, median over rows |"
    )
    out.append("|---|---|---|---:|---:|---|---:|")
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    pairs = sorted(
        {(r["mode"], r["stage"], r["kind"]) for r in rows if r["kind"] != "*"},
        key=lambda p: (modes.index(p[0]), STAGE_ORDER.index(p[1]) if p[1] in STAGE_ORDER else 99, p[2]),
    )
    for mode, st, kind in pairs:
        rs = [
            r
            for r in rows
            if r["mode"] == mode and r["stage"] == st and r["kind"] == kind and r["error"] == r["error"]
        ]
        if not rs:
            continue
        e = np.array([r["error"] for r in rs])
        worst = rs[int(np.argmax(np.abs(e)))]
        p90 = [r["op_err_p90_abs"] for r in rs if r["ops_compared"]]
        out.append(
            f"| {mode} | {st} | {kind} | {len(rs)} | {_fmt_err(float(np.median(e)))} | "
            f"{_fmt_err(worst['error'])} ({worst['fabric']}, {worst['gpus']:,}) | "
            f"{f'{np.median(p90):.1%}' if p90 else ''} |"
        )
    return "\n".join(out)


def scale(args, command: str) -> int:
    sizes = [int(x) for x in args.scale.split(",")]
    modes = args.modes.split(",")
    for m in modes:
        parse_mode(m)
    min_op = parse_time(args.min_op)
    rows, commands = [], [command]
    if args.append and os.path.exists(args.csv):
        rows = read_csv(args.csv)
        with open(args.csv) as f:
            before = [ln[2:].rstrip("\n") for ln in f if ln.startswith("# python ")]
        commands = before + commands
    print(markdown_header(), flush=True)
    for gpus in sizes:
        tr = moe_iteration(gpus, args.seed)
        whole = args.replay == "iteration" or (args.replay == "auto" and gpus <= args.whole_max)
        if whole:
            runs = [("iteration", tr)]
        else:
            stages = list(dict.fromkeys(tr.table["stage"].cast(pa.string()).to_pylist()))
            runs = [("stage", only_stage(tr, st)) for st in stages]
        for fname in args.fabrics.split(","):
            fab = fabric(fname, gpus)
            for ran, wl in runs:
                pk, wp = run_mode(fab, wl, "packet", args.seed)
                for mode in modes:
                    fl, wf = run_mode(fab, wl, mode, args.seed)
                    new = scale_rows(fname, gpus, ran, mode, pk, fl, wp, wf, min_op)
                    for r in new:
                        print(markdown_row(r), flush=True)
                    rows.extend(new)
                write_csv(args.csv, rows, commands)
    print()
    print(summary(rows))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--size", default="64MiB", help="collective buffer / flow size")
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-op", default="50us", help="RL ops shorter than this (packet time) are left out")
    ap.add_argument(
        "--scale", default=None, help="GPU counts for the error-against-scale table, e.g. 128,256,512"
    )
    ap.add_argument(
        "--modes", default="flow", help="--scale: modes against packet, e.g. flow,flow+flow_ring_slices=0"
    )
    ap.add_argument(
        "--replay",
        default="auto",
        choices=("auto", "iteration", "stages"),
        help="--scale: whole or stage by stage",
    )
    ap.add_argument(
        "--whole-max", type=int, default=2048, help="--replay auto: whole iterations up to this many GPUs"
    )
    ap.add_argument("--csv", default=CSV_DEFAULT, help="--scale: write the rows here (CSV)")
    ap.add_argument("--append", action="store_true", help="--scale: keep the rows already in --csv")
    ap.add_argument(
        "--summary", default=None, metavar="CSV", help="print the summary tables of a --scale CSV"
    )
    args = ap.parse_args(argv)
    for m in args.modes.split(","):
        parse_mode(m)
    if args.summary:
        print(summary(read_csv(args.summary)))
        return 0
    if args.scale:
        argv_list = sys.argv[1:] if argv is None else list(argv)
        return scale(args, "python bench/validate_flow.py " + shlex.join(argv_list))
    size = parse_size(args.size)
    min_op = parse_time(args.min_op)
    names = args.scenarios.split(",")
    unknown = [n for n in names if n not in SCENARIOS and n not in STRESS]
    if unknown:
        raise SystemExit(f"unknown scenario {unknown[0]!r} (known: {', '.join(SCENARIOS + tuple(STRESS))})")
    plain = [n for n in names if n in SCENARIOS]
    if plain:
        print(
            "| fabric | scenario | packet ms | flow ms | error | per-op error median / p90 abs / worst "
            "| detail (flow vs packet) | packet wall s | flow wall s | speed-up |"
        )
        print("|---|---|---:|---:|---:|---|---|---:|---:|---:|")
    for fname in args.fabrics.split(",") if plain else ():
        fab = fabric(fname, args.gpus)
        for sname in plain:
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
    hard = [n for n in names if n in STRESS]
    if hard:
        print(
            "\n| scenario | fabric | mode | packet ms | flow ms | error | per-flow (per-op) error median / p90 abs "
            "/ worst | detail (mode vs packet) | PFC pauses | ECN marks | drops | packet wall s | mode wall s |"
        )
        print("|---|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for name in hard:
        for line in stress(name, args.modes.split(","), size, args.seed, min_op):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
