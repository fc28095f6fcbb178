"""rfabric/cli/demo.py: `rfabric demo` on an RL iteration and on flow patterns."""

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
