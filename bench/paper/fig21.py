"""Figure 21 of the OrchestrRL paper (Appendix H): Qwen2-57B-A14B on RFabric with one or two
failed NIC-EPS links, or one or two failed OCS-layer (ToR-OCS) links; Train, Gen and Weight
Sync time relative to the healthy run.

    python bench/paper/fig21.py [--quick] [--gpus 128]

RFabric with its own controller (StageAware, t_ocs 25 ms), the full 28-layer model on the flow
backend (``backend="flow"``), the layout of figure 14 (common.py). For each stage the
failures hit where that stage feels them most, at the instant the stage starts in the healthy
run, and stay down: the NIC links of the one or two GPUs that send the most bytes between
servers in that stage (by the trace's ops: an op spanning servers counts its size for each
rank), or the one or two ToR-OCS links of the first such GPU's ToR that carried the most
bytes in the healthy run. Each (stage, kind, count) is its own run and reports its stage's
time (and the iteration's) over the healthy run's. The paper's text names neither the scale
nor which links fail. Default 128 GPUs; ``--quick``: 2 layers, batch 64.

Backends: the full model on the flow backend (``backend="flow"``), and the NIC-EPS cases with
a 2-layer, batch-64 model in packets as a cross-check (not with ``--quick`` or
``--no-packet``). With PXN a failed NIC's traffic is relayed through the server's other NICs
on both backends (README "Failures"). A full iteration in packets takes hours on this
machine (2 layers at batch 512: 10 minutes, 2.0 billion events).
"""

from __future__ import annotations

import common as C
import numpy as np

import rfabric as rf

STAGES = ("train", "gen", "weight_sync")


def busiest_gpus(trace, stage: str, gpus: int, per_server: int = 8) -> list[int]:
    """GPUs by bytes of the stage's ops that span servers, most first (ties: lowest id)."""
    t = trace.table
    load = np.zeros(gpus)
    stages = t["stage"].cast("string").to_pylist()
    for st, ranks, size in zip(stages, t["ranks"].to_pylist(), t["size_bytes"].to_pylist(), strict=True):
        if st != stage or len({r // per_server for r in ranks}) < 2:
            continue
        load[ranks] += size
    order = np.lexsort((np.arange(gpus), -load))
    return [int(g) for g in order if load[g] > 0]


def cases(args):
    """(backend, layers label, trace): the full model on the flow backend, and a reduced model
    (2 layers, batch 64) in packets as a cross-check of the NIC-EPS cases."""
    gpus = 128 if args.quick else args.gpus
    out = [
        ("flow", "2" if args.quick else "full", C.moe_quick(gpus, 0) if args.quick else C.moe_full(gpus, 0))
    ]
    if not args.quick and not args.no_packet:
        out.append(("packet", "2", C.moe(gpus, 0, layers=2, batch=64)))
    return gpus, out


def run(args) -> list[dict]:
    gpus, todo = cases(args)
    rows = []
    for backend, layers, trace in todo:
        # packets: only the NIC failures the flow backend cannot finish (a packet run is minutes)
        rows += run_one(
            gpus, backend, layers, trace, ("NIC-EPS",) if backend == "packet" else ("NIC-EPS", "ToR-OCS")
        )
    return rows


def run_one(gpus: int, backend: str, layers: str, trace, kinds_run) -> list[dict]:
    fab = rf.topologies.RFabric(gpus)
    spec = fab.to_spec()
    kinds = spec.nodes.kind_names()

    def sim(failures=()):
        return rf.simulate(
            fab,
            trace,
            controller=fab.controller(),
            backend=backend,
            t_ocs=C.T_OCS,
            failures=list(failures),
            seed=1,
        )

    t = C.Timer(f"fig21 healthy {gpus} GPUs, {backend}")
    healthy = sim()
    t.done()
    if healthy.run["makespan_ps"] < 0:
        raise RuntimeError(f"fig21: the healthy iteration did not finish on the {backend} backend")
    base = C.stage_times(healthy)
    span = {r["stage"]: r["start_ps"] for r in healthy.stages.to_pylist()}
    link_bytes = np.zeros(spec.num_links)
    np.add.at(link_bytes, healthy.links["link_id"].to_numpy(), healthy.links["bytes"].to_numpy())
    rows = [
        {
            "failure": "none",
            "count": 0,
            "during": "-",
            "links": "-",
            "complete": True,
            "unroutable": False,
            **{f"{s}_x": 1.0 for s in STAGES},
            "iteration_x": 1.0,
            "iteration_s": healthy.run["makespan_ps"] / 1e12,
            "controller": healthy.run.get("controller"),
            "plans": healthy.run["plan_changes"],
        }
    ]
    for stage in STAGES:
        top = busiest_gpus(trace, stage, gpus)
        if not top:
            continue
        nic = spec.nic_link(top[0])
        tor = next(int(n) for n in (spec.links.src[nic], spec.links.dst[nic]) if kinds[n] == "eps")
        ups = sorted(
            (int(k) for k in spec.links_of(tor) if spec.links.kind[k] == "tor-ocs"),
            key=lambda k: (-link_bytes[k], k),
        )
        at = int(span[stage])
        for kind, pick in (("NIC-EPS", [int(spec.nic_link(g)) for g in top]), ("ToR-OCS", ups)):
            if kind not in kinds_run:
                continue
            for count in (1, 2):
                links = pick[:count]
                t = C.Timer(f"fig21 {count} {kind} during {stage}, {backend}")
                res = sim([(k, at) for k in links])
                t.done()
                done = res.run["makespan_ps"] >= 0
                got = C.stage_times(res)
                rows.append(
                    {
                        "failure": kind,
                        "count": count,
                        "during": stage,
                        "links": ",".join(map(str, links)),
                        "complete": done,
                        **{f"{s}_x": (got[s] / base[s] if done else None) for s in STAGES},
                        "iteration_x": res.run["makespan_ps"] / healthy.run["makespan_ps"] if done else None,
                        "iteration_s": res.run["makespan_ps"] / 1e12 if done else None,
                        "unroutable": bool(res.run.get("unroutable")),
                        "controller": res.run.get("controller"),
                        "plans": res.run["plan_changes"],
                    }
                )
    for r in rows:
        r.update(gpus=gpus, backend=backend, layers=layers)
    return rows


COLS = [
    ("backend", "{}"),
    ("layers", "{}"),
    ("failure", "{}"),
    ("count", "{}"),
    ("during", "{}"),
    ("links", "{}"),
    ("complete", "{}"),
    ("train_x", "{:.3f}"),
    ("gen_x", "{:.3f}"),
    ("weight_sync_x", "{:.3f}"),
    ("iteration_x", "{:.4f}"),
    ("controller", "{}"),
    ("plans", "{}"),
]


def main(argv=None) -> list[dict]:
    ap = C.parser(__doc__)
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--no-packet", action="store_true", help="skip the reduced packet-backend runs")
    args = ap.parse_args(argv)
    print(C.SETUP)
    rows = run(args)
    C.print_table(
        "Figure 21: RFabric with failed links, stage time over the healthy run (Qwen2-57B-A14B, flow backend)",
        rows,
        COLS,
    )
    C.write(rows, "fig21", args.out)
    return rows


if __name__ == "__main__":
    main()
