"""Under PFC a switch port serves the links feeding it in turns, not its flows.

A switch's output port queues the frames of every input link in one FIFO, and PFC pauses
each input link as its bytes inside the switch pass XOFF, so backlogged inputs take turns:
one link with six flows gets the share a link with one flow gets (PFC's per-port
fairness). The flow model shares such a port among its input links, and each link's share
among its flows (FlowNetwork::share_by_input); lossy runs keep the even per-flow share.
Oracles: the shares in closed form, and the packet engine on the same flows.
"""

import numpy as np
import pytest

import rfabric as rf

G = 10**9
LONG, BURST = 13_139_968, 821_248  # (a pipeline send and an all_to_all pair of bench/validate_flow.py's MoE)
T0 = 51_000_000  # ps: the bursts start while the long flow sends


def long_and_bursts(srcs, t0=T0):
    """GPU 4 sends LONG to GPU 36 from 0; each of ``srcs`` sends BURST to GPU 36 from t0."""
    n = len(srcs)
    return rf.Flows(np.array([4, *srcs]), np.full(n + 1, 36), [LONG] + [BURST] * n, [0] + [t0] * n)


def test_a_port_shares_itself_among_its_input_links():
    # FatTree(128), D-mod-K: GPU 4 (another pod) and GPU 40 (six flows) reach GPU 36 over
    # different links into the aggregation port above 36's ToR, which all seven cross to
    # 36's NIC (200 Gb/s). Under PFC the two input links take turns: the long flow has half
    # the port, the six bursts a twelfth each. Lossy, the port is shared evenly: a seventh.
    fab = rf.topologies.FatTree(128)
    for lossless, want in ((True, [100] + [100 / 6] * 6), (False, [200 / 7] * 7)):
        sim = rf.Simulation(fab, long_and_bursts([40] * 6), backend="flow", lossless=lossless)
        sim.run("60us")
        np.testing.assert_allclose(sim.engine.flow_rates() / G, want, rtol=1e-9)
        sim.run()
        assert sim.results().complete


def test_inputs_carrying_alike_keep_the_even_share():
    # Six bursts from six GPUs under 36's ToR and beyond, and the long flow: where each input
    # link carries one flow the input shares are the even ones, lossless or not.
    fab = rf.topologies.FatTree(128)
    rates = []
    for lossless in (True, False):
        sim = rf.Simulation(fab, long_and_bursts([40, 48, 56]), backend="flow", lossless=lossless)
        sim.run("60us")
        rates.append(sim.engine.flow_rates())
    np.testing.assert_array_equal(rates[0], rates[1])


@pytest.mark.parametrize(
    "srcs",
    [
        [40] * 6,  # one input link carries the six bursts (an even share ends them 41% early)
        [40, 40, 48, 48, 56, 56],  # three links of two, and the long flow's
        [40, 48, 56, 64, 72, 80],  # three under 36's ToR, three through the aggregation
    ],
)
def test_burst_ends_match_packets(srcs):
    # The packet engine (RoCE, PFC, DCQCN) on the same flows is the oracle: each burst's end
    # within 6% of its time since T0 (the packets spread a link's flows), their mean within 3%; the
    # long flow, whose port stays busy, to 0.1%.
    fab = rf.topologies.FatTree(128)
    flows = long_and_bursts(srcs)
    pk = rf.simulate(fab, flows, seed=1)
    fl = rf.simulate(fab, flows, backend="flow", seed=1)
    assert pk.run["pfc_pauses"] > 0
    p = pk.flows["end_ps"].to_numpy().astype(float)
    f = fl.flows["end_ps"].to_numpy().astype(float)
    np.testing.assert_allclose(f[0], p[0], rtol=1e-3)
    np.testing.assert_allclose(f[1:] - T0, p[1:] - T0, rtol=0.06)
    np.testing.assert_allclose(np.mean(f[1:] - T0), np.mean(p[1:] - T0), rtol=0.03)
