"""NCCL's protocol costs (docs/nccl-model.md): closed forms per protocol, the tuner's choice,
the NVLink copy, what res.ops reports, and the switch that turns the model off.

The constants below are NCCL's (github.com/NVIDIA/nccl), restated here so that the oracles
do not read them from the engine: base latencies and per-hop latencies from
src/graph/tuning.cc, line formats and step sizes from src/include/device.h, the per-channel
thresholds from src/enqueue.cc / src/include/comm.h, NVLink's figure from src/graph/topo.h.
"""

import math

import numpy as np
import pytest

import rfabric as rf

PROTOS = ("ll", "ll128", "simple")
BASE_RING_US = {"ll": 6.6, "ll128": 14.0, "simple": 8.4}
NET_RING_US = {"ll": 2.7, "ll128": 4.0, "simple": 14.0}
NVL_RING_US = {"ll": 0.6, "ll128": 1.9, "simple": 3.4}
STEP = {"ll": 8 * 512 * 8, "ll128": 120 * 640 * 8 * 15 // 16, "simple": 512 * 1024}
NVLINK_EFFICIENCY = 20.6 / 25

# the fabric: a fat-tree of 2 servers with 1 GPU each on one ToR (GPU -> ToR -> GPU)
RATE = 25e9  # bytes/s, 200 Gb/s
PATH_US = 2 * 1.0 + 0.8  # 2 links of 1 us, a switch of 0.8 us
MTU_PAYLOAD, HEADER = 9216 - 62, 62


def wire(proto: str, payload: int) -> int:
    """Protocol bytes for `payload` bytes: LL 16-byte lines of 8 data bytes, LL128 128-byte
    lines of 120."""
    if proto == "ll":
        return math.ceil(payload / 8) * 16
    if proto == "ll128":
        return math.ceil(payload / 120) * 128
    return payload


def channels(proto: str, size: int, nranks: int, top: int = 8) -> int:
    per = {"ll": 512 * 8 * nranks, "ll128": 640 * 8, "simple": 512 * 64}[proto]
    return max(1, min(top, size // per))


@pytest.fixture(scope="module")
def pair():
    return rf.topologies.FatTree(2, "200Gbps", gpus_per_server=1)


def one_op(fab, size, algorithm="ring", kind="all_reduce", ranks=(0, 1), **settings):
    res = rf.simulate(fab, rf.op_trace(kind, list(ranks), size, algorithm), **settings)
    return res, res.ops.to_pylist()[0]


@pytest.mark.parametrize("backend", ["packet", "flow"])
@pytest.mark.parametrize("proto", PROTOS)
@pytest.mark.parametrize("size", [2048, 8192])
def test_lone_ring_all_reduce_matches_the_closed_form(pair, proto, size, backend):
    # 2 ranks, one channel, one slice per step (one frame): the launch latency, then 2 steps,
    # each the hop's latency (NCCL's figure; the wire's 2.8 us are part of it) and the wire
    # bytes of half the message serialized at the NIC and again at the ToR
    res, op = one_op(pair, size, coll_protocol=proto, backend=backend)
    assert (op["algorithm"], op["protocol"], op["channels"]) == ("ring", proto, 1)
    frame_ps = (wire(proto, size // 2) + HEADER) * 8e12 / (RATE * 8)
    assert wire(proto, size // 2) <= MTU_PAYLOAD
    step_ps = max(NET_RING_US[proto], PATH_US) * 1e6 + 2 * frame_ps
    assert op["time_ps"] == pytest.approx(BASE_RING_US[proto] * 1e6 + 2 * step_ps, abs=2)


def test_model_off_is_line_rate_simple(pair):
    # nccl_model=False: the previous behaviour, no launch or flag latency, payload bytes only
    size = 8192
    res, op = one_op(pair, size, nccl_model=False)
    assert op["protocol"] is None and op["algorithm"] == "ring"
    frame_ps = (size // 2 + HEADER) * 40  # ps per byte at 200 Gb/s: 40
    assert op["time_ps"] == 2 * (PATH_US * 1e6 + 2 * frame_ps)
    with pytest.raises(rf.SpecError, match="nccl_model"):
        one_op(pair, size, nccl_model=False, coll_protocol="ll")
    with pytest.raises(rf.SpecError, match="coll_protocol"):
        one_op(pair, size, coll_protocol="ll64")


@pytest.mark.parametrize("proto", PROTOS)
def test_wire_bytes_follow_the_line_format(pair, proto):
    # every slice of every step carries its protocol's lines: LL doubles the bytes, LL128
    # adds 8 of every 128; slices are the protocol's step (LL 32 KiB, LL128 576,000 B)
    size = 3 << 20
    res = rf.simulate(
        pair, rf.op_trace("all_reduce", [0, 1], size, "ring"), coll_protocol=proto, record_flows=True
    )
    c = channels(proto, size, 2)
    assert res.ops["channels"][0].as_py() == c
    chunk = math.ceil(size / (2 * c))
    slices = [min(STEP[proto], chunk - j) for j in range(0, chunk, STEP[proto])]
    per_rank = c * 2 * sum(wire(proto, s) for s in slices)  # c channels x 2 steps
    src = res.flows["src"].to_numpy()
    sent = res.flows["size_bytes"].to_numpy()
    assert sent[src == 0].sum() == per_rank and sent[src == 1].sum() == per_rank


def predicted_ring_ps(proto: str, size: int) -> float:
    """The tuner's ring cost on the 2-GPU pair, from its formula (docs/nccl-model.md): the
    launch latency plus the longer of the dependency chain (2 passes x 2 hops, each its latency
    and one step's wire bytes) and the NIC's time for its 2(n-1)/n share of the wire bytes.
    The hop latency the tuner sees is the path's plus one frame's store-and-forward."""
    ps_per_byte = 1e12 / RATE
    hop = max(PATH_US * 1e6 + MTU_PAYLOAD * ps_per_byte, NET_RING_US[proto] * 1e6)
    w = {"ll": 2.0, "ll128": 128 / 120, "simple": 1.0}[proto]
    c = channels(proto, size, 2)
    step = w * min(size / (2 * c), STEP[proto])
    chain = 2 * 2 * (hop + step * ps_per_byte)
    return BASE_RING_US[proto] * 1e6 + max(chain, size * w * ps_per_byte)


def test_auto_switches_protocol_where_the_tuner_formula_does(pair):
    sizes = [1 << k for k in range(10, 28)]  # 1 KiB .. 128 MiB
    expect = [min(PROTOS, key=lambda p, s=s: predicted_ring_ps(p, s)) for s in sizes]
    assert expect[0] == "ll" and expect[-1] == "simple" and "ll128" in expect  # all three in turn
    got = []
    for s in sizes:
        _, op = one_op(pair, s, backend="flow")
        got.append(op["protocol"])
    assert got == expect
    # and the choice is about the fastest of the three: the tuner predicts, as NCCL's does
    # (at 4 MiB it takes Simple, 1.6% slower here than LL128 whose slices pipeline better)
    for s in (sizes[3], sizes[12], sizes[-1]):
        times = {p: one_op(pair, s, coll_protocol=p, backend="flow")[1]["time_ps"] for p in PROTOS}
        chosen = one_op(pair, s, backend="flow")[1]["time_ps"]
        assert chosen in times.values() and chosen <= 1.02 * min(times.values())


@pytest.mark.parametrize("backend", ["packet", "flow"])
@pytest.mark.parametrize("nvlink", [None, "3600Gbps"])
def test_nvlink_copy_reaches_the_sm_fraction_of_nvlink(nvlink, backend):
    # one server of 8 GPUs, 1 GiB: a ring of NVLink hops only; the SMs copy at 20.6 of
    # NVLink4's 25 GB/s per link, so the bus bandwidth is that fraction of NVLink's rate on
    # either backend (the packet backend's 8 channels are 8 flows through each GPU's port)
    fab = rf.topologies.FatTree(8, **({} if nvlink is None else {"nvlink": nvlink}))
    nvl = fab.nvlink_bps / 8 / 1e9
    _, on = one_op(fab, 1 << 30, ranks=range(8), backend=backend)
    _, off = one_op(fab, 1 << 30, ranks=range(8), backend=backend, nccl_model=False)
    assert on["protocol"] == "simple"
    assert off["busbw_GBps"] == pytest.approx(nvl, rel=0.01)
    assert on["busbw_GBps"] == pytest.approx(NVLINK_EFFICIENCY * nvl, rel=0.02)


def test_nvlink_copy_costs_the_same_on_both_backends():
    # 1 GiB rings: one server at an H100's NVLink (450 GB/s), and 2 servers at 200G with the
    # default 200 GB/s NVLink, where the copy is the bound: each GPU's NVLink port carries the
    # 7 of 8 channels whose next rank is on its server, so the bus bandwidth is
    # 0.824 x 200 x 8/7 = 188 GB/s, below the NICs' 8 x 25 GB/s
    one = rf.topologies.FatTree(8, nvlink="3600Gbps")
    two = rf.topologies.FatTree(16, "200Gbps")
    for fab, n in ((one, 8), (two, 16)):
        bw = {b: one_op(fab, 1 << 30, ranks=range(n), backend=b)[1]["busbw_GBps"] for b in ("packet", "flow")}
        assert bw["packet"] == pytest.approx(bw["flow"], rel=0.02)
    nvl = two.nvlink_bps / 8 / 1e9
    copy_bound = NVLINK_EFFICIENCY * nvl * 8 / 7
    assert copy_bound < 8 * 25.0
    assert bw["packet"] == pytest.approx(copy_bound, rel=0.02)
    assert bw["flow"] == pytest.approx(copy_bound, rel=0.02)


def test_ops_table_says_what_ran():
    fab = rf.topologies.FatTree(16)
    trace = rf.traces.Trace.from_columns(
        op_id=[0, 1, 2],
        stage="bench",
        phase="x",
        kind=["all_reduce", "all_reduce", "all_to_all"],
        ranks=[list(range(16))] * 3,
        size_bytes=[4096, 1 << 30, 1 << 20],
        algorithm=["auto", "auto", "auto"],
        deps=[[], [0], [1]],
    )
    ops = rf.simulate(fab, trace, backend="flow").ops.to_pylist()
    assert [o["requested"] for o in ops] == ["auto"] * 3
    assert all(o["algorithm"] != "auto" for o in ops)
    small, large, a2a = ops
    assert small["protocol"] == "ll" and small["channels"] == 1  # 4 KiB < 8 x LL's 4 KiB x ranks
    assert large["protocol"] == "simple" and large["channels"] == 8
    assert a2a["algorithm"] == "direct" and a2a["protocol"] is None  # not one of NCCL's kernels


@pytest.mark.parametrize("link,nic_GBps", [("200Gbps", 25.0)])
def test_large_ring_busbw_per_nic_below_line_rate(link, nic_GBps):
    # 2 servers x 8 GPUs, 1 GiB, the ring: NCCL's published figure is about 24 GB/s per 200G NIC
    # (nccl-tests issues). The model is not fitted to it; the value is reported here.
    fab = rf.topologies.FatTree(16, link)
    _, on = one_op(fab, 1 << 30, ranks=range(16), backend="flow")
    _, ring = one_op(fab, 1 << 30, "ring", ranks=range(16), backend="flow")
    _, off = one_op(fab, 1 << 30, "ring", ranks=range(16), backend="flow", nccl_model=False)
    per_nic = ring["busbw_GBps"] / 8
    print(f"ring busbw per NIC: {per_nic:.2f} GB/s (model off {off['busbw_GBps'] / 8:.2f}); auto: {on}")
    assert per_nic < off["busbw_GBps"] / 8 < nic_GBps
    assert per_nic > 0.9 * nic_GBps
    assert np.isfinite(on["busbw_GBps"])
