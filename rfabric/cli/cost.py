"""``rfabric cost``: a fabric's network bill of materials."""

from __future__ import annotations

from pathlib import Path


def _fabric_arg(text: str, gpus: int, link: str):
    """A topology preset (TOML path, or a name in the repository's topologies/ folder), or a
    fabric name from rf.sweep's list ("FT", "FT-OS", "RFabric", ...) built at --gpus/--link."""
    from ..sweeps import resolve_fabric
    from ..topologies import load
    from ..units import parse_rate

    path = Path(text)
    if path.suffix == ".toml" or path.exists():
        return load(path)
    preset = Path(__file__).resolve().parents[2] / "topologies" / f"{text}.toml"  # the repository's
    if preset.exists():
        return load(preset)
    return resolve_fabric(text, where="rfabric cost").build(gpus, parse_rate(link, name="--link"))


def cmd_cost(args) -> int:
    """Print a fabric's network bill of materials (DESIGN §8; prices: the paper's table 4)."""
    from .. import cost

    fab = _fabric_arg(args.fabric, args.gpus, args.link)
    bom = cost.bill_of_materials(fab, args.prices, gpu_price_usd=args.gpu_price)
    prices = cost.load_prices(args.prices)
    print(cost.format_bill(bom, f"{fab.name} ({fab.gpus} GPUs): network bill of materials"))
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
