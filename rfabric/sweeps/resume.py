"""Sweep output on disk and resuming from it: each finished point a Parquet part written
atomically in ``OUT.parts/``, the gathered table in ``OUT``; ``_read_done`` reads back the rows
already there by ``config_id``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import SpecError
from ..results import SWEEP_SCHEMA


def _atomic_parquet(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _read_done(out: Path, parts: Path) -> dict[str, dict]:
    done: dict[str, dict] = {}
    files = ([out] if out.exists() else []) + (sorted(parts.glob("*.parquet")) if parts.is_dir() else [])
    for f in files:
        try:
            t = pq.read_table(f)
        except Exception as exc:
            raise SpecError(
                f"{f}: cannot read it as a sweep table ({exc}); remove it or choose another out="
            ) from None
        if t.schema.names != SWEEP_SCHEMA.names:
            raise SpecError(
                f"{f}: not a sweep table of this rfabric version (columns differ); remove it or choose another out="
            )
        for row in t.cast(SWEEP_SCHEMA).to_pylist():
            done[row["config_id"]] = row
    return done
