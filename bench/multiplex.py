"""RollMux-style multiplexing of two RL jobs against two separate clusters.

Two synchronous GRPO jobs of RollMux's type A (Table 3: Qwen2.5-7B, single-turn, 8K
maximum response, batch 256, 8 training + 8 rollout GPUs), different seeds (response
lengths):

* **multiplexed**: both on one shared training pool and one shared rollout pool
  (`rf.traces.multiplex_rl`, round-robin, the context switch of each row) on one fat-tree
  of 16 GPUs;
* **separate**: each job its own 8 + 8 GPUs (`rf.traces.generate_rl`), the two as `rf.Job`s
  on one fat-tree of 32 GPUs (they share no link there: as on two clusters).

Per job: iterations per second and iteration time from its start (``res.jobs``), and the
steady iteration time (between the ends of its first and last iterations: no start-up
offset). Per setup: the cluster's cost per hour (GPU rent plus the network's price from
`rf.cost.network_cost` spread over ``--years``) and iterations (both jobs, at the steady
iteration times) per dollar.

    python bench/multiplex.py                      # flow backend, 4 iterations, ~1.5 min
    python bench/multiplex.py --gen-gpu H800       # an all-H800 cluster instead

Training runs on H800 and the rollout pool on H20, as in RollMux (``--gen-gpu``): the compute
model, the servers' NVLink and the rent follow each pool's type. Prices: GPU rent per hour
from RollMux Table 1 (H800 $5.28, H20 $1.85; "an H800 GPU is 2.85x more expensive than an
H20"); network components from OrchestrRL Table 4 (rfabric/data/prices.toml). The years over
which the network is paid off are an assumption of this script (``--years``, default 3),
not a figure of either paper.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import pyarrow as pa
import pyarrow.compute  # noqa: F401

import rfabric as rf

#: Qwen2.5-7B (rf.traces.MODELS, from its Hugging Face config.json)
QWEN25_7B = rf.traces.MODELS["qwen2.5-7b"]


#: GPU rent per hour, RollMux Table 1
RENT_USD_H = {"H800": 5.28, "H20": 1.85}


def job_spec(seed: int, layers: int | None, gen_gpu: str = "H20") -> dict:
    model = QWEN25_7B if layers is None else rf.traces.get_model({"base": QWEN25_7B, "layers": layers})
    return dict(
        model=model,
        train_hardware="H800",
        gen_hardware=gen_gpu,
        train=dict(tp=2, dp=4),  # RollMux Table 2: 7B training at TP 2
        distributed_optimizer=True,
        gen=dict(tp=2),
        global_batch=256,
        response=dict(max=8192),
        seed=seed,
    )


def steady_iteration_s(res, job: str) -> float:
    """Seconds between the ends of the job's first and last iterations, per iteration (the
    round-robin's period once both pools are in step: no start-up offset)."""
    ops = res.ops.filter(pa.compute.equal(res.ops["job"], job))
    ends = (
        ops.group_by("iteration")
        .aggregate([("end_ps", "max")])
        .sort_by("iteration")["end_ps_max"]
        .to_pylist()
    )
    return (ends[-1] - ends[0]) / (len(ends) - 1) / 1e12


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--backend", default="flow", choices=["flow", "packet"])
    ap.add_argument(
        "--switch", nargs="+", default=["warm", "cold", "0"], help="context_switch values, one row each"
    )
    ap.add_argument("--layers", type=int, default=None, help="cut the model to this many layers (faster)")
    ap.add_argument(
        "--gen-gpu", default="H20", choices=sorted(RENT_USD_H), help="the rollout pool's GPU (RollMux: H20)"
    )
    ap.add_argument(
        "--train-usd-h",
        type=float,
        default=RENT_USD_H["H800"],
        help="training GPU rent, $/h (H800, RollMux Table 1)",
    )
    ap.add_argument(
        "--gen-usd-h",
        type=float,
        default=None,
        help="rollout GPU rent, $/h (default: the --gen-gpu's, RollMux Table 1)",
    )
    ap.add_argument("--years", type=float, default=3.0, help="years over which the network is paid off")
    a = ap.parse_args(argv)
    if a.gen_usd_h is None:
        a.gen_usd_h = RENT_USD_H[a.gen_gpu]

    n_train = n_gen = 8
    specs = [dict(job_spec(s, a.layers, a.gen_gpu), name=n) for s, n in ((1, "A"), (2, "B"))]
    pool = [(n_train, "H800"), (n_gen, a.gen_gpu)]
    hours = a.years * 365 * 24

    def cost_per_h(fab, pools: int) -> tuple[float, float]:
        net = rf.cost.network_cost(fab)
        return pools * (n_train * a.train_usd_h + n_gen * a.gen_usd_h) + net / hours, net

    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rf.traces.MemoryFitWarning)
        # separate clusters: each job on its own 8 + 8 GPUs
        fab = rf.topologies.FatTree(32, gpu=pool + pool)
        jobs = []
        for k, spec in enumerate(specs):
            spec = dict(spec)
            name = spec.pop("name")
            t = rf.traces.generate_rl(**spec, train_gpus=n_train, gen_gpus=n_gen, iterations=a.iterations)
            jobs.append(rf.Job(t, gpus=range(16 * k, 16 * (k + 1)), name=name))
        t0 = time.perf_counter()
        res = rf.simulate(fab, jobs, backend=a.backend)
        usd_h, net = cost_per_h(fab, 2)
        rows.append(("separate", 32, res, usd_h, net, time.perf_counter() - t0))
        # multiplexed: both jobs on one 8 + 8 group
        fab = rf.topologies.FatTree(16, gpu=pool)
        for sw in a.switch:
            switch = int(sw) if sw.isdigit() else sw
            trace = rf.traces.multiplex_rl(
                specs, train_gpus=n_train, gen_gpus=n_gen, iterations=a.iterations, context_switch=switch
            )
            t0 = time.perf_counter()
            res = rf.simulate(fab, trace, backend=a.backend)
            usd_h, net = cost_per_h(fab, 1)
            rows.append((f"multiplexed, switch {sw}", 16, res, usd_h, net, time.perf_counter() - t0))

    model = specs[0]["model"].name
    print(
        f"# {model}, 2 jobs x {a.iterations} iterations, {a.backend} backend; GPU ${a.train_usd_h}/h train, "
        f"${a.gen_usd_h}/h rollout; network over {a.years:g} years"
    )
    print()
    print(
        "| setup | GPUs | A it/s | B it/s | A iteration (s) | B iteration (s) | A steady (s) | B steady (s) "
        "| network $ | cluster $/h | iterations per $ | vs separate |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    for setup, gpus, res, usd_h, net, _ in rows:
        j = {r["job"]: r for r in res.jobs.to_pylist()}
        assert all(r["complete"] for r in j.values()), setup
        it_s = [j[n]["throughput_iter_per_s"] for n in ("A", "B")]
        steady = [steady_iteration_s(res, n) for n in ("A", "B")]
        per_usd = sum(1 / x for x in steady) * 3600 / usd_h
        base = per_usd if base is None else base
        print(
            f"| {setup} | {gpus} | {it_s[0]:.4f} | {it_s[1]:.4f} | {j['A']['iteration_time_ps'] / 1e12:.1f} | "
            f"{j['B']['iteration_time_ps'] / 1e12:.1f} | {steady[0]:.1f} | {steady[1]:.1f} | {net:,.0f} | {usd_h:.2f} | {per_usd:.3f} | {per_usd / base:.2f}x |"
        )
    print()
    print("simulation wall time: " + ", ".join(f"{s} {w:.1f} s" for s, _, _, _, _, w in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
