"""Property tests: random fabrics and traffic must always satisfy the engine's invariants."""

import numpy as np
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import rfabric as rf


class LeafSpine(rf.Topology):
    family = "leaf_spine_prop"

    def __init__(self, gpus, spines, **kw):
        super().__init__(gpus, "100Gbps", gpus_per_server=4, **kw)
        self.spines = spines

    def build(self, net):
        gpu = net.add_servers(self.servers, 4)
        leaf = net.add_nodes("eps", self.servers, prefix="leaf")
        spine = net.add_nodes("eps", self.spines, prefix="spine")
        net.add_links(gpu.ravel(), np.repeat(leaf, 4), rate=self.link_bps, kind="nic")
        net.add_links(
            np.repeat(leaf, self.spines), np.tile(spine, self.servers), rate=self.link_bps, kind="up"
        )


scenario = st.fixed_dictionaries(
    {
        "servers": st.integers(2, 6),
        "spines": st.integers(1, 3),
        "flows": st.lists(
            st.tuples(st.integers(0, 23), st.integers(0, 23), st.integers(0, 300_000), st.integers(0, 50)),
            min_size=1,
            max_size=24,
        ),
        "transport": st.sampled_from(["roce", "dctcp"]),
        "ecmp": st.sampled_from(["dmodk", "flow", "packet", "adaptive"]),
        "buffer": st.sampled_from(["64KiB", "1MiB"]),
        "seed": st.integers(0, 5),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario)
def test_random_fabrics_and_traffic_keep_the_invariants(s):
    gpus = 4 * s["servers"]
    flows = [(a % gpus, b % gpus, size, start) for a, b, size, start in s["flows"] if a % gpus != b % gpus]
    assume(flows)
    src, dst, size, start = (np.array(col) for col in zip(*flows, strict=True))
    fab = LeafSpine(gpus, s["spines"], buffer=s["buffer"] if s["transport"] == "dctcp" else "1MiB")
    res = rf.simulate(
        fab,
        rf.Flows(src, dst, size, start * 1_000_000),
        transport=s["transport"],
        ecmp=s["ecmp"],
        seed=s["seed"],
    )
    r = res.run
    assert res.complete and not r["deadlock"] and not r["unroutable"]
    assert r["packets"] == r["packets_delivered"] + r["drops"] and r["packets_in_flight"] == 0
    assert r["dark_transmits"] == 0
    assert np.array_equal(res.flows["delivered_bytes"].to_numpy(), size)
    assert np.all(res.flows["end_ps"].to_numpy() >= res.flows["start_ps"].to_numpy())
    links = res.links
    if s["transport"] == "roce":
        assert r["drops"] == 0
        assert np.all(links["max_ingress_bytes"].to_numpy() <= links["buffer_bytes"].to_numpy())
    else:
        assert np.all(links["max_queue_bytes"].to_numpy() <= links["buffer_bytes"].to_numpy())
    # no link carried more than its rate allows over the run
    assert np.all(links["busy_ps"].to_numpy() <= max(r["sim_ps"], r["makespan_ps"]))


def assert_conserved(eng):
    """Packets and payload are conserved now: every frame sent was delivered, dropped or is
    still in the fabric, and per flow sent + resent = delivered + duplicate + dropped + in
    flight, with delivered <= sent <= size."""
    c = eng.counters()
    assert c["packets"] == c["packets_delivered"] + c["drops"] + c["packets_in_flight"]
    log = eng.flow_log()
    inflight = eng.payload_in_flight()
    assert np.all(inflight >= 0)
    out = log["sent_bytes"] + log["resent_bytes"]
    back = log["delivered_bytes"] + log["duplicate_bytes"] + log["dropped_bytes"] + inflight
    bad = np.flatnonzero(out != back)
    assert not bad.size, f"t={eng.now}: flow {bad[0]} sent {out[bad[0]]} B, accounted for {back[bad[0]]} B"
    assert np.all((log["delivered_bytes"] >= 0) & (log["delivered_bytes"] <= log["sent_bytes"]))
    assert np.all(log["sent_bytes"] <= log["size_bytes"])


def assert_links_within_rate(times_ps, tx_bytes, rate_bps, frame_bytes):
    """Bytes a port started sending in any window (t_i, t_j] between two samples are at most
    rate x (t_j - t_i) + one frame. (Frames are counted when they start; those that started
    in the window serialise one after another, all but the last inside it.) Checked over
    every pair of samples at once: with s = tx - rate * t, max over i < j of s_j - s_i."""
    t = np.asarray(times_ps, dtype=np.float64)[:, None]
    s = np.asarray(tx_bytes, dtype=np.float64) - rate_bps[None, :] * t / 8e12
    excess = s[1:] - np.minimum.accumulate(s, axis=0)[:-1]
    j, port = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess[j, port] <= frame_bytes + 1e-3, (
        f"port {port} sent {excess[j, port] - frame_bytes:.1f} B beyond its rate plus one frame in a "
        f"window ending at {times_ps[j + 1]} ps"
    )


def run_in_epochs(sim, step_ps, check):
    """Run to idle in epochs of step_ps (doubled every 100 epochs, so that a run stretched by
    DCTCP timeouts stays cheap), calling check() at the start and after every epoch."""
    check()
    epochs = 0
    while not sim.done:
        sim.run(until=sim.now + step_ps)
        check()
        epochs += 1
        if epochs % 100 == 0:
            step_ps *= 2


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario,
    st.sampled_from([4096, 9216]),
    st.sampled_from([300_000, 1_000_000, 3_000_000]),
    st.one_of(st.none(), st.tuples(st.integers(0, 17), st.integers(0, 60))),
)
def test_windowed_invariants_hold_at_every_epoch(s, mtu, step_ps, failure):
    gpus = 4 * s["servers"]
    flows = [(a % gpus, b % gpus, size, start) for a, b, size, start in s["flows"] if a % gpus != b % gpus]
    assume(flows)
    src, dst, size, start = (np.array(col) for col in zip(*flows, strict=True))
    fab = LeafSpine(gpus, s["spines"], buffer=s["buffer"] if s["transport"] == "dctcp" else "1MiB")
    sim = rf.Simulation(
        fab,
        rf.Flows(src, dst, size, start * 1_000_000),
        transport=s["transport"],
        ecmp=s["ecmp"],
        seed=s["seed"],
        mtu_bytes=mtu,
    )
    if failure is not None:  # an uplink fails mid-run: drops (lossy) or held frames (lossless)
        uplink, at_us = failure
        sim.fail_link(gpus + uplink % (s["servers"] * s["spines"]), at=at_us * 1_000_000)
    rate = sim.engine.port_stats()["rate_bps"].astype(np.float64)
    times, tx = [], []

    def check():
        assert_conserved(sim.engine)
        times.append(sim.now)
        tx.append(sim.engine.port_stats()["tx_bytes"])

    run_in_epochs(sim, step_ps, check)
    assert_links_within_rate(times, tx, rate, mtu)
    c = sim.engine.counters()
    assert c["busy_starts"] == 0 and c["dark_transmits"] == 0
    if failure is None:
        assert np.array_equal(sim.engine.flow_log()["delivered_bytes"], size)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 400_000), st.integers(0, 30)),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 3),
)
@example([(2, 0, 95_748, 17), (6, 0, 316_675, 4)], 1)  # sent a frame past a flow's end (test_engine)
def test_dctcp_over_nvlink_with_drops_delivers_every_byte_once(flows, seed):
    # Intra-server DCTCP into shallow buffers: drops, fast retransmits, go-back-N and ACKs
    # that cover a whole flow while it still holds a NIC slot.
    flows = [f for f in flows if f[0] != f[1]]
    assume(flows)
    src, dst, size, start = (np.array(col) for col in zip(*flows, strict=True))
    fab = rf.topologies.FatTree(gpus=16, buffer="64KiB")
    sim = rf.Simulation(fab, rf.Flows(src, dst, size, start * 100_000), transport="dctcp", seed=seed)
    run_in_epochs(sim, 500_000, lambda: assert_conserved(sim.engine))
    log = sim.engine.flow_log()
    assert np.array_equal(log["delivered_bytes"], size) and np.array_equal(log["sent_bytes"], size)
    assert sim.engine.counters()["busy_starts"] == 0


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 64),
    st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]),
    st.sampled_from(["auto", "ring", "direct", "tree", "chain"]),
    st.integers(1, 3 << 20),
)
def test_random_collectives_complete_with_exact_dependencies(n_ranks, kind, algorithm, size):
    from rfabric.traces import Trace

    valid = {
        "all_reduce": {"auto", "ring", "tree"},
        "all_gather": {"auto", "ring", "direct"},
        "reduce_scatter": {"auto", "ring", "direct"},
        "all_to_all": {"auto", "ring", "direct"},
        "broadcast": {"auto", "direct", "tree", "chain"},
    }
    assume(algorithm in valid[kind])
    ranks = [int(r) for r in np.random.default_rng(n_ranks + size).permutation(64)[:n_ranks]]
    trace = Trace.from_columns(
        op_id=[0, 1],
        iteration=[0, 0],
        stage=["x", "x"],
        phase=["a", "b"],
        kind=[kind] * 2,
        ranks=[ranks, ranks],
        size_bytes=[size, size // 2],
        algorithm=[algorithm] * 2,
        deps=[[], [0]],
        compute_ps=[3_000, 5_000],
        period=[0, 0],
    )
    res = rf.simulate(rf.topologies.FatTree(64), trace)
    ops = res.ops.to_pylist()
    assert res.run["ops_done"] == 2 and res.run["drops"] == 0
    assert ops[0]["start_ps"] == 3_000 and ops[1]["start_ps"] == ops[0]["end_ps"] + 5_000
