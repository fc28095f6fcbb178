"""Generation stage: prefill and decode of every instance, and response streaming.

`emit_generation` emits, per layer block, the prefill collectives (on the prefill
instances under prefill/decode disaggregation, followed by the KV-cache sends to the
decode ranks, `kv_pairs`), then per chunk of
``decode_steps_per_op`` decode steps the decode collectives (TP all-reduce; EP all-to-all
or AFD m2n), and after each chunk the ``send`` of the samples that finished in it from
their unit to their train replica. Sizes and the streamed-sample format are in
`generate_rl`'s Notes.
"""

from __future__ import annotations

import numpy as np

from ...errors import SpecError
from .builder import cdiv
from .compute import Roofline
from .context import RLContext
from .layout import GenLayout

__all__ = ["emit_generation", "kv_pairs", "TOKEN_ID_BYTES", "LOGPROB_BYTES", "REWARD_BYTES"]


#: Response streaming: bytes per token id (int32), per response-token log-probability
#: (fp32) and per sample reward (fp32). A sample of prompt p and response n tokens costs
#: ``4 p + 8 n + 4`` bytes (token ids of prompt and response, one log-prob per response
#: token, one reward).
TOKEN_ID_BYTES = 4
LOGPROB_BYTES = 4
REWARD_BYTES = 4

_I64 = np.int64


def emit_generation(ctx: RLContext, it: int, lengths: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Emit prefill, decode and response streaming of iteration ``it``.

    Returns the stream hand-offs: (train target ranks, stream op ids) pairs.
    """
    gl, b, K = ctx.gl, ctx.b, ctx.K
    b.iteration = it
    gen_period, stream_period = ctx.new_period(), ctx.new_period()
    b.period = gen_period
    n = len(lengths)
    unit_of = np.arange(n) % gl.n_units
    n_u = np.bincount(unit_of, minlength=gl.n_units)
    upi = gl.units_per_instance
    n_i = n_u.reshape(gl.dp, upi).sum(axis=1)
    n_chunks = cdiv(int(lengths.max()), K)
    T = n_chunks * K
    cnt = np.bincount(unit_of * (T + 1) + lengths, minlength=gl.n_units * (T + 1)).reshape(gl.n_units, T + 1)
    A_u = n_u[:, None] - np.cumsum(cnt, axis=1)[:, :T]  # active sequences (unit, step)
    A_i = A_u.reshape(gl.dp, upi, T).sum(axis=1)
    S_u = A_u.reshape(gl.n_units, n_chunks, K).sum(axis=2)  # (unit, chunk)
    S_i = S_u.reshape(gl.dp, upi, n_chunks).sum(axis=1)
    last_chunk = np.full(gl.dp, -1)
    for i in range(gl.dp):
        nz = np.flatnonzero(S_i[i])
        if len(nz):
            last_chunk[i] = nz[-1]

    t_attn, t_ffn, t_exp, t_head = ctx.rf.decode_times(A_u, A_i)
    chunk = lambda x: x.reshape(x.shape[0], n_chunks, K).sum(axis=2)  # noqa: E731
    c_attn, c_ffn, c_head = chunk(t_attn), chunk(t_ffn), chunk(t_head)
    c_exp = chunk(t_exp) if t_exp is not None else None

    # Prefill: prompt_len * n_u tokens per unit, one op per collective and layer block,
    # on the gen instances or, disaggregated, on the prefill instances (then KV transfer).
    kv_last = None
    if ctx.pl is None:
        _prefill(ctx, ctx.gl, ctx.rf, n_u, n_i)
    else:
        kv_last = _disaggregated_prefill(ctx, n_u)

    # Decode chunks, then the streams of the samples that finished in each chunk.
    fin_chunk = (lengths - 1) // K
    sample_bytes = TOKEN_ID_BYTES * ctx.prompt + (TOKEN_ID_BYTES + LOGPROB_BYTES) * lengths + REWARD_BYTES
    replica = np.arange(n) % ctx.tl.dp
    key = (fin_chunk * gl.n_units + unit_of) * ctx.tl.dp + replica
    order = np.argsort(key, kind="stable")
    ukeys, starts = np.unique(key[order], return_index=True)
    sizes = np.add.reduceat(sample_bytes[order], starts) if len(starts) else np.empty(0, _I64)
    s_chunk = ukeys // (gl.n_units * ctx.tl.dp)
    s_unit = (ukeys // ctx.tl.dp) % gl.n_units
    s_replica = ukeys % ctx.tl.dp
    targets = ctx.tl.grid[0, :, 0, 0]  # first rank of each replica
    streams: list[tuple[np.ndarray, np.ndarray]] = []
    # Per sender rank: its latest stream op, and the rank's last op and pending compute
    # when it was emitted (to tell, at the end, whether that stream carried the rest).
    n_ranks = len(b.pending)
    carry_id = np.full(n_ranks, -1, dtype=_I64)
    carry_last = np.full(n_ranks, -1, dtype=_I64)
    carry_ps = np.zeros(n_ranks, dtype=_I64)
    for c in range(n_chunks):
        active = last_chunk >= c
        if active.any():
            for bi, nb in enumerate(ctx.blocks):
                _gen_block(
                    ctx,
                    "decode",
                    nb,
                    S_u[:, c],
                    S_i[:, c],
                    active,
                    c_attn[:, c] * nb + (c_head[:, c] if bi == 0 else 0),
                    c_ffn[:, c] * nb,
                    None if c_exp is None else c_exp[:, c] * nb,
                )
        sel = np.flatnonzero(s_chunk == c)
        # colocated placement: samples already on the replica's GPU do not travel
        sel = sel[gl.units[s_unit[sel], 0] != targets[s_replica[sel]]]
        if len(sel):
            b.period = stream_period
            senders = gl.units[s_unit[sel], 0]
            dst = targets[s_replica[sel]]
            ids = b.emit(
                np.stack([senders, dst], axis=1),
                sizes[sel],
                stage="response_stream",
                phase="stream",
                kind="send",
                algorithm="direct",
                program=[0],
                chain=False,
                after=None if kv_last is None else kv_last[s_unit[sel]],
            )
            streams.append((dst, ids))
            carry_id[senders] = ids  # ids ascend: a repeated sender keeps its latest
            carry_last[senders] = b.last_op[senders]
            carry_ps[senders] = b.pending[senders]
            b.period = gen_period
    _settle_compute(ctx, carry_id, carry_last, carry_ps)
    return streams


def _settle_compute(ctx: RLContext, carry_id, carry_last, carry_ps) -> None:
    """Place the compute the rollout left pending on its ranks (no gen op of theirs
    followed it: a TP-1 unit has no collective of its own).

    A stream send takes its sender's pending compute without clearing it (the send does
    not block the decoder), so a rank's last stream already waits for all of the rank's
    compute when nothing was added after it: then that stream becomes the rank's latest
    op (what waits on the rollout on this rank, e.g. the next rollout or, in async mode,
    the weight sync, waits for it) and the compute is cleared. Otherwise no op waits on
    that compute (a unit or prefill rank whose last work no send follows): under the
    disaggregated placement it is dropped, since charging it to the rank's next op (the
    weight sync) would delay a stage that does not wait on it; under the colocated
    placement the rank's next op is the trainer's, on the same GPU, which does wait for
    the GPU to finish generating, so it stays.
    """
    b = ctx.b
    ranks = ctx.gl.instances.ravel()
    colocated = int(ranks.min()) < ctx.tl.grid.size  # gen runs on the train GPUs
    if ctx.pl is not None:
        ranks = np.concatenate([ranks, ctx.pl.instances.ravel()])
    owed = b.pending[ranks] > 0
    carried = (
        owed
        & (carry_id[ranks] >= 0)
        & (b.last_op[ranks] == carry_last[ranks])
        & (b.pending[ranks] == carry_ps[ranks])
    )
    b.last_op[ranks[carried]] = carry_id[ranks[carried]]
    b.pending[ranks[carried]] = 0
    if not colocated:
        b.pending[ranks[owed & ~carried]] = 0


def _prefill(ctx: RLContext, gl: GenLayout, rf: Roofline, n_u: np.ndarray, n_i: np.ndarray) -> None:
    """Prefill of ``n_u`` (``n_i``) prompts per unit (instance) of layout ``gl``."""
    pt_attn, pt_ffn, pt_exp, pt_head = rf.prefill_times(n_u, n_i)
    for bi, nb in enumerate(ctx.blocks):
        _gen_block(
            ctx,
            "prefill",
            nb,
            ctx.prompt * n_u,
            ctx.prompt * n_i,
            n_i > 0,
            pt_attn * nb + (pt_head if bi == 0 else 0),
            pt_ffn * nb,
            None if pt_exp is None else pt_exp * nb,
            gl,
        )


def kv_pairs(kv_heads: int, tp_src: int, tp_dst: int) -> dict[tuple[int, int], int]:
    """KV heads each (source TP rank, destination TP rank) pair carries: heads in blocks of
    ``kv_heads / tp`` per rank, or each on ``tp / kv_heads`` ranks; each destination rank
    takes a head from holder ``rank mod holders``. SpecError if a tp and kv_heads do not
    divide one another (vLLM's rule too)."""

    def split(tp: int, side: str) -> tuple[list[list[int]], list[list[int]]]:
        if max(tp, kv_heads) % min(tp, kv_heads):
            raise SpecError(f"{side} tp={tp} and the model's {kv_heads} KV heads must divide one another")
        if tp <= kv_heads:
            per = kv_heads // tp
            return [[g // per] for g in range(kv_heads)], [
                list(range(t * per, (t + 1) * per)) for t in range(tp)
            ]
        rep = tp // kv_heads
        return [[g * rep + i for i in range(rep)] for g in range(kv_heads)], [[t // rep] for t in range(tp)]

    holders, _ = split(tp_src, "prefill")
    _, needs = split(tp_dst, "gen")
    out: dict[tuple[int, int], int] = {}
    for d, heads in enumerate(needs):
        for g in heads:
            s = holders[g][d % len(holders[g])]
            out[(s, d)] = out.get((s, d), 0) + 1
    return dict(sorted(out.items()))


def _disaggregated_prefill(ctx: RLContext, n_u: np.ndarray) -> np.ndarray:
    """Prefill on the prefill instances (unit u on instance ``u mod dp``), then the KV
    cache of each unit's prompts to the unit's ranks. Returns per unit the last KV send
    id into it (-1 if none); the unit's ranks' next ops wait for their sends."""
    pl, gl, m, b = ctx.pl, ctx.gl, ctx.m, ctx.b
    src_of = np.arange(gl.n_units) % pl.dp
    n_p = np.bincount(src_of, weights=n_u, minlength=pl.dp).astype(_I64)
    _prefill(ctx, pl, ctx.prf, n_p, n_p)
    per_token_head = m.layers * m.kv_head_elems * ctx.act
    pairs = kv_pairs(m.kv_cache_heads, pl.tp, gl.tp)
    kv_last = np.full(gl.n_units, -1, dtype=_I64)
    by_src = [np.flatnonzero(src_of == p) for p in range(pl.dp)]
    for k in range(max(map(len, by_src))):  # the k-th unit of every prefill instance
        ps = np.array([p for p in range(pl.dp) if len(by_src[p]) > k], dtype=_I64)
        us = np.array([by_src[p][k] for p in ps], dtype=_I64)
        ps, us = ps[n_u[us] > 0], us[n_u[us] > 0]
        for (s, d), heads in pairs.items():
            if not len(us):
                break
            dst = gl.units[us, d]
            ids = b.emit(
                np.stack([pl.instances[ps, s], dst], axis=1),
                heads * ctx.prompt * n_u[us] * per_token_head,
                stage="gen",
                phase="kv_transfer",
                kind="send",
                algorithm="direct",
                program=[0],
            )
            b.expect(dst, ids)
            kv_last[us] = np.maximum(kv_last[us], ids)
    return kv_last


def _gen_block(ctx: RLContext, phase, nb, tok_u, tok_i, active, attn_s, ffn_s, exp_s, gl=None):
    """Emit one layer block of ops for every active instance of ``gl`` (default the gen
    instances).

    ``tok_u``/``tok_i``: tokens (summed over the aggregated steps) per unit/instance;
    ``attn_s``/``ffn_s``: per-unit compute (s); ``exp_s``: per-instance expert compute.
    """
    m, b = ctx.m, ctx.b
    gl = ctx.gl if gl is None else gl
    h, a, k = m.hidden, ctx.act, m.top_k
    s = 1 if m.shared_expert_ffn else 0
    unit_active = np.repeat(active, gl.units_per_instance)
    units_on = np.flatnonzero(unit_active & (tok_u > 0))
    inst_on = np.flatnonzero(active)
    ar_size = nb * h * a * tok_u.astype(_I64)
    b.compute(gl.units[np.flatnonzero(unit_active)], attn_s[unit_active])
    if gl.tp > 1:
        b.emit(gl.units[units_on], ar_size[units_on], stage="gen", phase=phase, kind="all_reduce")
    if gl.mode == "tp":
        b.compute(gl.units[np.flatnonzero(unit_active)], ffn_s[unit_active])
        if gl.tp > 1:
            b.emit(gl.units[units_on], ar_size[units_on], stage="gen", phase=phase, kind="all_reduce")
        return
    tok = tok_i.astype(_I64)[inst_on]
    if gl.mode == "ep":
        size = -(-(nb * k * h * a * tok) // gl.ep)
        ranks = gl.instances[inst_on]
        b.emit(ranks, size, stage="gen", phase=phase, kind="all_to_all")
        b.compute(ranks, exp_s[inst_on])
        b.emit(ranks, size, stage="gen", phase=phase, kind="all_to_all")
        if s:
            b.compute(gl.units[np.flatnonzero(unit_active)], ffn_s[unit_active])
            if gl.tp > 1:
                b.emit(gl.units[units_on], ar_size[units_on], stage="gen", phase=phase, kind="all_reduce")
        return
    # AFD: attention ranks -> FFN ranks -> attention ranks.
    inst = gl.instances[inst_on]
    attn_r, ffn_r = inst[:, : gl.attn], inst[:, gl.attn :]
    out = -(-(nb * (k + s) * h * a * tok) // gl.attn)
    back = -(-(nb * (k + s) * h * a * tok) // gl.ffn)
    for src, dst, size in ((attn_r, ffn_r, out), (ffn_r, attn_r, back)):
        if src is ffn_r:  # the experts run between dispatch and combine
            b.compute(ffn_r, exp_s[inst_on])
        b.emit(
            np.concatenate([src, dst], axis=1),
            size,
            stage="gen",
            phase=phase,
            kind="m2n",
            algorithm="direct",
            m2n_senders=src.shape[1],
        )
