"""Circuit controllers at work (issue 9's experiments): each prints a table.

    python bench/controllers.py alloc       # (a) traffic-aware vs uniform allocation on RFabric
    python bench/controllers.py tocs        # (b) iteration time against t_ocs, per stage granularity
    python bench/controllers.py failures    # (c) NIC-EPS and OCS link failures in train and weight sync
    python bench/controllers.py fabrics     # (d) six fabrics, each with its own controller, dense and MoE

``--quick`` runs the smallest case of each (what tests/test_readme.py may recompute).

Fairness (docs/fairness.md): ``--rewrites offered`` (default) gives every run of a table the
workload rewrites any controller of that table asks for (the stage-aware controller's
weight-sync forest), so a row differs from another only in the fabric or the controller's
circuits; ``none`` gives no run a rewrite; ``own`` each run its own controller's (the rule
broken on purpose, as these tables were measured before it). Each table prints which rewrites
its runs got.

Workloads
---------
* Skewed expert-parallel all_to_all: token dispatch of a MoE layer over expert-parallel
  groups of 16 and 64 GPUs (whole servers spread evenly over the fabric: ``ep_groups``).
  Every GPU sends ``--tokens-bytes`` in total; the share that goes to GPU ``d`` is the
  popularity of the expert it hosts, Zipf(``--zipf``) over a seeded random placement of
  experts (``--zipf 0`` is the uniform all_to_all). One ``send`` op per GPU pair, all in one
  communication period, so the controller sees the whole matrix.
* Data-parallel all_reduce: one ring all_reduce per DP group (GPUs with the same rank in
  their server, so every group spans all servers: the gradient sync of TP = 8 inside a server).
* RL iterations: ``rfabric demo``'s generated iteration (dense: Qwen2.5-14B shape, MoE:
  Qwen2-57B-A14B shape, both cut to 2 layers for speed).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import rfabric as rf
from rfabric.cli import demo_trace
from rfabric.controllers import UniformController
from rfabric.traces import Trace


def ep_groups(gpus: int, ep: int, placement: str, per_server: int = 8) -> np.ndarray:
    """Expert-parallel groups (rows) of ``ep`` GPUs: ``packed`` takes consecutive servers,
    ``strided`` whole servers spread evenly over the fabric (a group then spans ToRs, rail
    groups and PoDs: the placement a scheduler gives when EP shares the cluster with DP)."""
    servers = gpus // per_server
    k = max(1, ep // per_server)  # servers per group
    order = np.arange(servers)
    if placement == "strided":
        order = order.reshape(k, servers // k).T.reshape(-1)  # server i, i + S/k, ...
    elif placement != "packed":
        raise ValueError(f"placement must be packed or strided, got {placement!r}")
    gpu_of = (order[:, None] * per_server + np.arange(per_server)).reshape(-1)
    return gpu_of.reshape(-1, ep)


def skewed_all_to_all(
    gpus: int,
    ep: int,
    tokens_bytes: int,
    zipf: float,
    seed: int = 0,
    placement: str = "strided",
    lead_ps: int = 0,
) -> Trace:
    """A MoE dispatch: one period of ``send`` ops, GPU ``s`` to ``d`` in the same EP group
    carrying ``tokens_bytes`` x the popularity of ``d``'s expert (Zipf ``zipf``)."""
    rng = np.random.default_rng(seed)
    src, dst, size = [], [], []
    for members in ep_groups(gpus, ep, placement):
        weight = 1.0 / np.arange(1, ep + 1) ** zipf  # rank r's expert popularity
        weight = dict(zip(members.tolist(), weight[rng.permutation(ep)], strict=True))  # placed at random
        for s in members:
            others = members[members != s]
            w = np.array([weight[o] for o in others.tolist()])
            share = w / w.sum()
            src += [s] * len(others)
            dst += others.tolist()
            size += np.maximum(1, np.round(share * tokens_bytes)).astype(np.int64).tolist()
    n = len(src)
    return Trace.from_columns(
        op_id=np.arange(n),
        stage="train",
        phase="moe_dispatch",
        kind="send",
        ranks=[[int(s), int(d)] for s, d in zip(src, dst, strict=True)],
        size_bytes=size,
        deps=[[]] * n,
        compute_ps=lead_ps,
        gpus=gpus,
    )


def dp_all_reduce(gpus: int, size: int, per_server: int = 8, lead_ps: int = 0) -> Trace:
    """One ring all_reduce per data-parallel group (GPUs with the same in-server rank)."""
    groups = [list(range(r, gpus, per_server)) for r in range(per_server)]
    n = len(groups)
    return Trace.from_columns(
        op_id=np.arange(n),
        stage="train",
        phase="grad_sync",
        kind="all_reduce",
        ranks=groups,
        size_bytes=[size] * n,
        deps=[[]] * n,
        algorithm="ring",
        compute_ps=lead_ps,
        gpus=gpus,
    )


def rl_iteration(model: str, gpus: int, seed: int = 0, layers: int = 2) -> Trace:
    """The generated RL iteration ``rfabric demo`` replays, for ``model``'s shape (batch 512)."""
    # the iteration README's "What the controllers buy" was measured on: gen, response stream,
    # train and weight sync, without the experience passes and the optimizer-step gap that
    # became generate_rl's defaults later (algorithm="grpo", optimizer_bytes_per_param=30)
    return demo_trace(
        gpus, model, layers=layers, batch=512, seed=seed, algorithm="none", optimizer_bytes_per_param=0
    )


def _stage_aware(**kw):
    from rfabric.controllers import StageAwareController

    ctl = StageAwareController(**kw)
    ctl.plan_s = []  # wall time of each plan() call
    plan = ctl.plan

    def timed(intent, view):
        t0 = time.perf_counter()
        try:
            return plan(intent, view)
        finally:
            ctl.plan_s.append(time.perf_counter() - t0)

    ctl.plan = timed
    return ctl


def _ms(ps: int) -> float:
    return ps / 1e9 if ps >= 0 else float("nan")


def _print(rows: list[dict], cols: list[tuple[str, str]]) -> None:
    cells = [[fmt.format(r[k]) for k, fmt in cols] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, (k, _) in enumerate(cols)]
    print("  ".join(k.rjust(w) for (k, _), w in zip(cols, widths, strict=True)))
    for c in cells:
        print("  ".join(x.rjust(w) for x, w in zip(c, widths, strict=True)))
    sys.stdout.flush()


def offered(args, *controllers) -> list | str:
    """The ``rewrites=`` of every run of a table: ``--rewrites offered`` the union of what its
    controllers ask for (``Controller.rewrites()``), ``none`` or ``own`` as given."""
    if args.rewrites != "offered":
        return args.rewrites
    out = []
    for c in controllers:
        for rw in c.rewrites() if c is not None else []:
            if rw not in out:
                out.append(rw)
    return out


def _rewrites_of(res) -> str:
    return ", ".join(r["rewrite"] for r in res.run["rewrites"]) or "none"


def run(fab, trace, controller=None, **settings):
    t0 = time.perf_counter()
    res = rf.simulate(fab, trace, controller=controller, **settings)
    if res.run["makespan_ps"] < 0:
        raise RuntimeError(f"{fab.name}: the workload did not finish ({res.run})")
    return res, time.perf_counter() - t0


# -- (a) traffic-aware against uniform -------------------------------------------------------


def exp_alloc(args) -> None:
    """Each workload follows a compute gap of t_ocs (``lead``), the window a controller needs
    to light new circuits before the period starts; times are measured after it.

    Columns past ``plans``: ``cand_ms`` the candidate plan simulated alone
    (``check_gain=False``: committed whatever the prediction), ``pred_uni_ms`` and
    ``pred_cand_ms`` the gain check's predictions for the plan in force (uniform) and the
    candidate, ``sim/pred`` the simulated over the predicted time of each, ``ctl_ms`` the
    loop's controller time over the run (intents and plan calls), ``plan_ms`` the longest
    ``plan()`` call."""
    lead = rf.units.parse_time(args.t_ocs)
    if args.quick:
        cases = [(128, False)]
    else:
        cases = [(128, False), (128, True), (1024, True), (1024, False)]
    rows = []
    for gpus, pxn in cases:
        fab = rf.topologies.RFabric(gpus, args.link, pxn=pxn)
        workloads = {}
        for ep in (16, 64):
            workloads[f"a2a ep{ep} zipf{args.zipf:g}"] = skewed_all_to_all(
                gpus, ep, args.tokens_bytes, args.zipf, args.seed, lead_ps=lead
            )
        workloads["dp all_reduce"] = dp_all_reduce(gpus, args.ar_bytes, lead_ps=lead)
        for name, trace in workloads.items():
            ctl = _stage_aware()
            rw = offered(args, ctl)
            uni, _ = run(fab, trace, UniformController(), seed=args.seed, t_ocs=args.t_ocs, rewrites=rw)
            aware, wall = run(fab, trace, ctl, seed=args.seed, t_ocs=args.t_ocs, rewrites=rw)
            # the candidate plan the gain check judged, simulated whether committed or not
            cand, _ = run(
                fab, trace, _stage_aware(check_gain=False), seed=args.seed, t_ocs=args.t_ocs, rewrites=rw
            )
            (_, (p_new, _), (p_cur, _)) = ctl.predictions[0] if ctl.predictions else (0, (0, 0), (0, 0))
            c_ms = _ms(cand.run["makespan_ps"] - lead)
            rows.append(
                {
                    "gpus": gpus,
                    "pxn": "on" if pxn else "off",
                    "workload": name,
                    "uniform_ms": _ms(uni.run["makespan_ps"] - lead),
                    "stage_aware_ms": _ms(aware.run["makespan_ps"] - lead),
                    "speedup": (uni.run["makespan_ps"] - lead) / (aware.run["makespan_ps"] - lead),
                    "plans": aware.run["plan_changes"],
                    "cand_ms": c_ms,
                    "pred_uni_ms": _ms(p_cur),
                    "pred_cand_ms": _ms(p_new),
                    "sim/pred uni": (uni.run["makespan_ps"] - lead) / p_cur if p_cur else float("nan"),
                    "sim/pred cand": (cand.run["makespan_ps"] - lead) / p_new if p_new else float("nan"),
                    "ctl_ms": 1e3 * aware.run["controller_wall_s"],
                    "plan_ms": 1e3 * max(ctl.plan_s, default=0.0),
                    "wall_s": wall,
                    "rewrites": f"{_rewrites_of(uni)} / {_rewrites_of(aware)}",
                }
            )
            print(f"  {gpus} GPUs, PXN {rows[-1]['pxn']}, {name}: done", file=sys.stderr)
    _print(
        rows,
        [
            ("gpus", "{}"),
            ("pxn", "{}"),
            ("workload", "{}"),
            ("uniform_ms", "{:.3f}"),
            ("stage_aware_ms", "{:.3f}"),
            ("speedup", "{:.2f}"),
            ("plans", "{}"),
            ("cand_ms", "{:.3f}"),
            ("pred_uni_ms", "{:.3f}"),
            ("pred_cand_ms", "{:.3f}"),
            ("sim/pred uni", "{:.2f}"),
            ("sim/pred cand", "{:.2f}"),
            ("ctl_ms", "{:.1f}"),
            ("plan_ms", "{:.1f}"),
            ("wall_s", "{:.1f}"),
            ("rewrites", "{}"),
        ],
    )


# -- (b) iteration time against t_ocs ---------------------------------------------------------

STAGES = ("train", "gen", "weight_sync")


def _stage_ms(res) -> dict:
    got = {r["stage"]: _ms(r["end_ps"] - r["start_ps"]) for r in res.stages.to_pylist()}
    return {f"{s}_ms": got.get(s, float("nan")) for s in STAGES}


def exp_tocs(args) -> None:
    gpus = 256 if not args.quick else 128
    fab = rf.topologies.RFabric(gpus, args.link)
    trace = rl_iteration(args.model, gpus, args.seed)
    values = ["10us", "1ms"] if args.quick else ["10us", "100us", "1ms", "10ms", "25ms", "100ms", "1s"]
    rw = offered(args, _stage_aware())
    base, _ = run(fab, trace, UniformController(), seed=args.seed, rewrites=rw)
    rows = [
        {
            "t_ocs": "-",
            "granularity": "uniform",
            "iteration_ms": _ms(base.run["makespan_ps"]),
            "vs_uniform": 1.0,
            **_stage_ms(base),
            "plans": 0,
            "kept": 0,
            "calls": base.run["controller_calls"],
            "ahead": 0,
            "rewrites": _rewrites_of(base),
        }
    ]
    for t_ocs in values:
        for gran in ("period", "period, no look-ahead", "op"):
            ctl = _stage_aware(granularity=gran.split(",")[0], lookahead=gran == "period")
            res, _ = run(fab, trace, ctl, seed=args.seed, t_ocs=t_ocs, rewrites=rw)
            kept = sum(1 for d in ctl.log if str(d.action).startswith("keep"))
            rows.append(
                {
                    "t_ocs": t_ocs,
                    "granularity": gran,
                    "iteration_ms": _ms(res.run["makespan_ps"]),
                    "vs_uniform": res.run["makespan_ps"] / base.run["makespan_ps"],
                    **_stage_ms(res),
                    "plans": res.run["plan_changes"],
                    "kept": kept,
                    "calls": res.run["controller_calls"],
                    "ahead": res.run["controller_ahead_calls"],
                    "rewrites": _rewrites_of(res),
                }
            )
            print(f"  t_ocs {t_ocs}, {gran}: done", file=sys.stderr)
    print(f"RFabric {gpus} GPUs, one RL iteration of {trace.metadata.get('model', args.model)}")
    _print(
        rows,
        [
            ("t_ocs", "{}"),
            ("granularity", "{}"),
            ("iteration_ms", "{:.2f}"),
            ("vs_uniform", "{:.3f}"),
            ("train_ms", "{:.2f}"),
            ("gen_ms", "{:.2f}"),
            ("weight_sync_ms", "{:.2f}"),
            ("calls", "{}"),
            ("ahead", "{}"),
            ("plans", "{}"),
            ("kept", "{}"),
            ("rewrites", "{}"),
        ],
    )


# -- (c) failures -----------------------------------------------------------------------------


def exp_failures(args) -> None:
    gpus = 256 if not args.quick else 128
    fab = rf.topologies.RFabric(gpus, args.link)
    spec = fab.to_spec()
    trace = rl_iteration(args.model, gpus, args.seed)
    healthy, _ = run(fab, trace, _stage_aware(), seed=args.seed, record_flows=True)  # (its flows: below)
    span = {r["stage"]: (r["start_ps"], r["end_ps"]) for r in healthy.stages.to_pylist()}
    # per stage, the GPU that sends the most bytes between servers in it, and the busiest
    # ToR-OCS link of that GPU's ToR: the failures that stage should feel most
    op_stage = dict(zip(healthy.ops["op_id"].to_pylist(), healthy.ops["stage"].to_pylist(), strict=True))
    server = spec.nodes.server[spec.gpu_nodes]
    flows = healthy.flows
    src, dst = flows["src"].to_numpy(), flows["dst"].to_numpy()
    size, stage_of = (
        flows["size_bytes"].to_numpy(),
        np.array([op_stage.get(o, "") for o in flows["op_id"].to_pylist()]),
    )
    link_bytes = np.zeros(spec.num_links)
    np.add.at(link_bytes, healthy.links["link_id"].to_numpy(), healthy.links["bytes"].to_numpy())
    kinds = spec.nodes.kind_names()
    rows = []
    for stage in ("train", "weight_sync"):
        if stage not in span:
            continue
        net = (stage_of == stage) & (server[src] != server[dst])
        gpu = int(np.argmax(np.bincount(src[net], weights=size[net], minlength=spec.num_gpus)))
        nic = spec.nic_link(gpu)
        tor = next(int(n) for n in (spec.links.src[nic], spec.links.dst[nic]) if kinds[n] == "eps")
        ups = [int(k) for k in spec.links_of(tor) if spec.links.kind[k] == "tor-ocs"]
        ocs_link = max(ups, key=lambda k: (link_bytes[k], -k))
        for what, link in (
            (f"NIC-EPS link of GPU {gpu}", nic),
            (f"ToR-OCS link {ocs_link} of its ToR", ocs_link),
        ):
            s0, s1 = span[stage]
            at = s0 + (s1 - s0) // 3
            res, _ = run(fab, trace, _stage_aware(), seed=args.seed, failures=[(int(link), at)])
            rows.append(
                {
                    "failure": what,
                    "during": stage,
                    "at_ms": _ms(at),
                    "iteration_x": res.run["makespan_ps"] / healthy.run["makespan_ps"],
                    **{
                        f"{k}_x": v / h
                        for (k, v), h in zip(_stage_ms(res).items(), _stage_ms(healthy).values(), strict=True)
                    },
                    "plans": res.run["plan_changes"],
                }
            )
            print(f"  {what} during {stage}: done", file=sys.stderr)
    print(
        f"RFabric {gpus} GPUs with StageAwareController, healthy iteration {_ms(healthy.run['makespan_ps']):.2f} ms"
    )
    _print(
        rows,
        [
            ("failure", "{}"),
            ("during", "{}"),
            ("at_ms", "{:.2f}"),
            ("iteration_x", "{:.3f}"),
            ("train_ms_x", "{:.3f}"),
            ("gen_ms_x", "{:.3f}"),
            ("weight_sync_ms_x", "{:.3f}"),
            ("plans", "{}"),
        ],
    )


# -- (d) six fabrics, each with its own controller ------------------------------------------


def own_fabrics(gpus: int, link: str) -> list[tuple[str, object, object]]:
    """(label, fabric, controller): each fabric run as it is meant to be (None: no optics)."""
    from rfabric.controllers import MixNetController, StaticController

    T = rf.topologies
    topoopt = T.TopoOpt(gpus, link)
    return [
        ("FT", T.FatTree(gpus, link), None),
        ("FT-OS 3:1", T.FatTree(gpus, link, oversubscription=3), None),
        ("RO", T.RailOptimized(gpus, link), None),
        ("TopoOpt", topoopt, StaticController(topoopt.circuits())),
        ("MixNet", T.MixNet(gpus, link), MixNetController()),
        ("RFabric", T.RFabric(gpus, link), _stage_aware()),
    ]


def exp_fabrics(args) -> None:
    gpus = 128
    models = ["qwen2.5-14b"] if args.quick else ["qwen2.5-14b", "qwen2-57b-a14b"]
    rows = []
    for model in models:
        trace = rl_iteration(model, gpus, args.seed)
        base = None
        fabs = own_fabrics(gpus, args.link)
        rw = offered(args, *(ctl for _, _, ctl in fabs))
        for label, fab, ctl in fabs:
            res, wall = run(fab, trace, ctl, seed=args.seed, rewrites=rw)
            base = base or res.run["makespan_ps"]
            rows.append(
                {
                    "model": model,
                    "fabric": label,
                    "controller": res.run.get("controller") or "-",
                    "iteration_ms": _ms(res.run["makespan_ps"]),
                    "vs_FT": res.run["makespan_ps"] / base,
                    **_stage_ms(res),
                    "plans": res.run.get("plan_changes", 0),
                    "wall_s": wall,
                    "rewrites": _rewrites_of(res),
                }
            )
            print(f"  {model} on {label}: done", file=sys.stderr)
    _print(
        rows,
        [
            ("model", "{}"),
            ("fabric", "{}"),
            ("controller", "{}"),
            ("iteration_ms", "{:.2f}"),
            ("vs_FT", "{:.3f}"),
            ("train_ms", "{:.2f}"),
            ("gen_ms", "{:.2f}"),
            ("weight_sync_ms", "{:.2f}"),
            ("plans", "{}"),
            ("wall_s", "{:.1f}"),
            ("rewrites", "{}"),
        ],
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", choices=["alloc", "tocs", "failures", "fabrics"])
    ap.add_argument("--link", default="200Gbps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--model", default="qwen2-57b-a14b", help="model shape of the RL iteration (tocs, failures)"
    )
    ap.add_argument("--zipf", type=float, default=0.8, help="expert popularity skew (default 0.8)")
    ap.add_argument("--tokens-bytes", type=int, default=16 << 20, help="bytes each GPU dispatches")
    ap.add_argument("--ar-bytes", type=int, default=64 << 20, help="DP all_reduce size")
    ap.add_argument("--t-ocs", default="25ms", help="OCS reconfiguration time (alloc; default 25ms)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--rewrites",
        choices=["offered", "none", "own"],
        default="offered",
        help="workload rewrites of each run (docs/fairness.md; default offered)",
    )
    args = ap.parse_args(argv)
    {"alloc": exp_alloc, "tocs": exp_tocs, "failures": exp_failures, "fabrics": exp_fabrics}[args.experiment](
        args
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
