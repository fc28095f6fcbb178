"""Model architectures and accelerator parameters for the RL trace generator.

`ModelConfig` holds the architecture numbers that set message sizes and compute: layers,
hidden size, attention heads, KV heads, head size, FFN width, vocabulary and, for
mixture-of-experts models, experts, top-k and expert widths, and for multi-head latent
attention its latent widths. `MODELS` holds the five models of table 3 of the
OrchestrRL/RFabric paper and DeepSeek-V3 with the numbers of their published Hugging Face
``config.json`` files. `Hardware` holds the roofline constants and NVLink rate of one
GPU type (H800 by default) and `GPU_TYPES` the catalog of them (H800, H20, H100, A100) that
fabrics' ``gpu=`` and `generate_rl`'s ``train_hardware``/``gen_hardware`` name. This module
only describes; sizes and times are computed in `rfabric.traces.rl`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import SpecError
from ..validators import integer

__all__ = [
    "ModelConfig",
    "MODELS",
    "Hardware",
    "H800",
    "H20",
    "H100",
    "A100",
    "GPU_TYPES",
    "DEFAULT_GPU",
    "get_gpu",
    "A100_VLLM",
    "H800_VLLM",
    "VLLM_HBM_EFFICIENCY",
    "VLLM_STEP_OVERHEAD_S",
    "MEGATRON_TRAIN_MFU",
    "get_model",
]


@dataclass(frozen=True)
class ModelConfig:
    """Decoder-only transformer architecture (SwiGLU MLP, grouped-query or multi-head latent
    attention, RMSNorm).

    Parameters
    ----------
    name : str
        Model name (free text; used in trace metadata).
    layers : int
        Number of decoder layers.
    hidden : int
        Hidden size h (``hidden_size``).
    heads : int
        Query heads (``num_attention_heads``).
    kv_heads : int
        Key/value heads (``num_key_value_heads``).
    ffn : int
        Dense MLP intermediate size (``intermediate_size``); unused by a model whose every
        layer is MoE.
    vocab : int
        Vocabulary size (``vocab_size``).
    head_dim : int, optional
        Per-head size; default ``hidden // heads``.
    experts : int
        Routed experts per MoE layer (0 for a dense model). Every layer is MoE when > 0.
    top_k : int
        Routed experts per token (``num_experts_per_tok``).
    expert_ffn : int
        Intermediate size of one routed expert (``moe_intermediate_size``).
    shared_expert_ffn : int
        Intermediate size of the always-active shared expert (0 if none), with a scalar
        sigmoid gate (h parameters) as in Qwen2-MoE.
    qkv_bias : bool
        Biases on the q, k and v projections (Qwen2/2.5).
    qk_norm : bool
        RMSNorm on queries and keys per head (Qwen3).
    tie_embeddings : bool
        Output projection shares the input embedding.
    dense_layers : int
        MoE models only: the first ``dense_layers`` layers have a dense SwiGLU MLP of width
        ``ffn`` instead of experts (DeepSeek's ``first_k_dense_replace``). `params` and
        `active_params` count them exactly; the per-layer sizes (`dense_mlp_params`,
        `layer_dense_params`, `layer_expert_params`) are then the mean over all layers,
        because the trace generator builds every layer alike (its compute model weighs the
        two layer types by their share, see `rfabric.traces.rl.compute`).
    shared_expert_gate : bool
        The shared expert has a scalar sigmoid gate (h parameters; Qwen2-MoE). DeepSeek's
        has none.
    kv_lora_rank : int, optional
        Multi-head latent attention (MLA, DeepSeek-V2/V3) when given: keys and values are
        compressed to a latent of this width plus one shared RoPE key of
        ``qk_rope_head_dim`` per token and layer, which is what the KV cache holds
        (``kv_lora_rank + qk_rope_head_dim`` elements per token and layer, for all heads).
        None (default): grouped-query attention; the MLA fields below must then be None.
    q_lora_rank : int, optional
        MLA: width of the query compression (None: queries projected directly from h).
    qk_rope_head_dim, qk_nope_head_dim, v_head_dim : int, optional
        MLA: per-head widths of the rotary and non-rotary query/key parts and of the
        values. ``head_dim`` is then ``qk_nope_head_dim + qk_rope_head_dim`` and
        ``kv_heads`` must equal ``heads`` (each head decompresses its own K and V).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    head_dim: int | None = None
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    shared_expert_ffn: int = 0
    qkv_bias: bool = False
    qk_norm: bool = False
    tie_embeddings: bool = False
    dense_layers: int = 0
    shared_expert_gate: bool = True
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "kv_heads", "vocab"):
            integer(getattr(self, f), f"ModelConfig {self.name!r}: {f}", lo=1)
        for f in ("ffn", "experts", "top_k", "expert_ffn", "shared_expert_ffn", "dense_layers"):
            integer(getattr(self, f), f"ModelConfig {self.name!r}: {f}", lo=0)
        mla = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        if self.kv_lora_rank is None:
            given = [f for f in mla[1:] + ("q_lora_rank",) if getattr(self, f) is not None]
            if given:
                raise SpecError(f"ModelConfig {self.name!r}: {', '.join(given)} need kv_lora_rank (MLA)")
        else:
            for f in mla:
                if getattr(self, f) is None:
                    raise SpecError(f"ModelConfig {self.name!r}: multi-head latent attention needs {f}")
                integer(getattr(self, f), f"ModelConfig {self.name!r}: {f}", lo=1)
            if self.q_lora_rank is not None:
                integer(self.q_lora_rank, f"ModelConfig {self.name!r}: q_lora_rank", lo=1)
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.head_dim not in (None, qk):
                raise SpecError(
                    f"ModelConfig {self.name!r}: with MLA head_dim is qk_nope_head_dim + qk_rope_head_dim "
                    f"= {qk}, not {self.head_dim}"
                )
            object.__setattr__(self, "head_dim", qk)
            if self.kv_heads != self.heads:
                raise SpecError(
                    f"ModelConfig {self.name!r}: with MLA kv_heads must equal heads ({self.heads}), "
                    f"got {self.kv_heads}"
                )
            if self.qkv_bias or self.qk_norm:
                raise SpecError(f"ModelConfig {self.name!r}: qkv_bias and qk_norm are not defined for MLA")
        if self.dense_layers:
            if not self.experts:
                raise SpecError(f"ModelConfig {self.name!r}: dense_layers needs experts > 0 (an MoE model)")
            if self.dense_layers >= self.layers:
                raise SpecError(
                    f"ModelConfig {self.name!r}: dense_layers {self.dense_layers} must be below layers {self.layers}"
                )
            if self.ffn < 1:
                raise SpecError(f"ModelConfig {self.name!r}: dense_layers need ffn >= 1")
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise SpecError(
                    f"ModelConfig {self.name!r}: hidden {self.hidden} is not a multiple of heads "
                    f"{self.heads}; give head_dim"
                )
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        else:
            integer(self.head_dim, f"ModelConfig {self.name!r}: head_dim", lo=1)
        if self.heads % self.kv_heads:
            raise SpecError(
                f"ModelConfig {self.name!r}: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}"
            )
        if self.experts:
            if not 1 <= self.top_k <= self.experts:
                raise SpecError(
                    f"ModelConfig {self.name!r}: top_k must be in 1..experts={self.experts}, got {self.top_k}"
                )
            if self.expert_ffn < 1:
                raise SpecError(f"ModelConfig {self.name!r}: an MoE model needs expert_ffn >= 1")
        else:
            if self.top_k or self.expert_ffn or self.shared_expert_ffn:
                raise SpecError(
                    f"ModelConfig {self.name!r}: top_k/expert_ffn/shared_expert_ffn need experts > 0"
                )
            if self.ffn < 1:
                raise SpecError(f"ModelConfig {self.name!r}: a dense model needs ffn >= 1")

    # -- derived sizes (parameter counts, not bytes) ----------------------------------------
    @property
    def is_moe(self) -> bool:
        """True if every layer is a mixture-of-experts layer."""
        return self.experts > 0

    @property
    def q_dim(self) -> int:
        """Query width ``heads * head_dim``."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Key (or value) width ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (``kv_lora_rank`` given)."""
        return self.kv_lora_rank is not None

    @property
    def attn_out_dim(self) -> int:
        """Width of the attention output (input of the o projection): ``heads * v_head_dim``
        for MLA, else `q_dim`."""
        return self.heads * self.v_head_dim if self.is_mla else self.q_dim

    @property
    def kv_cache_heads(self) -> int:
        """KV-cache heads per layer: ``kv_heads``, or 1 for MLA (one latent for all heads)."""
        return 1 if self.is_mla else self.kv_heads

    @property
    def kv_head_elems(self) -> int:
        """KV-cache elements per token, layer and cache head: K and V (``2 head_dim``), or
        for MLA the latent and the RoPE key (``kv_lora_rank + qk_rope_head_dim``)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.is_mla else 2 * self.head_dim

    @property
    def kv_token_elems(self) -> int:
        """KV-cache elements of one token over all layers (unsharded)."""
        return self.layers * self.kv_cache_heads * self.kv_head_elems

    @property
    def attn_params(self) -> int:
        """Attention parameters of one layer: q, k, v, o projections (+ qkv bias, qk-norm);
        for MLA the down and up projections of queries and of the KV latent, their two
        RMSNorms, and o."""
        h, q, kv = self.hidden, self.q_dim, self.kv_dim
        if self.is_mla:
            qr = self.q_lora_rank
            n = h * q if qr is None else h * qr + qr + qr * q  # W_DQ, its norm, W_UQ (nope + rope)
            r = self.kv_lora_rank
            n += h * (r + self.qk_rope_head_dim) + r  # W_DKV with the RoPE key, the latent's norm
            n += r * self.heads * (self.qk_nope_head_dim + self.v_head_dim)  # W_UK, W_UV
            return n + self.attn_out_dim * h
        n = h * q + 2 * h * kv + q * h
        if self.qkv_bias:
            n += q + 2 * kv
        if self.qk_norm:
            n += 2 * self.head_dim
        return n

    @property
    def norm_params(self) -> int:
        """The two RMSNorm weight vectors of one layer (2h)."""
        return 2 * self.hidden

    @property
    def moe_layers(self) -> int:
        """Number of MoE layers (``layers - dense_layers``; 0 for a dense model)."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def dense_mlp_params(self) -> int:
        """Dense SwiGLU MLP of one layer: 3 h ffn (0 for an MoE model; with `dense_layers`
        the mean over all layers, rounded)."""
        if not self.is_moe:
            return 3 * self.hidden * self.ffn
        return round(self.dense_layers * 3 * self.hidden * self.ffn / self.layers)

    @property
    def expert_params(self) -> int:
        """One routed expert: 3 h expert_ffn."""
        return 3 * self.hidden * self.expert_ffn

    @property
    def shared_params(self) -> int:
        """Shared expert of one layer (3 h shared_ffn) plus its sigmoid gate (h); 0 if none."""
        if not self.shared_expert_ffn:
            return 0
        return 3 * self.hidden * self.shared_expert_ffn + (self.hidden if self.shared_expert_gate else 0)

    @property
    def router_params(self) -> int:
        """Router of one MoE layer: h * experts."""
        return self.hidden * self.experts

    @property
    def layer_dense_params(self) -> int:
        """Parameters of one layer that are not routed experts (replicated across EP ranks;
        with `dense_layers` the mean over all layers, rounded)."""
        moe_part = self.shared_params + self.router_params
        if self.dense_layers:
            moe_part = round(self.moe_layers * moe_part / self.layers)
        return self.attn_params + self.norm_params + self.dense_mlp_params + moe_part

    @property
    def layer_expert_params(self) -> int:
        """Routed-expert parameters of one layer: experts * 3 h expert_ffn (with
        `dense_layers` the mean over all layers, rounded)."""
        n = self.experts * self.expert_params
        return round(self.moe_layers * n / self.layers) if self.dense_layers else n

    @property
    def moe_fraction(self) -> float:
        """Share of the layers that are MoE (1.0 for an MoE model without `dense_layers`)."""
        return self.moe_layers / self.layers

    @property
    def embedding_params(self) -> int:
        """Input embedding: vocab * h."""
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        """Final RMSNorm (h) plus the output projection (vocab * h, 0 if tied)."""
        return self.hidden + (0 if self.tie_embeddings else self.vocab * self.hidden)

    @property
    def params(self) -> int:
        """Total parameter count (exact, also with `dense_layers`)."""
        return self._count(self.experts)

    @property
    def active_params(self) -> int:
        """Parameters touched by one token (top_k routed experts instead of all)."""
        return self._count(self.top_k)

    def _count(self, experts: int) -> int:
        L, h = self.layers, self.hidden
        n = L * (self.attn_params + self.norm_params) + self.embedding_params + self.head_params
        if not self.is_moe:
            return n + L * 3 * h * self.ffn
        moe = experts * self.expert_params + self.shared_params + self.router_params
        return n + self.dense_layers * 3 * h * self.ffn + self.moe_layers * moe

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON-serialisable)."""
        return dataclasses.asdict(self)


#: Table 3 of the OrchestrRL/RFabric paper, with the numbers of each model's published
#: Hugging Face ``config.json`` (Qwen organisation), and DeepSeek-V3. Parameter totals
#: (``.params``): 14.77e9, 32.76e9, 72.71e9, 57.41e9, 235.09e9, 671.03e9. Qwen2.5-7B
#: (7.62e9; Qwen/Qwen2.5-7B config.json) is the model of StreamRL's cross-datacenter run and
#: RollMux's type-A jobs; Kimi K2 (1.026e12) the trillion-parameter MoE shape.
MODELS: dict[str, ModelConfig] = {
    m.name: m
    for m in (
        ModelConfig(
            "qwen2.5-7b",
            layers=28,
            hidden=3584,
            heads=28,
            kv_heads=4,
            ffn=18944,
            vocab=152064,
            qkv_bias=True,
        ),
        ModelConfig(
            "qwen2.5-14b",
            layers=48,
            hidden=5120,
            heads=40,
            kv_heads=8,
            ffn=13824,
            vocab=152064,
            qkv_bias=True,
        ),
        ModelConfig(
            "qwen2.5-32b",
            layers=64,
            hidden=5120,
            heads=40,
            kv_heads=8,
            ffn=27648,
            vocab=152064,
            qkv_bias=True,
        ),
        ModelConfig(
            "qwen2.5-72b",
            layers=80,
            hidden=8192,
            heads=64,
            kv_heads=8,
            ffn=29568,
            vocab=152064,
            qkv_bias=True,
        ),
        ModelConfig(
            "qwen2-57b-a14b",
            layers=28,
            hidden=3584,
            heads=28,
            kv_heads=4,
            ffn=18944,
            vocab=151936,
            experts=64,
            top_k=8,
            expert_ffn=2560,
            shared_expert_ffn=20480,
            qkv_bias=True,
        ),
        ModelConfig(
            "qwen3-235b-a22b",
            layers=94,
            hidden=4096,
            heads=64,
            kv_heads=4,
            ffn=12288,
            vocab=151936,
            head_dim=128,
            experts=128,
            top_k=8,
            expert_ffn=1536,
            qk_norm=True,
        ),
        # DeepSeek-V3 (DeepSeek-AI 2024, arXiv 2412.19437), the numbers of its Hugging Face
        # config.json (https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json):
        # multi-head latent attention, first_k_dense_replace 3, 256 routed experts (top 8) and
        # one shared expert of moe_intermediate_size, no shared-expert gate. 671.0e9
        # parameters, 37.6e9 active (without the multi-token-prediction module).
        ModelConfig(
            "deepseek-v3",
            layers=61,
            hidden=7168,
            heads=128,
            kv_heads=128,
            ffn=18432,
            vocab=129280,
            experts=256,
            top_k=8,
            expert_ffn=2048,
            shared_expert_ffn=2048,
            shared_expert_gate=False,
            dense_layers=3,
            kv_lora_rank=512,
            q_lora_rank=1536,
            qk_rope_head_dim=64,
            qk_nope_head_dim=128,
            v_head_dim=128,
        ),
    )
}
# Kimi K2 (moonshotai/Kimi-K2-Instruct config.json): DeepSeek-V3's architecture with 64
# attention heads, 384 routed experts, one dense layer and a 163,840-token vocabulary;
# 1.026e12 parameters, 32.9e9 activated ("1T total, 32B activated", its model card)
MODELS["kimi-k2"] = dataclasses.replace(
    MODELS["deepseek-v3"], name="kimi-k2", heads=64, kv_heads=64, vocab=163840, experts=384, dense_layers=1
)


def get_model(model, where: str = "model") -> ModelConfig:
    """A ModelConfig from a name in `MODELS` (case-insensitive, ``_`` = ``-``), a ModelConfig,
    or a dict: ``{"base": NAME, **fields}`` changes some fields of a named model (e.g.
    ``{"base": "qwen2.5-14b", "layers": 2}``, named ``qwen2.5-14b-2L`` unless ``name`` is
    given), and a dict without ``base`` gives every ModelConfig field. Sweeps' ``model``
    tables are the same dicts.

    Raises
    ------
    SpecError
        If the name is unknown or a field is unknown or invalid (naming ``where``).
    """
    import dataclasses
    from collections.abc import Mapping

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        key = model.strip().lower().replace("_", "-")
        if key in MODELS:
            return MODELS[key]
        raise SpecError(f"unknown model {model!r}; known: {', '.join(MODELS)} (or pass a ModelConfig)")
    if not isinstance(model, Mapping):
        raise SpecError(
            f"{where} must be a name, a ModelConfig or a dict such as "
            f"{{'base': 'qwen2.5-14b', 'layers': 2}}, not {type(model).__name__}"
        )
    fields = dict(model)
    base = fields.pop("base", None)
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise SpecError(
            f"{where}: unknown model field(s) {', '.join(unknown)} (known: base, {', '.join(sorted(known))})"
        )
    if base is None:  # a whole model of the user's
        try:
            return ModelConfig(**fields)
        except (TypeError, ValueError) as exc:
            raise SpecError(
                f"{where}: a model dict needs 'base' (a model name such as 'qwen2.5-14b') "
                f"or every ModelConfig field ({exc})"
            ) from None
    shape = get_model(base, where)
    if "name" not in fields:
        fields["name"] = f"{shape.name}-{fields['layers']}L" if "layers" in fields else shape.name
    try:
        return dataclasses.replace(shape, **fields)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{where}: model: {exc}") from None


@dataclass(frozen=True)
class Hardware:
    """Accelerator constants of the roofline compute model.

    Parameters
    ----------
    name : str
        Label for metadata.
    peak_flops : float
        Dense BF16 peak, FLOP/s.
    hbm_bytes_per_s : float
        HBM bandwidth, bytes/s.
    train_mfu : float
        Model FLOPs utilization of training (fraction of ``peak_flops``).
    gen_mfu : float
        FLOPs utilization of prefill and of the compute side of decode.
    hbm_efficiency : float
        Fraction of ``hbm_bytes_per_s`` that decode reaches.
    hbm_capacity_bytes : float
        GPU memory, bytes (the memory-fit check of `generate_rl`).
    decode_step_overhead_s : float
        Fixed time of one decode step of an inference instance beyond its roofline time:
        the engine's scheduling, sampling and kernel launches, which set the step time of
        small models at small batches. Default 0 (pure roofline); `A100_VLLM` and
        `H800_VLLM` carry a value calibrated on vLLM (docs/validation-compute.md).
    nvlink_bps : float
        NVLink bandwidth of one GPU, bit/s per direction (half the datasheets' bidirectional
        GB/s figure, times 8): the rate of a server's GPU-NVSwitch links when a fabric is
        built with ``gpu=`` this type (``rfabric.topologies.Topology``). Default H800's
        1.6e12 (400 GB/s bidirectional), the fabrics' ``DEFAULTS["nvlink"]``.
    """

    name: str = "H800"
    peak_flops: float = 989.5e12
    hbm_bytes_per_s: float = 3.35e12
    train_mfu: float = 0.40
    gen_mfu: float = 0.40
    hbm_efficiency: float = 1.0
    hbm_capacity_bytes: float = 80e9
    decode_step_overhead_s: float = 0.0
    nvlink_bps: float = 1.6e12

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError(f"Hardware: name must be a non-empty string, got {self.name!r}")
        for f in ("peak_flops", "hbm_bytes_per_s", "hbm_capacity_bytes", "nvlink_bps"):
            if not getattr(self, f) > 0:
                raise SpecError(f"Hardware {self.name!r}: {f} must be positive")
        if not 0 <= self.decode_step_overhead_s < 1:
            raise SpecError(f"Hardware {self.name!r}: decode_step_overhead_s must be in [0, 1) s")
        for f in ("train_mfu", "gen_mfu", "hbm_efficiency"):
            if not 0 < getattr(self, f) <= 1:
                raise SpecError(f"Hardware {self.name!r}: {f} must be in (0, 1]")


#: NVIDIA H800-80GB (SXM): 80 GB, 989.5 dense BF16 TFLOP/s and 3.35 TB/s HBM (StreamRL table 1, RollMux
#: table 1); NVLink 400 GB/s bidirectional (StreamRL table 1; NVIDIA's H800 datasheet),
#: 1.6 Tb/s each way. MFU 0.40 for training and prefill: Llama 3 reports 38-43 % BF16 MFU on H100
#: (Dubey et al. 2024, table 4). Decode runs at the full HBM bandwidth (pure roofline).
H800 = Hardware()

#: NVIDIA H20 (HGX H20, Hopper for the Chinese market): 96 GB HBM3, 4.0 TB/s, 148 dense BF16
#: TFLOP/s (StreamRL table 1, RollMux table 1; the same figures in the HGX H20 specifications
#: a distributor listed, reported by Tom's Hardware in 2024); NVLink 900 GB/s bidirectional
#: (StreamRL table 1), 3.6 Tb/s each way. The efficiency constants of `H800`.
H20 = Hardware(
    name="H20", peak_flops=148e12, hbm_bytes_per_s=4.0e12, hbm_capacity_bytes=96e9, nvlink_bps=3.6e12
)

#: NVIDIA H100-SXM5-80GB datasheet: 989 dense BF16 TFLOP/s (1,979 with sparsity, halved),
#: 3.35 TB/s HBM3, 80 GB, NVLink 900 GB/s bidirectional (3.6 Tb/s each way). Same die and
#: compute as H800, whose NVLink is cut to 400 GB/s. The efficiency constants of `H800`.
H100 = Hardware(name="H100", peak_flops=989.5e12, hbm_bytes_per_s=3.35e12, nvlink_bps=3.6e12)

#: NVIDIA A100-SXM4-80GB datasheet: 312 dense BF16 TFLOP/s, 2.039 TB/s HBM2e, 80 GB, NVLink
#: 600 GB/s bidirectional (2.4 Tb/s each way); the efficiency constants of `H800` (pure
#: roofline decode).
A100 = Hardware(name="A100-80GB", peak_flops=312e12, hbm_bytes_per_s=2.039e12, nvlink_bps=2.4e12)

#: The GPU types fabrics (``gpu=``) and the trace generator (``train_hardware=``,
#: ``gen_hardware=``) know by name: type name -> `Hardware`. `get_gpu` also accepts each
#: entry's ``Hardware.name`` ("A100-80GB") and any case. Add an entry to name a new type.
GPU_TYPES: dict[str, Hardware] = {"H800": H800, "H20": H20, "H100": H100, "A100": A100}

#: The GPU type of a fabric or trace that names none.
DEFAULT_GPU = "H800"


def get_gpu(gpu, where: str = "gpu") -> Hardware:
    """A `Hardware` from a `GPU_TYPES` name (any case; a ``Hardware.name`` such as
    ``"A100-80GB"`` too) or a `Hardware` (returned as is).

    Raises
    ------
    SpecError
        Naming ``where`` and the known types, if the name is unknown or ``gpu`` is neither.
    """
    if isinstance(gpu, Hardware):
        return gpu
    if isinstance(gpu, str):
        key = gpu.strip().lower()
        for name, hw in GPU_TYPES.items():
            if key in (name.lower(), hw.name.lower()):
                return hw
        raise SpecError(
            f"{where}: unknown GPU type {gpu!r} (known: {', '.join(GPU_TYPES)}; or pass an "
            f"rf.traces.Hardware, or add it to rfabric.traces.models.GPU_TYPES)"
        )
    raise SpecError(
        f"{where}: expected a GPU type name ({', '.join(GPU_TYPES)}) or an rf.traces.Hardware, "
        f"not {type(gpu).__name__}"
    )


#: Decode as vLLM 0.6.3 runs it (CUDA graphs, batch 1), calibrated on two rows of the Qwen2.5
#: speed benchmark (A100 80GB, 2,048 output tokens; qwen.readthedocs.io "Speed Benchmark"):
#: Qwen2.5-0.5B-Instruct 311.55 tok/s and Qwen2.5-14B-Instruct 46.30 tok/s at input length 1.
#: Solving step = weights / (HBM x e) + c for the two gives e = 0.725 of the HBM bandwidth
#: and c = 2.53 ms per step (bench/validation/compute.py derives them and scores the
#: other rows as held out).
VLLM_HBM_EFFICIENCY = 0.725
VLLM_STEP_OVERHEAD_S = 2.53e-3
A100_VLLM = dataclasses.replace(
    A100,
    name="A100-80GB-vLLM",
    hbm_efficiency=VLLM_HBM_EFFICIENCY,
    decode_step_overhead_s=VLLM_STEP_OVERHEAD_S,
)
#: `H800` with the vLLM decode constants of `A100_VLLM` (same engine; the fraction of HBM
#: bandwidth and the per-step cost carried over from A100, an assumption the H100 rows of
#: the validation table test).
H800_VLLM = dataclasses.replace(
    H800, name="H800-vLLM", hbm_efficiency=VLLM_HBM_EFFICIENCY, decode_step_overhead_s=VLLM_STEP_OVERHEAD_S
)

#: Compute-only efficiency of training FLOPs under rfabric's own pipeline schedule and
#: communication, calibrated end to end on one row: Llama 3.1 405B, 8,192 H100, TP 8, PP 16,
#: DP 64, sequence 8,192, 32 micro-batches per replica, 43 % BF16 MFU (Dubey et al. 2024,
#: table 4). bench/validation/compute.py (`calibrate_train`) simulates that step (1F1B,
#: TP all-reduces and PP sends on NVLink and 400G NICs, gradient reduce-scatter and
#: all-gather) and solves train_mfu for the measured MFU. It is high because rfabric's 1F1B
#: schedule is not interleaved: Llama 3 ran an interleaved schedule, whose smaller bubble
#: this constant absorbs (docs/validation-compute.md). Not the default of `H800` (0.40),
#: which the docs' and bench/README.md's numbers were produced with.
MEGATRON_TRAIN_MFU = 0.81
