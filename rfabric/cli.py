"""The ``rfabric`` command line: a thin argparse layer over the Python API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .errors import SpecError, TraceError

PATTERNS = ("permutation", "incast", "all-to-all")


def _flows(pattern: str, gpus: int, size: int, seed: int, fan_in: int):
    from .flows import Flows

    if pattern == "permutation":
        return Flows.permutation(gpus, size, seed=seed)
    if pattern == "incast":
        rng = np.random.default_rng(seed)
        src = rng.choice(np.arange(1, gpus), size=min(fan_in, gpus - 1), replace=False)
        return Flows(src, np.zeros(len(src), dtype=np.int64), size)
    if pattern == "all-to-all":
        src, dst = np.meshgrid(np.arange(gpus), np.arange(gpus), indexing="ij")
        keep = src != dst
        return Flows(src[keep], dst[keep], size)
    raise SpecError(f"unknown traffic pattern {pattern!r} (known: {', '.join(PATTERNS)})")


def _table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    widths = [
        max(len(title), *(len(fmt.format(r[key])) for r in rows))
        for (key, fmt), title in zip([(k, f) for k, f in cols], [c[0] for c in cols], strict=True)
    ]
    head = "  ".join(title.rjust(w) for (title, _), w in zip(cols, widths, strict=True))
    lines = [head, "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append(
            "  ".join(fmt.format(r[key]).rjust(w) for (key, fmt), w in zip(cols, widths, strict=True))
        )
    return "\n".join(lines)


def cmd_demo(args) -> int:
    """Compare the built-in fabrics on one workload and print a table."""
    from . import simulate
    from .topology import FatTree, MixNet, RailOptimized, RFabric, TopoOpt

    fabrics = [
        ("FT", FatTree(args.gpus, args.link)),
        ("FT-OS 3:1", FatTree(args.gpus, args.link, oversubscription=3)),
        ("RO", RailOptimized(args.gpus, args.link)),
        ("TopoOpt", TopoOpt(args.gpus, args.link)),
        ("MixNet", MixNet(args.gpus, args.link)),
        ("RFabric", RFabric(args.gpus, args.link)),
    ]
    rows = []
    for pattern in ("permutation", "incast"):
        flows = _flows(pattern, args.gpus, args.size, args.seed, fan_in=16)
        for label, fab in fabrics:
            res = simulate(fab, flows, transport=args.transport, seed=args.seed)
            fct = res.fct_ps
            kinds = fab.to_spec().nodes.kind
            done = fct[fct >= 0]
            rows.append(
                {
                    "fabric": label,
                    "pattern": pattern,
                    "flows": len(flows),
                    "makespan_us": res.run["makespan_ps"] / 1e6 if res.complete else float("nan"),
                    "p50_us": float(np.median(done)) / 1e6,
                    "p99_us": float(np.percentile(done, 99)) / 1e6,
                    "eps": int(np.sum(kinds == 2)),
                    "ocs": int(np.sum(kinds >= 3)),
                    "events": res.run["events"],
                    "wall_s": res.run["wall_s"],
                }
            )
    print(
        f"rfabric demo: {args.gpus} GPUs, {args.link} links, {args.size:,} B messages, "
        f"transport {args.transport}, seed {args.seed}\n"
    )
    print(
        _table(
            rows,
            [
                ("fabric", "{}"),
                ("pattern", "{}"),
                ("flows", "{:,}"),
                ("makespan_us", "{:.1f}"),
                ("p50_us", "{:.1f}"),
                ("p99_us", "{:.1f}"),
                ("eps", "{}"),
                ("ocs", "{}"),
                ("events", "{:,}"),
                ("wall_s", "{:.3f}"),
            ],
        )
    )
    return 0


def cmd_run(args) -> int:
    """Simulate a traffic pattern on a topology preset."""
    from . import simulate
    from .topology import load

    fab = load(args.topology)
    flows = _flows(args.pattern, fab.gpus, args.size, args.seed, args.fan_in)
    res = simulate(
        fab, flows, transport=args.transport, seed=args.seed, mtu_bytes=args.mtu, progress=args.progress
    )
    print(f"{fab.name}: {args.pattern}, {len(flows):,} flows of {args.size:,} B")
    print(res.summary())
    if args.output:
        import pyarrow.parquet as pq

        out = Path(args.output)
        pq.write_table(res.flows, out.with_suffix(".flows.parquet"))
        pq.write_table(res.links, out.with_suffix(".links.parquet"))
        print(f"wrote {out.with_suffix('.flows.parquet')} and {out.with_suffix('.links.parquet')}")
    return 0


def _ranks(text: str) -> list[int]:
    """'0-15' or '0,8,16' or '0-7,16-23'."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b) if b else int(a)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad rank list {text!r} (examples: 0-15, 0,8,16)") from None
        out.extend(range(lo, hi + 1))
    return out


def cmd_collective(args) -> int:
    """nccl-tests-style table for one collective over a size range."""
    from .collective import collective, format_table, size_range
    from .topology import FatTree, load

    fab = load(args.topology) if args.topology else FatTree(args.gpus, args.link)
    table = collective(
        args.op,
        fab,
        sizes=size_range(args.min_bytes, args.max_bytes, args.factor),
        ranks=args.ranks,
        algorithm=args.algorithm,
        transport=args.transport,
        ecmp=args.ecmp,
    )
    ranks = args.ranks if args.ranks is not None else range(fab.gpus)
    print(
        f"# rfabric collective: {args.op} ({args.algorithm}) on {fab.name}, {len(list(ranks))} ranks, "
        f"transport {args.transport}, ecmp {args.ecmp}"
    )
    print(format_table(table))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .units import parse_size

    ap = argparse.ArgumentParser(prog="rfabric", description="Packet-level fabric emulator for RL clusters.")
    sub = ap.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="compare built-in fabrics on a default workload")
    d.add_argument("--gpus", type=int, default=128)
    d.add_argument("--link", default="200Gbps")
    d.add_argument("--size", type=parse_size, default=parse_size("4MiB"), help="message size (default 4MiB)")
    d.add_argument("--transport", default="roce")
    d.add_argument("--seed", type=int, default=1)
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("run", help="simulate a traffic pattern on a topology preset (topologies/*.toml)")
    r.add_argument("topology", help="path to a topology TOML preset")
    r.add_argument("--pattern", choices=PATTERNS, default="permutation")
    r.add_argument("--size", type=parse_size, default=parse_size("2MB"))
    r.add_argument("--fan-in", type=int, default=16, help="senders for --pattern incast")
    r.add_argument("--transport", default="roce")
    r.add_argument("--mtu", type=parse_size, default=9216)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--progress", action="store_true")
    r.add_argument("-o", "--output", help="write flows/links tables as OUTPUT.flows.parquet / .links.parquet")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("collective", help="nccl-tests-style table of one collective over message sizes")
    c.add_argument(
        "--op",
        default="all_reduce",
        choices=["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"],
    )
    c.add_argument("--algorithm", default="auto")
    c.add_argument("--topology", help="topology preset (TOML); default a FatTree of --gpus")
    c.add_argument("--gpus", type=int, default=16)
    c.add_argument("--link", default="200Gbps")
    c.add_argument("--ranks", type=_ranks, help="participating GPUs, e.g. 0-15 (default all)")
    c.add_argument("-b", "--min-bytes", default="8MiB")
    c.add_argument("-e", "--max-bytes", default="256MiB")
    c.add_argument("-f", "--factor", type=int, default=2)
    c.add_argument("--transport", default="roce")
    c.add_argument("--ecmp", default="dmodk")
    c.set_defaults(func=cmd_collective)

    try:
        from .traces.cli import add_subcommand
    except ImportError:
        pass
    else:
        add_subcommand(sub)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (SpecError, TraceError) as exc:
        print(f"rfabric: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
