"""``rfabric collective``: an nccl-tests-style table of one collective over message sizes."""

from __future__ import annotations

import argparse


def _ranks(text: str) -> list[int]:
    """'0-15' or '0,8,16' or '0-7,16-23'."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b) if b else int(a)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad rank list {text!r} (examples: 0-15, 0,8,16)") from None
        if hi < lo:
            raise argparse.ArgumentTypeError(f"bad rank list {text!r}: range {part!r} runs backwards")
        out.extend(range(lo, hi + 1))
    return out


def cmd_collective(args) -> int:
    """nccl-tests-style table for one collective over a size range."""
    from ..collectives import collective, format_table, size_range
    from ..topologies import FatTree
    from .common import fabric_arg

    fab = (
        fabric_arg(args.topology, args.gpus, args.link, "rfabric collective --topology")
        if args.topology
        else FatTree(args.gpus, args.link)
    )
    table = collective(
        fab,
        args.op,
        sizes=size_range(args.min_bytes, args.max_bytes, args.factor),
        ranks=args.ranks,
        algorithm=args.algorithm,
        transport=args.transport,
        ecmp=args.ecmp,
        backend=args.backend,
        nccl_model=not args.no_nccl_model,
        coll_protocol=args.protocol,
    )
    ranks = args.ranks if args.ranks is not None else range(fab.gpus)
    routing = args.ecmp or f"{fab.routing} (the fabric's own)"
    print(
        f"# rfabric collective: {args.op} ({args.algorithm}) on {fab.name}, {len(list(ranks))} ranks, "
        f"transport {args.transport}, ecmp {routing}, backend {args.backend}, "
        + ("NCCL model off (line-rate Simple)" if args.no_nccl_model else f"protocol {args.protocol}")
    )
    print(format_table(table))
    return 0
