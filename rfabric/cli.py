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
        if fan_in < 1:
            raise SpecError(f"--fan-in must be at least 1 (senders for the incast), got {fan_in}")
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


def _demo_fabrics(gpus: int, link: str):
    from .topology import FatTree, MixNet, RailOptimized, RFabric, TopoOpt

    return [
        ("FT", FatTree(gpus, link)),
        ("FT-OS 3:1", FatTree(gpus, link, oversubscription=3)),
        ("RO", RailOptimized(gpus, link)),
        ("TopoOpt", TopoOpt(gpus, link)),
        ("MixNet", MixNet(gpus, link)),
        ("RFabric", RFabric(gpus, link)),
    ]


def demo_trace(
    gpus: int, model: str = "qwen2.5-14b", *, layers: int = 2, batch: int = 16, seed: int = 1, **options
):
    """The RL iteration ``rfabric demo`` replays: ``model``'s shape cut to ``layers`` layers,
    half the GPUs train (TP up to 8, PP 2 when there is room, the rest DP) and half generate
    (TP up to 8), ``batch`` responses, one iteration. ``options`` go to ``generate_rl``."""
    import dataclasses

    from . import traces

    shape = traces.models.get_model(model)
    cut = dataclasses.replace(shape, name=f"{shape.name}-{layers}L", layers=layers)
    half = gpus // 2
    tp = min(8, half)
    pp = 2 if half >= 2 * tp and layers >= 2 else 1
    return traces.generate_rl(
        model=cut,
        train_gpus=half,
        gen_gpus=half,
        train=dict(tp=tp, pp=pp, dp=max(1, half // (pp * tp))),
        gen=dict(tp=tp),
        iterations=1,
        seed=seed,
        global_batch=batch,
        **options,
    )


def cmd_demo(args) -> int:
    """Compare the six fabrics of the paper on one generated RL iteration (or on flows)."""
    if args.workload == "flows":
        return _demo_flows(args)
    from . import traces

    shape = traces.models.get_model(args.model)
    trace = demo_trace(args.gpus, args.model, layers=args.layers, batch=args.batch, seed=args.seed)
    name = f"{shape.name}-{args.layers}L"
    half = args.gpus // 2
    print(
        f"rfabric demo: one RL iteration of {name} (the {shape.name} shape with {args.layers} layers), "
        f"{half} train + {half} gen GPUs, batch {args.batch}, {trace.num_ops:,} collective ops; "
        f"{args.link} links, transport {args.transport}, seed {args.seed}\n"
    )
    import shutil

    from . import pareto
    from .sweep import sweep

    links = list(dict.fromkeys([args.link, *(args.compare_link or ["400Gbps"])]))
    # the demo runs afresh (a sweep resumes from the rows of an earlier run with the same config)
    Path(args.output).unlink(missing_ok=True)
    shutil.rmtree(f"{args.output}.parts", ignore_errors=True)
    table = sweep(
        fabrics=["FT", "FT-OS", "RO", "TopoOpt", "MixNet", "RFabric"],
        links=links,
        gpus=[args.gpus],
        workload={name: trace},
        controller="own",
        executor=args.executor,
        out=args.output,
        seed=args.seed,
        progress=not args.no_progress,
        settings={"transport": args.transport},
        rewrites=args.rewrites,
    )
    table = pareto.front(table, cost="network_cost_usd", perf="throughput_iter_per_s")
    rows = table.to_pylist()
    base = {r["link_speed"]: r["iteration_time_s"] for r in rows if r["fabric"] == "FT"}
    for r in rows:
        stage = dict(r["stage_s"] or [])
        r["iteration_ms"] = r["iteration_time_s"] * 1e3
        r["vs_FT"] = r["iteration_time_s"] / base[r["link_speed"]]
        r["cost_kusd"] = r["network_cost_usd"] / 1e3
        r["train_ms"] = 1e3 * (stage.get("train") or float("nan"))
        r["gen_ms"] = 1e3 * (stage.get("gen") or float("nan"))
        r["weight_sync_ms"] = 1e3 * (stage.get("weight_sync") or float("nan"))
        r["pareto"] = "yes" if r["pareto"] else ""
    print(
        _table(
            rows,
            [
                ("fabric", "{}"),
                ("link_speed", "{}"),
                ("controller", "{}"),
                ("cost_kusd", "{:,.1f}"),
                ("iteration_ms", "{:.2f}"),
                ("vs_FT", "{:.3f}"),
                ("train_ms", "{:.2f}"),
                ("gen_ms", "{:.2f}"),
                ("weight_sync_ms", "{:.2f}"),
                ("throughput_iter_per_s", "{:.3f}"),
                ("throughput_per_musd", "{:.3f}"),
                ("pareto", "{}"),
            ],
        )
    )
    print(
        "\ncost_kusd: network bill of materials (rf.cost, the paper's Table 4 prices); throughput: "
        "iterations/s; throughput_per_musd: per million USD of network; pareto: no fabric is both "
        "cheaper and faster. Stage times span first start to last end; train and gen overlap."
    )
    _print_rewrites(rows, args.rewrites)
    print(f"wrote {args.output} (the sweep's rows)")
    if args.plot:
        pareto.plot(table, args.plot, title=f"{name} RL iteration, {args.gpus} GPUs")
        print(f"wrote {args.plot} (network cost against throughput, one curve per fabric)")
    return 0


def _print_rewrites(rows: list[dict], rule: str) -> None:
    """Say which workload rewrites ran on which fabrics (docs/fairness.md)."""
    by = {}
    for r in rows:
        by.setdefault(r["rewrites"], []).append(f"{r['fabric']} {r['link_speed']}")
    how = {
        "offered": "every fabric runs the rewrites any fabric's controller asks for",
        "none": "no fabric runs a rewrite: the trace's own algorithms everywhere",
        "own": "each fabric runs its own controller's rewrites only (not a fair comparison)",
    }[rule]
    print(f"\nworkload rewrites (--rewrites {rule}: {how}; docs/fairness.md):")
    for text, fabs in by.items():
        who = "all fabrics" if len(fabs) == len(rows) else ", ".join(fabs)
        print(f"  {who}: {text}")


def _demo_flows(args) -> int:
    from . import simulate

    rows = []
    for pattern in ("permutation", "incast"):
        flows = _flows(pattern, args.gpus, args.size, args.seed, fan_in=16)
        for label, fab in _demo_fabrics(args.gpus, args.link):
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
    import pyarrow as pa

    from .pareto import export

    print(f"wrote {export(pa.Table.from_pylist(rows), args.output)} (one row per fabric and pattern)")
    return 0


CONTROLLERS = ("none", "static", "uniform", "stage-aware", "mixnet")


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
    from .errors import read_toml
    from .validators import known_keys

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

    from .spec import CircuitTable

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
    from . import controllers

    if name == "none":
        return None
    if not trace:
        raise SpecError(f"--controller {name}: a controller plans a trace's periods; give --trace")
    if name == "static":
        if plan is None:
            raise SpecError("--controller static: give the plan to keep with --plan FILE")
        return controllers.StaticController(plan)
    return {
        "uniform": controllers.UniformController,
        "stage-aware": controllers.StageAwareController,
        "mixnet": controllers.MixNetController,
    }[name]()


def cmd_run(args) -> int:
    """Simulate a traffic pattern, or replay a trace, on a topology preset."""
    from . import Simulation, traces
    from .topology import load

    fab = load(args.topology)
    if args.trace:
        workload = traces.read(args.trace, gpus=fab.gpus)
        what = f"trace {args.trace} ({workload.num_ops:,} ops)"
    else:
        workload = _flows(args.pattern, fab.gpus, args.size, args.seed, args.fan_in)
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
        if hi < lo:
            raise argparse.ArgumentTypeError(f"bad rank list {text!r}: range {part!r} runs backwards")
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


def _fabric_arg(text: str, gpus: int, link: str):
    """A topology preset (TOML path, or a name in the repository's topologies/ folder), or a
    fabric name from rf.sweep's list ("FT", "FT-OS", "RFabric", ...) built at --gpus/--link."""
    from .sweep import resolve_fabric
    from .topology import load
    from .units import parse_rate

    path = Path(text)
    if path.suffix == ".toml" or path.exists():
        return load(path)
    preset = Path(__file__).resolve().parent.parent / "topologies" / f"{text}.toml"
    if preset.exists():
        return load(preset)
    return resolve_fabric(text, where="rfabric cost").build(gpus, parse_rate(link, name="--link"))


def cmd_cost(args) -> int:
    """Print a fabric's network bill of materials (DESIGN §8; prices: the paper's table 4)."""
    from . import cost

    fab = _fabric_arg(args.fabric, args.gpus, args.link)
    bom = cost.bill_of_materials(fab, args.prices, gpu_price_usd=args.gpu_price)
    prices = cost.load_prices(args.prices)
    print(cost.format_bill(bom, f"{fab.name} ({fab.gpus} GPUs): network bill of materials"))
    words = {
        "eps": ("packet switch", "packet switches"),
        "ocs": ("OCS", "OCSes"),
        "patch_panel": ("patch panel", "patch panels"),
    }
    parts = []
    for k, d in cost.devices(fab).items():
        ports = (
            f"{d['min_ports']}" if d["min_ports"] == d["max_ports"] else f"{d['min_ports']}-{d['max_ports']}"
        )
        parts.append(f"{d['count']} {words[k][d['count'] > 1]} ({ports} wired ports each)")
    if parts:
        print("devices: " + ", ".join(parts))
    print(f"prices: {args.prices or 'rfabric/data/prices.toml'} ({prices.source})")
    if args.output:
        from .pareto import export

        print(f"wrote {export(bom, args.output)}")
    return 0


def cmd_sweep(args) -> int:
    """Run a sweep described by a TOML file; print one line per point (Pareto-optimal ones
    marked, per workload and scale), say where the rows went, and optionally plot the fronts."""
    from . import pareto
    from .sweep import load_config, sweep

    kwargs = load_config(args.config)
    overrides = {
        "executor": args.executor,
        "out": args.output,
        "workers": args.workers,
        "rewrites": args.rewrites,
    }
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    if args.no_progress:
        kwargs["progress"] = False
    table = pareto.front(sweep(**kwargs), by=["workload", "gpus"])
    meta = table.schema.metadata or {}
    ran = {k: meta.get(f"rfabric.sweep.{k}".encode(), b"?").decode() for k in ("resumed", "ran")}
    rows = table.to_pylist()
    for r in rows:
        r["iteration_ms"] = r["iteration_time_s"] * 1e3
        r["cost_kusd"] = r["network_cost_usd"] / 1e3
        r["iter_per_s_per_musd"] = r["throughput_per_musd"]
        r["pareto"] = "yes" if r["pareto"] else ""
    print(
        _table(
            rows,
            [
                ("fabric", "{}"),
                ("link_speed", "{}"),
                ("gpus", "{}"),
                ("workload", "{}"),
                ("cost_kusd", "{:,.1f}"),
                ("iteration_ms", "{:.3f}"),
                ("throughput_iter_per_s", "{:.3f}"),
                ("iter_per_s_per_musd", "{:.3f}"),
                ("pareto", "{}"),
                ("wall_s", "{:.2f}"),
            ],
        )
    )
    rule = kwargs.get("rewrites", "offered")
    if isinstance(rule, str):
        _print_rewrites(rows, rule)
    out = kwargs.get("out", "sweep.parquet")
    counted = f"{len(rows)} points ({ran['resumed']} resumed, {ran['ran']} run)"
    print(f"{counted}; rows in {out}" if out else counted)
    if args.plot:
        path = Path(args.plot)
        groups = list(dict.fromkeys((r["workload"], r["gpus"]) for r in rows))
        for workload, gpus in groups:
            import pyarrow.compute as pc

            part = table.filter(pc.and_(pc.equal(table["workload"], workload), pc.equal(table["gpus"], gpus)))
            target = path
            if len(groups) > 1:
                tag = "".join(c if c.isalnum() or c in "-._" else "_" for c in f"{workload}-{gpus}gpus")
                target = path.with_name(f"{path.stem}-{tag}{path.suffix}")
            pareto.plot(part, target)
            print(f"wrote {target}")
    return 0


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless its help says it already or it has none."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    from .simulation import BACKENDS, ECMP_MODES
    from .units import parse_size

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
        choices=["local", "serial", "ray"],
        default="local",
        help="how the sweep runs its points: local process pool, serial, or Ray",
    )
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    d.add_argument(
        "--rewrites",
        choices=["offered", "none", "own"],
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
    r.add_argument("topology", help="path to a topology TOML preset (topologies/*.toml)")
    r.add_argument("--trace", help="replay this trace (Arrow IPC or Parquet) instead of a pattern")
    r.add_argument("--until", help="stop at this simulated time (e.g. 20ms)")
    r.add_argument(
        "--pattern", choices=PATTERNS, default="permutation", help="traffic pattern (without --trace)"
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
        choices=CONTROLLERS,
        default="none",
        help="circuit controller for a --trace: static (keeps --plan), uniform (OCS ports split "
        "evenly), stage-aware (RFabric's), mixnet (MixNet's regional OCS); none keeps the "
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
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("collective", help="nccl-tests-style table of one collective over message sizes")
    c.add_argument(
        "--op",
        default="all_reduce",
        choices=["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"],
        help="the collective",
    )
    c.add_argument(
        "--algorithm", default="auto", help="ring, hier_ring, tree, direct, ... or auto (NCCL-like choice)"
    )
    c.add_argument("--topology", help="topology preset (TOML); default a FatTree of --gpus")
    c.add_argument(
        "--gpus", type=int, default=16, help="GPUs of the fat-tree (when no topology preset is given)"
    )
    c.add_argument("--link", default="200Gbps", help="link speed of that fat-tree")
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
        choices=("dmodk", "flow", "packet", "adaptive", "multipath"),
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

    k = sub.add_parser("cost", help="print a fabric's network bill of materials and cost")
    k.add_argument(
        "fabric",
        help="topology preset (TOML path or a topologies/ name) or a fabric name (FT, FT-OS, RO, RFabric, ...)",
    )
    k.add_argument("--gpus", type=int, default=128, help="GPUs when FABRIC is a name (default 128)")
    k.add_argument("--link", default="200Gbps", help="link speed when FABRIC is a name (default 200Gbps)")
    k.add_argument("--prices", help="TOML file of prices laid over the paper's table 4")
    k.add_argument("--gpu-price", type=float, help="USD per GPU (not in the paper): adds the cluster total")
    k.add_argument("-o", "--output", help="write the bill as .csv or .parquet")
    k.set_defaults(func=cmd_cost)

    s = sub.add_parser(
        "sweep", help="run a sweep of fabrics x link speeds x scales x workloads (TOML config)"
    )
    s.add_argument("config", help="sweep config (TOML); see README 'Sweeps'")
    s.add_argument("--executor", choices=["local", "serial", "ray"], help="override the config's executor")
    s.add_argument("--workers", type=int, help="processes (local) or CPUs (local Ray instance)")
    s.add_argument("-o", "--output", help="override the config's out (Parquet)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--rewrites",
        choices=["offered", "none", "own"],
        help="override the config's rewrites rule (default offered; docs/fairness.md)",
    )
    s.add_argument(
        "--plot", help="draw the cost/throughput front to this .png or .svg (one file per workload and scale)"
    )
    s.set_defaults(func=cmd_sweep)

    try:
        from .traces.cli import add_subcommand
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
    except (SpecError, TraceError) as exc:
        print(f"rfabric: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
