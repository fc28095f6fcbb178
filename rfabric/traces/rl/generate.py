"""Synthetic communication traces of disaggregated RL post-training (`generate_rl`).

Builds, from a model architecture and a placement, the op DAG of ``traces/README.md`` for
a number of RL iterations. This module validates the arguments, resolves the layouts and
calls the stage emitters (`generation`, `training`, `weight_sync`) in the order of the RL
mode; each emitter lives in its own module and appends ops to the shared `OpBuilder`.
Columns are built with numpy, one vectorised call per collective per group family, so
that 2048-GPU traces take seconds, not hours. Knows nothing about fabrics or the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from ...errors import SpecError
from ...units import parse_size
from ...validators import boolean, integer, known_keys
from ..models import H800, Hardware, ModelConfig, get_gpu, get_model
from ..schema import SCHEMA_VERSION, encode_metadata
from ..trace import Trace
from .autolayout import default_gen, default_train
from .context import RLContext
from .experience import RL_ALGORITHMS, emit_experience, experience_passes
from .generation import emit_generation, kv_pairs
from .layout import GenLayout, TrainLayout
from .memory import MEMORY_CHECKS, RECOMPUTE, check_memory
from .training import emit_training, receive_samples
from .weight_sync import WEIGHT_SYNC_MODES, check_reshard, emit_weight_sync

__all__ = ["generate_rl", "DECODE_GRANULARITIES", "PLACEMENTS"]

#: ``placement`` values of `generate_rl`.
PLACEMENTS = ("disaggregated", "colocated")

#: ``decode_granularity`` values of `generate_rl`.
DECODE_GRANULARITIES = ("aggregated", "step")

_I64 = np.int64


def generate_rl(
    model: str | ModelConfig | Mapping[str, Any],
    *,
    train_gpus: int,
    gen_gpus: int,
    train: Mapping[str, Any] | None = None,
    gen: Mapping[str, Any] | None = None,
    prefill: Mapping[str, Any] | None = None,
    iterations: int = 1,
    seed: int = 0,
    mode: str = "sync",
    algorithm: str = "grpo",
    reward_model: bool | None = None,
    global_batch: int = 512,
    prompt_len: int = 512,
    response: Mapping[str, Any] | None = None,
    micro_batch_tokens: int | None = None,
    optimizer_steps: int = 1,
    distributed_optimizer: bool = False,
    zero_stage: int | None = None,
    grad_bucket_bytes: int | None = None,
    optimizer_bytes_per_param: int = 30,
    placement: str = "disaggregated",
    weight_sync: str | None = None,
    weight_bucket_bytes: int | str | None = None,
    pod_gpus: int | None = None,
    decode_granularity: str = "aggregated",
    decode_steps_per_op: int | None = None,
    decode_layers_per_op: int | None = None,
    hardware: Hardware | str = H800,
    train_hardware: Hardware | str | None = None,
    gen_hardware: Hardware | str | None = None,
    param_bytes: int = 2,
    act_bytes: int = 2,
    grad_bytes: int = 4,
    train_ranks: Sequence[int] | None = None,
    gen_ranks: Sequence[int] | None = None,
    memory_check: str = "warn",
    recompute: str = "none",
) -> Trace:
    r"""Generate the communication trace of disaggregated RL post-training.

    Placement: train GPUs are global ranks ``0 .. train_gpus-1`` and gen GPUs
    ``train_gpus .. train_gpus+gen_gpus-1`` unless ``train_ranks``/``gen_ranks`` say
    otherwise, or, with ``placement="colocated"``, gen runs on the train GPUs. Each
    iteration i emits, in order of dependencies:

    * **gen** (stage ``gen``): prefill then decode of ``global_batch`` responses whose
      lengths are drawn from a clipped log-normal distribution;
    * **response_stream**: the finished samples, sent from gen to train as they finish;
    * **experience**: forward-only passes over all the samples (reward model, old and
      reference log-probs, critic values; see ``algorithm``);
    * **train**: forward/backward of every micro-batch (1F1B pipeline schedule) and
      gradient synchronisation, ``optimizer_steps`` times;
    * **weight_sync**: the new weights from train to gen.

    ``mode="sync"``: gen(i) -> stream -> experience(i) -> train(i) -> weight_sync(i) ->
    gen(i+1). ``mode="async"`` (one-step off-policy, StreamRL/veRL): gen(i+1) runs with
    the weights of train(i-1) while experience(i) and train(i) run; weight_sync(i) waits for train(i) and for gen(i+1)
    to finish, and gen(i+2) waits for weight_sync(i) (``weight_sync="relay"``: an instance's gen(i+2)
    waits for its own pull only, which waits for that instance's gen(i+1)).

    Parameters
    ----------
    model : str, ModelConfig or dict
        A name of `MODELS` (``qwen2.5-7b``, ``qwen2.5-14b``, ``qwen2.5-32b``, ``qwen2.5-72b``,
        ``qwen2-57b-a14b``, ``qwen3-235b-a22b``, ``deepseek-v3``, ``kimi-k2``), a user `ModelConfig`,
        or a dict changing fields of a named model, ``{"base": "qwen2.5-14b", "layers":
        2}`` (named ``qwen2.5-14b-2L``; as sweeps' model tables; `get_model`).
    train_gpus, gen_gpus : int
        GPU counts of the training and generation clusters.
    train : dict, optional
        ``tp``, ``pp``, ``cp``, ``ep`` (default 1) and ``dp`` (default
        ``train_gpus / (tp pp cp)``); ``tp pp cp dp`` must equal ``train_gpus``; ``ep``
        must divide ``cp dp`` and the expert count. None or empty: a default that fits the
        GPU memory (`rfabric.traces.rl.autolayout`): the reference paper's layout for its
        models (Appendix C: Qwen2.5-72B TP 8, PP 2, CP 3; Qwen2-57B-A14B TP 4, EP 16; §2:
        Qwen2.5-14B TP 8, PP 2; dp scaled) when the GPU count admits it and it fits, else
        the first fitting layout in the order (tp*pp*cp, pp, cp, ep, ZeRO stage) with tp
        inside an 8-GPU server; when ``zero_stage`` and ``distributed_optimizer`` are left
        unset the default may turn on the distributed optimizer (ZeRO 1) to fit. Nothing
        fitting raises `rfabric.LayoutFitError`, which names a GPU count that would fit.
        ``parameters.layout_source`` in the metadata says which (``paper``, ``search`` or
        ``given``).
    gen : dict, optional
        ``tp`` (default 1), ``ep`` (default 1; > 1 selects EP mode, a multiple of tp),
        ``afd`` (``dict(attn=M, ffn=N)``: attention-FFN disaggregation, MoE only) and
        ``dp`` (instances; default ``gen_gpus / instance size``). Instance size: tp (TP
        mode), ep (EP mode) or M + N (AFD). None or empty: the paper's (§2 Qwen2.5-14B TP 8;
        §7.4 Qwen3-235B-A22B TP 8) if it fits, else the smallest TP (then EP, for MoE)
        instance whose GPUs hold their weights and the KV cache of their share of
        ``global_batch`` at ``prompt_len + response median`` tokens (at least one
        ``prompt_len + response max`` sequence); `rfabric.LayoutFitError` if none does.
    prefill : dict, optional
        Prefill/decode disaggregation: ``dict(tp=T, dp=D)`` (tp default 1, dp default 1)
        makes the last ``T D`` gen GPUs D prefill instances of TP T; the other gen GPUs
        are the decode instances of ``gen`` (its dp then defaults to the remaining GPUs
        / instance size). Unit u's prompts are prefilled on prefill instance ``u mod D``,
        which then sends their KV cache to the unit's ranks (phase ``kv_transfer``, see
        Notes), and the unit starts decoding once it arrived, as Mooncake, DistServe and
        SGLang's PD mode (``--disaggregation-mode prefill/decode``) run it; weight sync
        reaches the prefill instances too. Default None: each gen instance prefills its
        own prompts (vLLM's and veRL's default, colocated prefill and decode).
    iterations : int
        RL iterations.
    seed : int
        Seed of the response-length draws (numpy ``default_rng``); nothing else is random.
    mode : {"sync", "async"}
        Synchronous or one-step asynchronous RL.
    algorithm : {"grpo", "ppo", "none"}
        Which make-experience forward passes run between the samples' arrival and
        training (stage ``experience``, one period per pass). ``"grpo"`` (default, as
        veRL's GRPO recipe ``examples/grpo_trainer``: ``adv_estimator=grpo`` with
        ``use_kl_loss=True``): the actor's old log-probs (``old_logprob``) and the
        reference policy's log-probs (``ref_logprob``). ``"ppo"`` (veRL's
        ``ppo_trainer.yaml`` default estimator ``gae``): those two plus the critic's
        values (``critic_value``). ``"none"``: no pass (the trainer reuses the rollout's
        log-probs and has no KL term). Critic training is not modelled.
    reward_model : bool, optional
        A reward-model forward pass (``reward``) before the others. Default: True for
        PPO (RLHF with a learned reward model, as OpenRLHF's PPO with
        ``--reward_pretrain``), False otherwise (GRPO on verifiable rewards: a
        rule-based reward computed on CPU, veRL's ``reward_model.enable: False``).
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
    zero_stage : {0, 1, 2, 3}, optional
        Data-parallel sharding of the model states over each data-parallel group (dense
        parameters over cp*dp, experts over the expert-DP group). 0: replicated, gradient
        all-reduce (Megatron-LM DDP). 1: optimizer state sharded: reduce-scatter of the
        gradients, optimizer step on the shard, all-gather of the parameters (Megatron
        ``--use-distributed-optimizer``, DeepSpeed ZeRO-1; same as
        ``distributed_optimizer=True``). 2: gradients sharded too: every micro-batch's
        backward reduce-scatters each layer's gradients as it finishes it, then one
        parameter all-gather after the step (DeepSpeed ZeRO-2). 3: parameters sharded
        too: each layer's parameters are all-gathered before it runs, in forward
        (make-experience passes included) and again in backward, gradients
        reduce-scattered per layer, no all-gather after the step (DeepSpeed ZeRO-3, and
        PyTorch FSDP ``FULL_SHARD`` with one unit per decoder layer, as veRL's FSDP
        workers wrap them). Default None: 1 with ``distributed_optimizer``, else 0
        (Megatron-LM's default).
    grad_bucket_bytes : int or str, optional
        Gradient sync in buckets of this many bytes per rank (``"25MiB"`` or bytes), each reduced as soon as the
        last micro-batch's backward has produced it, overlapping the rest of the backward
        (PyTorch DDP: ``bucket_cap_mb=25``, 25 MiB; Megatron-Core with
        ``--overlap-grad-reduce``: ``max(40e6, 1e6 dp)`` parameters, times grad_bytes).
        Default None, as Megatron-LM (``overlap_grad_reduce`` off): one reduction per
        parameter family after the stage's backward.
    optimizer_bytes_per_param : int
        HBM bytes the optimizer step moves per parameter a rank updates: a compute gap
        between the gradient reduction and the next op (the parameter all-gather, the next
        step or the weight sync). Default 30, Megatron-LM's mixed-precision Adam: it reads
        the FP32 gradient, main parameter and both moments (16) and writes the main
        parameter, both moments (12) and the BF16 parameter (2). 0: no gap.
    placement : {"disaggregated", "colocated"}
        ``"disaggregated"`` (default; StreamRL's and OrchestrRL's setup, and veRL's
        one-step off-policy recipe): train and gen on disjoint GPUs, as above.
        ``"colocated"`` (veRL's default hybrid engine, ``actor_rollout_ref`` on one
        resource pool; OpenRLHF ``--colocate_all_models``): trainer and rollout
        time-share the same GPUs: ``gen_gpus`` must equal ``train_gpus`` and gen instance
        i is ranks ``i size .. (i+1) size - 1`` of the train GPUs; the stages run one after
        another on them (``mode="sync"`` only). Samples only cross the network when the
        replica that trains them is not on the GPU that generated them (a stream send
        from a unit to itself is not emitted); weight sync is the local reshard
        (``weight_sync="reshard"``, see Notes). AFD instances are not colocatable.
        Memory: ``memory_check`` still checks each side alone (veRL offloads the
        trainer's state to CPU memory during rollout).
    weight_sync : {"two_level", "flat", "gather_broadcast", "root", "scatter", "relay", "reshard"}, optional
        Default ``"two_level"`` when disaggregated, ``"reshard"`` (the only choice) when
        colocated (docs/explanation/weight-sync-schemes.md compares them).
        ``flat``: every gen instance receives each train shard directly from train:
        ``dp_gen`` copies of the model cross the train/gen boundary (veRL's baseline in
        RollMux §5.2 figure 8, "AllGather within Micro-DP Groups", 4M for rollout DP 4).
        ``two_level`` (OrchestrRL figure 4): train sends once to the first instance (DP-0)
        of each gen pod, which broadcasts inside its pod. Both send
        ideal shards. ``gather_broadcast``: as frameworks do it (slime's
        ``update_weights_from_distributed``; veRL's one-step off-policy recipe): gather
        full tensors on the trainer, then broadcast them in buckets to every gen GPU.
        ``root`` (StreamRL §6, cross-datacenter): the gathered tensors cross once, root to
        root, then a broadcast inside the gen cluster. ``scatter`` (RollMux §5.2 two-stage
        update): one disjoint piece per training GPU, each to a distinct gen GPU, then a
        broadcast inside the gen cluster. ``relay`` (Laminar): the actor pushes to a
        master relay, a chunked chain among one relay per 8-GPU gen machine, and each gen
        GPU loads its slice from its relay over PCIe once its own instance is done.
        ``root``, ``scatter`` and ``relay`` cross the boundary with the model's bytes
        once; ``scatter`` does not take ``prefill``.
    weight_bucket_bytes : int or str, optional
        Bucket of ``gather_broadcast`` and ``root`` (``"512MiB"`` or bytes; default 512 MiB,
        slime's ``--update-weight-buffer-size``) and chunk of ``relay``'s chain (default
        32 MiB, Laminar's "32MB chunk size").
    pod_gpus : int, optional
        Gen GPUs per pod for ``two_level`` (a multiple of the instance size); default all
        gen GPUs (one pod).
    decode_granularity : {"aggregated", "step"}
        ``"step"``: one collective per decoding step and layer, as an inference engine
        issues them (vLLM and SGLang run every decode step through all layers, each layer's
        TP all-reduces and EP all-to-alls on their own); the same as
        ``decode_steps_per_op=1, decode_layers_per_op=1``. ``"aggregated"`` (default, a
        speed option of this generator, not a framework behaviour): ``decode_steps_per_op``
        steps and ``decode_layers_per_op`` layers per emitted op, so that long responses
        stay at a few thousand ops per instance. Bytes and compute are the same in both;
        what aggregation loses is the per-op latency (launch, fabric and NVSwitch latency,
        NCCL's per-call cost) of the many small messages, and the interleaving of other
        traffic between them. Measured (``bench/decode_granularity.py``, flow backend,
        Qwen2.5-14B shape cut to 4 layers, 8 responses of up to 256 tokens): the default
        aggregation underestimates the gen stage by 7 % with TP 4 inside a server
        (FatTree(16)) and 3.2x with TP 16 across two servers (FatTree(32)), for 206x
        fewer ops. Use ``"step"`` when decode latency matters (small batches, groups
        that leave the server) on short responses or cut models; aggregation for
        fabric-load studies of whole iterations.
    decode_steps_per_op : int, optional
        Decode steps aggregated into one emitted decode op (see below); default 64 (1
        with ``decode_granularity="step"``).
    decode_layers_per_op : int, optional
        Consecutive layers aggregated into one emitted decode/prefill op; default all
        layers (1 with ``decode_granularity="step"``).
    hardware : Hardware or str
        Roofline constants of every GPU (default `H800`): a `Hardware` or a GPU type name
        of `rfabric.traces.models.GPU_TYPES` ("H800", "H20", "H100", "A100").
    train_hardware, gen_hardware : Hardware or str, optional
        Heterogeneous pools: the GPU type of the train pool (training and experience
        compute, the optimizer step and the train side of the memory check) and of the gen
        pool (prefill and decode, the gen side of the memory check, and the default gen
        layout's fit); each defaults to ``hardware``. E.g. ``train_hardware="H800",
        gen_hardware="H20"`` as StreamRL and RollMux deploy. With
        ``placement="colocated"`` both sides share the GPUs, so they must be equal.
    param_bytes, act_bytes, grad_bytes : int
        Bytes per parameter on the wire (BF16: 2), per activation element (BF16: 2) and per
        gradient element (4: Megatron-LM reduces BF16 gradients in FP32,
        ``accumulate_allreduce_grads_in_fp32``).
    train_ranks, gen_ranks : sequence of int, optional
        Global GPU ids of the train and gen GPUs (disjoint); the trace's ``gpus`` becomes
        the largest id + 1.
    memory_check : {"warn", "error", "off"}
        What to do when a given layout does not fit a GPU (``hardware.hbm_capacity_bytes``,
        80 GB for `H800`): a train GPU holds, on its worst pipeline stage, its weights
        (param_bytes), gradients (grad_bytes) and Adam state (12 bytes per parameter: FP32
        main parameter and two moments), each divided over the data-parallel group as
        ``zero_stage`` shards it (state from 1, gradients from 2, weights at 3), plus the
        activations of ``pp - s`` micro-batches of ``micro_batch_tokens / cp`` tokens on
        stage s (1F1B; per layer and token ``4 h`` replicated and ``2 q + 2 kv + 3 f``, or
        the MoE equivalent, split over tp, in act_bytes; the last stage also BF16 + FP32
        logits; `rfabric.traces.rl.memory`); a gen GPU its weights (dense parameters /
        tp, routed experts / ep or / ffn under AFD) plus the KV cache of one
        ``prompt_len + response max`` sequence. Default ``"warn"``: a `MemoryFitWarning`
        (the trace is still generated: network studies may want it); ``"error"``:
        SpecError. Layouts chosen by default (``train``/``gen`` None) always fit or raise
        `rfabric.LayoutFitError`. Framework buffers and prefill instances (``prefill``)
        are not counted, so passing does not prove a fit. The per-GPU bytes, in total and
        by part, go to the metadata (``memory_bytes_per_gpu``).
    recompute : {"none", "full"}
        Activation recomputation of the training backward. ``"none"`` (default) keeps every
        activation of the micro-batches in flight. ``"full"`` keeps only each layer's input
        (``h`` elements per token) and, in every backward, re-runs the layer's forward first:
        its compute (so a layer's backward costs 3x its forward FLOPs instead of 2x) and its
        TP all-reduces and EP all-to-alls, in phase ``fwd_recompute`` (Megatron-LM
        ``--recompute-granularity full --recompute-method uniform --recompute-num-layers 1``).
        Default layouts are searched under the given setting.

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
    those sizes, then all-gather of ``ceil(D_s / tp) p`` and ``ceil(X_s / (ep tp)) p`` (ZeRO
    stage 1). With ``grad_bucket_bytes`` = c, each family's ``ceil(.) g`` bytes are cut, in backward
    order (output layer, last layer .. first layer, embedding), into ``ceil(. / c)``
    buckets of c bytes (the last one the remainder; parameter boundaries are ignored);
    a bucket's all-reduce (reduce-scatter) is a side op issued once the last
    micro-batch's backward has passed the layer holding its last byte, after the
    family's previous bucket, and the stage's optimizer step waits for the last one. The
    parameter all-gather stays one op per family after the optimizer step.

    ZeRO-2/3 units: each decoder layer (``L_d`` dense, ``L_x`` expert parameters), plus
    one unit of the stage's embedding and output layer (``D_s - L_s L_d``) gathered before
    the first layer and reduce-scattered after the last one. Per unit and micro-batch:
    ZeRO-3 all-gather (phase ``param_gather``) of ``ceil(L_d / tp) p`` over the dense
    groups and ``ceil(L_x / (ep tp)) p`` over the expert groups, before the forward and
    again before the backward (no prefetch: the layer waits for it); ZeRO-2/3
    reduce-scatter (phase ``grad_sync``) of ``ceil(L_d / tp) g`` and ``ceil(L_x / (ep tp))
    g`` after the unit's backward, as side ops chained per family, the optimizer step
    waiting for the last.

    Optimizer step (``optimizer_bytes_per_param`` = o): per rank of stage s, ``(D_s / tp
    + X_s / (ep tp)) o / (HBM x hbm_efficiency)`` seconds, with the distributed optimizer
    ``(D_s / (tp cp dp) + X_s / (ep tp cp dp / ep)) o / (...)`` (each rank updates its
    shard; any ZeRO stage >= 1), after the gradient reduction and before the parameter all-gather.

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
    decode sum. With ``prefill`` (TP T instances, D of them), prefill instance ``p``
    runs those ops for the ``n_p`` sequences of its units (units ``u = p mod D``), with
    ``prompt_len * n_p`` tokens, then sends each unit's KV cache: ``2 L g d a`` bytes per
    prompt token and KV head (K and V of every layer, d = head_dim, in act_bytes; a model
    with latent attention (MLA) has one cache "head" of ``kv_lora_rank + qk_rope_head_dim``
    per layer, held by every TP rank).
    KV head g lives on TP rank ``t`` with ``t kv_heads // tp == g`` block-wise (tp <=
    kv_heads: ``kv_heads / tp`` heads per rank) or replicated on ``tp / kv_heads`` ranks
    (tp > kv_heads), on both sides; each decode rank receives each head it needs from
    one prefill holder (the decode rank's index modulo the holders), one ``send`` per
    (prefill rank, decode rank) pair with the heads they share, all layers in one
    message. A unit's first decode op waits for all its KV sends. Decode compute (roofline, per rank, per step and layer):
    ``max(bytes / (HBM x hbm_efficiency), FLOPs / (peak x gen_mfu))`` where bytes are the
    weights read (attention / tp; dense MLP / tp; experts touched by the batch,
    ``E (1 - (1 - k/E)^b)`` for b tokens, spread over the expert ranks) plus the KV cache
    read (``2 kv a`` per context token, / min(tp, kv_heads)), and FLOPs are 2 per weight
    per token plus ``4 q`` per context token (QK and AV); MLA (absorbed): ``r + r_rope`` KV
    bytes per context token on every rank and ``2 heads (2 r + r_rope) / tp`` FLOPs, r the
    latent width; an MoE model's first dense layers enter with their share of the layers
    (every emitted layer is alike, so an EP model's dense layers also carry the all-to-alls
    of the MoE layers); the output layer (``V h``) is
    read once per step. Compute is attached to the next op of the rank that did it (an op's
    compute_ps is the largest owed by its ranks).

    **Make-experience** (veRL ``RayPPOTrainer.fit``: ``compute_rm_score``,
    ``compute_log_prob``, ``compute_ref_log_prob``, ``compute_values``, in that order): each
    pass is a forward-only pipeline over all ``global_batch`` samples in the train layout
    (veRL colocates the reference, critic and reward models with the actor, with the same
    parallelism), each model of the policy's architecture: ``m = ceil(T / (dp
    micro_batch_tokens))`` micro-batches per replica over the iteration's T tokens, and per
    micro-batch and layer the forward collectives of training (TP all-reduce, CP and EP
    all-to-all, PP send), with phase = the pass name. All forwards of a stage run back to
    back (no 1F1B). Forward compute as in training; the critic's and the reward model's
    scalar heads replace the LM head and are left out. The vocabulary-parallel log-prob
    reductions (3 all-reduces of ``4 t`` bytes per micro-batch) are not emitted.

    **Response streaming**: for each unit, decode chunk (K steps) and train replica, the
    samples finishing in that chunk go in one ``send`` from the unit's first rank to the
    replica's first rank (stage 0, cp 0, tp 0); sample j goes to replica ``j mod dp``; a
    sample costs ``4 prompt_len + 8 n + 4`` bytes. The send does not block the decoder;
    the first training op of every stage-0 rank of the replica waits for all its samples
    (the replica's intra-stage data broadcast is not emitted). A send waits for the
    sender's last op and the compute the sender owes since (so with gen TP 1, no collective
    of its own, a send carries the unit's prefill and decode up to its chunk). At the end
    of a rollout the compute a rank still owes stays with the rollout: if its last send
    carried it, that send becomes the rank's latest op (the next rollout on the GPU, and in
    async mode the weight sync, wait for it); compute no send carries (a unit whose
    responses finished before its instance's, a prefill rank) is dropped, or, colocated,
    left for the trainer's next op on that GPU (which then starts that compute after the
    samples streamed to it have arrived: an overestimate). It never reaches the weight sync.

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
    pod crosses the boundary. ``gather_broadcast``, per stage s: the ep*tp ranks of copy 0
    all-gather (phase ``gather``) the dense TP shards, ``ceil(D_s / tp) tp p`` per tp
    group (if tp > 1), and the expert shards, ``ceil(X_s / (ep tp)) ep tp p`` over all
    of them (if ep tp > 1), after, under ZeRO-3, an all-gather of ``ceil(D_s / tp) p`` and
    ``ceil(X_s / (ep tp)) p`` over every data-parallel group (FSDP's full state dict); then
    the stage's first rank broadcasts ``(D_s + X_s) p``
    bytes in ``ceil(. / weight_bucket_bytes)`` buckets (phase ``bucket_broadcast``, the
    last one the remainder) to every gen GPU, which keeps its own slice (resharding to
    the gen TP/EP layout costs no traffic): ``gen_gpus`` copies reach the gen side.
    ``reshard`` (colocated placement; veRL's ``FSDPVLLMShardingManager`` and
    ``MegatronVLLMShardingManager``): under ZeRO-3 the all-gathers of ``gather_broadcast``
    (phase ``gather``); with pp > 1, for each stage s, a ``broadcast`` of
    ``(ceil(D_s / tp) + ceil(X_s / (ep tp))) p`` bytes from every rank of stage s to the
    ranks at the same (dp, cp, tp) position of the other stages (phase ``pp_broadcast``);
    then with r = tp / gen_tp > 1 an all-gather of ``r sum_s ceil(D_s / tp) p`` over
    groups of r consecutive ranks (phase ``tp_gather``), and for MoE with r_x = ep tp /
    g_x > 1 (g_x = gen ep in EP mode, gen tp in TP mode) an all-gather of
    ``r_x sum_s ceil(X_s / (ep tp)) p`` over groups of r_x consecutive ranks. The groups'
    pairing of ranks is the trainer's order; every rank receives what its gen slice lacks
    (the per-rank volume of any pairing). Nothing moves when the gen split is as fine or
    finer (each rank slices what it holds).
    ``root``: the gathers of ``gather_broadcast``, then per stage and bucket a ``send``
    from the stage's first rank to the first gen GPU (phase ``inter_cluster``) and a
    ``broadcast`` of the bucket from there to every other gen GPU (phase
    ``intra_cluster``). ``scatter``: holder shard h of copy c is cut into ``edp`` pieces
    (``S_h // edp``, the first ``S_h mod edp`` one byte more); the holder in copy c sends
    piece c to member ``h mod size`` of instance ``k mod dp_gen`` (k counts the pieces of
    that member; phase ``scatter``), which broadcasts it to the same member of every other
    instance (phase ``broadcast``). ``relay``: the copy-0 holders send their shards to the
    master relay (the first gen GPU; phase ``push``); the relays (first GPU of every
    8 consecutive gen GPUs) pass ``ceil(P p / weight_bucket_bytes)`` chunks down the chain,
    one ``send`` per chunk and hop in no GPU's program order (phase ``relay_chain``); each
    gen GPU then runs a one-rank ``broadcast`` of its slice (phase ``pull``, no fabric
    bytes) after its own last op, the last chunk's arrival at its relay and ``slice / 63
    GB/s`` of PCIe Gen5 x16 copy time. Under ``mode="async"`` a relay pull waits for its
    own instance's gen(i+1) only, not for every instance's.

    **Periods**: one id per (iteration, gen), (iteration, response_stream), (iteration,
    make-experience pass), (iteration, optimizer step, fwd/bwd), (iteration, optimizer
    step, grad_sync) and (iteration, weight_sync), numbered in emission order.

    Raises
    ------
    SpecError
        On an inconsistent configuration.
    LayoutFitError
        (a SpecError) When ``train`` or ``gen`` is left out and no layout of the GPUs fits
        the model in memory; the message names what would fit.
    """
    mdl = get_model(model, "generate_rl: model")
    train_gpus = integer(train_gpus, "train_gpus", lo=1)
    gen_gpus = integer(gen_gpus, "gen_gpus", lo=1)
    iterations = integer(iterations, "iterations", lo=1)
    global_batch = integer(global_batch, "global_batch", lo=1)
    prompt_len = integer(prompt_len, "prompt_len", lo=1)
    optimizer_steps = integer(optimizer_steps, "optimizer_steps", lo=1)
    if decode_granularity not in DECODE_GRANULARITIES:
        raise SpecError(
            f"decode_granularity must be one of {', '.join(map(repr, DECODE_GRANULARITIES))}, "
            f"got {decode_granularity!r}"
        )
    step = decode_granularity == "step"
    K = 1 if step else 64
    if decode_steps_per_op is not None:
        K = integer(decode_steps_per_op, "decode_steps_per_op", lo=1)
    lpo = 1 if step else mdl.layers
    if decode_layers_per_op is not None:
        lpo = integer(decode_layers_per_op, "decode_layers_per_op", lo=1)
    if step and (K, lpo) != (1, 1):
        raise SpecError(
            'decode_granularity="step" is one op per step and layer; it contradicts '
            f"decode_steps_per_op={K}, decode_layers_per_op={lpo}"
        )
    for name, v in (("param_bytes", param_bytes), ("act_bytes", act_bytes), ("grad_bytes", grad_bytes)):
        integer(v, name, lo=1)
    seed = integer(seed, "seed", lo=0)
    if recompute not in RECOMPUTE:
        raise SpecError(f"recompute must be one of {', '.join(map(repr, RECOMPUTE))}, got {recompute!r}")
    if memory_check not in MEMORY_CHECKS:
        raise SpecError(
            f"memory_check must be one of {', '.join(map(repr, MEMORY_CHECKS))}, got {memory_check!r}"
        )
    if algorithm not in RL_ALGORITHMS:
        raise SpecError(f"algorithm must be one of {', '.join(map(repr, RL_ALGORITHMS))}, got {algorithm!r}")
    reward_model = algorithm == "ppo" if reward_model is None else boolean(reward_model, "reward_model")
    distributed_optimizer = boolean(distributed_optimizer, "distributed_optimizer")
    if zero_stage is None:
        zero = 1 if distributed_optimizer else 0
    else:
        zero = integer(zero_stage, "zero_stage", lo=0, hi=3)
        if distributed_optimizer and zero != 1:
            raise SpecError(f"distributed_optimizer=True is ZeRO stage 1; it contradicts zero_stage={zero}")
    if grad_bucket_bytes is not None:
        grad_bucket_bytes = parse_size(grad_bucket_bytes, allow_zero=False, name="grad_bucket_bytes")
        if zero >= 2:
            raise SpecError(
                f"grad_bucket_bytes applies to zero_stage 0 and 1; zero_stage={zero} reduce-scatters "
                "the gradients layer by layer"
            )
    optimizer_bytes_per_param = integer(optimizer_bytes_per_param, "optimizer_bytes_per_param", lo=0)
    if mode not in ("sync", "async"):
        raise SpecError(f"mode must be 'sync' or 'async', got {mode!r}")
    if placement not in PLACEMENTS:
        raise SpecError(f"placement must be one of {', '.join(map(repr, PLACEMENTS))}, got {placement!r}")
    colocated = placement == "colocated"
    if colocated:
        if weight_sync not in (None, "reshard"):
            raise SpecError(
                f"placement='colocated' syncs weights by a local reshard; weight_sync={weight_sync!r} "
                "is a disaggregated scheme"
            )
        weight_sync = "reshard"
        if mode != "sync":
            raise SpecError("placement='colocated' time-shares the GPUs: mode must be 'sync'")
        if gen_gpus != train_gpus:
            raise SpecError(
                f"placement='colocated' needs gen_gpus == train_gpus, got {gen_gpus} and {train_gpus}"
            )
        if gen_ranks is not None or pod_gpus is not None:
            raise SpecError(
                "placement='colocated' puts gen on the train ranks: leave gen_ranks and pod_gpus out"
            )
    elif weight_sync is None:
        weight_sync = "two_level"
    elif weight_sync not in WEIGHT_SYNC_MODES:
        raise SpecError(
            f"weight_sync must be one of {', '.join(map(repr, WEIGHT_SYNC_MODES))}, got {weight_sync!r}"
        )
    if weight_bucket_bytes is None:
        weight_bucket_bytes = 32 << 20 if weight_sync == "relay" else 512 << 20
    weight_bucket_bytes = parse_size(weight_bucket_bytes, allow_zero=False, name="weight_bucket_bytes")
    hardware = get_gpu(hardware, "hardware")
    train_hw = hardware if train_hardware is None else get_gpu(train_hardware, "train_hardware")
    gen_hw = hardware if gen_hardware is None else get_gpu(gen_hardware, "gen_hardware")
    if colocated and train_hw != gen_hw:
        raise SpecError(
            f"placement='colocated' runs gen on the train GPUs: train_hardware ({train_hw.name}) "
            f"and gen_hardware ({gen_hw.name}) must be the same"
        )
    if optimizer_steps > global_batch:
        raise SpecError(f"optimizer_steps={optimizer_steps} exceeds global_batch={global_batch}")
    resp = {"median": 2048, "sigma": 1.0, "max": 16384, "min": 1}
    known_keys(response or {}, resp, "response")
    resp.update(response or {})
    r_med, r_max, r_min = (integer(resp[k], f"response {k}", lo=1) for k in ("median", "max", "min"))
    r_sigma = resp["sigma"]
    if isinstance(r_sigma, bool) or not isinstance(r_sigma, (int, float)) or not 0 <= r_sigma < 10:
        raise SpecError(f"response sigma must be a number in [0, 10), got {r_sigma!r}")
    if not r_min <= r_med <= r_max:
        raise SpecError(f"response lengths need min <= median <= max, got {r_min}, {r_med}, {r_max}")
    mbt = (
        prompt_len + r_max
        if micro_batch_tokens is None
        else integer(micro_batch_tokens, "micro_batch_tokens", lo=1)
    )

    source = {"train": "given", "gen": "given"}
    if not train:
        choice, source["train"] = default_train(
            mdl,
            train_gpus,
            zero=None if zero_stage is None and not distributed_optimizer else zero,
            cap=train_hw.hbm_capacity_bytes,
            param=param_bytes,
            grad=grad_bytes,
            tokens=mbt,
            act=act_bytes,
            recompute=recompute,
        )
        train = {k: v for k, v in choice.layout().items() if k != "ep" or mdl.is_moe}
        zero = choice.zero
    tl = TrainLayout(mdl, train_gpus, dict(train))
    pl = None
    if prefill is not None:
        if colocated:
            raise SpecError("prefill/decode disaggregation needs placement='disaggregated'")
        known_keys(prefill, ("tp", "dp"), "prefill", "parallelism key")
        p_tp = integer(prefill.get("tp", 1), "prefill tp", lo=1)
        p_dp = integer(prefill.get("dp", 1), "prefill dp", lo=1)
        if p_tp * p_dp >= gen_gpus:
            raise SpecError(f"prefill tp*dp = {p_tp * p_dp} leaves no decode GPU of gen_gpus = {gen_gpus}")
        pl = GenLayout(mdl, p_tp * p_dp, dict(tp=p_tp, dp=p_dp), offset=train_gpus + gen_gpus - p_tp * p_dp)
    decode_gpus = gen_gpus - (0 if pl is None else pl.size * pl.dp)
    if not gen:
        gchoice, source["gen"] = default_gen(
            mdl,
            decode_gpus,
            cap=gen_hw.hbm_capacity_bytes,
            param=param_bytes,
            act=act_bytes,
            seq=prompt_len + r_max,
            batch=global_batch,
            typical=prompt_len + r_med,
        )
        gen = gchoice.layout()
    gl = GenLayout(mdl, decode_gpus, dict(gen or {}), offset=0 if colocated else train_gpus)
    if pl is not None:
        kv_pairs(mdl.kv_cache_heads, pl.tp, gl.tp)  # raises if a side cannot hold the KV heads
    if colocated:
        check_reshard(tl, gl)
    if pod_gpus is None:
        pod_inst = gl.dp
    else:
        pod_gpus = integer(pod_gpus, "pod_gpus", lo=1)
        if pod_gpus % gl.size:
            raise SpecError(f"pod_gpus={pod_gpus} must be a multiple of the gen instance size {gl.size}")
        pod_inst = pod_gpus // gl.size

    n_total = train_gpus if colocated else train_gpus + gen_gpus
    rank_map = None
    if train_ranks is not None or gen_ranks is not None:
        tr = np.arange(train_gpus) if train_ranks is None else np.asarray(train_ranks, dtype=_I64)
        gr = np.arange(train_gpus, n_total) if gen_ranks is None else np.asarray(gen_ranks, dtype=_I64)
        if tr.shape != (train_gpus,) or gr.shape != (n_total - train_gpus,):
            raise SpecError("train_ranks/gen_ranks must list exactly train_gpus/gen_gpus GPU ids")
        rank_map = np.concatenate([tr, gr])
        if rank_map.min() < 0 or len(np.unique(rank_map)) != n_total:
            raise SpecError("train_ranks and gen_ranks must be distinct non-negative GPU ids")
        gpus = int(rank_map.max()) + 1
    else:
        gpus = n_total

    g = RLContext(
        mdl,
        tl,
        gl,
        gen_hw,
        train_hw=train_hw,
        K=K,
        lpo=lpo,
        prompt=prompt_len,
        act=act_bytes,
        param=param_bytes,
        grad=grad_bytes,
        mbt=mbt,
        steps=optimizer_steps,
        zero=zero,
        weight_sync=weight_sync,
        pod_inst=pod_inst,
        n_ranks=n_total,
        experience=experience_passes(algorithm, reward_model),
        bucket=grad_bucket_bytes,
        opt_bytes=optimizer_bytes_per_param,
        ws_bucket=weight_bucket_bytes,
        pl=pl,
        seq_max=prompt_len + r_max,
        recompute=recompute,
    )
    need = check_memory(g, memory_check)
    rng = np.random.default_rng(int(seed))
    lengths = []
    for _ in range(iterations):
        z = rng.standard_normal(global_batch)
        lengths.append(np.clip(np.rint(r_med * np.exp(r_sigma * z)), r_min, r_max).astype(_I64))

    if mode == "sync":
        for it in range(iterations):
            receive_samples(g, emit_generation(g, it, lengths[it]))
            emit_experience(g, it, lengths[it])
            emit_training(g, it, lengths[it])
            emit_weight_sync(g, it)
    else:
        pending = {0: emit_generation(g, 0, lengths[0])}
        for it in range(iterations):
            if it + 1 < iterations:
                pending[it + 1] = emit_generation(g, it + 1, lengths[it + 1])
            receive_samples(g, pending.pop(it))
            emit_experience(g, it, lengths[it])
            emit_training(g, it, lengths[it])
            emit_weight_sync(g, it)

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
        "layout_source": source,
        "prefill": None if pl is None else {"tp": pl.tp, "dp": pl.dp},
        "iterations": iterations,
        "seed": int(seed),
        "mode": mode,
        "algorithm": algorithm,
        "reward_model": reward_model,
        "global_batch": global_batch,
        "prompt_len": prompt_len,
        "response": {"median": r_med, "sigma": float(r_sigma), "max": r_max, "min": r_min},
        "micro_batch_tokens": mbt,
        "optimizer_steps": optimizer_steps,
        "distributed_optimizer": distributed_optimizer or zero == 1,
        "zero_stage": zero,
        "grad_bucket_bytes": grad_bucket_bytes,
        "optimizer_bytes_per_param": optimizer_bytes_per_param,
        "placement": placement,
        "weight_sync": weight_sync,
        "weight_bucket_bytes": weight_bucket_bytes,
        "pod_gpus": pod_inst * gl.size,
        "decode_granularity": decode_granularity,
        "decode_steps_per_op": K,
        "decode_layers_per_op": lpo,
        "hardware": asdict(hardware),
        "train_hardware": asdict(train_hw),
        "gen_hardware": asdict(gen_hw),
        "param_bytes": param_bytes,
        "act_bytes": act_bytes,
        "grad_bytes": grad_bytes,
        "train_ranks": None if train_ranks is None else [int(r) for r in rank_map[:train_gpus]],
        "gen_ranks": None if gen_ranks is None else [int(r) for r in rank_map[train_gpus:]],
        "memory_check": memory_check,
        "recompute": recompute,
        "memory_bytes_per_gpu": {k: int(v) for k, v in need.items()},
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
