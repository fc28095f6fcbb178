"""``rfabric cost``: a fabric's bill of materials (network and GPUs)."""

from __future__ import annotations

from .common import fabric_arg as _fabric_arg


def cmd_cost(args) -> int:
    """Print a fabric's bill of materials (DESIGN §8; network prices: the paper's table 4; GPU
    prices: per type, rfabric/data/prices.toml)."""
    from .. import cost

    fab = _fabric_arg(args.fabric, args.gpus, args.link, "rfabric cost")
    bom = cost.bill_of_materials(fab, args.prices, gpu_price_usd=args.gpu_price)
    prices = cost.load_prices(args.prices)
    print(cost.format_bill(bom, f"{fab.name} ({fab.gpus} GPUs): bill of materials"))
    words = {
        "eps": ("packet switch", "packet switches"),
        "ocs": ("OCS", "OCSes"),
        "patch_panel": ("patch panel", "patch panels"),
    }
    parts = []
    for k, d in cost.devices(fab).items():
        ports = (
            f"{d['min_ports']}" if d["min_ports"] == d["max_ports"] else f"{d['min_ports']}-{d['max_ports']}"
        )
        parts.append(f"{d['count']} {words[k][d['count'] > 1]} ({ports} wired ports each)")
    if parts:
        print("devices: " + ", ".join(parts))
    print(f"prices: {args.prices or 'rfabric/data/prices.toml'} ({prices.source})")
    if args.output:
        from ..pareto import export

        print(f"wrote {export(bom, args.output)}")
    return 0
