"""Synthetic communication traces of disaggregated RL post-training (`generate_rl`).

Builds, from a model architecture and a placement, the op DAG of ``traces/README.md`` for
a number of RL iterations: training (Megatron-style TP/CP/EP/PP with 1F1B, then gradient
synchronisation), generation (prefill and aggregated decode steps in TP, EP or AFD mode),
response streaming from generation to training, and weight synchronisation from training
to generation (flat or two-level). Columns are built with numpy, one vectorised call per
collective per group family, so that 2048-GPU traces take seconds, not hours.

Invariant: ops are emitted in a topological order, so op_ids ascend and every dependency
points to an earlier op. Each rank has a program order (`_Builder.last_op`); an op depends
on the previous op of each rank it runs on, plus explicit cross-rank hand-offs (pipeline
receives, streamed responses). The module knows nothing about fabrics or the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import SpecError
from .models import H800, Hardware, ModelConfig, get_model
from .schema import ALGORITHMS, KINDS, OPTIONAL_COLUMNS, SCHEMA, SCHEMA_VERSION, encode_metadata
from .trace import Trace

__all__ = ["generate_rl", "TOKEN_ID_BYTES", "LOGPROB_BYTES", "REWARD_BYTES"]

#: Response streaming: bytes per token id (int32), per response-token log-probability
#: (fp32) and per sample reward (fp32). A sample of prompt p and response n tokens costs
#: ``4 p + 8 n + 4`` bytes (token ids of prompt and response, one log-prob per response
#: token, one reward).
TOKEN_ID_BYTES = 4
LOGPROB_BYTES = 4
REWARD_BYTES = 4

_PS = 1e12
_I64 = np.int64


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _ps(seconds: np.ndarray | float) -> np.ndarray:
    return np.rint(np.asarray(seconds, dtype=np.float64) * _PS).astype(_I64)


# ---------------------------------------------------------------------------------------
# The op builder: per-rank program order, pending compute, columnar storage.
# ---------------------------------------------------------------------------------------
class _Builder:
    """Accumulates ops column by column; computes deps from per-rank program order."""

    def __init__(self, n_ranks: int):
        self.last_op = np.full(n_ranks, -1, dtype=_I64)
        self.pending = np.zeros(n_ranks, dtype=_I64)  # compute (ps) owed before the next op
        # Hand-offs: op ids a rank's next op must wait for (pipeline receives, streamed
        # samples). One slot per rank, vectorised; further ones per rank in a dict.
        self.hand = np.full(n_ranks, -1, dtype=_I64)
        self.hand_more: dict[int, list[int]] = {}
        self.has_more = np.zeros(n_ranks, dtype=bool)
        self.next_id = 0
        self.iteration = 0
        self.period = 0
        self.stage_names: list[str] = []
        self.phase_names: list[str] = []
        self.cols: dict[str, list[np.ndarray]] = {
            k: []
            for k in (
                "iteration",
                "stage",
                "phase",
                "kind",
                "algorithm",
                "size",
                "compute",
                "period",
                "m2n",
                "rank_counts",
                "ranks",
                "dep_counts",
                "deps",
            )
        }

    def _code(self, names: list[str], name: str) -> int:
        if name not in names:
            names.append(name)
        return names.index(name)

    def compute(self, ranks: np.ndarray, seconds: np.ndarray | float) -> None:
        """Add compute time to ``ranks`` (disjoint); it delays each rank's next op."""
        ranks = np.asarray(ranks)
        ps = _ps(seconds)
        if ps.ndim and ranks.ndim == 2:
            ps = ps[:, None]
        self.pending[ranks] += ps

    def expect(self, ranks: np.ndarray, op_ids: np.ndarray) -> None:
        """Make the next op of each rank wait for the matching op id (a hand-off)."""
        ranks = np.asarray(ranks, dtype=_I64).ravel()
        op_ids = np.asarray(op_ids, dtype=_I64).ravel()
        first = np.zeros(len(ranks), dtype=bool)
        _, idx = np.unique(ranks, return_index=True)
        first[idx] = True
        free = first & (self.hand[ranks] < 0)
        self.hand[ranks[free]] = op_ids[free]
        for r, o in zip(ranks[~free].tolist(), op_ids[~free].tolist(), strict=True):
            self.hand_more.setdefault(r, []).append(o)
            self.has_more[r] = True

    def emit(
        self,
        ranks: np.ndarray,
        size: np.ndarray | int,
        *,
        stage: str,
        phase: str,
        kind: str,
        algorithm: str = "auto",
        program: Sequence[int] | None = None,
        chain: bool = True,
        m2n_senders: int = 0,
        compute: np.ndarray | int = 0,
    ) -> np.ndarray:
        """Append K ops of equal width w; return their op ids.

        Parameters
        ----------
        ranks : ndarray (K, w)
            Global ranks of each op; rows must not share a rank in the columns in ``program``.
        size : ndarray (K,) or int
            size_bytes (nccl-tests convention).
        program : sequence of int, optional
            Columns whose ranks run this op in their program order: the op depends on their
            previous ops and takes their pending compute. Default: all columns.
        chain : bool
            If True, the op becomes the latest op of the ``program`` ranks (their next op
            depends on it). False makes a side op (a send that does not block its sender).
        """
        ranks = np.asarray(ranks, dtype=_I64)
        k, w = ranks.shape
        if k == 0:
            return np.empty(0, dtype=_I64)
        cols = list(range(w)) if program is None else list(program)
        prog = ranks[:, cols]
        ids = np.arange(self.next_id, self.next_id + k, dtype=_I64)
        self.next_id += k

        dmat = self.last_op[prog]
        if chain:
            hand = self.hand[prog]
            if (hand >= 0).any():
                dmat = np.concatenate([dmat, hand], axis=1)
                self.hand[prog] = -1
        dmat = np.sort(dmat, axis=1)
        keep = dmat >= 0
        keep[:, 1:] &= dmat[:, 1:] != dmat[:, :-1]
        dep_counts = keep.sum(axis=1)
        dep_vals = dmat[keep]
        if chain and self.has_more[prog].any():
            dep_counts, dep_vals = self._merge_more(prog, dmat, keep)

        comp = np.broadcast_to(np.asarray(compute, dtype=_I64), (k,)) + self.pending[prog].max(axis=1)
        if chain:
            self.pending[prog] = 0
            self.last_op[prog] = ids[:, None]

        c = self.cols
        c["iteration"].append(np.full(k, self.iteration, dtype=np.int32))
        c["stage"].append(np.full(k, self._code(self.stage_names, stage), dtype=np.int32))
        c["phase"].append(np.full(k, self._code(self.phase_names, phase), dtype=np.int32))
        c["kind"].append(np.full(k, KINDS.index(kind), dtype=np.int32))
        c["algorithm"].append(np.full(k, ALGORITHMS.index(algorithm), dtype=np.int32))
        c["size"].append(np.broadcast_to(np.asarray(size, dtype=_I64), (k,)).copy())
        c["compute"].append(comp)
        c["period"].append(np.full(k, self.period, dtype=np.int32))
        c["m2n"].append(np.full(k, m2n_senders, dtype=np.int32))
        c["rank_counts"].append(np.full(k, w, dtype=_I64))
        c["ranks"].append(ranks.ravel())
        c["dep_counts"].append(dep_counts.astype(_I64))
        c["deps"].append(dep_vals)
        return ids

    def _merge_more(self, prog, dmat, keep):
        counts, vals = [], []
        for row in range(prog.shape[0]):
            deps = set(dmat[row][keep[row]].tolist())
            for r in prog[row].tolist():
                if self.has_more[r]:
                    deps.update(self.hand_more.pop(r))
                    self.has_more[r] = False
            counts.append(len(deps))
            vals.extend(sorted(deps))
        return np.array(counts, dtype=_I64), np.array(vals, dtype=_I64)

    def table(self, rank_map: np.ndarray | None) -> pa.Table:
        """The accumulated ops as a table of ``SCHEMA`` (+ ``m2n_senders``)."""
        c = {k: (np.concatenate(v) if v else np.empty(0, dtype=_I64)) for k, v in self.cols.items()}
        n = self.next_id
        ranks = c["ranks"].astype(np.int32) if rank_map is None else rank_map[c["ranks"]].astype(np.int32)
        r_off = np.zeros(n + 1, dtype=_I64)
        np.cumsum(c["rank_counts"], out=r_off[1:])
        d_off = np.zeros(n + 1, dtype=_I64)
        np.cumsum(c["dep_counts"], out=d_off[1:])
        if r_off[-1] >= 2**31 or d_off[-1] >= 2**31:
            raise SpecError(
                "trace too large for list<int32> offsets: generate fewer iterations or coarser ops"
            )

        def dict_col(codes, names):
            return pa.DictionaryArray.from_arrays(
                pa.array(codes.astype(np.int32)), pa.array(names, pa.string())
            )

        arrays = {
            "op_id": pa.array(np.arange(n, dtype=_I64)),
            "iteration": pa.array(c["iteration"].astype(np.int32)),
            "stage": dict_col(c["stage"], self.stage_names),
            "phase": dict_col(c["phase"], self.phase_names),
            "kind": dict_col(c["kind"], list(KINDS)),
            "ranks": pa.ListArray.from_arrays(pa.array(r_off.astype(np.int32)), pa.array(ranks)),
            "size_bytes": pa.array(c["size"].astype(_I64)),
            "algorithm": dict_col(c["algorithm"], list(ALGORITHMS)),
            "deps": pa.ListArray.from_arrays(
                pa.array(d_off.astype(np.int32)), pa.array(c["deps"].astype(_I64))
            ),
            "compute_ps": pa.array(c["compute"].astype(_I64)),
            "period": pa.array(c["period"].astype(np.int32)),
            "m2n_senders": pa.array(c["m2n"].astype(np.int32)),
        }
        fields = list(SCHEMA) + [OPTIONAL_COLUMNS.field("m2n_senders")]
        return pa.Table.from_arrays([arrays[f.name] for f in fields], schema=pa.schema(fields))


# ---------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------
def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SpecError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


class _TrainLayout:
    """Megatron-LM rank order: tp fastest, then cp, then dp, then pp.

    ``grid[s, d, c, t]`` is the local rank of pipeline stage s, data-parallel index d,
    context-parallel index c, tensor-parallel index t. For MoE layers the cp*dp ranks of a
    stage (index j = c + cp d) are regrouped as ``j = e + ep x`` (e: expert-parallel index,
    x: expert-data-parallel index), as Megatron-Core does.
    """

    def __init__(self, model: ModelConfig, gpus: int, cfg: Mapping[str, Any]):
        unknown = set(cfg) - {"tp", "pp", "dp", "cp", "ep"}
        if unknown:
            raise SpecError(f"train: unknown parallelism key(s) {sorted(unknown)} (use tp, pp, dp, cp, ep)")
        self.tp = _positive(cfg.get("tp", 1), "train tp")
        self.pp = _positive(cfg.get("pp", 1), "train pp")
        self.cp = _positive(cfg.get("cp", 1), "train cp")
        self.ep = _positive(cfg.get("ep", 1), "train ep")
        per_dp = self.tp * self.pp * self.cp
        if "dp" in cfg:
            self.dp = _positive(cfg["dp"], "train dp")
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
        self.grid = np.arange(gpus, dtype=_I64).reshape(self.pp, self.dp, self.cp, self.tp)
        base, extra = divmod(model.layers, self.pp)
        self.stage_layers = [base + (1 if s < extra else 0) for s in range(self.pp)]

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


class _GenLayout:
    """Generation instances: consecutive blocks of ``size`` gen ranks.

    TP mode: an instance is one TP group. EP mode: ``ep`` ranks whose experts are split
    across all of them, with attention in ep/tp data-parallel TP groups. AFD mode: ``attn``
    attention ranks (attn/tp TP groups) followed by ``ffn`` FFN (expert) ranks.
    A *unit* is an attention TP group: it owns a share of the sequences.
    """

    def __init__(self, model: ModelConfig, gpus: int, cfg: Mapping[str, Any], offset: int):
        unknown = set(cfg) - {"tp", "dp", "ep", "afd"}
        if unknown:
            raise SpecError(f"gen: unknown parallelism key(s) {sorted(unknown)} (use tp, dp, ep, afd)")
        self.tp = _positive(cfg.get("tp", 1), "gen tp")
        self.ep = _positive(cfg.get("ep", 1), "gen ep")
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
            self.attn, self.ffn = _positive(m, "gen afd attn"), _positive(n, "gen afd ffn")
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
            self.dp = _positive(cfg["dp"], "gen dp")
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


# ---------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------
def generate_rl(
    model: str | ModelConfig,
    *,
    train_gpus: int,
    gen_gpus: int,
    train: Mapping[str, Any] | None = None,
    gen: Mapping[str, Any] | None = None,
    iterations: int = 1,
    seed: int = 0,
    mode: str = "sync",
    global_batch: int = 512,
    prompt_len: int = 512,
    response: Mapping[str, Any] | None = None,
    micro_batch_tokens: int | None = None,
    optimizer_steps: int = 1,
    distributed_optimizer: bool = False,
    weight_sync: str = "two_level",
    pod_gpus: int | None = None,
    decode_steps_per_op: int = 64,
    decode_layers_per_op: int | None = None,
    hardware: Hardware = H800,
    param_bytes: int = 2,
    act_bytes: int = 2,
    grad_bytes: int = 4,
    train_ranks: Sequence[int] | None = None,
    gen_ranks: Sequence[int] | None = None,
) -> Trace:
    r"""Generate the communication trace of disaggregated RL post-training.

    Placement: train GPUs are global ranks ``0 .. train_gpus-1`` and gen GPUs
    ``train_gpus .. train_gpus+gen_gpus-1`` unless ``train_ranks``/``gen_ranks`` say
    otherwise. Each iteration i emits, in order of dependencies:

    * **gen** (stage ``gen``): prefill then decode of ``global_batch`` responses whose
      lengths are drawn from a clipped log-normal distribution;
    * **response_stream**: the finished samples, sent from gen to train as they finish;
    * **train**: forward/backward of every micro-batch (1F1B pipeline schedule) and
      gradient synchronisation, ``optimizer_steps`` times;
    * **weight_sync**: the new weights from train to gen.

    ``mode="sync"``: gen(i) -> stream -> train(i) -> weight_sync(i) -> gen(i+1).
    ``mode="async"`` (one-step off-policy, StreamRL/veRL): gen(i+1) runs with the weights
    of train(i-1) while train(i) runs; weight_sync(i) waits for train(i) and for gen(i+1)
    to finish, and gen(i+2) waits for weight_sync(i).

    Parameters
    ----------
    model : str or ModelConfig
        A name of `MODELS` (``qwen2.5-14b``, ``qwen2.5-32b``, ``qwen2.5-72b``,
        ``qwen2-57b-a14b``, ``qwen3-235b-a22b``) or a user `ModelConfig`.
    train_gpus, gen_gpus : int
        GPU counts of the training and generation clusters.
    train : dict, optional
        ``tp``, ``pp``, ``cp``, ``ep`` (default 1) and ``dp`` (default
        ``train_gpus / (tp pp cp)``); ``tp pp cp dp`` must equal ``train_gpus``; ``ep``
        must divide ``cp dp`` and the expert count.
    gen : dict, optional
        ``tp`` (default 1), ``ep`` (default 1; > 1 selects EP mode, a multiple of tp),
        ``afd`` (``dict(attn=M, ffn=N)``: attention-FFN disaggregation, MoE only) and
        ``dp`` (instances; default ``gen_gpus / instance size``). Instance size: tp (TP
        mode), ep (EP mode) or M + N (AFD).
    iterations : int
        RL iterations.
    seed : int
        Seed of the response-length draws (numpy ``default_rng``); nothing else is random.
    mode : {"sync", "async"}
        Synchronous or one-step asynchronous RL.
    global_batch : int
        Responses per iteration (prompts x responses per prompt).
    prompt_len : int
        Prompt tokens per response.
    response : dict, optional
        Response-length distribution in tokens: ``median`` (2048), ``sigma`` (1.0, of the
        natural log), ``max`` (16384) and ``min`` (1). Each length is
        ``clip(round(median * exp(sigma * Z)), min, max)`` with Z standard normal. The
        defaults give P99/P50 = 10.2 (Laminar: "an order of magnitude"), 90 % under 7.5 k
        tokens (OrchestrRL §2: "most under 7.5K") and a mass of stragglers at the 16 k cap
        (Laminar's maximum output length; RollMux: stragglers hit the limit). ``sigma=0``
        makes every response ``median`` long.
    micro_batch_tokens : int, optional
        Token capacity of one micro-batch of one data-parallel replica; default
        ``prompt_len + response max`` (every sample fits one micro-batch).
    optimizer_steps : int
        Optimizer steps per iteration (the samples are split evenly, in order).
    distributed_optimizer : bool
        Gradient sync as reduce-scatter + all-gather (Megatron ``--use-distributed-optimizer``,
        ZeRO-1) instead of all-reduce.
    weight_sync : {"two_level", "flat"}
        ``flat``: every gen instance receives each train shard directly from train (veRL;
        RollMux figure 8). ``two_level`` (OrchestrRL figure 4): train sends once to the
        first instance (DP-0) of each gen pod, which broadcasts inside its pod.
    pod_gpus : int, optional
        Gen GPUs per pod for ``two_level`` (a multiple of the instance size); default all
        gen GPUs (one pod).
    decode_steps_per_op : int
        Decode steps aggregated into one emitted decode op (see below).
    decode_layers_per_op : int, optional
        Consecutive layers aggregated into one emitted decode/prefill op; default all layers.
    hardware : Hardware
        Roofline constants (default `H800`).
    param_bytes, act_bytes, grad_bytes : int
        Bytes per parameter on the wire (BF16: 2), per activation element (BF16: 2) and per
        gradient element (4: Megatron-LM reduces BF16 gradients in FP32,
        ``accumulate_allreduce_grads_in_fp32``).
    train_ranks, gen_ranks : sequence of int, optional
        Global GPU ids of the train and gen GPUs (disjoint); the trace's ``gpus`` becomes
        the largest id + 1.

    Returns
    -------
    Trace
        Metadata: ``model``, ``gpus``, ``generator`` ("rfabric.traces.generate_rl") and
        ``parameters`` (every argument, the model config and the derived layout).

    Notes
    -----
    Notation: h hidden, q = heads * head_dim, kv = kv_heads * head_dim, f dense FFN width,
    E experts, k top-k, f_e expert width, f_s shared-expert width, s = 1 if a shared
    expert exists else 0, V vocab, a = act_bytes. ceil() rounds up to whole bytes.
    Sizes follow the nccl-tests convention of ``traces/README.md``.

    **Training** (Megatron-LM, Narayanan et al. SC'21 and Megatron-Core; no sequence
    parallelism, no activation recomputation). Per step, the T tokens of its samples
    (prompt + response) fill ``m = ceil(T / (dp * micro_batch_tokens))`` micro-batches per
    replica of ``T_mb = ceil(T / (dp m))`` tokens; each CP rank holds
    ``t = ceil(T_mb / cp)`` tokens. Per layer and micro-batch, on every group:

    - TP all-reduce (if tp > 1), ``t h a`` bytes: forward after attention (o_proj) and
      after the MLP (down_proj); backward after the MLP input gradient and the QKV input
      gradient (2 + 2 per dense layer; Megatron-LM paper §3). An MoE layer with ep > 1
      has the attention ones plus, with a shared expert, one per direction for it; with
      ep = 1 its experts are TP-sharded and it has 2 + 2 as a dense layer.
    - CP all-to-all (if cp > 1; Megatron-Core ``cp_comm_type="a2a"``, DeepSpeed-Ulysses):
      ``ceil(t (q + 2 kv) a / tp)`` before attention and ``ceil(t q a / tp)`` after it,
      and the same two in backward.
    - EP all-to-all (MoE, ep > 1; alltoall token dispatcher): dispatch and combine, each
      ``ceil(t / tp) k h a`` bytes, forward and backward (the tp ranks of a group split
      its tokens, as Megatron-Core's dispatcher does under sequence parallelism).
    - PP send (if pp > 1): each rank sends ``t h a`` bytes (its full hidden state,
      Megatron ``p2p_communication``) to the same (dp, cp, tp) rank of the next stage
      (forward) or previous stage (backward).

    Stage s holds ``L_s`` layers (``layers // pp``, the first ``layers % pp`` stages one
    more). Its dense parameters ``D_s = L_s (attention + norms + MLP or shared expert and
    router) + embedding (s = 0) + final norm and output layer (last s)`` and expert
    parameters ``X_s = L_s E 3 h f_e``. Gradient sync after the last backward of each step,
    with ``g`` = grad_bytes and ``p`` = param_bytes: all-reduce of ``ceil(D_s / tp) g``
    over the tp-index groups of cp*dp ranks, and for MoE all-reduce of
    ``ceil(X_s / (ep tp)) g`` over the expert-data-parallel groups of cp*dp/ep ranks
    (skipped when a group has one rank). With ``distributed_optimizer``: reduce-scatter of
    those sizes, then all-gather of ``ceil(D_s / tp) p`` and ``ceil(X_s / (ep tp)) p``.

    Training compute (roofline, FLOPs / (peak x train_mfu)), per rank per micro-batch and
    layer, forward: ``2 t h (q + 2 kv) / tp`` (QKV), ``2 t s_eff q / tp`` (causal
    attention, ``s_eff = sum n_i^2 / sum n_i`` over sample lengths n_i), ``2 t q h / tp``
    (o_proj), and ``2 t 3 h f / tp`` (dense MLP) or
    ``2 t (k 3 h f_e + 3 h f_s + h E) / tp`` (MoE); backward twice forward; the last stage
    adds ``2 t h V / tp`` (output layer) forward and twice that backward (Kaplan et al.
    2020; Narayanan et al. 2021).

    **Generation.** Responses are dealt round-robin to units (attention TP groups). All of a
    unit's sequences start together; sequence j is active for its first n_j decode steps,
    with context ``prompt_len + step``. Let ``A_u(t)`` be the active sequences of unit u at
    step t and ``A_i(t)`` their sum over instance i. **One emitted decode op is one
    collective of one group for ``decode_steps_per_op`` consecutive decode steps (K) and
    one block of ``decode_layers_per_op`` consecutive layers (nb)**; its size_bytes is the
    sum, over those K steps and nb layers, of the per-step per-layer sizes (sums over t
    run over the op's K steps):

    - TP all-reduce (tp > 1): ``A_u(t) h a`` per step and layer, after attention and after
      the FFN (TP mode); after attention, and after the shared expert if any (EP, AFD).
    - EP all-to-all (EP mode): dispatch and combine over the instance's ep ranks, each
      ``ceil(nb k h a sum_t A_i(t) / ep)`` (tokens spread evenly over the ranks).
    - AFD m2n: attention -> FFN ``ceil(nb (k + s) h a sum_t A_i(t) / attn)`` per attention
      rank (``m2n_senders = attn``), and FFN -> attention
      ``ceil(nb (k + s) h a sum_t A_i(t) / ffn)`` per FFN rank (``m2n_senders = ffn``);
      the shared expert counts as one more destination and runs on the FFN ranks.

    Prefill emits the same ops once, with ``prompt_len * n_u`` tokens in place of the
    decode sum. Decode compute (roofline, per rank, per step and layer):
    ``max(bytes / (HBM x hbm_efficiency), FLOPs / (peak x gen_mfu))`` where bytes are the
    weights read (attention / tp; dense MLP / tp; experts touched by the batch,
    ``E (1 - (1 - k/E)^b)`` for b tokens, spread over the expert ranks) plus the KV cache
    read (``2 kv a`` per context token, / min(tp, kv_heads)), and FLOPs are 2 per weight
    per token plus ``4 q`` per context token (QK and AV); the output layer (``V h``) is
    read once per step. Compute is attached to the next op of the rank that did it (an op's
    compute_ps is the largest owed by its ranks).

    **Response streaming**: for each unit, decode chunk (K steps) and train replica, the
    samples finishing in that chunk go in one ``send`` from the unit's first rank to the
    replica's first rank (stage 0, cp 0, tp 0); sample j goes to replica ``j mod dp``; a
    sample costs ``4 prompt_len + 8 n + 4`` bytes. The send does not block the decoder;
    the first training op of every stage-0 rank of the replica waits for all its samples
    (the replica's intra-stage data broadcast is not emitted).

    **Weight sync**: the ``P p`` bytes of the model leave train as shards: copy c
    (``0 .. cp dp / ep - 1``) of the weights is held, per stage, by its ep*tp ranks, each
    owning an equal share of the stage's parameters (the first ``P_s mod (ep tp)`` one
    more). Shard h (stage-major, then ep, then tp order) goes to member ``h mod size`` of
    an instance (resharding to the gen layout is not modelled). ``flat``: per shard, a
    ``broadcast`` (algorithm ``direct``) from its holder in copy ``i mod copies`` to
    instance i, for every instance: ``dp_gen`` copies cross the train/gen boundary.
    ``two_level``: phase ``inter_pod`` sends each shard to the pod's first instance (copy
    ``pod mod copies``); phase ``intra_pod`` broadcasts, from each member of that instance,
    everything it received to the same member of the pod's other instances: one copy per
    pod crosses the boundary.

    **Periods**: one id per (iteration, gen), (iteration, response_stream), (iteration,
    optimizer step, fwd/bwd), (iteration, optimizer step, grad_sync) and (iteration,
    weight_sync), numbered in emission order.

    Raises
    ------
    SpecError
        On an inconsistent configuration.
    """
    mdl = get_model(model)
    train_gpus = _positive(train_gpus, "train_gpus")
    gen_gpus = _positive(gen_gpus, "gen_gpus")
    iterations = _positive(iterations, "iterations")
    global_batch = _positive(global_batch, "global_batch")
    prompt_len = _positive(prompt_len, "prompt_len")
    optimizer_steps = _positive(optimizer_steps, "optimizer_steps")
    K = _positive(decode_steps_per_op, "decode_steps_per_op")
    lpo = (
        mdl.layers
        if decode_layers_per_op is None
        else _positive(decode_layers_per_op, "decode_layers_per_op")
    )
    for name, v in (("param_bytes", param_bytes), ("act_bytes", act_bytes), ("grad_bytes", grad_bytes)):
        _positive(v, name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SpecError(f"seed must be a non-negative integer, got {seed!r}")
    if mode not in ("sync", "async"):
        raise SpecError(f"mode must be 'sync' or 'async', got {mode!r}")
    if weight_sync not in ("two_level", "flat"):
        raise SpecError(f"weight_sync must be 'two_level' or 'flat', got {weight_sync!r}")
    if not isinstance(hardware, Hardware):
        raise SpecError(f"hardware must be a Hardware, not {type(hardware).__name__}")
    if optimizer_steps > global_batch:
        raise SpecError(f"optimizer_steps={optimizer_steps} exceeds global_batch={global_batch}")
    resp = {"median": 2048, "sigma": 1.0, "max": 16384, "min": 1}
    unknown = set(response or {}) - set(resp)
    if unknown:
        raise SpecError(f"response: unknown key(s) {sorted(unknown)} (use median, sigma, max, min)")
    resp.update(response or {})
    r_med, r_max, r_min = (_positive(resp[k], f"response {k}") for k in ("median", "max", "min"))
    r_sigma = resp["sigma"]
    if isinstance(r_sigma, bool) or not isinstance(r_sigma, (int, float)) or not 0 <= r_sigma < 10:
        raise SpecError(f"response sigma must be a number in [0, 10), got {r_sigma!r}")
    if not r_min <= r_med <= r_max:
        raise SpecError(f"response lengths need min <= median <= max, got {r_min}, {r_med}, {r_max}")
    mbt = (
        prompt_len + r_max
        if micro_batch_tokens is None
        else _positive(micro_batch_tokens, "micro_batch_tokens")
    )

    tl = _TrainLayout(mdl, train_gpus, dict(train or {}))
    gl = _GenLayout(mdl, gen_gpus, dict(gen or {}), offset=train_gpus)
    if pod_gpus is None:
        pod_inst = gl.dp
    else:
        pod_gpus = _positive(pod_gpus, "pod_gpus")
        if pod_gpus % gl.size:
            raise SpecError(f"pod_gpus={pod_gpus} must be a multiple of the gen instance size {gl.size}")
        pod_inst = pod_gpus // gl.size

    n_total = train_gpus + gen_gpus
    rank_map = None
    if train_ranks is not None or gen_ranks is not None:
        tr = np.arange(train_gpus) if train_ranks is None else np.asarray(train_ranks, dtype=_I64)
        gr = np.arange(train_gpus, n_total) if gen_ranks is None else np.asarray(gen_ranks, dtype=_I64)
        if tr.shape != (train_gpus,) or gr.shape != (gen_gpus,):
            raise SpecError("train_ranks/gen_ranks must list exactly train_gpus/gen_gpus GPU ids")
        rank_map = np.concatenate([tr, gr])
        if rank_map.min() < 0 or len(np.unique(rank_map)) != n_total:
            raise SpecError("train_ranks and gen_ranks must be distinct non-negative GPU ids")
        gpus = int(rank_map.max()) + 1
    else:
        gpus = n_total

    g = _Gen(
        mdl,
        tl,
        gl,
        hardware,
        K=K,
        lpo=lpo,
        prompt=prompt_len,
        act=act_bytes,
        param=param_bytes,
        grad=grad_bytes,
        mbt=mbt,
        steps=optimizer_steps,
        distopt=bool(distributed_optimizer),
        weight_sync=weight_sync,
        pod_inst=pod_inst,
        n_ranks=n_total,
    )
    rng = np.random.default_rng(int(seed))
    lengths = []
    for _ in range(iterations):
        z = rng.standard_normal(global_batch)
        lengths.append(np.clip(np.rint(r_med * np.exp(r_sigma * z)), r_min, r_max).astype(_I64))

    if mode == "sync":
        for it in range(iterations):
            streams = g.generation(it, lengths[it])
            g.training(it, lengths[it], streams)
            g.weight_sync(it)
    else:
        pending = {0: g.generation(0, lengths[0])}
        for it in range(iterations):
            if it + 1 < iterations:
                pending[it + 1] = g.generation(it + 1, lengths[it + 1])
            g.training(it, lengths[it], pending.pop(it))
            g.weight_sync(it)

    params = {
        "model": mdl.to_dict(),
        "train_gpus": train_gpus,
        "gen_gpus": gen_gpus,
        "train": {"tp": tl.tp, "pp": tl.pp, "dp": tl.dp, "cp": tl.cp, "ep": tl.ep},
        "gen": {
            "tp": gl.tp,
            "dp": gl.dp,
            "ep": gl.ep,
            "afd": {"attn": gl.attn, "ffn": gl.ffn} if gl.mode == "afd" else None,
        },
        "gen_mode": gl.mode,
        "iterations": iterations,
        "seed": int(seed),
        "mode": mode,
        "global_batch": global_batch,
        "prompt_len": prompt_len,
        "response": {"median": r_med, "sigma": float(r_sigma), "max": r_max, "min": r_min},
        "micro_batch_tokens": mbt,
        "optimizer_steps": optimizer_steps,
        "distributed_optimizer": bool(distributed_optimizer),
        "weight_sync": weight_sync,
        "pod_gpus": pod_inst * gl.size,
        "decode_steps_per_op": K,
        "decode_layers_per_op": lpo,
        "hardware": asdict(hardware),
        "param_bytes": param_bytes,
        "act_bytes": act_bytes,
        "grad_bytes": grad_bytes,
        "train_ranks": None if train_ranks is None else [int(r) for r in rank_map[:train_gpus]],
        "gen_ranks": None if gen_ranks is None else [int(r) for r in rank_map[train_gpus:]],
    }
    meta = {
        "schema_version": SCHEMA_VERSION,
        "gpus": gpus,
        "model": mdl.name,
        "generator": "rfabric.traces.generate_rl",
        "parameters": params,
    }
    table = g.b.table(rank_map)
    table = table.replace_schema_metadata(encode_metadata(meta))
    return Trace(table, dict(meta))


class _Gen:
    """State of one generation run: layouts, builder and the per-stage emitters."""

    def __init__(
        self,
        mdl,
        tl,
        gl,
        hw,
        *,
        K,
        lpo,
        prompt,
        act,
        param,
        grad,
        mbt,
        steps,
        distopt,
        weight_sync,
        pod_inst,
        n_ranks,
    ):
        self.m, self.tl, self.gl, self.hw = mdl, tl, gl, hw
        self.K, self.prompt, self.act, self.param, self.grad = K, prompt, act, param, grad
        self.mbt, self.steps, self.distopt = mbt, steps, distopt
        self.ws_mode, self.pod_inst = weight_sync, pod_inst
        self.b = _Builder(n_ranks)
        self._periods = 0
        blocks = [lpo] * (mdl.layers // lpo) + ([mdl.layers % lpo] if mdl.layers % lpo else [])
        self.blocks = blocks
        self._shards = self._weight_shards()

    # -- helpers ---------------------------------------------------------------------------
    def _new_period(self) -> int:
        self._periods += 1
        return self._periods - 1

    def _flops_s(self, flops, mfu):
        return np.asarray(flops, dtype=np.float64) / (self.hw.peak_flops * mfu)

    def _mem_s(self, nbytes):
        return np.asarray(nbytes, dtype=np.float64) / (self.hw.hbm_bytes_per_s * self.hw.hbm_efficiency)

    # -- generation ------------------------------------------------------------------------
    def generation(self, it: int, lengths: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Emit prefill, decode and response streaming of iteration ``it``.

        Returns the stream hand-offs: (train target ranks, stream op ids) pairs.
        """
        gl, b, K = self.gl, self.b, self.K
        b.iteration = it
        gen_period, stream_period = self._new_period(), self._new_period()
        b.period = gen_period
        n = len(lengths)
        unit_of = np.arange(n) % gl.n_units
        n_u = np.bincount(unit_of, minlength=gl.n_units)
        upi = gl.units_per_instance
        n_i = n_u.reshape(gl.dp, upi).sum(axis=1)
        n_chunks = _cdiv(int(lengths.max()), K)
        T = n_chunks * K
        cnt = np.bincount(unit_of * (T + 1) + lengths, minlength=gl.n_units * (T + 1)).reshape(
            gl.n_units, T + 1
        )
        A_u = n_u[:, None] - np.cumsum(cnt, axis=1)[:, :T]  # active sequences (unit, step)
        A_i = A_u.reshape(gl.dp, upi, T).sum(axis=1)
        S_u = A_u.reshape(gl.n_units, n_chunks, K).sum(axis=2)  # (unit, chunk)
        S_i = S_u.reshape(gl.dp, upi, n_chunks).sum(axis=1)
        last_chunk = np.full(gl.dp, -1)
        for i in range(gl.dp):
            nz = np.flatnonzero(S_i[i])
            if len(nz):
                last_chunk[i] = nz[-1]

        t_attn, t_ffn, t_exp, t_head = self._decode_times(A_u, A_i)
        chunk = lambda x: x.reshape(x.shape[0], n_chunks, K).sum(axis=2)  # noqa: E731
        c_attn, c_ffn, c_head = chunk(t_attn), chunk(t_ffn), chunk(t_head)
        c_exp = chunk(t_exp) if t_exp is not None else None

        # Prefill: prompt_len * n_u tokens per unit, one op per collective and layer block.
        p_u = self.prompt * n_u
        p_i = self.prompt * n_i
        pt_attn, pt_ffn, pt_exp, pt_head = self._prefill_times(n_u, n_i)
        for bi, nb in enumerate(self.blocks):
            self._gen_block(
                "prefill",
                nb,
                p_u,
                p_i,
                n_i > 0,
                pt_attn * nb + (pt_head if bi == 0 else 0),
                pt_ffn * nb,
                None if pt_exp is None else pt_exp * nb,
            )

        # Decode chunks, then the streams of the samples that finished in each chunk.
        fin_chunk = (lengths - 1) // K
        sample_bytes = (
            TOKEN_ID_BYTES * self.prompt + (TOKEN_ID_BYTES + LOGPROB_BYTES) * lengths + REWARD_BYTES
        )
        replica = np.arange(n) % self.tl.dp
        key = (fin_chunk * gl.n_units + unit_of) * self.tl.dp + replica
        order = np.argsort(key, kind="stable")
        ukeys, starts = np.unique(key[order], return_index=True)
        sizes = np.add.reduceat(sample_bytes[order], starts) if len(starts) else np.empty(0, _I64)
        s_chunk = ukeys // (gl.n_units * self.tl.dp)
        s_unit = (ukeys // self.tl.dp) % gl.n_units
        s_replica = ukeys % self.tl.dp
        targets = self.tl.grid[0, :, 0, 0]  # first rank of each replica
        streams: list[tuple[np.ndarray, np.ndarray]] = []
        for c in range(n_chunks):
            active = last_chunk >= c
            if active.any():
                for bi, nb in enumerate(self.blocks):
                    self._gen_block(
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
                )
                streams.append((dst, ids))
                b.period = gen_period
        return streams

    def _gen_block(self, phase, nb, tok_u, tok_i, active, attn_s, ffn_s, exp_s):
        """Emit one layer block of ops for every active instance.

        ``tok_u``/``tok_i``: tokens (summed over the aggregated steps) per unit/instance;
        ``attn_s``/``ffn_s``: per-unit compute (s); ``exp_s``: per-instance expert compute.
        """
        m, gl, b = self.m, self.gl, self.b
        h, a, k = m.hidden, self.act, m.top_k
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
        b.emit(
            np.concatenate([attn_r, ffn_r], axis=1),
            out,
            stage="gen",
            phase=phase,
            kind="m2n",
            algorithm="direct",
            m2n_senders=gl.attn,
        )
        b.compute(ffn_r, exp_s[inst_on])
        b.emit(
            np.concatenate([ffn_r, attn_r], axis=1),
            back,
            stage="gen",
            phase=phase,
            kind="m2n",
            algorithm="direct",
            m2n_senders=gl.ffn,
        )

    def _touched(self, tokens, experts_here):
        """Expected experts (of ``experts_here``) touched by ``tokens`` routed tokens."""
        m = self.m
        return experts_here * (1.0 - np.power(1.0 - m.top_k / m.experts, tokens))

    def _decode_times(self, A_u, A_i):
        """Per-step, per-layer compute (s): attention (unit), FFN (unit), experts (instance), head."""
        m, gl, p, a, w = self.m, self.gl, self.prompt, self.act, self.param
        tp, mfu = gl.tp, self.hw.gen_mfu
        T = A_u.shape[1]
        bu = A_u.astype(np.float64)
        ctx = bu * (p + np.arange(T, dtype=np.float64))[None, :]  # context tokens read
        kv_split = min(tp, m.kv_heads)
        attn_w = m.attn_params + (m.router_params if gl.mode != "tp" else 0)
        t_attn = np.maximum(
            self._mem_s(attn_w * w / tp + ctx * 2 * m.kv_dim * a / kv_split),
            self._flops_s(2 * bu * attn_w / tp + 4 * ctx * m.q_dim / tp, mfu),
        )
        head = m.vocab * m.hidden
        t_head = np.maximum(self._mem_s(head * w / tp), self._flops_s(2 * bu * head / tp, mfu))
        idle = bu == 0
        t_exp = None
        if gl.mode == "tp":
            if m.is_moe:
                nbytes = (
                    (self._touched(bu, m.experts) * m.expert_params + m.shared_params + m.router_params)
                    * w
                    / tp
                )
                flops = 2 * bu * (m.top_k * m.expert_params + m.shared_params + m.router_params) / tp
            else:
                nbytes = np.full_like(bu, m.dense_mlp_params * w / tp)
                flops = 2 * bu * m.dense_mlp_params / tp
            t_ffn = np.maximum(self._mem_s(nbytes), self._flops_s(flops, mfu))
        else:
            t_ffn = np.zeros_like(bu)
            if m.shared_params:
                t_ffn = np.maximum(
                    self._mem_s(np.full_like(bu, m.shared_params * w / tp)),
                    self._flops_s(2 * bu * m.shared_params / tp, mfu),
                )
            bi = A_i.astype(np.float64)
            if gl.mode == "ep":
                ranks, shared_here = gl.ep, 0
            else:
                ranks, shared_here = gl.ffn, m.shared_params
                t_ffn = np.zeros_like(bu)  # AFD: the shared expert runs on the FFN ranks
            per = m.experts / ranks
            nbytes = (self._touched(bi, per) * m.expert_params + shared_here / ranks) * w
            flops = 2 * bi * (m.top_k * m.expert_params + shared_here) / ranks
            t_exp = np.maximum(self._mem_s(nbytes), self._flops_s(flops, mfu))
            t_exp[bi == 0] = 0
        for arr in (t_attn, t_ffn, t_head):
            arr[idle] = 0
        return t_attn, t_ffn, t_exp, t_head

    def _prefill_times(self, n_u, n_i):
        """Per-layer prefill compute (s) per unit/instance, plus the output layer per unit."""
        m, gl, p, w = self.m, self.gl, self.prompt, self.param
        tp, mfu = gl.tp, self.hw.gen_mfu
        nu = n_u.astype(np.float64)
        tok = p * nu
        attn_w = m.attn_params + (m.router_params if gl.mode != "tp" else 0)
        t_attn = np.maximum(
            self._mem_s(np.full_like(nu, attn_w * w / tp)),
            self._flops_s(2 * tok * attn_w / tp + 2 * p * p * nu * m.q_dim / tp, mfu),
        )
        head = m.vocab * m.hidden
        t_head = np.maximum(
            self._mem_s(np.full_like(nu, head * w / tp)), self._flops_s(2 * nu * head / tp, mfu)
        )
        t_exp = None
        if gl.mode == "tp":
            if m.is_moe:
                nbytes = (
                    self._touched(tok, m.experts) * m.expert_params + m.shared_params + m.router_params
                ) * w
                flops = 2 * tok * (m.top_k * m.expert_params + m.shared_params + m.router_params)
            else:
                nbytes = np.full_like(tok, m.dense_mlp_params * w)
                flops = 2 * tok * m.dense_mlp_params
            t_ffn = np.maximum(self._mem_s(nbytes / tp), self._flops_s(flops / tp, mfu))
        else:
            t_ffn = np.zeros_like(tok)
            if gl.mode == "ep" and m.shared_params:
                t_ffn = np.maximum(
                    self._mem_s(np.full_like(tok, m.shared_params * w / tp)),
                    self._flops_s(2 * tok * m.shared_params / tp, mfu),
                )
            ranks, shared_here = (gl.ep, 0) if gl.mode == "ep" else (gl.ffn, m.shared_params)
            ti = p * n_i.astype(np.float64)
            nbytes = (self._touched(ti, m.experts / ranks) * m.expert_params + shared_here / ranks) * w
            t_exp = np.maximum(
                self._mem_s(nbytes),
                self._flops_s(2 * ti * (m.top_k * m.expert_params + shared_here) / ranks, mfu),
            )
        for arr in (t_attn, t_ffn, t_head):
            arr[nu == 0] = 0
        if t_exp is not None:
            t_exp[n_i == 0] = 0
        return t_attn, t_ffn, t_exp, t_head

    # -- training --------------------------------------------------------------------------
    def training(self, it: int, lengths: np.ndarray, streams) -> None:
        """Emit forward/backward (1F1B) and gradient sync of iteration ``it``."""
        tl, b = self.tl, self.b
        b.iteration = it
        # Every stage-0 rank of a replica waits for all the samples streamed to the replica.
        for dst, ids in streams:
            replica = np.searchsorted(tl.grid[0, :, 0, 0], dst)
            ranks = tl.grid[0][replica].reshape(len(ids), -1)
            b.expect(ranks, np.repeat(ids[:, None], ranks.shape[1], axis=1))
        tokens = self.prompt + lengths
        for step_tokens in np.array_split(tokens, self.steps):
            total = int(step_tokens.sum())
            m_mb = max(1, _cdiv(total, tl.dp * self.mbt))
            t_mb = _cdiv(total, tl.dp * m_mb)
            s_eff = float((step_tokens.astype(np.float64) ** 2).sum() / total)
            fb_period = self._new_period()
            grad_period = self._new_period()
            self._pipeline(m_mb, t_mb, s_eff, fb_period, grad_period)

    def _train_sizes(self, t_mb: int) -> dict[str, int]:
        m, tl, a = self.m, self.tl, self.act
        t = _cdiv(t_mb, tl.cp)
        return {
            "t": t,
            "tp_ar": t * m.hidden * a,
            "cp_qkv": _cdiv(t * (m.q_dim + 2 * m.kv_dim) * a, tl.tp),
            "cp_out": _cdiv(t * m.q_dim * a, tl.tp),
            "ep": _cdiv(t, tl.tp) * m.top_k * m.hidden * a,
            "pp": t * m.hidden * a,
        }

    def _train_flops(self, t: int, s_eff: float) -> dict[str, float]:
        m, tp = self.m, self.tl.tp
        f = {
            "qkv": 2.0 * t * m.hidden * (m.q_dim + 2 * m.kv_dim) / tp,
            "core": 2.0 * t * s_eff * m.q_dim / tp,
            "o": 2.0 * t * m.q_dim * m.hidden / tp,
            "mlp": 2.0 * t * m.dense_mlp_params / tp,
            "experts": 2.0 * t * m.top_k * m.expert_params / tp,
            "shared": 2.0 * t * (m.shared_params - (m.hidden if m.shared_params else 0)) / tp,
            "router": 2.0 * t * m.router_params / tp,
            "head": 2.0 * t * m.hidden * m.vocab / tp,
        }
        mfu = self.hw.train_mfu
        return {key: float(self._flops_s(v, mfu)) for key, v in f.items()}

    def _layer(self, s: int, backward: bool, sz: dict[str, int], sec: dict[str, float]) -> None:
        """One layer of stage s, forward or backward, on every group of the stage."""
        m, tl, b = self.m, self.tl, self.b
        ph = "bwd" if backward else "fwd"
        x = 2.0 if backward else 1.0
        ranks = tl.grid[s]
        tp_g = tl.tp_groups(s)

        def tp_ar():
            if tl.tp > 1:
                b.emit(tp_g, sz["tp_ar"], stage="train", phase=ph, kind="all_reduce")

        def attention():
            b.compute(ranks, x * sec["qkv"] if not backward else x * sec["o"])
            if tl.cp > 1:
                first, second = ("cp_qkv", "cp_out") if not backward else ("cp_out", "cp_qkv")
                b.emit(tl.cp_groups(s), sz[first], stage="train", phase=ph, kind="all_to_all")
                b.compute(ranks, x * sec["core"])
                b.emit(tl.cp_groups(s), sz[second], stage="train", phase=ph, kind="all_to_all")
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
                b.emit(ep_g, sz["ep"], stage="train", phase=ph, kind="all_to_all")
                b.compute(ranks, x * sec["experts"])
                b.emit(ep_g, sz["ep"], stage="train", phase=ph, kind="all_to_all")
                if m.shared_expert_ffn:
                    b.compute(ranks, x * sec["shared"])
                    tp_ar()

        if backward:
            ffn()
            attention()
        else:
            attention()
            ffn()

    def _pipeline(self, m_mb: int, t_mb: int, s_eff: float, fb_period: int, grad_period: int) -> None:
        """1F1B schedule of every stage, merged into one topological emission order."""
        tl, b, pp = self.tl, self.b, self.tl.pp
        sz = self._train_sizes(t_mb)
        sec = self._train_flops(sz["t"], s_eff)
        progs = []
        for s in range(pp):
            warm = min(pp - s - 1, m_mb)
            order = [("F", j) for j in range(warm)]
            for j in range(m_mb - warm):
                order += [("F", warm + j), ("B", j)]
            order += [("B", j) for j in range(m_mb - warm, m_mb)]
            prog = []
            for d, j in order:
                if d == "F":
                    prog += (
                        ([("recvF", j)] if s > 0 else [])
                        + [("F", j)]
                        + ([("sendF", j)] if s < pp - 1 else [])
                    )
                else:
                    prog += (
                        ([("recvB", j)] if s < pp - 1 else [])
                        + [("B", j)]
                        + ([("sendB", j)] if s > 0 else [])
                    )
            progs.append(prog + [("grad", 0)])
        sent: dict[tuple[str, int, int], np.ndarray] = {}
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
                        if backward and s == pp - 1:
                            b.compute(tl.grid[s], 2.0 * sec["head"])
                        layers = range(self.tl.stage_layers[s])
                        for _ in layers:
                            self._layer(s, backward, sz, sec)
                        if not backward and s == pp - 1:
                            b.compute(tl.grid[s], sec["head"])
                    elif what in ("sendF", "sendB"):
                        b.period = fb_period
                        peer = s + 1 if what == "sendF" else s - 1
                        pairs = np.stack([tl.grid[s].ravel(), tl.grid[peer].ravel()], axis=1)
                        ids = b.emit(
                            pairs,
                            sz["pp"],
                            stage="train",
                            phase="fwd" if what == "sendF" else "bwd",
                            kind="send",
                            algorithm="direct",
                            program=[0],
                        )
                        sent[(what[-1], s, j)] = ids
                    else:
                        b.period = grad_period
                        self._grad_sync(s)
                    ptr[s] += 1
                    remaining -= 1
                    progress = True
            if not progress:
                raise RuntimeError("internal error: pipeline schedule cannot progress")

    def _stage_params(self, s: int) -> tuple[int, int]:
        """(dense, expert) parameter counts of stage s."""
        m, tl = self.m, self.tl
        L = tl.stage_layers[s]
        dense = L * m.layer_dense_params
        if s == 0:
            dense += m.embedding_params
        if s == tl.pp - 1:
            dense += m.head_params
        return dense, L * m.layer_expert_params

    def _grad_sync(self, s: int) -> None:
        tl, b = self.tl, self.b
        dense, expert = self._stage_params(s)
        jobs = [(tl.dp_groups(s), _cdiv(dense, tl.tp))]
        if self.m.is_moe:
            jobs.append((tl.edp_groups(s), _cdiv(expert, tl.ep * tl.tp)))
        jobs = [(grp, n) for grp, n in jobs if grp.shape[1] > 1]
        if not self.distopt:
            for grp, n in jobs:
                b.emit(grp, n * self.grad, stage="train", phase="grad_sync", kind="all_reduce")
            return
        for grp, n in jobs:
            b.emit(grp, n * self.grad, stage="train", phase="grad_sync", kind="reduce_scatter")
        for grp, n in jobs:
            b.emit(grp, n * self.param, stage="train", phase="grad_sync", kind="all_gather")

    # -- weight sync -----------------------------------------------------------------------
    def _weight_shards(self) -> tuple[np.ndarray, np.ndarray]:
        """Per shard (stage-major, then ep, then tp): holder index within a copy, bytes."""
        tl = self.tl
        sizes = []
        for s in range(tl.pp):
            dense, expert = self._stage_params(s)
            total = dense + expert
            q, r = divmod(total, tl.ep * tl.tp)
            sizes += [(q + (1 if i < r else 0)) * self.param for i in range(tl.ep * tl.tp)]
        return np.arange(len(sizes)), np.array(sizes, dtype=_I64)

    def _copy_holders(self, copy: int) -> np.ndarray:
        return np.concatenate(self.tl.holders(copy))

    def weight_sync(self, it: int) -> None:
        """Emit the train -> gen weight transfer of iteration ``it``."""
        gl, b = self.gl, self.b
        b.iteration = it
        b.period = self._new_period()
        shard_ids, shard_bytes = self._shards
        n_sh = len(shard_ids)
        copies = self.tl.edp
        size = gl.size
        member = shard_ids % size
        if self.ws_mode == "flat":
            targets = np.arange(gl.dp)  # every instance receives every shard
            phase = "broadcast"
        else:
            targets = np.arange(0, gl.dp, self.pod_inst)  # first instance of each pod
            phase = "inter_pod"
        for c in range(min(copies, len(targets))):
            served = targets[np.arange(len(targets)) % copies == c]
            holders = self._copy_holders(c)
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
        if self.ws_mode == "flat":
            return
        per_member = np.zeros(size, dtype=_I64)
        np.add.at(per_member, member, shard_bytes)
        pods = [np.arange(p, min(p + self.pod_inst, gl.dp)) for p in range(0, gl.dp, self.pod_inst)]
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
