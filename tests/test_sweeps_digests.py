"""rfabric/sweeps/digests.py: the content hashes behind config_id."""

import pyarrow as pa

import rfabric as rf
import rfabric.sweeps as sweep_mod
from rfabric.sweeps.digests import _Hash, _object_digest


def test_fabric_and_workload_digests_see_every_table_and_stay_cheap():
    import time

    ft = rf.topologies.FatTree(16, "200Gbps")
    base = sweep_mod.fabric_digest(ft)
    assert sweep_mod.fabric_digest(rf.topologies.FatTree(16, "200Gbps")) == base
    for other in (
        rf.topologies.FatTree(16, "100Gbps"),  # rates
        rf.topologies.FatTree(16, "200Gbps", link_latency="2us"),  # latencies
        rf.topologies.FatTree(16, "200Gbps", buffer="2MiB"),  # buffers
        rf.topologies.FatTree(16, "200Gbps", oversubscription=3),  # nodes and links
    ):
        assert sweep_mod.fabric_digest(other) != base
    flows = rf.Flows.permutation(16, 1 << 16, seed=1)
    assert sweep_mod.workload_digest(flows) == sweep_mod.workload_digest(
        rf.Flows.permutation(16, 1 << 16, seed=1)
    )
    assert sweep_mod.workload_digest(flows) != sweep_mod.workload_digest(
        rf.Flows.permutation(16, 1 << 16, seed=2)
    )
    big = rf.topologies.RFabric(2048, "200Gbps")
    big.to_spec()
    t0 = time.perf_counter()
    sweep_mod.fabric_digest(big)
    assert time.perf_counter() - t0 < 0.5  # about 1 ms: bytes into BLAKE2b, no per-element Python


def test_a_trace_hashes_alike_however_its_table_is_chunked():
    t = rf.traces.Trace.from_columns(
        op_id=[0, 1],
        stage="train",
        phase="p",
        kind="all_reduce",
        ranks=[[0, 1]] * 2,
        size_bytes=4096,
        deps=[[], [0]],
    )
    chunked = rf.traces.Trace(pa.concat_tables([t.table.slice(0, 1), t.table.slice(1)]), t.metadata)
    assert chunked.table.column(0).num_chunks == 2
    assert sweep_mod.workload_digest(chunked) == sweep_mod.workload_digest(t)


def test_fields_are_length_prefixed_and_objects_refused():
    # ("ab", "c") and ("a", "bc") feed different bytes
    assert (
        _Hash().add("x", "ab").add("y", "c").hexdigest() != _Hash().add("x", "a").add("y", "bc").hexdigest()
    )
    try:
        _Hash().add("x", object())
    except TypeError as exc:
        assert "cannot hash a object" in str(exc)
    else:
        raise AssertionError("an object was hashed")
    # a controller: its class and pickled state
    a, b = rf.controllers.UniformController(), rf.controllers.UniformController()
    assert _object_digest(a) == _object_digest(b) != _object_digest(None)
    assert _object_digest(rf.controllers.UniformController).endswith("UniformController")
