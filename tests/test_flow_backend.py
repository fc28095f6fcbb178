"""backend="flow": max-min fair rates against exact solutions, conservation, determinism,
agreement with the packet backend on bulk collectives, and topology changes mid-run."""

import numpy as np
import pyarrow.compute as pc
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric.spec import CircuitTable

G = 1e9
MB = 10**6


class LoneGpus(rf.Topology):
    """GPUs outside any server on a chain of packet switches: ``attach[g]`` is GPU g's switch,
    ``nic_gbps[g]`` its NIC rate, ``chain_gbps[i]`` the rate of the link from switch i to i+1."""

    family = "flow_lone_gpus_test"

    def __init__(self, attach, nic_gbps, chain_gbps):
        super().__init__(len(attach), "200Gbps", gpus_per_server=1)
        self.attach, self.nic_gbps, self.chain_gbps = attach, nic_gbps, chain_gbps

    def build(self, net):
        gpu = net.add_nodes("gpu", self.gpus)
        sw = net.add_nodes("eps", len(self.chain_gbps) + 1, prefix="sw")
        for g in range(self.gpus):
            net.add_links(gpu[g], sw[self.attach[g]], rate=int(self.nic_gbps[g] * G), kind="nic")
        for i, r in enumerate(self.chain_gbps):
            net.add_links(sw[i], sw[i + 1], rate=int(r * G), kind="chain")


def rates_at_start(fab, flows, **kw):
    """Each flow's max-min rate (bit/s, wire bytes) once all have started."""
    sim = rf.Simulation(fab, flows, backend="flow", **kw)
    sim.run("1us")
    return sim.engine.flow_rates()


def reference_max_min(paths, capacity):
    """Progressive filling written out plainly: raise every unfrozen flow's rate together
    until a link fills; freeze the flows through it; repeat."""
    n = len(paths)
    rate = np.zeros(n)
    frozen = np.zeros(n, bool)
    left = dict(capacity)
    while not frozen.all():
        users = {}
        for i in np.flatnonzero(~frozen):
            for p in paths[i]:
                users.setdefault(p, []).append(i)
        share, port = min((left[p] / len(u), p) for p, u in users.items())
        for i in users[port]:
            rate[i] = share
            frozen[i] = True
            for p in paths[i]:
                left[p] -= share
    return rate


def test_dumbbell_is_the_exact_max_min():
    # GPUs 0-3 on switch 0, 4-7 on switch 1, a 100 Gb/s trunk; GPU 3's NIC is 10 Gb/s.
    # Left to right: GPU 3 keeps its 10, the other three share the remaining 90; right to
    # left the lone flow takes the whole trunk.
    nic = [200, 200, 200, 10, 200, 200, 200, 200]
    fab = LoneGpus([0, 0, 0, 0, 1, 1, 1, 1], nic, [100])
    flows = rf.Flows([0, 1, 2, 3, 4], [4, 5, 6, 7, 0], [100 * MB] * 5)
    r = rates_at_start(fab, flows) / G
    np.testing.assert_allclose(r, [30, 30, 30, 10, 100], rtol=1e-12)


def test_parking_lot_is_the_exact_max_min():
    # Switches 0-1-2-3 joined by 100, 60 and 100 Gb/s; one flow end to end and one per link.
    # The 60 Gb/s link splits evenly (30 + 30); the short flows on the outer links take
    # what the long flow leaves (70).
    fab = LoneGpus([0, 3, 0, 1, 1, 2, 2, 3], [200] * 8, [100, 60, 100])
    flows = rf.Flows([0, 2, 4, 6], [1, 3, 5, 7], [100 * MB] * 4)
    r = rates_at_start(fab, flows) / G
    np.testing.assert_allclose(r, [30, 70, 30, 70], rtol=1e-12)


@pytest.mark.parametrize("oversubscription", [1, 3])
def test_fat_tree_permutation_is_the_exact_max_min(oversubscription):
    # A random GPU derangement (D-mod-K collides on uplinks) on the 128-GPU fat-tree: every
    # flow's rate is the max-min solution over its forwarding path, computed independently.
    fab = rf.topologies.FatTree(128, oversubscription=oversubscription)
    rng = np.random.default_rng(7)
    while True:
        dst = rng.permutation(128)
        if np.all(dst != np.arange(128)):
            break
    flows = rf.Flows(np.arange(128), dst, [64 * MB] * 128)
    got = rates_at_start(fab, flows, lossless=False)  # (lossy: no PFC input shares)
    fwd = rf.Forwarding(fab)
    spec = fab.to_spec()
    paths = [fwd.ports(s, d).tolist() for s, d in zip(range(128), dst, strict=True)]
    cap = {p: float(spec.links.rate_bps[p // 2]) for path in paths for p in path}
    want = reference_max_min(paths, cap)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert len(np.unique(np.round(want / G, 6))) > 1  # not every flow at one rate


def test_lone_flow_and_headers_match_the_packet_backend():
    # A lone flow: its time is its wire bytes (payload + a header per frame) at the
    # bottleneck plus the path's latencies and store-and-forward; the packet engine's lone
    # RoCE flow (which starts at line rate) is the oracle. DCTCP's slow start makes its lone
    # flow 2% slower in packets, which the flow model does not have. Both backends take the
    # transport's header size.
    fab = LoneGpus([0, 1], [200, 200], [100])
    for transport in ("roce", "dctcp"):
        flows = rf.Flows([0], [1], [8 * MB])
        pk = rf.simulate(fab, flows, transport=transport)
        fl = rf.simulate(fab, flows, transport=transport, backend="flow")
        assert fl.run["header_bytes"] == pk.run["header_bytes"]
        assert fl.run["lossless"] == pk.run["lossless"]
        frames = -(-8 * MB // (9216 - fl.run["header_bytes"]))
        wire = 8 * MB + frames * fl.run["header_bytes"]
        assert fl.links["bytes"].to_numpy()[0] == wire  # GPU 0 -> switch 0
        if transport == "roce":
            assert fl.fct_ps[0] == pytest.approx(pk.fct_ps[0], rel=1e-4)


def test_bytes_are_conserved_on_every_port():
    # Every port carries exactly the wire bytes of the flows whose paths cross it, at the end
    # and part-way (the fluid integrated over every rate change); every finished flow
    # delivered its payload.
    fab = rf.topologies.FatTree(64, oversubscription=3)
    rng = np.random.default_rng(3)
    n = 200
    src = rng.integers(0, 64, n)
    dst = (src + rng.integers(1, 64, n)) % 64
    size = rng.integers(1, 8 * MB, n)
    start = rng.integers(0, 200_000_000, n)
    flows = rf.Flows(src, dst, size, start)
    sim = rf.Simulation(fab, flows, backend="flow")
    sim.run("150us")
    sent = sim.delivered_bytes()
    assert np.all((sent >= 0) & (sent <= size)) and 0 < sent.sum() < size.sum()
    sim.run()
    res = sim.results()
    assert res.complete and not res.run["unroutable"]
    np.testing.assert_array_equal(res.flows["delivered_bytes"].to_numpy(), size)
    header = res.run["header_bytes"]
    wire = size + -(-size // (9216 - header)) * header
    fwd = rf.Forwarding(fab)
    want = np.zeros(2 * fab.to_spec().num_links)
    for s, d, w in zip(src, dst, wire, strict=True):
        want[fwd.ports(int(s), int(d))] += w
    got = np.zeros_like(want)
    links = res.links
    got[2 * links["link_id"].to_numpy() + links["direction"].to_numpy()] = links["bytes"].to_numpy()
    np.testing.assert_allclose(got, want, atol=1)
    assert res.links["packets"].null_count == len(res.links)  # packet-only: null
    for key in rf.results.PACKET_ONLY_RUN_KEYS:
        assert res.run[key] is None, key


def test_same_seed_same_results():
    trace = tiny_rl_trace(iterations=1)
    fab = rf.topologies.RFabric(64)
    a = rf.simulate(fab, trace, backend="flow", seed=5)
    b = rf.simulate(fab, trace, backend="flow", seed=5)
    assert a.flows.equals(b.flows) and a.ops.equals(b.ops) and a.links.equals(b.links)
    assert a.run["events"] == b.run["events"] and a.run["makespan_ps"] > 0
    # flow hashing depends on the seed: another seed takes other paths
    flows = rf.Flows.permutation(128, 16 * MB, seed=2)
    ft = rf.topologies.FatTree(128)
    runs = [rf.simulate(ft, flows, backend="flow", ecmp="flow", seed=s).fct_ps for s in (1, 1, 2)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_a_trace_keeps_only_the_flows_alive_and_folds_per_op_totals():
    trace = tiny_rl_trace(iterations=1)
    fab = rf.topologies.RFabric(64)
    a = rf.simulate(fab, trace, backend="flow", seed=5)
    b = rf.simulate(fab, trace, backend="flow", seed=5, record_flows=True)
    assert a.flows.num_rows == 0 and not a.run["flows_recorded"] and b.run["flows_recorded"]
    assert a.ops.equals(b.ops) and a.stages.equals(b.stages) and a.links.equals(b.links)
    n = a.run["flows"]
    assert n == b.run["flows"] == b.flows.num_rows == a.run["flows_done"]
    assert 0 < a.run["peak_live_flows"] == b.run["peak_live_flows"] < n / 10  # slots reused
    np.testing.assert_array_equal(b.flows["flow_id"].to_numpy(), np.arange(n))  # ids: creation order
    # the per-op totals folded in C++ are the per-flow table's
    f = b.flows
    ops = b.ops
    row = {int(o): i for i, o in enumerate(ops["op_id"].to_numpy())}
    at = np.array([row[int(o)] for o in f["op_id"].to_numpy()])
    k = len(ops)
    np.testing.assert_array_equal(ops["flows"].to_numpy(), np.bincount(at, minlength=k))
    delivered = np.bincount(at, weights=f["delivered_bytes"].to_numpy(), minlength=k)
    np.testing.assert_array_equal(ops["delivered_bytes"].to_numpy(), delivered.astype(np.int64))
    fct = np.full(k, -1, dtype=np.int64)
    np.maximum.at(fct, at, f["fct_ps"].to_numpy())
    np.testing.assert_array_equal(ops["max_fct_ps"].to_numpy(), fct)
    assert ops["retransmits"].null_count == k  # packet-only


def test_ring_slices_keep_the_ring_pace_with_fewer_flows():
    fab = rf.topologies.RFabric(64)
    for bad in (-1, 1.5, True, "4"):
        with pytest.raises(rf.SpecError, match="flow_ring_slices"):
            rf.simulate(
                fab, rf.op_trace("all_reduce", range(64), 64 * MB), backend="flow", flow_ring_slices=bad
            )
    # 16 ranks on 8 servers, 8 MiB per ring step: 16 slices of 512 KiB
    trace = rf.op_trace("all_reduce", range(0, 64, 4), rf.units.parse_size("1GiB"))
    exact = rf.simulate(fab, trace, backend="flow", flow_ring_slices=0)
    runs = [rf.simulate(fab, trace, backend="flow", flow_ring_slices=k) for k in (2, 4)]
    t0 = exact.ops["time_ps"].to_numpy()[0]
    for res in runs:
        assert res.run["flows"] < exact.run["flows"] / 3
        assert res.ops["time_ps"].to_numpy()[0] == pytest.approx(t0, rel=1e-3)
    # the default is 4; the packet backend ignores it
    assert rf.simulate(fab, trace, backend="flow").ops.equals(runs[1].ops)


@pytest.mark.parametrize(
    ("gpus", "kind", "size"),
    [
        (64, "all_reduce", "64MiB"),
        (128, "all_reduce", "64MiB"),
        (64, "all_to_all", "64MiB"),
        (128, "all_to_all", "32MiB"),
    ],
)
def test_bulk_collectives_within_ten_percent_of_packets(gpus, kind, size):
    fab = rf.topologies.FatTree(gpus)
    # the all-reduce as a ring (whose channels the flow backend merges): with the NCCL model the
    # tuner would take the tree at 64 MiB on 128 GPUs, the ring's 254 steps of latency in mind
    algorithm = "ring" if kind == "all_reduce" else "auto"
    trace = rf.op_trace(kind, range(gpus), rf.units.parse_size(size), algorithm)
    pk = rf.simulate(fab, trace).ops["time_ps"].to_numpy()[0]
    fl = rf.simulate(fab, trace, backend="flow")
    assert fl.run["backend"] == "flow" and fl.run["events"] < rf.simulate(fab, trace).run["events"] / 5
    assert fl.ops["time_ps"].to_numpy()[0] == pytest.approx(pk, rel=0.10)


def test_circuit_change_and_failures_mid_run_on_rfabric_finish():
    # Cross-ToR traffic on RFabric (PXN off: it crosses circuits); a third of the way in a
    # NIC and a ToR-OCS port fail and the circuits are re-paired with a 50 us dark time. The
    # flows re-route around the changes, those that need a dark circuit wait for its light,
    # and every flow finishes. (Here the changes shorten the permutation, 1.95 -> 1.68 ms;
    # the packet backend agrees on the direction, 2.68 -> 2.33 ms: the failures move flows
    # off colliding paths.)
    fab = rf.topologies.RFabric(128, pxn=False)
    spec = fab.to_spec()
    flows = rf.Flows.permutation(128, 8 * MB, seed=4)
    healthy = rf.simulate(fab, flows, backend="flow")
    t = healthy.run["makespan_ps"] // 3
    sim = rf.Simulation(fab, flows, backend="flow", t_ocs="50us")
    sim.run(t)
    sim.fail_nic(3, at=sim.now)
    plan = sim.current_circuits()
    keep = plan.a != spec.circuits.a[0]
    sim.fail_link(int(spec.circuits.a[0]), at=sim.now)
    # re-pair: rotate the b ends of the first 8 remaining circuits among themselves
    a, b, ocs = plan.a[keep], plan.b[keep].copy(), plan.ocs[keep]
    same = np.flatnonzero(ocs == ocs[0])[:8]
    b[same] = np.roll(b[same], 1)
    sim.apply_circuits(CircuitTable.build(ocs, a, b), at=sim.now)
    sim.run()
    res = sim.results()
    assert res.complete and not res.run["unroutable"]
    assert res.run["reroutes"] > 0 and len(res.circuits) == 1
    assert res.run["makespan_ps"] != healthy.run["makespan_ps"]


class TwoToRs(rf.Topology):
    """Two ToRs, one GPU each, joined through one OCS by two ports each (test_optical's)."""

    family = "flow_two_tors_test"

    def __init__(self):
        super().__init__(gpus=2, link="200Gbps", gpus_per_server=1)

    def build(self, net):
        gpu = net.add_servers(2, 1)
        tor = net.add_nodes("eps", 2, prefix="tor")
        ocs = net.add_nodes("ocs", 1, prefix="ocs")
        net.add_links(gpu.ravel(), tor, rate=self.link_bps, kind="nic")
        self.up0 = net.add_links(tor[0], np.repeat(ocs, 2), rate=self.link_bps, kind="tor-ocs")
        self.up1 = net.add_links(tor[1], np.repeat(ocs, 2), rate=self.link_bps, kind="tor-ocs")
        self.ocs = int(ocs[0])
        net.add_circuits(self.ocs, self.up0[0], self.up1[0])


@pytest.mark.parametrize("dark_us", [10, 100, 1000])
def test_a_flow_waits_out_a_dark_circuit(dark_us):
    # The only circuit is replaced by one on other ports: the flow has no path for exactly
    # the dark time (rate 0, unroutable while it lasts), then goes on at full rate.
    fab = TwoToRs()
    flows = rf.Flows([0], [1], [20 * MB])
    base = rf.simulate(fab, flows, backend="flow").fct_ps[0]
    sim = rf.Simulation(fab, flows, backend="flow")
    sim.run("30us")
    sim.apply_circuits(
        CircuitTable.build([fab.ocs], [fab.up0[1]], [fab.up1[1]]), at=sim.now, t_ocs=f"{dark_us}us"
    )
    sim.run(sim.now + dark_us * 1_000_000 // 2)
    assert sim.engine.flow_rates()[0] == 0 and sim.results().run["blocked_subflows"] == 1
    sim.run()
    res = sim.results()
    assert res.complete and res.run["reroutes"] == 2
    assert abs(res.fct_ps[0] - base - dark_us * 1_000_000) <= 2


def test_controller_and_sweep_run_on_the_flow_backend():
    trace = tiny_rl_trace(iterations=1)
    fab = rf.topologies.RFabric(64)
    pk = rf.simulate(fab, trace, controller=fab.controller())
    fl = rf.simulate(fab, trace, controller=fab.controller(), backend="flow")
    assert fl.run["controller_calls"] == pk.run["controller_calls"] > 0
    assert fl.run["ops_done"] == fl.run["ops"]
    table = rf.sweep(
        fabrics=["FT"],
        links=["200Gbps"],
        gpus=[64],
        workload=trace,
        settings={"backend": "flow"},
        progress=False,
        out=None,  # (not into the working directory)
    )
    assert table["complete"].to_pylist() == [True] and table["packets"].null_count == 1


def test_a_failed_nic_spreads_its_flow_over_the_servers_other_nics():
    # GPU 3's NIC is down: its frames cross NVLink and leave through the 7 other NICs of its
    # server, frame by frame (round-robin, as the packet engine relays them), and the flow is
    # paced at its own NIC's rate: 200 Gb/s in all, 1/7 of its wire bytes on each other NIC.
    # (Its paths cross more ports than a subflow keeps in its record: the hops beside it.)
    fab = rf.topologies.FatTree(16)
    spec = fab.to_spec()
    flows = rf.Flows([3], [12], [70 * MB])
    sim = rf.Simulation(fab, flows, backend="flow")
    sim.fail_nic(3, at=0)
    sim.run("1us")
    assert sim.engine.flow_rates()[0] == pytest.approx(200e9, rel=1e-12)
    sim.run()
    res = sim.results()
    assert res.complete
    links = res.links
    up = links.filter(pc.equal(links["direction"], 0))  # GPU -> ToR (NIC link rows start at the GPU)
    nic = {g: int(spec.nic_link(g)) for g in range(8)}
    carried = {g: up["bytes"].to_numpy()[up["link_id"].to_numpy() == nic[g]][0] for g in range(8)}
    header = res.run["header_bytes"]
    wire = 70 * MB + -(-70 * MB // (9216 - header)) * header
    assert carried[3] == 0
    for g in (0, 1, 2, 4, 5, 6, 7):
        assert carried[g] == pytest.approx(wire / 7, abs=1), g


def _mixed_trace():
    """Three collectives at once on an 8-GPU LoneGpus chain: a ring all-reduce (one GPU per
    server, so every channel's ring has the same edges and paths, but over the network: a flow
    per channel), a chain broadcast (its channels merged; each edge posts its next chunk as
    the last one leaves: handed over) and an all-to-all."""
    return rf.traces.Trace.from_columns(
        op_id=[0, 1, 2],
        stage="train",
        phase="x",
        kind=["all_reduce", "broadcast", "all_to_all"],
        algorithm=["ring", "chain", "direct"],
        ranks=[[0, 3, 6], [1, 4, 7], [2, 5, 6]],
        size_bytes=[48 * MB, 24 * MB, 12 * MB],
        deps=[[], [], []],
    )


def _mixed_fabric():
    return LoneGpus([0, 0, 0, 1, 1, 1, 2, 2], [200, 100, 200, 200, 50, 200, 200, 200], [150, 80])


def test_merged_channels_and_handoffs_keep_the_exact_max_min():
    # At every instant sampled, each message sending (a merged flow of n copies is n of them)
    # has its max-min rate, computed independently over the forwarding paths.
    # (lossy: under PFC a switch port shares itself among its inputs, tests/test_flow_pfc_inputs.py)
    fab, trace = _mixed_fabric(), _mixed_trace()
    whole = rf.simulate(fab, trace, backend="flow", lossless=False)
    assert whole.run["handoffs"] > 0
    end = whole.run["makespan_ps"]
    fwd = rf.Forwarding(fab)
    spec = fab.to_spec()
    sim = rf.Simulation(fab, trace, backend="flow", lossless=False)
    checked = 0
    for t in np.linspace(end / 50, end * 0.98, 40).astype(np.int64):
        sim.run(int(t))
        rows = sim.engine.sending_flows()
        if len(rows["flow_id"]) == 0:
            continue
        paths = [fwd.ports(int(s), int(d)).tolist() for s, d in zip(rows["src"], rows["dst"], strict=True)]
        cap = {p: float(spec.links.rate_bps[p // 2]) for path in paths for p in path}
        np.testing.assert_allclose(rows["rate_bps"], reference_max_min(paths, cap), rtol=1e-9)
        checked += len(paths)
    assert checked > 100


def test_merged_channels_run_as_the_channels_apart():
    # flow_merge_channels=False runs a flow per channel: the same op times (to 0.1%: apart,
    # the channels sharing a port end one last frame apart, in its turns; a merged flow's
    # copies end together), the same flow counts and bytes, and the merged run makes fewer
    # events. (Per chunk: streamed pipelines make fewer flows either way.)
    fab, trace = _mixed_fabric(), _mixed_trace()
    chunks = {"flow_pipeline_slices": 0}
    merged = rf.simulate(fab, trace, backend="flow", record_flows=True, **chunks)
    apart = rf.simulate(fab, trace, backend="flow", record_flows=True, flow_merge_channels=False, **chunks)
    for col in ("start_ps", "end_ps"):
        np.testing.assert_allclose(merged.ops[col].to_numpy(), apart.ops[col].to_numpy(), rtol=1e-3, atol=2)
    for col in ("flows", "delivered_bytes"):
        assert merged.ops[col].equals(apart.ops[col])
    assert merged.run["flows"] == apart.run["flows"]
    assert merged.run["events"] < 0.8 * apart.run["events"]  # (the chain's 8 channels as one)
    # the per-flow table has a row per message either way
    a, b = merged.flows, apart.flows
    assert a.num_rows == b.num_rows == merged.run["flows"]
    assert sorted(a["size_bytes"].to_pylist()) == sorted(b["size_bytes"].to_pylist())
    assert len(set(a["flow_id"].to_pylist())) == a.num_rows
    # the chain broadcast's 8 channels merge; the ring's do not (its edges cross the network,
    # where the channels leaving one NIC end in its turns, which merged copies cannot)
    for op in (0, 1):
        one = rf.traces.Trace.from_table(trace.table.slice(op, 1))
        runs = [rf.simulate(fab, one, backend="flow", flow_merge_channels=m, **chunks) for m in (True, False)]
        assert runs[0].run["flows"] == runs[1].run["flows"]
        if op == 0:
            assert runs[0].run["events"] == runs[1].run["events"]
        else:
            assert runs[0].run["events"] < runs[1].run["events"] / 4
        assert runs[0].ops["end_ps"][0].as_py() == pytest.approx(runs[1].ops["end_ps"][0].as_py(), rel=2e-3)
    with pytest.raises(rf.SpecError, match="flow_merge_channels"):
        rf.simulate(fab, trace, backend="flow", flow_merge_channels="yes")
