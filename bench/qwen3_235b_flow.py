"""One Qwen3-235B-A22B RL iteration on a 2,048-GPU RFabric with the stage-aware controller
(issue 11, deliverable 5): train on 1,024 GPUs (tp 4, pp 8, ep 32), generation on 1,024
(tp 4, ep 32), PoDs of 512 GPUs, t_ocs 25 ms.

    /usr/bin/time -v python bench/qwen3_235b_flow.py [flow|packet] [--gpus 1024]
    python bench/qwen3_235b_flow.py packet --max-events 500000000 --frame-hops 1.2e11

--gpus is the size of each side (train and generation; the fabric has twice as many).
Prints progress, the run summary, the stages, wall time and peak RSS (bench/README.md,
"Qwen3-235B-A22B on RFabric 2048"). The flow run also prints the wire bytes the iteration
puts on all ports and the frame-hops they make at the MTU (what the packet engine would
simulate, frame by frame); a packet run stopped at --until (simulated time) or after --max-events prints its
packet-hops per second of engine time and, given --frame-hops (the flow run's figure), the
projected time of the whole iteration at that rate. --stage NAME replays that stage's ops
alone (dependencies on other stages dropped: it starts at time 0 on the initial circuits),
e.g. `packet --stage weight_sync` for one stage in packets.
"""

import argparse
import resource
import time
from collections import Counter

from _common import RUN_KEYS, only_stage, qwen3_trace  # bench/_common.py (shared with validate_flow.py)

import rfabric as rf
from rfabric.controllers import StageAwareController


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backend", nargs="?", default="flow", choices=("flow", "packet"))
    ap.add_argument("--gpus", type=int, default=1024, help="GPUs per side (train, generation)")
    ap.add_argument("--until", default=None, help="stop at this simulated time (e.g. 2s)")
    ap.add_argument("--max-events", type=float, default=0, help="stop after this many events")
    ap.add_argument("--frame-hops", type=float, default=None, help="the whole iteration's frame-hops")
    ap.add_argument("--stage", default=None, help="replay only this stage's ops (e.g. weight_sync)")
    args = ap.parse_args()
    n = args.gpus
    t0 = time.time()
    tr = qwen3_trace(n)
    if args.stage:
        tr = only_stage(tr, args.stage)
    print(f"trace {tr.num_ops} ops, {time.time() - t0:.1f} s", flush=True)
    fab = rf.topologies.RFabric(2 * n)
    t1 = time.time()
    ctl = StageAwareController()
    sim = rf.Simulation(fab, tr, controller=ctl, backend=args.backend, t_ocs="25ms")
    if args.max_events:
        sim.run(args.until, max_events=int(args.max_events))
    else:
        sim.run(args.until, progress=True)
    res = sim.results()
    print(res.summary())
    if args.backend == "flow":
        wire = float(res.links["bytes"].to_numpy().sum())
        mtu = rf.EngineConfig().mtu_bytes
        print(f"wire bytes on all ports {wire:.4g}; frame-hops at the {mtu} B MTU about {wire / mtu:.4g}")
    else:
        hops, wall = res.run["packet_hops"], res.run["wall_s"]
        print(f"packet-hops {hops:,} in {wall:.1f} s engine time: {hops / wall / 1e6:.2f} M/s")
        if args.frame_hops:
            hours = args.frame_hops / (hops / wall) / 3600
            print(f"projected whole iteration at this rate: {hours:.1f} h ({args.frame_hops:.3g} frame-hops)")
    for st in res.stages.to_pylist():
        print("stage", st)
    keys = RUN_KEYS
    print({k: res.run.get(k) for k in keys})
    ws = Counter(d.action for d in ctl.log if d.stage == "weight_sync" and d.action != "cached template")
    print("weight-sync decisions", dict(sorted(ws.items())))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"wall {time.time() - t0:.1f} s (simulation {time.time() - t1:.1f} s), peak RSS {rss:.2f} GiB")


if __name__ == "__main__":
    main()
