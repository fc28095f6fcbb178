"""One catalog of the names rfabric's users type: fabrics, flow patterns, stages, controllers.

Every list of names (the CLI's choices, sweep configs, benchmarks, tests) comes from here, so
a name is spelled one way everywhere. The canonical spelling uses underscores
(``all_to_all``, ``stage_aware``); :func:`canonical` also takes the hyphenated spelling the
command line used to print (``all-to-all``), so old scripts keep working.

This module is data only: it imports nothing from rfabric, so every layer may use it.
"""

from __future__ import annotations

__all__ = [
    "FABRICS",
    "PAPER_FABRICS",
    "FAMILIES",
    "FLOW_PATTERNS",
    "STAGES",
    "CONTROLLERS",
    "COLLECTIVES",
    "canonical",
]

#: Fabric names a sweep, the CLI and the benchmarks accept -> (topology family, constructor
#: parameters). The paper's names first (§7.2), then the class names. ``FT-OS<ratio>`` is
#: accepted too (FatTree with that oversubscription at the ToRs).
FABRICS: dict[str, tuple[str, dict]] = {
    "FT": ("fat_tree", {}),
    "FT-OS": ("fat_tree", {"oversubscription": 3}),  # the paper's FT-OS: 3:1 at the ToRs
    "RO": ("rail_optimized", {}),
    "TopoOpt": ("topoopt", {}),
    "MixNet": ("mixnet", {}),
    "RFabric": ("rfabric", {}),
    "FatTree": ("fat_tree", {}),
    "RailOptimized": ("rail_optimized", {}),
}

#: The six fabrics the reference paper compares (§7.2), in its order.
PAPER_FABRICS: tuple[str, ...] = ("FT", "FT-OS", "RO", "TopoOpt", "MixNet", "RFabric")

#: Topology family names of the built-in fabrics (``Topology.family``; presets' ``family``).
FAMILIES: tuple[str, ...] = ("fat_tree", "rail_optimized", "topoopt", "mixnet", "rfabric")

#: Synthetic point-to-point flow patterns (``rf.Flows``, ``rfabric run --pattern``, sweeps).
FLOW_PATTERNS: tuple[str, ...] = ("permutation", "all_to_all", "incast")

#: The stages of an RL iteration, in the order the trace generator emits them.
STAGES: tuple[str, ...] = ("train", "gen", "weight_sync", "response_stream")

#: Circuit controllers by name (CLI ``--controller``, sweeps' ``controller=``).
CONTROLLERS: tuple[str, ...] = ("none", "static", "uniform", "stage_aware", "mixnet")

#: Collectives rf.collective, rf.bounds and ``rfabric collective --op`` time (a trace's
#: ``kind`` column also has send and m2n).
COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")

_KINDS = {
    "fabric": tuple(FABRICS),
    "family": FAMILIES,
    "pattern": FLOW_PATTERNS,
    "stage": STAGES,
    "controller": CONTROLLERS,
    "collective": COLLECTIVES,
}


def canonical(name: str, kind: str) -> str:
    """The catalog's spelling of ``name`` as a ``kind`` (``"pattern"``, ``"stage"``,
    ``"controller"``, ``"collective"``, ``"family"`` or ``"fabric"``): hyphens read as underscores for the
    snake_case kinds. Raises ValueError naming the known names if there is none."""
    try:
        known = _KINDS[kind]
    except KeyError:
        raise ValueError(f"catalog: unknown kind {kind!r} (known: {', '.join(_KINDS)})") from None
    if not isinstance(name, str):
        raise ValueError(f"{kind}: expected a name, got {name!r}")
    if name in known:
        return name
    if kind != "fabric":
        snake = name.strip().lower().replace("-", "_")
        if snake in known:
            return snake
    raise ValueError(f"{kind}: unknown name {name!r} (known: {', '.join(known)})")
