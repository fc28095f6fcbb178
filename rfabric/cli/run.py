"""``rfabric run``: a traffic pattern or a trace on a topology preset, with failures, a circuit
plan or a controller.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SpecError


def _failure(text: str, where: str) -> tuple[str, int, object]:
    """'LINK[@TIME]' or 'nic:GPU[@TIME]' -> (kind, index, time); time defaults to 0."""
    target, _, at = text.partition("@")
    kind, _, index = target.rpartition(":")
    kind = kind or "link"
    if kind not in ("link", "nic"):
        raise SpecError(f"{where}: {text!r}: expected LINK[@TIME] or nic:GPU[@TIME] (e.g. 12@1ms, nic:3)")
    try:
        value = int(index)
    except ValueError:
        raise SpecError(f"{where}: {text!r}: {index!r} is not a {kind} number") from None
    return kind, value, at or 0


def _failures(inline, path) -> list[tuple[str, int, object]]:
    """The failure schedule of ``--fail`` (repeated) and ``--failures FILE`` (TOML)."""
    from ..errors import read_toml
    from ..validators import known_keys

    out = [_failure(text, "--fail") for text in inline or ()]
    if path:
        doc = read_toml(path, "failures")
        known_keys(doc, ["failure"], str(path))
        rows = doc.get("failure", [])
        if not isinstance(rows, list):
            raise SpecError(f"{path}: 'failure' must be an array of tables ([[failure]])")
        for i, row in enumerate(rows):
            where = f"{path}: failure {i}"
            if not isinstance(row, dict):
                raise SpecError(f"{where}: expected a table with link or nic, and at")
            known_keys(row, ["link", "nic", "at"], where)
            if ("link" in row) == ("nic" in row):
                raise SpecError(f"{where}: give exactly one of link (a link row) or nic (a GPU)")
            kind = "link" if "link" in row else "nic"
            out.append((kind, row[kind], row.get("at", 0)))
    return out


def _plan(path):
    """A circuit plan file: CSV or Parquet with integer columns ocs, a, b (the optical device's
    node id and the two link rows each circuit joins)."""
    import pyarrow as pa

    from ..spec import CircuitTable

    path = Path(path)
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        elif path.suffix == ".csv":
            import pyarrow.csv as pcsv

            table = pcsv.read_csv(path)
        else:
            raise SpecError(f"{path}: a circuit plan is a .csv or .parquet file with columns ocs, a, b")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such circuit plan file") from None
    except (pa.ArrowException, OSError) as exc:
        raise SpecError(f"{path}: not a readable circuit plan ({exc})") from None
    missing = [c for c in ("ocs", "a", "b") if c not in table.column_names]
    if missing:
        raise SpecError(f"{path}: circuit plan has no column(s) {', '.join(missing)} (needs ocs, a, b)")
    try:
        return CircuitTable.build(*(table[c].to_numpy(zero_copy_only=False) for c in ("ocs", "a", "b")))
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None


def _controller(name: str, plan, trace: bool):
    """The controller ``--controller NAME`` (a ``rfabric.catalog.CONTROLLERS`` name) stands for."""
    from ..sweeps.points import controller_class

    cls = controller_class(name, "--controller")
    if cls is None:
        return None
    if not trace:
        raise SpecError(f"--controller {name}: a controller plans a trace's periods; give --trace")
    if name == "static":
        if plan is None:
            raise SpecError("--controller static: give the plan to keep with --plan FILE")
        return cls(plan)
    return cls()


def cmd_run(args) -> int:
    """Simulate a traffic pattern, or replay a trace, on a topology preset."""
    from .. import Simulation, traces
    from ..sweeps import pattern_flows
    from .common import fabric_arg

    fab = fabric_arg(args.topology, args.gpus, args.link, "rfabric run")
    if args.trace:
        workload = traces.read(args.trace, gpus=fab.gpus)
        what = f"trace {args.trace} ({workload.num_ops:,} ops)"
    else:
        workload = pattern_flows(
            args.pattern, fab.gpus, args.size, seed=args.seed, fan_in=args.fan_in, fan_in_name="--fan-in"
        )
        what = f"{args.pattern}, {len(workload):,} flows of {args.size:,} B"
    plan = _plan(args.plan) if args.plan else None
    controller = _controller(args.controller, plan, bool(args.trace))
    failures = _failures(args.fail, args.failures)
    settings = {"ecmp": args.ecmp} if args.ecmp else {}
    if args.t_ocs is not None:
        settings["t_ocs"] = args.t_ocs
    sim = Simulation(
        fab,
        workload,
        controller=controller,
        transport=args.transport,
        seed=args.seed,
        mtu_bytes=args.mtu,
        backend=args.backend,
        record_flows=True if args.record_flows else None,
        **settings,
    )
    for kind, index, at in failures:
        (sim.fail_link if kind == "link" else sim.fail_nic)(index, at)
    if plan is not None and controller is None:
        sim.apply_circuits(plan, args.plan_at)
    sim.run(args.until, progress=args.progress)
    res = sim.results()
    print(f"{fab.name}: {what}")
    extra = [f"routing {sim.routing}" + ("" if args.ecmp else " (the fabric's own)")]
    if failures:
        extra.append(f"{len(failures)} failure(s)")
    if plan is not None:
        extra.append(f"plan {args.plan} ({len(plan)} circuits)")
    if controller is not None:
        extra.append(f"controller {args.controller}")
    print("; ".join(extra))
    print(res.summary())
    if args.trace:
        print("\nstages (ms):")
        for row in res.stages.to_pylist():
            span = (row["end_ps"] - row["start_ps"]) / 1e9 if row["end_ps"] >= 0 else float("nan")
            print(
                f"  iteration {row['iteration']} {row['stage']:<16} {row['ops']:>7,} ops  "
                f"{row['start_ps'] / 1e9:10.3f} .. {row['end_ps'] / 1e9:10.3f}  ({span:.3f})"
            )
    if args.output:
        import pyarrow.parquet as pq

        out = Path(args.output)
        # (a trace's results are per op and stage: its flows are not recorded by default)
        tables = (
            {"flows": res.flows, "links": res.links} if res.run["flows_recorded"] else {"links": res.links}
        )
        if args.trace:
            tables.update(ops=res.ops, stages=res.stages)
        for name, table in tables.items():
            pq.write_table(table, out.with_suffix(f".{name}.parquet"))
        print(f"wrote {', '.join(str(out.with_suffix(f'.{n}.parquet')) for n in tables)}")
    if args.timeline:
        info = res.write_timeline(args.timeline)
        print(f"wrote timeline {args.timeline} ({info['op_slices']:,} ops, {info['flows_drawn']:,} flows)")
        for note in info["notes"]:
            print(f"  {note}")
    return 0
