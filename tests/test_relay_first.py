"""A GPU's NIC sends the frames it relays before its own flows' (the packet engine).

With PXN or host forwarding a GPU's NIC carries frames of other GPUs' flows. The packet
engine queues those at the port as a switch does and sends its queue before it pulls a
frame of the GPU's own flows (`Network::transmit_next`), so a relayed flow has the NIC and
the GPU's own flow waits. That is what breaks the step of MixNet's weight-sync chains in
packets (docs/explanation/flow-backend.md, "Where it is off"). The flow model shares the
NIC evenly (both end together), which is the documented gap this case measures.
Oracle: each flow's lone time (`ideal_fct_ps`, the packet engine's lone-flow delay).
"""

import numpy as np
import pytest

import rfabric as rf

SIZE = 4 << 20


@pytest.fixture(scope="module")
def pxn_pair():
    # RailOptimized(32): GPU 0 -> GPU 25 is rail 1's, so PXN moves it over NVLink to GPU 1
    # and out of GPU 1's NIC; GPU 1 -> GPU 9 leaves by the same NIC.
    fab = rf.topologies.RailOptimized(32)
    flows = rf.Flows(np.array([0, 1]), np.array([25, 9]), SIZE)
    return {
        b: rf.simulate(fab, flows, backend=b, seed=1).flows.sort_by("flow_id") for b in ("packet", "flow")
    }


def test_packets_send_the_relayed_flow_first(pxn_pair):
    t = pxn_pair["packet"]
    end, lone = t["end_ps"].to_numpy(), t["ideal_fct_ps"].to_numpy()
    # the relayed flow as if alone; the own flow after it, then alone (its path delay
    # overlaps the relayed flow's tail: 341.0 against 172.8 + 172.1 us)
    assert end[0] == pytest.approx(lone[0], rel=0.01)
    assert end[1] == pytest.approx(end[0] + lone[1], rel=0.02)


def test_flows_share_the_relay_nic_evenly(pxn_pair):
    # The gap: the even share ends both flows in two flows' time.
    pk, fl = (pxn_pair[b]["end_ps"].to_numpy() for b in ("packet", "flow"))
    assert fl[1] == pytest.approx(pk[1], rel=0.01)
    assert fl[0] == pytest.approx(fl[1], rel=0.01)
    assert fl[0] > 1.9 * pk[0]
