"""The incast table of docs/explanation/sites.md: 8 flows of 8 MiB from the 100 Gbps site's
GPUs 16-23 to the 200 Gbps site's GPUs 0-7 over an 80 Gbps, 100 us long link (packet
backend, seed 1), under one run-wide transport and with the long link's own DCTCP (its
settings scaled to the long link, then the datacenter's).

And the long-flow table: one cross-site flow over a 1 ms long link, packet against flow
backend.

    python bench/sites_incast.py        # prints both Markdown tables (about 10 s)
"""

import numpy as np

import rfabric as rf
from rfabric.topologies import FatTree, Sites

ROWS = [
    ("`roce` (lossless)", "roce", None, {}),
    ("`dctcp` (lossy)", "dctcp", None, {}),
    ('`roce`, `Sites(transport="dctcp")`', "roce", "dctcp", {}),
    (
        '`roce`, `Sites(transport="dctcp", ecn="5us", min_rto="200us")`',
        "roce",
        "dctcp",
        {"ecn": "5us", "min_rto": "200us"},
    ),
]


def row(label, run, long_transport, settings):
    a, b = FatTree(gpus=16), FatTree(gpus=16, link="100Gbps")
    s = Sites({"train": a, "gen": b}, link="80Gbps", latency="100us", transport=long_transport, **settings)
    fl = rf.Flows(src=np.arange(16, 24), dst=np.arange(8), size_bytes=[8 << 20] * 8, start_ps=[0] * 8)
    res = rf.simulate(s, fl, seed=1, transport=run)
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


#: (long link, flow bytes) of the long-flow table: StreamRL's 15.2 GB weight stream and a 2 GB
#: flow over 80 Gbps, the stream over RollMux's 20 Gbps; 1 ms one way
LONG_FLOWS = [("80Gbps", 15_200_000_000), ("80Gbps", 2_000_000_000), ("20Gbps", 15_200_000_000)]
LONG_LATENCY = "1ms"


def long_flow(link: str, size: int) -> dict:
    """One cross-site flow (GPU 3 of the 200 Gbps site to GPU 21 of the 100 Gbps one) over
    the long link's own DCTCP with its default settings, on both backends."""
    s = Sites(
        {"train": FatTree(gpus=16), "gen": FatTree(gpus=16, link="100Gbps")},
        link=link,
        latency=LONG_LATENCY,
        transport="dctcp",
    )
    fl = rf.Flows(src=[3], dst=[21], size_bytes=[size], start_ps=[0])
    out = {"fabric": s, "rate_bps": s.long_link_bps, "rtt_ps": 2 * s.latency_ps}
    for backend in ("packet", "flow"):
        res = rf.simulate(s, fl, seed=1, backend=backend)
        out[backend] = res.flows.to_pylist()[0]
        out[backend + "_run"] = res.run
    return out


def long_flow_table() -> str:
    head = (
        "| long link | flow | packet backend | flow backend | goodput / line rate | marked, dropped | frames sent again |\n"
        "|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for link, size in LONG_FLOWS:
        r = long_flow(link, size)
        p, f, run = r["packet"], r["flow"], r["packet_run"]
        goodput = size * 8 / ((p["fct_ps"] - r["rtt_ps"]) / 1e12) / r["rate_bps"]
        drops = f"{run['drops']:,} drops" if run["drops"] else "no drops"
        rows.append(
            f"| {link.replace('Gbps', ' Gbps')}, {LONG_LATENCY.replace('ms', ' ms')} | {size / 1e9:.1f} GB | "
            f"{p['fct_ps'] / 1e12:.3f} s | {f['fct_ps'] / 1e12:.3f} s | {goodput:.1%} | "
            f"{run['ecn_marks']:,} ECN marks, {drops} | {p['retransmits']:,} |"
        )
    return "\n".join(rows)


def table() -> str:
    head = (
        "| transport | slowest flow | long link | inside the sites | frames sent again |\n"
        "|---|---|---|---|---|"
    )
    return "\n".join([head] + [row(*r) for r in ROWS])


if __name__ == "__main__":
    print(table())
    print()
    print(long_flow_table())
