"""Memory fit of the parallel layouts: what a GPU must hold against its memory.

A train GPU holds, on its pipeline stage, the weights, gradients and optimizer state of its
parameters (sharded as the ZeRO stage shards them) and the activations that the 1F1B
schedule keeps alive for the backward pass; a gen GPU holds its share of the weights and
the KV cache of at least one full-length sequence (prompt + longest response), the least an
inference engine needs to start (vLLM refuses a ``max_model_len`` its KV cache cannot
hold). Framework buffers, CUDA graphs, the NCCL workspace and fragmentation are not
counted, so a layout that fails this check cannot run, and one that passes may still not.

The functions take plain numbers (model, layout, byte widths) so that the layout search of
`autolayout` can evaluate candidates without building a trace.
"""

from __future__ import annotations

import math
import warnings

from ...errors import SpecError
from ..models import ModelConfig

__all__ = [
    "MemoryFitWarning",
    "RECOMPUTE",
    "check_memory",
    "train_state_bytes",
    "train_activation_bytes",
    "train_bytes",
    "gen_weight_bytes",
    "gen_kv_bytes",
    "activation_bytes_per_token",
    "ADAM_STATE_BYTES",
    "LOGIT_FP32_BYTES",
]

#: Optimizer state per parameter of Megatron-LM's mixed-precision Adam: FP32 main
#: parameter, first and second moment.
ADAM_STATE_BYTES = 12

#: Bytes per vocabulary logit kept by the last stage for the loss: Megatron-LM's
#: vocab-parallel cross entropy works on FP32 logits (``_VocabParallelCrossEntropy``).
LOGIT_FP32_BYTES = 4

#: How `generate_rl` reacts when a layout does not fit (its ``memory_check``).
MEMORY_CHECKS = ("warn", "error", "off")

#: Activation recomputation of the training backward (`generate_rl`'s ``recompute``):
#: ``"none"`` keeps every activation of the micro-batches in flight; ``"full"`` keeps only
#: each layer's input and re-runs the layer's forward (its compute and its TP all-reduces
#: and EP all-to-alls) in the backward, as Megatron-LM's ``--recompute-granularity full
#: --recompute-method uniform --recompute-num-layers 1`` does.
RECOMPUTE = ("none", "full")


class MemoryFitWarning(UserWarning):
    """A train or gen GPU would hold more than its memory."""


def _stage_params(m: ModelConfig, pp: int, s: int) -> tuple[int, int, int]:
    """(layers, dense, expert) parameter counts of pipeline stage s (as `TrainLayout`)."""
    base, extra = divmod(m.layers, pp)
    L = base + (1 if s < extra else 0)
    dense = L * m.layer_dense_params
    if s == 0:
        dense += m.embedding_params
    if s == pp - 1:
        dense += m.head_params
    return L, dense, L * m.layer_expert_params


def _stages(pp: int) -> tuple[int, ...]:
    """The stages that can be the worst: stage 0 has the most layers, the embedding and the
    most micro-batches in flight (it dominates every middle stage); the last stage has the
    output layer and its logits."""
    return (0,) if pp == 1 else (0, pp - 1)


def activation_bytes_per_token(m: ModelConfig, tp: int, act: int) -> float:
    """Activation bytes one layer keeps per token for its backward pass, per TP rank.

    Korthikanti et al. 2022 (table 2, "no sequence parallelism") counted for a GPT layer,
    adapted to RMSNorm, SwiGLU, grouped-query attention, FlashAttention (no s x s scores)
    and no dropout: replicated over TP, the inputs of the two norms and of the two blocks
    (4 h); split over TP, Q, K and V (q + 2 kv) and the attention output (q), and per
    MLP the SwiGLU inputs and the down projection's input (3 f). An MoE layer keeps, per
    routed copy of a token (top_k of them), its permuted input (h) and the expert's 3 f_e,
    plus the shared expert's 3 f_s and the router's FP32 logits (4 E bytes). Elements are
    ``act`` bytes.
    """
    rep = 4 * m.hidden
    split = m.q_dim + 2 * m.kv_dim + m.q_dim
    if m.is_moe:
        split += m.top_k * (m.hidden + 3 * m.expert_ffn) + 3 * m.shared_expert_ffn
        return (rep + split / tp) * act + 4.0 * m.experts
    split += 3 * m.ffn
    return (rep + split / tp) * act


def _stage_states(m, pp, s, tp, cp, dp, ep, zero, param, grad) -> float:
    _, dense, expert = _stage_params(m, pp, s)
    d, x = dense / tp, expert / (ep * tp)
    sharded = d / (dp * cp) + x / (cp * dp / ep)
    states = (sharded if zero >= 3 else d + x) * param
    states += (sharded if zero >= 2 else d + x) * grad
    states += (sharded if zero >= 1 else d + x) * ADAM_STATE_BYTES
    return states


def _stage_acts(m, pp, s, tp, cp, tokens, act, recompute="none") -> float:
    L, _, _ = _stage_params(m, pp, s)
    t = math.ceil(tokens / cp)
    in_flight = pp - s  # 1F1B: stage s runs pp - s forwards before its first backward
    if recompute == "full":
        # each layer's input (h per token, replicated over TP: no sequence parallelism), plus
        # the full activations of the one layer being recomputed and back-propagated
        b = in_flight * L * t * m.hidden * act + t * activation_bytes_per_token(m, tp, act)
    else:
        b = in_flight * L * t * activation_bytes_per_token(m, tp, act)
    if s == pp - 1:
        b += t * m.vocab / tp * (act + LOGIT_FP32_BYTES)
    return b


def train_state_bytes(m: ModelConfig, tl, zero: int, param: int, grad: int) -> float:
    """Largest per-GPU weights + gradients + optimizer state over the pipeline stages.

    ``tl`` is anything with ``tp, pp, cp, dp, ep`` (a `TrainLayout` or a candidate)."""
    return max(
        _stage_states(m, tl.pp, s, tl.tp, tl.cp, tl.dp, tl.ep, zero, param, grad) for s in _stages(tl.pp)
    )


def train_activation_bytes(m: ModelConfig, tl, tokens: int, act: int, recompute: str = "none") -> float:
    """Largest per-GPU activation memory over the stages: micro-batches of ``tokens``
    tokens (``tokens / cp`` per CP rank), stage s holding ``pp - s`` of them (1F1B, every
    micro-batch as long as the largest; fewer in flight when a replica has fewer
    micro-batches), the last stage also the output layer's logits. With ``recompute``
    ``"full"`` a micro-batch in flight keeps only each layer's input (``h`` per token), and
    one layer's full activations are live while it is recomputed and back-propagated."""
    return max(_stage_acts(m, tl.pp, s, tl.tp, tl.cp, tokens, act, recompute) for s in _stages(tl.pp))


def train_bytes(
    m: ModelConfig, tl, *, zero: int, param: int, grad: int, tokens: int, act: int, recompute: str = "none"
) -> tuple[float, float, float]:
    """(total, states, activations) of the worst stage: the stage with the largest sum."""
    best = (-1.0, 0.0, 0.0)
    for s in _stages(tl.pp):
        st = _stage_states(m, tl.pp, s, tl.tp, tl.cp, tl.dp, tl.ep, zero, param, grad)
        ac = _stage_acts(m, tl.pp, s, tl.tp, tl.cp, tokens, act, recompute)
        if st + ac > best[0]:
            best = (st + ac, st, ac)
    return best


def gen_weight_bytes(m: ModelConfig, gl, param: int) -> float:
    """Largest per-GPU weight share of a gen instance: dense parameters split over tp,
    routed experts over the instance's expert ranks (ep, or the FFN ranks under AFD)."""
    experts = m.layers * m.layer_expert_params
    dense = m.params - experts
    if gl.mode == "tp":
        return m.params / gl.tp * param
    if gl.mode == "ep":
        return (dense / gl.tp + experts / gl.ep) * param
    return max(dense / gl.tp, experts / gl.ffn) * param


def gen_kv_bytes(m: ModelConfig, tp: int, tokens: int, act: int) -> float:
    """KV cache of ``tokens`` context tokens on one attention rank of TP ``tp``: K and V of
    every layer for the rank's ``ceil(kv_heads / tp)`` KV heads (replicated when tp >
    kv_heads, as vLLM does). MLA: the latent and RoPE key of every layer, on every rank."""
    if m.is_mla:
        return float(m.kv_token_elems) * act * tokens
    return 2.0 * m.layers * math.ceil(m.kv_heads / tp) * m.head_dim * act * tokens


def memory_need(ctx) -> dict[str, float]:
    """Per-GPU bytes of a generation run: totals ``train`` and ``gen`` and their parts."""
    total, states, acts = train_bytes(
        ctx.m,
        ctx.tl,
        zero=ctx.zero,
        param=ctx.param,
        grad=ctx.grad,
        tokens=ctx.mbt,
        act=ctx.act,
        recompute=ctx.recompute,
    )
    m, gl = ctx.m, ctx.gl
    kv = gen_kv_bytes(m, gl.tp, ctx.seq_max, ctx.act)
    w = gen_weight_bytes(m, gl, ctx.param)
    if gl.mode == "afd":  # attention ranks: dense weights + KV; FFN ranks: experts only
        dense = (m.params - m.layers * m.layer_expert_params) / gl.tp * ctx.param
        if dense + kv < w:
            kv = 0.0
        else:
            w = dense
    return {
        "train": total,
        "train_states": states,
        "train_activations": acts,
        "gen": w + kv,
        "gen_weights": w,
        "gen_kv": kv,
    }


def _train_hint(ctx) -> str:
    hint = "tp/pp/cp/ep, a ZeRO stage or smaller micro_batch_tokens"
    return hint if ctx.recompute == "full" else hint + ", recompute='full'"


def check_memory(ctx, how: str) -> dict[str, float]:
    """Per-GPU bytes on each side (`memory_need`); warn (`MemoryFitWarning`) or raise
    (SpecError) when a side exceeds its pool's GPU memory (``ctx.train_hw`` for train,
    ``ctx.hw`` for gen), as ``how`` says."""
    hw = {"train": ctx.train_hw, "gen": ctx.hw}
    need = memory_need(ctx)
    if how == "off":
        return need
    what = {
        "train": (
            f"{need['train_states'] / 1e9:.1f} GB weights + gradients + optimizer state and "
            f"{need['train_activations'] / 1e9:.1f} GB activations"
        ),
        "gen": (
            f"{need['gen_weights'] / 1e9:.1f} GB weights and {need['gen_kv'] / 1e9:.1f} GB KV cache "
            f"of one {ctx.seq_max}-token sequence"
        ),
    }
    for side in ("train", "gen"):
        nbytes, cap = need[side], hw[side].hbm_capacity_bytes
        if nbytes > cap:
            msg = (
                f"{ctx.m.name} does not fit the {side} layout: {nbytes / 1e9:.1f} GB per GPU "
                f"({what[side]}) > {cap / 1e9:.0f} GB ({hw[side].name}); use more GPUs or more "
                f"{_train_hint(ctx) if side == 'train' else 'gen tp/ep'}"
                ", or leave the layout out for a fitting default"
            )
            if how == "error":
                raise SpecError(msg)
            warnings.warn(msg, MemoryFitWarning, stacklevel=3)
    return need
