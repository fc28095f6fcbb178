"""Which controller a fabric runs by default, and controllers by their catalog name.

The policy layer decides this, not the fabric: a topology only declares the name of its
default controller (``Topology.default_controller``, a name of
:data:`rfabric.catalog.CONTROLLERS`), and this module builds it. Nothing here imports a
topology module: a fabric is anything with that attribute (and ``circuits()`` for
``"static"``).
"""

from __future__ import annotations

from ..catalog import CONTROLLERS, canonical
from ..errors import SpecError
from .base import Controller

__all__ = ["by_name", "default_for", "CONTROLLER_CLASSES"]

#: The class (in ``rfabric.controllers``) of each controller name of
#: :data:`rfabric.catalog.CONTROLLERS` (``"none"``: no controller).
CONTROLLER_CLASSES = {
    "static": "StaticController",
    "uniform": "UniformController",
    "stage_aware": "StageAwareController",
    "mixnet": "MixNetController",
}
assert set(CONTROLLER_CLASSES) | {"none"} == set(CONTROLLERS)


def by_name(name: str, fabric=None, **kwargs) -> Controller | None:
    """A fresh controller from its catalog name (:data:`rfabric.catalog.CONTROLLERS`;
    hyphens read as underscores): ``"none"`` gives ``None``; ``"static"`` keeps the plan
    given as ``plan=`` or else ``fabric.circuits()`` (the fabric's initial plan);
    ``"uniform"``, ``"stage_aware"`` and ``"mixnet"`` take their keyword arguments.
    Raises :class:`rfabric.SpecError` naming the known names for any other."""
    try:
        name = canonical(name, "controller")
    except ValueError as exc:
        raise SpecError(f"controller: {exc}") from None
    if name == "none":
        return None
    if name == "static":
        from .static import StaticController

        plan = kwargs.pop("plan", None)
        if plan is None:
            if fabric is None or not callable(getattr(fabric, "circuits", None)):
                raise SpecError("controller 'static': give plan= or a fabric with circuits()")
            plan = fabric.circuits()
        return StaticController(plan, **kwargs)
    if name == "uniform":
        from .uniform import UniformController

        return UniformController(**kwargs)
    if name == "stage_aware":
        from .stage_aware import StageAwareController

        return StageAwareController(**kwargs)
    if name == "mixnet":
        from .mixnet import MixNetController

        return MixNetController(**kwargs)
    raise AssertionError(f"catalog controller {name!r} has no constructor here")  # CONTROLLERS grew


def default_for(fabric) -> Controller | None:
    """The controller ``fabric`` (a :class:`rfabric.topologies.Topology`) runs by default, a
    fresh instance, or ``None``: the one its ``default_controller`` names (TopoOpt:
    ``StaticController`` of its circuits, MixNet: ``MixNetController``, RFabric:
    ``StageAwareController``; fabrics without reconfigurable optics: ``None``)."""
    name = getattr(fabric, "default_controller", None)
    if name is None:
        return None
    if name not in CONTROLLERS:
        raise SpecError(
            f"{type(fabric).__name__}.default_controller = {name!r} is not a controller name "
            f"(known: {', '.join(CONTROLLERS)})"
        )
    return by_name(name, fabric)
