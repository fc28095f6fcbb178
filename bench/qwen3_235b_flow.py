"""One Qwen3-235B-A22B RL iteration on a 2,048-GPU RFabric with the stage-aware controller
(issue 11, deliverable 5): train on 1,024 GPUs (tp 4, pp 8, ep 32), generation on 1,024
(tp 4, ep 32), PoDs of 512 GPUs, t_ocs 25 ms.

    /usr/bin/time -v python bench/qwen3_235b_flow.py [flow|packet] [--gpus 1024]

--gpus is the size of each side (train and generation; the fabric has twice as many).
Prints progress, the run summary, the stages, wall time and peak RSS (bench/README.md,
"Qwen3-235B-A22B on RFabric 2048").
"""

import argparse
import resource
import time
from collections import Counter

import rfabric as rf
from rfabric.controllers import StageAwareController


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backend", nargs="?", default="flow", choices=("flow", "packet"))
    ap.add_argument("--gpus", type=int, default=1024, help="GPUs per side (train, generation)")
    args = ap.parse_args()
    n = args.gpus
    t0 = time.time()
    tr = rf.traces.generate_rl(
        "qwen3-235b-a22b",
        train_gpus=n,
        gen_gpus=n,
        train=dict(tp=4, pp=8, ep=min(32, n // 32)),
        gen=dict(tp=4, ep=32),
        iterations=1,
        seed=0,
        global_batch=2 * n,
        pod_gpus=min(512, n),
        decode_steps_per_op=256,
    )
    print(f"trace {tr.num_ops} ops, {time.time() - t0:.1f} s", flush=True)
    fab = rf.topologies.RFabric(2 * n)
    t1 = time.time()
    ctl = StageAwareController()
    sim = rf.Simulation(fab, tr, controller=ctl, backend=args.backend, t_ocs="25ms")
    sim.run(progress=True)
    res = sim.results()
    print(res.summary())
    for st in res.stages.to_pylist():
        print("stage", st)
    keys = ("ops_done", "ops", "flows", "peak_live_flows", "events", "recomputes", "rate_updates",
            "component_subflows", "max_component", "quiet_ends", "controller_wall_s", "unroutable")
    print({k: res.run.get(k) for k in keys})
    ws = Counter(d.action for d in ctl.log if d.stage == "weight_sync" and d.action != "cached template")
    print("weight-sync decisions", dict(sorted(ws.items())))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"wall {time.time() - t0:.1f} s (simulation {time.time() - t1:.1f} s), peak RSS {rss:.2f} GiB")


if __name__ == "__main__":
    main()
