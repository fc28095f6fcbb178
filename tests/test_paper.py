"""bench/paper: each figure script's --quick mode runs, and its table keeps the invariants
that hold whatever the paper says (independent oracles where they exist)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import rfabric as rf

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "bench" / "paper"


def _run(fig: str, out: Path, *extra: str) -> list[dict]:
    return _run_out(fig, out, *extra)[0]


def _run_out(fig: str, out: Path, *extra: str) -> tuple[list[dict], str]:
    """The figure script's --quick rows and its stdout."""
    env = dict(os.environ)
    # the scripts import the package this test imports (the checkout's or the installed one)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(rf.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]
    )
    proc = subprocess.run(
        [sys.executable, str(PAPER / f"fig{fig}.py"), "--quick", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,  # (the CI machine takes 3 min for the slowest; a loaded one 3x that)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"Figure {fig}" in proc.stdout  # the table was printed
    assert (out / f"fig{fig}.csv").exists()
    return pq.read_table(out / f"fig{fig}.parquet").to_pylist(), proc.stdout


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    """The sweep points figures 13, 14 and 16 share (``--sweep-dir``), as run_all.py does."""
    return tmp_path_factory.mktemp("sweeps")


@pytest.fixture(scope="module")
def fig13_rows(tmp_path_factory, sweep_dir) -> list[dict]:
    return _run("13", tmp_path_factory.mktemp("fig13"), "--sweep-dir", str(sweep_dir))


def test_fig13_throughput(fig13_rows):
    rows = fig13_rows
    assert {r["model"] for r in rows} == {"qwen2.5-72b", "qwen2-57b-a14b"}
    for model in {r["model"] for r in rows}:
        by = {r["fabric"]: r for r in rows if r["model"] == model}
        assert set(by) == set(rf.catalog.PAPER_FABRICS)
        assert all(r["complete"] for r in by.values())
        assert by["FT"]["throughput_vs_FT"] == 1.0
        # throughput is FT's iteration time over the row's
        for r in by.values():
            assert r["throughput_vs_FT"] == pytest.approx(by["FT"]["iteration_s"] / r["iteration_s"])
        # 3:1 at the ToR uplinks cannot beat the same fat-tree without it
        assert by["FT-OS"]["iteration_s"] >= by["FT"]["iteration_s"] * (1 - 1e-6)
        # RailOptimized and FatTree are both non-blocking: the same iteration within 1%
        assert by["RO"]["iteration_s"] == pytest.approx(by["FT"]["iteration_s"], rel=0.01)
        assert by["RFabric"]["controller"] == "StageAwareController"
        assert by["FT"]["controller"] == "none"


def test_fig14_stages(tmp_path, sweep_dir, fig13_rows):
    rows, stdout = _run_out("14", tmp_path, "--sweep-dir", str(sweep_dir))
    # figure 14's quick sweep is figure 13's quick MoE sweep: read back, not run again, and
    # the same stage times
    assert "(6 of 6 points read back)" in stdout
    moe = {r["fabric"]: r for r in fig13_rows if r["model"] == "qwen2-57b-a14b"}
    assert {r["fabric"]: (r["train_s"], r["gen_s"], r["weight_sync_s"]) for r in rows} == {
        f: (r["train_s"], r["gen_s"], r["weight_sync_s"]) for f, r in moe.items()
    }
    by = {r["fabric"]: r for r in rows}
    for s in ("train", "gen", "weight_sync"):
        assert by["FT"][f"{s}_vs_FT"] == 1.0
        for r in rows:
            assert r[f"{s}_s"] > 0
            assert r[f"{s}_vs_FT"] == pytest.approx(r[f"{s}_s"] / by["FT"][f"{s}_s"])
    assert by["FT-OS"]["train_vs_FT"] >= 1 - 1e-6


def test_fig15_costs_are_rf_cost(tmp_path):
    rows = _run("15", tmp_path)
    T = rf.topologies
    for r in rows:
        gpus, link = r["gpus"], r["link"]
        fab = {
            "FT": T.FatTree(gpus, link),
            "FT-OS": T.FatTree(gpus, link, oversubscription=3),
            "RO": T.RailOptimized(gpus, link),
            "TopoOpt": T.TopoOpt(gpus, link),
            "MixNet": T.MixNet(gpus, link),
            "RFabric": T.RFabric(gpus, link),
        }[r["fabric"]]
        assert r["network_cost_usd"] == rf.cost.network_cost(fab)
    # the cost tutorial's hand-counted bill at 128 GPUs, 200 Gb/s (tests/test_cost.py counts it by hand)
    got = {r["fabric"]: r["network_cost_usd"] for r in rows if r["gpus"] == 128 and r["link"] == "200Gbps"}
    assert got["RFabric"] == 637_440 and got["FT"] == 1_126_400
    for name in got:  # every part costs more at 400 Gb/s than at 200 (Table 4)
        hi = next(r for r in rows if r["fabric"] == name and r["link"] == "400Gbps" and r["gpus"] == 128)
        assert hi["network_cost_usd"] > got[name]


def _dominated(c, p, i) -> bool:
    return any(
        (c[j] <= c[i] and p[j] >= p[i] and (c[j] < c[i] or p[j] > p[i])) for j in range(len(c)) if j != i
    )


def test_fig16_pareto(tmp_path, sweep_dir, fig13_rows):
    rows, stdout = _run_out("16", tmp_path, "--sweep-dir", str(sweep_dir))
    assert {r["link"] for r in rows} == {"200Gbps", "400Gbps"}
    # its 200 Gb/s points are figure 13's quick MoE points, read back
    assert "(6 of 12 points read back)" in stdout
    moe = {r["fabric"]: r["iteration_s"] for r in fig13_rows if r["model"] == "qwen2-57b-a14b"}
    assert {r["fabric"]: r["iteration_s"] for r in rows if r["link"] == "200Gbps"} == moe
    c = [r["network_cost_usd"] for r in rows]
    p = [r["throughput_iter_per_s"] for r in rows]
    for i, r in enumerate(rows):  # brute-force dominance, independent of rf.pareto
        assert r["pareto"] == (not _dominated(c, p, i))
        assert r["throughput_per_musd"] == pytest.approx(
            r["throughput_iter_per_s"] / (r["network_cost_usd"] / 1e6)
        )
        if r["fabric"] == "FT":
            assert r["eff_vs_FT"] == 1.0
    # the cheapest point is always on the front
    assert rows[int(np.argmin(c))]["pareto"]
    # the same rows priced with the GPUs: the cost of each is the network's plus the GPUs'
    cc = [r["cluster_cost_usd"] for r in rows]
    for i, r in enumerate(rows):
        assert r["cluster_cost_usd"] == pytest.approx(r["network_cost_usd"] + r["gpus"] * 30_000)
        assert r["pareto_cluster"] == (not _dominated(cc, p, i))


def test_fig21_failures(tmp_path):
    rows = _run("21", tmp_path)  # --quick: the flow backend only
    healthy = [r for r in rows if r["failure"] == "none"]
    assert len(healthy) == 1 and healthy[0]["iteration_x"] == 1.0
    cases = {(r["failure"], r["count"], r["during"]) for r in rows if r["failure"] != "none"}
    assert {(k, c) for k, c, _ in cases} == {("NIC-EPS", 1), ("NIC-EPS", 2), ("ToR-OCS", 1), ("ToR-OCS", 2)}
    for r in rows:
        if r["complete"]:
            # a failure costs time, or nothing (5% slack: the controller re-plans around it)
            assert r["iteration_x"] >= 0.95, r
        else:
            # never a silent wrong result: an unfinished run says why
            assert r["unroutable"] and r["iteration_x"] is None, r
    # a failed OCS port is masked and its traffic carried on: every such run finishes
    assert all(r["complete"] for r in rows if r["failure"] == "ToR-OCS")
    # two failed NICs of one server leave its traffic on 6 NICs instead of 7: never faster
    for stage in {r["during"] for r in rows}:
        one = [r for r in rows if (r["failure"], r["count"], r["during"]) == ("NIC-EPS", 1, stage)]
        two = [r for r in rows if (r["failure"], r["count"], r["during"]) == ("NIC-EPS", 2, stage)]
        if one and two and one[0]["complete"] and two[0]["complete"]:
            assert two[0][f"{stage}_x"] >= one[0][f"{stage}_x"] * (1 - 1e-6)


def test_fig22_t_ocs(tmp_path):
    rows = _run("22", tmp_path)
    base = rows[0]
    assert base["controller"] == "UniformController" and base["iteration_x"] == 1.0
    swept = sorted(rows[1:], key=lambda r: r["t_ocs_ps"])
    assert len(swept) == 3
    for a, b in zip(swept, swept[1:], strict=False):
        # a longer t_ocs leaves fewer windows: never faster beyond 0.5%
        assert b["iteration_s"] >= a["iteration_s"] * (1 - 0.005)
        # and never commits more plans
        assert b["plans"] <= a["plans"]
    assert all(r["calls"] > 100 for r in swept)  # a plan() call per op: fine-grained


def test_fig23_allocation(tmp_path):
    rows = _run("23", tmp_path)
    assert {r["dimensioning"] for r in rows} == {"today", "radix8"}
    for r in rows:
        # the gain check keeps the plan in force unless its prediction is faster
        assert r["traffic_aware_s"] <= r["uniform_s"] * 1.01, r
        if r["dimensioning"] == "today":
            # one PoD, at most two ToRs per rail, PXN: the uniform plan already joins them
            # with every port, so no plan differs
            assert r["plans"] == 0 and r["reduction"] == 0.0
    # NIC bound of TP4_DP16 (64 GPUs, 4 DP groups of 16 ranks, 2 per server): each ring
    # leaves every server once, carrying 2 (n-1)/n S; per server 4 groups' rings share its
    # 8 NICs of 25 GB/s. The ring all_reduce reaches it within 5% (headers add 0.7%).
    ar = next(r for r in rows if r["workload"] == "TP4_DP16_1GB" and r["dimensioning"] == "today")
    n, size = 16, 10**9
    bound = 4 * 2 * (n - 1) / n * size / (8 * 200e9 / 8)
    assert bound <= ar["uniform_s"] <= 1.05 * bound
