"""rf.pareto: the non-dominated set on known points and on random ones, export, the plot."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rfabric as rf
from rfabric import pareto


def points(cost, perf, **extra):
    return pa.table({"network_cost_usd": cost, "throughput_iter_per_s": perf, **extra})


def test_front_on_known_points():
    #        A    B    C    D    E    F    G (=B)  H (NaN)
    cost = [1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 2.0, 0.5]
    perf = [1.0, 3.0, 2.0, 3.0, 5.0, 4.0, 3.0, math.nan]
    # A: cheapest with a value; B and G equal (neither dominates the other); C: B is as
    # cheap and better; D: B is cheaper and as good; E: best; F: E is cheaper and better;
    # H: no performance, never on the front and dominates nothing.
    t = pareto.front(points(cost, perf))
    assert t["pareto"].to_pylist() == [True, True, False, False, True, False, True, False]
    assert t.column_names[-1] == "pareto" and t.num_rows == 8


def test_lower_is_better_and_replacing_the_column():
    t = pa.table({"network_cost_usd": [1.0, 2.0, 3.0], "iteration_time_s": [5.0, 6.0, 1.0]})
    t = pareto.front(t, perf="iteration_time_s", higher_is_better=False)
    assert t["pareto"].to_pylist() == [True, False, True]
    t = pareto.front(t, perf="iteration_time_s", higher_is_better=True)  # recomputed, not appended
    assert t["pareto"].to_pylist() == [True, True, False]
    assert t.column_names.count("pareto") == 1


def test_front_by_group():
    t = points([1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 5.0, 1.0], workload=["a", "a", "b", "b"])
    assert pareto.front(t)["pareto"].to_pylist() == [False, False, True, False]
    assert pareto.front(t, by="workload")["pareto"].to_pylist() == [True, True, True, False]


def test_front_errors():
    with pytest.raises(rf.SpecError, match="no cost column 'price'"):
        pareto.front(points([1.0], [1.0]), cost="price")
    with pytest.raises(rf.SpecError, match="performance column 'name' is string"):
        pareto.front(pa.table({"network_cost_usd": [1.0], "name": ["x"]}), perf="name")


def dominates(a, b) -> bool:
    return a[0] <= b[0] and a[1] >= b[1] and (a[0] < b[0] or a[1] > b[1])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 20).map(float), st.integers(0, 20).map(float)),
        min_size=1,
        max_size=40,
    )
)
def test_front_properties(pts):
    t = pareto.front(points([c for c, _ in pts], [p for _, p in pts]))
    mask = t["pareto"].to_pylist()
    on = [p for p, m in zip(pts, mask, strict=True) if m]
    assert on, "a non-empty finite set has a front"
    for i, p in enumerate(pts):
        if mask[i]:
            assert not any(dominates(q, p) for q in pts)  # no front point is dominated
        else:
            assert any(dominates(q, p) for q in on)  # every other point is dominated by a front point


def test_export_parquet_and_csv(tmp_path):
    t = pareto.front(points([1.0, 2.0], [2.0, 1.0]))
    t = t.append_column("stage_s", pa.array([[("train", 1.5)], []], pa.map_(pa.string(), pa.float64())))
    assert pq.read_table(pareto.export(t, tmp_path / "f.parquet")).equals(t)
    back = pacsv.read_csv(pareto.export(t, tmp_path / "f.csv"))
    assert back["pareto"].to_pylist() == [True, False]
    assert back["stage_s"].to_pylist() == ['{"train": 1.5}', "{}"]
    with pytest.raises(rf.SpecError, match=r"unknown suffix '\.xlsx'"):
        pareto.export(t, tmp_path / "f.xlsx")


def sweep_like():
    rows = []
    for fab, base in (("FT", 1.0), ("FT-OS", 0.6), ("RFabric", 0.55)):
        for link, bps, k in (("100Gbps", 100e9, 1.0), ("200Gbps", 200e9, 2.2), ("400Gbps", 400e9, 4.0)):
            rows.append(
                dict(
                    fabric=fab,
                    link_speed=link,
                    link_bps=int(bps),
                    workload="rl",
                    gpus=128,
                    network_cost_usd=base * k * 1e6,
                    throughput_iter_per_s=(0.9 if fab == "FT-OS" else 1.0) * (1 + math.log2(k)),
                )
            )
    return pa.Table.from_pylist(rows)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<?xml")])
def test_plot_draws_a_curve_per_fabric_and_a_marker_per_speed(tmp_path, suffix, magic):
    t = sweep_like()
    path = tmp_path / f"front{suffix}"
    fig = pareto.plot(t, path)
    assert path.read_bytes().startswith(magic)
    (ax,) = fig.axes
    gids = [line.get_gid() for line in ax.get_lines()]
    assert [g for g in gids if g.startswith("curve:")] == ["curve:FT", "curve:FT-OS", "curve:RFabric"]
    points_ = [g for g in gids if g.startswith("points:")]
    assert len(points_) == 9 and "points:RFabric:400Gbps" in points_
    assert gids.count("front") == 1
    markers = {
        line.get_gid().rsplit(":", 1)[1]: line.get_marker()
        for line in ax.get_lines()
        if line.get_gid().startswith("points:")
    }
    assert len(set(markers.values())) == 3  # one marker per link speed
    assert ax.get_xlabel() == "network cost (million USD)"
    assert ax.get_ylabel() == "throughput (RL iterations/s)"
    titles = sorted(leg.get_title().get_text() for leg in fig.legends)
    assert titles == ["fabric", "link speed"]
    front = next(line for line in ax.get_lines() if line.get_gid() == "front")
    on = pareto.front(t)["pareto"].to_numpy(zero_copy_only=False)
    assert len(front.get_xdata()) == int(on.sum())
    assert np.allclose(sorted(front.get_xdata()), sorted(t["network_cost_usd"].to_numpy()[on] / 1e6))


def test_plot_refuses_mixed_workloads_and_bad_suffix(tmp_path):
    t = sweep_like()
    mixed = pa.concat_tables(
        [t, t.set_column(t.column_names.index("workload"), "workload", pa.array(["other"] * t.num_rows))]
    )
    with pytest.raises(rf.SpecError, match="several workloads"):
        pareto.plot(mixed, tmp_path / "x.png")
    with pytest.raises(rf.SpecError, match=r"unknown suffix '\.jpg'"):
        pareto.plot(t, tmp_path / "x.jpg")
