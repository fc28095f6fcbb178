"""Bad input raises rf.SpecError (a ValueError) naming the offending value; nothing aborts."""

from pathlib import Path

import numpy as np
import pytest

import rfabric as rf
from rfabric.spec import LinkTable, NetworkSpec, NodeTable


def raises(match, fn, *args, **kw):
    with pytest.raises(rf.SpecError, match=match) as err:
        fn(*args, **kw)
    assert isinstance(err.value, ValueError)
    return err.value


@pytest.fixture(scope="module")
def fab():
    return rf.topologies.FatTree(gpus=16)


def test_gpu_that_does_not_exist(fab):
    raises(
        r"flow 1: dst 99 is not a GPU of fat_tree-16 \(it has GPUs 0..15\)",
        rf.simulate,
        fab,
        rf.Flows([0, 1], [2, 99], 100),
    )
    raises(r"flow 0: src 16 is not a GPU", rf.simulate, fab, rf.Flows([16], [0], 100))


def test_negative_size_and_start():
    raises(r"flow 1: negative size_bytes -5", rf.Flows, [0, 1], [1, 2], [10, -5])
    raises(r"flow 0: negative start_ps -1", rf.Flows, [0], [1], 10, start_ps=-1)
    raises(r"flow 0: src and dst are both GPU 3", rf.Flows, [3], [3], 10)
    raises(r"'size_bytes' must hold integers", rf.Flows, [0], [1], [1.5])


def test_permutation_of_too_few_gpus():
    raises(r"Flows.permutation: a derangement needs at least 2 GPUs, got 1", rf.Flows.permutation, 1, 100)
    raises(r"Flows.permutation: gpus must be an integer >= 1, got 0", rf.Flows.permutation, 0, 100)
    raises(r"gpus must be an integer >= 1, got 2.0", rf.Flows.permutation, 2.0, 100)
    assert len(rf.Flows.permutation(1, 100, derangement=False)) == 0  # the identity: nobody sends
    some = rf.Flows.permutation(64, 100, seed=1, derangement=False)
    assert 0 < len(some) < 64 and not np.any(some.src == some.dst)
    two = rf.Flows.permutation(2, 100)
    assert list(two.dst) == [1, 0]


def test_malformed_rate_and_time_strings():
    raises(r"rate '200Gigs' is malformed", rf.topologies.FatTree, 16, link="200Gigs")
    raises(r"time '1 fortnight' is malformed", rf.topologies.FatTree, 16, link_latency="1 fortnight")
    raises(r"rate '0Gbps' must be positive", rf.topologies.FatTree, 16, link="0Gbps")


def test_bad_fat_tree_parameters():
    raises(r"gpus=12 is not a multiple of gpus_per_server=8", rf.topologies.FatTree, 12)
    raises(r"gpus must be an integer >= 1, got 0", rf.topologies.FatTree, 0)
    raises(r"radix must be an even integer >= 4, got 15", rf.topologies.FatTree, 16, radix=15)
    raises(r"gpus=2048 exceeds the capacity of radix=16", rf.topologies.FatTree, 2048, radix=16)
    raises(r"oversubscription must be an integer >= 1, got 0", rf.topologies.FatTree, 16, oversubscription=0)
    raises(r"radix=16 cannot be split 2:1", rf.topologies.FatTree, 16, radix=16, oversubscription=2)


def _tables(nodes_override=None, links_override=None):
    # 2 GPUs on 2 servers, each NIC to its own switch, switches joined: a valid network
    nodes = dict(
        kind=["gpu", "gpu", "eps", "eps"],
        name=["g0", "g1", "s0", "s1"],
        server=[0, 1, -1, -1],
        latency_ps=[0, 0, 800_000, 800_000],
    )
    links = dict(
        src=[0, 1, 2],
        dst=[2, 3, 3],
        rate_bps=200 * 10**9,
        latency_ps=10**6,
        buffer_bytes=1 << 20,
        kind=["nic", "nic", "sw"],
    )
    nodes.update(nodes_override or {})
    links.update(links_override or {})
    return NodeTable.build(**nodes), LinkTable.build(**links)


def test_valid_hand_built_spec_simulates():
    spec = NetworkSpec.from_tables(*_tables(), name="tiny")
    res = rf.simulate(spec, rf.Flows([0], [1], 10_000))
    assert res.complete


N, L = "nodes", "links"


@pytest.mark.parametrize(
    "table,override,match",
    [
        (L, dict(dst=[2, 3, 7]), r"link 2: dst 7 is not a node \(there are 4\)"),
        (L, dict(dst=[2, 3, 2]), r"link 2 connects node 2 \(s0\) to itself"),
        (L, dict(rate_bps=[1, 0, 1]), r"link 1: rate_bps must be positive, got 0"),
        (L, dict(latency_ps=[-1, 0, 0]), r"link 0: latency_ps must be non-negative, got -1"),
        (N, dict(name=["g0", "g0", "s0", "s1"]), r"node name 'g0' is used twice"),
        (L, dict(src=[0, 1, 0], dst=[2, 3, 3]), r"gpu node 0 \(g0\) has 2 NIC links"),
        (L, dict(src=[0, 1], dst=[2, 3], kind=["nic", "nic"]), r"GPU 1 \(g1\) cannot reach GPU 0 \(g0\)"),
    ],
)
def test_inconsistent_topology_tables(table, override, match):
    nodes, links = _tables(**{f"{table}_override": override})
    raises(match, NetworkSpec.from_tables, nodes, links, name="tiny")


def test_nvswitch_joining_two_servers():
    nodes, links = _tables(
        dict(kind=["gpu", "gpu", "nvswitch", "eps"], server=[0, 1, 0, -1]),
        dict(src=[0, 1, 0, 1], dst=[2, 2, 3, 3], kind=["nvlink", "nvlink", "nic", "nic"]),
    )
    match = r"node 1 \(g1\) \(server 1\) links to node 2 \(s0\) of server 0"
    raises(match, NetworkSpec.from_tables, nodes, links, name="tiny")


def test_unknown_node_kind():
    raises(r"node 3 \(s1\): unknown kind 'router'", _tables, dict(kind=["gpu", "gpu", "eps", "router"]))


def test_inconsistent_columns():
    raises(r"column 'dst': has 2 rows, expected 3", LinkTable.build, [0, 1, 2], [1, 2], 1, 1, 1, "x")
    raises(r"column 'src': expected integers", LinkTable.build, [0.5], [1], 1, 1, 1, "x")


def test_bad_engine_settings(fab):
    flows = rf.Flows([0], [9], 1000)
    raises(r"unknown transport 'tcp' \(known: roce, dctcp\)", rf.simulate, fab, flows, transport="tcp")
    raises(r"unknown engine setting .mtu.; did you mean .mtu_bytes.", rf.simulate, fab, flows, mtu=1500)
    raises(
        r"rfabric.EngineConfig: unknown engine setting .mtu.; did you mean .mtu_bytes.",
        rf.EngineConfig,
        mtu=1500,
    )
    raises(
        r"backend: unknown backend 'flw' \(allowed: 'packet', 'flow'\)",
        rf.simulate,
        fab,
        flows,
        backend="flw",
    )
    raises(
        r"controller must be an rfabric.controllers.Controller .* got object",
        rf.Simulation,
        fab,
        flows,
        controller=object(),
    )
    raises(
        r"controller UniformController: a controller needs a trace workload .* got Flows",
        rf.Simulation,
        fab,
        flows,
        controller=rf.controllers.UniformController(),
    )
    raises(r"mtu_bytes 100 is outside \[256, 65536\]", rf.simulate, fab, flows, mtu_bytes=100)
    raises(
        r"ecn_kmax \(1us\) is below ecn_kmin \(2us\)", rf.simulate, fab, flows, ecn_kmin="2us", ecn_kmax="1us"
    )
    raises(
        r"header_bytes 9216 must be smaller than mtu_bytes 9216", rf.simulate, fab, flows, header_bytes=9216
    )
    raises(r"seed must be an integer >= 0", rf.simulate, fab, flows, seed=-1)
    # integers beyond the engine's C++ fields are named, not refused by pybind's cast
    raises(
        r"EngineConfig.dcqcn_f must be an integer in 1..2147483647, got 2147483648",
        rf.simulate,
        fab,
        flows,
        dcqcn_f=2**31,
    )
    raises(
        r"coll_channels must be an integer in 1..2147483647, got 2147483648",
        rf.simulate,
        fab,
        flows,
        coll_channels=2**31,
    )
    raises(r"expected a Topology or NetworkSpec, got str", rf.simulate, "fat_tree", flows)


def test_circuit_tables_made_around_build_are_checked():
    from rfabric.spec import CircuitTable

    raises(r"column 'a': expected integers, got float64", CircuitTable, ocs=[1], a=[2.5], b=[3])
    raises(r"column 'b': has 2 rows, expected 1", CircuitTable, ocs=[1], a=[2], b=[3, 4])
    raises(r"column 'ocs': expected a 1-d array", CircuitTable, ocs=[[1]], a=[2], b=[3])
    plan = CircuitTable(ocs=[1], a=[2], b=[3])  # lists become int64 columns
    assert plan.a.dtype == np.int64 and len(plan) == 1


def test_buffer_too_small_for_pfc_headroom():
    fab = rf.topologies.FatTree(gpus=16, buffer="16KiB")
    raises(r"buffer 16384 B leaves no room for PFC headroom", rf.simulate, fab, rf.Flows([0], [9], 1000))
    # lossy is fine with the same buffer
    assert rf.simulate(fab, rf.Flows([0], [9], 100_000), transport="dctcp").complete


def test_link_failure_arguments(fab):
    sim = rf.Simulation(fab, rf.Flows([0], [9], 1000))
    raises(r"link 99999 does not exist", sim.fail_link, 99999)
    sim.run("10us")
    raises(r"is in the past", sim.set_link_state, 0, "1us", False)
    # strict types: no truncation of 2.9 to link 2, no "no" read as up
    raises(r"link must be an integer, got 2.9", sim.fail_link, 2.9)
    raises(r"link must be an integer, got '2'", sim.fail_link, "2")
    raises(r"up must be True or False, got 'no'", sim.set_link_state, 0, "20us", "no")
    raises(r"GPU must be an integer, got 1.5", sim.fail_nic, 1.5)
    raises(
        r"lossless must be True or False, got 'no'", rf.simulate, fab, rf.Flows([0], [9], 1000), lossless="no"
    )
    raises(r"failures: expected an iterable", rf.simulate, fab, rf.Flows([0], [9], 1000), failures=5)


def test_presets_and_loader_errors(tmp_path):
    raises(r"no such topology file", rf.topologies.load, tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('family = "fat_tree"\n[params]\ngpus = 16\nlinks = "200Gbps"\n')
    raises(
        r"bad.toml: \[params\] of family 'fat_tree': unknown parameter 'links'; did you mean 'link'\?",
        rf.topologies.load,
        bad,
    )
    # a typo of a top-level table used to be ignored: the fabric got every default
    bad.write_text('family = "fat_tree"\n[parms]\ngpus = 16\n')
    raises(r"bad.toml: unknown key 'parms'; did you mean 'params'\?", rf.topologies.load, bad)
    bad.write_text('family = "torus"\n')
    raises(r"field 'family' is 'torus'", rf.topologies.load, bad)
    bad.write_text('family = "fat_tree"\n[params]\ngpus = 20\n')
    raises(r"bad.toml: FatTree: gpus=20 is not a multiple", rf.topologies.load, bad)
    bad.write_text("family = = 3")
    raises(r"not valid TOML", rf.topologies.load, bad)


def test_errors_from_the_engine_are_spec_errors(fab):
    # checks done in C++ surface as the same Python exception type
    from rfabric import _engine

    with pytest.raises(rf.SpecError, match="network spec: missing array 'link_src'"):
        arrays = dict(fab.to_spec().arrays())
        del arrays["link_src"]
        _engine.Engine(arrays, {})
    with pytest.raises(rf.SpecError, match="engine config: unknown field 'bogus'"):
        _engine.Engine(fab.to_spec().arrays(), {"bogus": 1})
    with pytest.raises(rf.SpecError, match="dctcp_max_timeouts must be at least 1, got 0"):
        _engine.Engine(
            fab.to_spec().arrays(),
            {**rf.simulation.EngineConfig().to_engine(), "transport": "dctcp", "dctcp_max_timeouts": 0},
        )
    # a workload and plain flows do not mix, in either order
    trace = rf.traces.read(Path(__file__).parents[1] / "traces" / "sample.arrow")
    cfg = rf.simulation.EngineConfig().to_engine()
    eng = _engine.Engine(fab.to_spec().arrays(), cfg)
    eng.load_workload(trace.arrays(), 1, 1 << 20)
    one = [
        np.array([v], dtype=t) for v, t in ((0, np.uint32), (9, np.uint32), (1000, np.int64), (0, np.int64))
    ]
    with pytest.raises(rf.SpecError, match="plain flows cannot be combined with a loaded workload"):
        eng.add_flows(*one)
    eng = _engine.Engine(fab.to_spec().arrays(), cfg)
    eng.add_flows(*one)
    with pytest.raises(rf.SpecError, match="a workload cannot be combined with plain flows"):
        eng.load_workload(trace.arrays(), 1, 1 << 20)
