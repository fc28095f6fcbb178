import pytest

from rfabric.cli import main


def test_demo_compares_fabrics_on_an_rl_iteration(capsys, tmp_path):
    out_csv = tmp_path / "demo.csv"
    assert main(["demo", "--gpus", "32", "--layers", "1", "--batch", "4", "-o", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "iteration_ms" in out and "weight_sync_ms" in out and "vs_FT" in out
    assert all(name in out for name in ("FT-OS 3:1", "RO", "TopoOpt", "MixNet", "RFabric"))
    import pyarrow.csv as pacsv

    table = pacsv.read_csv(out_csv)
    assert table.num_rows == 6 and table["vs_FT"][0].as_py() == 1.0
    assert min(table["iteration_ms"].to_pylist()) > 0


def test_demo_prints_a_flows_comparison_table(capsys):
    assert main(["demo", "--workload", "flows", "--gpus", "64", "--size", "256KiB"]) == 0
    out = capsys.readouterr().out
    assert "FT-OS 3:1" in out and "permutation" in out and "incast" in out and "makespan_us" in out
    assert all(name in out for name in ("RO", "TopoOpt", "MixNet", "RFabric"))


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
