"""Training stage: Megatron-style forward/backward with a 1F1B pipeline, then gradient sync.

`receive_samples` makes the first ranks of each replica wait for their streamed samples.
`emit_training` splits the samples into optimizer steps and micro-batches and emits per
layer the TP all-reduces, CP and EP all-to-alls and PP sends in a merged 1F1B order of all
stages, then per stage the gradient synchronisation (all-reduce, ZeRO reduce-scatter and
all-gather, or buckets overlapping the backward; ZeRO-2/3 per layer) around the optimizer
step's compute gap. `forward_pass` runs the same pipeline forward only (make-experience).
Sizes and compute are in `generate_rl`'s Notes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .builder import cdiv
from .context import RLContext

__all__ = ["emit_training", "receive_samples", "forward_pass", "Pass", "families"]


@dataclass(frozen=True)
class Pass:
    """What one pipeline pass over the samples emits: its stage and phase names, whether
    it runs backward (then gradient sync follows) and whether the last stage runs the LM
    head (log-probs: yes; a critic's value head or a reward model's score head: no)."""

    stage: str = "train"
    fwd: str = "fwd"
    bwd: str = "bwd"
    backward: bool = True
    lm_head: bool = True


TRAIN = Pass()


def receive_samples(ctx: RLContext, streams) -> None:
    """Every stage-0 rank of a replica waits for all the samples streamed to the replica."""
    tl, b = ctx.tl, ctx.b
    for dst, ids in streams:
        replica = np.searchsorted(tl.grid[0, :, 0, 0], dst)
        ranks = tl.grid[0][replica].reshape(len(ids), -1)
        b.expect(ranks, np.repeat(ids[:, None], ranks.shape[1], axis=1))


def micro_batches(ctx: RLContext, tokens: np.ndarray) -> tuple[int, int, float]:
    """(micro-batches per replica, tokens per micro-batch, s_eff) of samples of ``tokens``."""
    tl = ctx.tl
    total = int(tokens.sum())
    m_mb = max(1, cdiv(total, tl.dp * ctx.mbt))
    t_mb = cdiv(total, tl.dp * m_mb)
    s_eff = float((tokens.astype(np.float64) ** 2).sum() / total)
    return m_mb, t_mb, s_eff


def forward_pass(ctx: RLContext, it: int, lengths: np.ndarray, ps: Pass) -> None:
    """One forward-only pass (``ps.backward`` False) over all samples of iteration ``it``
    in the train layout, with its own period: micro-batches as in training."""
    ctx.b.iteration = it
    m_mb, t_mb, s_eff = micro_batches(ctx, ctx.prompt + lengths)
    _pipeline(ctx, m_mb, t_mb, s_eff, ctx.new_period(), -1, ps)


def emit_training(ctx: RLContext, it: int, lengths: np.ndarray) -> None:
    """Emit forward/backward (1F1B) and gradient sync of iteration ``it`` (the samples'
    hand-offs are set by `receive_samples`)."""
    ctx.b.iteration = it
    tokens = ctx.prompt + lengths
    for step_tokens in np.array_split(tokens, ctx.steps):
        m_mb, t_mb, s_eff = micro_batches(ctx, step_tokens)
        fb_period = ctx.new_period()
        grad_period = ctx.new_period()
        _pipeline(ctx, m_mb, t_mb, s_eff, fb_period, grad_period, TRAIN)


def _train_sizes(ctx: RLContext, t_mb: int) -> dict[str, int]:
    m, tl, a = ctx.m, ctx.tl, ctx.act
    t = cdiv(t_mb, tl.cp)
    return {
        "t": t,
        "tp_ar": t * m.hidden * a,
        "cp_qkv": cdiv(t * (m.q_dim + 2 * m.kv_dim) * a, tl.tp),
        "cp_out": cdiv(t * m.q_dim * a, tl.tp),
        "ep": cdiv(t, tl.tp) * m.top_k * m.hidden * a,
        "pp": t * m.hidden * a,
    }


def _layer(
    ctx: RLContext, s: int, backward: bool, sz: dict[str, int], sec: dict[str, float], ps: Pass
) -> None:
    """One layer of stage s, forward or backward, on every group of the stage. Under full
    activation recomputation a backward first re-runs the layer's forward (phase
    ``<fwd>_recompute``): its compute, TP all-reduces and EP all-to-alls."""
    if ctx.zero == 3:
        _gather(ctx, s, ctx.m.layer_dense_params, ctx.m.layer_expert_params, ps.stage)
    if backward:
        if ctx.recompute == "full":
            _layer_body(ctx, s, False, sz, sec, ps.stage, f"{ps.fwd}_recompute")
        _layer_body(ctx, s, True, sz, sec, ps.stage, ps.bwd)
        if ctx.zero >= 2:
            _scatter(ctx, s, ctx.m.layer_dense_params, ctx.m.layer_expert_params)
    else:
        _layer_body(ctx, s, False, sz, sec, ps.stage, ps.fwd)


def _layer_body(
    ctx: RLContext, s: int, backward: bool, sz: dict[str, int], sec: dict[str, float], stage: str, ph: str
) -> None:
    """A layer's compute and collectives, forward or backward (backward: twice the FLOPs,
    the blocks in reverse order)."""
    m, tl, b = ctx.m, ctx.tl, ctx.b
    x = 2.0 if backward else 1.0
    ranks = tl.grid[s]
    tp_g = tl.tp_groups(s)

    def tp_ar():
        if tl.tp > 1:
            b.emit(tp_g, sz["tp_ar"], stage=stage, phase=ph, kind="all_reduce")

    def attention():
        b.compute(ranks, x * sec["qkv"] if not backward else x * sec["o"])
        if tl.cp > 1:
            first, second = ("cp_qkv", "cp_out") if not backward else ("cp_out", "cp_qkv")
            b.emit(tl.cp_groups(s), sz[first], stage=stage, phase=ph, kind="all_to_all")
            b.compute(ranks, x * sec["core"])
            b.emit(tl.cp_groups(s), sz[second], stage=stage, phase=ph, kind="all_to_all")
        else:
            b.compute(ranks, x * sec["core"])
        b.compute(ranks, x * sec["o"] if not backward else x * sec["qkv"])
        tp_ar()

    def ffn():
        if not m.is_moe:
            b.compute(ranks, x * sec["mlp"])
            tp_ar()
        elif tl.ep == 1:
            b.compute(ranks, x * (sec["experts"] + sec["shared"] + sec["router"]))
            tp_ar()
        else:
            ep_g = tl.ep_groups(s)
            b.compute(ranks, x * sec["router"])
            b.emit(ep_g, sz["ep"], stage=stage, phase=ph, kind="all_to_all")
            b.compute(ranks, x * sec["experts"])
            b.emit(ep_g, sz["ep"], stage=stage, phase=ph, kind="all_to_all")
            if m.shared_expert_ffn:
                b.compute(ranks, x * sec["shared"])
                tp_ar()

    if backward:
        ffn()
        attention()
    else:
        attention()
        ffn()


def families(ctx: RLContext, s: int) -> list[tuple[np.ndarray, int, int]]:
    """Parameter families of stage s whose data-parallel groups have > 1 rank: (groups,
    family: 0 dense / 1 expert, shards per copy: tp or ep tp)."""
    tl = ctx.tl
    fams = [(tl.dp_groups(s), 0, tl.tp)]
    if ctx.m.is_moe:
        fams.append((tl.edp_groups(s), 1, tl.ep * tl.tp))
    return [f for f in fams if f[0].shape[1] > 1]


def _gather(ctx: RLContext, s: int, dense: int, expert: int, stage: str) -> None:
    """ZeRO-3 / FSDP: all-gather the parameters of a unit (layer) before it runs."""
    for grp, fam, div in families(ctx, s):
        n = dense if fam == 0 else expert
        if n:
            ctx.b.emit(grp, cdiv(n, div) * ctx.param, stage=stage, phase="param_gather", kind="all_gather")


def _scatter(ctx: RLContext, s: int, dense: int, expert: int) -> None:
    """ZeRO-2/3: reduce-scatter a unit's gradients after its backward (side op, chained
    per family; the stage's optimizer step waits for the last)."""
    for grp, fam, div in families(ctx, s):
        n = dense if fam == 0 else expert
        if n:
            key = (s, fam)
            ctx.rs_last[key] = ctx.b.emit(
                grp,
                cdiv(n, div) * ctx.grad,
                stage="train",
                phase="grad_sync",
                kind="reduce_scatter",
                chain=False,
                after=ctx.rs_last.get(key),
            )


def _pipeline(
    ctx: RLContext, m_mb: int, t_mb: int, s_eff: float, fb_period: int, grad_period: int, ps: Pass
) -> None:
    """1F1B schedule of every stage (all forwards if ``ps.backward`` is False), merged into
    one topological emission order."""
    tl, b, pp = ctx.tl, ctx.b, ctx.tl.pp
    sz = _train_sizes(ctx, t_mb)
    sec = ctx.rf.train_flops(sz["t"], s_eff)
    progs = []
    for s in range(pp):
        warm = min(pp - s - 1, m_mb)
        order = [("F", j) for j in range(warm)]
        for j in range(m_mb - warm):
            order += [("F", warm + j), ("B", j)]
        order += [("B", j) for j in range(m_mb - warm, m_mb)]
        if not ps.backward:
            order = [("F", j) for j in range(m_mb)]
        prog = []
        for d, j in order:
            if d == "F":
                prog += (
                    ([("recvF", j)] if s > 0 else []) + [("F", j)] + ([("sendF", j)] if s < pp - 1 else [])
                )
            else:
                prog += (
                    ([("recvB", j)] if s < pp - 1 else []) + [("B", j)] + ([("sendB", j)] if s > 0 else [])
                )
        progs.append(prog + ([("grad", 0)] if ps.backward else []))
    sent: dict[tuple[str, int, int], np.ndarray] = {}
    buckets: dict[int, _GradBuckets] = {}
    ptr = [0] * pp
    remaining = sum(len(p) for p in progs)
    while remaining:
        progress = False
        for s in range(pp):
            while ptr[s] < len(progs[s]):
                what, j = progs[s][ptr[s]]
                if what == "recvF" or what == "recvB":
                    key = ("F", s - 1, j) if what == "recvF" else ("B", s + 1, j)
                    if key not in sent:
                        break
                    b.expect(tl.grid[s].ravel(), sent.pop(key))
                elif what in ("F", "B"):
                    b.period = fb_period
                    backward = what == "B"
                    head = ps.lm_head and s == pp - 1
                    if backward and head:
                        b.compute(tl.grid[s], 2.0 * sec["head"])
                    dense, _ = tl.stage_params(s)
                    rest = dense - tl.stage_layers[s] * ctx.m.layer_dense_params  # embedding, head
                    if ctx.zero == 3:
                        _gather(ctx, s, rest, 0, ps.stage)
                    bk = None
                    if backward and j == m_mb - 1 and ctx.bucket:
                        bk = buckets[s] = _GradBuckets(ctx, s)
                        b.period = grad_period
                        if s == pp - 1:
                            bk.add(ctx.m.head_params, 0)
                    layers = range(ctx.tl.stage_layers[s])
                    for _ in layers:
                        b.period = fb_period
                        _layer(ctx, s, backward, sz, sec, ps)
                        if bk is not None:
                            b.period = grad_period
                            bk.add(ctx.m.layer_dense_params, ctx.m.layer_expert_params)
                    if bk is not None and s == 0:
                        bk.add(ctx.m.embedding_params, 0)
                    if backward and ctx.zero >= 2:
                        _scatter(ctx, s, rest, 0)
                    if not backward and head:
                        b.compute(tl.grid[s], sec["head"])
                elif what in ("sendF", "sendB"):
                    b.period = fb_period
                    peer = s + 1 if what == "sendF" else s - 1
                    pairs = np.stack([tl.grid[s].ravel(), tl.grid[peer].ravel()], axis=1)
                    ids = b.emit(
                        pairs,
                        sz["pp"],
                        stage=ps.stage,
                        phase=ps.fwd if what == "sendF" else ps.bwd,
                        kind="send",
                        algorithm="direct",
                        program=[0],
                    )
                    sent[(what[-1], s, j)] = ids
                else:
                    b.period = grad_period
                    _grad_sync(ctx, s, buckets.get(s))
                ptr[s] += 1
                remaining -= 1
                progress = True
        if not progress:
            raise RuntimeError("internal error: pipeline schedule cannot progress")


def _grad_jobs(ctx: RLContext, s: int) -> list[tuple[np.ndarray, int, int, int]]:
    """Per parameter family of stage s with a group of > 1 rank: (groups, parameters per
    rank, family: 0 dense / 1 expert, parameter shards per copy)."""
    counts = ctx.tl.stage_params(s)
    return [(grp, cdiv(counts[fam], div), fam, div) for grp, fam, div in families(ctx, s)]


class _GradBuckets:
    """Gradient buckets of stage s, reduced as soon as the last micro-batch's backward has
    produced them (side ops, chained per family, as NCCL's stream orders them); `finish`
    makes the stage's next op wait for the last bucket of each family."""

    def __init__(self, ctx: RLContext, s: int):
        self.ctx, self.fams = ctx, []
        cap = ctx.bucket
        for grp, n, fam, div in _grad_jobs(ctx, s):
            total = n * ctx.grad
            count = cdiv(total, cap)
            sizes = np.full(count, cap, dtype=np.int64)
            sizes[-1] = total - cap * (count - 1)
            self.fams.append(
                {"grp": grp, "fam": fam, "div": div, "sizes": sizes, "k": 0, "seen": 0, "last": None}
            )

    def add(self, dense: int, expert: int) -> None:
        """The backward has produced the gradients of ``dense`` + ``expert`` more parameters."""
        for f in self.fams:
            f["seen"] += dense if f["fam"] == 0 else expert
            self._emit(f, cdiv(f["seen"], f["div"]) * self.ctx.grad)

    def finish(self) -> None:
        b = self.ctx.b
        for f in self.fams:
            self._emit(f, None)
            grp = f["grp"]
            b.expect(grp, np.repeat(f["last"][:, None], grp.shape[1], axis=1))

    def _emit(self, f: dict, ready: int | None) -> None:
        b, ends = self.ctx.b, np.cumsum(f["sizes"])
        kind = "reduce_scatter" if self.ctx.zero else "all_reduce"
        while f["k"] < len(ends) and (ready is None or ends[f["k"]] <= ready):
            after = None if f["last"] is None else f["last"]
            f["last"] = b.emit(
                f["grp"],
                int(f["sizes"][f["k"]]),
                stage="train",
                phase="grad_sync",
                kind=kind,
                chain=False,
                after=after,
            )
            f["k"] += 1


def _grad_sync(ctx: RLContext, s: int, buckets: _GradBuckets | None) -> None:
    """Gradient reduction (unless bucketed during the backward), the optimizer step, and
    with the distributed optimizer the parameter all-gather."""
    tl, b = ctx.tl, ctx.b
    jobs = _grad_jobs(ctx, s)
    if ctx.zero >= 2:  # reduce-scattered unit by unit during every backward
        for grp, _, fam, _ in jobs:
            last = ctx.rs_last.pop((s, fam))
            b.expect(grp, np.repeat(last[:, None], grp.shape[1], axis=1))
    elif buckets is not None:
        buckets.finish()
    else:
        kind = "reduce_scatter" if bool(ctx.zero) else "all_reduce"
        for grp, n, _, _ in jobs:
            b.emit(grp, n * ctx.grad, stage="train", phase="grad_sync", kind=kind)
    if ctx.opt_bytes:
        dense, expert = tl.stage_params(s)
        shard = (tl.dp * tl.cp, tl.edp) if ctx.zero else (1, 1)
        params = dense / tl.tp / shard[0] + expert / (tl.ep * tl.tp) / shard[1]
        b.compute(tl.grid[s], ctx.rf.optimizer_s(params, ctx.opt_bytes))
    if ctx.zero in (1, 2):
        for grp, n, _, _ in jobs:
            b.emit(grp, n * ctx.param, stage="train", phase="grad_sync", kind="all_gather")


# -- weight sync -----------------------------------------------------------------------
