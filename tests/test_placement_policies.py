"""Placement policies (rf.place, issue 26 item 2): invariants of every policy, and each
policy's defining property checked against the fabric's structure computed another way (from
node names, ``NetworkSpec.nic_link`` and the families' documented formulas), not from
``rf.placement.gpu_groups``."""

import re

import numpy as np
import pytest

import rfabric as rf
from rfabric.placement import POLICIES, footprint, gpu_groups

T = rf.topologies


class TwoLeaves(rf.Topology):
    """A user's fabric whose GPU ids do not follow its ToRs: server ``s`` (4 GPUs) hangs off
    leaf ``s mod 2``, both leaves under two spines."""

    family = "two_leaves"

    def __init__(self):
        super().__init__(gpus=32, gpus_per_server=4)

    def build(self, net):
        gpu = net.add_servers(8, 4)
        leaf = net.add_nodes("eps", 2, prefix="leaf")
        spine = net.add_nodes("eps", 2, prefix="spine")
        net.add_links(gpu.ravel(), np.repeat(leaf[np.arange(8) % 2], 4), rate=self.link_bps, kind="nic")
        net.add_links(np.repeat(leaf, 2), np.tile(spine, 2), rate=self.link_bps, kind="leaf-spine")


class Uneven(rf.Topology):
    """Two servers of 8 GPUs and four of 4 on one switch: rails 4-7 exist on two servers only."""

    family = "uneven"

    def __init__(self):
        super().__init__(gpus=32, gpus_per_server=4)

    def build(self, net):
        big = net.add_servers(2, 8)
        small = net.add_servers(4, 4)
        sw = net.add_nodes("eps", 1, prefix="sw")
        net.add_links(np.concatenate([big.ravel(), small.ravel()]), sw, rate=self.link_bps, kind="nic")


FABRICS = {
    "FT": lambda: T.FatTree(128),
    "FT-OS": lambda: T.FatTree(128, oversubscription=3),
    "RO": lambda: T.RailOptimized(128),
    "RFabric": lambda: T.RFabric(256),
    "TopoOpt": lambda: T.TopoOpt(128),
    "MixNet": lambda: T.MixNet(128),
    "TwoLeaves": TwoLeaves,
}
_built: dict = {}


def fabric(name):
    if name not in _built:
        _built[name] = FABRICS[name]()
    return _built[name]


def nic_peer(spec, g):
    """Node row at the far end of GPU ``g``'s NIC link."""
    link = spec.nic_link(g)
    a, b = int(spec.links.src[link]), int(spec.links.dst[link])
    return b if a == spec.gpu_nodes[g] else a


def oracle(name):
    """(ToR label, PoD label, rail) per GPU, from names and the families' formulas."""
    fab = fabric(name)
    spec = fab.to_spec()
    n = spec.num_gpus
    names = spec.nodes.name
    tor = np.empty(n, dtype=object)
    pod = np.zeros(n, dtype=np.int64)
    rail = np.arange(n) % fab.gpus_per_server  # add_servers numbers GPUs server by server
    for g in range(n):
        peer = str(names[nic_peer(spec, g)]) if name not in ("TopoOpt",) else None
        if name in ("FT", "FT-OS"):
            t = int(re.fullmatch(r"tor(\d+)", peer).group(1))
            down, _ = fab.tor_ports
            assert t == g // down  # FatTree's documented NIC wiring
            tor[g], pod[g] = peer, t // (fab.radix // 2)
        elif name == "RO":
            grp, j = map(int, re.fullmatch(r"tor(\d+)\.r(\d+)", peer).groups())
            tor[g], pod[g], rail[g] = peer, 0, j  # two tiers at 128 GPUs: one PoD
        elif name == "RFabric":
            p, _, j = map(int, re.fullmatch(r"pod(\d+)/tor(\d+)\.r(\d+)", peer).groups())
            tor[g], pod[g], rail[g] = peer, p, j
        elif name == "TopoOpt":
            tor[g] = f"server{g // 8}"  # no packet switch: the server stands in
        elif name == "MixNet":
            # OCS-side GPUs (0..5 of each server) reach the packet fabric through GPU 6's ToR
            tor[g] = str(names[nic_peer(spec, g - g % 8 + 6)])
            assert peer.startswith("tor") == (g % 8 >= 6)
        elif name == "TwoLeaves":
            tor[g] = peer
            assert peer == f"leaf{(g // 4) % 2}"
    return tor, pod, rail


def relabel(labels):
    return np.unique(np.asarray(labels).astype(str), return_inverse=True)[1].ravel()


def same_partition(a, b):
    """Two labelings describe the same grouping of GPUs."""
    pairs = set(zip(relabel(a).tolist(), relabel(b).tolist(), strict=True))
    return len(pairs) == len(set(relabel(a).tolist())) == len(set(relabel(b).tolist()))


@pytest.mark.parametrize("name", list(FABRICS))
def test_groups_match_the_fabric_structure(name):
    tor, pod, rail = oracle(name)
    g = gpu_groups(fabric(name))
    assert same_partition(g.tor, tor)
    assert same_partition(g.pod, pod)
    assert np.array_equal(g.rail, rail)
    spec = fabric(name).to_spec()
    assert same_partition(g.server, spec.nodes.server[spec.gpu_nodes])


def test_groups_of_large_fabrics():
    """Fat-tree pods of k/2 ToRs; a rail-optimized fabric's rail-aligned pods joined by their
    servers (groups 0-7 and 8-15 at 1024 GPUs); RFabric's PoDs of 16 servers; a leaf-spine or
    direct-connect fabric is one PoD."""
    g = gpu_groups(T.FatTree(512))
    assert g.tors == 64 and np.array_equal(g.pod, np.arange(512) // 64)
    g = gpu_groups(T.RailOptimized(1024))
    assert g.tors == 128 and np.array_equal(g.pod, np.arange(1024) // 512)
    g = gpu_groups(T.RFabric(512))
    assert np.array_equal(g.pod, np.arange(512) // 128)
    assert gpu_groups(T.TopoOpt(256)).pods == 1 and gpu_groups(T.RailOptimized(128)).pods == 1


SIZES = [[128], [40, 24, 64], [8, 8, 8, 8], [3, 17, 50], [1, 127]]


@pytest.mark.parametrize("name", list(FABRICS))
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_places_disjoint_jobs_of_the_right_size(name, policy):
    fab = fabric(name)
    n = fab.gpus
    for sizes in SIZES:
        sizes = [s * n // 128 for s in sizes]
        sizes = [s for s in sizes if s > 0]
        if policy == "rail":
            # rank r of every job needs rail r mod rails: it fits when no rail is asked for
            # more GPUs than it has
            rails = fab.gpus_per_server
            need = sum(np.bincount(np.arange(s) % rails, minlength=rails) for s in sizes)
            if (need > n // rails).any():
                with pytest.raises(rf.SpecError, match="policy 'rail'.* no free GPU left on rail"):
                    rf.place(fab, sizes, policy)
                continue
        jobs = rf.place(fab, sizes, policy)
        assert [len(j) for j in jobs] == sizes
        allg = np.concatenate(jobs)
        assert all(j.dtype == np.int64 for j in jobs)
        assert np.unique(allg).size == allg.size
        assert allg.min() >= 0 and allg.max() < n


def min_groups(capacity, size):
    """Fewest groups (a partition of the GPUs, with these free capacities) that hold ``size``."""
    c = np.cumsum(np.sort(np.asarray(capacity))[::-1])
    return int(np.searchsorted(c, size) + 1)


@pytest.mark.parametrize("name", list(FABRICS))
@pytest.mark.parametrize("size", [5, 20, 24, 64, 100])
def test_packed_fills_servers_then_tors_then_pods(name, size):
    fab = fabric(name)
    size = min(size, fab.gpus)
    tor, pod, _ = oracle(name)
    spec = fab.to_spec()
    server = spec.nodes.server[spec.gpu_nodes]
    (job,) = rf.place(fab, [size], "packed")
    assert np.unique(server[job]).size == min_groups(np.bincount(server), size)
    assert np.unique(pod[job]).size == min_groups(np.bincount(relabel(pod)), size)
    if name in ("FT", "FT-OS", "TwoLeaves", "TopoOpt", "MixNet"):
        # ToRs hold whole servers (or halves, FT-OS): the fewest ToRs too. On rail-aligned
        # fabrics every server spans all rail ToRs, so filling servers first costs ToRs.
        assert np.unique(tor[job].astype(str)).size == min_groups(np.bincount(relabel(tor)), size)
    # jobs placed one after another take consecutive GPUs of the same order
    jobs = rf.place(fab, [size // 2 or 1, size - (size // 2 or 1) or 1], "packed")
    assert np.array_equal(np.concatenate(jobs)[: len(job)], job[: sum(map(len, jobs))])


def test_packed_follows_the_spec_not_the_gpu_ids():
    (job,) = rf.place(TwoLeaves(), [16], "packed")
    assert job.tolist() == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]  # leaf0 only


@pytest.mark.parametrize("name", ["FT", "RO", "RFabric", "TopoOpt", "TwoLeaves"])
def test_spread_balances_each_job_over_the_tors(name):
    fab = fabric(name)
    tor = relabel(oracle(name)[0])
    n = fab.gpus
    for sizes in ([n // 2, n // 2], [n // 4, n // 8, 3 * n // 8], [7, 13, n // 4]):
        for job in rf.place(fab, sizes, "spread"):
            counts = np.bincount(tor[job], minlength=tor.max() + 1)
            assert counts.max() - counts.min() <= 1, (sizes, counts)


def test_spread_on_unequal_tors():
    """FT-OS at 128 GPUs: ten ToRs of 12 GPUs and one of 8; a job of 88 takes 8 of each."""
    tor = relabel(oracle("FT-OS")[0])
    (job,) = rf.place(fabric("FT-OS"), [88], "spread")
    assert np.bincount(tor[job]).tolist() == [8] * 11
    # jobs of 64 and 56: the 8-GPU ToR runs out during the second job, which
    # then deals its ranks over the others; among ToRs with GPUs left, counts differ by <= 1
    cap = np.bincount(tor)
    used = np.zeros_like(cap)
    for job in rf.place(fabric("FT-OS"), [64, 56], "spread"):
        counts = np.bincount(tor[job], minlength=cap.size)
        used += counts
        room = used < cap
        if room.any():
            assert counts[room].max() - counts[room].min() <= 1
    for job in rf.place(fabric("FT-OS"), [40, 40], "spread"):  # no ToR runs out
        counts = np.bincount(tor[job], minlength=cap.size)
        assert counts.max() - counts.min() <= 1


def test_spread_interleaves_two_jobs_on_every_tor():
    tor = relabel(oracle("FT")[0])
    a, b = rf.place(fabric("FT"), [64, 64], "spread")
    assert set(tor[a]) == set(tor[b]) == set(range(16))
    rows = footprint(fabric("FT"), [a, b])
    assert [r["shared_tors"] for r in rows] == [16, 16]
    rows = footprint(fabric("FT"), rf.place(fabric("FT"), [64, 64], "packed"))
    assert [r["shared_tors"] for r in rows] == [0, 0] and [r["pods"] for r in rows] == [1, 1]


@pytest.mark.parametrize("name", ["FT", "RO", "RFabric", "TopoOpt", "TwoLeaves", "MixNet"])
def test_rail_puts_rank_r_on_rail_r_mod_rails(name):
    fab = fabric(name)
    _, _, rail = oracle(name)
    spec = fab.to_spec()
    server = spec.nodes.server[spec.gpu_nodes]
    rails = fab.gpus_per_server
    for sizes in ([4, 12, fab.gpus // 8, 8], [3, 3, 3], [fab.gpus // 2, fab.gpus // 2]):
        for job in rf.place(fab, sizes, "rail"):
            assert np.array_equal(rail[job], np.arange(len(job)) % rails)
            # a block of `rails` ranks on one server where one is free
            for b in range(0, len(job) // rails * rails, rails):
                assert np.unique(server[job[b : b + rails]]).size == 1


def test_rail_with_uneven_servers_and_when_a_rail_runs_out():
    fab = Uneven()
    a, b = rf.place(fab, [16, 4], "rail")
    g = gpu_groups(fab)
    assert np.array_equal(g.rail[a], np.arange(16) % 8) and g.rails == 8
    with pytest.raises(
        rf.SpecError, match=r"job 1.s rank 4 needs rail 4 .* no free GPU left on rail 4 \(2 GPUs on it\)"
    ):
        rf.place(fab, [16, 8], "rail")


def test_pod_gives_each_job_its_own_pod():
    fab = T.FatTree(512)  # 8 pods of 64 GPUs
    pod = np.arange(512) // 64  # FatTree: ToR g // 8, pods of 8 ToRs
    jobs = rf.place(fab, [64, 30, 50, 64, 1], "pod")
    pods = [set(pod[j].tolist()) for j in jobs]
    assert all(len(p) == 1 for p in pods)
    assert len(set().union(*pods)) == len(jobs)
    # more jobs than PoDs: each still inside one PoD; larger than a PoD: the fewest PoDs
    jobs = rf.place(fabric("FT"), [20, 20, 20, 20], "pod")
    assert [np.unique(np.asarray(j) // 64).size for j in jobs] == [1, 1, 1, 1]
    (big,) = rf.place(fabric("FT"), [100], "pod")
    assert np.unique(big // 64).size == 2
    rp = rf.place(T.RFabric(512), [128, 100, 128], "pod")
    assert [np.unique(j // 128).tolist() for j in rp] == [[0], [1], [2]]


def test_random_is_seeded():
    fab = fabric("FT")
    a = rf.place(fab, [10, 20], "random", seed=3)
    b = rf.place(fab, [10, 20], "random", seed=3)
    c = rf.place(fab, [10, 20], "random", seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert np.array_equal(rf.place(fab, [10], "random")[0], rf.place(fab, [10], "random", seed=0)[0])


def test_explicit_placement_is_checked():
    fab = fabric("FT")
    jobs = rf.place(fab, [2, 3], [[5, 4], [0, 1, 2]])
    assert [j.tolist() for j in jobs] == [[5, 4], [0, 1, 2]]
    assert rf.place(fab, None, [[7]])[0].tolist() == [7]
    bad = [
        ([[0, 1], [1, 2]], None, r"job 1: GPU 1 is already job 0's \(jobs overlap\)"),
        ([[0, 128]], None, r"job 0: GPU 128 does not exist \(fat_tree-128 has GPUs 0..127\)"),
        ([[3, 3]], None, r"job 0: GPU 3 is listed twice"),
        ([[0, 1]], [3], r"job 0: 2 GPUs listed, sizes\[0\] is 3"),
        ([[0, 1]], [2, 2], r"2 job sizes but 1 GPU lists"),
        ([[0.5]], None, r"job 0: expected a non-empty list of integer GPU ids"),
        ([], None, r"an explicit placement is a list of GPU id lists"),
    ]
    for lists, sizes, msg in bad:
        with pytest.raises(rf.SpecError, match=msg):
            rf.place(fab, sizes, lists)


def test_bad_sizes_and_policies():
    fab = fabric("FT")
    with pytest.raises(rf.SpecError, match=r"the jobs need 130 GPUs \(100 \+ 30\), the fabric has 128"):
        rf.place(fab, [100, 30], "packed")
    with pytest.raises(rf.SpecError, match=r"unknown policy 'packd' \(known: 'packed', 'spread'"):
        rf.place(fab, [4], "packd")
    with pytest.raises(rf.SpecError, match=r"sizes\[1\] \(GPUs of job 1\)"):
        rf.place(fab, [4, 0], "packed")
    with pytest.raises(rf.SpecError, match="sizes must be a list of GPU counts"):
        rf.place(fab, "64", "packed")
    with pytest.raises(rf.SpecError, match="sizes is empty"):
        rf.place(fab, [], "spread")
    with pytest.raises(rf.SpecError, match="expected a Topology or NetworkSpec, got list"):
        rf.place([1, 2], [4])
    assert rf.place(fab.to_spec(), 4)[0].tolist() == [0, 1, 2, 3]  # an int is one job


def test_a_bare_spec_without_servers():
    """GPUs with no server (-1) are servers of their own, all on rail 0; two switches joined
    directly are one PoD."""
    nodes = rf.spec.NodeTable.build(["gpu"] * 4 + ["eps"] * 2, [f"n{i}" for i in range(6)], [-1] * 6, [0] * 6)
    links = rf.spec.LinkTable.build([0, 1, 2, 3, 4], [4, 4, 5, 5, 5], 10**11, 10**6, 1 << 20, "l")
    spec = rf.NetworkSpec.from_tables(nodes, links, name="bare")
    g = gpu_groups(spec)
    assert g.servers == 4 and g.rails == 1 and g.tors == 2 and g.pods == 1
    assert [j.tolist() for j in rf.place(spec, [2, 2], "spread")] == [[0, 2], [1, 3]]
    assert [j.tolist() for j in rf.place(spec, [2, 2], "packed")] == [[0, 1], [2, 3]]
    assert [j.tolist() for j in rf.place(spec, [3], "rail")] == [[0, 1, 2]]


@pytest.mark.parametrize("name", ["FT", "FT-OS", "RO", "RFabric", "MixNet"])
def test_taken_gpus_are_placed_around(name):
    """Jobs placed one call at a time, each around the GPUs of those before (``taken``), land
    where one call placing them all puts them, for the policies without a cursor; every
    policy avoids the taken GPUs."""
    fab = fabric(name)
    sizes = [20, 12, 40]
    for policy in ("packed", "rail", "pod"):
        together = rf.place(fab, sizes, policy)
        taken: list[int] = []
        for size, want in zip(sizes, together, strict=True):
            (got,) = rf.place(fab, [size], policy, taken=taken)
            assert np.array_equal(got, want), policy
            taken += got.tolist()
    busy = list(range(3, fab.gpus, 5))
    for policy in POLICIES:
        jobs = rf.place(fab, [16, 16], policy, taken=busy)
        allg = np.concatenate(jobs)
        assert not np.isin(allg, busy).any() and np.unique(allg).size == 32
    tor = relabel(oracle(name)[0]) if name != "MixNet" else None
    if tor is not None:
        (job,) = rf.place(fab, [24], "spread", taken=busy)
        left = np.bincount(np.delete(tor, busy), minlength=tor.max() + 1)
        counts = np.bincount(tor[job], minlength=tor.max() + 1)
        room = counts < left
        assert counts[room].max() - counts[room].min() <= 1


def test_taken_errors():
    fab = fabric("FT")
    with pytest.raises(
        rf.SpecError, match=r"the jobs need 100 GPUs \(100\), the fabric has 128, 30 of them taken"
    ):
        rf.place(fab, [100], "packed", taken=range(30))
    with pytest.raises(rf.SpecError, match=r"job 0: GPU 3 is in taken"):
        rf.place(fab, None, [[2, 3]], taken=[3])
    with pytest.raises(rf.SpecError, match=r"GPU 200 does not exist"):
        rf.place(fab, [4], "packed", taken=[200])
    assert rf.place(fab, [4], "packed", taken=[])[0].tolist() == [0, 1, 2, 3]


def test_sites_keep_each_sites_pods():
    ft, rfab = rf.topologies.FatTree(128), rf.topologies.RFabric(256)
    alone = [rf.placement.gpu_groups(f).pods for f in (ft, rfab)]
    s = rf.topologies.Sites({"train": ft, "gen": rfab}, link="80Gbps", latency="1ms")
    g = rf.placement.gpu_groups(s)
    assert g.pods == sum(alone)
    assert np.bincount(g.pod[128:]).max() < 256  # the RFabric site is not one PoD


def test_gpu_type_places_each_pool_on_its_type():
    from conftest import tiny_rl_trace

    fab = rf.topologies.FatTree(128, gpu=[(32, "H20"), (64, "H800"), (32, "H20")])
    types = fab.to_spec().gpu_types
    for policy in ("packed", "spread", "random", "pod"):
        (g,) = rf.place(fab, 48, policy, gpu_type="H20")
        assert set(types[g]) == {"H20"} and len(set(g.tolist())) == 48
    train = rf.place(fab, 32, "spread", gpu_type="H800")[0]
    gen = rf.place(fab, 32, "packed", gpu_type="H20")[0]
    t = tiny_rl_trace(train_hardware="H800", gen_hardware="H20")
    res = rf.simulate(fab, rf.Job(t, gpus=np.concatenate([train, gen])), backend="flow")
    assert res.jobs["complete"][0].as_py()
    with pytest.raises(rf.SpecError, match=r"no GPU of that type \(its types: H20, H800\)"):
        rf.place(fab, 8, gpu_type="H100")
    with pytest.raises(rf.SpecError):
        rf.place(fab, 65, gpu_type="H20")  # only 64 H20
