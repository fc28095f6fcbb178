"""``rfabric report OUT.parquet -o report.html``: a sweep's rows as one self-contained HTML page."""

from __future__ import annotations


def cmd_report(args) -> int:
    """Write the report page of a sweep's Parquet or CSV file (rf.report.write)."""
    from .. import report

    path = report.write(
        args.table,
        args.output,
        title=args.title,
        cost=args.cost,
        perf=args.perf,
        higher_is_better=args.higher_is_better,
    )
    print(f"wrote {path}")
    return 0


def add_subcommand(sub) -> None:
    """Add ``rfabric report`` to the subparsers ``sub``."""
    p = sub.add_parser(
        "report",
        help="a sweep's rows as one self-contained HTML page (Pareto front, stage times, sortable rows)",
    )
    p.add_argument("table", help="the sweep's rows: .parquet or .csv (rf.sweep's out, rfabric sweep -o)")
    p.add_argument("-o", "--output", default="report.html", help="the HTML page to write")
    p.add_argument("--title", help="the page's title (default: from the file's name)")
    p.add_argument(
        "--cost",
        help="cost column of the front (default: the table's pareto column's, else network_cost_usd)",
    )
    p.add_argument(
        "--perf",
        help="performance column of the front (default: the pareto column's, else throughput_iter_per_s)",
    )
    better = p.add_mutually_exclusive_group()
    better.add_argument(
        "--higher-is-better",
        dest="higher_is_better",
        action="store_const",
        const=True,
        help="higher --perf is better (default: from the column's name, rf.pareto.direction)",
    )
    better.add_argument(
        "--lower-is-better",
        dest="higher_is_better",
        action="store_const",
        const=False,
        help="lower --perf is better",
    )
    p.set_defaults(func=cmd_report)
