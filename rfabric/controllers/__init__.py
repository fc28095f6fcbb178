"""Circuit controllers: Python classes the simulation calls at communication-period
boundaries with an :class:`Intent` and a :class:`FabricView`; they return a circuit plan."""

from .allocate import allocate_circuits
from .base import Controller, FabricView, Intent
from .defaults import CONTROLLER_CLASSES, by_name, default_for
from .forest import Forest, dissemination_forest, forest_ops
from .mixnet import MixNetController
from .regional import greedy_circuits
from .stage_aware import StageAwareController
from .static import StaticController
from .uniform import UniformController

__all__ = [
    "Controller",
    "FabricView",
    "Forest",
    "Intent",
    "MixNetController",
    "StageAwareController",
    "StaticController",
    "UniformController",
    "allocate_circuits",
    "CONTROLLER_CLASSES",
    "by_name",
    "default_for",
    "dissemination_forest",
    "forest_ops",
    "greedy_circuits",
]
