"""Where a Simulation's rows go while it runs: the per-flow rows (in memory, or streamed to
Parquet parts with ``flows_path``) and the queue and rate samples (``sample_every``, kept in
Arrow tables or streamed with ``samples_path``).

``Streams`` is a mixin of ``Simulation`` (core.py), which sets the state it uses.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pyarrow as pa

from ..errors import SpecError
from ..jobs import DEFAULT_JOB
from ..results import build_flow_table, build_sample_tables

__all__ = ["Streams", "stream_dir"]


def stream_dir(path, name: str) -> pathlib.Path:
    """The directory rows are streamed to (argument ``name``): created, and without files in it."""
    try:
        d = pathlib.Path(path)
    except TypeError:
        raise SpecError(f"{name} must be a path, got {type(path).__name__}") from None
    if d.exists() and not d.is_dir():
        raise SpecError(f"{name}: {d} exists and is not a directory")
    if d.exists() and any(d.iterdir()):
        raise SpecError(f"{name}: directory {d} is not empty (Parquet parts are written there)")
    d.mkdir(parents=True, exist_ok=True)
    return d


class Streams:
    """Moving flow rows and samples out of the engine (methods of ``Simulation``)."""

    #: finished flows buffered in the engine before they are written out as one Parquet part
    FLOW_BATCH_ROWS = 1 << 20
    #: events per engine call while streaming flows (the buffer is checked between calls)
    _STREAM_CHUNK_EVENTS = 4_000_000

    def _take_samples(self) -> None:
        """Move the engine's samples so far into Arrow tables (nothing when sampling is off)."""
        if self.sample_every_ps is None:
            return
        tables = build_sample_tables(self._engine.take_samples(), self._port_rate_bps, self.sample_every_ps)
        if self._samples_dir is None:
            self._samples.append(tables)
            return
        import pyarrow.parquet as pq

        if tables[0].num_rows or tables[1].num_rows:
            for sub, table in zip(("queues", "rates"), tables, strict=True):
                pq.write_table(table, self._samples_dir / sub / f"part-{self._sample_parts:05d}.parquet")
            self._sample_parts += 1

    def _write_flow_part(self) -> None:
        """Write the rows the engine buffered as the next part file (none: nothing)."""
        if not self._engine.flow_log_rows:
            return
        import pyarrow.parquet as pq

        table = self._flow_table(self._engine.take_flow_log())
        pq.write_table(table, self._flows_dir / f"part-{self._flow_parts:05d}.parquet")
        self._flow_parts += 1

    def _flow_table(self, log: dict) -> pa.Table:
        """FLOW_SCHEMA rows from engine flow-log columns (op rows mapped to trace op_ids)."""
        op = log["op"]
        names = np.array([j.name for j in self.job_infos] or [DEFAULT_JOB], dtype=object)
        if self.trace is not None:
            ids = self.trace.table.column("op_id").to_numpy()
            op_id = np.where(op >= 0, ids[np.maximum(op, 0)], -1) if len(ids) else np.full(len(op), -1)
            job_of_op = self.trace.job_of_ops()
            if job_of_op is None or not len(ids):
                job = np.full(len(op), names[0], dtype=object)
            else:
                job = job_of_op[np.maximum(op, 0)]
        else:
            op_id = np.full(len(op), -1, dtype=np.int64)
            fid = log["flow_id"] if "flow_id" in log else np.arange(len(op))
            job = (
                names[self._flow_job[fid]]
                if self._flow_job is not None
                else np.full(len(op), names[0], dtype=object)
            )
        return build_flow_table(log, op_id.astype(np.int64), job)
