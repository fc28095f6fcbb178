"""Lower bounds from a fabric's link table (rfabric.bounds): closed forms, an LP on a graph
whose answer is known, consistency with simulation (a bound is never above a simulated
time), and the fabric-comparison efficiencies of bench/fabric_bounds.py on a sample."""

import numpy as np
import pytest

import rfabric as rf
from rfabric.bounds import FabricGraph, collective_bound, flows_bound

MiB = 1 << 20
B = 200e9 / 8  # bytes/s of a 200 Gb/s NIC


class Dumbbell(rf.Topology):
    """Two leaves of ``servers_per_leaf`` 4-GPU servers, joined by ``trunks`` links."""

    family = "dumbbell_bounds"

    def __init__(self, servers_per_leaf=2, trunks=1, **kw):
        super().__init__(8 * servers_per_leaf, "200Gbps", gpus_per_server=4, **kw)
        self.per_leaf, self.trunks = servers_per_leaf, trunks

    def build(self, net):
        gpu = net.add_servers(self.servers, 4)
        leaf = net.add_nodes("eps", 2, prefix="leaf")
        net.add_links(gpu.ravel(), np.repeat(leaf, 4 * self.per_leaf), rate=self.link_bps, kind="nic")
        net.add_links(
            np.full(self.trunks, leaf[0]), np.full(self.trunks, leaf[1]), rate=self.link_bps, kind="trunk"
        )


def test_fat_tree_bounds_are_the_nic_bounds(ft128):
    s, m, size = 16, 8, 256 * MiB
    g = FabricGraph.of(ft128)
    assert g.cut_capacity(np.arange(8)) == pytest.approx(m * B)  # one server: its 8 NICs
    exact = {
        "all_reduce": 2 * (s - 1) / s * size / (m * B),
        "all_gather": (128 - 8) / 128 * size / (m * B),
        "reduce_scatter": (128 - 8) / 128 * size / (m * B),
        "all_to_all": 8 * 120 * size / 128 / (m * B),
        "broadcast": size / (m * B),
    }
    for kind, t in exact.items():
        assert collective_bound(ft128, kind, size, graph=g).time_s == pytest.approx(t, rel=1e-6), kind


@pytest.mark.parametrize("trunks", [1, 2])
def test_flow_lp_on_a_dumbbell_equals_the_trunk_bound(trunks):
    fab = Dumbbell(servers_per_leaf=2, trunks=trunks)
    # every GPU of leaf 0 sends 8 MiB to a GPU of leaf 1: 8 flows over `trunks` links
    flows = rf.Flows(np.arange(8), np.arange(8, 16), 8 * MiB)
    b = flows_bound(fab, flows)
    assert b.parts["flow_lp"] == pytest.approx(8 * 8 * MiB / (trunks * B), rel=1e-6)
    assert b.binding in ("flow_lp", "partition")
    # all-to-all: half of every rank's off-leaf bytes cross the trunk
    a2a = collective_bound(fab, "all_to_all", 16 * MiB)
    cross = 8 * 8 * (16 * MiB / 16)  # 8 ranks x 8 peers on the other leaf x size/n, each way
    assert a2a.parts["flow_lp"] == pytest.approx(cross / (trunks * B), rel=1e-6)


def test_oversubscription_raises_the_bound(ft128):
    ftos = rf.topologies.FatTree(128, oversubscription=3)
    for kind in ("all_gather", "all_to_all"):
        assert (
            collective_bound(ftos, kind, 64 * MiB).time_s
            > 1.5 * collective_bound(ft128, kind, 64 * MiB).time_s
        )


@pytest.mark.parametrize(
    "fabric,kind",
    [
        ("FatTree", "all_reduce"),
        ("FatTree", "all_to_all"),
        ("RailOptimized", "all_gather"),
        ("TopoOpt", "all_to_all"),
        ("MixNet", "broadcast"),
        ("RFabric", "reduce_scatter"),
    ],
)
def test_bound_never_exceeds_the_simulated_time(fabric, kind):
    fab = getattr(rf.topologies, fabric)(64)
    size = 16 * MiB
    sim = rf.collective(fab, kind, sizes=[size])["time_ps"][0].as_py() * 1e-12
    bound = collective_bound(fab, kind, size).time_s
    assert 0 < bound <= sim


def test_permutation_bound_never_exceeds_the_simulated_time():
    fab = rf.topologies.FatTree(64, oversubscription=3)
    flows = rf.Flows.permutation(64, 4 * MiB, seed=3)
    res = rf.simulate(fab, flows)
    assert 0 < flows_bound(fab, flows).time_s <= res.run["makespan_ps"] * 1e-12


def test_bad_input_is_named(ft128):
    with pytest.raises(rf.SpecError, match="unknown collective 'gather'"):
        collective_bound(ft128, "gather", MiB)
    with pytest.raises(rf.SpecError, match="rank 999"):
        collective_bound(ft128, "all_reduce", MiB, ranks=[0, 999])
    with pytest.raises(rf.SpecError, match="at least two ranks"):
        collective_bound(ft128, "all_reduce", MiB, ranks=[3])


def _efficiency(fab, kind, size, seed=1):
    if kind == "permutation":  # servers deranged, rail-aligned (bench/fabric_bounds.py)
        g = fab.gpus_per_server
        rng = np.random.default_rng(seed)
        while True:
            partner = rng.permutation(fab.servers)
            if not np.any(partner == np.arange(fab.servers)):
                break
        src = np.arange(fab.gpus)
        flows = rf.Flows(src, partner[src // g] * g + src % g, size)
        res = rf.simulate(fab, flows, seed=seed)
        assert res.run["flows_done"] == len(flows)
        return flows_bound(fab, flows, lp=False).time_s / (res.run["makespan_ps"] * 1e-12)
    # the fabric's efficiency: the bound counts its links only, so NCCL's protocol costs (the
    # GPUs' and software's, docs/nccl-model.md) are off, as in bench/fabric_bounds.py
    sim = rf.collective(fab, kind, sizes=[size], seed=seed, nccl_model=False)["time_ps"][0].as_py() * 1e-12
    return collective_bound(fab, kind, size, lp=kind == "all_to_all").time_s / sim


FABRICS_128 = {
    "FT": lambda: rf.topologies.FatTree(128),
    "FT-OS": lambda: rf.topologies.FatTree(128, oversubscription=3),
    "RO": lambda: rf.topologies.RailOptimized(128),
    "TopoOpt": lambda: rf.topologies.TopoOpt(128),
    "MixNet": lambda: rf.topologies.MixNet(128),
    "RFabric": lambda: rf.topologies.RFabric(128),
}


# (fabric, kind, size, floor): cells of bench/fabric_bounds.py's table at 128 GPUs. Most
# reach the 0.8 at 32 MiB already; the MixNet ring cell is checked at the routing page's
# 256 MiB (docs/explanation/routing.md). The last two are its explained misses, pinned so they cannot worsen:
# a 128-GPU chain broadcast pays a 127-hop pipeline fill, and NCCL's flat rings cross each
# 3:1 ToR's uplinks with 2 S each way where the partition bound counts S.
EFFICIENCY_CELLS = [
    ("RO", "all_to_all", 32 * MiB, 0.8),
    ("RFabric", "all_to_all", 32 * MiB, 0.8),
    ("RO", "permutation", 32 * MiB, 0.8),
    ("RFabric", "permutation", 32 * MiB, 0.8),
    ("TopoOpt", "all_reduce", 32 * MiB, 0.8),
    ("FT-OS", "reduce_scatter", 32 * MiB, 0.8),
    ("MixNet", "all_gather", 256 * MiB, 0.8),
    ("FT", "broadcast", 256 * MiB, 0.75),
    ("FT-OS", "all_reduce", 32 * MiB, 0.45),
]


@pytest.mark.parametrize("fabric,kind,size,floor", EFFICIENCY_CELLS)
def test_fabric_comparison_efficiency_sample(fabric, kind, size, floor):
    """Simulated time against the fabric's own lower bound: at least the cell's floor, and
    never above 1 (the bound is a bound)."""
    eff = _efficiency(FABRICS_128[fabric](), kind, size)
    assert floor <= eff <= 1.0, f"{fabric} {kind}: efficiency {eff:.3f}"
