"""``rfabric trace ...``: generate a synthetic RL trace, import another simulator's workload
(Chakra ET, SimAI/AICB, htsim connection matrix), or summarise a trace file.

`add_subcommand(subparsers)` registers the ``trace`` command on the main ``rfabric``
parser; each leaf sets ``func`` (call ``args.func(args)``, it returns an exit code), and
``rfabric.cli.main`` runs it. Argument parsing only: the work is done by `generate_rl`, `read` and `write`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from ..units import format_size, format_time
from .generator import generate_rl
from .importers import FORMATS, import_trace
from .io import read, write
from .models import DEFAULT_GPU, GPU_TYPES, H800, MODELS, Hardware, get_gpu

__all__ = ["add_subcommand"]


def _afd(text: str) -> dict[str, int]:
    try:
        m, n = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gen-afd wants ATTN:FFN (e.g. 8:8), got {text!r}") from None
    return {"attn": m, "ffn": n}


def add_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``trace`` command (``generate``, ``import``, ``info``/``show``) to ``subparsers``.

    Returns
    -------
    argparse.ArgumentParser
        The ``trace`` parser.
    """
    trace = subparsers.add_parser("trace", help="generate or inspect communication traces")
    sub = trace.add_subparsers(dest="trace_command", metavar="{generate,import,info}", required=True)

    g = sub.add_parser(
        "generate",
        help="generate a disaggregated-RL trace",
        description="Generate a disaggregated RL post-training trace (see rfabric.traces.generate_rl).",
    )
    g.add_argument("--model", default="qwen2.5-14b", help=f"one of {', '.join(MODELS)} (default qwen2.5-14b)")
    g.add_argument(
        "--layers",
        type=int,
        default=None,
        help="keep this many layers of the model (a quick trace; named MODEL-<N>L; default all)",
    )
    g.add_argument("--train-gpus", type=int, required=True, help="training GPUs (ranks 0..N-1)")
    g.add_argument("--gen-gpus", type=int, required=True, help="generation GPUs (ranks after the train GPUs)")
    for dim in ("tp", "pp", "dp", "cp", "ep"):
        g.add_argument(
            f"--train-{dim}",
            type=int,
            default=None,
            help=f"training {dim.upper()} degree (no --train-* given: a layout that fits memory)",
        )
    for dim in ("tp", "dp", "ep"):
        g.add_argument(
            f"--gen-{dim}",
            type=int,
            default=None,
            help=f"generation {dim.upper()} degree (no --gen-* given: an instance that fits memory)",
        )
    g.add_argument(
        "--gen-afd", type=_afd, default=None, metavar="ATTN:FFN", help="attention-FFN disaggregation"
    )
    g.add_argument(
        "--prefill-dp",
        type=int,
        default=None,
        help="prefill/decode disaggregation: this many prefill instances on the last gen GPUs "
        "(default none: each gen instance prefills its own prompts, as vLLM and veRL)",
    )
    g.add_argument("--prefill-tp", type=int, default=1, help="TP degree of a prefill instance (default 1)")
    g.add_argument("--iterations", type=int, default=1, help="RL iterations (default 1)")
    g.add_argument("--seed", type=int, default=0, help="seed of the response lengths (default 0)")
    g.add_argument("--mode", choices=("sync", "async"), default="sync", help="sync or one-step async RL")
    g.add_argument("--global-batch", type=int, default=512, help="responses per iteration (default 512)")
    g.add_argument("--prompt-len", type=int, default=512, help="prompt tokens (default 512)")
    g.add_argument("--response-median", type=int, default=2048, help="median response tokens (default 2048)")
    g.add_argument("--response-sigma", type=float, default=1.0, help="log-normal sigma (default 1.0)")
    g.add_argument("--response-max", type=int, default=16384, help="response cap in tokens (default 16384)")
    g.add_argument("--response-min", type=int, default=1, help="shortest response in tokens (default 1)")
    g.add_argument("--micro-batch-tokens", type=int, default=None, help="tokens per training micro-batch")
    g.add_argument("--optimizer-steps", type=int, default=1, help="optimizer steps per iteration (default 1)")
    g.add_argument(
        "--distributed-optimizer", action="store_true", help="reduce-scatter + all-gather gradients"
    )
    g.add_argument(
        "--grad-bucket-bytes",
        default=None,
        help="gradient buckets overlapping the backward ('25MiB' or bytes)",
    )
    g.add_argument(
        "--algorithm", choices=("grpo", "ppo", "none"), default="grpo", help="make-experience passes"
    )
    g.add_argument(
        "--reward-model",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reward-model forward pass (default: with ppo only)",
    )
    g.add_argument(
        "--memory-check",
        choices=("warn", "error", "off"),
        default="warn",
        help="when a given layout exceeds GPU memory (default warn)",
    )
    g.add_argument(
        "--recompute",
        choices=("none", "full"),
        default="none",
        help="activation recomputation of the training backward (default none)",
    )
    g.add_argument(
        "--placement",
        choices=("disaggregated", "colocated"),
        default="disaggregated",
        help="disaggregated (default; StreamRL, OrchestrRL): train and gen on disjoint GPUs; "
        "colocated (veRL's default): gen time-shares the train GPUs (--gen-gpus = --train-gpus)",
    )
    g.add_argument(
        "--weight-sync",
        type=lambda text: text.strip().lower().replace("-", "_"),  # two-level is read as two_level
        choices=("two_level", "flat", "gather_broadcast", "root", "scatter", "relay", "reshard"),
        default=None,
        help="weight sync scheme (default two_level; reshard, the only one, when colocated); "
        "root (StreamRL), scatter (RollMux), relay (Laminar): docs/explanation/weight-sync-schemes.md",
    )
    g.add_argument(
        "--weight-bucket-bytes",
        default=None,
        help="gather_broadcast and root bucket (default '512MiB') or relay chunk (default '32MiB')",
    )
    g.add_argument("--pod-gpus", type=int, default=None, help="gen GPUs per pod for two_level weight sync")
    g.add_argument(
        "--decode-granularity",
        choices=("aggregated", "step"),
        default="aggregated",
        help="step: one op per decode step and layer, as vLLM issues them; aggregated "
        "(default): --decode-steps-per-op x --decode-layers-per-op per op, a speed option",
    )
    g.add_argument(
        "--decode-steps-per-op",
        type=int,
        default=None,
        help="decode steps per emitted op (default 64; 1 with --decode-granularity step)",
    )
    g.add_argument(
        "--decode-layers-per-op", type=int, default=None, help="layers per emitted decode op (default all)"
    )
    g.add_argument(
        "--train-gpu",
        default=None,
        metavar="TYPE",
        help=f"GPU type of the train pool ({', '.join(GPU_TYPES)}; default {DEFAULT_GPU})",
    )
    g.add_argument(
        "--gen-gpu",
        default=None,
        metavar="TYPE",
        help=f"GPU type of the gen pool ({', '.join(GPU_TYPES)}; default {DEFAULT_GPU})",
    )
    g.add_argument(
        "--train-mfu", type=float, default=None, help=f"training MFU (default the type's, {H800.train_mfu})"
    )
    g.add_argument(
        "--gen-mfu", type=float, default=None, help=f"prefill/decode MFU (default the type's, {H800.gen_mfu})"
    )
    g.add_argument(
        "--peak-tflops", type=float, default=None, help="dense BF16 peak, TFLOP/s (default the GPU type's)"
    )
    g.add_argument(
        "--hbm-tbps", type=float, default=None, help="HBM bandwidth, TB/s (default the GPU type's)"
    )
    g.add_argument("--hbm-gb", type=float, default=None, help="GPU memory, GB (default the GPU type's)")
    g.add_argument(
        "-o", "--output", required=True, metavar="OUT", help="output file (.arrow/.feather/.ipc/.parquet)"
    )
    g.set_defaults(func=_generate)

    imp = sub.add_parser(
        "import",
        help="import a Chakra ET, SimAI/AICB or htsim workload as a trace",
        description="Import another simulator's workload as an rfabric trace (traces/README.md, "
        "'Importing other formats', lists the fields used).",
    )
    imp.add_argument("format", choices=sorted(FORMATS), help="input format")
    imp.add_argument(
        "path",
        help="chakra: a directory of <prefix>.<rank>.et files, a quoted glob or one .et; "
        "simai: the workload .txt; htsim: the .cm file",
    )
    imp.add_argument(
        "-o", "--output", required=True, metavar="OUT", help="output file (.arrow/.feather/.ipc/.parquet)"
    )
    imp.add_argument(
        "--gpus",
        type=int,
        default=None,
        help="fabric size for the rank check (default: the input's rank count)",
    )
    imp.add_argument(
        "--time-unit",
        choices=("ns", "us"),
        default="ns",
        help="simai only: unit of the compute times (default ns, SimAI's Tick)",
    )
    imp.add_argument(
        "--dim0",
        type=int,
        default=None,
        help="simai only: GPUs in the first network dimension, for HYBRID_DATA_MODEL, HYBRID_MODEL_DATA "
        "and HYBRID_CUSTOMIZED headers without model_parallel_NPU_group:",
    )
    imp.add_argument(
        "--comm-groups",
        default=None,
        metavar="JSON",
        help="chakra only: ASTRA-sim comm group file {pg_name: [ranks]} (default: groups from the rank files)",
    )
    imp.set_defaults(func=_import)

    for name in ("info", "show"):
        i = sub.add_parser(name, help="print a summary of a trace file")
        i.add_argument("path", help="trace file (.arrow/.feather/.ipc/.parquet, or an importable .et/.cm)")
        i.add_argument("--gpus", type=int, default=None, help="check ranks against this fabric size")
        i.set_defaults(func=_info)
    return trace


def _generate(args: argparse.Namespace) -> int:
    train = {d: getattr(args, f"train_{d}") for d in ("tp", "pp", "dp", "cp", "ep")}
    gen = {d: getattr(args, f"gen_{d}") for d in ("tp", "dp", "ep")}
    gen["afd"] = args.gen_afd
    given = {
        "peak_flops": None if args.peak_tflops is None else args.peak_tflops * 1e12,
        "hbm_bytes_per_s": None if args.hbm_tbps is None else args.hbm_tbps * 1e12,
        "train_mfu": args.train_mfu,
        "gen_mfu": args.gen_mfu,
        "hbm_capacity_bytes": None if args.hbm_gb is None else args.hbm_gb * 1e9,
    }
    fields = {k: v for k, v in given.items() if v is not None}

    def hardware(base: Hardware, name: str) -> Hardware:
        """``base`` with the figures given on the command line (named ``name`` if any)."""
        if all(getattr(base, k) == v for k, v in fields.items()):
            return base
        return dataclasses.replace(base, name=name, **fields)

    hw = hardware(H800, "custom")
    pools = {}
    for side in ("train", "gen"):
        kind = getattr(args, f"{side}_gpu")
        if kind is not None:
            base = get_gpu(kind, f"--{side}-gpu")
            pools[f"{side}_hardware"] = hardware(base, f"{base.name}-custom")
    t0 = time.perf_counter()
    trace = generate_rl(
        args.model if args.layers is None else {"base": args.model, "layers": args.layers},
        train_gpus=args.train_gpus,
        gen_gpus=args.gen_gpus,
        train={k: v for k, v in train.items() if v is not None},
        gen={k: v for k, v in gen.items() if v is not None},
        prefill=None if args.prefill_dp is None else {"tp": args.prefill_tp, "dp": args.prefill_dp},
        iterations=args.iterations,
        seed=args.seed,
        mode=args.mode,
        global_batch=args.global_batch,
        prompt_len=args.prompt_len,
        response={
            "median": args.response_median,
            "sigma": args.response_sigma,
            "max": args.response_max,
            "min": args.response_min,
        },
        micro_batch_tokens=args.micro_batch_tokens,
        optimizer_steps=args.optimizer_steps,
        distributed_optimizer=args.distributed_optimizer,
        grad_bucket_bytes=args.grad_bucket_bytes,
        algorithm=args.algorithm,
        reward_model=args.reward_model,
        memory_check=args.memory_check,
        recompute=args.recompute,
        placement=args.placement,
        weight_sync=args.weight_sync,
        weight_bucket_bytes=args.weight_bucket_bytes,
        pod_gpus=args.pod_gpus,
        decode_granularity=args.decode_granularity,
        decode_steps_per_op=args.decode_steps_per_op,
        decode_layers_per_op=args.decode_layers_per_op,
        hardware=hw,
        **pools,
    )
    path = write(trace, args.output)
    print(
        f"wrote {path}: {trace.num_ops} ops, {trace.gpus} GPUs, {trace.model} "
        f"({path.stat().st_size} bytes, {time.perf_counter() - t0:.2f} s)"
    )
    return 0


def _import(args: argparse.Namespace) -> int:
    options = {"gpus": args.gpus}
    if args.format == "simai":
        options["time_unit"] = args.time_unit
        if args.dim0 is not None:
            options["dim0"] = args.dim0
    if args.format == "chakra" and args.comm_groups is not None:
        options["comm_groups"] = args.comm_groups
    t0 = time.perf_counter()
    trace = import_trace(args.format, args.path, **options)
    path = write(trace, args.output)
    print(
        f"wrote {path}: {trace.num_ops} ops on {trace.gpus} GPUs from {args.format} {args.path} "
        f"({time.perf_counter() - t0:.2f} s)"
    )
    return 0


def _info(args: argparse.Namespace) -> int:
    trace = read(args.path, gpus=args.gpus)
    meta = trace.metadata
    print(f"{args.path}: {trace.num_ops} ops, {trace.gpus} GPUs, schema version {meta['schema_version']}")
    if meta.get("model"):
        print(f"model: {meta['model']}")
    if meta.get("generator"):
        print(f"generator: {meta['generator']}")
    params = meta.get("parameters") or {}
    if params:
        brief = {
            k: params[k]
            for k in ("train", "gen", "mode", "iterations", "global_batch", "seed")
            if k in params
        }
        if brief:
            print("parameters: " + json.dumps(brief, sort_keys=True))
    rows = trace.summary().to_pylist()
    header = (
        "iter",
        "stage",
        "phase",
        "kind",
        "ops",
        "size (sum)",
        "sent (sum)",
        "compute (sum)",
        "max ranks",
    )
    table = [header] + [
        (
            str(r["iteration"]),
            r["stage"],
            r["phase"],
            r["kind"],
            str(r["ops"]),
            format_size(r["size_bytes"]),
            format_size(r["sent_bytes"]),
            format_time(r["compute_ps"]),
            str(r["max_ranks"]),
        )
        for r in rows
    ]
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    for row in table:
        print(
            "  ".join(
                cell.ljust(w) if c < 4 else cell.rjust(w)
                for c, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return 0
