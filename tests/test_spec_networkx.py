"""NetworkSpec.to_networkx(): the fabric as a networkx MultiDiGraph (the ``graph`` extra).

Oracles: the spec's own node and link tables (every node and both directions of every link
carry that row's values), and the engine's forwarding, a second implementation of the same
fabric: on a fat tree its path between two GPUs is a walk along the graph's edges, as long
as networkx's shortest path.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import rfabric as rf
from rfabric.spec import CIRCUIT_KINDS


@pytest.fixture(
    scope="module",
    params=[
        lambda: rf.topologies.FatTree(gpus=16, radix=16),
        lambda: rf.topologies.RailOptimized(32),
        lambda: rf.topologies.MixNet(16),
        lambda: rf.topologies.RFabric(16),
    ],
    ids=["FatTree", "RailOptimized", "MixNet", "RFabric"],
)
def spec(request):
    return request.param().to_spec()


def test_nodes_and_links_are_the_spec_tables(spec):
    g = spec.to_networkx()
    assert isinstance(g, nx.MultiDiGraph)
    assert g.graph == {
        "name": spec.name,
        "host_forwarding": spec.host_forwarding,
        "pxn": spec.pxn,
        "deadlock_free": spec.deadlock_free,
        "routing": spec.routing,
    }
    nodes, links = spec.nodes, spec.links
    assert sorted(g.nodes) == list(range(spec.num_nodes))
    kinds = nodes.kind_names()
    for i, data in g.nodes(data=True):
        assert data["kind"] == kinds[i] and data["name"] == nodes.name[i]
        assert data["server"] == nodes.server[i] and data["latency_ps"] == nodes.latency_ps[i]
    gpus = [n for n, k in g.nodes(data="gpu") if k >= 0]
    assert gpus == spec.gpu_nodes.tolist()
    assert [g.nodes[n]["gpu"] for n in gpus] == list(range(spec.num_gpus))
    # two directed edges per link, keyed by its row, both with the row's values
    assert g.number_of_edges() == 2 * spec.num_links
    for row in range(spec.num_links):
        u, v = int(links.src[row]), int(links.dst[row])
        for a, b in ((u, v), (v, u)):
            e = g.edges[a, b, row]
            assert e == {
                "link": row,
                "kind": links.kind[row],
                "rate_bps": links.rate_bps[row],
                "latency_ps": links.latency_ps[row],
                "buffer_bytes": links.buffer_bytes[row],
            }
            assert type(e["rate_bps"]) is int  # plain Python values, not numpy scalars
    # degree of a node = the links that end at it (a self-loop is refused by validation)
    ends = np.bincount(np.concatenate([links.src, links.dst]), minlength=spec.num_nodes)
    assert [g.out_degree(n) for n in range(spec.num_nodes)] == ends.tolist()
    # optical devices are nodes that their port links end at, never an edge of their own
    optical = [n for n, k in g.nodes(data="kind") if k in CIRCUIT_KINDS]
    assert all(g.degree(n) > 0 for n in optical)
    assert nx.is_weakly_connected(g)


@pytest.mark.parametrize("gpus", [16, 64])
def test_forwarding_paths_are_shortest_walks_on_a_fat_tree(gpus):
    spec = rf.topologies.FatTree(gpus=gpus, radix=16).to_spec()
    g = spec.to_networkx()
    fwd = rf.Forwarding(spec)
    node = spec.gpu_nodes
    for src, dst in [(0, gpus - 1), (3, gpus // 2), (1, 9), (0, 5)]:
        path = fwd.path(src, dst)
        at = int(node[src])
        for row in path.tolist():  # each link of the path leaves the node the last one reached
            nxt = [v for _, v, k in g.out_edges(at, keys=True) if k == row]
            assert len(nxt) == 1, (src, dst, row)
            at = nxt[0]
        assert at == node[dst]
        # a fat tree routes minimally: as many hops as networkx's shortest path
        assert len(path) == nx.shortest_path_length(g, int(node[src]), int(node[dst]))
