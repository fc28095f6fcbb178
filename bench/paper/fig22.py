"""Figure 22 of the OrchestrRL paper (Appendix I): Train, Gen and Weight Sync time of
Qwen3-235B-A22B on RFabric against the OCS reconfiguration time t_ocs, with fine-grained
reconfiguration (a re-plan at every collective).

    python bench/paper/fig22.py [--quick] [--layers 8] [--t-ocs 10us,1ms,10ms,25ms,100ms,1s]

RFabric with ``StageAwareController(granularity="op")`` (every op is a boundary: train,
generation, including AFD's all_to_all -> m2n -> attention transitions, and weight sync) at
each t_ocs, and the fabric's uniform plan (``UniformController``: no reconfiguration) as the
reference; stage times relative to the uniform run. On the flow backend
(``backend="flow"``).

Scale actually used, and why: the paper runs Qwen3-235B-A22B at 2,048 GPUs (94 layers). With
a re-plan at every op, each of the iteration's ops is a Python ``plan()`` call (about
10,000 per two layers at batch 512), so the full model takes hours per t_ocs on this
machine. Default: 512 GPUs (train 256: TP 4, PP 4, EP 8; generation 256 in AFD mode, 16
attention + 16 expert GPUs per instance), 8 of the 94 layers, batch 512. ``--quick``: 128
GPUs (train TP 4, PP 2, EP 8), 2 layers, batch 64, three t_ocs values.

What rfabric's controller does at a boundary: it commits a plan only in a window that covers
t_ocs (``slack_ps >= t_ocs_ps``) and otherwise keeps the circuits in force, so a long t_ocs
costs opportunities, never a stall (README "Circuit controllers").
"""

from __future__ import annotations

import common as C

import rfabric as rf
from rfabric.controllers import StageAwareController, UniformController

STAGES = ("train", "gen", "weight_sync")


def trace(gpus: int, layers: int, batch: int) -> rf.traces.Trace:
    half = gpus // 2
    pp = 2 if half <= 64 else 4
    return rf.traces.generate_rl(
        C.model("qwen3-235b-a22b", layers),
        train_gpus=half,
        gen_gpus=gpus - half,
        train=dict(tp=4, pp=pp, ep=8),
        gen=dict(tp=4, afd=C.AFD),
        distributed_optimizer=True,
        global_batch=batch,
        seed=0,
    )


def run(args) -> list[dict]:
    if args.quick:
        gpus, layers, batch, values = 128, 2, 64, ["10us", "25ms", "1s"]
    else:
        gpus, layers, batch = args.gpus, args.layers, 512
        values = [v for v in args.t_ocs.split(",") if v]
    tr = trace(gpus, layers, batch)
    fab = rf.topologies.RFabric(gpus)
    t = C.Timer(f"fig22 uniform {gpus} GPUs {layers} layers")
    base = rf.simulate(fab, tr, controller=UniformController(), backend="flow", seed=1)
    t.done()
    b = C.stage_times(base)
    rows = [
        {
            "t_ocs": "-",
            "controller": "UniformController",
            "granularity": "-",
            "iteration_s": base.run["makespan_ps"] / 1e12,
            **{f"{s}_s": b[s] for s in STAGES},
            **{f"{s}_x": 1.0 for s in STAGES},
            "iteration_x": 1.0,
            "calls": base.run["controller_calls"],
            "plans": base.run["plan_changes"],
            "kept_slack": 0,
        }
    ]
    for v in values:
        ctl = StageAwareController(granularity="op")
        t = C.Timer(f"fig22 t_ocs {v}")
        res = rf.simulate(fab, tr, controller=ctl, backend="flow", t_ocs=v, seed=1)
        t.done()
        got = C.stage_times(res)
        rows.append(
            {
                "t_ocs": v,
                "t_ocs_ps": rf.units.parse_time(v),
                "controller": "StageAwareController",
                "granularity": "op",
                "iteration_s": res.run["makespan_ps"] / 1e12,
                **{f"{s}_s": got[s] for s in STAGES},
                **{f"{s}_x": got[s] / b[s] for s in STAGES},
                "iteration_x": res.run["makespan_ps"] / base.run["makespan_ps"],
                "calls": res.run["controller_calls"],
                "plans": res.run["plan_changes"],
                "kept_slack": sum(1 for d in ctl.log if str(d.action).startswith("keep: slack")),
            }
        )
    for r in rows:
        r.update(gpus=gpus, layers=layers, batch=batch, backend="flow")
    return rows


COLS = [
    ("t_ocs", "{}"),
    ("controller", "{}"),
    ("granularity", "{}"),
    ("iteration_s", "{:.4f}"),
    ("train_x", "{:.4f}"),
    ("gen_x", "{:.4f}"),
    ("weight_sync_x", "{:.4f}"),
    ("iteration_x", "{:.4f}"),
    ("calls", "{}"),
    ("plans", "{}"),
    ("kept_slack", "{}"),
]


def main(argv=None) -> list[dict]:
    ap = C.parser(__doc__)
    ap.add_argument("--gpus", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--t-ocs", default="10us,1ms,10ms,25ms,100ms,1s")
    args = ap.parse_args(argv)
    print(C.SETUP.replace(", t_ocs 25 ms", ", t_ocs swept"))
    rows = run(args)
    C.print_table(
        f"Figure 22: Qwen3-235B-A22B on RFabric ({rows[0]['gpus']} GPUs, {rows[0]['layers']} layers), stage time "
        "over the uniform plan's, re-planned at every op",
        rows,
        COLS,
    )
    C.write(rows, "fig22", args.out)
    return rows


if __name__ == "__main__":
    main()
