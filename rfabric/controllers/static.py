"""StaticController: one circuit plan for the whole run (TopoOpt's and MixNet's baseline)."""

from __future__ import annotations

from ..errors import SpecError
from ..spec import CircuitTable
from .base import Controller
from .loop import same_plan


class StaticController(Controller):
    """Installs ``plan`` at the first boundary (unless it is already in force) and keeps it.

    Parameters
    ----------
    plan : CircuitTable
        The plan for the whole run. It is checked, as every plan, when applied: an invalid
        row or a failed (masked) port raises SpecError naming this controller. Applied at
        the first boundary, its new circuits are dark for ``t_ocs`` from there: a plan meant
        from time 0 belongs in the topology (``Topology.circuits``) instead.
    """

    def __init__(self, plan: CircuitTable):
        if not isinstance(plan, CircuitTable):
            raise SpecError(f"StaticController: plan must be a CircuitTable, got {type(plan).__name__}")
        self.static_plan = plan
        self._done = False

    def plan(self, intent, view):
        if self._done:
            return None
        self._done = True
        return None if same_plan(self.static_plan, view.plan) else self.static_plan
