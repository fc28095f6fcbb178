"""Parallel layouts of the RL trace generator: which global ranks form which groups.

`TrainLayout` places the training cluster in Megatron-LM rank order (tp, cp, dp, pp) and
answers the group families of a pipeline stage (TP, CP, DP, EP, expert-DP) and the
parameter counts a stage holds; `GenLayout` cuts the generation cluster into inference
instances (TP, EP or attention-FFN-disaggregated). Both validate their configuration dict
and know nothing about ops, sizes or time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import SpecError
from ...validators import integer, known_keys
from ..models import ModelConfig

__all__ = ["TrainLayout", "GenLayout"]

_I64 = np.int64


class TrainLayout:
    """Megatron-LM rank order: tp fastest, then cp, then dp, then pp.

    ``grid[s, d, c, t]`` is the local rank of pipeline stage s, data-parallel index d,
    context-parallel index c, tensor-parallel index t. For MoE layers the cp*dp ranks of a
    stage (index j = c + cp d) are regrouped as ``j = e + ep x`` (e: expert-parallel index,
    x: expert-data-parallel index), as Megatron-Core does.
    """

    def __init__(self, model: ModelConfig, gpus: int, cfg: Mapping[str, Any]):
        known_keys(cfg, ("tp", "pp", "dp", "cp", "ep"), "train", "parallelism key")
        self.tp = integer(cfg.get("tp", 1), "train tp", lo=1)
        self.pp = integer(cfg.get("pp", 1), "train pp", lo=1)
        self.cp = integer(cfg.get("cp", 1), "train cp", lo=1)
        self.ep = integer(cfg.get("ep", 1), "train ep", lo=1)
        per_dp = self.tp * self.pp * self.cp
        if "dp" in cfg:
            self.dp = integer(cfg["dp"], "train dp", lo=1)
        elif gpus % per_dp == 0:
            self.dp = gpus // per_dp
        else:
            raise SpecError(f"train_gpus={gpus} is not a multiple of tp*pp*cp={per_dp}")
        if self.dp * per_dp != gpus:
            raise SpecError(f"train: tp*pp*cp*dp = {self.dp * per_dp} != train_gpus = {gpus}")
        if self.pp > model.layers:
            raise SpecError(f"train pp={self.pp} exceeds the model's {model.layers} layers")
        if self.ep > 1 and not model.is_moe:
            raise SpecError(f"train ep={self.ep} needs an MoE model; {model.name} is dense")
        if (self.cp * self.dp) % self.ep:
            raise SpecError(f"train ep={self.ep} must divide cp*dp={self.cp * self.dp}")
        if model.is_moe and model.experts % self.ep:
            raise SpecError(f"train ep={self.ep} must divide the {model.experts} experts")
        self.edp = self.cp * self.dp // self.ep
        self.model = model
        self.grid = np.arange(gpus, dtype=_I64).reshape(self.pp, self.dp, self.cp, self.tp)
        base, extra = divmod(model.layers, self.pp)
        self.stage_layers = [base + (1 if s < extra else 0) for s in range(self.pp)]

    def stage_params(self, s: int) -> tuple[int, int]:
        """(dense, expert) parameter counts of pipeline stage s: its layers, plus the
        embedding on the first stage and the final norm and output layer on the last."""
        m = self.model
        L = self.stage_layers[s]
        dense = L * m.layer_dense_params
        if s == 0:
            dense += m.embedding_params
        if s == self.pp - 1:
            dense += m.head_params
        return dense, L * m.layer_expert_params

    def tp_groups(self, s: int) -> np.ndarray:
        return self.grid[s].reshape(-1, self.tp)

    def cp_groups(self, s: int) -> np.ndarray:
        return self.grid[s].transpose(0, 2, 1).reshape(-1, self.cp)

    def dp_groups(self, s: int) -> np.ndarray:
        """Gradient all-reduce groups of dense parameters: fixed tp index, all (cp, dp)."""
        return self.grid[s].transpose(2, 0, 1).reshape(self.tp, self.dp * self.cp)

    def _moe_view(self, s: int) -> np.ndarray:
        return self.grid[s].reshape(self.edp, self.ep, self.tp)  # [x, e, t]

    def ep_groups(self, s: int) -> np.ndarray:
        return self._moe_view(s).transpose(0, 2, 1).reshape(-1, self.ep)

    def edp_groups(self, s: int) -> np.ndarray:
        return self._moe_view(s).transpose(2, 1, 0).reshape(-1, self.edp)

    def holders(self, copy: int) -> list[np.ndarray]:
        """Weight copy ``copy`` (0..edp-1): per stage, its ep*tp ranks in (e, t) order."""
        return [self._moe_view(s)[copy].ravel() for s in range(self.pp)]


class GenLayout:
    """Generation instances: consecutive blocks of ``size`` gen ranks.

    TP mode: an instance is one TP group. EP mode: ``ep`` ranks whose experts are split
    across all of them, with attention in ep/tp data-parallel TP groups. AFD mode: ``attn``
    attention ranks (attn/tp TP groups) followed by ``ffn`` FFN (expert) ranks.
    A *unit* is an attention TP group: it owns a share of the sequences.
    """

    def __init__(self, model: ModelConfig, gpus: int, cfg: Mapping[str, Any], offset: int):
        known_keys(cfg, ("tp", "dp", "ep", "afd"), "gen", "parallelism key")
        self.tp = integer(cfg.get("tp", 1), "gen tp", lo=1)
        self.ep = integer(cfg.get("ep", 1), "gen ep", lo=1)
        afd = cfg.get("afd")
        if afd is not None:
            if not model.is_moe:
                raise SpecError(f"gen afd needs an MoE model; {model.name} is dense")
            if isinstance(afd, Mapping):
                bad = set(afd) - {"attn", "ffn"}
                if bad or "attn" not in afd or "ffn" not in afd:
                    raise SpecError(f"gen afd must be dict(attn=M, ffn=N), got {dict(afd)!r}")
                m, n = afd["attn"], afd["ffn"]
            else:
                try:
                    m, n = afd
                except (TypeError, ValueError):
                    raise SpecError(f"gen afd must be dict(attn=M, ffn=N) or (M, N), got {afd!r}") from None
            self.attn, self.ffn = integer(m, "gen afd attn", lo=1), integer(n, "gen afd ffn", lo=1)
            if self.attn % self.tp:
                raise SpecError(f"gen afd attn={self.attn} must be a multiple of gen tp={self.tp}")
            if self.ep not in (1, self.ffn):
                raise SpecError(
                    f"gen ep={self.ep} conflicts with afd ffn={self.ffn} (AFD splits experts over ffn)"
                )
            if model.experts % self.ffn:
                raise SpecError(f"gen afd ffn={self.ffn} must divide the {model.experts} experts")
            self.mode, self.size = "afd", self.attn + self.ffn
        elif self.ep > 1:
            if not model.is_moe:
                raise SpecError(f"gen ep={self.ep} needs an MoE model; {model.name} is dense")
            if self.ep % self.tp:
                raise SpecError(f"gen ep={self.ep} must be a multiple of gen tp={self.tp}")
            if model.experts % self.ep:
                raise SpecError(f"gen ep={self.ep} must divide the {model.experts} experts")
            self.mode, self.size, self.attn, self.ffn = "ep", self.ep, self.ep, 0
        else:
            self.mode, self.size, self.attn, self.ffn = "tp", self.tp, self.tp, 0
        if "dp" in cfg:
            self.dp = integer(cfg["dp"], "gen dp", lo=1)
        elif gpus % self.size == 0:
            self.dp = gpus // self.size
        else:
            raise SpecError(f"gen_gpus={gpus} is not a multiple of the instance size {self.size}")
        if self.dp * self.size != gpus:
            raise SpecError(f"gen: instance size {self.size} x dp {self.dp} != gen_gpus = {gpus}")
        self.instances = offset + np.arange(gpus, dtype=_I64).reshape(self.dp, self.size)
        self.units_per_instance = self.attn // self.tp
        self.units = self.instances[:, : self.attn].reshape(-1, self.tp)
        self.n_units = self.units.shape[0]
