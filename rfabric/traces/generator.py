"""Compatibility module: the RL trace generator lives in `rfabric.traces.rl`.

``from rfabric.traces.generator import generate_rl`` keeps working; new code imports from
`rfabric.traces` (or `rfabric.traces.rl` for the layouts, the roofline and the builder).
"""

from __future__ import annotations

from .rl import LOGPROB_BYTES, REWARD_BYTES, TOKEN_ID_BYTES, generate_rl

__all__ = ["generate_rl", "TOKEN_ID_BYTES", "LOGPROB_BYTES", "REWARD_BYTES"]
