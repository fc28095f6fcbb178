"""generate_rl's framework options: make-experience passes, bucketed gradient sync, the
optimizer step, the memory-fit check; each against byte totals recomputed here from the
raw architecture numbers (never the generator's helpers), plus a replay on a 64-GPU
fat-tree (flow backend) that finishes every op and moves exactly the trace's bytes."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

import rfabric as rf
import rfabric.traces as rt
from rfabric.errors import SpecError


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def totals(trace: rt.Trace) -> dict[tuple[str, str, str], list[int]]:
    """(stage, phase, kind) -> [ops, sum of size_bytes]."""
    t = trace.table
    out: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    cols = [t.column(c).to_pylist() for c in ("stage", "phase", "kind", "size_bytes")]
    for s, p, k, n in zip(*cols, strict=True):
        out[(s, p, k)][0] += 1
        out[(s, p, k)][1] += n
    return dict(out)


def replay_conserves(trace: rt.Trace) -> None:
    """Replay on FatTree(64), flow backend: every op ends and moves trace.sent_bytes()."""
    res = rf.simulate(rf.topologies.FatTree(64), trace, backend="flow", record_flows=True)
    assert (res.ops["end_ps"].to_numpy() >= 0).all()
    moved = np.bincount(
        res.flows["op_id"].to_numpy(), weights=res.flows["size_bytes"].to_numpy(), minlength=trace.num_ops
    ).astype(np.int64)
    assert moved.tolist() == trace.sent_bytes().tolist()


# -- make-experience passes ---------------------------------------------------------------------
def test_make_experience_passes_ppo_with_reward_model():
    m = rt.MODELS["qwen2.5-14b"]
    h, L = m.hidden, m.layers
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    tp, pp, cp, dp, B, p, n, mbt = 2, 2, 2, 2, 16, 128, 300, 1024
    trace = rt.generate_rl(
        m,
        train_gpus=16,
        gen_gpus=8,
        train=dict(tp=tp, pp=pp, cp=cp),
        gen=dict(tp=2),
        global_batch=B,
        prompt_len=p,
        response=dict(median=n, sigma=0, max=1000),
        micro_batch_tokens=mbt,
        optimizer_steps=2,  # training micro-batches differ from the passes' (whole batch)
        algorithm="ppo",
        reward_model=True,
    )
    got = totals(trace)
    T = B * (p + n)
    mb = cdiv(T, dp * mbt)  # micro-batches per replica over the whole batch
    t = cdiv(cdiv(T, dp * mb), cp)
    ar_ops = mb * L * 2 * dp * cp  # 2 TP all-reduces per layer on each of dp*cp groups
    a2a_ops = mb * L * 2 * dp * tp
    sends = mb * tp * cp * dp  # stage 0 -> 1, every rank of the stage
    passes = ("reward", "old_logprob", "ref_logprob", "critic_value")
    for ph in passes:
        assert got[("experience", ph, "all_reduce")] == [ar_ops, ar_ops * t * h * 2]
        qkv, out = cdiv(t * (q + 2 * kv) * 2, tp), cdiv(t * q * 2, tp)
        assert got[("experience", ph, "all_to_all")] == [a2a_ops, a2a_ops // 2 * (qkv + out)]
        assert got[("experience", ph, "send")] == [sends, sends * t * h * 2]
    assert {k[1] for k in got if k[0] == "experience"} == set(passes)
    # In veRL's order, all before the first training op, each in its own period.
    tab = trace.table
    stage, phase = tab.column("stage").to_pylist(), tab.column("phase").to_pylist()
    period = tab.column("period").to_pylist()
    exp = [i for i, s in enumerate(stage) if s == "experience"]
    first_train = stage.index("train")
    assert max(exp) < first_train
    order = [phase[i] for i in exp]
    assert sorted(order, key=passes.index) == order
    assert len({period[i] for i in exp}) == 4
    # The stream hand-offs now feed the first pass: its first ops wait for streamed samples.
    streams = {i for i, s in enumerate(stage) if s == "response_stream"}
    deps = tab.column("deps").to_pylist()
    assert streams <= {d for i in exp for d in deps[i]}


@pytest.mark.parametrize("algorithm, passes", [("grpo", 2), ("none", 0)])
def test_grpo_has_no_critic(algorithm, passes):
    trace = rt.generate_rl(
        "qwen2.5-14b",
        train_gpus=8,
        gen_gpus=8,
        train=dict(tp=2),
        gen=dict(tp=2),
        global_batch=8,
        response=dict(median=64, max=128),
        algorithm=algorithm,
    )
    got = totals(trace)
    assert len({k[1] for k in got if k[0] == "experience"}) == passes
    assert ("experience", "critic_value", "all_reduce") not in got
    assert trace.metadata["parameters"]["algorithm"] == algorithm


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(algorithm="dpo"), "algorithm must be one of 'grpo', 'ppo', 'none', got 'dpo'"),
        (dict(reward_model="yes"), "reward_model must be True or False, got 'yes'"),
    ],
)
def test_option_errors(kwargs, message):
    with pytest.raises(SpecError, match=message):
        rt.generate_rl("qwen2.5-14b", train_gpus=8, gen_gpus=8, **kwargs)


# -- replay -------------------------------------------------------------------------------------
def rl64(**kwargs) -> rt.Trace:
    """A 64-GPU iteration (32 train, 32 gen) small enough to replay in a second or two."""
    args = dict(
        train_gpus=32,
        gen_gpus=32,
        train=dict(tp=4, pp=2),
        gen=dict(tp=4),
        global_batch=32,
        prompt_len=64,
        response=dict(median=96, max=256),
        decode_steps_per_op=128,
    )
    return rt.generate_rl("qwen2.5-14b", **(args | kwargs))


@pytest.mark.parametrize("kwargs", [dict(algorithm="ppo", reward_model=True)], ids=["ppo_rm"])
def test_replay_on_fat_tree_64_conserves_bytes(kwargs):
    replay_conserves(rl64(**kwargs))
