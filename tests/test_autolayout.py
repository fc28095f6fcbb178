"""Default layouts of generate_rl (issue 23 item 2): the paper's where it states them, else the
first fitting layout of a stated preference order; nothing fitting is a named error.

The memory oracle here is written out independently of rfabric.traces.rl.memory: parameter
counts from the Hugging Face config numbers of each model, bytes per parameter and the
activation count of Korthikanti et al. 2022 adapted to SwiGLU/GQA/FlashAttention.
"""

from __future__ import annotations

import math
import warnings

import pytest

import rfabric as rf
import rfabric.traces as rt
from rfabric.traces.rl.autolayout import default_gen, default_train

CAP = 80e9
SEQ = 512 + 16384  # generate_rl's default prompt + response max = default micro_batch_tokens


def params(m):
    """(dense parameters per layer, expert parameters per layer, embedding, head) from the
    config numbers (independent of ModelConfig's properties)."""
    h, q, kv = m.hidden, m.heads * m.head_dim, m.kv_heads * m.head_dim
    attn = 2 * h * q + 2 * h * kv + (q + 2 * kv if m.qkv_bias else 0) + (2 * m.head_dim if m.qk_norm else 0)
    if m.experts:
        mlp = m.experts * h + (3 * h * m.shared_expert_ffn + h if m.shared_expert_ffn else 0)
        experts = m.experts * 3 * h * m.expert_ffn
    else:
        mlp, experts = 3 * h * m.ffn, 0
    return attn + 2 * h + mlp, experts, m.vocab * h, h + (0 if m.tie_embeddings else m.vocab * h)


def train_need(m, tp, pp, cp, dp, ep, zero, tokens=SEQ):
    """Per-GPU bytes of the worst pipeline stage: BF16 weights, FP32 gradients, 12-byte Adam
    state (sharded by ZeRO over the data-parallel group) and 1F1B activations."""
    ld, lx, emb, head = params(m)
    base, extra = divmod(m.layers, pp)
    h, q, kv, t = m.hidden, m.heads * m.head_dim, m.kv_heads * m.head_dim, math.ceil(tokens / cp)
    if m.experts:
        per_tok = 2 * (
            4 * h + (2 * q + 2 * kv + m.top_k * (h + 3 * m.expert_ffn) + 3 * m.shared_expert_ffn) / tp
        )
        per_tok += 4 * m.experts
    else:
        per_tok = 2 * (4 * h + (2 * q + 2 * kv + 3 * m.ffn) / tp)
    worst = 0.0
    for s in range(pp):
        L = base + (s < extra)
        dense = L * ld + (emb if s == 0 else 0) + (head if s == pp - 1 else 0)
        d, x = dense / tp, L * lx / (ep * tp)
        shard = d / (cp * dp) + x / (cp * dp / ep)
        states = (shard if zero >= 3 else d + x) * 2 + (shard if zero >= 2 else d + x) * 4
        states += (shard if zero >= 1 else d + x) * 12
        acts = (pp - s) * L * t * per_tok + (t * m.vocab / tp * 6 if s == pp - 1 else 0)
        worst = max(worst, states + acts)
    return worst


def gen_need(m, tp, ep, seq=SEQ):
    ld, lx, emb, head = params(m)
    dense, experts = m.layers * ld + emb + head, m.layers * lx
    w = (dense + experts) / tp if ep == 1 else dense / tp + experts / ep
    return 2 * w + 2 * m.layers * math.ceil(m.kv_heads / tp) * m.head_dim * 2 * seq


def test_oracle_parameter_counts_match_the_models():
    for m in rt.MODELS.values():
        if m.is_mla:  # latent attention and dense-first layers: tests/test_models_mla.py
            continue
        ld, lx, emb, head = params(m)
        assert m.layers * (ld + lx) + emb + head == m.params


# -- the paper's layouts --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, gpus, want",
    [
        # Appendix C: Qwen-72B TP=8, PP=2, CP=3, DP scaled
        ("qwen2.5-72b", 96, dict(tp=8, pp=2, cp=3, ep=1)),
        ("qwen2.5-72b", 480, dict(tp=8, pp=2, cp=3, ep=1)),
        ("qwen2.5-72b", 1536, dict(tp=8, pp=2, cp=3, ep=1)),
        # Appendix C: Qwen2-57B-A14B TP=4, EP=16, DP scaled
        ("qwen2-57b-a14b", 256, dict(tp=4, pp=1, cp=1, ep=16)),
        ("qwen2-57b-a14b", 1024, dict(tp=4, pp=1, cp=1, ep=16)),
        # §2: Qwen2.5-14B on a 32-GPU train cluster with PP=2, DP=2, TP=8
        ("qwen2.5-14b", 32, dict(tp=8, pp=2, cp=1, ep=1)),
    ],
)
def test_paper_models_get_the_paper_train_layout(name, gpus, want):
    m = rt.MODELS[name]
    c, source = default_train(m, gpus, zero=None, cap=CAP, param=2, grad=4, tokens=SEQ, act=2)
    assert source == "paper"
    assert dict(tp=c.tp, pp=c.pp, cp=c.cp, ep=c.ep) == want
    assert c.tp * c.pp * c.cp * c.dp == gpus
    assert train_need(m, c.tp, c.pp, c.cp, c.dp, c.ep, c.zero) <= CAP


@pytest.mark.parametrize(
    "name, gpus, tp", [("qwen2.5-14b", 40, 8), ("qwen3-235b-a22b", 1024, 8), ("qwen3-235b-a22b", 1400, 8)]
)
def test_paper_gen_layouts(name, gpus, tp):
    # §2: vLLM TP=8, DP=5 on 40 GPUs; §7.4: Qwen3-235B-A22B in "175 TP=8 instances"
    m = rt.MODELS[name]
    c, source = default_gen(m, gpus, cap=CAP, param=2, act=2, seq=SEQ)
    assert (source, c.tp, c.ep, c.dp) == ("paper", tp, 1, gpus // tp)
    assert gen_need(m, c.tp, c.ep) <= CAP


# -- the search: fits, and is minimal in its stated order -----------------------------------------
def all_train_layouts(m, gpus, zeros):
    for tp in (1, 2, 4, 8):
        if m.heads % tp or m.kv_heads % tp:
            continue
        for cp in range(1, 9):
            for pp in range(1, m.layers + 1):
                if gpus % (tp * pp * cp):
                    continue
                dp = gpus // (tp * pp * cp)
                for ep in range(1, max(m.experts, 1) + 1):
                    if (m.experts and m.experts % ep) or (cp * dp) % ep or (not m.experts and ep > 1):
                        continue
                    for z in zeros:
                        yield (tp * pp * cp, pp, cp, ep, z), (tp, pp, cp, dp, ep, z)


@pytest.mark.parametrize(
    "name, gpus",
    [
        ("qwen2.5-32b", 48),
        ("qwen2.5-32b", 64),
        ("qwen2.5-72b", 64),  # not a multiple of 48: Table 3's layout cannot be used
        ("qwen2-57b-a14b", 64),  # Table 3's layout does not fit 64 GPUs (expert-DP of 1)
        ("qwen3-235b-a22b", 1024),  # the 2,048-GPU setup of §7.4, half of it training
    ],
)
def test_search_result_fits_and_is_minimal(name, gpus):
    m = rt.MODELS[name]
    c, source = default_train(m, gpus, zero=None, cap=CAP, param=2, grad=4, tokens=SEQ, act=2)
    assert source == "search"
    got = (c.tp, c.pp, c.cp, c.dp, c.ep, c.zero)
    assert train_need(m, *got) <= CAP
    key = (c.tp * c.pp * c.cp, c.pp, c.cp, c.ep, c.zero)
    # no layout earlier in the stated order fits (checked with the oracle, exhaustively)
    for k, lay in all_train_layouts(m, gpus, (0, 1)):
        if k < key:
            assert train_need(m, *lay) > CAP, (lay, got)


def test_search_gen_is_the_smallest_fitting_instance():
    for name in ("qwen2.5-32b", "qwen2.5-72b", "qwen2-57b-a14b"):
        m = rt.MODELS[name]
        c, source = default_gen(m, 64, cap=CAP, param=2, act=2, seq=SEQ)
        assert source == "search" and gen_need(m, c.tp, c.ep) <= CAP
        size = max(c.tp, c.ep)
        for tp in (1, 2, 4, 8):
            if tp < size and m.heads % tp == 0:
                assert gen_need(m, tp, 1) > CAP


def test_user_model_shapes_are_searched():
    cut = rt.ModelConfig("cut", layers=2, hidden=5120, heads=40, kv_heads=8, ffn=13824, vocab=152064)
    c, source = default_train(cut, 8, zero=None, cap=CAP, param=2, grad=4, tokens=SEQ, act=2)
    assert source == "search" and (c.tp, c.pp, c.cp, c.dp) == (1, 1, 1, 8)


# -- generate_rl -----------------------------------------------------------------------------------
def test_qwen3_235b_on_2048_gpus_fits_by_default():
    with warnings.catch_warnings():
        warnings.simplefilter("error", rt.MemoryFitWarning)
        trace = rt.generate_rl(
            "qwen3-235b-a22b",
            train_gpus=1024,
            gen_gpus=1024,
            global_batch=64,
            response=dict(median=16, max=16384),
            decode_steps_per_op=4096,
            memory_check="error",
        )
    p = trace.metadata["parameters"]
    assert p["layout_source"] == {"train": "search", "gen": "paper"}
    assert p["memory_bytes_per_gpu"]["train"] <= CAP and p["memory_bytes_per_gpu"]["gen"] <= CAP
    t = p["train"]
    assert train_need(rt.MODELS["qwen3-235b-a22b"], t["tp"], t["pp"], t["cp"], t["dp"], t["ep"], 1) <= CAP
    assert p["zero_stage"] == 1 and p["distributed_optimizer"]


def test_nothing_fits_is_a_named_error_saying_what_would():
    with pytest.raises(rf.LayoutFitError, match=r"no training layout of 48 GPUs .* 96 train GPUs would fit"):
        rt.generate_rl("qwen2.5-72b", train_gpus=48, gen_gpus=8)
    with pytest.raises(rf.LayoutFitError, match=r"no generation instance of 2 GPUs .* instances of 8 GPUs"):
        rt.generate_rl("qwen3-235b-a22b", train_gpus=1024, gen_gpus=2, train=dict(tp=4, pp=8, ep=32))
    assert issubclass(rf.LayoutFitError, rf.SpecError)


def test_given_layouts_are_kept_and_warned_about():
    args = dict(train_gpus=8, gen_gpus=8, global_batch=8, response=dict(median=32, max=64))
    with pytest.warns(rt.MemoryFitWarning, match="does not fit the train layout"):
        t = rt.generate_rl("qwen2.5-72b", train=dict(tp=8), gen=dict(tp=8), **args)
    assert t.metadata["parameters"]["train"]["tp"] == 8
    assert t.metadata["parameters"]["layout_source"] == {"train": "given", "gen": "given"}


def test_gen_default_holds_the_batch_kv_cache():
    # 512 responses of 512 + 2048 tokens on 40 gen GPUs: a TP2 unit would hold 26 of them
    # (10.9 GB of KV cache next to 72.7 GB of weights), a TP4 unit 52 at half the weights
    m, typical = rt.MODELS["qwen2.5-72b"], 512 + 2048
    c, source = default_gen(m, 40, cap=CAP, param=2, act=2, seq=SEQ, batch=512, typical=typical)
    assert (source, c.tp, c.dp) == ("search", 4, 10)
    assert gen_need(m, 2, 1, seq=math.ceil(512 / 20) * typical) > CAP
    assert gen_need(m, 4, 1, seq=math.ceil(512 / 10) * typical) <= CAP
    # one response at a time: TP2 holds the weights and one longest sequence
    c, _ = default_gen(m, 40, cap=CAP, param=2, act=2, seq=SEQ, batch=1, typical=typical)
    assert c.tp == 2
