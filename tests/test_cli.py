import pytest

import rfabric as rf
from rfabric.cli import demo_trace, main


def test_demo_compares_fabrics_on_an_rl_iteration(capsys, tmp_path):
    import pyarrow.parquet as pq

    import rfabric as rf

    rows_path, png = tmp_path / "demo.parquet", tmp_path / "demo.png"
    argv = ["demo", "--gpus", "32", "--layers", "1", "--batch", "4", "--executor", "serial", "--no-progress"]
    assert main([*argv, "-o", str(rows_path), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for word in ("iteration_ms", "weight_sync_ms", "vs_FT", "cost_kusd", "throughput_per_musd", "pareto"):
        assert word in out
    assert f"wrote {rows_path}" in out and f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pq.read_table(rows_path)
    rows = table.to_pylist()
    # six fabrics x two link speeds, each run with its own controller
    assert len(rows) == 12 and {r["link_speed"] for r in rows} == {"200Gbps", "400Gbps"}
    own = {r["fabric"]: r["controller"] for r in rows}
    assert own == {
        "FT": "none",
        "FT-OS": "none",
        "RO": "none",
        "TopoOpt": "StaticController",
        "MixNet": "MixNetController",
        "RFabric": "StageAwareController",
    }
    assert all(r["complete"] for r in rows)
    # a row is what rf.simulate gives the same trace with the fabric's own controller
    fab = rf.topologies.RFabric(32, "200Gbps")
    trace = demo_trace(32, layers=1, batch=4, seed=1)
    res = rf.simulate(
        fab, trace, controller=fab.controller(), transport="roce", seed=_seed_of(rows, "RFabric")
    )
    row = next(r for r in rows if r["fabric"] == "RFabric" and r["link_speed"] == "200Gbps")
    assert row["makespan_ps"] == res.run["makespan_ps"]


def _seed_of(rows, fabric):
    return next(r["seed"] for r in rows if r["fabric"] == fabric and r["link_speed"] == "200Gbps")


def test_demo_prints_a_flows_comparison_table(capsys, tmp_path):
    path = tmp_path / "flows.csv"
    assert main(["demo", "--workload", "flows", "--gpus", "64", "--size", "256KiB", "-o", str(path)]) == 0
    out = capsys.readouterr().out
    assert "FT-OS" in out and "permutation" in out and "incast" in out and "makespan_us" in out
    assert all(name in out for name in ("RO", "TopoOpt", "MixNet", "RFabric"))
    # the rows are written too (they used to be printed only)
    import pyarrow.csv as pacsv

    rows = pacsv.read_csv(path)
    assert rows.num_rows == 12 and set(rows["pattern"].to_pylist()) == {"permutation", "incast"}
    # the catalog's six fabrics, times in integer ps: the median FCT is at most the 99th
    # percentile, which is at most the makespan (every flow starts at 0)
    assert list(dict.fromkeys(rows["fabric"].to_pylist())) == list(rf.catalog.PAPER_FABRICS)
    for r in rows.to_pylist():
        assert (
            isinstance(r["makespan_ps"], int) and 0 < r["p50_fct_ps"] <= r["p99_fct_ps"] <= r["makespan_ps"]
        )


def test_run_preset_writes_tables(tmp_path, capsys):
    import pyarrow.parquet as pq

    out = tmp_path / "res"
    assert (
        main(
            [
                "run",
                "topologies/fat_tree_128_200g.toml",
                "--pattern",
                "incast",
                "--size",
                "1MB",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    table = pq.read_table(tmp_path / "res.flows.parquet")
    assert table.num_rows == 16 and table["end_ps"].to_numpy().min() > 0
    assert "flows 16/16 done" in capsys.readouterr().out


def test_run_replays_a_trace_file(tmp_path, capsys):
    import pyarrow.parquet as pq

    out = tmp_path / "res"
    assert (
        main(["run", "topologies/fat_tree_128_200g.toml", "--trace", "traces/sample.arrow", "-o", str(out)])
        == 0
    )
    text = capsys.readouterr().out
    assert "trace traces/sample.arrow (12 ops)" in text and "stages (ms):" in text
    ops = pq.read_table(tmp_path / "res.ops.parquet")
    assert ops.num_rows == 12 and min(ops["end_ps"].to_pylist()) > 0
    assert not (tmp_path / "res.flows.parquet").exists()  # per op by default
    args = ["run", "topologies/fat_tree_128_200g.toml", "--trace", "traces/sample.arrow", "--record-flows"]
    assert main([*args, "-o", str(tmp_path / "rec")]) == 0
    flows = pq.read_table(tmp_path / "rec.flows.parquet")
    assert flows.num_rows == sum(pq.read_table(tmp_path / "rec.ops.parquet")["flows"].to_pylist()) > 0


def test_cli_errors_are_clean(capsys, tmp_path):
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert "no such topology file" in capsys.readouterr().err
    assert main(["run", "topologies/fat_tree_128_200g.toml", "--trace", str(tmp_path / "none.arrow")]) == 2
    assert "none.arrow" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--size", "lots"])
    assert main(["demo", "--model", "no-such-model"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["collective", "--ranks", "0-3,7-5"])
    assert "range '7-5' runs backwards" in capsys.readouterr().err
    # an incast of no sender used to run nothing and exit 0
    assert main(["run", "topologies/fat_tree_128_200g.toml", "--pattern", "incast", "--fan-in", "0"]) == 2
    assert "--fan-in must be at least 1" in capsys.readouterr().err


def test_a_stopped_run_says_so_instead_of_a_negative_makespan(ft128):
    res = rf.simulate(ft128, rf.Flows.permutation(128, 1 << 20), until="1us")
    assert res.run["makespan_ps"] == -1
    assert "not finished (stopped at 1.000 us of simulated time)" in res.summary()
    assert "makespan -" not in res.summary()


def test_importing_a_source_tree_without_the_engine_says_what_to_do(tmp_path):
    # a script run from a checkout's root imports ./rfabric, which has no compiled engine
    # when the package was installed elsewhere: the error says so instead of
    # "cannot import name '_engine'" (-S: no site packages, so no editable-install finder)
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    src = Path(rf.__file__).parent
    shutil.copytree(src, tmp_path / "rfabric", ignore=shutil.ignore_patterns("_engine*", "__pycache__"))
    run = subprocess.run(
        [sys.executable, "-S", "-c", "import rfabric"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "the compiled engine (rfabric._engine) is not in" in run.stderr
    assert "pip install -e ." in run.stderr


def test_every_cli_option_has_help_and_shows_its_default():
    import argparse

    from rfabric.cli.parser import _parsers, build_parser

    missing = []
    for sp in _parsers(build_parser()):
        for action in sp._actions:
            if isinstance(action, argparse._SubParsersAction) or action.dest == "help":
                continue
            if not action.help:
                missing.append(f"{sp.prog} {action.option_strings or action.dest}")
    assert not missing
    run = next(p for p in _parsers(build_parser()) if p.prog.endswith(" run"))
    assert "(default: 9216)" in " ".join(run.format_help().split())


RF128 = "topologies/rfabric_128_200g.toml"


def _write_plan(path, rows):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    ocs, a, b = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [])
    pacsv.write_csv(pa.table({"ocs": pa.array(ocs, pa.int64()), "a": a, "b": b}), path)
    return str(path)


def test_run_exposes_routing_failures_and_circuit_plans(tmp_path, capsys):
    base = [
        "run",
        "topologies/fat_tree_128_200g.toml",
        "--pattern",
        "incast",
        "--fan-in",
        "4",
        "--size",
        "64KiB",
    ]
    assert main(base) == 0
    assert "routing dmodk (the fabric's own)" in capsys.readouterr().out
    assert main([*base, "--ecmp", "flow"]) == 0
    assert "\nrouting flow\n" in capsys.readouterr().out
    # failures inline and from a file: the incast's destination NIC and a link, still all done
    failures = tmp_path / "failures.toml"
    failures.write_text('[[failure]]\nnic = 0\nat = "1us"\n\n[[failure]]\nlink = 21\n')
    assert main([*base, "--fail", "nic:9@2us", "--fail", "13", "--failures", str(failures)]) == 0
    out = capsys.readouterr().out
    assert "4 failure(s)" in out and "flows 4/4 done" in out
    # a circuit plan: half of RFabric's initial circuits, applied at 0 with a short dark time
    spec = rf.topologies.load(RF128).to_spec()
    c = spec.circuits
    half = _write_plan(tmp_path / "plan.csv", list(zip(c.ocs[::2], c.a[::2], c.b[::2], strict=True)))
    run_rf = ["run", RF128, "--pattern", "permutation", "--size", "64KiB", "--backend", "flow"]
    assert main([*run_rf, "--plan", half, "--t-ocs", "1us"]) == 0
    assert f"plan {half} ({len(c.ocs[::2])} circuits)" in capsys.readouterr().out
    # kept by the static controller over a trace; or a library controller
    trace = ["--trace", "traces/sample.arrow"]
    assert main([*run_rf, *trace, "--controller", "static", "--plan", half, "--t-ocs", "1us"]) == 0
    assert "controller static" in capsys.readouterr().out
    assert main([*run_rf, *trace, "--controller", "stage-aware", "--t-ocs", "10us"]) == 0
    # (the hyphenated spelling is read as the catalog's)
    assert "controller stage_aware" in capsys.readouterr().out


def test_run_refuses_bad_failures_plans_and_controllers_by_name(tmp_path, capsys):
    base = ["run", RF128, "--size", "64KiB", "--backend", "flow"]

    def err(*extra):
        assert main([*base, *extra]) == 2
        return capsys.readouterr().err

    assert "--fail: 'x@1us': 'x' is not a link number" in err("--fail", "x@1us")
    assert "expected LINK[@TIME] or nic:GPU[@TIME]" in err("--fail", "gpu:3")
    bad = tmp_path / "f.toml"
    bad.write_text("[[failure]]\nlnk = 3\n")
    assert "unknown key 'lnk'; did you mean 'link'?" in err("--failures", str(bad))
    bad.write_text("[[failure]]\nlink = 3\nnic = 1\n")
    assert "give exactly one of link" in err("--failures", str(bad))
    assert "--controller static: give the plan to keep with --plan FILE" in err(
        "--trace", "traces/sample.arrow", "--controller", "static"
    )
    assert "--controller uniform: a controller plans a trace's periods; give --trace" in err(
        "--controller", "uniform"
    )
    assert "no such circuit plan file" in err("--plan", str(tmp_path / "none.csv"))
    assert "a circuit plan is a .csv or .parquet file" in err("--plan", str(bad))
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("ocs,a\n1,2\n")
    assert "circuit plan has no column(s) b" in err("--plan", str(nocol))
    # a row joining links at a packet switch: the plan check names the circuit
    spec = rf.topologies.load(RF128).to_spec()
    eps = (
        int(spec.links.src[spec.nic_link(0)])
        if spec.links.src[spec.nic_link(0)] >= spec.num_gpus
        else int(spec.links.dst[spec.nic_link(0)])
    )
    plan = _write_plan(tmp_path / "eps.csv", [(eps, 0, 1)])
    assert "circuit 0:" in err("--plan", plan)
