"""Bytes and time per stage and per op kind of one RL iteration, for a dense and a MoE
model under two framework setups, replayed on a 64-GPU fat-tree (flow backend).

    python bench/rl_breakdown.py [--gpus 64] [--batch 64] [--backend flow]

Setups:

* ``verl``: veRL's defaults: colocated placement (rollout and trainer time-share all the
  GPUs), FSDP training (ZeRO-3, one unit per layer, no TP), GRPO make-experience (old +
  reference log-probs), weight sync as the local reshard (the FSDP unshard; the rollout's
  TP slices are cut from it without traffic);
* ``disagg``: `generate_rl`'s defaults, half the GPUs train and half generate: Megatron
  TP/PP(/EP) with a DDP gradient all-reduce, GRPO make-experience, two-level sharded
  weight sync;
* ``disagg_pd``: ``disagg`` with prefill/decode disaggregation: 8 of the gen GPUs are two
  TP-4 prefill instances that send the KV cache to the decode instances.

Per (model, setup) it prints, per stage: ops, bytes the replay moves (``sent_bytes``: what
the NICs carry, not the nccl-tests size), the stage's wall span in the replay; and per
(stage, kind): ops, bytes and the summed op time (ops of a kind overlap, so these sums do
not add up to the span). ``bench/README.md`` keeps a run's output.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections import defaultdict

import numpy as np

import rfabric as rf

MODELS = {
    "dense": (
        "qwen2.5-14b",
        {
            "verl": dict(train=dict(tp=1), gen=dict(tp=4)),
            "disagg": dict(train=dict(tp=4, pp=2), gen=dict(tp=4)),
            "disagg_pd": dict(train=dict(tp=4, pp=2), gen=dict(tp=4), prefill=dict(tp=4, dp=2)),
        },
    ),
    "moe": (
        "qwen2-57b-a14b",
        {
            "verl": dict(train=dict(tp=1), gen=dict(tp=4, ep=8)),
            "disagg": dict(train=dict(tp=4, ep=8), gen=dict(tp=4, ep=8)),
            "disagg_pd": dict(train=dict(tp=4, ep=8), gen=dict(tp=4, ep=8), prefill=dict(tp=4, dp=2)),
        },
    ),
}
SETUPS = {
    "verl": dict(placement="colocated", zero_stage=3, algorithm="grpo"),
    "disagg": dict(),
    "disagg_pd": dict(),
}


def human(nbytes: int) -> str:
    """Bytes in decimal units (kB, MB, GB, TB), three significant figures or more."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}" if nbytes < 100 * scale else f"{nbytes / scale:.0f} {unit}"
    return f"{nbytes} B"


def run(model: str, layout: dict, setup: dict, gpus: int, batch: int, backend: str) -> None:
    t0 = time.perf_counter()
    side = gpus if setup.get("placement") == "colocated" else gpus // 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", rf.traces.MemoryFitWarning)
        trace = rf.traces.generate_rl(
            model,
            train_gpus=side,
            gen_gpus=side,
            global_batch=batch,
            prompt_len=512,
            response=dict(median=1024, max=4096),
            decode_steps_per_op=256,
            seed=0,
            **layout,
            **setup,
        )
    for w in caught:
        print(f"  warning: {w.message}")
    t1 = time.perf_counter()
    res = rf.simulate(rf.topologies.FatTree(gpus), trace, backend=backend)
    t2 = time.perf_counter()
    ops = res.ops
    sent = trace.sent_bytes()
    stage = ops["stage"].to_pylist()
    kind = ops["kind"].to_pylist()
    t_op = ops["time_ps"].to_numpy()
    done = ops["end_ps"].to_numpy() >= 0
    per_stage = defaultdict(lambda: [0, 0])
    per_kind = defaultdict(lambda: [0, 0, 0])
    for i, (s, k) in enumerate(zip(stage, kind, strict=True)):
        per_stage[s][0] += 1
        per_stage[s][1] += int(sent[i])
        pk = per_kind[(s, k)]
        pk[0] += 1
        pk[1] += int(sent[i])
        pk[2] += int(t_op[i]) if done[i] else 0
    span = {r["stage"]: (r["end_ps"] - r["start_ps"]) for r in res.stages.to_pylist()}
    makespan = res.run["makespan_ps"]
    print(
        f"  {trace.num_ops} ops, {sent.sum() / 1e9:.1f} GB moved, iteration {makespan / 1e12:.3f} s "
        f"(all ops done: {bool(done.all())}); generate {t1 - t0:.1f} s, replay {t2 - t1:.1f} s"
    )
    print(f"  {'stage':<16} {'ops':>7} {'bytes':>10} {'span s':>8}")
    for s, (n, nbytes) in sorted(per_stage.items(), key=lambda kv: -kv[1][1]):
        print(f"  {s:<16} {n:>7} {human(nbytes):>10} {span.get(s, -1) / 1e12:>8.3f}")
    print(f"  {'stage/kind':<32} {'ops':>7} {'bytes':>10} {'op-time s':>10}")
    for (s, k), (n, nbytes, tps) in sorted(per_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"  {s + '/' + k:<32} {n:>7} {human(nbytes):>10} {tps / 1e12:>10.3f}")
    assert np.all(done), "some ops did not finish"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=64, help="fat-tree GPUs (half train, half gen)")
    ap.add_argument("--batch", type=int, default=64, help="responses per iteration")
    ap.add_argument("--backend", default="flow", choices=("flow", "packet"))
    args = ap.parse_args()
    for name, (model, layouts) in MODELS.items():
        for setup, opts in SETUPS.items():
            print(f"{name} {model}, {setup}: {layouts[setup]} {opts}")
            run(model, layouts[setup], opts, args.gpus, args.batch, args.backend)


if __name__ == "__main__":
    main()
