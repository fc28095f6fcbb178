"""rf.pareto: the non-dominated set on known points and on random ones, export, the plot."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
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
    t = pa.table({"network_cost_usd": [1.0, 2.0, 3.0], "iteration_time_ps": [5, 6, 1]})
    t = pareto.front(t, perf="iteration_time_ps", higher_is_better=False)
    assert t["pareto"].to_pylist() == [True, False, True]
    t = pareto.front(t, perf="iteration_time_ps", higher_is_better=True)  # recomputed, not appended
    assert t["pareto"].to_pylist() == [True, True, False]
    assert t.column_names.count("pareto") == 1
    # without higher_is_better, the column's name says: a time is better lower
    assert pareto.front(t, perf="iteration_time_ps")["pareto"].to_pylist() == [True, False, True]


def test_old_column_names_read_as_the_new_ones_with_a_warning(tmp_path):
    t = pa.table({"network_cost_usd": [1.0, 2.0, 3.0], "iteration_time_ps": [5, 6, 1]})
    with pytest.warns(DeprecationWarning, match="'iteration_time_s' is now 'iteration_time_ps'"):
        old = pareto.front(t, perf="iteration_time_s")
    assert old.equals(pareto.front(t, perf="iteration_time_ps"))  # same marks, same metadata
    with pytest.warns(DeprecationWarning, match="'makespan_s' is now 'makespan_ps'"):
        pareto.plot(
            pa.table(
                {"fabric": ["A"], "link_speed": ["1Gbps"], "network_cost_usd": [1.0], "makespan_ps": [7]}
            ),
            tmp_path / "m.png",
            perf="makespan_s",
        )
    assert set(pareto.RENAMED.values()) <= set(rf.results.SWEEP_SCHEMA.names)
    # a table that has the old column itself is read as it is, without a warning
    kept = pa.table({"network_cost_usd": [1.0, 2.0], "iteration_time_s": [2.0, 1.0]})
    assert pareto.front(kept, perf="iteration_time_s")["pareto"].to_pylist() == [True, True]


def test_direction_is_one_mapping_from_the_column_name():
    for col in (
        "network_cost_usd",
        "cluster_cost_usd",
        "iteration_time_ps",
        "makespan_ps",
        "stage_train_ps",
        "stage_train_s",
        "sim_ps",
    ):
        assert pareto.direction(col) == "min", col
    for col in ("throughput_iter_per_s", "samples_per_s", "throughput_per_musd", "throughput"):
        assert pareto.direction(col) == "max", col
    t = pa.table({"network_cost_usd": [1.0, 2.0], "score": [1.0, 2.0]})
    with pytest.raises(rf.SpecError, match="cannot tell whether higher or lower 'score'.*higher_is_better"):
        pareto.front(t, perf="score")
    assert pareto.front(t, perf="score", higher_is_better=True)["pareto"].to_pylist() == [True, True]
    assert pareto.front(t, perf="score", higher_is_better=False)["pareto"].to_pylist() == [True, False]
    t = pa.table({"throughput_iter_per_s": [1.0, 2.0], "makespan_s": [2.0, 1.0]})
    with pytest.raises(rf.SpecError, match="cost column 'throughput_iter_per_s' is better when higher"):
        pareto.front(t, cost="throughput_iter_per_s", perf="makespan_s")


def test_front_groups_workloads_and_scales_by_default():
    # rows 0, 1 (workload a) and 2, 3 (workload b): b's numbers dwarf a's
    t = points([1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 5.0, 1.0], workload=["a", "a", "b", "b"])
    assert pareto.front(t)["pareto"].to_pylist() == [True, True, True, False]
    assert pareto.front(t, by="workload")["pareto"].to_pylist() == [True, True, True, False]
    assert pareto.front(t, by=[])["pareto"].to_pylist() == [False, False, True, False]  # one front, asked for
    # two scales: the big cluster costs more; on one front its rows would hide the small one's
    t = points([1.0, 2.0, 8.0, 9.0], [1.0, 4.0, 3.0, 3.5], gpus=[16, 16, 128, 128])
    assert pareto.front(t)["pareto"].to_pylist() == [True, True, True, True]
    assert pareto.front(t, by=[])["pareto"].to_pylist() == [True, True, False, False]
    with pytest.raises(rf.SpecError, match="no 'by' column 'scale'"):
        pareto.front(t, by="scale")


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
    t = t.append_column("stage_ps", pa.array([[("train", 1500)], []], pa.map_(pa.string(), pa.int64())))
    assert pq.read_table(pareto.export(t, tmp_path / "f.parquet")).equals(t)
    back = pacsv.read_csv(pareto.export(t, tmp_path / "f.csv"))
    assert back["pareto"].to_pylist() == [True, False]
    assert back["stage_ps"].to_pylist() == ['{"train": 1500}', "{}"]
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


def band(fig, gid="front"):
    (ax,) = fig.axes
    (line,) = [line for line in ax.get_lines() if line.get_gid() == gid]
    return list(zip(line.get_xdata(), line.get_ydata(), strict=True))


def test_plot_of_a_time_draws_the_front_through_the_best_points(tmp_path):
    t = sweep_like()
    ps = np.round(1e12 / t["throughput_iter_per_s"].to_numpy()).astype(np.int64)
    t = t.append_column("iteration_time_ps", pa.array(ps))
    fig = pareto.plot(t, tmp_path / "time.png", perf="iteration_time_ps")
    # the oracle: brute force over the rows, lower time and lower cost better
    rows = t.to_pylist()
    best = [
        r
        for r in rows
        if not any(
            o["network_cost_usd"] <= r["network_cost_usd"]
            and o["iteration_time_ps"] <= r["iteration_time_ps"]
            and (
                o["network_cost_usd"] < r["network_cost_usd"]
                or o["iteration_time_ps"] < r["iteration_time_ps"]
            )
            for o in rows
        )
    ]
    # (drawn in s: the largest unit in which the longest time is at least 1)
    want = sorted((r["network_cost_usd"] / 1e6, r["iteration_time_ps"] / 1e12) for r in best)
    # (as arrays: pytest 9.2's approx refuses a list of tuples)
    assert np.array(band(fig), dtype=float) == pytest.approx(np.array(want, dtype=float))
    # the cheapest row and the fastest row are on it
    assert want[0][0] == pytest.approx(min(r["network_cost_usd"] for r in rows) / 1e6)
    assert min(y for _, y in want) == pytest.approx(min(r["iteration_time_ps"] for r in rows) / 1e12)
    on = pareto.front(t, perf="iteration_time_ps")["pareto"].to_numpy(zero_copy_only=False)
    got = sorted(
        zip(
            t["network_cost_usd"].to_numpy()[on] / 1e6,
            t["iteration_time_ps"].to_numpy()[on] / 1e12,
            strict=True,
        )
    )
    assert np.array(got, dtype=float) == pytest.approx(np.array(want, dtype=float))  # front() agrees
    assert fig.axes[0].get_ylabel() == "iteration time (s)"


def test_plot_honours_the_front_it_is_given(tmp_path):
    t = sweep_like()
    marked = pareto.front(t, by=[])
    fig = pareto.plot(marked, tmp_path / "a.png")
    on = marked["pareto"].to_numpy(zero_copy_only=False)
    assert sorted(x for x, _ in band(fig)) == pytest.approx(
        sorted(t["network_cost_usd"].to_numpy()[on] / 1e6)
    )
    # a pareto column made by hand is drawn as it is
    hand = t.append_column("pareto", pa.array([i in (0, 4) for i in range(t.num_rows)]))
    fig = pareto.plot(hand, tmp_path / "b.png")
    assert sorted(x for x, _ in band(fig)) == pytest.approx(
        sorted(t["network_cost_usd"].to_numpy()[[0, 4]] / 1e6)
    )
    # a front marked on other axes, or the other way round, is not drawn on these
    t2 = t.append_column("iteration_time_s", pc.divide(1.0, t["throughput_iter_per_s"]))
    with pytest.raises(
        rf.SpecError, match="marks the front of 'throughput_iter_per_s'.*draws 'iteration_time_s'"
    ):
        pareto.plot(pareto.front(t2), tmp_path / "c.png", perf="iteration_time_s")
    with pytest.raises(rf.SpecError, match=r"\(higher is better\)"):
        pareto.plot(pareto.front(t2), tmp_path / "c.png", higher_is_better=False)


def test_plot_of_two_scales_draws_one_front_per_scale(tmp_path):
    small = sweep_like()
    big = small.set_column(small.column_names.index("gpus"), "gpus", pa.array([1024] * small.num_rows))
    big = big.set_column(
        big.column_names.index("network_cost_usd"),
        "network_cost_usd",
        pc.multiply(big["network_cost_usd"], 8.0),
    )
    fig = pareto.plot(pa.concat_tables([small, big]), tmp_path / "two.png")
    gids = sorted(line.get_gid() for line in fig.axes[0].get_lines() if line.get_gid().startswith("front"))
    assert gids == ["front:rl,1024", "front:rl,128"]
    own = pareto.front(small)["pareto"].to_numpy(zero_copy_only=False)
    assert sorted(x for x, _ in band(fig, "front:rl,128")) == pytest.approx(
        sorted(small["network_cost_usd"].to_numpy()[own] / 1e6)
    )
