"""The flow backend's max-min rates against an independent solver: progressive filling in
exact fractions over the forwarding paths of the flows sending at each instant, on random
fabrics and random flows arriving and leaving, and a bottleneck port freed mid-run. The runs
are lossy (``lossless=False``): under PFC a switch port shares itself among its input links, not
its flows (tests/test_flow_pfc_inputs.py)."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from test_flow_backend import LoneGpus  # (GPUs on a chain of switches)

import rfabric as rf

G = 10**9
MB = 10**6


def exact_max_min(paths, capacity):
    """Progressive filling in exact fractions: raise every unfrozen flow's rate together until
    a port fills, freeze the flows through it, repeat. ``paths``: ports per flow (one path,
    each port crossed once); ``capacity``: bit/s per port."""
    rate = [None] * len(paths)
    left = {p: Fraction(c) for p, c in capacity.items()}
    while any(r is None for r in rate):
        users = {}
        for i, path in enumerate(paths):
            if rate[i] is None:
                for p in path:
                    users.setdefault(p, []).append(i)
        share, port = min((left[p] / len(u), p) for p, u in users.items())
        for i in users[port]:
            rate[i] = share
            for p in paths[i]:
                left[p] -= share
    return rate


def check_sending_against_exact(sim, fwd, cap):
    """The rates of the flows sending now against the exact max-min over their paths; returns
    how many were sending."""
    rows = sim.engine.sending_flows()
    paths = [
        fwd.ports(int(s), int(d), int(h)).tolist()
        for s, d, h in zip(rows["src"], rows["dst"], rows["hash"], strict=True)
    ]
    if not paths:
        return 0
    want = exact_max_min(paths, {p: cap[p] for path in paths for p in path})
    got = np.asarray(rows["rate_bps"])
    np.testing.assert_allclose(got, [float(w) for w in want], rtol=1e-9, atol=0)
    return len(paths)


def port_capacities(fab):
    spec = fab.to_spec()
    return {p: int(spec.links.rate_bps[p // 2]) for p in range(2 * spec.num_links)}


def random_traffic_against_exact(fab, rng, n, max_bytes, horizon_ps, instants_us, local=False):
    """``n`` flows between random GPU pairs of ``fab`` (1 MB to ``max_bytes``, starting over
    ``horizon_ps``), checked against the exact max-min at each of ``instants_us`` and run to
    the end (every flow done); returns how many sending flows the checks covered. ``local``:
    every recomputation refills only the flows the change can reach (what large runs do)."""
    gpus = fab.gpus
    src = rng.integers(0, gpus, n)
    dst = (src + rng.integers(1, gpus, n)) % gpus
    size = rng.integers(1 * MB, max_bytes, n)
    start = np.sort(rng.integers(0, horizon_ps, n))
    sim = rf.Simulation(fab, rf.Flows(src, dst, size, start), backend="flow", lossless=False)
    if local:
        sim.engine.set_local_min(0)
    fwd, cap = rf.Forwarding(fab), port_capacities(fab)
    seen = 0
    for t_us in instants_us:
        sim.run(f"{t_us:.3f}us")
        seen += check_sending_against_exact(sim, fwd, cap)
    sim.run()
    assert sim.results().complete
    return seen


@pytest.mark.parametrize("local", [False, True], ids=["component", "local"])
@pytest.mark.parametrize("seed", range(6))
def test_rates_on_a_random_chain_match_exact_max_min_as_flows_come_and_go(seed, local):
    # Random NIC and chain rates (a fast chain link no set of flows can fill, a slow one that
    # binds), random flows starting over 400 us and ending
    # as their bytes go: at 24 instants every sending flow's rate is the exact solution.
    rng = np.random.default_rng(seed)
    gpus, switches = 16, 5
    attach = rng.integers(0, switches, gpus).tolist()
    nic = rng.choice([25, 50, 100, 200], gpus).tolist()
    chain = rng.choice([40, 100, 400, 1600], switches - 1).tolist()
    fab = LoneGpus(attach, nic, chain)
    seen = random_traffic_against_exact(
        fab, rng, 60, 6 * MB, 400_000_000, np.linspace(7.3, 700.1, 24), local=local
    )
    assert seen > 100  # (the instants do catch many flows sending together)


@pytest.mark.parametrize("local", [False, True], ids=["component", "local"])
@pytest.mark.parametrize("oversubscription", [1, 3])
def test_fat_tree_flows_arriving_and_leaving_match_exact_max_min(oversubscription, local):
    # A 128-GPU fat-tree under random traffic (ECMP paths by each flow's hash): NICs and the
    # uplinks many flows hash onto bind, the others do not.
    fab = rf.topologies.FatTree(128, oversubscription=oversubscription)
    rng = np.random.default_rng(11)
    seen = random_traffic_against_exact(
        fab, rng, 400, 16 * MB, 300_000_000, np.linspace(11.1, 500.3, 12), local=local
    )
    assert seen > 200


def test_a_port_freed_while_flows_had_their_bottleneck_there():
    # Three flows share a 150 Gb/s trunk (50 each, their bottleneck). When the short one
    # ends, with 100 Gb/s NICs the trunk still binds the two left (75 each); with 60 Gb/s NICs
    # it cannot any more (2 x 60 < 150): the two flows that had their bottleneck there rise to
    # their NICs' 60.
    for (nic, want), local in itertools.product(((100, 75), (60, 60)), (False, True)):
        fab = LoneGpus([0, 0, 0, 1, 1, 1], [nic] * 6, [150])
        flows = rf.Flows([0, 1, 2], [3, 4, 5], [20 * MB, 20 * MB, 2 * MB])
        sim = rf.Simulation(fab, flows, backend="flow", lossless=False)
        if local:
            sim.engine.set_local_min(0)
        sim.run("1us")
        np.testing.assert_allclose(sim.engine.flow_rates() / G, [50, 50, 50], rtol=1e-12)
        sim.run("1000us")  # the short flow is done
        rates = sim.engine.flow_rates() / G
        np.testing.assert_allclose(rates[:2], [want, want], rtol=1e-12)
        sim.run()
        assert sim.results().complete
