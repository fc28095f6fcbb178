"""Weight-sync stage: the new weights from the train cluster to every gen instance.

`emit_weight_sync` cuts the trained weights into per-holder shards (stage-major, then ep,
then tp) and sends them ``flat`` (every instance straight from train) or ``two_level``
(one copy per gen pod, then a broadcast inside the pod): the ideal sharded transfers.
``gather_broadcast`` is what frameworks do (`_gather_broadcast`): gather full tensors on
the trainer, then broadcast them bucket by bucket to every gen GPU, which keeps its slice.
``reshard`` (colocated placement) moves only what the trainer's layout lacks for the
rollout's (`_reshard`). The papers' schemes ``root`` (StreamRL), ``scatter`` (RollMux)
and ``relay`` (Laminar) are in `sync_schemes`. Sizes are in `generate_rl`'s Notes.
"""

from __future__ import annotations

import numpy as np

from ...errors import SpecError
from .builder import cdiv
from .context import RLContext
from .sync_schemes import emit_relay, emit_root, emit_scatter
from .training import families

__all__ = ["emit_weight_sync", "check_reshard", "WEIGHT_SYNC_MODES"]

#: ``weight_sync`` values of `generate_rl` under disaggregated placement (colocated
#: placement has one: ``"reshard"``).
WEIGHT_SYNC_MODES = ("two_level", "flat", "gather_broadcast", "root", "scatter", "relay")

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
    b = ctx.b
    b.iteration = it
    b.period = ctx.new_period()
    if ctx.ws_mode == "gather_broadcast":
        _gather_broadcast(ctx)
        return
    if ctx.ws_mode == "reshard":
        _reshard(ctx)
        return
    if ctx.ws_mode == "root":
        emit_root(ctx, _gather_stage)
        return
    if ctx.ws_mode in ("scatter", "relay"):
        emit = emit_scatter if ctx.ws_mode == "scatter" else emit_relay
        emit(ctx, _weight_shards(ctx), lambda c: _copy_holders(ctx, c))
        return
    _sharded(ctx, ctx.gl.instances, ctx.pod_inst)
    if ctx.pl is not None:  # the prefill instances: one more pod
        _sharded(ctx, ctx.pl.instances, ctx.pl.dp)


def _sharded(ctx: RLContext, instances: np.ndarray, pod_inst: int) -> None:
    """``flat`` or ``two_level`` to ``instances`` (rows), in pods of ``pod_inst``."""
    b = ctx.b
    shard_ids, shard_bytes = _weight_shards(ctx)
    n_sh = len(shard_ids)
    copies = ctx.tl.edp
    n_inst, size = instances.shape
    member = shard_ids % size
    if ctx.ws_mode == "flat":
        targets = np.arange(n_inst)  # every instance receives every shard
        phase = "broadcast"
    else:
        targets = np.arange(0, n_inst, pod_inst)  # first instance of each pod
        phase = "inter_pod"
    for c in range(min(copies, len(targets))):
        served = targets[np.arange(len(targets)) % copies == c]
        holders = _copy_holders(ctx, c)
        for r0 in range(0, n_sh, size):
            sh = shard_ids[r0 : r0 + size]
            recv = instances[served][:, member[sh]].T  # (shards, instances)
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
    pods = [np.arange(p, min(p + pod_inst, n_inst)) for p in range(0, n_inst, pod_inst)]
    by_len: dict[int, list[np.ndarray]] = {}
    for pod in pods:
        if len(pod) > 1:
            by_len.setdefault(len(pod), []).append(pod)
    for _, group in sorted(by_len.items()):
        inst = instances[np.stack(group)]  # (pods, instances in pod, size)
        ranks = inst.transpose(0, 2, 1).reshape(-1, inst.shape[1])  # (pods * size, instances)
        sizes = np.tile(per_member, len(group))
        keep = sizes > 0
        b.emit(ranks[keep], sizes[keep], stage="weight_sync", phase="intra_pod", kind="broadcast")


def _gather_broadcast(ctx: RLContext) -> None:
    """slime's ``update_weights_from_distributed`` (veRL's one-step off-policy sync is the
    same with one root): per pipeline stage, the trainer's data-parallel copy 0 gathers the
    full tensors on the stage's first rank (`_gather_stage`); then that rank broadcasts
    them, in buckets of ``ctx.ws_bucket`` bytes, to every gen GPU (phase
    ``bucket_broadcast``); each gen GPU keeps its own TP/EP slice (resharding happens on
    the receiver, without traffic)."""
    gen_ranks = ctx.gl.instances.ravel()
    if ctx.pl is not None:
        gen_ranks = np.concatenate([gen_ranks, ctx.pl.instances.ravel()])
    for s in range(ctx.tl.pp):
        root, total = _gather_stage(ctx, s)
        count = cdiv(total, ctx.ws_bucket)
        sizes = np.full(count, ctx.ws_bucket, dtype=_I64)
        sizes[-1] = total - ctx.ws_bucket * (count - 1)
        for size in sizes.tolist():
            ctx.b.emit(
                np.concatenate([[root], gen_ranks])[None, :],
                size,
                stage="weight_sync",
                phase="bucket_broadcast",
                kind="broadcast",
            )


def _gather_stage(ctx: RLContext, s: int) -> tuple[int, int]:
    """Full tensors of pipeline stage ``s`` on its first rank of copy 0: the copy's ep*tp
    ranks all-gather the dense TP shards and the EP x TP shards of the experts (phase
    ``gather``; under ZeRO-3 / FSDP every data-parallel group first all-gathers its
    shards, as FSDP's full state dict does). Returns (that rank, the stage's bytes)."""
    tl, b, w = ctx.tl, ctx.b, ctx.param
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
    return int(holders[0, 0]), (dense + expert) * w


def _reshard_ratios(tl, gl) -> tuple[int, int]:
    """(dense, expert) gather widths of the colocated reshard: train shards per gen shard
    (1: the gen slice is a piece of what the rank holds)."""
    gen_x = gl.ep if gl.mode == "ep" else gl.tp  # ranks an expert parameter is split over
    return max(1, tl.tp // gl.tp), max(1, tl.ep * tl.tp // gen_x)


def check_reshard(tl, gl) -> None:
    """Raise SpecError unless the gen layout can be resharded locally from the train layout
    (colocated placement): one side's TP (expert) split must divide the other's."""
    if gl.mode == "afd":
        raise SpecError("placement='colocated' cannot host attention-FFN disaggregated instances")
    gen_x = gl.ep if gl.mode == "ep" else gl.tp
    pairs = [("train tp", tl.tp, "gen tp", gl.tp)]
    if tl.model.is_moe:
        pairs.append(("train ep*tp", tl.ep * tl.tp, "gen ep" if gl.mode == "ep" else "gen tp", gen_x))
    for a, x, b, y in pairs:
        if max(x, y) % min(x, y):
            raise SpecError(f"placement='colocated': {a}={x} and {b}={y} must divide one another to reshard")


def _reshard(ctx: RLContext) -> None:
    """veRL's sharding managers (``FSDPVLLMShardingManager``, ``MegatronVLLMShardingManager``):
    the rollout reads the trainer's weights on the same GPUs; only what a rank's gen slice
    lacks moves. Per step: ZeRO-3 / FSDP all-gathers each data-parallel group's shards
    (phase ``gather``); with pp > 1 every stage's ranks broadcast their shards to the same
    position of the other stages (phase ``pp_broadcast``: a gen instance holds all
    layers); with train tp > gen tp, groups of tp / gen tp consecutive train-TP ranks
    all-gather the dense shards (phase ``tp_gather``), and the experts likewise when the
    train split ep tp exceeds the gen one (ep in EP mode, tp in TP mode). Where the gen
    split is finer, each rank slices what it holds: no traffic."""
    tl, b, w = ctx.tl, ctx.b, ctx.param
    for s in range(tl.pp):
        if ctx.zero == 3:
            dense, expert = tl.stage_params(s)
            for grp, fam, div in families(ctx, s):
                n = cdiv((dense, expert)[fam], div)
                b.emit(grp, n * w, stage="weight_sync", phase="gather", kind="all_gather")
    shard = [cdiv(d, tl.tp) + cdiv(x, tl.ep * tl.tp) for d, x in map(tl.stage_params, range(tl.pp))]
    if tl.pp > 1:
        column = tl.grid.reshape(tl.pp, -1).T  # (positions, stages)
        for s in range(tl.pp):
            ranks = np.concatenate([column[:, s : s + 1], np.delete(column, s, axis=1)], axis=1)
            b.emit(ranks, shard[s] * w, stage="weight_sync", phase="pp_broadcast", kind="broadcast")
    r_d, r_x = _reshard_ratios(tl, ctx.gl)
    dense = sum(cdiv(tl.stage_params(s)[0], tl.tp) for s in range(tl.pp))
    expert = sum(cdiv(tl.stage_params(s)[1], tl.ep * tl.tp) for s in range(tl.pp))
    for r, n in ((r_d, dense), (r_x, expert)):
        if r > 1 and n:
            groups = tl.grid.reshape(-1, r)  # consecutive ranks: tp fastest, (e, t) for experts
            b.emit(groups, n * r * w, stage="weight_sync", phase="tp_gather", kind="all_gather")
