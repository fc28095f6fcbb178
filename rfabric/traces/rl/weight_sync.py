"""Weight-sync stage: the new weights from the train cluster to every gen instance.

`emit_weight_sync` cuts the trained weights into per-holder shards (stage-major, then ep,
then tp) and sends them ``flat`` (every instance straight from train) or ``two_level``
(one copy per gen pod, then a broadcast inside the pod): the ideal sharded transfers.
``gather_broadcast`` is what frameworks do (`_gather_broadcast`): gather full tensors on
the trainer, then broadcast them bucket by bucket to every gen GPU, which keeps its slice.
Sizes are in `generate_rl`'s Notes.
"""

from __future__ import annotations

import numpy as np

from .builder import cdiv
from .context import RLContext
from .training import families

__all__ = ["emit_weight_sync", "WEIGHT_SYNC_MODES"]

#: ``weight_sync`` values of `generate_rl`.
WEIGHT_SYNC_MODES = ("two_level", "flat", "gather_broadcast")

_I64 = np.int64


def _weight_shards(ctx: RLContext) -> tuple[np.ndarray, np.ndarray]:
    """Per shard (stage-major, then ep, then tp): holder index within a copy, bytes."""
    tl = ctx.tl
    sizes = []
    for s in range(tl.pp):
        dense, expert = ctx.tl.stage_params(s)
        total = dense + expert
        q, r = divmod(total, tl.ep * tl.tp)
        sizes += [(q + (1 if i < r else 0)) * ctx.param for i in range(tl.ep * tl.tp)]
    return np.arange(len(sizes)), np.array(sizes, dtype=_I64)


def _copy_holders(ctx: RLContext, copy: int) -> np.ndarray:
    return np.concatenate(ctx.tl.holders(copy))


def emit_weight_sync(ctx: RLContext, it: int) -> None:
    """Emit the train -> gen weight transfer of iteration ``it``."""
    gl, b = ctx.gl, ctx.b
    b.iteration = it
    b.period = ctx.new_period()
    if ctx.ws_mode == "gather_broadcast":
        _gather_broadcast(ctx)
        return
    shard_ids, shard_bytes = _weight_shards(ctx)
    n_sh = len(shard_ids)
    copies = ctx.tl.edp
    size = gl.size
    member = shard_ids % size
    if ctx.ws_mode == "flat":
        targets = np.arange(gl.dp)  # every instance receives every shard
        phase = "broadcast"
    else:
        targets = np.arange(0, gl.dp, ctx.pod_inst)  # first instance of each pod
        phase = "inter_pod"
    for c in range(min(copies, len(targets))):
        served = targets[np.arange(len(targets)) % copies == c]
        holders = _copy_holders(ctx, c)
        for r0 in range(0, n_sh, size):
            sh = shard_ids[r0 : r0 + size]
            recv = gl.instances[served][:, member[sh]].T  # (shards, instances)
            ranks = np.concatenate([holders[sh][:, None], recv], axis=1)
            b.emit(
                ranks,
                shard_bytes[sh],
                stage="weight_sync",
                phase=phase,
                kind="broadcast",
                algorithm="direct",
            )
    if ctx.ws_mode == "flat":
        return
    per_member = np.zeros(size, dtype=_I64)
    np.add.at(per_member, member, shard_bytes)
    pods = [np.arange(p, min(p + ctx.pod_inst, gl.dp)) for p in range(0, gl.dp, ctx.pod_inst)]
    by_len: dict[int, list[np.ndarray]] = {}
    for pod in pods:
        if len(pod) > 1:
            by_len.setdefault(len(pod), []).append(pod)
    for _, group in sorted(by_len.items()):
        inst = gl.instances[np.stack(group)]  # (pods, instances in pod, size)
        ranks = inst.transpose(0, 2, 1).reshape(-1, inst.shape[1])  # (pods * size, instances)
        sizes = np.tile(per_member, len(group))
        keep = sizes > 0
        b.emit(ranks[keep], sizes[keep], stage="weight_sync", phase="intra_pod", kind="broadcast")


def _gather_broadcast(ctx: RLContext) -> None:
    """slime's ``update_weights_from_distributed`` (veRL's one-step off-policy sync is the
    same with one root): per pipeline stage, the trainer's data-parallel copy 0 all-gathers
    the TP shards of the dense parameters and the EP x TP shards of the experts (phase
    ``gather``; under ZeRO-3 / FSDP every data-parallel group first all-gathers its
    shards, as FSDP's full state dict does); then the stage's first rank broadcasts the full tensors, in buckets of
    ``ctx.ws_bucket`` bytes, to every gen GPU (phase ``bucket_broadcast``); each gen GPU
    keeps its own TP/EP slice (resharding happens on the receiver, without traffic)."""
    tl, gl, b, w = ctx.tl, ctx.gl, ctx.b, ctx.param
    gen_ranks = gl.instances.ravel()
    for s in range(tl.pp):
        dense, expert = tl.stage_params(s)
        if ctx.zero == 3:  # parameters sharded over data parallelism: unshard them first
            for grp, fam, div in families(ctx, s):
                n = cdiv((dense, expert)[fam], div)
                b.emit(grp, n * w, stage="weight_sync", phase="gather", kind="all_gather")
        holders = tl.holders(0)[s].reshape(tl.ep, tl.tp)  # copy 0: [e, t]
        if tl.tp > 1:
            b.emit(
                holders,
                cdiv(dense, tl.tp) * tl.tp * w,
                stage="weight_sync",
                phase="gather",
                kind="all_gather",
            )
        if expert and tl.ep * tl.tp > 1:
            n = tl.ep * tl.tp
            b.emit(
                holders.reshape(1, n),
                cdiv(expert, n) * n * w,
                stage="weight_sync",
                phase="gather",
                kind="all_gather",
            )
        total = (dense + expert) * w
        count = cdiv(total, ctx.ws_bucket)
        sizes = np.full(count, ctx.ws_bucket, dtype=_I64)
        sizes[-1] = total - ctx.ws_bucket * (count - 1)
        root = holders[0, 0]
        for size in sizes.tolist():
            b.emit(
                np.concatenate([[root], gen_ranks])[None, :],
                size,
                stage="weight_sync",
                phase="bucket_broadcast",
                kind="broadcast",
            )
