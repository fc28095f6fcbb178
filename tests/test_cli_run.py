"""rfabric/cli/run.py: `rfabric run` on patterns and traces, failures, plans, controllers."""

import rfabric as rf
from rfabric.cli import main

RF128 = "topologies/rfabric_128_200g.toml"


def _write_plan(path, rows):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    ocs, a, b = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [])
    pacsv.write_csv(pa.table({"ocs": pa.array(ocs, pa.int64()), "a": a, "b": b}), path)
    return str(path)


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


def test_a_stopped_run_says_so_instead_of_a_negative_makespan(ft128):
    res = rf.simulate(ft128, rf.Flows.permutation(128, 1 << 20), until="1us")
    assert res.run["makespan_ps"] == -1
    assert "not finished (stopped at 1.000 us of simulated time)" in res.summary()
    assert "makespan -" not in res.summary()


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
