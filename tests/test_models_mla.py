"""Multi-head latent attention (MLA), dense-first MoE layers and the DeepSeek-V3 entry of
`MODELS`, against hand-computed oracles from the config numbers."""

import numpy as np
import pytest

import rfabric as rf
import rfabric.traces as rt
from rfabric.traces.models import H800
from rfabric.traces.rl.compute import Roofline
from rfabric.traces.rl.layout import GenLayout, TrainLayout
from rfabric.traces.rl.memory import gen_kv_bytes

DSV3 = rt.MODELS["deepseek-v3"]
# config.json of deepseek-ai/DeepSeek-V3
H, L, DENSE, E, K, FE, F, V = 7168, 61, 3, 256, 8, 2048, 18432, 129280
HEADS, QR, KR, ROPE, NOPE, VD = 128, 1536, 512, 64, 128, 128


def _attn():
    q = H * QR + QR + QR * HEADS * (NOPE + ROPE)  # W_DQ, q norm, W_UQ
    kv = H * (KR + ROPE) + KR + KR * HEADS * (NOPE + VD)  # W_DKV (+ RoPE key), kv norm, W_UK, W_UV
    return q + kv + HEADS * VD * H  # + o


def _total(experts):
    per_layer = _attn() + 2 * H
    moe = experts * 3 * H * FE + 3 * H * FE + E * H  # routed, shared (no gate), router
    return L * per_layer + DENSE * 3 * H * F + (L - DENSE) * moe + 2 * V * H + H


def test_deepseek_v3_parameter_counts():
    assert DSV3.attn_params == _attn() == 187_107_328
    assert DSV3.params == _total(E)
    assert DSV3.active_params == _total(K)
    # published: 671B total, 37B activated (DeepSeek-V3 technical report, without MTP)
    assert abs(DSV3.params / 671e9 - 1) < 0.01
    assert abs(DSV3.active_params / 37e9 - 1) < 0.02  # 37.55e9: "37B" is rounded
    # the mean layer the generator builds reproduces the total
    mean = L * (DSV3.layer_dense_params + DSV3.layer_expert_params) + DSV3.embedding_params + DSV3.head_params
    assert abs(mean - DSV3.params) <= 2 * L


def test_deepseek_v3_kv_cache_per_token():
    assert DSV3.kv_token_elems == L * (KR + ROPE) == 61 * 576
    for tp in (1, 2, 8):  # the latent is not split over TP
        assert gen_kv_bytes(DSV3, tp, 1000, 2) == 61 * 576 * 2 * 1000
    # GQA unchanged: 2 L kv_heads d per token
    q14 = rt.MODELS["qwen2.5-14b"]
    assert gen_kv_bytes(q14, 1, 1, 2) == 2 * 48 * 8 * 128 * 2


def test_existing_models_unchanged():
    # totals as documented before MLA existed (models.py)
    want = {
        "qwen2.5-14b": 14_770_033_664,
        "qwen2.5-32b": 32_763_876_352,
        "qwen2.5-72b": 72_706_203_648,
        "qwen2-57b-a14b": 57_408_658_944,
        "qwen3-235b-a22b": 235_093_634_560,
    }
    for name, n in want.items():
        m = rt.MODELS[name]
        assert m.params == n and not m.is_mla and m.dense_layers == 0
        assert m.kv_token_elems == 2 * m.layers * m.kv_heads * m.head_dim


def _roof(m, tp=1, prompt=1, param=2):
    tl = TrainLayout(m, tp, {"tp": tp})
    gl = GenLayout(m, tp, {"tp": tp}, offset=0)
    return Roofline(m, tl, gl, H800, prompt=prompt, act=2, param=param)


def test_mla_decode_absorbed_roofline():
    # a bandwidth-bound step (batch 1): weights + the latent cache of the context per layer
    ctx = 4096
    r = _roof(DSV3, tp=8, prompt=ctx)
    A = np.ones((1, 1), dtype=np.int64)
    t_attn, _, _, _ = r.decode_times(A, A)
    want = (_attn() * 2 / 8 + ctx * (KR + ROPE) * 2) / H800.hbm_bytes_per_s
    assert t_attn[0, 0] == pytest.approx(want, rel=1e-12)
    # compute-bound (large batch): 2 FLOPs per weight and token, 2 heads (2 r + r_rope) per context token
    B = 4096
    A = np.full((1, 1), B, dtype=np.int64)
    t_attn, _, _, _ = r.decode_times(A, A)
    flops = 2 * B * _attn() / 8 + 2 * B * ctx * HEADS * (2 * KR + ROPE) / 8
    byts = _attn() * 2 / 8 + B * ctx * (KR + ROPE) * 2
    want = max(flops / (H800.peak_flops * H800.gen_mfu), byts / H800.hbm_bytes_per_s)
    assert t_attn[0, 0] == pytest.approx(want, rel=1e-12)


def test_mla_prefill_and_training_flops():
    r = _roof(DSV3, tp=1)
    f = r.train_layer_flops(1, 1000.0)
    o = HEADS * VD * H
    assert f["qkv"] + f["o"] == pytest.approx(2 * _attn())
    assert f["o"] == 2 * o
    # causal: mean context s_eff / 2, QK over nope + rope, AV over v
    assert f["core"] == pytest.approx(2 * (1000 / 2) * HEADS * (NOPE + ROPE + VD))
    # MoE parts weighted by the 58 / 61 MoE layers; the dense layers' MLP by 3 / 61
    assert f["experts"] == pytest.approx(2 * K * 3 * H * FE * 58 / 61)
    assert f["mlp"] == pytest.approx(2 * 3 * H * F * 3 / 61, rel=1e-7)  # rounded mean layer
    # per token, the forward's weight FLOPs are 2 x the active weights without the input
    # embedding and the layer/final norms (the q and latent norms, 2e-6 of the total, ride along)
    per_tok = L * sum(v for k, v in f.items() if k not in ("head", "core")) + f["head"]
    matmul = _total(K) - V * H - L * 2 * H - H
    assert per_tok == pytest.approx(2 * matmul, rel=1e-6)


def test_mla_and_dense_layer_config_errors():
    base = dict(layers=4, hidden=256, heads=4, kv_heads=4, ffn=512, vocab=1000)
    mla = dict(kv_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32)
    with pytest.raises(rf.SpecError, match="needs qk_rope_head_dim"):
        rt.ModelConfig("x", **base, kv_lora_rank=64)
    with pytest.raises(rf.SpecError, match="need kv_lora_rank"):
        rt.ModelConfig("x", **base, q_lora_rank=64)
    with pytest.raises(rf.SpecError, match="kv_heads must equal heads"):
        rt.ModelConfig("x", **{**base, "kv_heads": 2}, **mla)
    with pytest.raises(rf.SpecError, match="head_dim is"):
        rt.ModelConfig("x", **base, head_dim=64, **mla)
    with pytest.raises(rf.SpecError, match="dense_layers needs experts"):
        rt.ModelConfig("x", **base, dense_layers=1)
    with pytest.raises(rf.SpecError, match="below layers"):
        rt.ModelConfig("x", **base, experts=4, top_k=2, expert_ffn=64, dense_layers=4)
    m = rt.ModelConfig("x", **base, **mla)
    assert m.head_dim == 48 and m.kv_cache_heads == 1 and m.kv_head_elems == 80


def test_mla_kv_transfer_and_trace():
    """Disaggregated prefill sends the latent cache: L (r + r_rope) a per prompt token to
    every decode rank (the latent is replicated over TP)."""
    tiny = rt.ModelConfig(
        "tiny-mla",
        layers=4,
        hidden=256,
        heads=4,
        kv_heads=4,
        ffn=512,
        vocab=1000,
        experts=8,
        top_k=2,
        expert_ffn=64,
        shared_expert_ffn=64,
        shared_expert_gate=False,
        dense_layers=1,
        kv_lora_rank=64,
        q_lora_rank=96,
        qk_rope_head_dim=16,
        qk_nope_head_dim=32,
        v_head_dim=32,
    )
    B, p = 4, 32
    tr = rt.generate_rl(
        tiny,
        train_gpus=4,
        gen_gpus=4,
        train=dict(tp=2),
        gen=dict(tp=2),
        prefill=dict(tp=2, dp=1),
        global_batch=B,
        prompt_len=p,
        response=dict(median=8, sigma=0, max=8),
    )
    kv = [r for r in tr.table.to_pylist() if r["phase"] == "kv_transfer"]
    assert sum(r["size_bytes"] for r in kv) == B * p * 4 * (64 + 16) * 2 * 2  # two decode ranks per unit
    res = rf.simulate(rf.topologies.RailOptimized(8, link="200Gbps"), tr, backend="flow")
    ends = {r["stage"]: r["end_ps"] for r in res.stages.to_pylist()}
    assert 0 < ends["gen"] < ends["train"]


def test_kimi_k2_parameter_counts():
    # config.json of moonshotai/Kimi-K2-Instruct: DeepSeek-V3's shape with 64 heads, 384
    # routed experts, one dense layer and a 163,840-token vocabulary
    kimi = rt.MODELS["kimi-k2"]
    heads, dense, experts, vocab = 64, 1, 384, 163840
    q = H * QR + QR + QR * heads * (NOPE + ROPE)
    kv = H * (KR + ROPE) + KR + KR * heads * (NOPE + VD)
    attn = q + kv + heads * VD * H

    def total(e):
        moe = e * 3 * H * FE + 3 * H * FE + experts * H
        return L * (attn + 2 * H) + dense * 3 * H * F + (L - dense) * moe + 2 * vocab * H + H

    assert kimi.params == total(experts)
    assert kimi.active_params == total(K)
    # published: "1T total, 32B activated" (its model card); 1.026e12 and 32.86e9 here
    assert abs(kimi.params / 1e12 - 1) < 0.03
    assert abs(kimi.active_params / 32e9 - 1) < 0.03
