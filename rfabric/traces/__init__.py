"""Communication traces: the Arrow trace format, its reader/writer, importers and the RL
trace generator.

``traces/README.md`` documents the schema. `read` and `write` handle Arrow IPC and Parquet
files with strict checks (`rfabric.TraceError`), and `read` also imports Chakra ET and htsim
files (`importers`: Chakra, SimAI/AICB, htsim); `generate_rl` synthesises the traffic of
disaggregated RL post-training from a model (`MODELS` or a `ModelConfig`) and a placement;
`multiplex_rl` multiplexes several such jobs over a shared rollout pool and a shared
training pool (RollMux).
"""

from __future__ import annotations

from . import importers
from .generator import generate_rl
from .io import read, write
from .models import GPU_TYPES, H800, MODELS, Hardware, ModelConfig, get_gpu
from .rl import MemoryFitWarning
from .rl.multiplex import multiplex_rl
from .schema import ALGORITHMS, KINDS, SCHEMA, SCHEMA_VERSION
from .trace import Trace

__all__ = [
    "read",
    "write",
    "importers",
    "generate_rl",
    "multiplex_rl",
    "MemoryFitWarning",
    "Trace",
    "ModelConfig",
    "MODELS",
    "Hardware",
    "H800",
    "GPU_TYPES",
    "get_gpu",
    "SCHEMA",
    "SCHEMA_VERSION",
    "KINDS",
    "ALGORITHMS",
]
