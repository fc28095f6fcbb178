"""One RL iteration at frontier scale on the flow backend (issue 27, item 3): Qwen3-235B-A22B
or Kimi K2 on RFabric with the stage-aware controller, or on a FatTree, with N GPUs training
and N generating.

    /usr/bin/time -v python bench/frontier.py --model kimi-k2 --fabric RFabric --gpus 8192
    python bench/frontier.py --model qwen3-235b-a22b --fabric FatTree --gpus 1024

Prints the time of each phase (trace generation; the rewrites the controller asks for; the
controller's prepare; the engine build and workload load; the run, of which the controller's
own share at the boundaries; the result tables), then the run's counters, the stages, wall
time and peak RSS (bench/README.md, "Frontier scale: 16,384 GPUs").

Layouts (chosen so that the generator's memory check passes on 80 GB H800s,
``memory_check="error"``):

* Qwen3-235B-A22B: train tp 4, pp 8, ep 32 with full recomputation (the 2,048-GPU bench's
  layout, ``bench/qwen3_235b_flow.py``, which without recomputation needs 135 GB per GPU);
  generation tp 4, ep 32.
* Kimi K2: train pp 16, ep 16, ZeRO-1 data parallelism and no tensor parallelism, as its
  technical report trains it (Kimi K2 technical report, arXiv:2507.20534, section 2.4:
  "16-way Pipeline Parallelism with virtual stages, 16-way Expert Parallelism, and ZeRO-1
  Data Parallelism" on H800s), with full recomputation here (the report keeps activations in
  budget with selective recomputation, FP8 storage and CPU offload, which the generator does
  not model); generation tp 8, ep 64 (our choice: the model's weights are 2 TB in BF16, so one
  engine needs at least 26 GPUs of 80 GB; 64 GPUs per expert group leave room for KV cache).

The global batch is two samples per GPU of each side, PoDs of 512 GPUs, 256 decode steps per
op, t_ocs 25 ms, as in bench/qwen3_235b_flow.py.
"""

import argparse
import resource
import time

from _common import RUN_KEYS  # bench/_common.py

import rfabric as rf
import rfabric.simulation.core as sim_core
from rfabric.controllers import StageAwareController

LAYOUTS = {
    "qwen3-235b-a22b": dict(
        train=dict(tp=4, pp=8, ep=32),
        gen=dict(tp=4, ep=32),
        recompute="full",
    ),
    "kimi-k2": dict(
        train=dict(tp=1, pp=16, ep=16),
        gen=dict(tp=8, ep=64),
        recompute="full",
        zero_stage=1,
    ),
}


class Phases:
    """Wall time of named phases (time.perf_counter), printed as they end."""

    def __init__(self):
        self.times: dict[str, float] = {}

    def wrap(self, name, fn):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - t)

        return timed

    def add(self, name: str, seconds: float) -> None:
        self.times[name] = self.times.get(name, 0.0) + seconds
        print(f"phase {name}: {seconds:.1f} s", flush=True)


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-235b-a22b", choices=sorted(LAYOUTS))
    ap.add_argument("--fabric", default="RFabric", choices=("RFabric", "FatTree"))
    ap.add_argument("--gpus", type=int, default=1024, help="GPUs per side (train, generation)")
    ap.add_argument("--no-progress", action="store_true", help="do not print the run's progress")
    args = ap.parse_args(argv)
    n = args.gpus
    lay = LAYOUTS[args.model]
    ph = Phases()
    t0 = time.perf_counter()
    t = time.perf_counter()
    tr = rf.traces.generate_rl(
        args.model,
        train_gpus=n,
        gen_gpus=n,
        train=lay["train"],
        gen=lay["gen"],
        iterations=1,
        seed=0,
        global_batch=2 * n,
        pod_gpus=min(512, n),
        decode_steps_per_op=256,
        recompute=lay.get("recompute", "none"),
        zero_stage=lay.get("zero_stage"),
        memory_check="error",
    )
    ph.add("trace generation", time.perf_counter() - t)
    print(f"trace {tr.num_ops:,} ops, RSS {rss_gib():.2f} GiB", flush=True)
    if args.fabric == "RFabric":
        fab = rf.topologies.RFabric(2 * n)
        ctl = StageAwareController()
    else:
        fab = rf.topologies.FatTree(gpus=2 * n)
        ctl = None
    # the phases inside Simulation(): rewrites, the controller's prepare, then the engine
    sim_core.rewrite_workload = ph.wrap("rewrites", sim_core.rewrite_workload)
    sim_core.prepare_workload = ph.wrap("controller prepare", sim_core.prepare_workload)
    t = time.perf_counter()
    sim = rf.Simulation(fab, tr, controller=ctl, backend="flow", t_ocs="25ms")
    build = time.perf_counter() - t - ph.times.get("rewrites", 0) - ph.times.get("controller prepare", 0)
    ph.add("engine build and load", build)
    t = time.perf_counter()
    sim.run(progress=not args.no_progress)
    ph.add("run", time.perf_counter() - t)
    t = time.perf_counter()
    res = sim.results()
    ph.add("results", time.perf_counter() - t)
    print(res.summary())
    for st in res.stages.to_pylist():
        print(
            "stage", st["stage"], "ops", st["ops"], f"{st['start_ps'] / 1e12:.3f}-{st['end_ps'] / 1e12:.3f} s"
        )
    keys = RUN_KEYS
    print({k: res.run.get(k) for k in keys})
    wall = time.perf_counter() - t0
    print(
        f"{args.model} on {fab.name} ({2 * n} GPUs): wall {wall:.1f} s "
        + ", ".join(f"{k} {v:.1f} s" for k, v in ph.times.items())
        + f"; peak RSS {rss_gib():.2f} GiB"
    )


if __name__ == "__main__":
    main()
