"""The placement sweep (rf.sweeps.placement_sweep, issue 26 item 2) against oracles: two
flows on one bottleneck each get half of it (FCT slowdown 2, iteration time twice the job's
alone), jobs that share no link run exactly as alone, and queue depths per tier match the
links table classified by the fat-tree's link labels."""

import numpy as np
import pytest

import rfabric as rf
from rfabric.sweeps.placement import PLACEMENT_SWEEP_SCHEMA, placement_sweep, tier_queues

T = rf.topologies
SIZE = 4 << 20

# FT-OS at 128 GPUs: ToRs of 12 GPUs with 4 uplinks; D-mod-K takes uplink (the destination's
# position under its ToR) mod 4. GPU 12 is position 0 under ToR 1, GPU 16 position 4: flows
# 0 -> 12 and 1 -> 16 leave ToR 0 on the same uplink and reach ToR 1 through the same link.
SHARED = [[0, 12], [1, 16]]
# 24 -> 36 runs ToR 2 -> agg -> ToR 3: no link in common with 0 -> 12
DISJOINT = [[0, 12], [24, 36]]


def one_flow():
    return rf.Flows([0], [1], SIZE)


@pytest.fixture(scope="module")
def rows():
    table = placement_sweep(
        {"FT-OS": T.FatTree(128, oversubscription=3)},
        {"a": one_flow(), "b": one_flow()},
        {"shared": SHARED, "disjoint": DISJOINT},
        gpus=128,
    )
    assert table.schema == PLACEMENT_SWEEP_SCHEMA
    return {(r["policy"], r["job"]): r for r in table.to_pylist()}


def test_two_flows_on_one_bottleneck_share_it(rows):
    for job in ("a", "b"):
        r = rows[("shared", job)]
        assert r["flows"] == 1 and r["gpus"] == 2
        assert r["alone_fct_slowdown_p99"] == pytest.approx(1.0, abs=1e-9)
        assert r["fct_slowdown_mean"] == pytest.approx(2.0, rel=0.1)
        assert r["slowdown_vs_alone"] == pytest.approx(2.0, rel=0.1)
        assert r["iteration_time_ps"] == pytest.approx(2 * r["alone_iteration_time_ps"], rel=0.1)


def test_jobs_that_share_no_link_run_as_alone(rows):
    for job in ("a", "b"):
        r = rows[("disjoint", job)]
        assert r["iteration_time_ps"] == r["alone_iteration_time_ps"]
        assert r["slowdown_vs_alone"] == 1.0
        assert r["fct_slowdown_p99"] == pytest.approx(1.0, abs=1e-9)
        assert r["shared_tors"] == 0 and r["tors"] == 2
    assert rows[("shared", "a")]["shared_tors"] == 2  # both ToRs, one per end


def test_queues_by_tier_match_the_link_labels():
    fab = T.FatTree(128, oversubscription=3)
    jobs = [rf.Job(one_flow(), gpus=g, name=n) for n, g in zip("ab", SHARED, strict=True)]
    res = rf.simulate(fab, jobs, seed=1)
    links = res.links
    kind = np.asarray(links["kind"].to_pylist())
    direction = links["direction"].to_numpy()
    depth = links["max_queue_bytes"].to_numpy()
    # FatTree's links run GPU -> ToR (nic), ToR -> agg (tor-agg), agg -> core (agg-core):
    # a ToR sends on nic links backwards and tor-agg links forwards
    at_tor = ((kind == "nic") & (direction == 1)) | ((kind == "tor-agg") & (direction == 0))
    above = ((kind == "tor-agg") & (direction == 1)) | (kind == "agg-core")
    got = tier_queues(fab, links)
    assert got == {"tor": int(depth[at_tor].max()), "spine": int(depth[above].max())}
    assert got["tor"] > 0  # the shared uplink queued
    # only ToR 1's ports: the receiving end, where nothing queues beyond its one flow
    tor1 = fab.to_spec().node_id("tor1")
    mine = at_tor & (links["src"].to_numpy() == tor1)
    assert tier_queues(fab, links, [tor1])["tor"] == int(depth[mine].max())
    # RFabric's tiers above its ToRs are optical: no spine queue
    fab = T.RFabric(64)
    res = rf.simulate(fab, [rf.Job(one_flow(), gpus=[0, 8])], seed=1)
    assert tier_queues(fab, res.links)["spine"] is None
    # the flow backend has no queues
    res = rf.simulate(fab, [rf.Job(one_flow(), gpus=[0, 8])], seed=1, backend="flow")
    assert tier_queues(fab, res.links) == {"tor": None, "spine": None}


def test_a_sweep_of_policies_and_fabrics_is_deterministic():
    ar = rf.op_trace("all_reduce", range(16), "1MiB")
    kw = dict(gpus=64, seed=3)
    t1 = placement_sweep(["FT-OS", "RFabric"], [ar, ar], ["packed", "spread", "random"], **kw)
    t2 = placement_sweep(["FT-OS", "RFabric"], [ar, ar], ["packed", "spread", "random"], **kw)
    assert t1.num_rows == 2 * 3 * 2
    assert t1.drop_columns(["wall_s"]).equals(t2.drop_columns(["wall_s"]))
    rows = t1.to_pylist()
    assert [(r["fabric"], r["policy"], r["job"]) for r in rows[:3]] == [
        ("FT-OS", "packed", "job0"),
        ("FT-OS", "packed", "job1"),
        ("FT-OS", "spread", "job0"),
    ]
    for r in rows:
        assert r["iteration_time_ps"] > 0 and r["alone_iteration_time_ps"] > 0
        assert r["slowdown_vs_alone"] == pytest.approx(r["iteration_time_ps"] / r["alone_iteration_time_ps"])
        assert r["flows"] > 0 and r["fct_slowdown_p99"] >= r["fct_slowdown_mean"] > 0
    # the same jobs, placed with rf.place, simulated directly: the sweep's numbers
    fab = T.FatTree(64, oversubscription=3)
    a, b = rf.place(fab, [16, 16], "spread")
    res = rf.simulate(
        fab, [rf.Job(ar, gpus=a, name="job0"), rf.Job(ar, gpus=b, name="job1")], seed=rows[0]["seed"]
    )
    spread = [r for r in rows if r["fabric"] == "FT-OS" and r["policy"] == "spread"]
    assert [r["iteration_time_ps"] for r in spread] == res.jobs["iteration_time_ps"].to_pylist()
    # alone=False: no alone runs
    t3 = placement_sweep(["FT"], [ar], ["packed"], gpus=64, alone=False)
    r = t3.to_pylist()[0]
    assert r["alone_iteration_time_ps"] is None and r["slowdown_vs_alone"] is None


def test_bad_arguments():
    ar = rf.op_trace("all_reduce", range(8), "1MiB")
    with pytest.raises(rf.SpecError, match="unknown policy 'packd'"):
        placement_sweep(["FT"], [ar], ["packd"], gpus=64)
    with pytest.raises(rf.SpecError, match=r"explicit placements as a dict \{label: GPU lists\}"):
        placement_sweep(["FT"], [ar], [[list(range(8))]], gpus=64)
    with pytest.raises(rf.SpecError, match="record_flows is always on"):
        placement_sweep(["FT"], [ar], ["packed"], gpus=64, record_flows=False)
    with pytest.raises(rf.SpecError, match="the jobs need 72 GPUs"):
        placement_sweep(["FT"], [rf.op_trace("all_reduce", range(64), "1MiB"), ar], ["packed"], gpus=64)
    with pytest.raises(rf.SpecError, match="unknown fabric 'FTT'"):
        placement_sweep(["FTT"], [ar], ["packed"], gpus=64)
    two = rf.jobs.compose([rf.Job(ar, name="p"), rf.Job(ar, gpus=range(8, 16), name="q")], 64)[0]
    with pytest.raises(rf.SpecError, match="job 'job0' is a trace of several jobs"):
        placement_sweep(["FT"], [two], ["packed"], gpus=64)
    with pytest.raises(rf.SpecError, match="job 'x' is a str, not a Trace or Flows"):
        placement_sweep(["FT"], {"x": "trace.arrow"}, ["packed"], gpus=64)


def test_rewrites_follow_the_fairness_rule():
    """ "offered" (default) gives FT the weight-sync forest RFabric's controller asks for, as
    rf.sweep does; "own" only RFabric; the forest shortens FT's weight sync."""
    tr = rf.traces.generate_rl(
        {"base": "qwen2.5-14b", "layers": 1}, train_gpus=8, gen_gpus=8, seed=1, global_batch=16
    )
    rows = {}
    for rule in ("offered", "own"):
        t = placement_sweep(["FT", "RFabric"], [tr], ["packed"], gpus=32, alone=False, rewrites=rule)
        rows[rule] = {r["fabric"]: r for r in t.to_pylist()}
    assert all(r["rewrites"].startswith("weight_sync_forest(") for r in rows["offered"].values())
    assert rows["own"]["FT"]["rewrites"] == "none"
    assert rows["own"]["RFabric"]["rewrites"] == rows["offered"]["RFabric"]["rewrites"]
    assert rows["offered"]["FT"]["iteration_time_ps"] < rows["own"]["FT"]["iteration_time_ps"]
    with pytest.raises(rf.SpecError, match="rewrites must be one of 'offered', 'none', 'own'"):
        placement_sweep(["FT"], [tr], ["packed"], gpus=32, rewrites="fair")
