"""Sites: fabrics joined by a long link between gateways (rf.topologies.Sites).

Oracles: the composed tables against each site's own (ids offset, names prefixed, circuits
re-pointed); a lone cross-site flow's completion against its analytical floor (the long
link's latency plus its bytes at the long link's rate); bytes conserved across the long link
(its port's bytes = the cross-site flows' payload plus one header per frame, the cross-site
transport's with transport=, plus control frames) on both backends; flows inside the first
site identical to the site alone when nothing crosses, and a run without cross-site flows
identical with and without transport=; under a cross-site incast with transport="dctcp" over
a RoCE run, losses and marks only at the long link, resends only when frames were lost;
bad arguments raise SpecError.
"""

import dataclasses
import math

import numpy as np
import pytest

import rfabric as rf
from rfabric.topologies import FatTree, MixNet, RailOptimized, RFabric, Sites, TopoOpt

BACKENDS = ["packet", "flow"]
MTU = 9216


def two_fat_trees(**kw):
    a = FatTree(gpus=16)
    b = FatTree(gpus=16, link="100Gbps")
    return a, b, Sites({"train": a, "gen": b}, **{"link": "80Gbps", "latency": "2ms", **kw})


def test_tables_compose_the_sites():
    a, b, s = two_fat_trees()
    spec, sa, sb = s.to_spec(), a.to_spec(), b.to_spec()
    assert s.gpus == spec.num_gpus == 32
    np.testing.assert_array_equal(s.site_gpus("train"), np.arange(16))
    np.testing.assert_array_equal(s.site_gpus("gen"), np.arange(16, 32))
    np.testing.assert_array_equal(s.site_of([0, 15, 16, 31]), [0, 0, 1, 1])
    names = list(spec.nodes.name)
    # each site's nodes, in order, prefixed; then its gateway
    na, nb = len(sa.nodes), len(sb.nodes)
    assert names[:na] == [f"train/{x}" for x in sa.nodes.name]
    assert names[na] == "train/gateway"
    assert names[na + 1 : na + 1 + nb] == [f"gen/{x}" for x in sb.nodes.name]
    assert names[na + 1 + nb] == "gen/gateway"
    np.testing.assert_array_equal(s.gateways(), [na, na + 1 + nb])
    # servers numbered site after site
    assert spec.nodes.server.max() + 1 == a.servers + b.servers
    # one long link between the gateways, with the given rate, latency and a BDP buffer
    (row,) = s.long_links()
    assert {int(spec.links.src[row]), int(spec.links.dst[row])} == set(s.gateways().tolist())
    assert spec.links.rate_bps[row] == 80_000_000_000
    assert spec.links.latency_ps[row] == 2_000_000_000
    bdp = 80_000_000_000 * 2 * 2_000_000_000 // (8 * 10**12)
    assert spec.links.buffer_bytes[row] == 2 * bdp + a.buffer_bytes
    # a site's own links are unchanged, ids offset
    ma = len(sa.links)
    np.testing.assert_array_equal(spec.links.src[:ma], sa.links.src)
    np.testing.assert_array_equal(spec.links.rate_bps[:ma], sa.links.rate_bps)


def test_gateway_links_reach_the_top_tier():
    a, b, s = two_fat_trees()
    spec = s.to_spec()
    kind = spec.links.kind.astype(str)
    gw = s.gateways()
    names = np.asarray(spec.nodes.name)
    for g, site, fab in zip(gw, ["train", "gen"], [a, b], strict=True):
        rows = np.flatnonzero((kind == "gateway") & (spec.links.src == g))
        peers = sorted(names[spec.links.dst[rows]])
        cores = sorted(f"{site}/{x}" for x in fab.to_spec().nodes.name if x.startswith("core"))
        assert peers == cores  # a FatTree's top tier: its cores
        assert (spec.links.rate_bps[rows] == fab.link_bps).all()
    _, _, s1 = two_fat_trees(gateway_links=2)
    assert s1.summary()["links_gateway"] == 4
    # RFabric: the ToRs are its only packet switches (its upper tiers are optical)
    r = RFabric(gpus=64)
    s2 = Sites({"r": r, "f": FatTree(gpus=16)}, link="20Gbps", latency="1ms")
    spec2 = s2.to_spec()
    rows = np.flatnonzero((spec2.links.kind.astype(str) == "gateway") & (spec2.links.src == s2.gateways()[0]))
    assert rows.size == 8 and all(
        n.startswith("r/pod0/tor") for n in np.asarray(spec2.nodes.name)[spec2.links.dst[rows]]
    )


def wire_bytes(size, header):
    payload = MTU - header
    return size + math.ceil(size / payload) * header, math.ceil(size / payload)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lone_cross_site_flow_meets_its_floor(backend):
    *_, s = two_fat_trees()
    size = 4 << 20
    res = rf.simulate(
        s, rf.Flows(src=[3], dst=[21], size_bytes=[size], start_ps=[0]), seed=1, backend=backend
    )
    fct = res.flows["fct_ps"][0].as_py()
    wire, _ = wire_bytes(size, res.run["header_bytes"])
    floor = 2_000_000_000 + wire * 8 * 10**12 // 80_000_000_000
    assert fct >= floor
    # the rest: a few microsecond hops and one frame's store-and-forward at each
    assert fct <= floor * 1.01


#: TCP/IPv4 over Ethernet: Eth 14 + IPv4 20 + TCP 20 + FCS 4 (the cross-site DCTCP flows' header)
TCP_HEADER = 58


@pytest.mark.parametrize("transport", [None, "dctcp"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_bytes_conserved_across_the_long_link(backend, transport):
    *_, s = two_fat_trees(transport=transport)
    rng = np.random.default_rng(7)
    n = 12
    src = rng.integers(0, 32, n)
    dst = (src + rng.integers(1, 32, n)) % 32
    size = rng.integers(1 << 14, 1 << 21, n)
    start = rng.integers(0, 5 * 10**8, n)
    # (a minimum RTO above the 4 ms round trip: DCTCP's 200 us default times out on it and
    # sends again frames that were not lost, which this count would have to add)
    res = rf.simulate(
        s,
        rf.Flows(src=src, dst=dst, size_bytes=size, start_ps=start),
        seed=1,
        backend=backend,
        dctcp_min_rto="20ms",
    )
    assert res.flows["delivered_bytes"].to_pylist() == size.tolist()
    assert not any(res.flows["retransmits"].to_pylist())
    # every flow on the long link crosses sites: with transport= they are TCP frames
    header = res.run["header_bytes"] if transport is None else TCP_HEADER
    links = res.links
    (row,) = s.long_links()
    gw = s.gateways().tolist()
    site = s.site_of(np.stack([src, dst]))
    for direction in (0, 1):
        i = next(
            k
            for k in range(links.num_rows)
            if links["link_id"][k].as_py() == row and links["direction"][k].as_py() == direction
        )
        a, b = links["src"][i].as_py(), links["dst"][i].as_py()
        frm, to = gw.index(a), gw.index(b)
        cross = (site[0] == frm) & (site[1] == to)
        assert cross.any() or direction == 1
        wire = [wire_bytes(int(x), header) for x in size[cross]]
        data_bytes = sum(w for w, _ in wire)
        data_frames = sum(f for _, f in wire)
        got = links["bytes"][i].as_py()
        if backend == "packet":
            # plus the control frames (ACKs, CNPs) of flows going the other way
            control = links["packets"][i].as_py() - data_frames
            assert control >= 0
            assert got == data_bytes + control * 64
        else:
            assert got == data_bytes


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_site_alone_when_nothing_crosses(backend):
    a = FatTree(gpus=32, oversubscription=3, radix=16)
    s = Sites({"a": a, "b": FatTree(gpus=32, link="100Gbps")}, link="80Gbps", latency="2ms")
    rng = np.random.default_rng(3)
    src = rng.integers(0, 32, 40)
    dst = (src + rng.integers(1, 32, 40)) % 32
    flows = rf.Flows(
        src=src, dst=dst, size_bytes=rng.integers(1 << 16, 1 << 21, 40), start_ps=rng.integers(0, 10**7, 40)
    )
    alone = rf.simulate(a, flows, seed=1, backend=backend).flows
    both = rf.simulate(s, flows, seed=1, backend=backend).flows
    assert alone["end_ps"].to_pylist() == both["end_ps"].to_pylist()
    (row,) = s.long_links()
    links = rf.simulate(s, flows, seed=1, backend=backend).links
    assert (
        sum(links["bytes"][k].as_py() for k in range(links.num_rows) if links["link_id"][k].as_py() == row)
        == 0
    )


def test_circuits_of_a_site_are_re_pointed():
    m = MixNet(gpus=32)
    s = Sites({"f": FatTree(gpus=16), "m": m}, link="80Gbps", latency="1ms", routing="adaptive")
    spec, own = s.to_spec(), m.to_spec()
    assert len(spec.circuits) == len(own.circuits) > 0
    names = np.asarray(spec.nodes.name)
    own_names = np.asarray(own.nodes.name)
    assert list(names[spec.circuits.ocs]) == [f"m/{x}" for x in own_names[own.circuits.ocs]]
    # the circuit's link rows join the same node pairs as in the site alone
    for col in ("a", "b"):
        ends = getattr(spec.circuits, col)
        own_ends = getattr(own.circuits, col)
        assert list(names[spec.links.src[ends]]) == [f"m/{x}" for x in own_names[own.links.src[own_ends]]]
        assert list(names[spec.links.dst[ends]]) == [f"m/{x}" for x in own_names[own.links.dst[own_ends]]]
    assert s.default_controller == "mixnet"
    fl = rf.Flows(src=[0, 16, 20], dst=[40, 47, 2], size_bytes=[1 << 20] * 3, start_ps=[0, 0, 0])
    res = rf.simulate(s, fl, seed=1)
    assert res.flows["delivered_bytes"].to_pylist() == [1 << 20] * 3


def test_policies_of_a_composed_fabric():
    a, b, s = two_fat_trees(links=3)
    assert s.default_controller is None
    loc = s.locality()
    np.testing.assert_array_equal(loc.pod_of, np.repeat([0, 1], 16))
    np.testing.assert_array_equal(loc.pod_budget, [3, 3])
    assert s.ring_orders() is None
    r = Sites({"r": RFabric(gpus=64), "f": FatTree(gpus=16)}, link="20Gbps", latency="1ms")
    # the stage-aware controller needs every GPU under an RFabric ToR: the RFabric site
    # keeps its initial plan
    assert r.default_controller == "static"
    assert isinstance(rf.controllers.default_for(r), rf.controllers.StaticController)
    rings = Sites(
        {"x": TopoOptLike(), "f": FatTree(gpus=16)}, link="20Gbps", latency="1ms", routing="dmodk"
    ).ring_orders()
    assert rings.shape[1] == 32
    for row in rings:
        assert sorted(row.tolist()) == list(range(32))
        assert sorted(row[:16].tolist()) == list(range(16))  # one site, then the other


class TopoOptLike(RailOptimized):
    """A packet-switched fabric that states ring orders (to test how Sites joins them)."""

    family = "rail_with_rings"
    pxn = False

    def __init__(self):
        super().__init__(gpus=16)

    def ring_orders(self):
        return np.stack([np.arange(16), np.arange(16)[::-1]])


def test_cost_of_the_long_link():
    a, b, s = two_fat_trees(links=2)
    with pytest.raises(rf.SpecError, match="80Gbps has no prices"):
        rf.cost.network_cost(s)
    prices = {"80Gbps": {"long_haul_optic": 3000, "long_haul_circuit": 20000}}
    bom = rf.cost.bill_of_materials(s, prices=prices).to_pylist()
    by = {(r["component"], r["link_speed"]): r for r in bom}
    assert by[("long_haul_optic", "80Gbps")]["count"] == 4
    assert by[("long_haul_circuit", "80Gbps")]["count"] == 2
    # the rest: each site's bill plus the gateways' links (a site link each: two transceivers,
    # one gateway switch port and one top-tier port, one fibre)
    gw_links = {fab.link_bps: s.summary()["links_gateway"] // 2 for fab in (a, b)}
    p = rf.cost.load_prices()
    extra = sum(
        n * (2 * p.unit(r, "transceiver", "") + 2 * p.unit(r, "switch_port", "") + p.unit(r, "fiber", ""))
        for r, n in gw_links.items()
    )
    total = rf.cost.network_cost(s, prices=prices)
    want = rf.cost.network_cost(a) + rf.cost.network_cost(b) + extra + 4 * 3000 + 2 * 20000
    assert total == pytest.approx(want)


@pytest.mark.parametrize(
    "sites, kw, match",
    [
        ({"a": FatTree(gpus=16)}, {}, "at least two sites"),
        ([FatTree(gpus=16), FatTree(gpus=16)], {}, "dict"),
        ({"a": FatTree(gpus=16), "b": "fat_tree"}, {}, "not a Topology"),
        ({"a": FatTree(gpus=16), "": FatTree(gpus=16)}, {}, "site name"),
        ({"a/x": FatTree(gpus=16), "b": FatTree(gpus=16)}, {}, "site name"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"link": "fast"}, "Sites"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"latency": -1}, "latency"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"links": 0}, "links"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"gateway_links": 0}, "gateway_links"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"buffer": 0}, "buffer"),
        ({"a": FatTree(gpus=16), "b": MixNet(gpus=32)}, {}, "route differently"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"routing": "fastest"}, "Sites: routing"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"transport": "roce"}, "assumes a lossless"),
        ({"a": FatTree(gpus=16), "b": FatTree(gpus=16)}, {"transport": "tcp"}, "not a transport"),
    ],
)
def test_bad_arguments(sites, kw, match):
    with pytest.raises(rf.SpecError, match=match):
        Sites(sites, **{"link": "80Gbps", "latency": "1ms", **kw})


def test_sites_without_packet_switches_or_nested_are_refused():
    s = Sites({"a": FatTree(gpus=16), "t": TopoOpt(gpus=16)}, "80Gbps", "1ms", routing="dmodk")
    with pytest.raises(rf.SpecError, match="'t'.*no packet switch"):
        s.to_spec()
    _, _, inner = two_fat_trees()
    with pytest.raises(rf.SpecError, match="itself a Sites"):
        Sites({"x": inner, "y": FatTree(gpus=16)}, "80Gbps", "1ms")
    with pytest.raises(rf.SpecError, match="no site 'nope'"):
        inner.site_gpus("nope")


def _doc(name):
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "docs" / "explanation" / name).read_text()


def _bench(name):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_doc_incast_table():
    """docs/explanation/sites.md's transport table is what bench/sites_incast.py prints, and
    holds what the page says of it."""
    bench = _bench("sites_incast")
    table = bench.table()
    assert table in _doc("sites.md")
    rows = {label: line for (label, *_), line in zip(bench.ROWS, table.splitlines()[2:], strict=True)}
    # RoCE everywhere: pauses only inside the sending site, none over the long link itself
    a, b = FatTree(gpus=16), FatTree(gpus=16, link="100Gbps")
    s = Sites({"train": a, "gen": b}, link="80Gbps", latency="100us")
    fl = rf.Flows(src=np.arange(16, 24), dst=np.arange(8), size_bytes=[8 << 20] * 8, start_ps=[0] * 8)
    links = rf.simulate(s, fl, seed=1, transport="roce").links.to_pylist()
    (row,) = s.long_links()
    assert all(not x["pfc_pauses"] for x in links if x["link_id"] == row)
    assert all(x["src_name"].startswith("gen/") for x in links if x["pfc_pauses"])
    # the long link's own DCTCP: no pause anywhere, nothing dropped or sent again, and with its
    # settings scaled to the long link it finishes first, above the 8 x 8 MiB at line rate
    own = rows['`roce`, `Sites(transport="dctcp")`']
    assert own.endswith(" ECN marks, no drops | no drops, no pauses | 0 |")
    slowest = {label: float(line.split("|")[2].split()[0]) for label, line in rows.items()}
    floor = 8 * (8 << 20) * 8 / 80e9 * 1e3
    assert floor < slowest['`roce`, `Sites(transport="dctcp")`'] == min(slowest.values())


def test_doc_weight_sync_row():
    """docs/explanation/sites.md's RL table, 80 Gbps row: recomputed (flow backend)."""
    fab = Sites(
        {"train": RailOptimized(gpus=32, link="200Gbps"), "gen": FatTree(gpus=32, link="100Gbps")},
        link="80Gbps",
        latency="2ms",
        routing="dmodk",
    )
    trace = rf.traces.generate_rl("qwen2.5-14b", train_gpus=32, gen_gpus=32, global_batch=64, seed=1)
    st = {
        r["stage"]: (r["end_ps"] - r["start_ps"]) / 1e12
        for r in rf.simulate(fab, trace, backend="flow", seed=1).stages.to_pylist()
    }
    line = f"| 80 Gbps (StreamRL's) | {st['weight_sync']:.2f} s | {st['gen']:.2f} s | {st['train']:.2f} s |"
    assert line in _doc("sites.md")
    # the floor: the weights at the long link's line rate
    assert st["weight_sync"] >= 29.5e9 * 8 / 80e9


def test_composable_controllers_run_on_a_composed_fabric():
    """COMPOSABLE_CONTROLLERS: MixNet's controller plans a MixNet site inside a composed
    fabric (an RL iteration runs and the plan changes); the stage-aware controller cannot read
    an RFabric layout from one, which is why an RFabric site keeps its initial plan."""
    from rfabric.topologies.sites import COMPOSABLE_CONTROLLERS

    assert COMPOSABLE_CONTROLLERS == {"static", "mixnet"}
    fab = Sites(
        {"train": MixNet(gpus=32), "gen": FatTree(gpus=32, link="100Gbps")},
        link="80Gbps",
        latency="1ms",
        routing="multipath",
    )
    trace = rf.traces.generate_rl(
        {"base": "qwen2-57b-a14b", "layers": 2}, train_gpus=32, gen_gpus=32, global_batch=32, seed=1
    )
    res = rf.simulate(fab, trace, backend="flow", seed=1, controller=rf.controllers.default_for(fab))
    assert res.run["controller"] == "MixNetController" and res.run["plan_changes"] >= 1
    assert {r["stage"] for r in res.stages.to_pylist()} >= {"train", "weight_sync"}
    r = Sites({"r": RFabric(gpus=64), "f": FatTree(gpus=16)}, link="20Gbps", latency="1ms")
    t2 = rf.traces.generate_rl(
        {"base": "qwen2.5-14b", "layers": 2}, train_gpus=64, gen_gpus=16, global_batch=16, seed=1
    )
    with pytest.raises(rf.SpecError, match="not an RFabric|no NIC link"):
        rf.simulate(r, t2, backend="flow", seed=1, controller=rf.controllers.StageAwareController())
    assert rf.simulate(r, t2, backend="flow", seed=1, controller=rf.controllers.default_for(r)).complete


@pytest.mark.parametrize("backend", BACKENDS)
def test_three_sites_in_a_chain(backend):
    """A flow from the first site to the last crosses both long links: its completion is at
    least two latencies plus its bytes at the long rate, and close to it (the two flows share
    the link, so their bytes count twice)."""
    s = Sites({n: FatTree(gpus=16) for n in ("x", "y", "z")}, link="40Gbps", latency="500us")
    assert len(s.long_links()) == 2
    size = 2 << 20
    flows = rf.Flows(src=[1, 2], dst=[33, 40], size_bytes=[size] * 2, start_ps=[0, 0])
    res = rf.simulate(s, flows, seed=1, backend=backend)
    wire, _ = wire_bytes(size, res.run["header_bytes"])
    floor = 2 * 500_000_000 + 2 * wire * 8 * 10**12 // 40_000_000_000
    assert floor <= max(res.flows["fct_ps"].to_pylist()) <= floor * 1.02
    for row in s.long_links().tolist():
        assert (
            sum(x["bytes"] for x in res.links.to_pylist() if x["link_id"] == row and x["direction"] == 0)
            >= 2 * wire
        )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("routing", ["dmodk", "flow"])
def test_parallel_long_links(backend, routing):
    """links=2: together the two long links carry every cross-site byte once. Per-flow
    hashing spreads flows over them; D-mod-K, whose digit for the gateway's hop is spent on
    these small sites, puts them all on one (docs/explanation/sites.md says so)."""
    s = Sites(
        {"x": FatTree(gpus=16), "y": FatTree(gpus=16)},
        link="40Gbps",
        latency="500us",
        links=2,
        routing=routing,
    )
    size = 2 << 20
    flows = rf.Flows(src=np.arange(8), dst=np.arange(16, 24), size_bytes=[size] * 8, start_ps=[0] * 8)
    res = rf.simulate(s, flows, seed=1, backend=backend)
    wire, _ = wire_bytes(size, res.run["header_bytes"])
    per_link = [
        sum(x["bytes"] for x in res.links.to_pylist() if x["link_id"] == row and x["direction"] == 0)
        for row in s.long_links().tolist()
    ]
    assert sum(per_link) == 8 * wire
    assert (min(per_link) > 0) == (routing == "flow")


class LeafSpine(rf.Topology):
    """A user's fabric (docs/tutorials/own-fabric.md's shape), 4 GPUs per server."""

    family = "leaf_spine_sites_test"

    def __init__(self, gpus, link="100Gbps", spines=2, **kw):
        super().__init__(gpus, link, gpus_per_server=4, **kw)
        self.spines = spines

    def build(self, net):
        gpu = net.add_servers(self.servers, self.gpus_per_server)
        leaves = net.add_nodes("eps", self.servers, prefix="leaf")
        spines = net.add_nodes("eps", self.spines, prefix="spine")
        net.add_links(gpu.ravel(), np.repeat(leaves, 4), rate=self.link_bps, kind="nic")
        net.add_links(
            np.repeat(leaves, self.spines),
            np.tile(spines, len(leaves)),
            rate=self.link_bps,
            kind="leaf-spine",
        )


def test_a_users_fabric_as_a_site():
    """Any Topology is a site: the gateway finds a user's leaf-spine's spines, servers of 4
    and 8 GPUs mix, and a cross-site flow is delivered over the long link."""
    user = LeafSpine(gpus=16)
    s = Sites({"ours": FatTree(gpus=16), "theirs": user}, link="10Gbps", latency="50us")
    spec = s.to_spec()
    names = np.asarray(spec.nodes.name)
    rows = np.flatnonzero((spec.links.kind.astype(str) == "gateway") & (spec.links.src == s.gateways()[1]))
    assert sorted(names[spec.links.dst[rows]]) == ["theirs/spine0", "theirs/spine1"]
    assert s.gpus_per_server == 4 and spec.nodes.server.max() + 1 == 2 + 4
    res = rf.simulate(s, rf.Flows(src=[17], dst=[2], size_bytes=[1 << 20], start_ps=[0]), seed=1)
    assert res.flows["delivered_bytes"][0].as_py() == 1 << 20
    assert res.flows["fct_ps"][0].as_py() >= 50_000_000 + (1 << 20) * 8 * 10**12 // 10_000_000_000


def test_sites_keep_each_sites_gpu_types():
    a = rf.topologies.FatTree(32, gpu="H800")
    b = rf.topologies.FatTree(32, link="100Gbps", gpu={"H20": 16, "H100": 16})
    s = rf.topologies.Sites({"train": a, "gen": b}, link="80Gbps", latency="2ms")
    types = s.to_spec().gpu_types
    assert types.tolist() == ["H800"] * 32 + ["H20"] * 16 + ["H100"] * 16
    assert rf.cost.gpu_counts(s) == {"H800": 32, "H20": 16, "H100": 16}


# --- the long link's own transport (Sites(..., transport="dctcp")) -------------------------


def _incast(latency, buffer=None, transport="dctcp", seed=1, backend="packet"):
    """8 cross-site flows (gen 16-23 -> train 0-7) and 8 inside the gen site (24-31 -> 16-23),
    8 MiB each, over a RoCE (lossless) run."""
    a, b = FatTree(gpus=16), FatTree(gpus=16, link="100Gbps")
    s = Sites({"train": a, "gen": b}, link="80Gbps", latency=latency, buffer=buffer, transport=transport)
    src = np.r_[np.arange(16, 24), np.arange(24, 32)]
    dst = np.r_[np.arange(8), np.arange(16, 24)]
    fl = rf.Flows(src=src, dst=dst, size_bytes=[8 << 20] * 16, start_ps=[0] * 16)
    return s, rf.simulate(s, fl, seed=seed, transport="roce", backend=backend)


def _per_link(s, res):
    rows = set(s.long_links().tolist())
    long_, inside = {}, {}
    for x in res.links.to_pylist():
        d = long_ if x["link_id"] in rows else inside
        for k in ("drops", "ecn_marks", "pfc_pauses"):
            d[k] = d.get(k, 0) + x[k]
    return long_, inside


def test_spec_carries_the_long_links_transport():
    *_, plain = two_fat_trees()
    *_, s = two_fat_trees(transport="dctcp")
    spec = s.to_spec()
    assert spec.cross_site_transport == "dctcp"
    np.testing.assert_array_equal(np.flatnonzero(spec.link_lossy), s.long_links())
    np.testing.assert_array_equal(spec.gpu_site, [0] * 16 + [1] * 16)
    arrays = spec.arrays()
    assert arrays["cross_site_transport"] == "dctcp"
    # a fabric without transport= crosses into the engine (and hashes) exactly as before
    assert not {"link_lossy", "gpu_site", "cross_site_transport"} & set(plain.to_spec().arrays())
    assert "transport='dctcp'" in repr(s)
    bad = dataclasses.replace(spec, gpu_site=np.zeros(3, dtype=np.int64))
    with pytest.raises(rf.SpecError, match="gpu_site has shape"):
        bad.validate()
    bad = dataclasses.replace(spec, cross_site_transport="roce")
    with pytest.raises(rf.SpecError, match="assumes a lossless fabric"):
        bad.validate()


def test_cross_site_incast_drops_only_on_the_long_link():
    """A 60 KB long-link buffer under an 8-to-8 incast: the long link's queue drops (its ports
    are lossy), the cross-site DCTCP flows resend and finish, and inside the sites the RoCE run
    stays lossless: no drop anywhere else, no PAUSE over the long link."""
    s, res = _incast("10us", "60KB")
    long_, inside = _per_link(s, res)
    assert long_["drops"] > 0 and inside["drops"] == 0
    assert long_["pfc_pauses"] == 0
    f = res.flows
    assert f["delivered_bytes"].to_pylist() == [8 << 20] * 16
    rtx = f["retransmits"].to_pylist()
    assert all(r > 0 for r in rtx[:8])  # every cross-site flow lost frames in the incast
    assert rtx[8:] == [0] * 8  # RoCE inside a site: nothing lost, nothing sent again
    assert res.run["drops"] == long_["drops"] and res.run["lossless"]


def test_cross_site_flows_resend_only_what_they_lost():
    """Per flow, after the drop-tail incast: payload conserved (sent + resent = delivered +
    duplicate + dropped, nothing left in flight), and a flow sends frames again only if some
    of its own were dropped (DCTCP's timers are far above this 20 us round trip)."""
    a, b = FatTree(gpus=16), FatTree(gpus=16, link="100Gbps")
    s = Sites({"train": a, "gen": b}, link="80Gbps", latency="10us", buffer="60KB", transport="dctcp")
    src = np.r_[np.arange(16, 24), np.arange(24, 32)]
    dst = np.r_[np.arange(8), np.arange(16, 24)]
    sim = rf.Simulation(s, rf.Flows(src, dst, [8 << 20] * 16, [0] * 16), transport="roce", seed=1)
    sim.run()
    log = sim.engine.flow_log()
    assert np.all(sim.engine.payload_in_flight() == 0)
    out = log["sent_bytes"] + log["resent_bytes"]
    np.testing.assert_array_equal(out, log["delivered_bytes"] + log["duplicate_bytes"] + log["dropped_bytes"])
    cross = s.site_of(log["src"]) != s.site_of(log["dst"])
    assert cross.sum() == 8
    np.testing.assert_array_equal(log["retransmits"] > 0, log["dropped_bytes"] > 0)
    assert np.all(log["dropped_bytes"][cross] > 0) and np.all(log["dropped_bytes"][~cross] == 0)


def test_cross_site_incast_without_drops_sends_nothing_twice():
    """With the default long-link buffer (twice the bandwidth-delay product) and a round trip
    under DCTCP's minimum RTO, nothing is dropped, so nothing is sent again; the long link's
    queue marks ECN (DCTCP's step K, 5 us at 80 Gbps) and no PAUSE crosses it."""
    s, res = _incast("10us")
    long_, inside = _per_link(s, res)
    assert long_["drops"] == inside["drops"] == 0
    assert long_["ecn_marks"] > 0 and long_["pfc_pauses"] == 0
    # the queue is the long link's: inside the sites nothing pauses, and the sites' RoCE marking
    # meets at most a transient queue (one mark, where the generation site's own flows and the
    # cross-site flows' ACKs share a downlink)
    assert inside["pfc_pauses"] == 0 and inside["ecn_marks"] <= long_["ecn_marks"] // 100
    assert res.flows["retransmits"].to_pylist() == [0] * 16
    assert res.flows["delivered_bytes"].to_pylist() == [8 << 20] * 16


def test_cross_site_transport_same_seed_same_results():
    _, a = _incast("10us", "60KB")
    _, b = _incast("10us", "60KB")
    assert a.flows.equals(b.flows) and a.links.equals(b.links)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_cross_site_flow_is_bit_identical(backend):
    """Flows that stay inside their sites never meet the cross-site transport: with and without
    transport= the run is the same, bit for bit (the long link carries nothing)."""
    rng = np.random.default_rng(5)
    src = rng.integers(0, 16, 30)
    dst = (src + rng.integers(1, 16, 30)) % 16
    src = np.r_[src, src + 16]
    dst = np.r_[dst, dst + 16]
    fl = rf.Flows(
        src=src, dst=dst, size_bytes=rng.integers(1 << 14, 1 << 21, 60), start_ps=rng.integers(0, 10**7, 60)
    )
    out = []
    for transport in (None, "dctcp"):
        *_, s = two_fat_trees(transport=transport)
        res = rf.simulate(s, fl, seed=3, backend=backend)
        out.append((res.flows, res.links))
    assert out[0][0].equals(out[1][0])
    assert out[0][1].equals(out[1][1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_lone_cross_site_flow_is_framed_by_its_transport(backend):
    """A lone cross-site DCTCP flow: its ideal completion time and the long link's bytes use
    TCP's 58-byte header, the run's own (RoCE, 62) stays the run's."""
    *_, s = two_fat_trees(transport="dctcp")
    size = 4 << 20
    res = rf.simulate(
        s,
        rf.Flows(src=[3], dst=[21], size_bytes=[size], start_ps=[0]),
        seed=1,
        backend=backend,
        dctcp_min_rto="20ms",
    )
    assert res.run["header_bytes"] == 62
    wire, frames = wire_bytes(size, TCP_HEADER)
    (row,) = s.long_links()
    got = sum(
        x["bytes"] for x in res.links.to_pylist() if x["link_id"] == row and x["src_name"] == "train/gateway"
    )
    assert got == wire
    floor = 2_000_000_000 + wire * 8 * 10**12 // 80_000_000_000
    assert floor <= res.flows["ideal_fct_ps"][0].as_py() <= res.flows["fct_ps"][0].as_py()


def test_frames_off_the_long_link_drop_where_the_site_pushes_back():
    """A 400 Gbps long link into a 100 Gbps site: the receiving gateway's port into its site is
    the bottleneck. Nothing can pause the long link, so frames that crossed it are dropped
    when that queue is full (and resent by DCTCP); no PAUSE crosses the long link, and in the
    sending site the same DCTCP frames are PAUSEd where they queue, never dropped."""
    a, b = FatTree(gpus=16), FatTree(gpus=16, link="100Gbps")
    s = Sites({"train": a, "gen": b}, link="400Gbps", latency="10us", transport="dctcp")
    fl = rf.Flows(src=np.arange(8), dst=[16] * 8, size_bytes=[4 << 20] * 8, start_ps=[0] * 8)
    # (a first window of 64 frames, sent back to back before an RTT sample paces them, so the
    # 8 senders' first bursts fill the sending site's queues too)
    res = rf.simulate(s, fl, seed=1, transport="roce", dctcp_init_cwnd_packets=64)
    links = res.links.to_pylist()
    rows = set(s.long_links().tolist())
    assert all(not x["pfc_pauses"] for x in links if x["link_id"] in rows)
    dropped = [x for x in links if x["drops"]]
    assert dropped and all(x["src_name"] == "gen/gateway" for x in dropped)
    # inside the lossless sending site the DCTCP frames are paused, never dropped
    assert any(x["pfc_pauses"] for x in links if x["src_name"].startswith("train/"))
    assert all(x["max_queue_bytes"] <= x["buffer_bytes"] for x in dropped)
    assert res.flows["delivered_bytes"].to_pylist() == [4 << 20] * 8
    assert all(r > 0 for r in res.flows["retransmits"].to_pylist())


def test_three_sites_cross_both_long_links_lossy():
    """A chain a - b - c: flows a -> c and b -> c share the b-c long link. Both long links'
    queues drop (the transit gateway b's port onto the second is lossy too), nothing else
    does, no PAUSE crosses a long link, and every byte arrives."""
    s = Sites(
        {"a": FatTree(gpus=16), "b": FatTree(gpus=16), "c": FatTree(gpus=16, link="100Gbps")},
        link="80Gbps",
        latency="10us",
        buffer="60KB",
        transport="dctcp",
    )
    src = np.r_[np.arange(8), np.arange(16, 24)]
    dst = np.r_[np.arange(32, 40), np.arange(40, 48)]
    res = rf.simulate(s, rf.Flows(src=src, dst=dst, size_bytes=[2 << 20] * 16, start_ps=[0] * 16), seed=1)
    links = res.links.to_pylist()
    rows = set(s.long_links().tolist())
    assert {(x["src_name"], x["dst_name"]) for x in links if x["drops"]} == {
        ("a/gateway", "b/gateway"),
        ("b/gateway", "c/gateway"),
    }
    assert all(x["link_id"] in rows for x in links if x["drops"])
    assert not any(x["pfc_pauses"] for x in links if x["link_id"] in rows)
    assert res.flows["delivered_bytes"].to_pylist() == [2 << 20] * 16


# --- the long link's transport settings, scaled to the long link -----------------------------


def test_long_link_settings_follow_the_rule():
    """K: a seventh of the base round trip (DCTCP's K > C x RTT / 7), never below the
    datacenter 5 us; minimum RTO: Linux's 200 ms, or the round trip plus the long buffer's
    drain when longer; both overridable, and only with transport=."""
    *_, s = two_fat_trees(transport="dctcp")  # 2 ms one way
    assert s.ecn_ps == math.ceil(4_000_000_000 / 7)
    assert s.min_rto_ps == 200_000_000_000
    spec = s.to_spec()
    assert (spec.cross_site_ecn_ps, spec.cross_site_min_rto_ps) == (s.ecn_ps, s.min_rto_ps)
    assert spec.arrays()["cross_site_ecn_ps"] == s.ecn_ps
    *_, short = two_fat_trees(transport="dctcp", latency="10us")  # 20 us / 7 < 5 us
    assert short.ecn_ps == 5_000_000
    # 150 ms one way: 300 ms of round trip plus the default buffer (2 BDP + the site's) draining
    *_, far = two_fat_trees(transport="dctcp", latency="150ms")
    drain = math.ceil(far.long_buffer_bytes * 8 * 10**12 / 80_000_000_000)
    assert far.min_rto_ps == 300_000_000_000 + drain > 900_000_000_000
    *_, own = two_fat_trees(transport="dctcp", ecn="40us", min_rto="5ms")
    assert (own.ecn_ps, own.min_rto_ps) == (40_000_000, 5_000_000_000)
    assert "ecn='40us', min_rto='5ms'" in repr(own)
    with pytest.raises(rf.SpecError, match="pass transport= too"):
        two_fat_trees(ecn="40us")
    with pytest.raises(rf.SpecError, match="min_rto"):
        two_fat_trees(transport="dctcp", min_rto="0ms")
    bad = dataclasses.replace(s.to_spec(), cross_site_transport=None, gpu_site=None, link_lossy=None)
    with pytest.raises(rf.SpecError, match="cross_site_ecn_ps needs a cross_site_transport"):
        bad.validate()


def test_long_link_threshold_is_what_the_queue_marks_at():
    """The datacenter floor in Python is the engine's own default (a spec without the
    threshold runs the same, bit for bit), and a different threshold marks differently."""
    s, res = _incast("10us")  # its threshold: the 5 us floor
    spec = dataclasses.replace(s.to_spec(), cross_site_ecn_ps=None)
    src = np.r_[np.arange(16, 24), np.arange(24, 32)]
    dst = np.r_[np.arange(8), np.arange(16, 24)]
    fl = rf.Flows(src=src, dst=dst, size_bytes=[8 << 20] * 16, start_ps=[0] * 16)
    same = rf.simulate(spec, fl, seed=1, transport="roce")
    assert same.flows.equals(res.flows) and same.links.equals(res.links)
    other = rf.simulate(dataclasses.replace(spec, cross_site_ecn_ps=50_000_000), fl, seed=1, transport="roce")
    assert other.run["ecn_marks"] != res.run["ecn_marks"]


@pytest.mark.parametrize(("link", "size"), [("80Gbps", 15_200_000_000), ("20Gbps", 4_000_000_000)])
def test_one_long_flow_fills_the_long_link(link, size):
    """One cross-site flow over a 1 ms long link with the default settings: goodput (bytes over
    the completion time less the round trip) at least 90% of the long link's rate, nothing
    dropped and nothing sent again (its RTO above the round trip), the long link's queue the
    only one that marks, and the packet backend's completion within 10% of the flow backend's
    (which has no congestion control); docs/explanation/sites.md shows the same rows."""
    bench = _bench("sites_incast")
    r = bench.long_flow(link, size)
    p, f, run = r["packet"], r["flow"], r["packet_run"]
    assert p["delivered_bytes"] == size
    goodput = size * 8 / ((p["fct_ps"] - r["rtt_ps"]) / 1e12)
    assert goodput >= 0.9 * r["rate_bps"]
    assert run["drops"] == 0 and p["retransmits"] == 0 and run["ecn_marks"] > 0
    marked = {
        x["link_id"]
        for x in rf.simulate(r["fabric"], rf.Flows([3], [21], [size]), seed=1).links.to_pylist()
        if x["ecn_marks"]
    }
    assert marked == set(r["fabric"].long_links().tolist())
    assert f["fct_ps"] <= p["fct_ps"] <= 1.1 * f["fct_ps"]


def test_doc_long_flow_table():
    assert _bench("sites_incast").long_flow_table() in _doc("sites.md")


def test_incast_over_the_long_link_marks_and_drops_only_there():
    """The incast with the default (scaled) settings: a small long-link buffer drops, a
    default one does not; either way drops and marks are the long link's alone (RoCE inside
    the sites marks nothing here: no queue forms in them), nothing PAUSEs across it, and every
    byte arrives; without drops nothing is sent again."""
    for buffer in ("60KB", None):
        s, res = _incast("1ms", buffer)
        long_, inside = _per_link(s, res)
        assert long_["pfc_pauses"] == 0
        assert inside["drops"] == inside["ecn_marks"] == inside["pfc_pauses"] == 0
        assert res.flows["delivered_bytes"].to_pylist() == [8 << 20] * 16
        if buffer is None:
            assert long_["drops"] == 0 and long_["ecn_marks"] > 0
            assert sum(res.flows["retransmits"].to_pylist()) == 0
        else:
            # its threshold (2 ms / 7: 2.9 MB at 80 Gbps) is above this 60 KB buffer: the
            # queue drops before it can mark
            assert long_["drops"] > 0 and long_["ecn_marks"] == 0
            assert s.ecn_ps * 80_000_000_000 // (8 * 10**12) > 60_000


def test_cross_site_flows_take_the_long_links_rto_not_the_runs():
    """The run's dctcp_min_rto (200 us by default, below this 4 ms round trip) is the flows'
    inside the sites; a cross-site flow times out no sooner than Sites' min_rto, so with
    nothing dropped it sends nothing twice whatever the run's, and the same (bit for bit)."""
    *_, s = two_fat_trees(transport="dctcp")
    fl = rf.Flows(src=[3], dst=[21], size_bytes=[4 << 20], start_ps=[0])
    runs = [
        rf.simulate(s, fl, seed=1, transport="dctcp", **kw).flows for kw in ({}, {"dctcp_min_rto": "50ms"})
    ]
    assert runs[0].equals(runs[1])
    assert runs[0]["retransmits"].to_pylist() == [0]
    # given the datacenter's 200 us minimum RTO, the same flow times out before its first ACK
    *_, dc = two_fat_trees(transport="dctcp", min_rto="200us")
    assert rf.simulate(dc, fl, seed=1).flows["retransmits"][0].as_py() > 0
