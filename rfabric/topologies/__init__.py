"""Fabrics: the Topology base class, the built-in families and TOML presets.

Presets ship inside the package (``rfabric/data/presets/``; a checkout's top-level
``topologies/`` is a link to that folder). ``presets()`` lists them by name and
``load(path_or_name)`` reads one::

    family = "fat_tree"          # a name from FAMILIES (or a registered subclass)
    [params]                     # constructor keyword arguments
    gpus = 1024
    link = "200Gbps"
"""

from __future__ import annotations

import inspect
from pathlib import Path

from ..errors import SpecError, read_toml
from ..validators import file_path, known_keys
from .base import DEFAULTS, Topology, TopologyBuilder
from .fat_tree import FatTree
from .hybrid import RFabric
from .mixnet import MixNet
from .rail_optimized import RailOptimized
from .sites import Sites
from .topoopt import TopoOpt

__all__ = [
    "Topology",
    "TopologyBuilder",
    "FatTree",
    "RailOptimized",
    "TopoOpt",
    "MixNet",
    "RFabric",
    "Sites",
    "FAMILIES",
    "register",
    "load",
    "presets",
    "DEFAULTS",
]

#: family name -> Topology subclass, for presets and sweeps
FAMILIES: dict[str, type[Topology]] = {
    cls.family: cls for cls in (FatTree, RailOptimized, TopoOpt, MixNet, RFabric)
}


def register(cls: type[Topology]) -> type[Topology]:
    """Make a user's Topology subclass loadable from presets by its ``family`` name (decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Topology)):
        raise SpecError(f"register: {cls!r} is not a Topology subclass")
    FAMILIES[cls.family] = cls
    return cls


def presets() -> dict[str, Path]:
    """The presets shipped with rfabric: name (file stem, e.g. ``"fat_tree_128_200g"``) ->
    path of its TOML file, sorted by name."""
    from importlib import resources

    folder = Path(str(resources.files("rfabric") / "data" / "presets"))
    return {p.stem: p for p in sorted(folder.glob("*.toml"))}


def load(path) -> Topology:
    """Read a topology preset (TOML) and return the fabric it describes. ``path`` is a TOML
    file, or the name of a preset shipped with rfabric (``presets()``) when no such file exists."""
    path = file_path(path, "rf.topologies.load: path")
    if not path.is_file() and path.suffix == "" and path.name == str(path):
        path = presets().get(path.name, path)
    doc = read_toml(path, "topology")
    known_keys(doc, ("family", "params"), str(path))
    family = doc.get("family")
    if not isinstance(family, str) or family not in FAMILIES:
        raise SpecError(
            f"{path}: field 'family' is {family!r}; known families: {', '.join(sorted(FAMILIES))}"
        )
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise SpecError(f"{path}: [params] must be a table")
    cls = FAMILIES[family]
    accepted = _accepted_params(cls)
    known_keys(params, accepted, f"{path}: [params] of family {family!r}", "parameter")
    try:
        return cls(**params)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
    except TypeError as exc:
        raise SpecError(f"{path}: {exc}") from None


def _accepted_params(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        sig = inspect.signature(klass.__init__)
        names |= {
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        }
    return names
