"""The fabrics of the paper: golden structure snapshots, reachability under each forwarding
model with the initial circuit plan, structural invariants, bad parameters and presets.

Goldens are readable text under tests/golden/; regenerate them with ``pytest --update-golden``
and review the diff like code."""

from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import rfabric as rf
from rfabric.spec import NODE_KINDS

T = rf.topologies
GOLDEN = Path(__file__).parent / "golden"
PRESETS = Path(__file__).parent.parent / "topologies"

FABRICS = {
    "fat_tree_128": lambda: T.FatTree(gpus=128),
    "fat_tree_os3_128": lambda: T.FatTree(gpus=128, oversubscription=3),
    "rail_optimized_128": lambda: T.RailOptimized(gpus=128),
    "topoopt_128": lambda: T.TopoOpt(gpus=128),
    "mixnet_128": lambda: T.MixNet(gpus=128),
    "rfabric_128": lambda: T.RFabric(gpus=128),
    # one PoD at 128 GPUs has no core: snapshot the 8-PoD default too
    "rfabric_1024": lambda: T.RFabric(gpus=1024),
}

# Defaults and variants checked for reachability and invariants (all of them fast to build).
VARIANTS = {
    **FABRICS,
    "rail_optimized_1024": lambda: T.RailOptimized(gpus=1024),
    "rail_optimized_24_nopxn": lambda: T.RailOptimized(gpus=24, pxn=False),
    "topoopt_1024": lambda: T.TopoOpt(gpus=1024),
    "topoopt_16": lambda: T.TopoOpt(gpus=16),
    "mixnet_1024": lambda: T.MixNet(gpus=1024),
    "mixnet_odd": lambda: T.MixNet(gpus=40, ocs_nics=5, region_servers=5),
    "rfabric_1024_nopxn": lambda: T.RFabric(gpus=1024, pxn=False),
    "rfabric_1024_split": lambda: T.RFabric(gpus=1024, ocs_agg=2, ocs_core=2),
    "rfabric_1024_radix128": lambda: T.RFabric(gpus=1024, ocs_radix=128),
    "rfabric_1024_lonegroup": lambda: T.RFabric(gpus=1024, pod_servers=8),
    "rfabric_1024_lonegroup_nopxn": lambda: T.RFabric(gpus=1024, pod_servers=8, pxn=False),
    "rfabric_1024_thincore": lambda: T.RFabric(gpus=1024, core_ports=16),
    "rfabric_192": lambda: T.RFabric(gpus=192),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def fab(request):
    return VARIANTS[request.param]()


def _hist(values) -> str:
    return " ".join(f"{k}:{c}" for k, c in sorted(Counter(values.tolist()).items()))


def snapshot(fab) -> str:
    """Node counts per kind, link counts per label, degree histograms per node kind
    (``degree:nodes``), circuits per device kind and resolved channels by endpoint kinds and length."""
    spec = fab.to_spec()
    kinds = spec.nodes.kind_names()
    labels = spec.links.kind.astype(str)
    deg = np.bincount(np.concatenate([spec.links.src, spec.links.dst]), minlength=spec.num_nodes)
    out = [
        f"# {spec.name}: structure snapshot (regenerate: pytest --update-golden)",
        f"class: {type(fab).__name__}",
        f"host_forwarding: {spec.host_forwarding}",
        f"pxn: {spec.pxn}",
        "nodes:",
    ]
    present = [k for k in NODE_KINDS if np.any(kinds == k)]
    out += [f"  {k}: {int(np.sum(kinds == k))}" for k in present]
    out.append("links:")
    out += [f"  {lab}: {c}" for lab, c in sorted(Counter(labels.tolist()).items())]
    out.append("degree histogram (degree:nodes):")
    out += [f"  {k}: {_hist(deg[kinds == k])}" for k in present]
    circ = spec.circuits
    out.append(f"circuits: {len(circ)}")
    out += [f"  in {k}: {c}" for k, c in sorted(Counter(kinds[circ.ocs].tolist()).items())]
    u, v, chains = spec.resolve_circuits()
    out.append(f"channels: {len(u)}")
    ends = Counter((*sorted((kinds[a], kinds[b])), len(c)) for a, b, c in zip(u, v, chains, strict=True))
    out += [f"  {a}-{b} over {n} links: {c}" for (a, b, n), c in sorted(ends.items())]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_golden_snapshot(name, update_golden):
    text = snapshot(FABRICS[name]())
    path = GOLDEN / f"{name}.txt"
    if update_golden:
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run pytest --update-golden"
    assert text == path.read_text(), f"{name} changed; review and regenerate with pytest --update-golden"


# -- reachability ----------------------------------------------------------------------------


def _switch_graph(spec) -> nx.Graph:
    """Packet switches joined by their links and by eps-eps optical channels."""
    kind = spec.nodes.kind
    eps = NODE_KINDS["eps"]
    g = nx.Graph()
    g.add_nodes_from(np.flatnonzero(kind == eps).tolist())
    src, dst = spec.links.src, spec.links.dst
    both = (kind[src] == eps) & (kind[dst] == eps)
    g.add_edges_from(zip(src[both].tolist(), dst[both].tolist(), strict=True))
    u, v, _ = spec.resolve_circuits()
    sw = (kind[u] == eps) & (kind[v] == eps)
    g.add_edges_from(zip(u[sw].tolist(), v[sw].tolist(), strict=True))
    return g


def _forwarding_graph(spec) -> nx.Graph:
    """Nodes that may carry traffic between two GPUs: switches, circuit channels, NIC
    attachments, and GPU/NVSwitch transit only with host forwarding or PXN."""
    kind = spec.nodes.kind
    gpu, nvs, eps = NODE_KINDS["gpu"], NODE_KINDS["nvswitch"], NODE_KINDS["eps"]
    g = _switch_graph(spec)
    g.add_nodes_from(spec.gpu_nodes.tolist())
    src, dst = spec.links.src, spec.links.dst
    nic = ((kind[src] == gpu) & (kind[dst] == eps)) | ((kind[src] == eps) & (kind[dst] == gpu))
    g.add_edges_from(zip(src[nic].tolist(), dst[nic].tolist(), strict=True))
    u, v, _ = spec.resolve_circuits()
    touches_gpu = (kind[u] == gpu) | (kind[v] == gpu)
    g.add_edges_from(zip(u[touches_gpu].tolist(), v[touches_gpu].tolist(), strict=True))
    if spec.host_forwarding or spec.pxn:
        nvl = ((kind[src] == gpu) & (kind[dst] == nvs)) | ((kind[src] == nvs) & (kind[dst] == gpu))
        g.add_edges_from(zip(src[nvl].tolist(), dst[nvl].tolist(), strict=True))
    else:
        # without GPU transit, a GPU must be a leaf of the graph (its single NIC)
        assert max(d for n, d in g.degree(spec.gpu_nodes.tolist())) <= 1
    return g


def test_every_gpu_pair_reachable(fab):
    spec = fab.to_spec()
    g = _forwarding_graph(spec)
    comp = nx.node_connected_component(g, int(spec.gpu_nodes[0]))
    missing = [int(x) for x in spec.gpu_nodes if int(x) not in comp]
    assert not missing, f"{spec.name}: GPUs {missing[:5]} unreachable from GPU 0"


def _nic_peer(spec) -> np.ndarray:
    """Node at the far end of each GPU's NIC link, indexed by GPU id."""
    kind = spec.nodes.kind
    gpu, nvs = NODE_KINDS["gpu"], NODE_KINDS["nvswitch"]
    src, dst = spec.links.src, spec.links.dst
    peer = np.full(spec.num_nodes, -1, dtype=np.int64)
    a = (kind[src] == gpu) & (kind[dst] != nvs)
    b = (kind[dst] == gpu) & (kind[src] != nvs)
    peer[src[a]] = dst[a]
    peer[dst[b]] = src[b]
    return peer[spec.gpu_nodes]


@pytest.mark.parametrize("name", [n for n in sorted(VARIANTS) if not n.startswith(("topoopt", "mixnet"))])
def test_switched_fabrics_connect_each_rail_through_switches(name):
    """Without host forwarding, traffic between servers stays on switches and eps-eps
    channels; under PXN it crosses NVLink only at the source and then stays on the
    destination's rail, so every rail's ToRs must be connected by switches alone."""
    fab = VARIANTS[name]()
    spec = fab.to_spec()
    assert not spec.host_forwarding
    g = _switch_graph(spec)
    peer = _nic_peer(spec)
    per_server = fab.gpus_per_server
    groups = [np.unique(peer[j::per_server]) for j in range(per_server)] if spec.pxn else [np.unique(peer)]
    for j, tors in enumerate(groups):
        comp = nx.node_connected_component(g, int(tors[0]))
        assert all(int(t) in comp for t in tors), f"{spec.name}: rail {j} is split"


# -- invariants ------------------------------------------------------------------------------


def test_each_gpu_has_one_nic_and_circuit_ports_are_used_once(fab):
    spec = fab.to_spec()
    kind = spec.nodes.kind
    gpu, nvs = NODE_KINDS["gpu"], NODE_KINDS["nvswitch"]
    ends = np.concatenate([spec.links.src, spec.links.dst])
    peers = np.concatenate([spec.links.dst, spec.links.src])
    nics = np.bincount(ends[(kind[ends] == gpu) & (kind[peers] != nvs)], minlength=spec.num_nodes)
    assert np.all(nics[spec.gpu_nodes] == 1)
    c = spec.circuits
    ports = np.concatenate([c.ocs * spec.num_links + c.a, c.ocs * spec.num_links + c.b])
    assert len(np.unique(ports)) == len(ports)
    # circuits only where to_spec allows them (it validated the plan)
    assert np.all(np.isin(kind[c.ocs], [NODE_KINDS["ocs"], NODE_KINDS["patch_panel"]]))


def test_circuit_port_reuse_is_rejected():
    fab = T.TopoOpt(gpus=32)
    nodes, links, circ = fab.tables()
    bad = rf.spec.CircuitTable.build(
        np.append(circ.ocs, circ.ocs[0]), np.append(circ.a, circ.a[0]), np.append(circ.b, circ.b[1])
    )
    with pytest.raises(rf.SpecError, match="used by two circuits"):
        rf.NetworkSpec.from_tables(nodes, links, circuits=bad, host_forwarding=True)


def _server_multigraph(spec) -> nx.MultiGraph:
    u, v, _ = spec.resolve_circuits()
    srv = spec.nodes.server
    g = nx.MultiGraph()
    g.add_nodes_from(np.unique(srv[spec.gpu_nodes]).tolist())
    g.add_edges_from(zip(srv[u].tolist(), srv[v].tolist(), strict=True))
    return g


@pytest.mark.parametrize("gpus", [16, 40, 128, 1024])
def test_topoopt_server_graph_is_8_regular_and_connected(gpus):
    fab = T.TopoOpt(gpus=gpus)
    spec = fab.to_spec()
    kind = spec.nodes.kind_names()
    assert not np.any(kind == "eps")
    assert np.all(kind[_nic_peer(spec)] == "patch_panel")
    g = _server_multigraph(spec)
    assert all(d == 8 for _, d in g.degree()) and nx.is_connected(g)
    assert not any(a == b for a, b in g.edges())
    # one ring per offset: server i is joined to i + p
    s = fab.servers
    for p in fab.offsets:
        assert all(g.has_edge(i, (i + p) % s) for i in range(s))


def test_totient_offsets():
    assert T.TopoOpt(gpus=128).offsets == [1, 3, 5, 7]
    assert T.TopoOpt(gpus=1024).offsets == [1, 3, 11, 39]
    assert T.TopoOpt(gpus=16).offsets == [1, 1, 1, 1]  # two servers: four parallel rings
    for s in (5, 9, 12, 30, 97):
        offs = T.TopoOpt(gpus=8 * s).offsets
        assert all(np.gcd(p, s) == 1 and 1 <= p <= s // 2 for p in offs)


def test_topoopt_mp_demand_gets_reserved_degree():
    s = 16
    demand = np.zeros((s, s))
    demand[0, 1] = 50.0  # heaviest pair: all 4 reserved NICs of servers 0 and 1
    demand[2, 9] = demand[9, 2] = 10.0
    demand[3, 12] = 1.0
    fab = T.TopoOpt(gpus=8 * s, mp_demand=demand)
    assert fab.mp_degree == 4 and len(fab.offsets) == 2
    g = _server_multigraph(fab.to_spec())
    assert g.number_of_edges(0, 1) >= 4 and g.number_of_edges(2, 9) >= 4 and g.number_of_edges(3, 12) >= 1
    assert nx.is_connected(g) and max(d for _, d in g.degree()) == 8
    assert sum(d for _, d in g.degree()) >= 8 * s - 8  # at most one server keeps dark ports
    two = T.TopoOpt(gpus=8 * s, mp_demand=demand, mp_degree=2)
    assert len(two.offsets) == 3


def test_topoopt_explicit_edges_are_realised():
    rng = np.random.default_rng(7)
    s = 12
    while True:  # a random connected 8-regular multigraph without loops
        stubs = rng.permutation(np.repeat(np.arange(s), 8)).reshape(-1, 2)
        g = nx.MultiGraph(stubs.tolist())
        if np.all(stubs[:, 0] != stubs[:, 1]) and nx.is_connected(g):
            break
    spec = T.TopoOpt(gpus=8 * s, edges=stubs).to_spec()
    got = sorted(tuple(sorted(e)) for e in _server_multigraph(spec).edges())
    assert got == sorted(tuple(sorted(e)) for e in stubs.tolist())


def test_rail_optimized_nic_j_reaches_rail_tor_j():
    for gpus, tiers in ((128, 2), (1024, 3), (24, 2), (8, 2)):
        fab = T.RailOptimized(gpus=gpus)
        assert fab.tiers == tiers
        spec = fab.to_spec()
        peer = _nic_peer(spec).reshape(fab.servers, 8)
        half = fab.radix // 2
        for j in range(8):
            tor_of_group = {}
            for s in range(fab.servers):
                tor = int(peer[s, j])
                assert spec.nodes.name[tor].endswith(f".r{j}")
                assert tor_of_group.setdefault(s // half, tor) == tor
            assert len(set(tor_of_group.values())) == len(tor_of_group)
        # ToRs of different rails never share a switch
        assert len(np.unique(peer)) == peer.shape[1] * -(-fab.servers // half)


def test_rail_optimized_three_tier_pods_are_rail_aligned():
    spec = T.RailOptimized(gpus=1024).to_spec()
    names = spec.nodes.name
    links = spec.links
    tor_agg = links.kind == "tor-agg"
    rails_of_agg: dict[str, set] = {}
    for a, b in zip(links.src[tor_agg], links.dst[tor_agg], strict=True):
        rails_of_agg.setdefault(names[b], set()).add(names[a].split(".r")[1])
    assert len(rails_of_agg) == 128 and all(len(r) == 1 for r in rails_of_agg.values())
    sw = np.flatnonzero(spec.nodes.kind == NODE_KINDS["eps"])
    deg = np.bincount(np.concatenate([links.src, links.dst]), minlength=spec.num_nodes)
    assert np.all(deg[sw] == 16)  # full size: every switch port used, as in FatTree k=16


def test_mixnet_splits_nics_and_plans_distinct_peers():
    fab = T.MixNet(gpus=1024)
    spec = fab.to_spec()
    kind = spec.nodes.kind_names()
    peer = _nic_peer(spec).reshape(fab.servers, 8)
    assert np.all(kind[peer[:, :6]] == "ocs") and np.all(kind[peer[:, 6:]] == "eps")
    assert fab.regions == 8 and len(np.unique(peer[:, :6])) == 8
    assert np.all(peer[:, :6] == peer[:, :1])  # a server's OCS NICs share its region's OCS
    u, v, _ = spec.resolve_circuits()
    srv = spec.nodes.server
    peers: dict[int, set] = {}
    for a, b in zip(srv[u].tolist(), srv[v].tolist(), strict=True):
        assert a // 16 == b // 16  # circuits stay inside a region
        peers.setdefault(a, set()).add(b)
        peers.setdefault(b, set()).add(a)
    assert all(len(p) == 6 for p in peers.values()) and len(peers) == fab.servers
    # the packet-switched part is a non-blocking Clos: every ToR has as many ports up as down
    links = spec.links
    down = np.bincount(links.dst[links.kind == "nic"], minlength=spec.num_nodes)
    up = np.bincount(links.src[links.kind == "tor-agg"], minlength=spec.num_nodes)
    tors = np.flatnonzero(up)
    assert np.all(down[tors] <= up[tors]) and down[tors].sum() == 2 * fab.servers


def test_rfabric_structure_and_default_plan():
    fab = T.RFabric(gpus=1024)
    assert (fab.pods, fab.tors_per_pod, fab.ocs_agg, fab.ocs_core, fab.core_ports) == (8, 16, 1, 1, 64)
    spec = fab.to_spec()
    kind = spec.nodes.kind_names()
    peer = _nic_peer(spec).reshape(fab.servers, 8)
    assert np.all(kind[peer] == "eps")  # servers connect only to static EPS ToRs
    # GPUs of one rail group and rail share their ToR, so intra-ToR traffic stays on the EPS
    group = np.arange(fab.servers) // fab.tor_down
    for j in range(8):
        for grp in np.unique(group):
            assert len(np.unique(peer[group == grp, j])) == 1
    assert len(np.unique(peer)) == 128
    # ToR uplinks end at OCS-Agg devices of their own PoD, OCS-Agg uplinks at OCS-Core devices
    names = spec.nodes.name
    links = spec.links
    for lab, far in (("tor-ocs", "ocs_agg"), ("ocs-ocs", "ocs_core")):
        sel = links.kind == lab
        assert all(far in names[d] for d in links.dst[sel])
    sel = links.kind == "tor-ocs"
    pod = [n.split("/")[0] for n in names]
    assert all(pod[a] == pod[b] for a, b in zip(links.src[sel], links.dst[sel], strict=True))
    # channels: ToR-ToR only; same-rail (PXN); every PoD pair joined, evenly (9 or 10 each)
    u, v, chains = spec.resolve_circuits()
    assert np.all(kind[u] == "eps") and np.all(kind[v] == "eps")
    assert all(names[a].split(".r")[1] == names[b].split(".r")[1] for a, b in zip(u, v, strict=True))
    inter = Counter(
        tuple(sorted((names[a].split("/")[0], names[b].split("/")[0])))
        for a, b, c in zip(u, v, chains, strict=True)
        if len(c) == 4
    )
    assert len(inter) == 28 and min(inter.values()) >= 9 and max(inter.values()) <= 10
    assert sum(len(c) == 2 for c in chains) == 8 * 32  # intra-PoD ToR-ToR channels


def test_rfabric_without_pxn_joins_all_rails():
    spec = T.RFabric(gpus=128, pxn=False).to_spec()
    names = spec.nodes.name
    u, v, _ = spec.resolve_circuits()
    assert any(names[a].split(".r")[1] != names[b].split(".r")[1] for a, b in zip(u, v, strict=True))


# -- bad parameters --------------------------------------------------------------------------

ONES = np.ones((16, 16))
BAD = [
    (T.RailOptimized, dict(gpus=128, radix=15), r"RailOptimized: radix must be an even integer >= 4, got 15"),
    (T.RailOptimized, dict(gpus=2048, radix=16), r"gpus=2048 exceeds the capacity of radix=16 \(1024 GPUs\)"),
    (T.RailOptimized, dict(gpus=128, radix=4), r"radix=4 is smaller than gpus_per_server=8"),
    (T.RailOptimized, dict(gpus=128, pxn="yes"), r"pxn must be True or False, got 'yes'"),
    (T.RailOptimized, dict(gpus=100), r"gpus=100 is not a multiple of gpus_per_server=8"),
    (T.TopoOpt, dict(gpus=96, gpus_per_server=3), r"TopoOpt: gpus_per_server=3 must be even"),
    (T.TopoOpt, dict(gpus=128, mp_demand=np.ones((4, 4))), r"mp_demand has shape \(4, 4\), expected \(16, "),
    (T.TopoOpt, dict(gpus=16, mp_demand=[[0, -1], [0, 0]]), r"mp_demand\[0, 1\] = -1.0 must be finite"),
    (T.TopoOpt, dict(gpus=128, mp_demand=ONES, mp_degree=8), r"mp_degree must be .* 2..6 .*got 8"),
    (T.TopoOpt, dict(gpus=128, mp_demand=ONES, mp_degree=3), r"mp_degree .* got 3"),
    (T.TopoOpt, dict(gpus=128, mp_degree=2), r"mp_degree=2 needs mp_demand="),
    (T.TopoOpt, dict(gpus=128, edges=[[0, 1]], mp_demand=ONES), r"it excludes mp_demand="),
    (T.TopoOpt, dict(gpus=32, edges=[[0, 1], [2, 4]]), r"edges\[1\] = \[2, 4\] names a server outside 0..3"),
    (T.TopoOpt, dict(gpus=32, edges=[[1, 1]]), r"edges\[0\] joins server 1 to itself"),
    (T.TopoOpt, dict(gpus=32, edges=[[0, 1]] * 9), r"edges give server 0 degree 9, more than its 8 NICs"),
    (T.TopoOpt, dict(gpus=32, edges=[[0, 1], [2, 3]]), r"topoopt-32: .*disconnected"),
    (T.MixNet, dict(gpus=128, ocs_nics=8), r"MixNet: ocs_nics must be an integer in 0..7 .*got 8"),
    (T.MixNet, dict(gpus=128, region_servers=5), r"MixNet: region_servers=5 does not divide the 16 servers"),
    (T.MixNet, dict(gpus=128, region_servers=0), r"MixNet: region_servers must be an integer >= 1, got 0"),
    (T.MixNet, dict(gpus=136), r"MixNet: no default region_servers for 17 servers .*pass region_servers="),
    (T.MixNet, dict(gpus=128, region_servers=1), r"MixNet: a region of 1 server holds no circuit"),
    (T.MixNet, dict(gpus=128, demand=[[0, 1], [1]]), r"MixNet: demand must be a numeric servers x servers"),
    (T.MixNet, dict(gpus=16, demand=[[0, "x"], [0, 0]]), r"MixNet: demand must be a numeric"),
    (T.MixNet, dict(gpus=16, demand=[[0, np.nan], [0, 0]]), r"MixNet: demand\[0, 1\] = nan must be finite"),
    (T.MixNet, dict(gpus=128, radix=7), r"MixNet: radix must be an even integer >= 4, got 7"),
    (T.MixNet, dict(gpus=8192, radix=8), r"the 2048 packet-switched NICs exceed the capacity of radix=8"),
    (T.RFabric, dict(gpus=128, pod_servers=3), r"RFabric: pod_servers=3 does not divide the 16 servers"),
    (T.RFabric, dict(gpus=136), r"RFabric: no default pod_servers for 17 servers .*pass pod_servers="),
    (T.RFabric, dict(gpus=128, tor_uplinks=3), r"RFabric: tor_uplinks=3 must be even"),
    (T.RFabric, dict(gpus=128, tor_uplinks=16), r"tor_uplinks=16 leaves no ToR port for servers"),
    (T.RFabric, dict(gpus=128, core_ports=8), r"core_ports=8 but there is a single PoD"),
    (T.RFabric, dict(gpus=1024, core_ports=7), r"core_ports must be an even integer >= 2 .*got 7"),
    (T.RFabric, dict(gpus=1024, core_ports=8), r"core_ports=8 is too few .* lift every rail"),
    (T.RFabric, dict(gpus=1024, ocs_agg=3), r"ocs_agg=3 must split tor_uplinks=8"),
    (T.RFabric, dict(gpus=1024, ocs_agg=8), r"ocs_agg=8 must split tor_uplinks=8"),
    (T.RFabric, dict(gpus=1024, ocs_agg=1, ocs_radix=100), r"OCS-Agg devices of 192 ports, more than"),
    (T.RFabric, dict(gpus=1024, ocs_core=64), r"ocs_core=64 must split each OCS-Agg's 64 core ports"),
    (T.RFabric, dict(gpus=1024, ocs_core=1, ocs_radix=256), r"OCS-Core devices of 512 ports, more than"),
    (T.RFabric, dict(gpus=128, ocs_core=2), r"ocs_core=2 but there is a single PoD"),
    (T.RFabric, dict(gpus=1024, tor_uplinks=2, radix=16), r"tor_uplinks=2 is too few"),
    (T.RFabric, dict(gpus=1024, ocs_radix=8), r"no OCS-Agg count fits ocs_radix=8"),
]


@pytest.mark.parametrize("cls,kwargs,match", BAD, ids=[f"{c.__name__}-{i}" for i, (c, *_) in enumerate(BAD)])
def test_bad_parameters_raise_spec_error_naming_them(cls, kwargs, match):
    with pytest.raises(rf.SpecError, match=match):
        cls(**kwargs).to_spec()


# -- presets and registry --------------------------------------------------------------------

MINE = ("rail_optimized", "topoopt", "mixnet", "rfabric")


@pytest.mark.parametrize("family", MINE)
@pytest.mark.parametrize("gpus", [128, 1024])
def test_presets_load(family, gpus):
    fab = T.load(PRESETS / f"{family}_{gpus}_200g.toml")
    assert type(fab) is T.FAMILIES[family] and fab.family == family
    assert fab.gpus == gpus and fab.link_bps == 200 * 10**9
    assert fab.to_spec().num_gpus == gpus
    assert snapshot(fab) == snapshot(T.FAMILIES[family](gpus=gpus))  # presets spell out the defaults


def test_families_are_registered_and_exported():
    for family, name in zip(MINE, ("RailOptimized", "TopoOpt", "MixNet", "RFabric"), strict=True):
        assert T.FAMILIES[family] is getattr(T, name) and name in T.__all__
