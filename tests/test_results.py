"""Results columns beyond the raw times: FCT slowdown against the ideal."""

import numpy as np
import pytest
from conftest import ideal_fct_ps

import rfabric as rf

US = 1_000_000  # ps
RATE = 200_000_000_000
HEADER = 62  # roce


def fat_tree_hops(n_links: int):
    """(rate, delay) per link of an idle fat-tree path at 200G: 1 us per link, 0.8 us per switch."""
    return [(RATE, US + (800_000 if i < n_links - 1 else 0)) for i in range(n_links)]


def wire_time_ps(size: int, mtu: int = 9216) -> int:
    """All of a message's wire bytes (payload + a header per frame) at 200G, rounded up."""
    frames = max(1, -(-size // (mtu - HEADER)))
    return -(-(size + frames * HEADER) * 8 * 10**12 // RATE)


@pytest.mark.parametrize("backend", ["packet", "flow"])
@pytest.mark.parametrize("size", [1, 9155, 1 << 20, 50 * 9154])
def test_lone_flow_slowdown_is_one(ft128, backend, size):
    # GPU 0 -> 64: another pod, 6 links. The ideal is computed here from rates, latencies and
    # the MTU: the packet engine's is the store-and-forward oracle (exact), the flow model's
    # its own fluid time: all wire bytes at the bottleneck, plus the path's latencies and the
    # first frame's serialization before the bottleneck (the NIC: none) and the last one's
    # on each of the 5 hops after it.
    res = rf.simulate(ft128, rf.Flows([0], [64], [size]), ecmp="flow", backend=backend)
    hops = fat_tree_hops(6)
    if backend == "packet":
        ideal = ideal_fct_ps(size, hops, mtu=9216, header=HEADER)
    else:
        last = size - (-(-size // 9154) - 1) * 9154 + HEADER
        ideal = wire_time_ps(size) + sum(d for _, d in hops) + 5 * -(-last * 8 * 10**12 // RATE)
    assert res.flows["ideal_fct_ps"][0].as_py() == ideal
    assert res.flows["slowdown"][0].as_py() == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_congested_flows_slow_down_and_none_beats_the_ideal(ft128, backend):
    # an 8-to-1 incast plus a permutation: the incast shares one NIC 8 ways
    src = list(range(8, 16)) + list(range(64, 128))
    dst = [0] * 8 + list(range(0, 64))
    res = rf.simulate(ft128, rf.Flows(src, dst, 1 << 20), backend=backend)
    assert res.complete
    slowdown = res.flows["slowdown"].to_numpy()
    assert np.all(slowdown >= 1 - 1e-9)
    assert np.all(slowdown[:8] > 4)  # 8 flows through one 200G NIC
    fct, ideal = res.flows["fct_ps"].to_numpy(), res.flows["ideal_fct_ps"].to_numpy()
    np.testing.assert_allclose(slowdown, fct / ideal)


def test_slowdown_of_empty_and_unfinished_flows(ft128):
    res = rf.simulate(ft128, rf.Flows([0, 1], [9, 70], [0, 1 << 24]), until="20us")
    assert res.flows["ideal_fct_ps"][0].as_py() == 0 and res.flows["slowdown"][0].as_py() == 1.0
    assert res.flows["end_ps"][1].as_py() == -1 and res.flows["slowdown"][1].as_py() is None
