"""rfabric.controllers.waves: the forest's schedule as periods, what a wave keeps of the plan
in force, and the teardown."""

import numpy as np
import pytest
from conftest import tiny_rl_trace, weight_sync_trace
from test_stage_aware import view_for

import rfabric as rf
from rfabric.controllers.layout import RFabricLayout
from rfabric.controllers.plan_rows import _key_set, _rows, _rows_touching, _table
from rfabric.controllers.waves import fanout_flows, forest_schedule, restore, wave_pins
from rfabric.rewrites import WeightSyncForest, apply_rewrites, locality


@pytest.fixture(scope="module")
def forest_case():
    top = rf.topologies.RFabric(256, core_ports=16)
    trace = tiny_rl_trace(train_gpus=128, gen_gpus=128, train=dict(tp=8, pp=2, dp=8), pod_gpus=64)
    out, applied, _ = apply_rewrites(trace, [WeightSyncForest()], locality(top))
    return top.to_spec(), out, applied


def test_every_forest_edge_is_in_exactly_one_wave_period(forest_case):
    spec, out, applied = forest_case
    waves, periods, firsts, forest = forest_schedule(applied)
    assert forest is not None and firsts and waves
    a_edges = forest.wave >= 0  # Phase A: the inter-PoD edges, replayed as wave periods
    edges = {
        (int(s), int(d), int(c))
        for s, d, c in zip(forest.src[a_edges], forest.dst[a_edges], forest.circuits[a_edges], strict=True)
    }
    got = [e for w in waves.values() for e in w]
    # one forest per iteration, the same shards each time: every wave edge once per forest
    assert set(got) == edges and len(got) == len(firsts) * int(a_edges.sum())
    assert len(waves) == len(firsts) * forest.n_waves
    # each forest's periods: its waves, then Phase B, all weight_sync ops of the trace
    a = out.arrays()
    stage = np.array(a["stage_names"])[a["stage"]]
    ws = set(np.asarray(a["period"])[stage == "weight_sync"].tolist())
    assert set(waves) <= periods <= ws
    for first in firsts:
        assert first in waves
    # nothing without a forest
    assert forest_schedule([]) == ({}, set(), set(), None)


def test_wave_pins_keep_the_running_pairs_joined():
    spec = rf.topologies.RFabric(256).to_spec()
    lay = RFabricLayout(spec)
    n = lay.num_tors
    same_rail = [(a, b) for a in range(n) for b in range(n) if a != b and lay.tor_rail[a] == lay.tor_rail[b]]
    codes = np.array([a * n + b for a, b in same_rail[:20]], dtype=np.int64)
    demand = {1: (codes, np.full(codes.size, 5.0)), 2: (codes[:3], np.ones(3))}
    view = view_for(spec, active=(1, 7))
    running, tries = wave_pins(lay, view, 7, demand, codes[:1])
    assert running.sum() == 5.0 * codes.size  # period 2 is not running, 7 is the wave
    assert len(tries) == 2
    for pinned in tries:
        assert not lay.apart(_table(sorted(pinned)), codes // n, codes % n).any()
        assert len(pinned) < len(spec.circuits)


def test_fanout_flows_grow_wave_by_wave_to_all_of_phase_b(forest_case):
    """Oracle: Phase B's ops of the rewritten trace. By its last wave a forest's fan-out is
    every flow of its Phase B ops (a chain broadcast of n ranks: n - 1 hops of the shard);
    each wave adds the trees its own sends root, and what was there before it is ``ready``."""
    spec, out, applied = forest_case
    waves, periods, firsts, forest = forest_schedule(applied)
    fan = fanout_flows(applied)
    assert set(fan) == set(waves)
    a = out.arrays()
    period = np.asarray(a["period"])
    ro = a["ranks_offsets"]
    for first in firsts:
        nw = forest.n_waves
        b_rows = np.flatnonzero(period == first + nw)
        want = sum(float(a["size_bytes"][k]) * (ro[k + 1] - ro[k] - 1) for k in b_rows.tolist())
        assert want > 0
        prev: list = []
        for t in range(nw):
            src, dst, nbytes, ready, b_period = fan[first + t]
            assert b_period == first + nw and src.shape == dst.shape == nbytes.shape == ready.shape
            flows = list(zip(src.tolist(), dst.tolist(), nbytes.tolist(), strict=True))
            # ready: exactly the flows the waves before it had
            assert sorted(f for f, r in zip(flows, ready.tolist(), strict=True) if r) == prev
            prev = sorted(flows)
        assert fan[first + nw - 1][2].sum() == pytest.approx(want)
        assert (fan[first + nw - 1][0] != fan[first + nw - 1][1]).all()


def test_restore_puts_back_the_pods_rows_only():
    spec = rf.topologies.RFabric(256).to_spec()
    lay = RFabricLayout(spec)
    pre = spec.circuits
    # the forest's plan: PoD 0 and the core emptied, PoD 1 as before
    now = _table([r for r in _rows(pre) if lay.agg_pod.get(r[0]) == 1])
    back = restore(lay, view_for(spec, plan=now), pre, {0})
    assert _key_set(back) == _key_set(pre)
    assert restore(lay, view_for(spec, plan=now), pre, set()) is not None
    # a failed port's rows stay out
    dead = int(_rows_touching(pre, lay, {0}).a[0])
    back = restore(lay, view_for(spec, plan=now, failed=[dead]), pre, {0})
    assert dead not in set(back.a.tolist()) | set(back.b.tolist())
    assert len(back) == len(pre) - 1 or len(back) == len(pre) - 2


def first_forest_wave(ctl, t_ocs):
    """Run weight_sync_trace(192) (64 train GPUs, one PoD, seeding 192 generation GPUs,
    three PoDs) on RFabric 256 in PoDs of 64 GPUs under `ctl` (flow backend): the op table, the forest's first wave's period and a mask of its sends."""
    sim = rf.Simulation(
        rf.topologies.RFabric(256, pod_servers=8),
        weight_sync_trace(192),
        controller=ctl,
        backend="flow",
        t_ocs=t_ocs,
    )
    sim.run()
    ops = sim.results().ops
    period = ops["period"].to_numpy()
    first = period[ops["rewrite"].to_numpy(zero_copy_only=False) == "weight_sync_forest"].min()
    return ops, first, (period == first) & (ops["size_bytes"].to_numpy() > 0)


def test_a_waves_sends_run_at_nic_rate_on_rfabric():
    """One train PoD seeding three generation PoDs (RFabric 256 in PoDs of 64 GPUs): each
    root has an edge to every generation PoD. Oracle: the first wave's plan gives each send
    its own chain and its root sends nothing else meanwhile, so each send takes its bytes
    over the 200 Gb/s line rate (plus microseconds of latency). Before the forest kept a
    GPU's edges of one wave on its one NIC, the three edges of a root shared it: 3.02x."""
    ops, _, wave = first_forest_wave(rf.controllers.StageAwareController(forest="always"), "0ms")
    size = ops["size_bytes"].to_numpy()
    ideal_ps = size[wave] * 8 / 200e9 * 1e12
    ratio = ops["time_ps"].to_numpy()[wave] / ideal_ps
    assert (ratio >= 1.0).all() and (ratio < 1.02).all(), ratio
    assert wave.sum() == 16  # one send per root (16 shards, 48 edges: three waves)


def test_the_first_wave_commits_inside_the_safe_window_when_it_gains_more():
    """The case above without look-ahead: the forest's first wave meets its boundary
    0.37 ms before its sends, with t_ocs 1 ms. Kept on the plan in force (the safe window
    alone), two sends shared each chain: 2.02x. Committed because its plan is predicted
    faster by more than the 0.63 ms it delays the wave, each send ends within its bytes over
    the line rate plus that delay (oracle), and the log says so."""
    ctl = rf.controllers.StageAwareController(lookahead=False, forest="always")
    ops, first, wave = first_forest_wave(ctl, "1ms")
    size = ops["size_bytes"].to_numpy()
    commits = [d for d in ctl.log if d.period == first and d.action == "commit"]
    assert len(commits) == 1 and "inside the safe window" in commits[0].detail, [d.action for d in ctl.log]
    late_ps = 10**9 - 373866985  # t_ocs - slack, as the log has it
    assert f"+ {late_ps} ps of reconfiguration" in commits[0].detail
    ideal_ps = size[wave] * 8 / 200e9 * 1e12
    assert (ops["time_ps"].to_numpy()[wave] <= 1.01 * ideal_ps + late_ps).all()
