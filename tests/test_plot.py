"""res.plot: the plotted data is the result's (FCT CDF, link utilization CDF, stage timeline),
on both backends, for flow sets and traces; missing data raises a SpecError saying what to
enable."""

import numpy as np
import pytest

import rfabric as rf

BACKENDS = ["packet", "flow"]


@pytest.fixture(scope="module")
def trace():
    return rf.traces.read("traces/sample.arrow")


def incast(backend):
    fab = rf.topologies.FatTree(gpus=128, link="200Gbps", radix=16)
    src = list(range(8, 16)) + list(range(64, 96))
    dst = [0] * 8 + list(range(16, 48))
    sizes = [1 << 20] * 8 + [300_000] * 32
    return rf.simulate(fab, rf.Flows(src, dst, sizes), backend=backend)


def spans(collection) -> np.ndarray:
    """(start, end) of each bar of a broken_barh collection, in the axis's x unit."""
    return np.array([[p.vertices[:, 0].min(), p.vertices[:, 0].max()] for p in collection.get_paths()])


def by_gid(ax, gid):
    found = [a for a in (*ax.lines, *ax.collections) if a.get_gid() == gid]
    assert len(found) == 1, f"{gid}: {len(found)} artists"
    return found[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fct_cdf_plots_the_sorted_fcts(backend, tmp_path):
    res = incast(backend)
    fig = res.plot.fct_cdf()
    ax = fig.axes[0]
    line = by_gid(ax, "cdf")
    x, y = line.get_xdata(), line.get_ydata()
    fct = np.sort(res.flows["fct_ps"].to_numpy())
    assert ax.get_xlabel() == "flow completion time (µs)"  # the largest unit that fits
    np.testing.assert_allclose(x, fct / 1e6)
    np.testing.assert_allclose(y, np.arange(1, len(fct) + 1) / len(fct))
    assert y[-1] == 1 and np.all(np.diff(y) > 0)
    assert ax.get_ylabel() == "fraction of flows"
    fig.savefig(tmp_path / "fct.png")  # Agg: no display needed
    assert (tmp_path / "fct.png").stat().st_size > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_fct_cdf_of_slowdowns_into_given_axes(backend):
    from matplotlib.figure import Figure

    res = incast(backend)
    fig = Figure()
    ax = fig.add_subplot(1, 2, 2)
    assert res.plot.fct_cdf(ax=ax, slowdown=True, log=True) is fig
    x = by_gid(ax, "cdf").get_xdata()
    np.testing.assert_allclose(x, np.sort(res.flows["slowdown"].to_numpy()))
    assert x[0] >= 1 - 1e-9 and "slowdown" in ax.get_xlabel() and ax.get_xscale() == "log"


def test_fct_cdf_leaves_unfinished_flows_out():
    fab = rf.topologies.FatTree(gpus=16, link="200Gbps")
    res = rf.simulate(fab, rf.Flows([0, 1], [9, 10], [1000, 1 << 26]), until="30us")
    line = by_gid(res.plot.fct_cdf().axes[0], "cdf")
    assert len(line.get_xdata()) == 1 and line.get_ydata()[-1] == 1
    res = rf.simulate(fab, rf.Flows([1], [10], [1 << 26]), until="30us")
    with pytest.raises(rf.SpecError, match="no flow finished"):
        res.plot.fct_cdf()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fct_cdf_of_a_trace_needs_record_flows(trace, backend):
    fab = rf.topologies.FatTree(gpus=16)
    res = rf.simulate(fab, trace, backend=backend)
    with pytest.raises(rf.SpecError, match="record_flows=True"):
        res.plot.fct_cdf()
    res = rf.simulate(fab, trace, backend=backend, record_flows=True)
    x = by_gid(res.plot.fct_cdf().axes[0], "cdf").get_xdata()
    assert len(x) == res.flows.num_rows == res.run["flows"]


def test_fct_cdf_reads_streamed_flows(tmp_path):
    fab = rf.topologies.FatTree(gpus=16)
    res = rf.simulate(fab, rf.Flows.permutation(16, 100_000, seed=1), flows_path=tmp_path / "flows")
    assert res.flows.num_rows == 0
    assert len(by_gid(res.plot.fct_cdf().axes[0], "cdf").get_xdata()) == 16


@pytest.mark.parametrize("backend", BACKENDS)
def test_link_utilization_plots_each_kind(backend):
    res = incast(backend)
    ax = res.plot.link_utilization().axes[0]
    kinds = list(dict.fromkeys(res.links["kind"].to_pylist()))
    util = res.links["utilization"].to_numpy() * 100
    kind = np.array(res.links["kind"].to_pylist())
    for k in kinds:
        line = by_gid(ax, f"cdf:{k}")
        np.testing.assert_allclose(line.get_xdata(), np.sort(util[kind == k]))
        assert line.get_ydata()[-1] == 1
    nic = by_gid(ax, "cdf:nic").get_xdata()
    assert 0 < nic.max() <= 100  # the incast's receiver NIC: busy most of the run
    assert "%" in ax.get_xlabel() and ax.get_ylabel() == "fraction of link directions"
    only = res.plot.link_utilization(kinds=["nic"]).axes[0]
    assert [ln.get_gid() for ln in only.lines] == ["cdf:nic"]
    with pytest.raises(rf.SpecError, match="no links of kind 'optical'"):
        res.plot.link_utilization(kinds=["optical"])


def test_old_spelling_link_utilisation_warns_and_draws_the_same():
    res = incast("packet")
    with pytest.warns(DeprecationWarning, match="link_utilization"):
        old = res.plot.link_utilisation(kinds=["nic"]).axes[0]
    new = res.plot.link_utilization(kinds=["nic"]).axes[0]
    np.testing.assert_array_equal(by_gid(old, "cdf:nic").get_xdata(), by_gid(new, "cdf:nic").get_xdata())


def test_results_import_no_plotting_code_plot_registers_its_view():
    """The layers: rfabric.plot depends on rfabric.results (it registers res.plot), and
    rfabric.results names no plotting module, not even lazily."""
    import ast
    import inspect

    import rfabric.plot
    import rfabric.results

    tree = ast.parse(inspect.getsource(rfabric.results))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert not any("plot" in name for name in imported), imported
    assert rf.Results.plot is rfabric.plot.ResultPlots
    assert isinstance(res_plot := incast("flow").plot, rfabric.plot.ResultPlots) and res_plot._res is not None
    with pytest.raises(ValueError, match="already has 'flows'"):
        rfabric.results.register_view("flows")(object)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stage_timeline_bars_are_the_stage_and_op_times(trace, backend):
    res = rf.simulate(rf.topologies.FatTree(gpus=16), trace, backend=backend)
    fig = res.plot.stage_timeline()
    ax = fig.axes[0]
    assert ax.get_xlabel() == "simulated time (ms)"
    stages = list(dict.fromkeys(res.stages["stage"].to_pylist()))
    assert [t.get_text() for t in ax.get_yticklabels()] == stages
    for name in stages:
        st = res.stages.filter(np.array(res.stages["stage"].to_pylist()) == name)
        want = np.stack([st["start_ps"].to_numpy(), st["end_ps"].to_numpy()], axis=1) / 1e9
        np.testing.assert_allclose(spans(by_gid(ax, f"stage:{name}")), want)
        ops = res.ops.filter(np.array(res.ops["stage"].to_pylist()) == name)
        want = np.stack([ops["start_ps"].to_numpy(), ops["end_ps"].to_numpy()], axis=1) / 1e9
        np.testing.assert_allclose(spans(by_gid(ax, f"ops:{name}")), want)
    assert not any(c.get_gid().endswith(":unfinished") for c in ax.collections)


def test_stage_timeline_hatches_unfinished_stages(trace):
    res = rf.simulate(rf.topologies.FatTree(gpus=16), trace, until="10ms")
    ax = res.plot.stage_timeline(ops=False).axes[0]
    assert not any(c.get_gid().startswith("ops:") for c in ax.collections)
    # rows in order of first start, the stages not reached yet last
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:2] == ["train", "weight_sync"] and set(labels[2:]) == {"gen", "response_stream"}
    bar = by_gid(ax, "stage:weight_sync:unfinished")  # running at 10 ms
    start = res.stages.filter(np.array(res.stages["stage"].to_pylist()) == "weight_sync")["start_ps"][0]
    np.testing.assert_allclose(spans(bar), [[start.as_py() / 1e9, res.run["sim_ps"] / 1e9]])
    assert bar.get_hatch() == "//"


def test_stage_timeline_of_a_flow_set_says_it_needs_a_trace():
    res = incast("flow")
    with pytest.raises(rf.SpecError, match="trace workload"):
        res.plot.stage_timeline()


def test_link_utilization_over_time_is_the_sampled_mean_per_kind():
    fab = rf.topologies.FatTree(gpus=128, link="200Gbps", radix=16)
    period = 10**7  # 10 us
    res = rf.simulate(fab, rf.Flows([0], [64], [4 << 20]), ecmp="flow", sample_every=period)
    ax = res.plot.link_utilization(over_time=True).axes[0]
    q = res.queue_samples
    kind = np.array(res.links["kind"].to_pylist())
    n_windows = q["time_ps"].to_numpy().max() // period
    for k in dict.fromkeys(kind):
        line = by_gid(ax, f"time:{k}")
        np.testing.assert_allclose(line.get_xdata(), np.arange(1, n_windows + 1) * period / 1e6)  # µs
        want = np.zeros(n_windows)
        cols = (q[c].to_numpy() for c in ("time_ps", "link_id", "direction", "utilization"))
        for t, lid, d, u in zip(*cols, strict=True):
            if kind[lid * 2 + d] == k:
                want[t // period - 1] += u * 100
        np.testing.assert_allclose(line.get_ydata(), want / np.sum(kind == k))
    # a flow at line rate: 2 of the 256 NIC directions busy, so a full window's mean is ~0.8 %
    assert by_gid(ax, "time:nic").get_ydata()[3] == pytest.approx(100 * 2 / 256, rel=0.05)
    assert "%" in ax.get_ylabel() and "µs" in ax.get_xlabel()
    with pytest.raises(rf.SpecError, match="sample_every"):
        incast("flow").plot.link_utilization(over_time=True)
