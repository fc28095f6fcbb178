"""Paths longer than 64 ports: both backends deliver over them, alike.

A circuit plan can leave ToRs joined only through a chain of ToR-ToR circuits, whose up*/down*
route crosses more ports than a fat-tree's (Kimi K2 on a 16,384-GPU RFabric: 65 ports between
two GPUs of the weight sync). The packet engine's frames have no hop limit; the flow
backend's paths, walked from the same forwarding tables, must not have one either, or its
flows wait forever at a route it cut short ("unroutable"). Oracle: the packet engine on the
same fabric, and the path's own length.
"""

import numpy as np
import pytest

import rfabric as rf

SWITCHES = 70  # a line of switches: 71 ports from one GPU to the other


class Line(rf.Topology):
    """Two one-GPU servers at the ends of a line of SWITCHES packet switches."""

    def __init__(self):
        super().__init__(gpus=2, gpus_per_server=1)

    def build(self, net):
        gpu = net.add_servers(2, gpus_per_server=1, nvlink=False).ravel()
        sw = net.add_nodes("eps", SWITCHES, prefix="sw")
        net.add_links(np.array([gpu[0], gpu[1]]), np.array([sw[0], sw[-1]]), rate=self.link, kind="nic")
        net.add_links(sw[:-1], sw[1:], rate=self.link, kind="line")


def test_forwarding_walks_the_whole_line():
    fw = rf.Forwarding(Line())
    assert len(fw.path(0, 1)) == SWITCHES + 1
    assert len(fw.path(1, 0)) == SWITCHES + 1


@pytest.mark.parametrize("model", ["max-min", "dynamic"])
def test_flow_backend_delivers_over_the_line_as_packets_do(model):
    flows = rf.Flows([0, 1], [1, 0], ["1MiB", "3MiB"])
    pk = rf.Simulation(Line(), flows)
    pk.run()
    fl = rf.Simulation(Line(), flows, backend="flow", flow_model=model)
    fl.run()
    rp, rf_ = pk.results(), fl.results()
    assert rp.complete and rf_.complete
    assert not rf_.run.get("unroutable")
    end_p = np.asarray(rp.flows["end_ps"])
    end_f = np.asarray(rf_.flows["end_ps"])
    # each flow alone on its direction: both flow models end a lone flow at the packet
    # engine's picosecond (Forwarding::lone_packet_fct_ps)
    np.testing.assert_array_equal(end_f, end_p)
