"""Shared helpers of the fuzz surfaces."""

from __future__ import annotations

import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


_PRESETS = sorted((ROOT / "topologies").glob("*.toml"))


_FABRICS: dict[str, object] = {}


def _odd(rng: random.Random, good: list, bad: list, p_bad: float = 0.15):
    return rng.choice(bad) if p_bad and rng.random() < p_bad else rng.choice(good)
