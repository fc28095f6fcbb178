"""Property tests: random fabrics and traffic must always satisfy the engine's invariants."""

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
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
