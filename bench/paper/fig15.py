"""Figure 15 of the OrchestrRL paper: network cost of the six fabrics at 200 and 400 Gb/s,
with the GPUs' cost as a reference.

    python bench/paper/fig15.py [--quick] [--scales 128,256,512,1024] [--gpu-price 30000]

``rf.cost.network_cost`` of each fabric as rfabric builds it (every NIC, transceiver, wired
switch port, OCS and patch-panel port and fibre, priced from the paper's Table 4), relative
to FT's, and FT's network cost over the GPUs' cost. No simulation. The paper gives no GPU
price: ``--gpu-price`` (default 30,000 USD per H800) is an assumption of this script, and the
network-to-GPU ratio scales with its inverse. ``--quick``: 128 GPUs only.
"""

from __future__ import annotations

import common as C

import rfabric as rf

LINKS = ("200Gbps", "400Gbps")


def fabric(name: str, gpus: int, link: str):
    T = rf.topologies
    return {
        "FT": lambda: T.FatTree(gpus, link),
        "FT-OS": lambda: T.FatTree(gpus, link, oversubscription=3),
        "RO": lambda: T.RailOptimized(gpus, link),
        "TopoOpt": lambda: T.TopoOpt(gpus, link),
        "MixNet": lambda: T.MixNet(gpus, link),
        "RFabric": lambda: T.RFabric(gpus, link),
    }[name]()


def run(args) -> list[dict]:
    scales = [128] if args.quick else [int(x) for x in args.scales.split(",") if x]
    rows = []
    for gpus in scales:
        for link in LINKS:
            ft = rf.cost.network_cost(fabric("FT", gpus, link))
            gpu_usd = gpus * args.gpu_price
            for name in C.FABRICS:
                usd = rf.cost.network_cost(fabric(name, gpus, link))
                rows.append(
                    {
                        "gpus": gpus,
                        "link": link,
                        "fabric": name,
                        "network_cost_usd": usd,
                        "vs_FT": usd / ft,
                        "per_gpu_usd": usd / gpus,
                        "network_over_gpu_cost": usd / gpu_usd,
                        "gpu_cost_usd": gpu_usd,
                    }
                )
    return rows


COLS = [
    ("gpus", "{}"),
    ("link", "{}"),
    ("fabric", "{}"),
    ("network_cost_usd", "{:,.0f}"),
    ("vs_FT", "{:.3f}"),
    ("per_gpu_usd", "{:,.0f}"),
    ("network_over_gpu_cost", "{:.3f}"),
]


def main(argv=None) -> list[dict]:
    ap = C.parser(__doc__)
    ap.add_argument("--scales", default="128,256,512,1024")
    ap.add_argument("--gpu-price", type=float, default=30_000.0, help="USD per GPU (an assumption)")
    args = ap.parse_args(argv)
    t = C.Timer("fig15")
    rows = run(args)
    t.done()
    C.print_table(
        f"Figure 15: network cost (Table 4 prices; GPU reference at {args.gpu_price:,.0f} USD per GPU, an assumption)",
        rows,
        COLS,
    )
    C.write(rows, "fig15", args.out)
    return rows


if __name__ == "__main__":
    main()
