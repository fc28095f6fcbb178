"""Under PFC a NIC held back at a switch port pauses for all its flows: the packet engine's
facts on a small case, and the flow backend's gap to them (xfail).

FatTree(128) 3:1: a ToR has 12 NICs and 4 uplinks, and D-mod-K sends every flow to a GPU at
position 0, 4 or 8 under its ToR up uplink 0. GPUs 1..n under ToR 0 each send 8 MB up that
uplink, and GPU 1 also sends 8 MB to GPU 11 under its own ToR, a path with room. In packets
the ToR pauses GPU 1's NIC for the frames it queues at the uplink, and the NIC, which pulls a
frame of each of its flows in turn, stops for both: its local flow ends with its held-back
one. Max-min gives the local flow the NIC's leftover. The oracle is the packet engine, run
here. The cases of docs/explanation/flow-backend.md, "Where it is off" (PFC).
"""

import pytest

import rfabric as rf

FAB = rf.topologies.FatTree(128, oversubscription=3)
UPLINK0 = [12, 24, 36, 16, 28, 40, 20, 32, 44]  # positions 0, 4, 8 under ToRs 1-3
SIZE = 8_000_000
LOCAL = (1, 11)


def held_uplink(n: int, backend: str):
    src = list(range(1, n + 1)) + [LOCAL[0]]
    dst = UPLINK0[:n] + [LOCAL[1]]
    res = rf.simulate(FAB, rf.Flows(src, dst, SIZE), backend=backend, seed=1, record_flows=True)
    f = res.flows.to_pydict()
    return res, {(s, d): e / 1e6 for s, d, e in zip(f["src"], f["dst"], f["end_ps"], strict=True)}


def message_stream(chunk: int, gap_us: float):
    """GPU 1 streams `chunk`-byte messages up uplink 0 beside three 8 MB flows (GPUs 2-4)."""
    src, dst = [2, 3, 4, LOCAL[0]], [24, 36, 16, LOCAL[1]]
    start = [0] * 4
    for j in range(int(1300 / gap_us)):
        src.append(1)
        dst.append(12)
        start.append(int(j * gap_us * 1e6))
    size = [SIZE] * 4 + [chunk] * (len(src) - 4)
    res = rf.simulate(FAB, rf.Flows(src, dst, size, start), backend="packet", seed=1, record_flows=True)
    f = res.flows.to_pydict()
    return {(s, d): e / 1e6 for s, d, e in zip(f["src"], f["dst"], f["end_ps"], strict=True) if d != 12}


@pytest.fixture(scope="module")
def four():
    return {b: held_uplink(4, b) for b in ("packet", "flow")}


def test_packets_pause_the_whole_nic(four):
    res, ends = four["packet"]
    # 4 inputs x 5 us of XOFF = 20 us, under ECN's Kmax (40 us): PFC's pauses, few marks
    assert res.run["pfc_pauses"] > 5 * res.run["ecn_marks"]
    # the local flow ends with GPU 1's held-back one (1,357.6 and 1,361.6 us), not at its
    # NIC's leftover (432.7 us on flows)
    assert ends[LOCAL] == pytest.approx(ends[(1, 12)], rel=0.02)
    assert ends[LOCAL] > 2.5 * four["flow"][1][LOCAL]


@pytest.mark.xfail(strict=True, reason="a NIC paused as a whole is not modelled (flow-backend.md, PFC)")
def test_flow_local_end_within_10pct_of_packets(four):
    assert four["flow"][1][LOCAL] == pytest.approx(four["packet"][1][LOCAL], rel=0.10)


def test_past_kmax_the_nic_is_still_held():
    # 8 inputs' XOFFs reach Kmax: the uplink's queue is marked (4,859 marks, 422 pauses), and
    # DCQCN frees GPU 1's NIC only in part: its local flow ends at 1,836 us, the held-back
    # flows at 2,366-2,596 us, where max-min ends it at 371 us. A rule that stopped pacing
    # NICs once their ports' inputs could pass Kmax would be further off than one that paced.
    res, ends = held_uplink(8, "packet")
    assert res.run["ecn_marks"] > res.run["pfc_pauses"]
    held = [e for k, e in ends.items() if k != LOCAL]
    assert ends[LOCAL] > 0.6 * min(held)


def test_small_messages_pause_their_nic_too():
    # a message under XOFF (125 KB at 200 Gb/s) cannot fill it alone, but messages posted
    # back to back can: 32 KiB messages hold GPU 1's local flow as 256 KiB ones do
    # (1,844.5 and 1,822.7 us in packets)
    small, large = message_stream(32 * 1024, 3.0), message_stream(256 * 1024, 24.0)
    assert small[LOCAL] == pytest.approx(large[LOCAL], rel=0.05)
    assert small[LOCAL] > 1.3 * max(small[(s, d)] for s, d in small if (s, d) != LOCAL)
