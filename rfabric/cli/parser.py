"""The argument parser of ``rfabric`` and ``main``: argparse only; each subcommand's work is
in its own module (demo, run, collective, cost, sweep, report; ``rfabric trace`` in rfabric.traces.cli).
"""

from __future__ import annotations

import argparse
import sys

from .. import catalog
from ..errors import MissingDependency, SpecError, TraceError
from .collective import _ranks, cmd_collective
from .cost import cmd_cost
from .demo import cmd_demo
from .presets import cmd_presets
from .report import add_subcommand as add_report
from .run import cmd_run
from .sweep import cmd_sweep


def _name(kind: str):
    """An argparse type: the catalog's spelling of a ``kind`` name (hyphens read as
    underscores); an unknown name is left for ``choices`` to refuse with the list."""

    def convert(text: str) -> str:
        try:
            return catalog.canonical(text, kind)
        except ValueError:
            return text

    convert.__name__ = kind
    return convert


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless its help says it already or it has none."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    from ..simulation import BACKENDS, ECMP_MODES
    from ..sweeps import EXECUTORS
    from ..sweeps.points import REWRITE_RULES
    from ..units import parse_size

    ap = argparse.ArgumentParser(prog="rfabric", description="Packet-level fabric emulator for RL clusters.")
    sub = ap.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="compare the six fabrics on one generated RL iteration")
    d.add_argument(
        "--workload",
        choices=["rl", "flows"],
        default="rl",
        help="rl: one generated RL iteration (default); flows: permutation and incast",
    )
    d.add_argument("--gpus", type=int, default=128, help="GPUs (half train, half gen for --workload rl)")
    d.add_argument("--link", default="200Gbps", help="NIC and fabric link speed")
    d.add_argument("--model", default="qwen2.5-14b", help="model shape for --workload rl")
    d.add_argument("--layers", type=int, default=2, help="layers kept from the model (default 2, for speed)")
    d.add_argument("--batch", type=int, default=16, help="global batch (responses) per iteration")
    d.add_argument(
        "--size", type=parse_size, default=parse_size("4MiB"), help="message size for --workload flows"
    )
    d.add_argument("--transport", default="roce", help="transport: roce (DCQCN, lossless) or dctcp")
    d.add_argument(
        "--seed", type=int, default=1, help="seed of the trace and the engine (same seed, same result)"
    )
    d.add_argument(
        "--compare-link",
        action="append",
        help="another link speed for --workload rl (default 400Gbps; repeat for more)",
    )
    d.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="how the sweep runs its points: local process pool, serial, or Ray",
    )
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    d.add_argument(
        "--rewrites",
        choices=REWRITE_RULES,
        default="offered",
        help="workload rewrites (docs/fairness.md): offered (default) gives every fabric the rewrites any "
        "controller asks for (RFabric's weight-sync forest), none gives none, own each its own controller's",
    )
    d.add_argument(
        "-o",
        "--output",
        default="demo.parquet",
        help="the rows, .parquet or .csv (default demo.parquet): the sweep's (--workload rl) or one per fabric and pattern (flows)",
    )
    d.add_argument(
        "--plot", default="demo_pareto.png", help="the Pareto plot (--workload rl; default demo_pareto.png)"
    )
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("run", help="simulate a traffic pattern or replay a trace on a topology preset")
    r.add_argument(
        "topology",
        help="the fabric: a fabric name (FT, FT-OS, FT-OS<ratio>, RO, TopoOpt, MixNet, RFabric, a family "
        "name) built at --gpus and --link, a shipped preset's name (rfabric presets), or a TOML path",
    )
    r.add_argument("--gpus", type=int, default=128, help="GPUs when TOPOLOGY is a fabric name")
    r.add_argument("--link", default="200Gbps", help="link speed when TOPOLOGY is a fabric name")
    r.add_argument("--trace", help="replay this trace (Arrow IPC or Parquet) instead of a pattern")
    r.add_argument("--until", help="stop at this simulated time (e.g. 20ms)")
    r.add_argument(
        "--pattern",
        type=_name("pattern"),
        choices=catalog.FLOW_PATTERNS,
        default="permutation",
        help="traffic pattern (without --trace; all-to-all is read as all_to_all)",
    )
    r.add_argument(
        "--size",
        type=parse_size,
        default=parse_size("2MB"),
        help="bytes per flow ('2MB', '4MiB', or a number)",
    )
    r.add_argument("--fan-in", type=int, default=16, help="senders for --pattern incast")
    r.add_argument("--transport", default="roce", help="transport: roce (DCQCN, lossless) or dctcp")
    r.add_argument("--mtu", type=parse_size, default=9216, help="frame size in bytes, headers included")
    r.add_argument("--seed", type=int, default=1, help="seed of the pattern and the engine")
    r.add_argument(
        "--backend", choices=BACKENDS, default="packet", help="packet (default) or flow (max-min rates)"
    )
    r.add_argument(
        "--ecmp",
        choices=ECMP_MODES,
        help="routing among equal-cost next hops (default: the fabric's own, Topology.routing; "
        "README 'Routing')",
    )
    r.add_argument(
        "--fail",
        action="append",
        metavar="LINK[@TIME]",
        help="take link row LINK down at TIME (default 0), or a GPU's NIC with nic:GPU[@TIME]; "
        "repeat for more (e.g. --fail 12@1ms --fail nic:3)",
    )
    r.add_argument(
        "--failures",
        metavar="FILE",
        help="failure schedule (TOML): [[failure]] tables with link = ROW or nic = GPU, and "
        "at = TIME (default 0)",
    )
    r.add_argument(
        "--plan",
        metavar="FILE",
        help="circuit plan (.csv or .parquet, integer columns ocs, a, b: the optical device's "
        "node id and the two link rows each circuit joins); applied at --plan-at, or kept "
        "by --controller static",
    )
    r.add_argument(
        "--plan-at",
        default="0ps",
        help="when --plan is applied (without a controller); its new circuits are dark for --t-ocs from then",
    )
    r.add_argument(
        "--controller",
        type=_name("controller"),
        choices=catalog.CONTROLLERS,
        default="none",
        help="circuit controller for a --trace: static (keeps --plan), uniform (OCS ports split "
        "evenly), stage_aware (RFabric's; stage-aware is read the same), mixnet (MixNet's regional OCS); none keeps the "
        "fabric's initial circuits",
    )
    r.add_argument("--t-ocs", help="OCS reconfiguration (dark) time, e.g. 10us (default: the engine's, 25ms)")
    r.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    r.add_argument(
        "--record-flows",
        action="store_true",
        help="with --trace: keep the per-flow table too (a trace's results are per op and stage)",
    )
    r.add_argument(
        "-o",
        "--output",
        help="write result tables as OUTPUT.<table>.parquet (links; flows for a pattern or with "
        "--record-flows; ops, stages for a trace)",
    )
    r.add_argument(
        "--timeline",
        metavar="FILE",
        help="write the run as a timeline (Chrome trace JSON for ui.perfetto.dev or "
        "chrome://tracing; docs/timelines.md)",
    )
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("collective", help="nccl-tests-style table of one collective over message sizes")
    c.add_argument(
        "--op",
        default="all_reduce",
        type=_name("collective"),
        choices=catalog.COLLECTIVES,
        help="the collective (all-to-all is read as all_to_all)",
    )
    c.add_argument(
        "--algorithm", default="auto", help="ring, hier_ring, tree, direct, ... or auto (NCCL-like choice)"
    )
    c.add_argument(
        "--topology",
        help="the fabric: a fabric name (FT, RO, RFabric, ...) built at --gpus and --link, a shipped "
        "preset's name (rfabric presets) or a TOML path; default a FatTree of --gpus",
    )
    c.add_argument(
        "--gpus", type=int, default=16, help="GPUs of the fabric (when --topology is not a preset)"
    )
    c.add_argument("--link", default="200Gbps", help="link speed of the fabric (when not a preset)")
    c.add_argument("--ranks", type=_ranks, help="participating GPUs, e.g. 0-15 (default all)")
    c.add_argument("-b", "--min-bytes", default="8MiB", help="smallest message size (as nccl-tests -b)")
    c.add_argument("-e", "--max-bytes", default="256MiB", help="largest message size (as nccl-tests -e)")
    c.add_argument(
        "-f", "--factor", type=int, default=2, help="size multiplier between rows (as nccl-tests -f)"
    )
    c.add_argument("--transport", default="roce", help="transport: roce (DCQCN, lossless) or dctcp")
    c.add_argument(
        "--ecmp",
        default=None,
        choices=ECMP_MODES,
        help="next-hop choice among equal-cost paths (default: the fabric's own routing)",
    )
    c.add_argument(
        "--backend", choices=BACKENDS, default="packet", help="packet (default) or flow (max-min rates)"
    )
    c.add_argument(
        "--protocol",
        default="auto",
        choices=("auto", "ll", "ll128", "simple"),
        help="NCCL protocol: auto (the tuner's choice per size) or forced (as NCCL_PROTO)",
    )
    c.add_argument(
        "--no-nccl-model",
        action="store_true",
        help="turn NCCL's protocol costs off: line-rate Simple (docs/nccl-model.md)",
    )
    c.set_defaults(func=cmd_collective)

    k = sub.add_parser("cost", help="print a fabric's bill of materials (network and GPUs) and cost")
    k.add_argument(
        "fabric",
        help="a fabric name (FT, FT-OS, RO, RFabric, ...), a shipped preset's name (rfabric presets) "
        "or a TOML path",
    )
    k.add_argument("--gpus", type=int, default=128, help="GPUs when FABRIC is a name (default 128)")
    k.add_argument("--link", default="200Gbps", help="link speed when FABRIC is a name (default 200Gbps)")
    k.add_argument("--prices", help="TOML file of prices laid over the paper's table 4")
    k.add_argument(
        "--gpu-price",
        type=float,
        help="USD per GPU of every type (default: per type, the [gpus] table of the prices)",
    )
    k.add_argument("-o", "--output", help="write the bill as .csv or .parquet")
    k.set_defaults(func=cmd_cost)

    p = sub.add_parser("presets", help="list the topology presets shipped with rfabric")
    p.add_argument("--paths", action="store_true", help="also print each preset's TOML file")
    p.set_defaults(func=cmd_presets)

    s = sub.add_parser(
        "sweep", help="run a sweep of fabrics x link speeds x scales x workloads (TOML config)"
    )
    s.add_argument("config", help="sweep config (TOML); see README 'Sweeps'")
    s.add_argument("--executor", choices=EXECUTORS, help="override the config's executor")
    s.add_argument("--workers", type=int, help="processes (local) or CPUs (local Ray instance)")
    s.add_argument("-o", "--output", help="override the config's out (Parquet)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--rewrites",
        choices=REWRITE_RULES,
        help="override the config's rewrites rule (default offered; docs/fairness.md)",
    )
    s.add_argument(
        "--plot", help="draw the cost/throughput front to this .png or .svg (one file per workload and scale)"
    )
    s.set_defaults(func=cmd_sweep)

    add_report(sub)
    try:
        from ..traces.cli import add_subcommand
    except ImportError:
        pass
    else:
        add_subcommand(sub)
    for parser in _parsers(ap):
        parser.formatter_class = _HelpFormatter
    return ap


def _parsers(parser: argparse.ArgumentParser):
    """``parser`` and every subcommand parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in action.choices.values():
                yield from _parsers(sp)


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (SpecError, TraceError, MissingDependency) as exc:
        print(f"rfabric: error: {exc}", file=sys.stderr)
        return 2
