"""Weight-sync schemes of the disaggregated-RL papers (docs/explanation/weight-sync-schemes.md).

``root`` (StreamRL §6, cross-datacenter): one trainer root per pipeline stage sends the
full weights across to one gen root, which broadcasts them inside the gen cluster.
``scatter`` (RollMux §5.2, its "two-stage update"): the weights cut into one disjoint
piece per training GPU, each sent point-to-point to a distinct gen GPU, then broadcast
inside the gen cluster. ``relay`` (Laminar §3.2, §4.2, App. C): the actor pushes to a
master relay, the relays pass 32 MB chunks down a pipelined chain, and each gen GPU loads
its slice from its machine's relay over PCIe once its own instance's batch is done.
All three put exactly the model's bytes M on the train -> gen boundary (``flat`` puts
``dp_gen`` M there, ``two_level`` one M per pod). Sizes are in `generate_rl`'s Notes.
"""

from __future__ import annotations

import numpy as np

from ...errors import SpecError
from .autolayout import SERVER_GPUS
from .builder import cdiv, to_ps
from .context import RLContext

__all__ = ["emit_root", "emit_scatter", "emit_relay", "member_bytes", "PCIE_BYTES_PER_S", "RELAY_CHUNK"]

_I64 = np.int64

#: Host -> GPU copy rate of a relay pull: PCIe Gen5 x16 (the H800 SXM5's host link, NVIDIA
#: H800 datasheet "PCIe Gen5: 128 GB/s", both directions), one direction: 32 GT/s x 16
#: lanes x 128/130 encoding / 8 = 63.0 GB/s. A line rate: real pinned copies reach less.
PCIE_BYTES_PER_S = 32e9 * 16 * 128 / 130 / 8

#: Laminar's relay chunk ("32MB chunk size", §4.2): the default ``weight_bucket_bytes``
#: of ``relay``.
RELAY_CHUNK = 32 << 20


def member_bytes(shard_bytes: np.ndarray, size: int) -> np.ndarray:
    """Bytes each member of an instance of ``size`` GPUs holds: shard h goes to member
    ``h mod size`` (as ``flat`` and ``two_level``)."""
    out = np.zeros(size, dtype=_I64)
    np.add.at(out, np.arange(len(shard_bytes)) % size, shard_bytes)
    return out


def _chunks(total: int, chunk: int) -> np.ndarray:
    count = max(1, cdiv(total, chunk))
    sizes = np.full(count, chunk, dtype=_I64)
    sizes[-1] = total - chunk * (count - 1)
    return sizes


def _gen_ranks(ctx: RLContext) -> np.ndarray:
    ranks = ctx.gl.instances.ravel()
    if ctx.pl is not None:
        ranks = np.concatenate([ranks, ctx.pl.instances.ravel()])
    return ranks


def emit_root(ctx: RLContext, gather_stage) -> None:
    """StreamRL's cross-datacenter scheme: "only the root (DP rank 0) sends weights to a
    designated SGS DP instance in the remote datacenter, followed by a local broadcast".
    Per pipeline stage, data-parallel copy 0 gathers the full tensors on the stage's first
    rank (``gather_stage``, as ``gather_broadcast``); that rank sends them in buckets of
    ``ctx.ws_bucket`` to the first gen GPU (phase ``inter_cluster``, after that GPU's last
    gen op), which broadcasts each bucket to every other gen GPU (phase
    ``intra_cluster``); each keeps its slice. The sends of a stage follow one another on
    its root, each broadcast follows its bucket's send: buckets pipeline."""
    b = ctx.b
    gen = _gen_ranks(ctx)
    g_root, others = gen[0], gen[1:]
    ready = b.last_op[g_root]  # the gen root has finished generating
    for s in range(ctx.tl.pp):
        root, total = gather_stage(ctx, s)
        for size in _chunks(total, ctx.ws_bucket).tolist():
            sid = b.emit(
                np.array([[root, g_root]]),
                size,
                stage="weight_sync",
                phase="inter_cluster",
                kind="send",
                algorithm="direct",
                program=[0],
                after=np.array([ready]),
            )
            if len(others):
                b.emit(
                    np.concatenate([[g_root], others])[None, :],
                    size,
                    stage="weight_sync",
                    phase="intra_cluster",
                    kind="broadcast",
                    after=sid,
                )


def emit_scatter(ctx: RLContext, shards: tuple[np.ndarray, np.ndarray], holders) -> None:
    """RollMux's two-stage update: "partitions the updated model into N disjoint shards,
    where N is the number of training GPUs. Each training GPU transmits a unique shard to a
    corresponding rollout GPU via parallel point-to-point (P2P) streams", then the rollout
    GPUs "disseminate their shards to all other rollout workers".

    Holder shard h (``flat``'s cut) is split over the ``edp`` data-parallel copies that
    hold it: copy c's holder sends piece c (``S_h // edp``, the first ``S_h mod edp`` one
    byte more) to a gen GPU at member ``h mod size``, instances taken in turn per member
    (phase ``scatter``, one ``send`` per training GPU); each piece is then broadcast from
    there to the same member of every other instance (phase ``broadcast``)."""
    if ctx.pl is not None:
        raise SpecError("weight_sync='scatter' does not model prefill instances: use another scheme")
    b, gl = ctx.b, ctx.gl
    shard_ids, shard_bytes = shards
    copies = ctx.tl.edp
    n_inst, size = gl.instances.shape
    src, mem, piece = [], [], []
    for c in range(copies):
        src.append(holders(c))
        mem.append(shard_ids % size)
        piece.append(shard_bytes // copies + (shard_bytes % copies > c))
    src, mem, piece = np.concatenate(src), np.concatenate(mem), np.concatenate(piece)
    keep = piece > 0
    src, mem, piece = src[keep], mem[keep], piece[keep]
    # k-th piece of member m lands on instance k mod n_inst; round = k // n_inst
    order = np.argsort(mem, kind="stable")
    k = np.empty(len(mem), dtype=_I64)
    starts = np.searchsorted(mem[order], np.arange(size))
    k[order] = np.arange(len(mem)) - starts[mem[order]]
    inst = k % n_inst
    dst = gl.instances[inst, mem]
    for rnd in range(int(k.max()) // n_inst + 1 if len(k) else 0):
        sel = np.flatnonzero(k // n_inst == rnd)
        b.emit(
            np.stack([src[sel], dst[sel]], axis=1),
            piece[sel],
            stage="weight_sync",
            phase="scatter",
            kind="send",
            algorithm="direct",
        )
    if n_inst == 1:
        return
    for rnd in range(int(k.max()) + 1):  # one piece per member per emit: disjoint rows
        sel = np.flatnonzero(k == rnd)
        rest = (inst[sel][:, None] + np.arange(1, n_inst)[None, :]) % n_inst
        ranks = np.concatenate([dst[sel][:, None], gl.instances[rest, mem[sel][:, None]]], axis=1)
        b.emit(ranks, piece[sel], stage="weight_sync", phase="broadcast", kind="broadcast")


def emit_relay(ctx: RLContext, shards: tuple[np.ndarray, np.ndarray], holders) -> None:
    """Laminar's relay weight service (§3.2, §4.2, App. C).

    A relay is a CPU process in host memory, one per rollout machine (``SERVER_GPUS``
    consecutive gen GPUs); on the fabric it is the NIC of the machine's first GPU, and its
    transfers are in no GPU's program order. Phase ``push``: every holder of copy 0 sends
    its shard to the master relay (machine 0); the actor's next op waits ("This transfer
    completes before the next iteration begins"). Phase ``relay_chain``: the master passes
    the M bytes, in chunks of ``ctx.ws_bucket`` (Laminar: 32 MB), down the chain of relays
    in machine order; chunk k leaves relay j once it reached relay j and chunk k-1 left
    relay j (one chunk in flight per hop: App. C's T(p, k) = (p+k-2)(M/k T_byte + T_start)).
    Phase ``pull``: each gen GPU loads its slice from its machine's relay over PCIe, once
    its own instance's last op is done and the last chunk reached that relay: a one-rank
    ``broadcast`` (no fabric bytes; size = the slice) after ``slice / PCIE_BYTES_PER_S``
    of copy time. Laminar's lower RDMA priority for the chain is not modelled: the engine
    has no priority classes."""
    b, gl = ctx.b, ctx.gl
    shard_ids, shard_bytes = shards
    gen = _gen_ranks(ctx)
    sl = np.tile(member_bytes(shard_bytes, gl.size), gl.dp)
    if ctx.pl is not None:
        sl = np.concatenate([sl, np.tile(member_bytes(shard_bytes, ctx.pl.size), ctx.pl.dp)])
    machine = np.arange(len(gen)) // SERVER_GPUS
    relays = gen[::SERVER_GPUS]
    src = holders(0)
    push = b.emit(
        np.stack([src, np.full(len(src), relays[0])], axis=1),
        shard_bytes,
        stage="weight_sync",
        phase="push",
        kind="send",
        algorithm="direct",
        program=[0],
    )
    chunks = _chunks(int(shard_bytes.sum()), ctx.ws_bucket)
    n_ch = len(chunks)
    arrival = [push]  # per relay: the op ids after which it holds the whole model
    prev = None
    for j in range(len(relays) - 1):
        ids = b.next_id + np.arange(n_ch, dtype=_I64)
        if prev is None:
            after = np.full((n_ch, len(push)), -1, dtype=_I64)
            after[0] = push
        else:
            after = np.full((n_ch, 1), -1, dtype=_I64)
            after[:, 0] = prev
        same_hop = np.concatenate([[-1], ids[:-1]])[:, None]
        prev = b.emit(
            np.tile(relays[j : j + 2], (n_ch, 1)),
            chunks,
            stage="weight_sync",
            phase="relay_chain",
            kind="send",
            algorithm="direct",
            program=[],
            chain=False,
            after=np.concatenate([after, same_hop], axis=1),
        )
        arrival.append(prev[-1:])
    for m in range(len(relays)):
        on = np.flatnonzero(machine == m)
        b.emit(
            gen[on][:, None],
            sl[on],
            stage="weight_sync",
            phase="pull",
            kind="broadcast",
            compute=to_ps(sl[on] / PCIE_BYTES_PER_S),
            after=np.tile(arrival[m], (len(on), 1)),
        )
