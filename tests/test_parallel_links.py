"""Parallel links (bundles) between two switches carry what as many single links would.

Oracle: a leaf-spine user fabric (docs/tutorials/own-fabric.md) whose leaves reach ``s`` spines
over bundles of ``k`` links has the same bisection as one with ``k x s`` spines over single
links; every routing mode, on both backends, must give it the same all_reduce bus bandwidth
and the same permutation completion. Before, a bundle below the first hop collapsed onto one
of its links under D-mod-K (the spine's digit is the destination leaf's rank, the same for
every GPU under that leaf): 4-link bundles ran all_reduce at a third of the bandwidth.
"""

from collections import Counter

import numpy as np
import pytest

import rfabric as rf

MODES = ["dmodk", "flow", "packet", "adaptive", "multipath"]
#: modes whose choices read no queue: a bundle fabric takes exactly the single-link fabric's
#: decisions (the leaf's choice among k x s uplinks fixes the spine and the link down)
EXACT = {"dmodk", "flow", "packet"}


class LeafSpine(rf.Topology):
    """2-tier leaf-spine: one leaf per server, every leaf to every spine over ``bundle``
    parallel links, listed spine by spine (``order="repeat"``) or round-robin ("tile")."""

    family = "leaf_spine_bundles"

    def __init__(self, gpus, link="200Gbps", spines=8, bundle=1, order="repeat", **kw):
        super().__init__(gpus, link, **kw)
        self.spines, self.bundle, self.order = spines, bundle, order

    def build(self, net):
        gpu = net.add_servers(self.servers, self.gpus_per_server)
        leaf = net.add_nodes("eps", self.servers, prefix="leaf")
        spine = net.add_nodes("eps", self.spines, prefix="spine")
        net.add_links(gpu.ravel(), np.repeat(leaf, self.gpus_per_server), rate=self.link_bps, kind="nic")
        ups = np.repeat(spine, self.bundle) if self.order == "repeat" else np.tile(spine, self.bundle)
        net.add_links(
            np.repeat(leaf, len(ups)), np.tile(ups, self.servers), rate=self.link_bps, kind="leaf-spine"
        )


GPUS = 32
SINGLE = LeafSpine(GPUS, spines=8)
BUNDLED = {
    "2x4 repeat": LeafSpine(GPUS, spines=2, bundle=4),
    "2x4 tile": LeafSpine(GPUS, spines=2, bundle=4, order="tile"),
    "1x8": LeafSpine(GPUS, spines=1, bundle=8),
}


def test_the_fabrics_have_the_same_bisection():
    # the independent capacity oracle: equal cut capacities, so equal lower bounds
    perm = rf.Flows.permutation(GPUS, 4 << 20, seed=3)
    ref = rf.bounds.flows_bound(SINGLE, perm, lp=False).time_s
    for fab in BUNDLED.values():
        spec = fab.to_spec()
        assert spec.num_links == SINGLE.to_spec().num_links
        assert rf.bounds.flows_bound(fab, perm, lp=False).time_s == pytest.approx(ref, rel=1e-12)


def _runs(fab, ecmp, backend):
    busbw = rf.collective(fab, "all_reduce", sizes=["4MiB"], ecmp=ecmp, backend=backend)["busbw_GBps"][0]
    res = rf.simulate(fab, rf.Flows.permutation(GPUS, 4 << 20, seed=3), ecmp=ecmp, backend=backend)
    assert res.run["flows_done"] == GPUS
    return busbw.as_py(), res.run["makespan_ps"]


@pytest.mark.parametrize("backend", ["packet", "flow"])
@pytest.mark.parametrize("ecmp", MODES)
def test_bundles_carry_what_single_links_do(ecmp, backend):
    ref_bw, ref_done = _runs(SINGLE, ecmp, backend)
    for label, fab in BUNDLED.items():
        bw, done = _runs(fab, ecmp, backend)
        if ecmp in EXACT:
            assert (bw, done) == (ref_bw, ref_done), label
        else:  # adaptive choices read live queues, which the bundle's spine sees differently
            assert bw == pytest.approx(ref_bw, rel=0.02), label
            assert done == pytest.approx(ref_done, rel=0.02), label


def _port_loads(fwd, pairs, flow_hash=0):
    """Paths per port over ``pairs``."""
    load = Counter()
    for s, d in pairs:
        load.update(fwd.ports(s, d, flow_hash).tolist())
    return load


def test_dmodk_balances_an_all_to_all_over_every_bundled_link():
    # analytical: with D-mod-K on a non-blocking leaf-spine, each of a leaf's 8 up links
    # and each link down into it carries exactly 1/8 of the leaf's off-leaf pairs
    fab = BUNDLED["2x4 repeat"]
    fwd = rf.Forwarding(fab)
    spec = fab.to_spec()
    pairs = [(s, d) for s in range(GPUS) for d in range(GPUS) if s // 8 != d // 8]
    load = _port_loads(fwd, pairs)
    fabric_links = np.flatnonzero(spec.links.kind.astype(str) == "leaf-spine")
    per_port = [load[2 * int(link) + way] for link in fabric_links for way in (0, 1)]
    assert set(per_port) == {(GPUS - 8) * 8 // 8}


def test_a_failed_link_of_a_bundle_leaves_every_pair_reachable():
    fab = BUNDLED["2x4 tile"]
    fwd = rf.Forwarding(fab)
    spec = fab.to_spec()
    fabric_links = np.flatnonzero(spec.links.kind.astype(str) == "leaf-spine")
    fwd.fail_link(int(fabric_links[1]))
    fwd.fail_link(int(fabric_links[13]))
    for s in range(GPUS):
        for d in range(GPUS):
            if s != d:
                ports = fwd.ports(s, d)
                assert fwd.channels()["dst"][ports[-1]] == spec.gpu_nodes[d]
                assert not set((ports // 2).tolist()) & {int(fabric_links[1]), int(fabric_links[13])}
