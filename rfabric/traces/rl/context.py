"""The state one `generate_rl` call shares between its stage emitters.

`RLContext` holds the model, the two layouts, the roofline, the op builder, the resolved
options and the period counter. A stage emitter is a function ``emit_<stage>(ctx, it, ...)``
in its own module that reads the context and appends ops through ``ctx.b``; adding a stage
or a framework mode means a new function there and a call in `generate`.
"""

from __future__ import annotations

import numpy as np

from ..models import Hardware, ModelConfig
from .builder import OpBuilder
from .compute import Roofline
from .layout import GenLayout, TrainLayout

__all__ = ["RLContext"]


class RLContext:
    """Layouts, roofline, builder and options of one generation run."""

    def __init__(
        self,
        mdl: ModelConfig,
        tl: TrainLayout,
        gl: GenLayout,
        hw: Hardware,
        *,
        train_hw: Hardware | None = None,
        K: int,
        lpo: int,
        prompt: int,
        act: int,
        param: int,
        grad: int,
        mbt: int,
        steps: int,
        zero: int,
        weight_sync: str,
        pod_inst: int,
        n_ranks: int,
        experience: tuple[str, ...] = (),
        bucket: int | None = None,
        opt_bytes: int = 0,
        ws_bucket: int = 512 << 20,
        pl: GenLayout | None = None,
        seq_max: int = 0,
        recompute: str = "none",
    ):
        #: ``hw``: the gen pool's GPU (prefill, decode); ``train_hw``: the train pool's
        #: (training, experience, optimizer), ``hw`` unless given.
        self.m, self.tl, self.gl, self.hw = mdl, tl, gl, hw
        self.train_hw = hw if train_hw is None else train_hw
        self.K, self.prompt, self.act, self.param, self.grad = K, prompt, act, param, grad
        self.mbt, self.steps = mbt, steps
        #: Longest sequence (prompt + response max): the KV cache a gen GPU must hold.
        self.seq_max = seq_max
        #: ZeRO stage of the data-parallel training: 0 all-reduce (Megatron DDP), 1
        #: distributed optimizer, 2 gradients sharded too, 3 parameters too (FSDP).
        self.zero = zero
        #: Activation recomputation of the training backward (`memory.RECOMPUTE`).
        self.recompute = recompute
        self.rs_last: dict[tuple[int, int], np.ndarray] = {}  # (stage, family) -> last reduce-scatter ids
        self.ws_mode, self.pod_inst, self.ws_bucket = weight_sync, pod_inst, ws_bucket
        self.experience = experience
        self.bucket, self.opt_bytes = bucket, opt_bytes
        self.rf = Roofline(mdl, tl, gl, hw, prompt=prompt, act=act, param=param, train_hw=self.train_hw)
        #: Prefill instances under prefill/decode disaggregation (None: each gen instance
        #: prefills its own prompts) and their roofline.
        self.pl = pl
        self.prf = (
            None
            if pl is None
            else Roofline(mdl, tl, pl, hw, prompt=prompt, act=act, param=param, train_hw=self.train_hw)
        )
        self.b = OpBuilder(n_ranks)
        self._periods = 0
        self.blocks = [lpo] * (mdl.layers // lpo) + ([mdl.layers % lpo] if mdl.layers % lpo else [])

    def new_period(self) -> int:
        """A fresh communication-period id (ids count up in emission order)."""
        self._periods += 1
        return self._periods - 1
