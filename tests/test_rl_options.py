"""generate_rl's framework options: make-experience passes, bucketed gradient sync, the
optimizer step, ZeRO-2/3 and FSDP, gather-then-broadcast weight sync, the memory-fit
check; each against byte totals recomputed here from the raw architecture numbers (never
the generator's helpers), plus replays on a 64-GPU fat-tree (flow backend) that finish
every op and move exactly the trace's bytes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_generator import cdiv, layer_dense, layer_experts, total_params, totals

import rfabric as rf
import rfabric.traces as rt
from rfabric.errors import SpecError

HBM = 3.35e12  # H800 HBM bytes/s (hbm_efficiency 1)


def replay_conserves(trace: rt.Trace) -> None:
    """Replay on FatTree(64), flow backend: every op ends and moves trace.sent_bytes() in its
    protocol's wire bytes (docs/nccl-model.md): the payload itself under Simple (or none), twice
    it under LL and 128/120 of it under LL128, each flow rounded up to whole lines (16 B, 128 B)."""
    res = rf.simulate(rf.topologies.FatTree(64), trace, backend="flow", record_flows=True)
    assert (res.ops["end_ps"].to_numpy() >= 0).all()
    moved = np.bincount(
        res.flows["op_id"].to_numpy(), weights=res.flows["size_bytes"].to_numpy(), minlength=trace.num_ops
    ).astype(np.int64)
    sent = trace.sent_bytes()
    flows = res.ops["flows"].to_numpy()
    protocol = np.array(res.ops["protocol"].to_pylist(), dtype=object)
    plain = (protocol == None) | (protocol == "simple")  # noqa: E711 (elementwise)
    assert moved[plain].tolist() == sent[plain].tolist()
    for proto, factor, line in (("ll", 2.0, 16), ("ll128", 128 / 120, 128)):
        rows = protocol == proto
        assert (moved[rows] >= factor * sent[rows]).all()
        assert (moved[rows] <= factor * sent[rows] + line * flows[rows]).all()


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


@pytest.mark.parametrize("algorithm, passes", [("grpo", 2), ("ppo", 4), ("none", 0)])
def test_passes_per_algorithm(algorithm, passes):
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
    # GRPO: no critic and no reward model; PPO: both (reward model by default)
    assert (("experience", "critic_value", "all_reduce") in got) == (algorithm == "ppo")
    assert (("experience", "reward", "all_reduce") in got) == (algorithm == "ppo")
    assert trace.metadata["parameters"]["algorithm"] == algorithm


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(algorithm="dpo"), "algorithm must be one of 'grpo', 'ppo', 'none', got 'dpo'"),
        (dict(reward_model="yes"), "reward_model must be True or False, got 'yes'"),
        (dict(grad_bucket_bytes=0), "grad_bucket_bytes: size 0 must be positive"),
        (dict(optimizer_bytes_per_param=-1), "optimizer_bytes_per_param must be an integer >= 0"),
        (dict(memory_check="ignore"), "memory_check must be one of 'warn', 'error', 'off'"),
        (dict(zero_stage=4), "zero_stage must be an integer in 0..3, got 4"),
        (dict(weight_bucket_bytes=0), "weight_bucket_bytes: size 0 must be positive"),
        (dict(zero_stage=3, distributed_optimizer=True), "contradicts zero_stage=3"),
        (dict(zero_stage=2, grad_bucket_bytes=1 << 20), "grad_bucket_bytes applies to zero_stage 0 and 1"),
    ],
)
def test_option_errors(kwargs, message):
    with pytest.raises(SpecError, match=message):
        rt.generate_rl("qwen2.5-14b", train_gpus=8, gen_gpus=8, **kwargs)


def test_bucket_sizes_take_unit_strings():
    """Bucket sizes follow the units rule (docs/units.md): "25MiB" is 25 << 20 bytes."""
    common = dict(train_gpus=8, gen_gpus=8, weight_sync="gather_broadcast")
    strings = rt.generate_rl("qwen2.5-14b", grad_bucket_bytes="25MiB", weight_bucket_bytes="256MiB", **common)
    ints = rt.generate_rl("qwen2.5-14b", grad_bucket_bytes=25 << 20, weight_bucket_bytes=256 << 20, **common)
    assert strings.equals(ints)
    assert strings.metadata["parameters"]["weight_bucket_bytes"] == 256 << 20


# -- bucketed gradient sync and the optimizer step ----------------------------------------------
def test_grad_buckets_overlap_the_backward():
    m = rt.MODELS["qwen2.5-14b"]
    h, L, V = m.hidden, m.layers, m.vocab
    tp, pp, cap = 2, 2, 100 << 20
    trace = rt.generate_rl(
        m,
        train_gpus=8,
        gen_gpus=4,
        train=dict(tp=tp, pp=pp),
        gen=dict(tp=4),
        global_batch=8,
        response=dict(median=64, max=128),
        grad_bucket_bytes=cap,
    )
    got = totals(trace)
    d = [(L // pp) * layer_dense(m) + V * h, (L // pp) * layer_dense(m) + V * h + h]  # stage 0, 1
    per_rank = [cdiv(x, tp) * 4 for x in d]
    buckets = sum(cdiv(x, cap) for x in per_rank)
    assert got[("train", "grad_sync", "all_reduce")] == [tp * buckets, tp * sum(per_rank)]
    sizes = sorted({r["size_bytes"] for r in trace.table.to_pylist() if r["phase"] == "grad_sync"})
    assert sizes == sorted({cap} | {x - cap * (cdiv(x, cap) - 1) for x in per_rank})
    # Overlap: buckets start before the stage's backward ends; each is waited for.
    tab = trace.table
    stage, phase = tab.column("stage").to_pylist(), tab.column("phase").to_pylist()
    ranks, deps = tab.column("ranks").to_pylist(), tab.column("deps").to_pylist()
    last_bwd = max(
        i for i, (s, p) in enumerate(zip(stage, phase, strict=True)) if s == "train" and p == "bwd"
    )
    grad = [i for i, p in enumerate(phase) if p == "grad_sync"]
    assert min(grad) < last_bwd
    waited = {d for ds in deps for d in ds}
    assert set(grad) <= waited
    assert all(len(ranks[i]) == 2 for i in grad)  # dp = 2 groups


def test_optimizer_step_gap_before_the_parameter_all_gather():
    m = rt.MODELS["qwen2.5-14b"]
    h, L, V = m.hidden, m.layers, m.vocab
    tp, dp = 2, 4
    args = dict(
        train_gpus=8,
        gen_gpus=4,
        train=dict(tp=tp),
        gen=dict(tp=4),
        global_batch=8,
        response=dict(median=64, max=128),
        distributed_optimizer=True,
        algorithm="none",
    )
    D = L * layer_dense(m) + 2 * V * h + h
    for o in (30, 12, 0):
        trace = rt.generate_rl(m, optimizer_bytes_per_param=o, **args)
        ag = [r for r in trace.table.to_pylist() if r["kind"] == "all_gather"]
        assert len(ag) == tp
        expected = round(D / (tp * dp) * o / HBM * 1e12)
        assert all(abs(r["compute_ps"] - expected) <= 1 for r in ag)


def test_optimizer_step_gap_moe_shards_experts_over_expert_dp():
    m = rt.MODELS["qwen2-57b-a14b"]
    h, L, V = m.hidden, m.layers, m.vocab
    tp, ep, dp = 2, 4, 8
    trace = rt.generate_rl(
        m,
        train_gpus=16,
        gen_gpus=8,
        train=dict(tp=tp, ep=ep),
        gen=dict(tp=2, ep=8),
        global_batch=8,
        response=dict(median=64, max=128),
        distributed_optimizer=True,
        algorithm="none",
    )
    D, X = L * layer_dense(m) + 2 * V * h + h, L * layer_experts(m)
    per_rank = D / (tp * dp) + X / (ep * tp) / (dp // ep)
    ag = [r for r in trace.table.to_pylist() if r["kind"] == "all_gather"]
    assert abs(ag[0]["compute_ps"] - round(per_rank * 30 / HBM * 1e12)) <= 1


# -- ZeRO-2/3 and FSDP ----------------------------------------------------------------------------
@pytest.mark.parametrize("zero", [2, 3])
def test_zero_stages_shard_per_layer(zero):
    m = rt.MODELS["qwen2.5-14b"]
    h, L, V = m.hidden, m.layers, m.vocab
    dp, B, p, n, mbt = 4, 8, 64, 64, 128
    trace = rt.generate_rl(
        m,
        train_gpus=dp,
        gen_gpus=4,
        train=dict(dp=dp),
        gen=dict(tp=4),
        global_batch=B,
        prompt_len=p,
        response=dict(median=n, sigma=0, max=n),
        micro_batch_tokens=mbt,
        zero_stage=zero,
    )
    got = totals(trace)
    mb = cdiv(B * (p + n), dp * mbt)
    assert mb == 2
    Ld, R = layer_dense(m), 2 * V * h + h  # a layer; the embedding + output-layer unit
    units, unit_params = L + 1, L * Ld + R
    assert got[("train", "grad_sync", "reduce_scatter")] == [mb * units, mb * unit_params * 4]
    assert ("train", "grad_sync", "all_reduce") not in got
    if zero == 3:  # before every forward and backward of every unit; no all-gather after the step
        assert got[("train", "param_gather", "all_gather")] == [2 * mb * units, 2 * mb * unit_params * 2]
        # two forward-only passes (old and reference log-probs) gather every unit too
        assert got[("experience", "param_gather", "all_gather")] == [2 * mb * units, 2 * mb * unit_params * 2]
        assert ("train", "grad_sync", "all_gather") not in got
    else:
        assert got[("train", "grad_sync", "all_gather")] == [1, unit_params * 2]
        assert not any(k[1] == "param_gather" for k in got)
    assert trace.metadata["parameters"]["zero_stage"] == zero


def test_distributed_optimizer_is_zero_1():
    args = dict(train_gpus=8, gen_gpus=8, train=dict(tp=2), global_batch=8, response=dict(median=32, max=64))
    a = rt.generate_rl("qwen2.5-14b", distributed_optimizer=True, **args)
    b = rt.generate_rl("qwen2.5-14b", zero_stage=1, **args)
    assert a.table.select(["kind", "size_bytes", "compute_ps"]).equals(
        b.table.select(["kind", "size_bytes", "compute_ps"])
    )


# -- weight sync as frameworks do it ------------------------------------------------------------
def test_gather_broadcast_weight_sync():
    m = rt.MODELS["qwen2.5-14b"]
    h, L, V = m.hidden, m.layers, m.vocab
    tp, pp, dp, cap = 2, 2, 2, 1 << 30
    trace = rt.generate_rl(
        m,
        train_gpus=tp * pp * dp,
        gen_gpus=8,
        train=dict(tp=tp, pp=pp),
        gen=dict(tp=2),
        global_batch=8,
        response=dict(median=32, max=64),
        weight_sync="gather_broadcast",
        weight_bucket_bytes=cap,
    )
    got = totals(trace)
    d = [(L // pp) * layer_dense(m) + V * h, (L // pp) * layer_dense(m) + V * h + h]
    assert got[("weight_sync", "gather", "all_gather")] == [pp, sum(cdiv(x, tp) * tp * 2 for x in d)]
    buckets = sum(cdiv(x * 2, cap) for x in d)
    assert got[("weight_sync", "bucket_broadcast", "broadcast")] == [buckets, sum(x * 2 for x in d)]
    gen = set(range(8, 16))
    ws = [r for r in trace.table.to_pylist() if r["phase"] == "bucket_broadcast"]
    assert {r["ranks"][0] for r in ws} == {0, tp * dp}  # each stage's first rank
    assert all(set(r["ranks"][1:]) == gen for r in ws)  # every gen GPU gets every tensor


def test_gather_broadcast_unshards_fsdp_first():
    m = rt.MODELS["qwen2.5-14b"]
    P = m.layers * layer_dense(m) + 2 * m.vocab * m.hidden + m.hidden
    args = dict(train_gpus=8, gen_gpus=4, gen=dict(tp=4), global_batch=8, response=dict(median=32, max=64))
    trace = rt.generate_rl(m, weight_sync="gather_broadcast", zero_stage=3, **args)
    got = totals(trace)
    assert got[("weight_sync", "gather", "all_gather")] == [1, P * 2]  # one group of 8 ranks, tp = 1
    assert got[("weight_sync", "bucket_broadcast", "broadcast")][1] == P * 2


# -- memory fit ----------------------------------------------------------------------------------
def test_a_235b_model_on_one_gpu_is_named():
    args = dict(train_gpus=1, gen_gpus=1, global_batch=2, response=dict(median=8, max=16))
    # no layout given: generate_rl has to choose one, and none of 1 GPU fits
    with pytest.raises(rf.LayoutFitError, match=r"no training layout of 1 GPUs fits 80 GB .* would fit"):
        rt.generate_rl("qwen3-235b-a22b", **args)
    # a layout given explicitly that does not fit: memory_check says what happens
    args |= dict(train=dict(tp=1), gen=dict(tp=1))
    with pytest.warns(
        rt.MemoryFitWarning, match=r"qwen3-235b-a22b does not fit the train layout: .* > 80 GB"
    ):
        rt.generate_rl("qwen3-235b-a22b", **args)
    with pytest.raises(SpecError, match="does not fit the train layout"):
        rt.generate_rl("qwen3-235b-a22b", memory_check="error", **args)
    rt.generate_rl("qwen3-235b-a22b", memory_check="off", **args)  # no warning


def test_memory_per_gpu_recomputed():
    import warnings

    m = rt.MODELS["qwen2.5-14b"]
    tp, dp, gen_tp = 8, 2, 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", rt.MemoryFitWarning)
        trace = rt.generate_rl(
            m,
            train_gpus=16,
            gen_gpus=4,
            train=dict(tp=tp),
            gen=dict(tp=gen_tp),
            global_batch=4,
            response=dict(median=8, max=16),
            distributed_optimizer=True,
            memory_check="error",
        )
    P = m.layers * layer_dense(m) + 2 * m.vocab * m.hidden + m.hidden
    need = trace.metadata["parameters"]["memory_bytes_per_gpu"]
    assert need["train_states"] == int(P / tp * (2 + 4) + P / tp / dp * 12)
    # activations (pp = 1: one micro-batch of 512 + 16 tokens in flight): per layer and token
    # 4 h replicated, q + 2 kv + q + 3 f split over tp, 2 bytes each; FP32 + BF16 logits
    t, q, kv = 512 + 16, m.heads * m.head_dim, m.kv_heads * m.head_dim
    per_token = (4 * m.hidden + (2 * q + 2 * kv + 3 * m.ffn) / tp) * 2
    acts = m.layers * t * per_token + t * m.vocab / tp * (2 + 4)
    assert need["train_activations"] == int(acts)
    assert abs(need["train"] - (need["train_states"] + need["train_activations"])) <= 1
    assert need["gen_weights"] == int(P / gen_tp * 2)
    assert need["gen_kv"] == 2 * m.layers * (m.kv_heads // gen_tp) * m.head_dim * 2 * t
    assert need["train"] < 80e9 and need["gen"] < 80e9


# -- decode granularity ------------------------------------------------------------------------
def test_decode_step_granularity_totals():
    m = rt.MODELS["qwen2.5-14b"]
    h, L = m.hidden, m.layers
    tp, units, B, p, n = 2, 4, 8, 32, 20
    args = dict(
        train_gpus=8,
        gen_gpus=tp * units,
        train=dict(tp=2),
        gen=dict(tp=tp),
        global_batch=B,
        prompt_len=p,
        response=dict(median=n, sigma=0, max=64),
        algorithm="none",
    )
    step = rt.generate_rl(m, decode_granularity="step", **args)
    got = totals(step)
    n_u = B // units  # sequences per unit, all active for n steps
    # one all-reduce after attention and one after the MLP, per step, layer and unit
    assert got[("gen", "decode", "all_reduce")] == [units * n * L * 2, units * n * L * 2 * n_u * h * 2]
    assert got[("gen", "prefill", "all_reduce")] == [units * L * 2, units * L * 2 * p * n_u * h * 2]
    # the aggregation moves the same bytes in fewer ops, with the same compute
    agg = totals(rt.generate_rl(m, **args))
    for key in (("gen", "decode", "all_reduce"), ("gen", "prefill", "all_reduce")):
        assert agg[key][1] == got[key][1] and agg[key][0] < got[key][0]
    same = rt.generate_rl(m, decode_steps_per_op=1, decode_layers_per_op=1, **args)
    assert same.table.select(["size_bytes", "ranks", "deps", "compute_ps"]).equals(
        step.table.select(["size_bytes", "ranks", "deps", "compute_ps"])
    )
    prm = step.metadata["parameters"]
    assert (prm["decode_granularity"], prm["decode_steps_per_op"], prm["decode_layers_per_op"]) == (
        "step",
        1,
        1,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(decode_granularity="token"), "decode_granularity must be one of 'aggregated', 'step'"),
        (dict(decode_granularity="step", decode_steps_per_op=8), "contradicts decode_steps_per_op=8"),
    ],
)
def test_decode_granularity_errors(kwargs, message):
    with pytest.raises(SpecError, match=message):
        rt.generate_rl("qwen2.5-14b", train_gpus=8, gen_gpus=8, **kwargs)


# -- prefill/decode disaggregation -----------------------------------------------------------
def test_prefill_decode_disaggregated_kv_transfer():
    m = rt.MODELS["qwen2.5-14b"]
    h, L, kv, hd = m.hidden, m.layers, m.kv_heads, m.head_dim
    B, p, n = 8, 32, 20
    trace = rt.generate_rl(
        m,
        train_gpus=8,
        gen_gpus=8,
        train=dict(tp=2),
        gen=dict(tp=2),  # decode: ranks 8..11, two instances
        prefill=dict(tp=4, dp=1),  # prefill: ranks 12..15
        global_batch=B,
        prompt_len=p,
        response=dict(median=n, sigma=0, max=64),
    )
    got = totals(trace)
    assert got[("gen", "prefill", "all_reduce")] == [2, 2 * L * h * 2 * p * B]
    kv_bytes = p * B * 2 * L * kv * hd * 2  # K and V of every layer, every prompt token
    assert got[("gen", "kv_transfer", "send")] == [8, kv_bytes]
    tab = trace.table.to_pylist()
    pairs = {tuple(r["ranks"]) for r in tab if r["phase"] == "kv_transfer"}
    # prefill rank t holds heads 2t, 2t+1; decode rank t holds heads 4t..4t+3
    assert pairs == {(12, 8), (13, 8), (14, 9), (15, 9), (12, 10), (13, 10), (14, 11), (15, 11)}
    assert all(set(r["ranks"]) <= set(range(12, 16)) for r in tab if r["phase"] == "prefill")
    kv_ids = {r["op_id"] for r in tab if r["phase"] == "kv_transfer"}
    for unit in ((8, 9), (10, 11)):
        first = next(r for r in tab if r["phase"] == "decode" and tuple(r["ranks"]) == unit)
        into = {r["op_id"] for r in tab if r["op_id"] in kv_ids and r["ranks"][1] in unit}
        assert into <= set(first["deps"])
    # two-level weight sync: one copy to the decode pod and one to the prefill pool
    P = total_params(m)
    assert got[("weight_sync", "inter_pod", "broadcast")][1] == 2 * P * 2
    assert trace.metadata["parameters"]["prefill"] == {"tp": 4, "dp": 1}


def test_kv_heads_replicated_on_wide_decode_tp():
    tiny = rt.ModelConfig("tiny", layers=4, hidden=256, heads=8, kv_heads=2, ffn=512, vocab=1000)
    p, n, B = 16, 10, 4
    trace = rt.generate_rl(
        tiny,
        train_gpus=4,
        gen_gpus=5,
        gen=dict(tp=4),
        prefill=dict(tp=1),
        global_batch=B,
        prompt_len=p,
        response=dict(median=n, sigma=0, max=16),
        weight_sync="flat",
    )
    sends = [r for r in trace.table.to_pylist() if r["phase"] == "kv_transfer"]
    # the single prefill GPU (rank 8) holds both heads; decode rank t needs head t // 2
    assert sorted(tuple(r["ranks"]) for r in sends) == [(8, 4), (8, 5), (8, 6), (8, 7)]
    assert all(r["size_bytes"] == p * B * 2 * 4 * 32 * 2 for r in sends)
    flat = [r for r in trace.table.to_pylist() if r["phase"] == "broadcast" and r["stage"] == "weight_sync"]
    assert 8 in {x for r in flat for x in r["ranks"][1:]}  # the prefill GPU gets the weights


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(prefill=dict(tp=8)), r"prefill tp\*dp = 8 leaves no decode GPU of gen_gpus = 8"),
        (dict(prefill=dict(tp=2, nodes=1)), "prefill: unknown parallelism key .nodes."),
        (dict(prefill=dict(tp=3), gen_gpus=11, gen=dict(tp=2)), "prefill tp=3 and the model's 8 KV heads"),
        (dict(prefill=dict(tp=2), placement="colocated"), "needs placement='disaggregated'"),
    ],
)
def test_prefill_errors(kwargs, message):
    args = dict(train_gpus=8, gen_gpus=8) | kwargs
    with pytest.raises(SpecError, match=message):
        rt.generate_rl("qwen2.5-14b", **args)


# -- colocated placement -------------------------------------------------------------------------
def test_colocated_reshard_pp_and_tp():
    m = rt.MODELS["qwen2.5-14b"]
    h, L, V = m.hidden, m.layers, m.vocab
    tp, pp, dp, gen_tp, B, p, n = 4, 2, 2, 2, 16, 32, 20
    trace = rt.generate_rl(
        m,
        train_gpus=tp * pp * dp,
        gen_gpus=tp * pp * dp,
        train=dict(tp=tp, pp=pp),
        gen=dict(tp=gen_tp),
        global_batch=B,
        prompt_len=p,
        response=dict(median=n, sigma=0, max=64),
        placement="colocated",
    )
    assert trace.gpus == 16 and trace.metadata["parameters"]["weight_sync"] == "reshard"
    got = totals(trace)
    d = [(L // pp) * layer_dense(m) + V * h, (L // pp) * layer_dense(m) + V * h + h]
    shard = [cdiv(x, tp) for x in d]
    positions = tp * dp
    assert got[("weight_sync", "pp_broadcast", "broadcast")] == [pp * positions, positions * sum(shard) * 2]
    r = tp // gen_tp
    assert got[("weight_sync", "tp_gather", "all_gather")] == [16 // r, 16 // r * r * sum(shard) * 2]
    assert {k[1] for k in got if k[0] == "weight_sync"} == {"pp_broadcast", "tp_gather"}
    # gen runs on the train ranks; sample j goes from unit j % 8 (first rank 2u) to replica
    # j % 2 (first rank 4d): only unit 0's samples stay on their GPU
    assert all(max(r["ranks"]) < 16 for r in trace.table.to_pylist())
    sent = [j for j in range(B) if 2 * (j % 8) != 4 * (j % 2)]
    units = {j % 8 for j in sent}
    assert got[("response_stream", "stream", "send")] == [len(units), len(sent) * (4 * p + 8 * n + 4)]


def test_colocated_same_layout_moves_nothing():
    args = dict(train_gpus=8, gen_gpus=8, global_batch=8, response=dict(median=32, max=64), iterations=2)
    trace = rt.generate_rl("qwen2.5-14b", train=dict(tp=2), gen=dict(tp=2), placement="colocated", **args)
    stages = set(trace.table.column("stage").to_pylist())
    assert "weight_sync" not in stages and "response_stream" not in stages
    # the second iteration's gen waits for the first iteration's training on its ranks
    tab = trace.table.to_pylist()
    first_gen_1 = next(r for r in tab if r["stage"] == "gen" and r["iteration"] == 1)
    last_train_0 = max(r["op_id"] for r in tab if r["stage"] == "train" and r["iteration"] == 0)
    assert first_gen_1["op_id"] > last_train_0 and first_gen_1["deps"]
    assert all(tab[d]["stage"] == "train" for d in first_gen_1["deps"])


def test_colocated_fsdp_and_moe_reshard():
    m = rt.MODELS["qwen2.5-14b"]
    P = m.layers * layer_dense(m) + 2 * m.vocab * m.hidden + m.hidden
    args = dict(
        train_gpus=8, gen_gpus=8, global_batch=8, response=dict(median=32, max=64), memory_check="off"
    )
    fsdp = rt.generate_rl(m, gen=dict(tp=4), zero_stage=3, placement="colocated", **args)
    ws = {k: v for k, v in totals(fsdp).items() if k[0] == "weight_sync"}
    assert ws == {("weight_sync", "gather", "all_gather"): [1, P * 2]}  # one dp group of 8, gen tp finer
    moe = rt.MODELS["qwen2-57b-a14b"]
    X = moe.layers * layer_experts(moe)
    args |= dict(train_gpus=16, gen_gpus=16)
    tp, ep, gen_tp = 2, 4, 4
    t = rt.generate_rl(moe, train=dict(tp=tp, ep=ep), gen=dict(tp=gen_tp), placement="colocated", **args)
    r_x = ep * tp // gen_tp
    ws = {k: v for k, v in totals(t).items() if k[0] == "weight_sync"}
    assert ws == {
        ("weight_sync", "tp_gather", "all_gather"): [16 // r_x, 16 // r_x * r_x * cdiv(X, ep * tp) * 2]
    }
    # EP-mode gen with ep = ep * tp of the trainer: every rank already holds its experts
    t = rt.generate_rl(moe, train=dict(tp=tp, ep=ep), gen=dict(tp=2, ep=8), placement="colocated", **args)
    assert not any(k[0] == "weight_sync" for k in totals(t))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(placement="shared"), "placement must be one of 'disaggregated', 'colocated'"),
        (dict(placement="colocated", gen_gpus=4), "needs gen_gpus == train_gpus, got 4 and 8"),
        (dict(placement="colocated", mode="async"), "mode must be 'sync'"),
        (dict(placement="colocated", weight_sync="flat"), "weight_sync='flat' is a disaggregated scheme"),
        (dict(placement="colocated", pod_gpus=4), "leave gen_ranks and pod_gpus out"),
        (dict(weight_sync="reshard"), "weight_sync must be one of 'two_level', 'flat', 'gather_broadcast'"),
        (
            dict(placement="colocated", train_gpus=12, gen_gpus=12, train=dict(tp=2), gen=dict(tp=3)),
            "train tp=2 and gen tp=3 must divide one another",
        ),
        (
            dict(
                model="qwen2-57b-a14b",
                placement="colocated",
                train=dict(ep=8),
                gen=dict(afd=dict(attn=4, ffn=4)),
            ),
            "cannot host attention-FFN disaggregated instances",
        ),
    ],
)
def test_colocated_errors(kwargs, message):
    args = dict(train_gpus=8, gen_gpus=8) | kwargs
    with pytest.raises(SpecError, match=message):
        rt.generate_rl(args.pop("model", "qwen2.5-14b"), **args)


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
    args |= kwargs
    return rt.generate_rl(args.pop("model", "qwen2.5-14b"), **args)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(algorithm="ppo", reward_model=True),
        dict(grad_bucket_bytes=25 << 20),
        dict(grad_bucket_bytes=64 << 20, distributed_optimizer=True),
        dict(zero_stage=2),
        dict(zero_stage=3, train=dict(tp=1, dp=32)),
        dict(weight_sync="gather_broadcast", weight_bucket_bytes=256 << 20),
        dict(mode="async", iterations=2, algorithm="ppo", grad_bucket_bytes=64 << 20, optimizer_steps=2),
        dict(
            model=dataclasses.replace(rt.MODELS["qwen2.5-14b"], layers=4),
            decode_granularity="step",
            decode_steps_per_op=None,
            response=dict(median=24, max=64),
        ),
        dict(prefill=dict(tp=2, dp=4)),
        dict(
            model="qwen2-57b-a14b",
            train=dict(tp=2, ep=4),
            gen=dict(tp=2, ep=8),
            prefill=dict(tp=4, dp=2),
            weight_sync="gather_broadcast",
        ),
        dict(placement="colocated", gen=dict(tp=2)),
        dict(placement="colocated", train=dict(tp=1, dp=32), gen=dict(tp=4), zero_stage=3, iterations=2),
        dict(
            model="qwen2-57b-a14b",
            train=dict(tp=2, ep=4),
            gen=dict(tp=2, afd=dict(attn=4, ffn=4)),
            zero_stage=2,
            algorithm="ppo",
        ),
    ],
    ids=[
        "ppo_rm",
        "ddp_buckets",
        "distopt_buckets",
        "zero2",
        "fsdp",
        "gather_broadcast",
        "async",
        "decode_step",
        "pd",
        "pd_moe_ep",
        "colocated_pp_tp",
        "colocated_fsdp",
        "moe_afd_zero2",
    ],
)
def test_replay_on_fat_tree_64_conserves_bytes(kwargs):
    replay_conserves(rl64(**kwargs))
