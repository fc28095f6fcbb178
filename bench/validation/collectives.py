"""Collectives against public measurements of real clusters (issue 23, item 4).

Every row is one published measurement: an nccl-tests result posted in an NCCL or nccl-tests
GitHub thread (by a user, or stated by an NCCL maintainer as what NVIDIA measures), a cloud
vendor's published nccl-tests table, or a DeepEP README table. ``rows()`` simulates each on a
fabric built to the measurement's setup (servers x 8 GPUs, NIC rate, NVLink rate, message
size, algorithm where the source states it) through rfabric's public API, ``rf.collective``:
the machinery behind ``rfabric collective``, so the simulated column follows whatever
collective model the engine has when this runs. Nothing here is fitted: each row declares
``calibrated`` (True only if an rfabric constant was set from that row; none is today), and
the rest are held out.

    python bench/validation/collectives.py            # every row (about a minute on 2 cores)
    python bench/validation/collectives.py --quick    # the fast subset the tests run
    python bench/validation/collectives.py --only deepep

Fabrics: ``RailOptimized`` (NIC j of every server on rail j, as DGX/HGX clusters are
cabled; non-blocking), 8 GPUs per server, one NIC per GPU. A setup with fewer, faster NICs
per server (4 x 400G for 8 GPUs) is modelled with the same NIC bandwidth per server spread
over 8 NICs (8 x 200G), and its row says so. NVLink is the per-direction rate of the GPU's
NVLink ports: A100 (NVLink3) 300 GB/s, H100 (NVLink4) 450 GB/s, H800 200 GB/s.
"""

# (no "from __future__ import annotations": a dataclass with string annotations needs its module
# in sys.modules, which a driver loading this file by path need not arrange)
import argparse
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass

import rfabric as rf

GROUP = "collectives"
GPUS_PER_SERVER = 8

# NVLink per GPU and direction (NVIDIA's data sheets: 600 / 900 / 400 GB/s bidirectional).
NVLINK = {"A100": "2400Gbps", "H100": "3600Gbps", "H800": "1600Gbps"}

# DeepEP V1 message sizes per rank, from its tables (docs/legacy.md): the low-latency
# bandwidth column is bytes / latency with bytes = 128 tokens x top-8 x bytes per token copy
# (FP8 dispatch: 7,168 hidden + 7,168/128 x 4 scale bytes + 16 = 7,408; BF16 combine 14,336):
# 7.59 MB / 77 us = 98.5 GB/s, the table's 98; 14.68 MB / 114 us = 128.8, the table's 127.
DEEPEP_LL_DISPATCH_BYTES = 128 * 8 * 7408
DEEPEP_LL_COMBINE_BYTES = 128 * 8 * 7168 * 2
# Normal kernels (training / prefill): 4,096 tokens x 7,168 hidden x top-8 FP8, every
# token copy sent (no per-node deduplication): 224 MiB per rank, large enough that the
# bandwidth is the steady state.
DEEPEP_NORMAL_BYTES = 4096 * 7168 * 8

# Sources, cited once each (a row's `source` names the place in it).
NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests/issues/"
NCCL = "https://github.com/NVIDIA/nccl/issues/"
AZURE_A100 = "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/ND_A100_v4_results.md"
DEEPEP = "https://github.com/deepseek-ai/DeepEP/blob/main/docs/legacy.md"


def rail_fabric(servers: int, nic: str, nvlink: str, *, pxn: bool = True):
    """``servers`` x 8 GPUs on a rail-optimized fabric of ``nic`` links, NVLink ``nvlink``."""
    return rf.topologies.RailOptimized(servers * GPUS_PER_SERVER, link=nic, nvlink=nvlink, pxn=pxn)


def _op(fabric, kind: str, size: int, algorithm: str, backend: str) -> dict:
    return rf.collective(fabric, kind, sizes=[size], algorithm=algorithm, backend=backend).to_pylist()[0]


def busbw(kind: str, servers: int, nic: str, nvlink: str, size: int, algorithm="auto", backend="packet"):
    """nccl-tests busbw (GB/s) of one collective."""

    def run() -> float:
        return _op(rail_fabric(servers, nic, nvlink), kind, size, algorithm, backend)["busbw_GBps"]

    run.backend = backend
    return run


def busbw_per_nic(servers: int, nic: str, nvlink: str, size: int, algorithm="ring", backend="packet"):
    """all_reduce busbw divided by the NICs per server (the maintainers' per-NIC figure)."""
    total = busbw("all_reduce", servers, nic, nvlink, size, algorithm, backend)

    def run() -> float:
        return total() / GPUS_PER_SERVER

    run.backend = backend
    return run


def time_us(kind: str, servers: int, nic: str, nvlink: str, size: int, algorithm="auto", backend="packet"):
    """Completion time (us) of one collective."""

    def run() -> float:
        return _op(rail_fabric(servers, nic, nvlink), kind, size, algorithm, backend)["time_ps"] / 1e6

    run.backend = backend
    return run


def a2a_bottleneck_bw(servers: int, nic: str, nvlink: str, size: int, *, pxn=True, backend="flow"):
    """DeepEP's "bottleneck bandwidth" of an all-to-all of ``size`` bytes per rank: the bytes
    one GPU sends over its bottleneck domain (RDMA: to other servers; NVLink within one
    server: to the other GPUs) divided by the completion time, in GB/s."""

    def run() -> float:
        op = _op(rail_fabric(servers, nic, nvlink, pxn=pxn), "all_to_all", size, "auto", backend)
        n = servers * GPUS_PER_SERVER
        peers = n - GPUS_PER_SERVER if servers > 1 else n - 1
        return size * peers / n / (op["time_ps"] / 1e3)

    run.backend = backend
    return run


def a2a_time_us(servers: int, nic: str, nvlink: str, size: int, *, pxn=True, backend="packet"):
    def run() -> float:
        return (
            _op(rail_fabric(servers, nic, nvlink, pxn=pxn), "all_to_all", size, "auto", backend)["time_ps"]
            / 1e6
        )

    run.backend = backend
    return run


@dataclass(frozen=True)
class Case:
    """One public measurement and how to simulate it."""

    key: str
    what: str
    hardware: str
    setup: str
    measured: float
    unit: str
    source: str
    note: str
    simulate: Callable[[], float]
    calibrated: bool = False  # True only if an rfabric constant is set from this row
    quick: bool = False  # in the fast subset (tests, --quick)

    @property
    def full_setup(self) -> str:
        """The setup, naming the rfabric backend that simulates it."""
        backend = getattr(self.simulate, "backend", None)
        if backend and "backend" not in self.setup:
            return f"{self.setup}; {backend} backend"
        return self.setup

    def row(self) -> dict:
        return {
            "group": GROUP,
            "what": self.what,
            "hardware": self.hardware,
            "setup": self.full_setup,
            "measured": float(self.measured),
            "unit": self.unit,
            "source": self.source,
            "calibrated": bool(self.calibrated),
            "simulated": float(self.simulate()),
            "note": self.note,
        }


GiB, MiB = 1 << 30, 1 << 20
A100, H100, H800 = NVLINK["A100"], NVLINK["H100"], NVLINK["H800"]

NVLINK_RING_GAP = (
    "rfabric moves NVLink data at the link rate; NCCL's ring over NVLink reaches ~80% of it "
    "(sjeaugey, nccl-tests #212: 'protocol overhead (~20%)'), which the model lacks"
)
SMALL_MSG_GAP = (
    "small message: NCCL's time is its per-step latency (kernel launch, LL/LL128 protocol "
    "flags, proxy thread), which the model does not have; it has only wire and switch latencies"
)

NIC_GAP = (
    "the model's ring runs at the NIC rate less its RoCE headers; NCCL's network path (proxy "
    "thread, GPU-NIC PCIe, IB transport) loses a few % more"
)

CASES: list[Case] = [
    # ---- NVLink only: one server of 8 GPUs ----
    Case(
        key="nvl-a100-ar-8g",
        what="all_reduce 8 GiB, one A100 server",
        hardware="8x A100-SXM4-80GB, NVLink3 + NVSwitch (300 GB/s per GPU and direction)",
        setup="1 server x 8 GPUs, all_reduce, NCCL 2.18.5 default algorithm (rfabric auto), 8 GiB, in-place",
        measured=231.58,
        unit="GB/s busbw",
        source=f"Azure ND A100 v4 results, 'NCCL Bandwidth' table, row 8G: {AZURE_A100}",
        note=NVLINK_RING_GAP,
        simulate=busbw("all_reduce", 1, "200Gbps", A100, 8 * GiB),
        quick=True,
    ),
    Case(
        key="nvl-a100-ar-8m",
        what="all_reduce 8 MiB, one A100 server",
        hardware="8x A100-SXM4-80GB, NVLink3 + NVSwitch",
        setup="1 server x 8 GPUs, all_reduce, NCCL 2.18.5 default algorithm (rfabric auto), 8 MiB, in-place",
        measured=89.99,
        unit="GB/s busbw",
        source=f"Azure ND A100 v4 results, 'NCCL Bandwidth' table, row 8M: {AZURE_A100}",
        note=SMALL_MSG_GAP,
        simulate=busbw("all_reduce", 1, "200Gbps", A100, 8 * MiB),
        quick=True,
    ),
    Case(
        key="nvl-a100-ar-1m",
        what="all_reduce 1 MiB, one A100 server",
        hardware="8x A100-SXM4-80GB, NVLink3 + NVSwitch",
        setup="1 server x 8 GPUs, all_reduce, NCCL 2.18.5 default algorithm (rfabric auto), 1 MiB, in-place",
        measured=36.22,
        unit="GB/s busbw",
        source=f"Azure ND A100 v4 results, 'NCCL Bandwidth' table, row 1M: {AZURE_A100}",
        note=SMALL_MSG_GAP,
        simulate=busbw("all_reduce", 1, "200Gbps", A100, 1 * MiB),
    ),
    Case(
        key="nvl-h100-ar-ring",
        what="all_reduce ring 4 GiB, one H100 server",
        hardware="8x H100-SXM, NVLink4 + NVSwitch (450 GB/s per GPU and direction)",
        setup="1 server x 8 GPUs, all_reduce, NCCL_ALGO=RING, 2-4 GiB (simulated at 4 GiB)",
        measured=370.0,
        unit="GB/s busbw",
        source=(
            f"sjeaugey (NCCL), nccl-tests #212 comment 2024-05-06: 'effective NVLink bandwidth of "
            f"370GB/s ... with NCCL_ALGO=RING' ({NCCL_TESTS}212); a user's run, nccl #1455: "
            f"365-370 GB/s at -b 2G -e 4G ({NCCL}1455)"
        ),
        note=NVLINK_RING_GAP,
        simulate=busbw("all_reduce", 1, "400Gbps", H100, 4 * GiB, "ring"),
    ),
    Case(
        key="nvl-h100-ag-16g",
        what="all_gather 16 GiB, one H100 server",
        hardware="8x H100-SXM, NVLink4 + NVSwitch",
        setup="1 server x 8 GPUs, all_gather (ring), 16 GiB",
        measured=360.0,
        unit="GB/s busbw",
        source=(
            f"nccl-tests #326: user's all_gather_perf -b 128M -e 16384M -g 8 saturates at ~360 GB/s; "
            f"sjeaugey 2025-06-24: '360 GB/s is exactly what we'd expect on H100' ({NCCL_TESTS}326)"
        ),
        note=NVLINK_RING_GAP,
        simulate=busbw("all_gather", 1, "400Gbps", H100, 16 * GiB, "ring"),
    ),
    Case(
        key="deepep-normal-ep8",
        what="DeepEP normal dispatch EP8 (intranode), NVLink bottleneck bandwidth",
        hardware="8x H800, NVLink (200 GB/s per GPU and direction; DeepEP: ~160 GB/s measured max)",
        setup="1 server x 8 GPUs, all_to_all (direct), 224 MiB per rank (4,096 tokens x 7,168 x top-8, FP8)",
        measured=153.0,
        unit="GB/s (NVLink bytes per GPU / time)",
        source=f"DeepEP V1 README (docs/legacy.md), 'Normal kernels' table, Intranode dispatch EP8: {DEEPEP}",
        note="rfabric runs NVLink at the link rate; H800 NVLink delivers ~160 of 200 GB/s (DeepEP's own figure)",
        simulate=a2a_bottleneck_bw(1, "400Gbps", H800, DEEPEP_NORMAL_BYTES, backend="packet"),
    ),
    # ---- NICs: 100G, 200G, 400G; ring and tree all_reduce ----
    Case(
        key="nic-100g-per-nic",
        what="all_reduce ring busbw per 100G NIC",
        hardware="8x A100 per server, NVLink3; 8x 100 Gb/s NICs per server",
        setup="stated per NIC, setup not stated: simulated on 4 servers x 8 GPUs, ring, 1 GiB",
        measured=12.0,
        unit="GB/s busbw per NIC",
        source=(
            f"sjeaugey (NCCL), nccl-tests #119 comment 2022-11-17: 'We usually consider 24GB/s is the "
            f"peak performance per 200G NIC (12 GB/s for 100G NICs)' ({NCCL_TESTS}119)"
        ),
        note=NIC_GAP,
        simulate=busbw_per_nic(4, "100Gbps", A100, 1 * GiB),
        quick=True,
    ),
    Case(
        key="nic-200g-dgx-a100",
        what="all_reduce busbw, DGX-A100 with 8x 200G IB",
        hardware="DGX-A100: 8x A100, NVLink3; 8x 200 Gb/s HDR InfiniBand",
        setup="servers not stated (ring regime, 3+ nodes): simulated on 4 servers x 8 GPUs, ring, 1 GiB",
        measured=192.0,
        unit="GB/s busbw",
        source=(
            f"AddyLaddy (NCCL), nccl #812 comment 2023-03-31: 'On an Nvidia DGX-A100 system we have "
            f"8x200Gbit/s IB cards and we measure 192GB/s AllReduce BusBW' ({NCCL}812)"
        ),
        note=NIC_GAP,
        simulate=busbw("all_reduce", 4, "200Gbps", A100, 1 * GiB, "ring"),
    ),
    Case(
        key="nic-400g-per-nic",
        what="all_reduce ring busbw per 400G NDR NIC",
        hardware="8x H100 per server, NVLink4; 8x ConnectX-7 400 Gb/s NDR InfiniBand",
        setup="2 servers x 8 GPUs, NCCL_ALGO=RING, large messages (simulated at 1 GiB); 46-48 GB/s, row uses 47",
        measured=47.0,
        unit="GB/s busbw per NIC",
        source=(
            f"AddyLaddy (NCCL), nccl-tests #290 comment 2025-03-03: 'For NDR @ 400Gbps you should see "
            f"46-48GB/s per NIC', with NCCL_ALGO=RING on two nodes ({NCCL_TESTS}290)"
        ),
        note=NIC_GAP,
        simulate=busbw_per_nic(2, "400Gbps", H100, 1 * GiB),
    ),
    Case(
        key="a100-3srv-4x200g",
        what="all_reduce ~125 MiB, 3 A100 servers, 4x 200G per server",
        hardware="8x A100-SXM4-40GB per server, NVLink3; 4x HDR 200 Gb/s IB per server (2 GPUs per NIC)",
        setup=(
            "3 servers x 8 GPUs, all_reduce, NCCL default algorithm: ring (sjeaugey, nccl-tests #160: "
            "'On 3+ nodes we should use rings for large enough sizes'), 131,072,008 B, out-of-place; "
            "modelled as 8x 100G per server (same 800 Gb/s per server)"
        ),
        measured=96.45,
        unit="GB/s busbw",
        source=f"nccl-tests #119 (Yujaeseo, 2022-11-17), all_reduce_perf table, row 131072008 ({NCCL_TESTS}119)",
        note=(
            "two GPUs share each real NIC (rfabric has one NIC per GPU, so 4x200G is modelled as "
            "8x100G: same bandwidth per server, half the rate per NIC); " + NIC_GAP
        ),
        simulate=busbw("all_reduce", 3, "100Gbps", A100, 131_072_008, "ring"),
    ),
    Case(
        key="h100-5srv-ring-1g",
        what="all_reduce ring 1 GiB, 5 H100 servers, 4x 400G RoCE per server",
        hardware="8x H100 per server, NVLink4; 4x 400 Gb/s RoCE NICs per server",
        setup=(
            "5 servers x 8 GPUs, NCCL_ALGO=Ring, PXN on, -b 1M -e 1G (peak, simulated at 1 GiB); "
            "modelled as 8x 200G per server (same 1.6 Tb/s per server)"
        ),
        measured=190.0,
        unit="GB/s busbw",
        source=f"nccl #1368 (2024-07-18), issue text: 'ring bandwidth (190GB/s)' ({NCCL}1368)",
        note="two GPUs share each real NIC; rfabric has one NIC per GPU",
        simulate=busbw("all_reduce", 5, "200Gbps", H100, 1 * GiB, "ring"),
    ),
    Case(
        key="h100-5srv-tree-1g",
        what="all_reduce tree 1 GiB, 5 H100 servers, 4x 400G RoCE per server",
        hardware="8x H100 per server, NVLink4; 4x 400 Gb/s RoCE NICs per server",
        setup=(
            "5 servers x 8 GPUs, NCCL_ALGO=Tree, -b 1M -e 1G (peak, simulated at 1 GiB); "
            "modelled as 8x 200G per server"
        ),
        measured=150.0,
        unit="GB/s busbw",
        source=f"nccl #1368 (2024-07-18), issue text: 'tree bus bandwidth(150GB/s)' ({NCCL}1368)",
        note=(
            "NCCL's tree splits each channel between a reduce and a broadcast and runs the "
            "intra-server chain over NVLink with per-hop overheads; rfabric's double binary tree "
            "reaches the ring's bandwidth"
        ),
        simulate=busbw("all_reduce", 5, "200Gbps", H100, 1 * GiB, "tree"),
    ),
    Case(
        key="h100-5srv-ring-1m",
        what="all_reduce ring 1 MiB, 5 H100 servers",
        hardware="8x H100 per server, NVLink4; 4x 400 Gb/s RoCE NICs per server",
        setup="5 servers x 8 GPUs, NCCL_ALGO=Ring, 1 MiB (1,048,576 B), out-of-place; modelled as 8x 200G per server",
        measured=5.76,
        unit="GB/s busbw",
        source=f"nccl #1368 (2024-07-18), ring all_reduce_perf table, row 1048576: 354.9 us ({NCCL}1368)",
        note=SMALL_MSG_GAP + "; a 40-rank ring has 78 steps",
        simulate=busbw("all_reduce", 5, "200Gbps", H100, 1 * MiB, "ring"),
    ),
    Case(
        key="a100-2srv-ring-8b",
        what="all_reduce ring 8 B latency, 2 DGX-A100",
        hardware="DGX-A100: 8x A100, NVLink3; 8x 100 Gb/s NICs per server",
        setup="2 servers x 8 GPUs, NCCL_ALGO=Ring, NCCL 2.16.5, 8 B, out-of-place",
        measured=93.12,
        unit="us",
        source=f"nccl #812 (elevenxiang, 2023-03-30), ring all_reduce_perf table, row 8: 93.12 us ({NCCL}812)",
        note=SMALL_MSG_GAP,
        simulate=time_us("all_reduce", 2, "100Gbps", A100, 8, "ring"),
        quick=True,
    ),
    # ---- all_to_all: DeepEP on H800 with 400G InfiniBand ----
    *[
        Case(
            key=f"deepep-normal-ep{ep}",
            what=f"DeepEP normal dispatch EP{ep}, RDMA bottleneck bandwidth",
            hardware="8x H800 per server, NVLink 200 GB/s; 8x ConnectX-7 400 Gb/s IB per server",
            setup=(
                f"{ep // 8} servers x 8 GPUs, all_to_all (direct, PXN: cross-rail via NVLink), "
                f"224 MiB per rank (4,096 tokens x 7,168 x top-8, FP8); flow backend"
            ),
            measured=bw,
            unit="GB/s (inter-server bytes per GPU / time)",
            source=f"DeepEP V1 README (docs/legacy.md), 'Normal kernels' table, Internode dispatch EP{ep}: {DEEPEP}",
            note=(
                "DeepEP sends each token once per destination server and forwards it over NVLink "
                "(its bytes differ from a uniform all-to-all's) and counts 'logical' bytes (58 GB/s "
                "at EP32 exceeds the NIC's 50); rfabric moves a uniform all-to-all at the NIC rate"
            ),
            simulate=a2a_bottleneck_bw(ep // 8, "400Gbps", H800, DEEPEP_NORMAL_BYTES),
        )
        for ep, bw in ((16, 43.0), (32, 58.0), (64, 51.0))
    ],
    *[
        Case(
            key=f"deepep-ll-{kind}-ep{ep}",
            what=f"DeepEP low-latency {kind} EP{ep}, latency",
            hardware="8x H800 per server, NVLink 200 GB/s; 8x ConnectX-7 400 Gb/s IB per server",
            setup=(
                f"{ep // 8} servers x 8 GPUs, all_to_all (direct, no PXN: every GPU sends from its own NIC), "
                f"{size:,} B per rank (128 tokens x top-8, {'FP8' if kind == 'dispatch' else 'BF16'}); "
                f"packet backend"
            ),
            measured=lat,
            unit="us",
            source=(
                f"DeepEP V1 README (docs/legacy.md), 'Low-latency kernels' table, {kind} #EP {ep}: "
                f"{lat:g} us: {DEEPEP}"
            ),
            note=(
                "DeepEP's LL kernels send one RDMA write per token copy (7-14 KB messages, per-message "
                "NIC and GPU-initiated (IBGDA) overheads) and wait on per-expert flags; rfabric moves "
                "the bytes as one message per rank pair"
            ),
            simulate=a2a_time_us(ep // 8, "400Gbps", H800, size, pxn=False),
            quick=(kind == "dispatch" and ep == 16),
        )
        for kind, ep, lat, size in (
            ("dispatch", 16, 118.0, DEEPEP_LL_DISPATCH_BYTES),
            ("dispatch", 64, 173.0, DEEPEP_LL_DISPATCH_BYTES),
            ("dispatch", 128, 192.0, DEEPEP_LL_DISPATCH_BYTES),
            ("dispatch", 256, 194.0, DEEPEP_LL_DISPATCH_BYTES),
            ("combine", 16, 195.0, DEEPEP_LL_COMBINE_BYTES),
            ("combine", 256, 360.0, DEEPEP_LL_COMBINE_BYTES),
        )
    ],
]


def cases(*, quick: bool = False, only: str | None = None) -> list[Case]:
    """The measurements (no simulation): all, the quick subset, or those whose key contains ``only``."""
    out = [c for c in CASES if c.quick or not quick]
    if only:
        out = [c for c in out if only in c.key]
    return out


def rows(*, quick: bool = False, only: str | None = None) -> list[dict]:
    """One dict per public measurement, each simulated now (see the module docstring)."""
    return [c.row() for c in cases(quick=quick, only=only)]


def error_pct(row: dict) -> float:
    """Signed error of the simulation, in % of the measurement."""
    return (row["simulated"] - row["measured"]) / row["measured"] * 100.0


def format_table(rows_: list[dict]) -> str:
    lines = [f"{'what':<66} {'measured':>9} {'simulated':>9} {'error':>8}  {'cal':<3}  unit / source"]
    for r in rows_:
        src = r["source"].rsplit(" ", 1)[-1].strip("()")
        lines.append(
            f"{r['what'][:66]:<66} {r['measured']:>9.2f} {r['simulated']:>9.2f} {error_pct(r):>+7.1f}%  "
            f"{'yes' if r['calibrated'] else 'no':<3}  {r['unit']}; {src}"
        )
    held = [abs(error_pct(r)) for r in rows_ if not r["calibrated"]]
    if held:
        lines.append(
            f"held-out rows: {len(held)}, median |error| {statistics.median(held):.1f}%, "
            f"max |error| {max(held):.1f}%, within 15%: {sum(e <= 15 for e in held)}/{len(held)}"
        )
    return "\n".join(lines)


def format_markdown(rows_: list[dict]) -> str:
    """The table as docs/validation-collectives.md shows it (setups and sources: ``--list``)."""
    lines = [
        "| what | measured | unit | simulated | error | calibrated |",
        "|---|---:|---|---:|---:|---|",
    ]
    for r in rows_:
        lines.append(
            f"| {r['what']} | {r['measured']:g} | {r['unit']} | {r['simulated']:.2f} | "
            f"{error_pct(r):+.1f}% | {'yes' if r['calibrated'] else 'no'} |"
        )
    held = [abs(error_pct(r)) for r in rows_ if not r["calibrated"]]
    if held:
        lines.append("")
        lines.append(
            f"Held-out rows: {len(held)}; median |error| {statistics.median(held):.1f}%, "
            f"max {max(held):.1f}%; {sum(e <= 15 for e in held)} of {len(held)} within 15%."
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the fast subset (a few seconds)")
    ap.add_argument("--only", help="only rows whose key contains this text (e.g. deepep, nvl, nic)")
    ap.add_argument("--list", action="store_true", help="list the rows' keys and sources, simulate nothing")
    ap.add_argument("--markdown", action="store_true", help="print the docs page's Markdown table")
    args = ap.parse_args(argv)
    if args.list:
        for c in cases(quick=args.quick, only=args.only):
            print(
                f"{c.key}: {c.what} = {c.measured:g} {c.unit}\n  hardware: {c.hardware}\n  setup: {c.full_setup}"
            )
            print(f"  source: {c.source}\n  model lacks: {c.note}\n  calibrated: {c.calibrated}")
        return 0
    out = rows(quick=args.quick, only=args.only)
    if not out:
        print("no rows match", file=sys.stderr)
        return 1
    print(format_markdown(out) if args.markdown else format_table(out))
    return 0 if all(math.isfinite(r["simulated"]) for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
