"""Routing as each fabric is run, and failures that finish (issue 8).

D-mod-K spreads destinations over a switch's next hops by their position below it, so rail
fabrics use every uplink; each fabric declares the routing its operators run; a failed NIC
(or OCS port) on any fabric, PXN on or off, costs its server's share and the run finishes."""

import numpy as np
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric.traces import Trace

T = rf.topologies


def collective(kind: str, gpus: int, size: int):
    return rf.op_trace(kind, range(gpus), size, gpus=gpus)


def link_bytes(res, link: int, direction: int) -> int:
    t = res.links
    m = (t["link_id"].to_numpy() == link) & (t["direction"].to_numpy() == direction)
    return int(t["bytes"].to_numpy()[m][0])


# -- D-mod-K by position below the switch ------------------------------------------------


@pytest.mark.parametrize(
    "fab,kind,directions",
    [
        (T.RailOptimized(128), "tor-spine", (0, 1)),
        # (the OCS end of a ToR-OCS link is a passive port: each channel's bytes are counted
        # at the ToR that sends them)
        (T.RFabric(128), "tor-ocs", (0,)),
    ],
    ids=["RailOptimized", "RFabric"],
)
def test_all_to_all_uses_every_tor_uplink_evenly(fab, kind, directions):
    # On the raw GPU id every GPU of a rail has one residue: a rail's traffic took 1 of 8
    # uplinks (RFabric: 30 of 256 ToR-OCS link directions carried anything).
    res = rf.simulate(fab, collective("all_to_all", 128, 4 << 20))
    t = res.links
    kinds = t["kind"].to_numpy(zero_copy_only=False)
    for d in directions:
        up = t["bytes"].to_numpy()[(kinds == kind) & (t["direction"].to_numpy() == d)]
        assert len(up) == 128 and up.min() > 0
        assert up.max() <= 1.01 * up.min()  # D-mod-K balances all-to-all exactly


def test_dmodk_index_is_the_position_under_the_leaf():
    fab = T.RailOptimized(128)  # two rail groups of 8 servers; 8 spines
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([0], [1], [1]))
    dst_node = sim.engine.port_stats()["dst"]
    names = spec.nodes.name
    # GPU 0 (group 0, rail 0) to rail 0 of every server of group 1: one spine each
    spines = [names[dst_node[sim.engine.trace_path(0, s * 8, 0)[1]]] for s in range(8, 16)]
    assert len(set(spines)) == 8 and all(n.startswith("spine") for n in spines)
    # FatTree keeps the GPU id as its index (NICs fill ToRs in GPU order): unchanged paths
    ft = T.FatTree(128)
    sim = rf.Simulation(ft, rf.Flows([0], [1], [1]))
    aggs = {sim.engine.trace_path(0, d, 0)[1] for d in range(64, 72)}
    assert len(aggs) == 8


def test_rail_fabrics_match_the_fat_tree_on_all_to_all_and_permutation():
    size = 8 << 20
    servers = np.array([5, 6, 10, 11, 8, 4, 7, 0, 1, 15, 2, 3, 13, 14, 9, 12])  # a derangement
    src = np.arange(128)
    perm = rf.Flows(src, servers[src // 8] * 8 + src % 8, size)  # rail-aligned, as bench/fabric_bounds
    times = {}
    for name, fab in (("FT", T.FatTree(128)), ("RO", T.RailOptimized(128)), ("RFabric", T.RFabric(128))):
        a2a = rf.simulate(fab, collective("all_to_all", 128, size)).run["makespan_ps"]
        p = rf.simulate(fab, perm).run["makespan_ps"]
        times[name] = (a2a, p)
    for name in ("RO", "RFabric"):
        # (was 4.35x on all_to_all and 3.0x on the permutation, at 256 MiB)
        assert times[name][0] <= 1.03 * times["FT"][0], (name, times)
        assert times[name][1] <= 1.03 * times["FT"][1], (name, times)


# -- each fabric's own routing -----------------------------------------------------------


def test_each_fabric_declares_the_routing_its_operators_run():
    classes = (T.FatTree, T.RailOptimized, T.TopoOpt, T.MixNet, T.RFabric)
    assert {cls.__name__: cls.routing for cls in classes} == {
        "FatTree": "dmodk",
        "RailOptimized": "dmodk",
        "TopoOpt": "multipath",
        "MixNet": "adaptive",
        "RFabric": "dmodk",
    }
    assert rf.EngineConfig().ecmp is None
    mix = T.MixNet(32)
    assert mix.to_spec().routing == "adaptive"
    flows = rf.Flows([0], [9], [1 << 16])
    assert rf.simulate(mix, flows).run["routing"] == "adaptive"  # the fabric's own
    assert rf.simulate(mix, flows, ecmp="dmodk").run["routing"] == "dmodk"  # the user's wins
    assert rf.simulate(mix, flows, config=rf.EngineConfig(ecmp="flow")).run["routing"] == "flow"

    class Sprayed(T.FatTree):
        routing = "packet"

    assert rf.simulate(Sprayed(16), rf.Flows([0], [9], [1 << 16])).run["routing"] == "packet"

    class Bad(T.FatTree):
        routing = "ospf"

    with pytest.raises(rf.SpecError, match="routing must be one of"):
        Bad(16).to_spec()


# -- failures that finish ----------------------------------------------------------------

VARIANTS = {
    "FT": lambda: T.FatTree(128),
    "FT-OS": lambda: T.FatTree(128, oversubscription=3),
    "RO": lambda: T.RailOptimized(128),
    "RO-nopxn": lambda: T.RailOptimized(128, pxn=False),
    "TopoOpt": lambda: T.TopoOpt(128),
    "MixNet": lambda: T.MixNet(128),
    "RFabric": lambda: T.RFabric(128),
    "RFabric-nopxn": lambda: T.RFabric(128, pxn=False),
}


@pytest.mark.parametrize("kind", ["all_reduce", "all_to_all"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_failed_nic_on_any_fabric_finishes_at_a_bounded_cost(name, kind):
    fab = VARIANTS[name]()
    spec = fab.to_spec()
    trace = collective(kind, 128, 4 << 20)
    base = rf.simulate(fab, trace).run["makespan_ps"]
    # at the start, and mid-run (RFabric+PXN used to strand frames on the failed NIC's rail)
    for at in (0, base // 3):
        res = rf.simulate(fab, trace, failures=[(spec.nic_link(3), at)])
        run = res.run
        assert run["ops_done"] == 1 and run["packets_in_flight"] == 0, (name, at, run)
        assert not run["unroutable"] and not run["deadlock"]
        assert run["makespan_ps"] <= 1.15 * base, (name, at, run["makespan_ps"] / base)


def test_a_relayed_gpu_costs_its_servers_share():
    # GPU 3's NIC fails: frame by frame its traffic leaves and enters through the other 7
    # NICs of server 0, so each carries 8/7 of its own load (not one of them double).
    fab = T.FatTree(128)
    spec = fab.to_spec()
    trace = collective("all_to_all", 128, 16 << 20)
    base = rf.simulate(fab, trace)
    fail = rf.simulate(fab, trace, failures=[(spec.nic_link(3), 0)])
    for d in (0, 1):  # GPU -> ToR and ToR -> GPU
        assert link_bytes(fail, spec.nic_link(3), d) <= 9216  # at most a frame sent at t = 0
        others = [spec.nic_link(g) for g in range(8) if g != 3]
        ratio = [link_bytes(fail, link, d) / link_bytes(base, link, d) for link in others]
        assert all(1.13 < r < 1.16 for r in ratio), ratio  # 8/7 = 1.143 (measured 1.142-1.144)
    assert fail.run["makespan_ps"] <= 1.16 * base.run["makespan_ps"]


def test_a_failed_nic_during_an_rl_iteration_finishes():
    trace = tiny_rl_trace(iterations=1)
    fab = T.RailOptimized(64)
    spec = fab.to_spec()
    # a train GPU's NIC at the start, a gen GPU's mid-iteration (it takes about 235 ms)
    res = rf.simulate(fab, trace, failures=[(spec.nic_link(3), 0), (spec.nic_link(40), "100ms")])
    assert res.run["ops_done"] == trace.num_ops and res.run["packets_in_flight"] == 0


@pytest.mark.parametrize("name", ["RFabric", "RFabric-nopxn", "MixNet"])
def test_failed_ocs_ports_finish(name):
    fab = VARIANTS[name]()
    spec = fab.to_spec()
    # two OCS ports that carry circuits of the initial plan (RFabric: ToR uplinks; MixNet:
    # GPUs' optical NICs)
    used = np.union1d(spec.circuits.a, spec.circuits.b)
    ports = used[np.isin(used, np.flatnonzero(spec.links.kind.astype(str) != "ocs-ocs"))]
    trace = collective("all_to_all", 128, 4 << 20)
    base = rf.simulate(fab, trace).run["makespan_ps"]
    for at in (0, base // 2):
        res = rf.simulate(fab, trace, failures=[(int(ports[0]), at), (int(ports[len(ports) // 2]), at)])
        assert res.run["ops_done"] == 1 and res.run["packets_in_flight"] == 0
        assert res.run["makespan_ps"] <= 1.15 * base


@pytest.mark.parametrize("pxn", [True, False])
def test_a_tor_cut_off_from_the_circuits_finishes(pxn):
    # All 8 uplinks of one RFabric ToR fail: its GPUs reach the rest over NVLink and another
    # NIC of their server; frames it was relaying go down into a server and out again
    # (servers relay without PFC, and failures keep the up*/down* order, so no buffer cycle
    # forms: without both, this all_to_all deadlocked mid-run).
    fab = T.RFabric(128, pxn=pxn)
    spec = fab.to_spec()
    tor = int(np.flatnonzero(spec.nodes.name == "pod0/tor0.r3")[0])
    ups = [int(link) for link in spec.links_of(tor) if spec.links.kind[link] == "tor-ocs"]
    assert len(ups) == 8
    trace = collective("all_to_all", 128, 16 << 20)
    base = rf.simulate(fab, trace).run["makespan_ps"]
    for at in (0, base // 3):
        res = rf.simulate(fab, trace, failures=[(link, at) for link in ups])
        assert res.run["ops_done"] == 1 and res.run["packets_in_flight"] == 0, (pxn, at, res.summary())
        assert res.run["makespan_ps"] <= 1.3 * base


def test_a_relayed_flow_leaves_its_neighbours_their_share():
    # Weight sync's first level (generate_rl, qwen2-57b-a14b on 32 GPUs): GPUs 0-3 and 8-11
    # send their shards to 16-23 at once. GPU 3's NIC has failed before its flow starts: it
    # is paced at its NIC's rate, not NVLink's, so its frames through GPUs 0-2's NICs cost
    # them their share (8/7) instead of flooding their queues and, through PFC, pausing
    # their own flows (they took 2x).
    fab = T.FatTree(32)
    spec = fab.to_spec()
    ranks = [[0, 16], [1, 17], [2, 18], [3, 19], [8, 20], [9, 21], [10, 22], [11, 23]]
    n = len(ranks)
    trace = Trace.from_columns(
        op_id=list(range(n)),
        iteration=[0] * n,
        stage=["weight_sync"] * n,
        phase=["broadcast"] * n,
        kind=["broadcast"] * n,
        ranks=ranks,
        size_bytes=[64 << 20] * n,
        algorithm=["direct"] * n,
        deps=[[]] * n,
        compute_ps=[0] * n,
        period=[0] * n,
        gpus=32,
    )
    base = np.array(rf.simulate(fab, trace).ops["time_ps"].to_pylist())
    fail = rf.simulate(fab, trace, failures=[(spec.nic_link(3), 0)])
    ratio = np.array(fail.ops["time_ps"].to_pylist()) / base
    assert ratio.max() <= 1.16, ratio  # 8/7 = 1.143 on GPUs 0-2, 1.0 elsewhere
    assert fail.run["pfc_pauses"] == 0


@pytest.mark.parametrize("name", ["FatTree", "RailOptimized", "RFabric"])
def test_a_failed_nvlink_is_never_a_relay(name):
    # GPU 0's NIC and GPU 5's NVLink fail at once (the same server): traffic to and from GPU 0
    # is relayed through the server's other NICs, never over GPU 5's NVLink, and GPU 5 itself
    # sends and receives through its NIC (same-server traffic too). It used to spread frames
    # over GPU 5 and drop them on its down NVLink, and a RoCE flow so cut never finished.
    fab = {"FatTree": T.FatTree, "RailOptimized": T.RailOptimized, "RFabric": T.RFabric}[name](32)
    spec = fab.to_spec()
    nvlink5 = next(int(k) for k in spec.links_of(5) if k != spec.nic_link(5))
    pairs = [(8, 0), (16, 5), (0, 17), (2, 5), (5, 1), (5, 26), (24, 2)]
    if name == "RFabric":
        # (RFabric 32 has no circuits: its rails meet only inside servers, so GPU 5 and the
        # other rails of its server no longer reach each other; such a flow waits, unroutable)
        cut = rf.simulate(fab, rf.Flows([2], [5], 1 << 18), failures=[(spec.nic_link(0), 0), (nvlink5, 0)])
        assert cut.run["unroutable"] and cut.run["link_down_drops"] == 0
        pairs = [p for p in pairs if p not in ((2, 5), (5, 1))]
    src, dst = zip(*pairs, strict=True)
    res = rf.simulate(fab, rf.Flows(src, dst, 1 << 18), failures=[(spec.nic_link(0), 0), (nvlink5, 0)])
    run = res.run
    assert run["flows_done"] == len(pairs) and run["link_down_drops"] == 0, run
    assert run["packets_in_flight"] == 0 and not run["unroutable"]
