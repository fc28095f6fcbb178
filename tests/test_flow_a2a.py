"""backend="flow": an all-to-all starts its flows in the turns its senders' ports take.

A GPU's port sends the first frames of the flows posted on it at one instant in turn, in the
order they were posted, so in a mesh all-to-all over n GPUs the port to the last destination
in every sender's order gets its first frame n - 2 first frames late, then carries its n - 1
messages back to back. The fluid starts each flow that late (FlowNetwork::start_lag); against
an analytical value and against the packet engine, inside a server and across servers.
"""

import pytest

import rfabric as rf

NVLINK_BPS = 1.6e12  # the default NVLink rate per GPU and direction (topologies/base.py)


def op_time(fab, ranks, pair_bytes, backend, **kw):
    tr = rf.op_trace("all_to_all", list(ranks), pair_bytes * len(ranks), "direct")
    res = rf.simulate(fab, tr, backend=backend, seed=1, **kw)
    return int(res.ops["time_ps"][0].as_py()), res


def wire_ps(size, payload, header, rate_bps):
    frames = -(-size // payload)
    return (size + frames * header) * 8e12 / rate_bps


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("pair", [4_000, 16 << 10, 100_000, 1 << 20, 8 << 20])
def test_all_to_all_in_a_server_is_the_turns_of_its_first_frames(n, pair):
    # The last destination's NVSwitch port idles through n - 2 first frames of its senders,
    # then carries n - 1 messages back to back: (n - 2) (first frame + message) at the NVLink
    # rate, then one message as it takes alone (its path latencies, store-and-forward).
    fab = rf.topologies.FatTree(16)
    got, res = op_time(fab, range(n), pair, "flow", record_flows=True)
    mtu, header = rf.EngineConfig().mtu_bytes, int(res.run["header_bytes"])
    payload = mtu - header
    lone = int(res.flows["ideal_fct_ps"][0].as_py())
    first = wire_ps(min(pair, payload), payload, header, NVLINK_BPS)
    want = (n - 2) * (first + wire_ps(pair, payload, header, NVLINK_BPS)) + lone
    assert got == pytest.approx(want, abs=n)  # (ps: rounding of each flow's times)


@pytest.mark.parametrize(
    ("n", "pair"), [(8, 16 << 10), (8, 131_072), (8, 1 << 20), (4, 65_536), (4, 1 << 20), (6, 100_000)]
)
def test_all_to_all_in_a_server_matches_packets(n, pair):
    fab = rf.topologies.FatTree(16)
    packet, _ = op_time(fab, range(n), pair, "packet")
    flow, _ = op_time(fab, range(n), pair, "flow")
    assert flow == pytest.approx(packet, rel=1e-3)


@pytest.mark.parametrize("pair", [16 << 10, 131_072, 1 << 20])
def test_all_to_all_over_two_fat_tree_servers_matches_packets(pair):
    # 16 GPUs of two servers of a non-blocking fat tree: the NICs take their turns as the
    # NVSwitch ports do
    fab = rf.topologies.FatTree(32)
    ranks = range(16)
    packet, _ = op_time(fab, ranks, pair, "packet")
    flow, _ = op_time(fab, ranks, pair, "flow")
    assert flow == pytest.approx(packet, rel=1e-3)


def test_decode_all_to_all_of_the_rl_trace_matches_packets():
    # the generation stage's expert-parallel all_to_all of a decode step, as
    # bench/validate_flow.py --scale lays it out: 8 GPUs of one server, 512 KiB and 1 MiB
    fab = rf.topologies.FatTree(16)
    for size in (524_288, 1_048_576):
        tr = rf.op_trace("all_to_all", range(8), size, "auto")
        t = {b: rf.simulate(fab, tr, backend=b, seed=1).ops["time_ps"][0].as_py() for b in ("packet", "flow")}
        assert t["flow"] == pytest.approx(t["packet"], rel=1e-3)


@pytest.mark.parametrize("size", [16 << 10, 1 << 20])
def test_one_sender_to_many_ends_when_its_port_drains(size):
    # one GPU posts seven flows at once: its own NVLink port is the bottleneck, the turns of
    # their first frames idle nothing, and the last flow ends as in packets (within 1%: at
    # 16 KiB, a full and a short frame per flow, the order of the short last frames in the
    # port's last rounds, FlowNetwork::round_robin_lead, puts it 0.95% late, as without turns)
    fab = rf.topologies.FatTree(16)
    fl = rf.Flows([0] * 7, list(range(1, 8)), size)
    end = {
        b: max(rf.simulate(fab, fl, backend=b, seed=1).flows["end_ps"].to_pylist())
        for b in ("packet", "flow")
    }
    assert end["flow"] == pytest.approx(end["packet"], rel=1e-2)


@pytest.mark.parametrize(("n", "pair"), [(8, 16 << 10), (8, 131_072), (4, 1 << 20)])
def test_all_to_all_flow_set_matches_packets(n, pair):
    # the same mesh as a flow set (every pair, by source then destination, all at time 0):
    # the flows start through the same turns as the executor's
    fab = rf.topologies.FatTree(16)
    pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
    fl = rf.Flows([s for s, _ in pairs], [d for _, d in pairs], pair)
    end = {
        b: max(rf.simulate(fab, fl, backend=b, seed=1).flows["end_ps"].to_pylist())
        for b in ("packet", "flow")
    }
    assert end["flow"] == pytest.approx(end["packet"], rel=1e-3)
