"""Optical circuits in the engine, the six fabrics under simulation, and failures."""

import numpy as np
import pytest
from conftest import rows

import rfabric as rf
from rfabric.spec import CircuitTable

US = 1_000_000
FABRICS = {
    "FT": lambda g: rf.topologies.FatTree(g),
    "FT-OS": lambda g: rf.topologies.FatTree(g, oversubscription=3),
    "RO": lambda g: rf.topologies.RailOptimized(g),
    "TopoOpt": lambda g: rf.topologies.TopoOpt(g),
    "MixNet": lambda g: rf.topologies.MixNet(g),
    "RFabric": lambda g: rf.topologies.RFabric(g),
}


class TwoToRs(rf.Topology):
    """Two ToRs, one GPU each, joined through one OCS by up to `ports` parallel circuits."""

    family = "two_tors_test"

    def __init__(self, ports=2, **kw):
        super().__init__(gpus=2, link="200Gbps", gpus_per_server=1, **kw)
        self.ports = ports

    def build(self, net):
        gpu = net.add_servers(2, 1)
        tor = net.add_nodes("eps", 2, prefix="tor")
        ocs = net.add_nodes("ocs", 1, prefix="ocs")
        net.add_links(gpu.ravel(), tor, rate=self.link_bps, kind="nic")  # links 0, 1
        self.up0 = net.add_links(tor[0], np.repeat(ocs, self.ports), rate=self.link_bps, kind="tor-ocs")
        self.up1 = net.add_links(tor[1], np.repeat(ocs, self.ports), rate=self.link_bps, kind="tor-ocs")
        self.ocs = int(ocs[0])
        net.add_circuits(self.ocs, self.up0[0], self.up1[0])  # circuit 0 lit at time 0

    def plan(self, *pairs):
        return CircuitTable.build(
            [self.ocs] * len(pairs), [self.up0[i] for i, _ in pairs], [self.up1[j] for _, j in pairs]
        )


class ThreeToRs(rf.Topology):
    """GPU 0 on ToR A, GPU 1 on ToR C; ToR B between them: circuits A-B and B-C at time 0."""

    family = "three_tors_test"

    def __init__(self):
        super().__init__(gpus=2, link="200Gbps", gpus_per_server=1)

    def build(self, net):
        gpu = net.add_servers(2, 1)
        tor = net.add_nodes("eps", 3, prefix="tor")
        ocs = net.add_nodes("ocs", 1, prefix="ocs")
        net.add_links(gpu.ravel(), tor[[0, 2]], rate=self.link_bps, kind="nic")
        self.up = [
            net.add_links(tor[t], np.repeat(ocs, 2), rate=self.link_bps, kind="tor-ocs") for t in range(3)
        ]
        self.ocs = int(ocs[0])
        net.add_circuits(self.ocs, self.up[0][0], self.up[1][0])
        net.add_circuits(self.ocs, self.up[1][1], self.up[2][0])


@pytest.mark.parametrize("at_us", [100, 137, 250])
def test_frames_left_at_a_switch_with_no_route_are_sent_again_from_their_source(at_us):
    # Mid-flow the plan joins A and C directly and leaves B with no circuit: the frames on
    # their way through B wait there while the new circuit is dark, then (B has no route
    # and none will appear) go again from GPU 0 over the new circuit; the flow completes.
    # (Held at B for good, they stranded the run.)
    fab = ThreeToRs()
    size = 20_000_000
    base = rf.simulate(fab, rf.Flows([0], [1], [size])).flows["fct_ps"][0].as_py()
    sim = rf.Simulation(fab, rf.Flows([0], [1], [size]))
    plan = CircuitTable.build([fab.ocs], [fab.up[0][1]], [fab.up[2][1]])
    sim.apply_circuits(plan, at=at_us * US, t_ocs="50us")
    res = sim.run().results()
    assert res.complete and res.run["packets_held"] == 0 and not res.run["unroutable"]
    assert res.run["held"] > 0 and res.run["circuit_reroutes"] > 0 and res.run["dark_transmits"] == 0
    assert base + 50 * US <= res.flows["fct_ps"][0].as_py() <= base + 60 * US


def test_a_circuit_chain_is_one_channel_with_summed_latency():
    fab = TwoToRs()
    fab.to_spec()
    res = rf.simulate(fab, rf.Flows([0], [1], [9154]), ecmp="flow")
    # GPU -> ToR -> (ToR-OCS + OCS-ToR: one channel, no OCS queue or latency) -> ToR -> GPU
    ser = 9216 * 40
    expected = 3 * ser + (1 + 2 + 1) * US + 2 * 800_000
    assert res.flows["fct_ps"][0].as_py() == expected


@pytest.mark.parametrize("dark", [10 * US, 100 * US, 1000 * US])
@pytest.mark.parametrize("transport", ["roce", "dctcp"])
def test_a_circuit_change_slows_a_transfer_by_the_dark_time(transport, dark):
    fab = TwoToRs()
    size = 20_000_000
    base = rf.simulate(fab, rf.Flows([0], [1], [size]), transport=transport).flows["fct_ps"][0].as_py()
    sim = rf.Simulation(fab, rf.Flows([0], [1], [size]), transport=transport)
    sim.apply_circuits(fab.plan((1, 1)), at=200 * US, t_ocs=dark)  # move the circuit to other ports
    sim.run()
    res = sim.results()
    assert res.run["dark_transmits"] == 0
    slowed = res.flows["fct_ps"][0].as_py() - base
    if transport == "roce":
        # lossless: frames wait at the ToR, PFC stops the NIC; the flow resumes when light returns
        assert dark <= slowed <= dark + 5 * US
    else:
        # lossy: what was on the circuit is lost and found again by a retransmission timeout
        # (200 us minimum, backed off once if the first one fires while still dark)
        assert dark <= slowed <= dark + (200 + 400) * US
    assert res.circuits.to_pylist() == [
        {
            "time_ps": 200 * US,
            "plan_id": 0,
            "added": 1,
            "removed": 1,
            "dark_ps": dark,
            "period": -1,
            "job": None,
        }
    ]
    if transport == "dctcp":
        assert res.run["circuit_drops"] > 0 and res.run["circuit_reroutes"] == 0  # lossy: frames lost
    else:
        assert res.run["drops"] == 0 and res.run["circuit_reroutes"] > 0  # lossless: held back
        assert res.run["held"] > 0 and res.run["packets_held"] == 0


def test_no_packet_crosses_a_dark_circuit_and_unchanged_circuits_keep_working():
    fab = TwoToRs(ports=3)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([0, 0], [1, 1], [40_000_000, 40_000_000]), ecmp="packet")
    sim.apply_circuits(fab.plan((0, 0), (1, 1)), at=0)  # two circuits from t=0+dark
    sim.run("1ms")
    sim.apply_circuits(fab.plan((0, 0), (2, 2)), at="1ms", t_ocs="200us")  # (1,1) -> (2,2); (0,0) stays

    def ports():
        return {int(r["link_id"]): r["bytes"] for r in rows(sim.results().links, direction=0).to_pylist()}

    sim.run("1.001ms")
    before = ports()
    sim.run("1.199ms")
    during = ports()
    sim.run()
    after = ports()
    moved, kept, new = int(fab.up0[1]), int(fab.up0[0]), int(fab.up0[2])
    assert during[moved] == before[moved]  # dark: nothing enters the removed circuit
    assert during[new] == before[new] == 0  # still dark: the added circuit carries nothing yet
    assert during[kept] > before[kept]  # the unchanged circuit keeps carrying traffic
    assert after[new] > 0  # and the new one after it lights up
    assert sim.results().complete
    assert spec.links.kind[moved] == "tor-ocs"


def test_failed_ocs_port_carries_nothing_and_is_masked_from_later_plans():
    fab = TwoToRs(ports=2)
    sim = rf.Simulation(fab, rf.Flows([0], [1], [40_000_000]), transport="dctcp", ecmp="packet")
    sim.apply_circuits(fab.plan((0, 0), (1, 1)), at=0, t_ocs=0)
    failed = int(fab.up0[1])
    sim.fail_link(failed, at="300us")
    sim.run("301us")
    frozen = rows(sim.results().links, link_id=failed)["bytes"].to_numpy().copy()
    sim.run()
    res = sim.results()
    assert np.array_equal(rows(res.links, link_id=failed)["bytes"].to_numpy(), frozen)
    assert res.complete
    with pytest.raises(rf.SpecError, match=r"uses failed OCS port\(s\) on link\(s\) \[" + str(failed)):
        sim.apply_circuits(fab.plan((1, 1)), at=sim.now)


def test_port_mask_follows_the_failure_timeline():
    # A port is masked from plans that take effect while it is down, not from plans before
    # its failure or after its repair, whatever order the calls come in.
    fab = TwoToRs(ports=2)
    sim = rf.Simulation(fab, rf.Flows([0], [1], [1_000_000]), transport="dctcp")
    port = int(fab.up0[1])
    sim.fail_link(port, at="50us")
    sim.set_link_state(port, at="80us", up=True)
    sim.apply_circuits(fab.plan((0, 0), (1, 1)), at="10us", t_ocs=0)  # before the failure
    sim.apply_circuits(fab.plan((0, 0), (1, 1)), at="90us", t_ocs=0)  # after the repair
    for at in ("50us", "60us"):
        with pytest.raises(rf.SpecError, match=r"failed OCS port\(s\) on link\(s\) \[" + str(port)):
            sim.apply_circuits(fab.plan((1, 1)), at=at)


class LoneGpus(rf.Topology):
    """GPUs outside any server (no NVLink to relay through) on one switch."""

    family = "lone_gpus_test"

    def build(self, net):
        gpu = net.add_nodes("gpu", self.gpus)
        hub = net.add_nodes("eps", 1, prefix="hub")
        net.add_links(gpu, hub[0], rate=self.link_bps, kind="nic")


@pytest.mark.parametrize("fabric", ["lone", "server"])
def test_unreachable_destination_ends_the_run_with_the_flow_unfinished(fabric):
    # The destination's NIC fails with no working NIC to relay through (a GPU outside any
    # server, or a server whose NICs all failed): its DCTCP flow times out
    # dctcp_max_timeouts times in a row, then gives up; the others finish; the run ends.
    fab = LoneGpus(gpus=8) if fabric == "lone" else rf.topologies.FatTree(gpus=16)
    src, dst = ([0, 2], [1, 3]) if fabric == "lone" else ([0, 1], [9, 2])
    sim = rf.Simulation(fab, rf.Flows(src, dst, [1_000_000] * 2), transport="dctcp", dctcp_max_timeouts=4)
    for g in [1] if fabric == "lone" else range(8, 16):
        sim.fail_nic(g, at=0)
    sim.run()
    res = sim.results()
    assert not res.complete and res.run["flows_done"] == 1
    assert res.flows["end_ps"][0].as_py() == -1 and res.flows["retransmits"][0].as_py() == 4
    # four backed-off timeouts (200, 400, 800, 1600 us from the first send), then the give-up
    # at the fifth, 3200 us later
    assert 6_200_000_000 <= sim.now < 6_300_000_000


def test_nic_failure_falls_back_to_another_nic_over_nvlink():
    fab = rf.topologies.FatTree(gpus=16)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([3, 10], [9, 3], [4 << 20, 4 << 20]))
    sim.fail_nic(3, at=0)
    sim.run()
    res = sim.results()
    assert res.complete and res.run["drops"] == 0
    nic = rows(res.links, link_id=spec.nic_link(3))
    assert nic["bytes"].to_numpy().sum() <= 9216  # at most the frame already sent at t = 0
    nvl = rows(res.links, link_id=spec.link_between("srv0/gpu3", "srv0/nvswitch"))
    assert np.all(nvl["bytes"].to_numpy() >= 4 << 20)  # both directions relay over NVLink


def test_flows_return_to_a_repaired_nic():
    fab = rf.topologies.FatTree(gpus=16)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([3], [9], [40 << 20]))
    sim.fail_nic(3, at=0)
    sim.set_link_state(spec.nic_link(3), "200us", up=True)
    sim.run()
    res = sim.results()
    assert res.complete
    nic = rows(res.links, link_id=spec.nic_link(3), direction=0)["bytes"][0].as_py()
    others = [
        rows(res.links, link_id=spec.nic_link(g), direction=0)["bytes"][0].as_py() for g in range(8) if g != 3
    ]
    # relayed over the server's other NICs (frame by frame, each its share), then home again
    assert nic > 20 << 20 and sum(others) > 1 << 20 and min(others) > 0


@pytest.mark.parametrize("name", list(FABRICS))
def test_every_gpu_pair_is_reachable_over_loop_free_paths(name):
    fab = FABRICS[name](128)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([0], [1], [1]))
    eng = sim.engine
    gpu_of_node = {int(n): g for g, n in enumerate(spec.gpu_nodes)}
    stats = eng.port_stats()
    port_dst = stats["dst"]
    for src in range(128):
        for dst in range(128):
            if src == dst:
                continue
            path = eng.trace_path(src, dst, (src * 131 + dst) & 0xFFFFFFFF)
            nodes = [int(port_dst[p]) for p in path]
            assert gpu_of_node.get(nodes[-1]) == dst, (name, src, dst, nodes)
            assert len(set(nodes)) == len(nodes), (name, src, dst, nodes)  # loop-free


@pytest.mark.parametrize("name", list(FABRICS))
def test_each_fabric_completes_a_permutation(name):
    res = rf.simulate(FABRICS[name](128), rf.Flows.permutation(128, 1 << 20, seed=2))
    assert res.complete and res.run["drops"] == 0 and not res.run["deadlock"]


def test_oversubscribed_fat_tree_is_at_least_twice_as_slow_across_tors():
    shift = rf.Flows(np.arange(128), (np.arange(128) + 64) % 128, 4 << 20)  # every flow crosses pods
    ft = rf.simulate(rf.topologies.FatTree(128, radix=16), shift).run["makespan_ps"]
    os3 = rf.simulate(rf.topologies.FatTree(128, radix=16, oversubscription=3), shift).run["makespan_ps"]
    assert os3 >= 2 * ft


def test_pxn_relays_cross_rail_traffic_over_nvlink():
    spec_on = rf.topologies.RailOptimized(128).to_spec()
    spec_off = rf.topologies.RailOptimized(128, pxn=False).to_spec()
    flows = rf.Flows([0], [8 + 5], [1 << 20])  # GPU 0 (rail 0) -> server 1, GPU 5 (rail 5)
    on = rf.simulate(spec_on, flows)
    off = rf.simulate(spec_off, flows)
    nvl = spec_on.link_between("srv0/gpu0", "srv0/nvswitch")
    assert rows(on.links, link_id=nvl, direction=0)["bytes"][0].as_py() > 1 << 20
    assert rows(off.links, link_id=nvl, direction=0)["bytes"][0].as_py() == 0
    assert rows(on.links, link_id=spec_on.nic_link(5), direction=0)["bytes"][0].as_py() > 1 << 20


def test_host_forwarding_crosses_an_intermediate_server():
    fab = rf.topologies.TopoOpt(128)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([0], [1], [1]))
    # find a server pair with no direct circuit: its path must transit another server's GPUs
    u, v, _ = spec.resolve_circuits()
    srv = spec.nodes.server
    direct = {(int(srv[a]), int(srv[b])) for a, b in zip(u, v, strict=True)} | {
        (int(srv[b]), int(srv[a])) for a, b in zip(u, v, strict=True)
    }
    far = next(s for s in range(1, 16) if (0, s) not in direct)
    path = sim.engine.trace_path(0, far * 8, 7)
    servers = {int(srv[n]) for n in sim.engine.port_stats()["dst"][path]}
    assert len(servers - {0, far}) >= 1


def test_rfabric_intra_tor_traffic_stays_on_the_eps():
    fab = rf.topologies.RFabric(128)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([0], [1], [1]))
    # GPU 0 and GPU 8 are rail 0 of servers 0 and 1: same rail-aligned ToR
    path = sim.engine.trace_path(0, 8, 0)
    kinds = spec.nodes.kind_names()[sim.engine.port_stats()["dst"][path]]
    assert list(kinds) == ["eps", "gpu"]


class ShortestPathRFabric(rf.topologies.RFabric):
    """RFabric routed over plain shortest paths among its ToRs."""

    deadlock_free = False


def test_shortest_paths_over_circuit_rings_deadlock_and_the_run_says_so():
    # RFabric's default plan relays ToR to ToR over circuit rings; shortest paths there
    # close a cyclic buffer dependency under PFC in a heavy 1024-GPU permutation.
    flows = rf.Flows.permutation(1024, 4 << 20, seed=1)
    res = rf.simulate(ShortestPathRFabric(1024), flows)
    assert res.run["deadlock"] and not res.complete
    assert "PFC DEADLOCK" in res.summary()
    # the same traffic: lossy completes; up*/down* routing (RFabric's default) completes lossless
    assert rf.simulate(ShortestPathRFabric(1024), flows, transport="dctcp").complete
    safe = rf.simulate(rf.topologies.RFabric(1024), flows)
    assert safe.complete and not safe.run["deadlock"] and safe.run["drops"] == 0


def test_up_down_routes_reach_every_rfabric_pair_loop_free():
    fab = rf.topologies.RFabric(1024)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, rf.Flows([0], [1], [1]))
    port_dst = sim.engine.port_stats()["dst"]
    gpu_of_node = {int(n): g for g, n in enumerate(spec.gpu_nodes)}
    rng = np.random.default_rng(5)
    for src, dst in rng.integers(0, 1024, size=(3000, 2)):
        if src == dst:
            continue
        nodes = [int(port_dst[p]) for p in sim.engine.trace_path(int(src), int(dst), int(src * 7 + dst))]
        assert gpu_of_node.get(nodes[-1]) == dst and len(set(nodes)) == len(nodes)


def test_mixnet_circuits_follow_the_regions_demand():
    servers = 16
    demand = np.zeros((servers, servers))
    demand[0, 5] = 8e9  # server 0 -> 5 dominates region 0
    demand[3, 9] = 1e9
    ring = rf.topologies.MixNet(128)
    plan = ring.plan_for_demand(demand)
    spec = ring.to_spec()
    srv = spec.nodes.server
    u, v, _ = spec.resolve_circuits(plan)
    pairs = sorted((min(srv[a], srv[b]), max(srv[a], srv[b])) for a, b in zip(u, v, strict=True))
    # greedy by demand per circuit: 0-5 takes all six OCS NICs, 3-9 the next six
    assert pairs.count((0, 5)) == 6 and pairs.count((3, 9)) == 6 and len(pairs) == 12
    flows = rf.Flows(np.arange(0, 6), np.arange(40, 46), 8 << 20)  # server 0 -> server 5
    t_ring = rf.simulate(ring, flows).run["makespan_ps"]
    t_demand = rf.simulate(rf.topologies.MixNet(128, demand=demand), flows).run["makespan_ps"]
    # demand: each flow on a circuit of its own (8 MiB at line rate); ring: the six flows share
    # the few short relayed paths to server 5 (0-2-5, 0-3-5 and longer), about half the rate
    assert t_demand * 1.8 < t_ring
    # and a controller-style switch to that plan during the run works on both transports
    for transport in ("roce", "dctcp"):
        sim = rf.Simulation(ring, flows, transport=transport)
        sim.apply_circuits(plan, at=0, t_ocs="10us")
        sim.run()
        res = sim.results()
        assert res.complete and res.run["makespan_ps"] < t_ring
    with pytest.raises(rf.SpecError, match=r"demand has shape \(4, 4\), expected \(16, 16\)"):
        ring.plan_for_demand(np.zeros((4, 4)))


def test_a_destination_cut_off_is_reported_unroutable_not_deadlocked():
    fab = rf.topologies.FatTree(gpus=16, radix=16)
    spec = fab.to_spec()
    uplinks = [int(link) for link in spec.links_of("tor1") if spec.links.kind[link] == "tor-agg"]
    res = rf.simulate(fab, rf.Flows([0], [9], [4 << 20]), failures=[(link, "10us") for link in uplinks])
    assert res.run["unroutable"] and not res.run["deadlock"] and not res.complete
    assert "UNROUTABLE" in res.summary() and "DEADLOCK" not in res.summary()
    # lossy: the same cut drops what cannot be routed and the run ends without stranded frames
    lossy = rf.simulate(
        fab,
        rf.Flows([0], [9], [4 << 20]),
        transport="dctcp",
        failures=[(link, "10us") for link in uplinks],
        until="2ms",
    )
    assert not lossy.complete and lossy.run["no_route_drops"] > 0
