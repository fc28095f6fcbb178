"""The fairness rule of fabric comparisons (DESIGN §12, docs/fairness.md): a comparison
changes the fabric and nothing else. Workload rewrites (the weight-sync dissemination forest)
are fabric-independent, offered to every fabric, and recorded in the results."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pyarrow.compute as pc
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric.cli import demo_trace
from rfabric.rewrites import Locality, WeightSyncForest, apply_rewrites, locality, locality_from_spec
from rfabric.spec import CIRCUIT_KINDS, NODE_KINDS


def cut_capacity(spec, src_gpus, dst_gpus) -> float:
    """Max flow (bit/s) from ``src_gpus`` to ``dst_gpus`` over the fabric's links and its
    circuits in force (an OCS port is a node; a circuit joins two ports): the capacity any
    algorithm moving bytes from the one set to the other can use."""
    g = nx.DiGraph()
    kind = spec.nodes.kind
    optical = {NODE_KINDS[k] for k in CIRCUIT_KINDS}

    def end(node, link):
        return ("port", link) if int(kind[node]) in optical else int(node)

    def add(u, v, cap):
        for a, b in ((u, v), (v, u)):
            if a == b:
                continue
            old = g.get_edge_data(a, b, {"capacity": 0.0})["capacity"]
            g.add_edge(a, b, capacity=old + cap)

    rate = spec.links.rate_bps.astype(float)
    for link, (s, d) in enumerate(zip(spec.links.src.tolist(), spec.links.dst.tolist(), strict=True)):
        add(end(s, link), end(d, link), rate[link])
    c = spec.circuits
    for a, b in zip(c.a.tolist(), c.b.tolist(), strict=True):
        add(("port", a), ("port", b), min(rate[a], rate[b]))
    gpu = spec.gpu_nodes
    for x in src_gpus:
        g.add_edge("S", int(gpu[x]), capacity=float("inf"))
    for x in dst_gpus:
        g.add_edge(int(gpu[x]), "T", capacity=float("inf"))
    return nx.maximum_flow_value(g, "S", "T")


@pytest.fixture(scope="module")
def demo_rows():
    """The demo's shape (generated RL iteration, 64 train + 64 gen GPUs, 2-layer Qwen2.5-14B)
    on FT and RFabric, each with its own controller, under the default rule."""
    trace = demo_trace(128)
    table = rf.sweep(
        fabrics=["FT", "RFabric"],
        links=["200Gbps"],
        gpus=[128],
        workload={"rl": trace},
        controller="own",
        executor="serial",
        out=None,
        progress=False,
        seed=1,
    )
    return trace, {r["fabric"]: r for r in table.to_pylist()}


def test_rfabric_weight_sync_is_no_faster_than_its_capacity_allows(demo_rows):
    trace, rows = demo_rows
    ft, rfab = rows["FT"], rows["RFabric"]
    assert ft["complete"] and rfab["complete"]
    # the allowance: the train -> gen capacity of each fabric (max flow over its links and
    # circuits in force; at 128 GPUs RFabric's circuits join its same-rail ToRs with all
    # their uplinks: as much as the non-blocking fat-tree)
    train, gen = np.arange(64), np.arange(64, 128)
    cap_ft = cut_capacity(rf.topologies.FatTree(128).to_spec(), train, gen)
    cap_rf = cut_capacity(rf.topologies.RFabric(128).to_spec(), train, gen)
    assert cap_ft == cap_rf == 64 * 200e9
    allowance = cap_ft / cap_rf
    assert rfab["stage_weight_sync_ps"] >= 0.99 * allowance * ft["stage_weight_sync_ps"]
    # both ran the same workload: the forest, offered to FT too (before the rule FT replayed
    # the generator's broadcasts: 43.5 ms against RFabric's 22.3 ms)
    assert ft["rewrite_rule"] == rfab["rewrite_rule"] == "offered"
    # the same rewrite, each at a locality of one PoD (its source named after the fabric)
    assert ft["rewrites"].split(" (")[0] == rfab["rewrites"].split(" (")[0]
    assert ft["rewrites"].split(" (")[0].endswith("1 PoD")
    assert ft["rewrites"].startswith(
        "weight_sync_forest(choose=faster,fanout=2,fanout_ops=broadcast,seeds_per_pod=1)"
    )
    assert ft["ops"] == rfab["ops"] == ft["ops_done"]
    assert ft["controller"] == "none" and rfab["controller"] == "StageAwareController"


def test_the_rewrite_is_recorded_in_the_results():
    trace = demo_trace(128)
    top = rf.topologies.RFabric(128)
    res = rf.simulate(top, trace, controller=rf.controllers.StageAwareController(), backend="flow")
    ops = res.ops
    ws = pc.equal(ops["stage"], "weight_sync")
    # every weight-sync op is the forest's, no other op is
    assert ops.filter(ws)["rewrite"].to_pylist() == ["weight_sync_forest"] * ops.filter(ws).num_rows
    assert ops.filter(pc.invert(ws))["rewrite"].null_count == ops.num_rows - ops.filter(ws).num_rows
    (summary,) = res.run["rewrites"]
    n_ws = int(np.sum(np.asarray(trace.table["stage"].cast("string").to_pylist()) == "weight_sync"))
    assert summary["rewrite"] == "weight_sync_forest"
    assert summary["ops_replaced"] == n_ws
    assert summary["ops_produced"] == ops.filter(ws).num_rows
    assert summary["params"] == {
        "seeds_per_pod": 1,
        "fanout": 2,
        "fanout_ops": "broadcast",
        "choose": "faster",
    }
    # the forest was predicted faster than the trace's own weight sync, each time
    assert [c["chosen"] for c in summary["choices"]] == ["forest"] * len(summary["choices"]) != []
    assert summary["locality"].startswith("1 PoD")
    # rewrites="none": the trace's own weight sync, nothing recorded
    res = rf.simulate(
        top, trace, controller=rf.controllers.StageAwareController(), backend="flow", rewrites="none"
    )
    assert res.run["rewrites"] == [] and res.ops["rewrite"].null_count == res.ops.num_rows
    assert res.ops.num_rows == trace.num_ops


def _ops(t):
    cols = ("iteration", "stage", "phase", "kind", "ranks", "size_bytes", "algorithm", "deps", "period")
    return [tuple(map(str, r)) for r in zip(*(t.table[c].to_pylist() for c in cols), strict=True)]


def test_the_same_rewrite_on_fattree_gives_the_same_ops():
    trace = demo_trace(128)
    rw = rf.controllers.StageAwareController().rewrites()
    assert rw == [WeightSyncForest(choose="faster")]
    ft = locality(rf.topologies.FatTree(128))
    rfl = locality(rf.topologies.RFabric(128))
    out_ft, done_ft, label_ft = apply_rewrites(trace, rw, ft)
    out_rf, done_rf, label_rf = apply_rewrites(trace, rw, rfl)
    assert _ops(out_ft) == _ops(out_rf)
    assert list(label_ft) == list(label_rf)
    # what the stage-aware controller's own prepare() replays is that trace too
    assert _ops(
        rf.controllers.StageAwareController().prepare(trace, rf.topologies.RFabric(128).to_spec())
    ) == _ops(out_rf)
    # one PoD: no inter-PoD phase, one chain broadcast per shard from its holder to all its
    # receivers; each GPU receives as many bytes as in the generator's weight sync
    ws = [r for r in _ops(out_ft) if r[1] == "weight_sync"]
    assert {(r[3], r[6]) for r in ws} == {("broadcast", "chain")}
    assert out_ft.sent_bytes().sum() == trace.sent_bytes().sum()


def test_every_builtin_locality_matches_the_one_read_from_its_spec():
    # two derivations: each family's own override and the generic reading of its spec
    fabs = [
        rf.topologies.FatTree(128),
        rf.topologies.FatTree(128, oversubscription=3),
        rf.topologies.FatTree(1024),
        rf.topologies.RailOptimized(128),
        rf.topologies.TopoOpt(128),
        rf.topologies.MixNet(128),
        rf.topologies.MixNet(256),
        rf.topologies.RFabric(128),
        rf.topologies.RFabric(1024),
    ]
    for fab in fabs:
        a, b = fab.locality(), locality_from_spec(fab.to_spec())
        assert np.array_equal(a.pod_of, b.pod_of) and np.array_equal(a.pod_budget, b.pod_budget), fab
        # packet switches join every GPU of the packet fabrics: one domain
        assert a.pods == 1 or isinstance(fab, rf.topologies.RFabric)
    # RFabric 1024: 8 PoDs of 128 GPUs, joined only by OCS-Core circuits, 64 ports each
    loc = rf.topologies.RFabric(1024).locality()
    assert loc.pods == 8 and (loc.pod_budget == 64).all() and (np.bincount(loc.pod_of) == 128).all()


class TwoPods(rf.Topology):
    """A user's fabric: two pods of leaf switches under their own spine. ``join="packet"``: the
    spines reach each other through ``links`` links to a core switch (thin: 2 for 16 GPUs);
    ``join="ocs"``: only through ``links`` ports each on an OCS, paired by circuits."""

    def __init__(self, gpus=32, link="200Gbps", links=2, join="packet"):
        super().__init__(gpus=gpus, link=link)
        self.n_links, self.join = links, join

    def build(self, net):
        gpu = net.add_servers(self.gpus // 8)
        leaves = net.add_nodes("eps", self.gpus // 8, prefix="leaf")
        net.add_links(gpu.ravel(), np.repeat(leaves, 8), rate=self.link, kind="nic")
        half = len(leaves) // 2
        spines = net.add_nodes("eps", 2, prefix="spine")
        pod = np.arange(len(leaves)) // half
        net.add_links(np.repeat(leaves, 8), np.repeat(spines[pod], 8), rate=self.link, kind="leaf-spine")
        k = self.n_links
        if self.join == "packet":
            core = net.add_nodes("eps", 1, prefix="core")
            net.add_links(np.repeat(spines, k), np.repeat(core, 2 * k), rate=self.link, kind="core")
            return
        ocs = net.add_nodes("ocs", 1, prefix="ocs")
        ports = net.add_links(np.repeat(spines, k), np.repeat(ocs, 2 * k), rate=self.link, kind="spine-ocs")
        net.add_circuits(ocs, ports[:k], ports[k:])


def test_a_user_topology_gets_the_rewrite_with_its_own_pods():
    # packet switches join the pods, thin core or not: one domain (a chain broadcast crosses
    # the core once per shard anyway)
    assert TwoPods().locality().pods == 1 and TwoPods(links=16).locality().pods == 1
    # pods joined only by optical circuits: two PoDs, each with its OCS ports as budget
    fab = TwoPods(join="ocs")
    loc = fab.locality()
    assert isinstance(loc, Locality)
    assert loc.pod_of.tolist() == [0] * 16 + [1] * 16 and loc.pod_budget.tolist() == [2, 2]
    # train on pod 0, gen on pod 1: each shard crosses the circuits once (Phase A, waves of at
    # most 2 per pod), then fans out inside pod 1
    trace = tiny_rl_trace(train_gpus=16, gen_gpus=16, train=dict(tp=8, pp=2, dp=1), iterations=1)
    res = rf.simulate(fab, trace, rewrites=[WeightSyncForest()], backend="flow")
    assert (res.ops["end_ps"].to_numpy() >= 0).all()
    ops = res.ops.filter(pc.equal(res.ops["stage"], "weight_sync"))
    phases = set(zip(ops["phase"].to_pylist(), ops["kind"].to_pylist(), strict=True))
    assert phases == {("inter_pod", "send"), ("intra_pod", "broadcast")}
    assert set(ops["rewrite"].to_pylist()) == {"weight_sync_forest"}
    assert res.run["rewrites"][0]["locality"].startswith("2 PoDs, boundary budget 2")
    # the ops it ran are those of the rewrite applied alone at that locality
    out, _, _ = apply_rewrites(trace, [WeightSyncForest()], loc)
    assert out.num_ops == res.ops.num_rows
    assert out.table["period"].to_pylist() == res.ops["period"].to_pylist()
    t = out.table.filter(pc.equal(out.table["stage"].cast("string"), "weight_sync"))
    sends = t.filter(pc.equal(t["phase"].cast("string"), "inter_pod"))
    src = np.array([r[0] for r in sends["ranks"].to_pylist()])
    dst = np.array([r[1] for r in sends["ranks"].to_pylist()])
    assert (loc.pod_of[src] == 0).all() and (loc.pod_of[dst] == 1).all()
    # at most 2 Phase A sends of a wave cross each pod's boundary at once (d_p = 2)
    assert np.unique(sends["period"].to_numpy(), return_counts=True)[1].max() <= 2


def test_sweep_rules_none_own_and_refusals():
    trace = tiny_rl_trace(train_gpus=32, gen_gpus=32, iterations=1)
    kw = dict(
        links=["200Gbps"], gpus=[64], workload={"tiny": trace}, controller="own", executor="serial", out=None
    )
    kw["progress"] = False
    rows = {
        (r["fabric"], r["rewrite_rule"]): r
        for rule in ("none", "own")
        for r in rf.sweep(fabrics=["FT", "RFabric"], rewrites=rule, **kw).to_pylist()
    }
    assert rows[("FT", "none")]["rewrites"] == rows[("RFabric", "none")]["rewrites"] == "none"
    assert rows[("FT", "own")]["rewrites"] == "none"  # FT has no controller: nothing of its own
    assert rows[("RFabric", "own")]["rewrites"].startswith("weight_sync_forest")
    assert rows[("FT", "none")]["ops"] == rows[("RFabric", "none")]["ops"] == trace.num_ops
    with pytest.raises(rf.SpecError, match="rewrites must be one of"):
        rf.sweep(fabrics=["FT"], rewrites="fair", **kw)
    with pytest.raises(rf.SpecError, match="two different weight_sync_forest rewrites"):
        rf.sweep(fabrics=["FT"], rewrites=[WeightSyncForest(), WeightSyncForest(fanout=3)], **kw)
    with pytest.raises(rf.SpecError, match="rewrite a trace's ops"):
        rf.simulate(rf.topologies.FatTree(16), rf.Flows([0], [1], 1000), rewrites=[WeightSyncForest()])


def test_a_private_prepare_is_recorded_as_such():
    class Private(rf.controllers.Controller):
        def prepare(self, trace, spec):
            out, _, _ = apply_rewrites(
                trace, [WeightSyncForest(fanout_ops="send")], Locality.one_domain(32, "x")
            )
            return out

        def plan(self, intent, view):
            return None

    trace = tiny_rl_trace(train_gpus=16, gen_gpus=16, train=dict(tp=8, pp=2, dp=1), iterations=1)
    res = rf.simulate(rf.topologies.RFabric(64), trace, controller=Private(), backend="flow")
    (rec,) = res.run["rewrites"]
    assert rec["rewrite"] == "Private.prepare" and "not offered" in rec["algorithm"]
    ws = pc.equal(res.ops["stage"], "weight_sync")
    assert set(res.ops.filter(ws)["rewrite"].to_pylist()) == {"Private.prepare"}
    assert res.ops.filter(pc.invert(ws))["rewrite"].null_count == res.ops.filter(pc.invert(ws)).num_rows
