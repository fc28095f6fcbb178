"""The incast table of docs/explanation/sites.md: 8 flows of 8 MiB from the 100 Gbps site's
GPUs 16-23 to the 200 Gbps site's GPUs 0-7 over an 80 Gbps, 100 us long link (packet
backend, seed 1), under one run-wide transport and with the long link's own DCTCP.

    python bench/sites_incast.py        # prints the Markdown table (a few seconds)
"""

import numpy as np

import rfabric as rf
from rfabric.topologies import FatTree, Sites

ROWS = [
    ("`roce` (lossless)", "roce", None, {}),
    ("`dctcp` (lossy)", "dctcp", None, {}),
    ('`roce`, `Sites(transport="dctcp")`', "roce", "dctcp", {}),
    ('`roce`, `Sites(transport="dctcp")`, `dctcp_min_rto="1ms"`', "roce", "dctcp", {"dctcp_min_rto": "1ms"}),
]


def row(label, run, long_transport, settings):
    a, b = FatTree(gpus=16), FatTree(gpus=16, link="100Gbps")
    s = Sites({"train": a, "gen": b}, link="80Gbps", latency="100us", transport=long_transport)
    fl = rf.Flows(src=np.arange(16, 24), dst=np.arange(8), size_bytes=[8 << 20] * 8, start_ps=[0] * 8)
    res = rf.simulate(s, fl, seed=1, transport=run, **settings)
    rows = set(s.long_links().tolist())
    links = res.links.to_pylist()

    def total(key, on_long):
        return sum(x[key] for x in links if (x["link_id"] in rows) == on_long)

    slowest = max(res.flows["fct_ps"].to_pylist()) / 1e9
    rtx = sum(res.flows["retransmits"].to_pylist())
    drops = total("drops", True)
    long_ = f"{total('ecn_marks', True):,} ECN marks, " + (f"{drops:,} drops" if drops else "no drops")
    pauses, inside_drops = total("pfc_pauses", False), total("drops", False)
    inside = []
    inside.append(f"{inside_drops:,} drops" if inside_drops else "no drops")
    inside.append(f"{pauses:,} PFC pauses" if pauses else "no pauses")
    return f"| {label} | {slowest:.1f} ms | {long_} | {', '.join(inside)} | {rtx:,} |"


def table() -> str:
    head = (
        "| transport | slowest flow | long link | inside the sites | frames sent again |\n"
        "|---|---|---|---|---|"
    )
    return "\n".join([head] + [row(*r) for r in ROWS])


if __name__ == "__main__":
    print(table())
