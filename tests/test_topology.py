"""Fat-tree structure against closed-form counts; presets; user subclasses.

Golden snapshots of every fabric live in test_fabrics.py."""

from pathlib import Path

import numpy as np
import pytest

import rfabric as rf

TOPOLOGIES = Path(__file__).parent.parent / "topologies"


@pytest.mark.parametrize("k", [4, 8, 16])
def test_full_fat_tree_counts_match_al_fares(k):
    gpus = k**3 // 4
    fab = rf.topologies.FatTree(gpus=gpus, radix=k, gpus_per_server=min(8, k // 2))
    s = fab.summary()
    # k pods x k/2 ToRs, k pods x k/2 aggs, (k/2)^2 cores; every switch uses all k ports
    assert s["nodes_eps"] == k * k // 2 + k * k // 2 + (k // 2) ** 2
    assert s["links_nic"] == gpus and s["links_tor-agg"] == gpus and s["links_agg-core"] == gpus
    spec = fab.to_spec()
    sw = np.flatnonzero(spec.nodes.kind == 2)
    deg = np.bincount(np.concatenate([spec.links.src, spec.links.dst]), minlength=spec.num_nodes)
    assert np.all(deg[sw] == k)


@pytest.mark.parametrize("os,down,up", [(1, 8, 8), (3, 12, 4), (7, 14, 2)])
def test_oversubscription_splits_tor_ports(os, down, up):
    fab = rf.topologies.FatTree(gpus=512, radix=16, oversubscription=os)
    assert fab.tor_ports == (down, up)
    spec = fab.to_spec()
    names = spec.nodes.name
    tors = [i for i, n in enumerate(names) if n.startswith("tor")]
    deg_down = np.bincount(spec.links.dst[spec.links.kind == "nic"], minlength=spec.num_nodes)
    deg_up = np.bincount(spec.links.src[spec.links.kind == "tor-agg"], minlength=spec.num_nodes)
    assert deg_up[tors].min() == up and deg_up[tors].max() == up
    assert deg_down[tors].max() == down
    # bandwidth ratio down:up at a full ToR is the oversubscription
    assert deg_down[tors[0]] / deg_up[tors[0]] == os


def test_partial_pod_keeps_aggregation_and_core_whole():
    fab = rf.topologies.FatTree(gpus=96, radix=16)  # 12 ToRs: one full pod + 4 ToRs of a second
    s = fab.summary()
    assert s["nodes_eps"] == 12 + 2 * 8 + 64
    assert s["links_tor-agg"] == 12 * 8 and s["links_agg-core"] == 2 * 8 * 8


def test_nics_fill_tors_in_gpu_order():
    fab = rf.topologies.FatTree(gpus=64, radix=8)  # 4 NICs per ToR: a server spans two ToRs
    spec = fab.to_spec()
    nic = spec.links.kind == "nic"
    gpu_of_node = {int(n): g for g, n in enumerate(spec.gpu_nodes)}
    tor_of_gpu = {
        gpu_of_node[int(a)]: spec.nodes.name[b]
        for a, b in zip(spec.links.src[nic], spec.links.dst[nic], strict=True)
    }
    assert [tor_of_gpu[g] for g in range(8)] == ["tor0"] * 4 + ["tor1"] * 4


@pytest.mark.parametrize("path", sorted(TOPOLOGIES.glob("*.toml")), ids=lambda p: p.name)
def test_every_preset_loads_and_validates(path):
    fab = rf.topologies.load(path)
    spec = fab.to_spec()
    assert spec.num_gpus == fab.gpus
    assert str(fab.gpus) in path.stem


def test_user_subclass_gets_simulation_for_free():
    class Star(rf.Topology):
        family = "star_test"

        def build(self, net):
            gpu = net.add_servers(self.servers, self.gpus_per_server)
            hub = net.add_nodes("eps", 1, prefix="hub")
            net.add_links(gpu.ravel(), hub[0], rate=self.link_bps, kind="nic")

    fab = Star(gpus=16)
    res = rf.simulate(fab, rf.Flows([0], [8], 9154))
    # one full frame over two links through one switch: 2 x serialization + 2 x 1us + 0.8us
    assert res.flows["fct_ps"][0].as_py() == 2 * 9216 * 40 + 2 * 10**6 + 800_000
    rf.topologies.register(Star)
    assert rf.topologies.FAMILIES["star_test"] is Star
    del rf.topologies.FAMILIES["star_test"]


def test_topologies_is_the_one_name_of_the_fabrics_module():
    """rf.topologies is the module (also importable as rfabric.topologies); rf.topology, its
    old second name, still works for a release with a DeprecationWarning."""
    from rfabric.topologies import FatTree

    assert FatTree is rf.topologies.FatTree
    assert "topology" not in rf.__all__ and "topologies" in rf.__all__
    with pytest.warns(DeprecationWarning, match="rf.topology is deprecated: the module is rf.topologies"):
        assert rf.topology is rf.topologies
