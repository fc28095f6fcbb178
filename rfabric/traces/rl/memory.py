"""Memory fit of the parallel layouts: model states per GPU against GPU memory.

Counts what a layout must hold whatever the batch: on a train GPU the weights, the
gradients and the optimizer state of its parameters (sharded as the data-parallel mode
shards them), on a gen GPU its share of the weights. Activations, the KV cache and
framework buffers are not counted, so a layout that fails this check cannot run, and one
that passes may still not.
"""

from __future__ import annotations

import warnings

from ...errors import SpecError
from .context import RLContext

__all__ = ["MemoryFitWarning", "check_memory", "train_state_bytes", "gen_weight_bytes", "ADAM_STATE_BYTES"]

#: Optimizer state per parameter of Megatron-LM's mixed-precision Adam: FP32 main
#: parameter, first and second moment.
ADAM_STATE_BYTES = 12

#: How `generate_rl` reacts when a layout does not fit (its ``memory_check``).
MEMORY_CHECKS = ("warn", "error", "off")


class MemoryFitWarning(UserWarning):
    """A train or gen GPU would hold more model state than its memory."""


def train_state_bytes(ctx: RLContext) -> float:
    """Largest per-GPU weights + gradients + optimizer state over the pipeline stages."""
    tl = ctx.tl
    shard = (tl.dp * tl.cp, tl.edp)
    worst = 0.0
    for s in range(tl.pp):
        dense, expert = tl.stage_params(s)
        d, x = dense / tl.tp, expert / (tl.ep * tl.tp)
        sharded = d / shard[0] + x / shard[1]
        states = (sharded if ctx.zero >= 3 else d + x) * ctx.param
        states += (sharded if ctx.zero >= 2 else d + x) * ctx.grad
        states += (sharded if ctx.zero >= 1 else d + x) * ADAM_STATE_BYTES
        worst = max(worst, states)
    return worst


def gen_weight_bytes(ctx: RLContext) -> float:
    """Largest per-GPU weight share of a gen instance: dense parameters split over tp,
    routed experts over the instance's expert ranks (ep, or the FFN ranks under AFD)."""
    m, gl = ctx.m, ctx.gl
    experts = m.layers * m.layer_expert_params
    dense = m.params - experts
    if gl.mode == "tp":
        return m.params / gl.tp * ctx.param
    if gl.mode == "ep":
        return (dense / gl.tp + experts / gl.ep) * ctx.param
    return max(dense / gl.tp, experts / gl.ffn) * ctx.param


def check_memory(ctx: RLContext, how: str) -> dict[str, float]:
    """Per-GPU bytes on each side; warn (`MemoryFitWarning`) or raise (SpecError) when a
    side exceeds ``ctx.hw.hbm_capacity_bytes``, as ``how`` says."""
    cap = ctx.hw.hbm_capacity_bytes
    need = {"train": train_state_bytes(ctx), "gen": gen_weight_bytes(ctx)}
    if how == "off":
        return need
    what = {"train": "weights + gradients + optimizer state", "gen": "weights"}
    for side, nbytes in need.items():
        if nbytes > cap:
            msg = (
                f"{ctx.m.name} does not fit the {side} layout: {nbytes / 1e9:.1f} GB of {what[side]} "
                f"per GPU > {cap / 1e9:.0f} GB ({ctx.hw.name}); use more GPUs or more "
                f"{'tp/pp/ep or distributed_optimizer' if side == 'train' else 'gen tp/ep'}"
            )
            if how == "error":
                raise SpecError(msg)
            warnings.warn(msg, MemoryFitWarning, stacklevel=3)
    return need
