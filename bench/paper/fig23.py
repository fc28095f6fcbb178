"""Figure 23 of the OrchestrRL paper (Appendix I): collective time on RFabric with
traffic-aware circuit allocation (``StageAwareController``) against uniform splitting
(``UniformController``), 200 Gb/s links.

    python bench/paper/fig23.py [--quick]

Workloads (the paper's labels; sizes are per-rank buffers, nccl-tests convention; ranks laid
out as Megatron does, TP innermost, then CP or EP, then DP, on GPUs 0..n-1):

* EP64_DP2_1GB: 128 GPUs, all_to_all over each EP group of 64 consecutive ranks, 1 GB;
* TP4_CP8_DP4_1GB: 128 GPUs, all_to_all over each CP group (8 ranks 4 apart), 1 GB;
* TP4_DP16_25GB: 64 GPUs, ring all_reduce over each DP group (16 ranks 4 apart), 25 GB;
* TP4_DP32_50GB: 128 GPUs, ring all_reduce over each DP group (32 ranks 4 apart), 50 GB.

Each collective follows a compute gap of t_ocs (25 ms), the window in which a controller can
light new circuits before the traffic starts; times are measured after it. On the flow
backend (``backend="flow"``): 25 and 50 GB per rank are hours in packets.

Dimensionings (the paper's §5.1 and figures 7-8 give no PoD size, ToR radix or OCS port
count):

* ``today``: ``RFabric(gpus)``: radix-16 ToRs (8 servers per rail group, 8 OCS ports per
  ToR), one PoD of up to 16 servers, PXN on. At 64-128 GPUs each rail has at most two ToRs,
  which the uniform plan already joins with every port: no plan can differ.
* ``radix8``: radix-8 ToRs (4 servers per rail group, 4 OCS ports per ToR): a 128-GPU PoD has
  four ToRs per rail (figure 8 draws several same-rail ToRs per PoD), so which same-rail ToR
  pairs get circuits is a real choice. PXN on.
* ``nopxn``: today's ToRs with PXN off: cross-rail traffic crosses ToRs of different rails,
  which the paper's figures never rule out (it does not mention PXN).
* ``pods32``: radix-8 ToRs and PoDs of 4 servers (32 GPUs, one rail group each): every
  cross-server transfer of the larger groups crosses the OCS-Core, as the paper's DP
  all-reduce does (§5.2: "OCS-Core circuits ... inter-PoD mesh").

``--quick``: TP4_CP8_DP4 at 0.25 GB and TP4_DP16 at 1 GB, ``today`` and ``radix8``.
"""

from __future__ import annotations

import common as C
import numpy as np

import rfabric as rf
from rfabric.controllers import StageAwareController, UniformController
from rfabric.traces import Trace

GB = 10**9

WORKLOADS = {
    # label: (gpus, kind, group size, stride between group members, bytes)
    "EP64_DP2_1GB": (128, "all_to_all", 64, 1, 1 * GB),
    "TP4_CP8_DP4_1GB": (128, "all_to_all", 8, 4, 1 * GB),
    "TP4_DP16_25GB": (64, "all_reduce", 16, 4, 25 * GB),
    "TP4_DP32_50GB": (128, "all_reduce", 32, 4, 50 * GB),
}
QUICK = {
    "TP4_CP8_DP4_0.25GB": (128, "all_to_all", 8, 4, GB // 4),
    "TP4_DP16_1GB": (64, "all_reduce", 16, 4, 1 * GB),
}

DIMENSIONINGS = {
    "today": dict(),
    "radix8": dict(radix=8),
    "nopxn": dict(pxn=False),
    "pods32": dict(radix=8, pod_servers=4),
}


def groups(gpus: int, size: int, stride: int) -> list[list[int]]:
    """Rank groups of ``size`` members ``stride`` apart (Megatron order), covering 0..gpus-1."""
    out, seen = [], np.zeros(gpus, bool)
    for first in range(gpus):
        if seen[first]:
            continue
        block = (first // (size * stride)) * size * stride
        g = [block + (first - block) % stride + k * stride for k in range(size)]
        seen[g] = True
        out.append(g)
    return out


def workload(gpus: int, kind: str, size: int, stride: int, nbytes: int, lead_ps: int) -> Trace:
    gs = groups(gpus, size, stride)
    n = len(gs)
    return Trace.from_columns(
        op_id=np.arange(n),
        stage="train",
        phase="a2a" if kind == "all_to_all" else "grad_sync",
        kind=kind,
        ranks=gs,
        size_bytes=[nbytes] * n,
        deps=[[]] * n,
        compute_ps=lead_ps,
        gpus=gpus,
    )


def run(args) -> list[dict]:
    lead = rf.units.parse_time(C.T_OCS)
    work = QUICK if args.quick else WORKLOADS
    dims = ["today", "radix8"] if args.quick else list(DIMENSIONINGS)
    rows = []
    for dim in dims:
        for label, (gpus, kind, size, stride, nbytes) in work.items():
            fab = rf.topologies.RFabric(gpus, "200Gbps", **DIMENSIONINGS[dim])
            tr = workload(gpus, kind, size, stride, nbytes, lead)
            t = C.Timer(f"fig23 {dim} {label}")
            uni = rf.simulate(fab, tr, controller=UniformController(), backend="flow", t_ocs=C.T_OCS, seed=1)
            ctl = StageAwareController()
            aware = rf.simulate(fab, tr, controller=ctl, backend="flow", t_ocs=C.T_OCS, seed=1)
            t.done()
            for res in (uni, aware):
                if res.run["makespan_ps"] < 0:
                    raise RuntimeError(f"fig23 {dim} {label}: did not finish ({res.run.get('controller')})")
            u = (uni.run["makespan_ps"] - lead) / 1e12
            a = (aware.run["makespan_ps"] - lead) / 1e12
            rows.append(
                {
                    "dimensioning": dim,
                    "workload": label,
                    "gpus": gpus,
                    "pods": fab.pods,
                    "tors_per_pod": fab.tors_per_pod,
                    "ocs_ports_per_tor": fab.tor_uplinks,
                    "pxn": fab.pxn,
                    "uniform_s": u,
                    "traffic_aware_s": a,
                    "reduction": 1 - a / u,
                    "plans": aware.run["plan_changes"],
                    "decisions": ";".join(
                        sorted({str(d.action) for d in ctl.log if d.action != "cached template"})
                    ),
                    "backend": "flow",
                }
            )
    return rows


COLS = [
    ("dimensioning", "{}"),
    ("workload", "{}"),
    ("pods", "{}"),
    ("tors_per_pod", "{}"),
    ("ocs_ports_per_tor", "{}"),
    ("pxn", "{}"),
    ("uniform_s", "{:.4f}"),
    ("traffic_aware_s", "{:.4f}"),
    ("reduction", "{:.1%}"),
    ("plans", "{}"),
    ("decisions", "{}"),
]


def main(argv=None) -> list[dict]:
    ap = C.parser(__doc__)
    args = ap.parse_args(argv)
    print(C.SETUP)
    rows = run(args)
    C.print_table(
        "Figure 23: collective time after a 25 ms gap, traffic-aware (StageAware) against uniform (flow backend, 200 Gb/s)",
        rows,
        COLS,
    )
    C.write(rows, "fig23", args.out)
    return rows


if __name__ == "__main__":
    main()
