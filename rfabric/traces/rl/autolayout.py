"""Default parallel layouts of `generate_rl`: the reference paper's, else a memory-fit search.

When the caller gives no train (or gen) layout, `default_train` and `default_gen` choose
one that fits the GPU memory as `memory` counts it:

* the paper's layouts for its models where the paper states them: OrchestrRL/RFabric
  Appendix C ("For Qwen-72B training, we primarily use TP=8, PP=2, and CP=3, and scale DP
  accordingly. For Qwen-57B-A14B training, we primarily use TP=4 and EP=16"), §2 (Qwen2.5-14B:
  "Train uses Megatron-LM with PP=2, DP=2 and TP=8, while the Gen side runs vLLM with TP=8")
  and §7.4 (Qwen3-235B-A22B generation in "TP=8 instances"), used when the GPU count admits
  them and they fit;
* otherwise the first fitting candidate in a fixed preference order (below), which states
  in what sense the result is minimal.

Train candidates: tp in 1, 2, 4, 8 (inside an 8-GPU server; dividing the query and KV
heads, as Megatron-LM requires), cp in 1..8, any pp up to the layer count, dp the rest, and
for MoE any ep dividing the experts and cp*dp. Order: smallest model-parallel size tp*pp*cp
(the most data parallelism: Narayanan et al. SC'21 takeaway 2), then smallest pp (so
tensor parallelism fills the server first: their takeaway 1), then smallest cp, then
smallest ep (fewest all-to-all peers), then ZeRO stage 0 before 1 (Megatron-LM's
distributed optimizer, tried only when the caller left ``zero_stage`` and
``distributed_optimizer`` unset). The chosen layout is thus minimal in (tp*pp*cp, pp, cp,
ep, zero) lexicographic order among the layouts that fit.

Gen candidates: TP instances (tp dividing the query heads) and, for MoE, EP instances
(ep a multiple of tp dividing the experts); order: smallest instance, then TP before EP,
then smallest tp: the most instances (veRL's throughput-oriented choice, OrchestrRL §6's
veRL-TO baseline). A gen candidate fits when its GPUs hold their weights and the KV cache
of their unit's share of the batch at prompt + median response length (at least one
longest sequence), so that the batch runs without preemption at typical lengths.

Nothing fitting raises `LayoutFitError` naming what would fit: for training the smallest
multiple of the GPU count (x2 .. x64) with a fitting layout, for generation the smallest
instance that fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import LayoutFitError
from ..models import MODELS, ModelConfig
from .memory import gen_kv_bytes, train_bytes

__all__ = ["default_train", "default_gen", "PAPER_TRAIN", "PAPER_GEN", "SERVER_GPUS"]

#: GPUs per server: tensor parallelism stays inside one (NVLink domain of an H800 server).
SERVER_GPUS = 8

#: Training layouts the reference paper states for its models (dp scaled).
PAPER_TRAIN: dict[str, dict[str, int]] = {
    "qwen2.5-14b": {"tp": 8, "pp": 2},  # §2: PP=2, DP=2, TP=8 on 32 GPUs
    "qwen2.5-72b": {"tp": 8, "pp": 2, "cp": 3},  # Appendix C
    "qwen2-57b-a14b": {"tp": 4, "ep": 16},  # Appendix C
}

#: Generation layouts the reference paper states for its models (instances scaled).
PAPER_GEN: dict[str, dict[str, int]] = {
    "qwen2.5-14b": {"tp": 8},  # §2: vLLM TP=8, DP=5 on 40 GPUs
    "qwen3-235b-a22b": {"tp": 8},  # §7.4: "175 TP=8 instances"
}

_MULTIPLES = (2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class TrainChoice:
    """A candidate training layout and the ZeRO stage it was sized with."""

    tp: int
    pp: int
    cp: int
    dp: int
    ep: int
    zero: int

    def layout(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "cp": self.cp, "dp": self.dp, "ep": self.ep}


def _is_paper_model(m: ModelConfig) -> bool:
    return MODELS.get(m.name) == m


def _train_fits(m, c: TrainChoice, cap, param, grad, tokens, act, recompute="none") -> bool:
    total, _, _ = train_bytes(
        m, c, zero=c.zero, param=param, grad=grad, tokens=tokens, act=act, recompute=recompute
    )
    return total <= cap


def _train_candidates(m: ModelConfig, gpus: int, zeros: tuple[int, ...]):
    tps = [t for t in (1, 2, 4, 8) if t <= SERVER_GPUS and m.heads % t == 0 and m.kv_heads % t == 0]
    out = []
    for tp in tps:
        for cp in range(1, 9):
            for pp in range(1, m.layers + 1):
                mp = tp * pp * cp
                if mp > gpus:
                    break
                if gpus % mp:
                    continue
                dp = gpus // mp
                eps = [e for e in range(1, m.experts + 1) if m.experts % e == 0 and (cp * dp) % e == 0]
                for ep in eps or [1]:
                    for z in zeros:
                        out.append(((mp, pp, cp, ep, z), TrainChoice(tp, pp, cp, dp, ep, z)))
    out.sort(key=lambda kc: kc[0])
    return [c for _, c in out]


def _search_train(m, gpus, zeros, cap, param, grad, tokens, act, recompute="none") -> TrainChoice | None:
    for c in _train_candidates(m, gpus, zeros):
        if _train_fits(m, c, cap, param, grad, tokens, act, recompute):
            return c
    return None


def default_train(
    m: ModelConfig,
    gpus: int,
    *,
    zero: int | None,
    cap: float,
    param: int,
    grad: int,
    tokens: int,
    act: int,
    recompute: str = "none",
) -> tuple[TrainChoice, str]:
    """The default training layout and where it comes from (``"paper"`` or ``"search"``).

    ``zero`` None lets the search use ZeRO stage 0 or 1; ``tokens`` is the micro-batch
    capacity (``micro_batch_tokens``); ``recompute`` the activation recomputation the
    memory count assumes. Raises `LayoutFitError` when nothing fits."""
    zeros = (0, 1) if zero is None else (zero,)
    paper = PAPER_TRAIN.get(m.name) if _is_paper_model(m) else None
    if paper is not None:
        tp, pp, cp, ep = (paper.get(k, 1) for k in ("tp", "pp", "cp", "ep"))
        mp = tp * pp * cp
        if gpus % mp == 0 and (gpus // mp * cp) % ep == 0:
            for z in zeros:
                c = TrainChoice(tp, pp, cp, gpus // mp, ep, z)
                if _train_fits(m, c, cap, param, grad, tokens, act, recompute):
                    return c, "paper"
    c = _search_train(m, gpus, zeros, cap, param, grad, tokens, act, recompute)
    if c is not None:
        return c, "search"
    hint = "no layout fits up to 64x the GPUs; lower micro_batch_tokens (activations) or the response max"
    if recompute == "none" and _search_train(m, gpus, zeros, cap, param, grad, tokens, act, "full"):
        hint = "recompute='full' (activation recomputation) would fit"
    for k in _MULTIPLES:
        more = _search_train(m, gpus * k, zeros, cap, param, grad, tokens, act, recompute)
        if more is not None:
            hint = f"{gpus * k} train GPUs would fit ({_fmt(more.layout())}, ZeRO {more.zero})"
            break
    raise LayoutFitError(
        f"{m.name}: no training layout of {gpus} GPUs fits {cap / 1e9:.0f} GB per GPU (weights, "
        f"gradients, optimizer state and the activations of {tokens}-token micro-batches); {hint}"
    )


@dataclass(frozen=True)
class GenChoice:
    """A candidate generation instance layout."""

    tp: int
    ep: int
    dp: int

    @property
    def mode(self) -> str:
        return "ep" if self.ep > 1 else "tp"

    def layout(self) -> dict[str, int]:
        return (
            {"tp": self.tp, "ep": self.ep, "dp": self.dp} if self.ep > 1 else {"tp": self.tp, "dp": self.dp}
        )


def gen_need(m: ModelConfig, tp: int, ep: int, *, param: int, act: int, seq: int) -> float:
    """Per-GPU bytes of a TP (ep = 1) or EP instance: its weight share plus the KV cache of
    ``seq`` context tokens per attention TP group (as `memory.memory_need` counts them)."""
    experts = m.layers * m.layer_expert_params
    w = m.params / tp if ep == 1 else (m.params - experts) / tp + experts / ep
    return w * param + gen_kv_bytes(m, tp, seq, act)


def _kv_tokens(c: GenChoice, gpus: int, seq: int, batch: int, typical: int) -> int:
    """Context tokens a unit (attention TP group) must hold: its share of the batch at the
    typical length (prompt + median response), at least one longest sequence."""
    units = gpus // c.tp
    return max(seq, -(-batch // units) * typical)


def _gen_candidates(m: ModelConfig, gpus: int):
    out = []
    for tp in (1, 2, 4, 8, 16, 32, 64):
        if m.heads % tp == 0 and gpus % tp == 0:
            out.append(((tp, 0, tp), GenChoice(tp, 1, gpus // tp)))
    if m.is_moe:
        for tp in (1, 2, 4, 8):
            if m.heads % tp:
                continue
            for ep in range(2 * tp, m.experts + 1, tp):
                if m.experts % ep == 0 and gpus % ep == 0:
                    out.append(((ep, 1, tp), GenChoice(tp, ep, gpus // ep)))
    out.sort(key=lambda kc: kc[0])
    return [c for _, c in out]


def _gen_fits(m, c: GenChoice, gpus, cap, param, act, seq, batch, typical) -> bool:
    kv = _kv_tokens(c, gpus, seq, batch, typical)
    return gen_need(m, c.tp, c.ep, param=param, act=act, seq=kv) <= cap


def _search_gen(m, gpus, cap, param, act, seq, batch, typical) -> GenChoice | None:
    for c in _gen_candidates(m, gpus):
        if _gen_fits(m, c, gpus, cap, param, act, seq, batch, typical):
            return c
    return None


def default_gen(
    m: ModelConfig,
    gpus: int,
    *,
    cap: float,
    param: int,
    act: int,
    seq: int,
    batch: int = 1,
    typical: int = 0,
) -> tuple[GenChoice, str]:
    """The default generation layout and where it comes from (``"paper"`` or ``"search"``).

    A candidate fits when each GPU holds its weights and the KV cache of its unit's share of
    the ``batch`` sequences at ``typical`` tokens each, or of one ``seq``-token sequence if
    that is more (the memory check of a given layout asks only the latter). Raises
    `LayoutFitError` when nothing fits."""
    args = (cap, param, act, seq, batch, typical)
    paper = PAPER_GEN.get(m.name) if _is_paper_model(m) else None
    if paper is not None:
        tp, ep = paper.get("tp", 1), paper.get("ep", 1)
        size = max(tp, ep)
        if gpus % size == 0:
            c = GenChoice(tp, ep, gpus // size)
            if _gen_fits(m, c, gpus, *args):
                return c, "paper"
    c = _search_gen(m, gpus, *args)
    if c is not None:
        return c, "search"
    hint = "no TP or EP instance fits"
    more = _search_gen(m, math.lcm(64, m.experts or 1), cap, param, act, seq, 1, 0)
    if more is not None:
        size = max(more.tp, more.ep)
        hint = (
            f"instances of {size} GPUs would fit ({_fmt({k: v for k, v in more.layout().items() if k != 'dp'})}); "
            f"gen_gpus must be a multiple of {size}"
        )
    raise LayoutFitError(
        f"{m.name}: no generation instance of {gpus} GPUs fits {cap / 1e9:.0f} GB per GPU (weights "
        f"and the KV cache of one {seq}-token sequence); {hint}"
    )


def _fmt(d: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())
