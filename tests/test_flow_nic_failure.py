"""A failed NIC with PXN on the flow backend: the flows of its GPU are relayed through the
server's other NICs as the packet backend relays their frames (the packet backend is the
oracle), every byte arrives, and a GPU cut off from the fabric is reported, not waited on."""

import pytest

import rfabric as rf

MB = 10**6
US = 1_000_000
MTU = 9216


def _fabric(name):
    return rf.topologies.RailOptimized(16) if name == "RailOptimized" else rf.topologies.RFabric(64)


def _run(fab, flows, backend, failed):
    sim = rf.Simulation(fab, flows, backend=backend)
    for g in failed:
        sim.fail_nic(g, at=0)
    sim.run()
    return sim.results()


def _link_bytes(res):
    """{(link, direction): bytes} of the links that carried any."""
    t = res.links
    rows = zip(t["link_id"].to_numpy(), t["direction"].to_numpy(), t["bytes"].to_numpy(), strict=True)
    return {(int(k), int(d)): float(b) for k, d, b in rows if b > 0}


@pytest.mark.parametrize("fabric", ["RailOptimized", "RFabric"])
@pytest.mark.parametrize(("src", "dst"), [(12, 3), (3, 12), (11, 3)])
def test_pxn_relays_a_failed_nics_flow_as_the_packet_backend_does(fabric, src, dst):
    # GPU 3's NIC is down and PXN is on (RFabric's and RailOptimized's default). To GPU 3, the
    # frames spread over the 7 rails whose NICs work in both servers and cross NVLink into
    # it; the frames on the source's own rail go to the NVSwitch and back to the source,
    # which sends them out of its own NIC. (The flow backend's path walk used to stop at
    # that turn back: the flow never reached GPU 3 and the run never finished.) From GPU 3,
    # its frames cross NVLink to the GPU of its server on the destination's rail, paced at
    # its own NIC's rate. The flow starts after the failure, so both backends route it on
    # the failed fabric from its first frame.
    fab = _fabric(fabric)
    spec = fab.to_spec()
    flows = rf.Flows([src], [dst], [8 * MB], [10 * US])
    pk = _run(fab, flows, "packet", [3])
    fl = _run(fab, flows, "flow", [3])
    assert pk.complete and fl.complete and not fl.run["unroutable"]
    # conservation: every payload byte delivered; the wire bytes cross the failed GPU's NVLink
    header = fl.run["header_bytes"]
    wire = 8 * MB + -(-8 * MB // (MTU - header)) * header
    assert fl.flows["delivered_bytes"].to_pylist() == [8 * MB]
    got, want = _link_bytes(fl), _link_bytes(pk)
    nic = {g: int(spec.nic_link(g)) for g in range(16)}
    assert all(k != nic[3] for k, _ in got)  # nothing on the failed NIC
    # wire bytes leave the source server (NIC link direction 0: GPU -> ToR) and enter the
    # destination's (direction 1) through NICs, each once (the link table rounds each link's
    # fluid bytes down to whole bytes: up to one short per link)
    s0, s1 = (range(0, 8), range(8, 16)) if src < 8 else (range(8, 16), range(0, 8))
    assert sum(got.get((nic[g], 0), 0) for g in s0) == pytest.approx(wire, abs=8)
    assert sum(got.get((nic[g], 1), 0) for g in s1) == pytest.approx(wire, abs=8)
    if dst == 3:
        # to the failed NIC: 1/7 of the wire bytes on each rail but 3's (the round-robin spread)
        for g in (*range(8, 16), *range(0, 8)):
            d = 0 if g >= 8 else 1
            assert got.get((nic[g], d), 0) == pytest.approx(0 if g % 8 == 3 else wire / 7, abs=1), g
    # the packet backend: the same links, each within a frame of the same bytes
    assert got.keys() == want.keys()
    for k, b in want.items():
        assert got[k] == pytest.approx(b, abs=MTU), k
    # and the same completion time (the tolerance of the bulk comparisons in test_flow_backend)
    assert fl.fct_ps[0] == pytest.approx(pk.fct_ps[0], rel=0.10)


def test_failed_nics_flows_finish_in_a_traced_collective():
    # An all-to-all over both servers of RailOptimized(16) with GPU 3's NIC failing while it
    # runs: the ops finish on the flow backend (they did not) and take about what they take
    # in packets.
    fab = rf.topologies.RailOptimized(16)
    spec = fab.to_spec()
    trace = rf.op_trace("all_to_all", range(16), "16MB", "direct")
    runs = {
        b: rf.simulate(fab, trace, backend=b, failures=[(int(spec.nic_link(3)), 5 * US)])
        for b in ("packet", "flow")
    }
    fl, pk = runs["flow"], runs["packet"]
    assert fl.run["ops_done"] == fl.run["ops"] == 1 and not fl.run["unroutable"]
    assert fl.run["reroutes"] > 0
    assert sum(fl.flows["delivered_bytes"].to_pylist()) == sum(fl.flows["size_bytes"].to_pylist())
    assert fl.ops["time_ps"].to_numpy()[0] == pytest.approx(pk.ops["time_ps"].to_numpy()[0], rel=0.10)


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_a_server_with_every_nic_failed_is_reported_unroutable(backend):
    # Every NIC of server 0 fails while GPU 3 sends to GPU 12: nothing can leave the server
    # any more. The run ends (nothing left to do) and says so: incomplete, "unroutable", the
    # stranded flow with end_ps -1; the flow inside the server (NVLink) finishes.
    fab = rf.topologies.RailOptimized(16)
    flows = rf.Flows([3, 0], [12, 1], [8 * MB, 8 * MB])
    sim = rf.Simulation(fab, flows, backend=backend)
    for g in range(8):
        sim.fail_nic(g, at=10 * US)
    sim.run()
    res = sim.results()
    assert not res.complete and res.run["unroutable"]
    assert res.flows["end_ps"].to_pylist()[0] == -1 and res.flows["end_ps"].to_pylist()[1] > 0
    assert "UNROUTABLE" in res.summary()
    if backend == "flow":
        assert sim.engine.counters()["blocked_now"] == 1


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_a_flow_created_toward_a_cut_off_gpu_raises(backend):
    # The send 3 -> 12 is posted after server 0 lost every NIC (it waits for a send inside
    # the server): the engine refuses it, naming the two GPUs, instead of waiting forever.
    fab = rf.topologies.RailOptimized(16)
    spec = fab.to_spec()
    trace = rf.traces.Trace.from_columns(
        op_id=[0, 1],
        stage="train",
        phase="x",
        kind=["send", "send"],
        algorithm="direct",
        ranks=[[0, 1], [3, 12]],
        size_bytes=[8 * MB, 8 * MB],
        deps=[[], [0]],
    )
    failures = [(int(spec.nic_link(g)), 0) for g in range(8)]
    with pytest.raises(rf.SpecError, match="GPU 12 is unreachable from GPU 3"):
        rf.simulate(fab, trace, backend=backend, failures=failures)


def test_paths_follow_the_turn_back_at_the_nvswitch():
    # rf.Forwarding's paths (Forwarding::path: the first frame's, also each flow's
    # ideal_fct_ps) reach GPU 3 whatever rail the first frame takes, its source's own rail
    # (the NVSwitch's turn back) included. They used to stop at the NVSwitch then.
    fab = rf.topologies.RailOptimized(16)
    spec = fab.to_spec()
    fwd = rf.Forwarding(fab)
    fwd.set_link_state(int(spec.nic_link(3)), False)
    gpu = int(spec.gpu_nodes[3])
    into3 = {int(k) for k in spec.links_of(gpu) if spec.links.kind[k] == "nvlink"}
    turns = 0
    for h in range(64):
        ports = fwd.ports(12, 3, h)
        assert int(ports[-1]) // 2 in into3 and int(ports[-1]) % 2 == 1, h  # NVSwitch -> GPU 3
        turns += int(ports[1]) == int(ports[0]) ^ 1  # back to GPU 12 at once
    assert 0 < turns < 64
