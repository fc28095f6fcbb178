"""Fabric specs of a sweep: a name from ``rfabric.catalog.FABRICS`` (or ``FT-OS<ratio>``, a
family name), a Topology subclass, a factory ``f(gpus, link_bps)`` or a table, resolved into a
builder with a row label (``resolve_fabric``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import catalog
from ..errors import SpecError
from .digests import _canon, _qualname

__all__ = ["resolve_fabric", "FABRIC_NAMES"]

#: Paper and class names of the built-in fabrics -> (family, constructor parameters).
FABRIC_NAMES: dict[str, tuple[str, dict]] = catalog.FABRICS
_OS_RE = re.compile(r"^(?:FT|FatTree|fat_tree)-?OS(\d+)(?::1)?$", re.I)


@dataclass(frozen=True)
class _Fabric:
    label: str
    family: str
    maker: Any  # a Topology subclass (called maker(gpus, link, **params)) or a factory(gpus, link)
    params: dict
    fingerprint: str

    def build(self, gpus: int, link_bps: int):
        from ..topologies import Topology

        fab = self.maker(gpus, link_bps, **self.params)
        if not isinstance(fab, Topology):
            raise SpecError(
                f"fabric {self.label!r}: the factory returned {type(fab).__name__}, not a Topology"
            )
        return fab


def resolve_fabric(spec, label: str | None = None, where: str = "fabrics") -> _Fabric:
    """Turn one fabric spec (see the module docstring) into a builder with a row label."""
    from ..topologies import FAMILIES, Topology

    def family_class(name: str):
        if name in FABRIC_NAMES:
            fam, params = FABRIC_NAMES[name]
            return FAMILIES[fam], dict(params)
        m = _OS_RE.match(name)
        if m:
            return FAMILIES["fat_tree"], {"oversubscription": int(m.group(1))}
        if name in FAMILIES:
            return FAMILIES[name], {}
        known = sorted(set(FABRIC_NAMES) | set(FAMILIES))
        raise SpecError(f"{where}: unknown fabric {name!r} (known: {', '.join(known)}, or FT-OS<ratio>)")

    if isinstance(spec, str):
        cls, params = family_class(spec)
        return _Fabric(label or spec, cls.family, cls, params, f"{_qualname(cls)}{_canon(params)}")
    if isinstance(spec, type) and issubclass(spec, Topology):
        return _Fabric(label or spec.__name__, spec.family, spec, {}, _qualname(spec))
    if isinstance(spec, Topology):
        raise SpecError(
            f"{where}: got a built fabric ({spec!r}); a sweep builds one per scale and link speed, "
            "so give its class, a name or a factory f(gpus, link)"
        )
    if isinstance(spec, Mapping):
        params = dict(spec)
        name = params.pop("family", None) or params.pop("class", None)
        lab = params.pop("name", None)
        if name is None:
            raise SpecError(f"{where}: fabric table {dict(spec)!r} needs 'family' (e.g. \"fat_tree\")")
        if isinstance(params.get("params"), Mapping):
            params.update(params.pop("params"))
        cls, base = family_class(name) if isinstance(name, str) else (name, {})
        if not (isinstance(cls, type) and issubclass(cls, Topology)):
            raise SpecError(f"{where}: 'family' must name a fabric, got {name!r}")
        for bad in ("gpus", "link"):
            if bad in params:
                raise SpecError(f"{where}: fabric {lab or name!r} sets {bad!r}; the sweep's grid sets it")
        from ..topologies import _accepted_params

        unknown = sorted(set(params) - _accepted_params(cls))
        if unknown:
            raise SpecError(
                f"{where}: unknown parameter(s) {', '.join(unknown)} for fabric {lab or name!r} "
                f"(accepted: {', '.join(sorted(_accepted_params(cls) - {'gpus', 'link'}))})"
            )
        base.update(params)
        label = label or lab or (name if isinstance(name, str) else cls.__name__)
        return _Fabric(label, cls.family, cls, base, f"{_qualname(cls)}{_canon(base)}")
    if callable(spec):
        name = getattr(spec, "__name__", type(spec).__name__)
        return _Fabric(label or name, name, spec, {}, _qualname(spec))
    raise SpecError(f"{where}: a fabric is a name, a Topology subclass, a factory or a table; got {spec!r}")
