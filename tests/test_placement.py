"""Collective placement (Topology.ring_orders), NCCL's channel rule, multi-channel broadcast,
and the engine's op names checked against the trace schema."""

import numpy as np
import pytest

import rfabric as rf
from rfabric import _engine, op_trace
from rfabric.traces import ALGORITHMS, KINDS
from rfabric.traces.schema import check_engine_names

B = 25e9  # bytes/s: a 200 Gb/s NIC
T = rf.topologies


def nic_bytes(res, gpus=128, per_server=8):
    """Bytes each NIC link sent onto the network (wire bytes; every fabric adds its NIC links
    from the GPU, so direction 0 is the GPU sending), and payload bytes each GPU received from
    other servers (by flow: a circuit delivers into the peer GPU without its link counting)."""
    links = res.links
    kind, direction, nbytes = (
        links[c].to_numpy(zero_copy_only=False) for c in ("kind", "direction", "bytes")
    )
    sent = nbytes[(kind == "nic") & (direction == 0)]
    f = res.flows
    assert f.num_rows == res.run["flows"] > 0
    src, dst, size = (f[c].to_numpy() for c in ("src", "dst", "size_bytes"))
    inter = src // per_server != dst // per_server
    got = np.bincount(dst[inter], weights=size[inter], minlength=gpus)
    return sent, got


def test_engine_names_match_the_schema_by_name():
    assert list(_engine.op_kinds()) == list(KINDS)
    assert list(_engine.op_algorithms()) == list(ALGORITHMS)
    check_engine_names(KINDS, ALGORITHMS)
    swapped = list(KINDS)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    with pytest.raises(
        rf.TraceError, match=r"KINDS\[1\] is 'all_gather' but the engine's code 1 is 'reduce_scatter'"
    ):
        check_engine_names(swapped, ALGORITHMS)
    with pytest.raises(rf.TraceError, match=r"ALGORITHMS\[7\] is None but the engine's code 7 is 'extra'"):
        check_engine_names(KINDS, list(ALGORITHMS) + ["extra"])


def test_topoopt_rings_use_every_nic_at_the_nic_rate():
    fab = T.TopoOpt(128)
    rows = fab.ring_orders()
    assert rows.shape == (8, 128)
    size = 64 << 20
    # placement against the NICs' line rate: NCCL's protocol costs off (docs/nccl-model.md;
    # with them a 128-GPU ring at 64 MiB pays 254 steps of latency)
    res = rf.simulate(
        fab, op_trace("all_reduce", range(128), size, "ring"), record_flows=True, nccl_model=False
    )
    sent, got = nic_bytes(res)
    assert len(sent) == len(got) == 128
    # every NIC sends and receives one channel's share: 2(n-1)/n * S / 8 (payload, + headers)
    share = 2 * 127 / 128 * size / 8
    assert sent.min() >= share and sent.max() <= share * 1.01
    assert np.allclose(got, share, rtol=1e-4)
    assert res.ops["busbw_GBps"][0].as_py() >= 0.8 * 8 * B / 1e9


def test_mixnet_rings_use_every_nic():
    fab = T.MixNet(128)
    rows = fab.ring_orders()
    assert rows.shape == (8, 128)
    size = 16 << 20
    # payload bytes: the Simple protocol (LL and LL128 lines add flags)
    res = rf.simulate(
        fab, op_trace("all_gather", range(128), size, "ring"), record_flows=True, coll_protocol="simple"
    )
    sent, got = nic_bytes(res)
    share = 127 / 128 * size / 8
    assert len(sent) == 128 and sent.min() >= share and sent.max() <= share * 1.01
    assert np.allclose(got, share, rtol=1e-4)


def test_every_fabric_ring_row_enters_and_leaves_each_server_once():
    # a preferred ring visits each server's GPUs consecutively; over all channels every NIC
    # sends exactly once (TopoOpt and MixNet at 128 GPUs)
    for fab in (T.TopoOpt(128), T.MixNet(128)):
        rows = fab.ring_orders()
        exits = np.zeros((16, 8), dtype=int)
        for row in rows:
            server = row // 8
            assert np.count_nonzero(np.diff(server) != 0) == 15  # each server's GPUs together
            last = row[np.flatnonzero(np.diff(np.append(server, server[0])) != 0)]
            exits[last // 8, last % 8] += 1
        assert (exits == 1).all(), type(fab).__name__


class ReversedFatTree(T.FatTree):
    """A user's fabric that prefers the reversed GPU order (one channel)."""

    def ring_orders(self):
        return np.arange(self.gpus)[::-1][None, :]


def test_a_subclass_ring_order_is_followed_and_caps_the_channels():
    fab = ReversedFatTree(16, radix=16)
    res = rf.simulate(fab, op_trace("all_gather", range(0, 16, 2), 8 << 20, "ring"), record_flows=True)
    src, dst = res.flows["src"].to_numpy(), res.flows["dst"].to_numpy()
    # one channel (the fabric gives one row), ranks visited in descending order
    assert set(zip(src.tolist(), dst.tolist(), strict=True)) == {(r, (r - 2) % 16) for r in range(0, 16, 2)}


def test_bad_ring_orders_raise_spec_errors():
    class Bad(T.FatTree):
        def ring_orders(self):
            rows = np.tile(np.arange(self.gpus), (2, 1))
            rows[1, 3] = 0
            return rows

    with pytest.raises(rf.SpecError, match=r"rings\[1\] is not a permutation"):
        Bad(16, radix=16).to_spec()

    class Short(T.FatTree):
        def ring_orders(self):
            return np.arange(8)[None, :]

    with pytest.raises(rf.SpecError, match=r"rings must be a \(channels >= 1, 16\) integer array"):
        Short(16, radix=16).to_spec()


def test_broadcast_splits_over_channels_and_nics():
    fab = T.FatTree(128)
    size = 256 << 20
    # against the NICs' line rate: NCCL's protocol costs off (docs/nccl-model.md)
    res = rf.simulate(fab, op_trace("broadcast", range(128), size), record_flows=True, nccl_model=False)
    sent, _ = nic_bytes(res)
    # each channel's chain leaves every server once, through a different NIC per channel;
    # channel 0's chain ends on the last server, whose exit NIC for it stays idle
    assert len(sent) == 128 and np.count_nonzero(sent == 0) == 1
    assert sent[sent > 0].min() >= size / 8 and sent.max() <= size / 8 * 1.01
    # time against the NIC bound S / (8 B): the chain's fill (127 hops) costs about a fifth
    t = res.ops["time_ps"][0].as_py() / 1e12
    assert size / (8 * B) / t >= 0.75


@pytest.mark.parametrize("fab", [T.FatTree(128), T.RailOptimized(128)], ids=["ft", "ro"])
@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
def test_gather_and_scatter_reach_the_nic_bound_at_128_gpus(fab, kind):
    size = 256 << 20
    # against the NICs' line rate: NCCL's protocol costs off (docs/nccl-model.md)
    t = rf.collective(fab, kind, sizes=[size], nccl_model=False)["time_ps"][0].as_py() / 1e12
    bound = 15 / 16 * size / (8 * B)  # (s-1)/s * S over a server's 8 NICs
    assert bound / t >= 0.8


def test_all_reduce_time_grows_with_size_as_nccl_tests_shows():
    # no flat stretch: each 4x in size costs more time, latency-bound at 1 MiB (far less than
    # 4x) and bandwidth-bound by 64 MiB (close to 4x up to 256 MiB). The fabric's pipelines
    # only: with NCCL's protocol costs (docs/nccl-model.md) the latency-bound stretch is longer
    fab = T.FatTree(128)
    sizes = ["1MiB", "4MiB", "16MiB", "64MiB", "256MiB"]
    t = rf.collective(fab, "all_reduce", sizes=sizes, nccl_model=False)["time_ps"].to_pylist()
    ratios = [b / a for a, b in zip(t, t[1:], strict=False)]
    assert all(r > 1.2 for r in ratios), ratios
    assert ratios[0] < 2 and 3.5 < ratios[-1] <= 4.05, ratios


@pytest.mark.parametrize("fab", [T.TopoOpt(128), T.MixNet(128)], ids=["topoopt", "mixnet"])
def test_auto_all_reduce_grows_with_size_on_direct_connect_fabrics(fab):
    # auto weighs the tree's edges on their real paths (not circuit neighbours here), so it
    # never takes a tree slower than the ring of a larger message
    sizes = ["64KiB", "1MiB", "4MiB", "16MiB", "64MiB"]
    auto = rf.collective(fab, "all_reduce", sizes=sizes)["time_ps"].to_pylist()
    assert all(b > a for a, b in zip(auto, auto[1:], strict=False)), auto


def test_channels_follow_nccls_32_kib_rule():
    # NCCL (Simple protocol): c channels need c x 512 threads x 64 B = c x 32 KiB; flows carry
    # the channel, so count distinct (src, dst) successors of rank 0 on a FatTree ring
    fab = T.FatTree(16, radix=16)
    for size, channels in ((32 << 10, 1), (96 << 10, 3), (1 << 20, 8)):
        res = rf.simulate(
            fab, op_trace("all_gather", range(16), size, "ring"), record_flows=True, coll_protocol="simple"
        )
        src, dst = res.flows["src"].to_numpy(), res.flows["dst"].to_numpy()
        # channel c leaves server 0 through GPU (c-1) mod 8: one exit GPU per channel
        exits = {int(s) for s, d in zip(src, dst, strict=True) if s < 8 <= d}
        assert len(exits) == channels, (size, exits)


def test_double_binary_tree_reaches_the_nic_bound():
    # each channel runs two trees whose inner servers are the other's leaves, so a leader's NIC
    # sends 2 halves, not 3: within 80% of the ring's bound 2(n-1)/n * S / (8 B)
    size = 64 << 20
    # against the NICs' line rate: NCCL's protocol costs off (docs/nccl-model.md)
    table = rf.collective(T.FatTree(128), "all_reduce", sizes=[size], algorithm="tree", nccl_model=False)
    t = table["time_ps"][0].as_py() / 1e12
    assert 2 * 127 / 128 * size / (8 * B) / t >= 0.8
