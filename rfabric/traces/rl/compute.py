"""The roofline compute model of the RL trace generator: compute gaps between ops.

Training: FLOPs / (peak x train_mfu), on the train pool's GPU (``train_hw``); prefill and
decode on the gen pool's (``hw``): heterogeneous pools (H800 training, H20 generation) use two
`Hardware`.
Multi-head latent attention (`ModelConfig.is_mla`): prefill and training use the
non-absorbed form (per-head keys of ``qk_nope + qk_rope`` and values of ``v_head_dim``),
decode the absorbed one (every head attends over the cached latent and RoPE key, which are
read once per rank: the latent is not split over TP). An MoE model's `dense_layers` are
weighed in by their share of the layers (every layer of a trace is alike). Prefill and decode: the larger of weights and KV
cache read / (HBM x hbm_efficiency) and FLOPs / (peak x gen_mfu), plus, once per decode
step, the engine's fixed ``decode_step_overhead_s``. Times are float seconds
per rank (per step and layer for decode); the stage emitters turn them into compute_ps via
`OpBuilder.compute`. The formulas are stated in `generate_rl`'s Notes. Knows nothing about
ops or groups.
"""

from __future__ import annotations

import numpy as np

from ..models import Hardware, ModelConfig
from .layout import GenLayout, TrainLayout

__all__ = ["Roofline"]


class Roofline:
    """Compute times of one model under the given train and gen layouts: generation on
    ``hw``, training on ``train_hw`` (default ``hw``)."""

    def __init__(
        self,
        model: ModelConfig,
        tl: TrainLayout,
        gl: GenLayout,
        hw: Hardware,
        *,
        prompt: int,
        act: int,
        param: int,
        train_hw: Hardware | None = None,
    ):
        self.m, self.tl, self.gl, self.hw = model, tl, gl, hw
        self.train_hw = hw if train_hw is None else train_hw
        self.prompt, self.act, self.param = prompt, act, param

    def flops_s(self, flops, mfu, hw: Hardware | None = None):
        """Seconds of ``flops`` at ``mfu`` of ``hw``'s peak (default the gen GPU)."""
        hw = self.hw if hw is None else hw
        return np.asarray(flops, dtype=np.float64) / (hw.peak_flops * mfu)

    def mem_s(self, nbytes, hw: Hardware | None = None):
        """Seconds to stream ``nbytes`` from ``hw``'s HBM (default the gen GPU)."""
        hw = self.hw if hw is None else hw
        return np.asarray(nbytes, dtype=np.float64) / (hw.hbm_bytes_per_s * hw.hbm_efficiency)

    # -- generation ------------------------------------------------------------------------
    def touched(self, tokens, experts_here):
        """Expected experts (of ``experts_here``) touched by ``tokens`` routed tokens."""
        m = self.m
        return experts_here * (1.0 - np.power(1.0 - m.top_k / m.experts, tokens))

    def decode_times(self, A_u, A_i):
        """Per-step, per-layer compute (s): attention (unit), FFN (unit), experts (instance), head."""
        m, gl, p, a, w = self.m, self.gl, self.prompt, self.act, self.param
        tp, mfu = gl.tp, self.hw.gen_mfu
        T = A_u.shape[1]
        bu = A_u.astype(np.float64)
        ctx = bu * (p + np.arange(T, dtype=np.float64))[None, :]  # context tokens read
        attn_w = m.attn_params + (m.router_params * m.moe_fraction if gl.mode != "tp" else 0)
        if m.is_mla:  # absorbed MLA: every head attends over the shared latent + RoPE key
            t_attn = np.maximum(
                self.mem_s(attn_w * w / tp + ctx * m.kv_head_elems * a),
                self.flops_s(
                    2 * bu * attn_w / tp + 2 * ctx * m.heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim) / tp,
                    mfu,
                ),
            )
        else:
            kv_split = min(tp, m.kv_heads)
            t_attn = np.maximum(
                self.mem_s(attn_w * w / tp + ctx * 2 * m.kv_dim * a / kv_split),
                self.flops_s(2 * bu * attn_w / tp + 4 * ctx * m.q_dim / tp, mfu),
            )
        head = m.vocab * m.hidden
        t_head = np.maximum(self.mem_s(head * w / tp), self.flops_s(2 * bu * head / tp, mfu))
        idle = bu == 0
        t_exp = None
        if gl.mode == "tp":
            if m.is_moe:
                nbytes = (
                    (self.touched(bu, m.experts) * m.expert_params + m.shared_params + m.router_params)
                    * w
                    / tp
                )
                flops = 2 * bu * (m.top_k * m.expert_params + m.shared_params + m.router_params) / tp
            else:
                nbytes = np.full_like(bu, m.dense_mlp_params * w / tp)
                flops = 2 * bu * m.dense_mlp_params / tp
            t_ffn = np.maximum(self.mem_s(nbytes), self.flops_s(flops, mfu))
            if m.dense_layers:
                t_ffn = m.moe_fraction * t_ffn + (1 - m.moe_fraction) * self._dense_mlp_s(bu, tp)
        else:
            t_ffn = np.zeros_like(bu)
            if m.shared_params:
                t_ffn = np.maximum(
                    self.mem_s(np.full_like(bu, m.shared_params * w / tp)),
                    self.flops_s(2 * bu * m.shared_params / tp, mfu),
                )
            bi = A_i.astype(np.float64)
            if gl.mode == "ep":
                ranks, shared_here = gl.ep, 0
            else:
                ranks, shared_here = gl.ffn, m.shared_params
                t_ffn = np.zeros_like(bu)  # AFD: the shared expert runs on the FFN ranks
            per = m.experts / ranks
            nbytes = (self.touched(bi, per) * m.expert_params + shared_here / ranks) * w
            flops = 2 * bi * (m.top_k * m.expert_params + shared_here) / ranks
            t_exp = np.maximum(self.mem_s(nbytes), self.flops_s(flops, mfu))
            t_exp[bi == 0] = 0
            if m.dense_layers:  # the dense layers' MLP runs on the attention ranks
                t_ffn = m.moe_fraction * t_ffn + (1 - m.moe_fraction) * self._dense_mlp_s(bu, tp)
                t_exp = m.moe_fraction * t_exp
        t_head = t_head + self.hw.decode_step_overhead_s  # once per step of a unit
        for arr in (t_attn, t_ffn, t_head):
            arr[idle] = 0
        return t_attn, t_ffn, t_exp, t_head

    def _dense_mlp_s(self, tokens, tp):
        """One dense layer's MLP (``3 h ffn``, the `dense_layers` of an MoE model) for
        ``tokens`` tokens, split over ``tp`` ranks."""
        m, w = self.m, self.param
        n = 3 * m.hidden * m.ffn
        return np.maximum(
            self.mem_s(np.full_like(tokens, n * w / tp)), self.flops_s(2 * tokens * n / tp, self.hw.gen_mfu)
        )

    def decode_step_s(self, A_u, A_i):
        """Compute time (s) of each decode step of each unit, as the generator spends it:
        ``layers x (attention + FFN + the instance's expert time) + output layer``
        (communication is the fabric's; none is included)."""
        t_attn, t_ffn, t_exp, t_head = self.decode_times(A_u, A_i)
        t = self.m.layers * (t_attn + t_ffn) + t_head
        if t_exp is not None:
            per_unit = np.repeat(t_exp, self.gl.units_per_instance, axis=0)
            t = t + self.m.layers * per_unit
        return t

    def prefill_s(self, n_u, n_i):
        """Compute time (s) of each unit's prefill of ``n_u`` prompts (as `decode_step_s`)."""
        t_attn, t_ffn, t_exp, t_head = self.prefill_times(n_u, n_i)
        t = self.m.layers * (t_attn + t_ffn) + t_head
        if t_exp is not None:
            t = t + self.m.layers * np.repeat(t_exp, self.gl.units_per_instance, axis=0)
        return t

    def prefill_times(self, n_u, n_i):
        """Per-layer prefill compute (s) per unit/instance, plus the output layer per unit."""
        m, gl, p, w = self.m, self.gl, self.prompt, self.param
        tp, mfu = gl.tp, self.hw.gen_mfu
        nu = n_u.astype(np.float64)
        tok = p * nu
        attn_w = m.attn_params + (m.router_params * m.moe_fraction if gl.mode != "tp" else 0)
        if m.is_mla:  # non-absorbed MLA: causal attention with per-head K (nope + rope) and V
            core = p * p * nu * m.heads * (m.head_dim + m.v_head_dim) / tp
        else:
            core = 2 * p * p * nu * m.q_dim / tp
        t_attn = np.maximum(
            self.mem_s(np.full_like(nu, attn_w * w / tp)),
            self.flops_s(2 * tok * attn_w / tp + core, mfu),
        )
        head = m.vocab * m.hidden
        t_head = np.maximum(
            self.mem_s(np.full_like(nu, head * w / tp)), self.flops_s(2 * nu * head / tp, mfu)
        )
        t_exp = None
        if gl.mode == "tp":
            if m.is_moe:
                nbytes = (
                    self.touched(tok, m.experts) * m.expert_params + m.shared_params + m.router_params
                ) * w
                flops = 2 * tok * (m.top_k * m.expert_params + m.shared_params + m.router_params)
            else:
                nbytes = np.full_like(tok, m.dense_mlp_params * w)
                flops = 2 * tok * m.dense_mlp_params
            t_ffn = np.maximum(self.mem_s(nbytes / tp), self.flops_s(flops / tp, mfu))
            if m.dense_layers:
                t_ffn = m.moe_fraction * t_ffn + (1 - m.moe_fraction) * self._dense_mlp_s(tok, tp)
        else:
            t_ffn = np.zeros_like(tok)
            if gl.mode == "ep" and m.shared_params:
                t_ffn = np.maximum(
                    self.mem_s(np.full_like(tok, m.shared_params * w / tp)),
                    self.flops_s(2 * tok * m.shared_params / tp, mfu),
                )
            ranks, shared_here = (gl.ep, 0) if gl.mode == "ep" else (gl.ffn, m.shared_params)
            ti = p * n_i.astype(np.float64)
            nbytes = (self.touched(ti, m.experts / ranks) * m.expert_params + shared_here / ranks) * w
            t_exp = np.maximum(
                self.mem_s(nbytes),
                self.flops_s(2 * ti * (m.top_k * m.expert_params + shared_here) / ranks, mfu),
            )
            if m.dense_layers:
                t_ffn = m.moe_fraction * t_ffn + (1 - m.moe_fraction) * self._dense_mlp_s(tok, tp)
                t_exp = m.moe_fraction * t_exp
        for arr in (t_attn, t_ffn, t_head):
            arr[nu == 0] = 0
        if t_exp is not None:
            t_exp[n_i == 0] = 0
        return t_attn, t_ffn, t_exp, t_head

    # -- training --------------------------------------------------------------------------
    def optimizer_s(self, params: float, bytes_per_param: int) -> float:
        """Optimizer step of ``params`` parameters on one train rank: HBM traffic-bound."""
        return float(self.mem_s(params * bytes_per_param, self.train_hw))

    def train_flops(self, t: int, s_eff: float) -> dict[str, float]:
        """Forward compute seconds of one layer (and the output layer, ``head``) per rank
        for ``t`` tokens; backward is twice forward."""
        mfu = self.train_hw.train_mfu
        return {
            key: float(self.flops_s(v, mfu, self.train_hw))
            for key, v in self.train_layer_flops(t, s_eff).items()
        }

    def train_layer_flops(self, t: int, s_eff: float) -> dict[str, float]:
        """Forward FLOPs of one layer (and the output layer, ``head``) per rank for ``t``
        tokens of mean causal context ``s_eff``."""
        m, tp = self.m, self.tl.tp
        gate = m.hidden if m.shared_params and m.shared_expert_gate else 0
        f = {
            "qkv": 2.0 * t * m.hidden * (m.q_dim + 2 * m.kv_dim) / tp,
            "core": 2.0 * t * s_eff * m.q_dim / tp,
            "o": 2.0 * t * m.q_dim * m.hidden / tp,
            "mlp": 2.0 * t * m.dense_mlp_params / tp,
            "experts": 2.0 * t * m.top_k * m.expert_params / tp,
            "shared": 2.0 * t * (m.shared_params - gate) / tp,
            "router": 2.0 * t * m.router_params / tp,
            "head": 2.0 * t * m.hidden * m.vocab / tp,
        }
        if m.is_mla:  # non-absorbed: projections (all but o) once per token; K nope + rope, V
            o = m.attn_out_dim * m.hidden
            f["qkv"] = 2.0 * t * (m.attn_params - o) / tp
            f["core"] = t * s_eff * m.heads * (m.head_dim + m.v_head_dim) / tp
            f["o"] = 2.0 * t * o / tp
        if m.dense_layers:  # mean layer: the MoE parts weighted by their share of the layers
            for k in ("experts", "shared", "router"):
                f[k] *= m.moe_fraction
        return f
