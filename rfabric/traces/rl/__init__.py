"""The RL trace generator, one module per concern.

- `generate` — `generate_rl`: argument checks, layouts, the iteration order of the RL mode
  and the trace metadata;
- `layout` — `TrainLayout` and `GenLayout`: which ranks form which groups;
- `compute` — `Roofline`: the compute gaps between ops;
- `builder` — `OpBuilder`: the op DAG (program order, hand-offs, columns);
- `memory` — the memory-fit check (`MemoryFitWarning`);
- one module per stage emitter: `generation` (prefill, decode, response streaming),
  `experience` (make-experience forward passes), `training` (1F1B forward/backward,
  gradient sync, optimizer step) and `weight_sync`.

A new stage is a function ``emit_<stage>(ctx, it, ...)`` in a new module, called from
`generate`; a new framework mode of an existing stage is a branch in that stage's module.
"""

from __future__ import annotations

from .builder import OpBuilder
from .compute import Roofline
from .generate import generate_rl
from .generation import LOGPROB_BYTES, REWARD_BYTES, TOKEN_ID_BYTES
from .layout import GenLayout, TrainLayout
from .memory import MemoryFitWarning

__all__ = [
    "generate_rl",
    "TrainLayout",
    "GenLayout",
    "Roofline",
    "OpBuilder",
    "MemoryFitWarning",
    "TOKEN_ID_BYTES",
    "LOGPROB_BYTES",
    "REWARD_BYTES",
]
