"""Network cost: a bill of materials counted from a fabric's own node and link tables.

Nothing here knows the fabric families: the counts come from the ``NetworkSpec`` (node kinds,
servers, link rates), so a user's Topology subclass is priced with no extra code. Rules
(DESIGN §8), applied to every link of the spec:

* **Scale-up links are not network cost.** A link with an NVSwitch at either end, or whose
  two ends sit in the same server (NVLink), belongs to the server and is left out.
* Every other link is an **optical link**: **one fibre**, priced at the link's speed.
* Each end of it adds, by the kind of node it ends at:

  - ``gpu``: a **NIC** port and a **transceiver** (one NIC per GPU in every built-in fabric,
    each GPU having one network link);
  - ``eps`` (electrical packet switch): a **switch port** and a **transceiver**;
  - ``ocs``: an **OCS port** (light passes through: no transceiver);
  - ``patch_panel``: a **patch-panel port** (no transceiver).

* A **long link** (link kind ``"long-haul"``: what :class:`rfabric.topologies.Sites` joins
  sites with) is none of the above: it adds a **long-haul optic** at each end (a coherent
  ZR-class pluggable in the gateway's port, the port included) and one **long-haul
  circuit** (the leased wavelength or fibre pair between the sites), both priced at the
  link's speed. rfabric ships no figures for them (no public listing was found to cite):
  give them, e.g. ``prices={"80Gbps": {"long_haul_optic": ..., "long_haul_circuit": ...}}``;
  without them the bill of a fabric with a long link is a SpecError naming the speed.
* Only connected ports are counted. Table 4 prices a packet switch *per port* (a listed
  switch's price over its port count), so a switch is charged for the ports the fabric
  wires; ports a partly used switch leaves dark are not charged (for example the core
  switches that FatTree keeps whole at 128 GPUs). OCS and patch-panel ports likewise.

Prices per link speed (100/200/400/800 Gbps) are Table 4 of the OrchestrRL paper
(Appendix G), shipped as ``rfabric/data/prices.toml`` with the listing cited for each figure.
Override them with a dict or a TOML file of the same shape (only the figures that change)::

    rf.cost.network_cost(fab, prices={"400Gbps": {"transceiver": 650}})
    rf.cost.network_cost(fab, prices="my_prices.toml")

GPUs are priced per type (the paper gives no GPU price): the ``[gpus]`` table of
``prices.toml`` holds a price per GPU type (``rfabric.traces.models.GPU_TYPES``; H800, H20,
H100, each with its source), and the bill ends with one ``gpu`` row per type the fabric's
GPUs are (``NetworkSpec.gpu_types``, from ``Topology(gpu=...)``; H800 by default). A flat
``gpu`` price in the prices, or ``gpu_price_usd=``, overrides every type's. A type without a
price raises SpecError naming it, until ``{"gpus": {"A100-80GB": ...}}`` prices it.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import SpecError, read_toml
from .spec import NODE_KINDS, NetworkSpec
from .units import format_rate, parse_rate

__all__ = [
    "COMPONENTS",
    "BOM_SCHEMA",
    "Prices",
    "load_prices",
    "bill_of_materials",
    "network_cost",
    "cluster_cost",
    "gpu_counts",
    "devices",
    "format_bill",
]

#: Priced components, in bill order. Units: one NIC port, one pluggable optic, one packet-switch
#: port, one OCS port, one patch-panel port, one fibre cable, one long-haul optic (per end of a
#: long link), one long-haul circuit (per long link).
COMPONENTS = (
    "nic",
    "transceiver",
    "switch_port",
    "ocs_port",
    "patch_panel_port",
    "fiber",
    "long_haul_optic",
    "long_haul_circuit",
)

#: Link kind label of long links (rfabric.topologies.sites.LONG_HAUL), priced by their own rule.
LONG_HAUL_KIND = "long-haul"

BOM_SCHEMA = pa.schema(
    [
        ("component", pa.string()),  # a COMPONENTS name, or "gpu"
        ("link_speed", pa.string()),  # e.g. "200Gbps"; null for the gpu rows
        ("link_bps", pa.int64()),  # the same speed in bit/s; null for the gpu rows
        ("count", pa.int64()),
        ("unit_price_usd", pa.float64()),
        ("total_usd", pa.float64()),  # count x unit_price_usd
        ("gpu_type", pa.string()),  # the gpu rows' GPU type (e.g. "H20"); null for the network
    ]
)

_DEFAULT_FILE = "prices.toml"


@dataclass(frozen=True)
class Prices:
    """Unit prices in USD: ``by_speed[rate_bps][component]``; ``where[(rate_bps, component)]``
    says which file or dict each figure came from; ``gpu_by_type[name]`` the price of one GPU
    of a type (by ``Hardware.name``); ``gpu_usd`` an optional flat GPU price that overrides
    every type's."""

    by_speed: dict[int, dict[str, float]]
    where: dict[tuple[int, str], str] = field(repr=False)
    gpu_usd: float | None = None
    source: str = ""
    gpu_by_type: dict[str, float] = field(default_factory=dict)

    def gpu(self, gpu_type: str, context: str) -> float:
        """The price of one GPU of ``gpu_type`` (the flat ``gpu_usd`` if set); SpecError
        naming ``context`` and the priced types if there is none."""
        if self.gpu_usd is not None:
            return self.gpu_usd
        if gpu_type not in self.gpu_by_type:
            raise SpecError(
                f"{context}: GPU type {gpu_type!r} has no price (priced types: "
                f"{', '.join(self.gpu_by_type) or 'none'}); add it to the [gpus] table of the "
                f'prices ({{"gpus": {{"{gpu_type}": USD}}}}) or pass gpu_price_usd='
            )
        return self.gpu_by_type[gpu_type]

    def unit(self, rate_bps: int, component: str, context: str) -> float:
        """The price of one ``component`` at ``rate_bps``; SpecError naming ``context`` if none."""
        row = self.by_speed.get(int(rate_bps))
        if row is None:
            speeds = ", ".join(format_rate(r) for r in sorted(self.by_speed))
            raise SpecError(
                f"{context}: link speed {format_rate(rate_bps)} has no prices "
                f'(priced speeds: {speeds}; add a ["{format_rate(rate_bps)}"] table to the prices)'
            )
        if component not in row:
            raise SpecError(
                f"{context}: no price for {component!r} at {format_rate(rate_bps)} "
                f"(prices for that speed come from {self._origin(rate_bps)})"
            )
        return row[component]

    def _origin(self, rate_bps: int) -> str:
        names = sorted({w for (r, _), w in self.where.items() if r == rate_bps})
        return ", ".join(names) or "nowhere"


def _check_price(value, key: str, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise SpecError(f"{where}: {key} must be a non-negative number of USD, got {value!r}")
    return float(value)


def _merge(prices: Prices, doc: Mapping, where: str) -> Prices:
    """``prices`` with the figures of ``doc`` (a parsed prices file or dict) laid over it."""
    if not isinstance(doc, Mapping):
        raise SpecError(f"{where}: prices must be a table (dict), got {type(doc).__name__}")
    by_speed = {r: dict(row) for r, row in prices.by_speed.items()}
    origin = dict(prices.where)
    gpu = prices.gpu_usd
    by_type = dict(prices.gpu_by_type)
    source = prices.source
    for key, value in doc.items():
        if key == "source":
            if not isinstance(value, Mapping):
                raise SpecError(f"{where}: [source] must be a table of text fields")
            source = "; ".join(f"{k}: {v}" for k, v in value.items())
            continue
        if key == "gpu":
            gpu = _check_price(value, "gpu", where)
            continue
        if key == "gpus":
            if not isinstance(value, Mapping):
                raise SpecError(f"{where}: [gpus] must be a table of GPU type = USD, got {value!r}")
            for name, usd in value.items():
                by_type[_gpu_name(name)] = _check_price(usd, f"[gpus] {name}", where)
            continue
        try:
            rate = parse_rate(key)
        except SpecError:
            raise SpecError(
                f'{where}: unknown key {key!r}: expected a link speed such as "200Gbps" '
                f"(a table of {', '.join(COMPONENTS)}), 'gpus', 'gpu' or 'source'"
            ) from None
        if not isinstance(value, Mapping):
            raise SpecError(f"{where}: [{key!r}] must be a table of component prices, got {value!r}")
        row = by_speed.setdefault(rate, {})
        for comp, usd in value.items():
            if comp not in COMPONENTS:
                raise SpecError(
                    f"{where}: [{key!r}] unknown component {comp!r} (known: {', '.join(COMPONENTS)})"
                )
            row[comp] = _check_price(usd, f"[{key!r}] {comp}", where)
            origin[(rate, comp)] = where
    return Prices(by_speed=by_speed, where=origin, gpu_usd=gpu, source=source, gpu_by_type=by_type)


def _gpu_name(name) -> str:
    """A [gpus] key as the type name the fabrics record: a `GPU_TYPES` name or alias (any
    case) becomes its ``Hardware.name``; any other name is a user's type, kept as given."""
    from .traces.models import get_gpu

    if not isinstance(name, str) or not name:
        raise SpecError(f"prices: [gpus] keys must be GPU type names, got {name!r}")
    try:
        return get_gpu(name).name
    except SpecError:
        return name


def default_prices() -> Prices:
    """Table 4 of the paper, as shipped in ``rfabric/data/prices.toml``."""
    ref = resources.files("rfabric") / "data" / _DEFAULT_FILE
    with ref.open("rb") as fh:
        doc = tomllib.load(fh)
    return _merge(Prices({}, {}), doc, f"rfabric/data/{_DEFAULT_FILE}")


def load_prices(prices=None) -> Prices:
    """Resolve a ``prices`` argument: None (Table 4), a dict or a TOML path laid over Table 4,
    or a ``Prices`` (used as is). Unknown keys raise SpecError naming the key and the file."""
    if isinstance(prices, Prices):
        return prices
    base = default_prices()
    if prices is None:
        return base
    if isinstance(prices, (str, Path)):
        path = Path(prices)
        return _merge(base, read_toml(path, "prices"), str(path))
    if isinstance(prices, Mapping):
        return _merge(base, prices, "prices dict")
    raise SpecError(
        f"prices: expected None, a dict, a TOML path or rf.cost.Prices, got {type(prices).__name__}"
    )


def _spec(fabric) -> NetworkSpec:
    if isinstance(fabric, NetworkSpec):
        return fabric
    to_spec = getattr(fabric, "to_spec", None)
    if to_spec is None:
        raise SpecError(f"cost: expected a Topology or NetworkSpec, got {type(fabric).__name__}")
    return to_spec()


def _count(spec: NetworkSpec) -> dict[tuple[str, int], int]:
    """(component, rate_bps) -> count, by the module's rules."""
    kind = spec.nodes.kind
    server = spec.nodes.server
    src, dst, rate = spec.links.src, spec.links.dst, spec.links.rate_bps
    nvs = NODE_KINDS["nvswitch"]
    same_server = (server[src] >= 0) & (server[src] == server[dst])
    long_haul = spec.links.kind.astype(str) == LONG_HAUL_KIND
    network = ~((kind[src] == nvs) | (kind[dst] == nvs) | same_server | long_haul)
    counts: dict[tuple[str, int], int] = {}

    def add(component: str, rates: np.ndarray) -> None:
        values, n = np.unique(rates, return_counts=True)
        for r, c in zip(values.tolist(), n.tolist(), strict=True):
            counts[(component, r)] = counts.get((component, r), 0) + c

    add("fiber", rate[network])
    ends = {"gpu": ("nic", "transceiver"), "eps": ("switch_port", "transceiver")}
    ends.update(ocs=("ocs_port",), patch_panel=("patch_panel_port",))
    for end in (src, dst):
        k = kind[end]
        for node_kind, components in ends.items():
            sel = network & (k == NODE_KINDS[node_kind])
            for comp in components:
                add(comp, rate[sel])
    add("long_haul_optic", np.repeat(rate[long_haul], 2))
    add("long_haul_circuit", rate[long_haul])
    return counts


def bill_of_materials(fabric, prices=None, *, gpu_price_usd: float | None = None) -> pa.Table:
    """The fabric's bill of materials: network parts, then GPUs per type (see the module
    docstring for the rules).

    Parameters
    ----------
    fabric : Topology or NetworkSpec
    prices : None, dict, str or Path, or Prices
        Unit prices in USD; default Table 4 of the paper. A dict or TOML file overrides only
        the figures it gives: ``{"200Gbps": {"transceiver": 450}, "gpu": 30000}``.
    gpu_price_usd : float, optional
        USD per GPU for every type (overrides the prices' ``gpu`` and ``[gpus]``).

    Returns
    -------
    pyarrow.Table
        ``BOM_SCHEMA``: component, link_speed, link_bps, count, unit_price_usd, total_usd,
        gpu_type; one row per (component, speed) in ``COMPONENTS`` order, then by speed,
        then one ``gpu`` row per GPU type in the order the fabric's GPUs first show it
        (count: its GPUs; unit: its price), which :func:`network_cost` leaves out.
    """
    spec = _spec(fabric)
    p = load_prices(prices)
    rows = [(*r, None) for r in _network_rows(spec, p)]
    rows += _gpu_rows(spec, p, gpu_price_usd)
    cols = list(zip(*rows, strict=True)) if rows else [[]] * len(BOM_SCHEMA)
    return pa.table({f.name: pa.array(list(c), f.type) for f, c in zip(BOM_SCHEMA, cols, strict=True)})


def _network_rows(spec: NetworkSpec, p: Prices) -> list[tuple]:
    counts = _count(spec)
    rows = []
    for comp in COMPONENTS:
        for rate in sorted(r for c, r in counts if c == comp):
            n = counts[(comp, rate)]
            unit = p.unit(rate, comp, f"{spec.name}: {comp} of a {format_rate(rate)} link")
            rows.append((comp, format_rate(rate), rate, n, unit, n * unit))
    return rows


def gpu_counts(fabric) -> dict[str, int]:
    """GPUs per type name, in the order the fabric's GPUs first show each type (a spec that
    records no types counts all as ``DEFAULT_GPU``, H800)."""
    from .traces.models import DEFAULT_GPU

    spec = _spec(fabric)
    types = spec.gpu_types
    if types is None:
        return {DEFAULT_GPU: spec.num_gpus} if spec.num_gpus else {}
    names, first, n = np.unique(types.astype(str), return_index=True, return_counts=True)
    order = np.argsort(first)
    return {str(names[i]): int(n[i]) for i in order}


def _gpu_rows(spec: NetworkSpec, p: Prices, gpu_price_usd) -> list[tuple]:
    flat = None if gpu_price_usd is None else _check_price(gpu_price_usd, "gpu_price_usd", "cost")
    rows = []
    for name, n in gpu_counts(spec).items():
        unit = flat if flat is not None else p.gpu(name, f"{spec.name}: {n} GPUs")
        rows.append(("gpu", None, None, n, unit, n * unit, name))
    return rows


def network_cost(fabric, prices=None) -> float:
    """Total network cost in USD (the bill of materials without GPUs)."""
    return float(sum(r[-1] for r in _network_rows(_spec(fabric), load_prices(prices))))


def cluster_cost(fabric, prices=None, *, gpu_price_usd: float | None = None) -> float:
    """Network cost plus GPUs, in USD: each GPU at its type's price (the prices' ``[gpus]``),
    or at ``gpu_price_usd`` / the prices' flat ``gpu`` when given."""
    spec = _spec(fabric)
    p = load_prices(prices)
    return network_cost(spec, p) + sum(r[5] for r in _gpu_rows(spec, p, gpu_price_usd))


def devices(fabric) -> dict[str, dict]:
    """Network devices by kind (``eps``, ``ocs``, ``patch_panel``): how many, and the fewest and
    most wired ports one of them has (a partly used switch shows here; the bill charges only
    wired ports). Kinds absent from the fabric are left out."""
    spec = _spec(fabric)
    kind = spec.nodes.kind
    ends = np.concatenate([spec.links.src, spec.links.dst])
    ports = np.bincount(ends, minlength=len(kind))
    out = {}
    for name in ("eps", "ocs", "patch_panel"):
        nodes = np.flatnonzero(kind == NODE_KINDS[name])
        if len(nodes):
            out[name] = {
                "count": len(nodes),
                "min_ports": int(ports[nodes].min()),
                "max_ports": int(ports[nodes].max()),
            }
    return out


def format_bill(bom: pa.Table, title: str = "") -> str:
    """The bill as aligned text, with the network total (and the cluster total with GPUs)."""
    head = ("component", "speed/type", "count", "unit USD", "total USD")
    body = [
        (
            r["component"],
            r["link_speed"] or r["gpu_type"] or "",
            f"{r['count']:,}",
            f"{r['unit_price_usd']:,.2f}",
            f"{r['total_usd']:,.2f}",
        )
        for r in bom.to_pylist()
    ]
    net = sum(r["total_usd"] for r in bom.to_pylist() if r["component"] != "gpu")
    width = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]

    def line(cells):
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, width, strict=True))
        )

    out = [title] if title else []
    out += [line(head), line(["-" * w for w in width]), *(line(b) for b in body)]
    out.append(f"network total: {net:,.2f} USD")
    gpus = [r for r in bom.to_pylist() if r["component"] == "gpu"]
    if gpus:
        total = net + sum(r["total_usd"] for r in gpus)
        out.append(f"cluster total (network + GPUs): {total:,.2f} USD; network share {net / total:.1%}")
    return "\n".join(out)
