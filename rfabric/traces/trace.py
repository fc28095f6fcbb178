"""`Trace`: a checked communication trace (a pyarrow Table plus its metadata).

A Trace is immutable once built: every constructor runs the strict checks of `schema`,
so code holding a Trace can rely on the invariants of ``traces/README.md`` (op_ids unique
and ascending, deps earlier and existing, ranks unique per row, sizes non-negative). It
knows nothing about files (see `io`) or about how traces are generated.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TraceError
from .schema import (
    ALGORITHMS,
    KINDS,
    OPTIONAL_COLUMNS,
    SCHEMA,
    Checker,
    check_schema,
    decode_metadata,
    encode_metadata,
)

__all__ = ["Trace"]

_log = logging.getLogger(__name__)


class Trace:
    """A communication trace: one row per collective op, with file-level metadata.

    Build one with `Trace.from_table`, `Trace.from_columns`, `rfabric.traces.read` or
    `rfabric.traces.generate_rl`; do not call the constructor with an unchecked table.

    Attributes
    ----------
    table : pyarrow.Table
        Canonical columns (see ``SCHEMA``), schema metadata included.
    metadata : dict
        ``schema_version`` (int), ``gpus`` (int or None), ``model`` (str or None),
        ``generator`` (str or None), ``parameters`` (dict, JSON-serialisable).
    """

    __slots__ = ("_table", "_meta")

    def __init__(self, table: pa.Table, metadata: dict[str, Any]):
        self._table = table
        self._meta = metadata

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_table(
        cls,
        table: pa.Table,
        metadata: dict[str, Any] | None = None,
        *,
        gpus: int | None = None,
        source: str = "<table>",
    ) -> Trace:
        """Check a pyarrow Table and wrap it.

        Parameters
        ----------
        table : pyarrow.Table
            Columns of ``SCHEMA`` (any order; dictionary columns may be plain strings).
        metadata : dict, optional
            Overrides the table's own ``rfabric.*`` schema metadata, key by key.
        gpus : int, optional
            Fabric size in GPUs for the rank-range check; defaults to ``metadata["gpus"]``.
        source : str
            Name used in error messages.

        Raises
        ------
        TraceError
            If the table breaks any rule of ``traces/README.md``.
        """
        if not isinstance(table, pa.Table):
            raise TraceError(f"{source}: from_table takes a pyarrow.Table, not {type(table).__name__}")
        if metadata is not None and not isinstance(metadata, dict):
            raise TraceError(f"{source}: metadata must be a dict, not {type(metadata).__name__}")
        meta = decode_metadata(table.schema.metadata, source)
        for key, value in (metadata or {}).items():
            if key not in meta:
                raise TraceError(f"{source}: unknown metadata key {key!r} (known: {', '.join(meta)})")
            meta[key] = value
        meta = decode_metadata(encode_metadata(meta), source)  # re-validate overrides
        columns = check_schema(table.schema, source)
        checker = Checker(source, gpus if gpus is not None else meta["gpus"])
        batches = [checker.check(b, columns) for b in table.to_batches()]
        checker.finish(batches)
        return cls._assemble(batches, columns, meta)

    @classmethod
    def _assemble(cls, batches: list[pa.RecordBatch], columns: list[str], meta: dict[str, Any]) -> Trace:
        schema = pa.schema([_field(c) for c in columns], metadata=encode_metadata(meta))
        if batches:
            table = pa.Table.from_batches(
                [b.cast(schema.remove_metadata()) for b in batches]
            ).unify_dictionaries()
            table = table.replace_schema_metadata(schema.metadata)
        else:
            table = schema.empty_table()
        return cls(table, meta)

    @classmethod
    def from_columns(
        cls,
        *,
        op_id: Sequence[int],
        stage: Sequence[str],
        phase: Sequence[str],
        kind: Sequence[str],
        ranks: Sequence[Sequence[int]],
        size_bytes: Sequence[int | str] | int | str,
        deps: Sequence[Sequence[int]],
        iteration: Sequence[int] | int = 0,
        algorithm: Sequence[str] | str = "auto",
        compute_ps: Sequence[int | str] | int | str = 0,
        period: Sequence[int] | int = 0,
        m2n_senders: Sequence[int] | None = None,
        job: Sequence[str] | str | None = None,
        metadata: dict[str, Any] | None = None,
        gpus: int | None = None,
        source: str = "<columns>",
    ) -> Trace:
        """Build a checked Trace from Python sequences or numpy arrays, one entry per op.

        A scalar (a str for ``stage``, ``phase``, ``kind`` and ``algorithm``, an int for
        ``iteration`` and ``period``, an int or unit string for ``size_bytes`` and
        ``compute_ps``) applies to every op. Units: ``size_bytes`` in bytes (nccl-tests convention, see
        ``traces/README.md``), ``compute_ps`` in picoseconds; either column also takes unit
        strings entry by entry (``"64MiB"``, ``"1.5us"``), parsed by `rfabric.units`.
        Integer columns take integers only (2.9 or "3" is refused, not truncated).

        Raises
        ------
        TraceError
            If the columns break any rule of ``traces/README.md``, or an entry is not of its
            column's type (an unparseable unit string, a float rank, a ragged list): the
            message names the row and the column.
        """
        n = _length(op_id, "op_id", source)
        cols = {
            "op_id": _int_column(op_id, pa.int64(), "op_id", source),
            "iteration": _int_column(iteration, pa.int32(), "iteration", source, n),
            "stage": _str_column(stage, "stage", source, n),
            "phase": _str_column(phase, "phase", source, n),
            "kind": _str_column(kind, "kind", source, n),
            "ranks": _list_column(ranks, pa.int32(), "ranks", source),
            "size_bytes": _quantity_column(size_bytes, "size", "size_bytes", source, n),
            "algorithm": _str_column(algorithm, "algorithm", source, n),
            "deps": _list_column(deps, pa.int64(), "deps", source),
            "compute_ps": _quantity_column(compute_ps, "time", "compute_ps", source, n),
            "period": _int_column(period, pa.int32(), "period", source, n),
        }
        if m2n_senders is not None:
            cols["m2n_senders"] = _int_column(m2n_senders, pa.int32(), "m2n_senders", source)
        if job is not None:
            cols["job"] = _str_column(job, "job", source, n)
        lengths = {k: len(v) for k, v in cols.items()}
        if len(set(lengths.values())) > 1:
            raise TraceError(f"{source}: all rows: columns have different lengths {lengths}")
        return cls.from_table(pa.table(cols), metadata, gpus=gpus, source=source)

    # -- properties ------------------------------------------------------------------------
    @property
    def table(self) -> pa.Table:
        """The canonical pyarrow Table (with ``rfabric.*`` schema metadata)."""
        return self._table

    @property
    def metadata(self) -> dict[str, Any]:
        """A copy of the metadata dict (schema_version, gpus, model, generator, parameters)."""
        return dict(self._meta)

    @property
    def num_ops(self) -> int:
        """Number of ops (rows)."""
        return self._table.num_rows

    def __len__(self) -> int:
        return self._table.num_rows

    @property
    def gpus(self) -> int:
        """GPU count: the metadata value, else one more than the largest rank (0 if empty)."""
        if self._meta.get("gpus") is not None:
            return int(self._meta["gpus"])
        top = pc.max(pc.list_flatten(self._table.column("ranks"))).as_py()
        return 0 if top is None else int(top) + 1

    @property
    def jobs(self) -> list[str] | None:
        """The job names of a trace with a ``job`` column, in the order of their first op;
        None for a trace without one (a single job)."""
        if "job" not in self._table.column_names:
            return None
        col = self._table.column("job").combine_chunks()
        first: dict[str, int] = {}
        for i, name in enumerate(col.dictionary.to_pylist()):
            where = np.flatnonzero(col.indices.to_numpy(zero_copy_only=False) == i)
            if where.size:
                first[name] = int(where[0])
        return sorted(first, key=first.get)

    def job_of_ops(self) -> np.ndarray | None:
        """Per op, its job's name (an object array), or None for a trace without ``job``."""
        if "job" not in self._table.column_names:
            return None
        return self._table.column("job").cast(pa.string()).to_numpy(zero_copy_only=False)

    @property
    def model(self) -> str | None:
        """Model name from the metadata, if any."""
        return self._meta.get("model")

    def equals(self, other: Trace) -> bool:
        """True if both traces have equal rows and equal metadata (chunking is ignored)."""
        return (
            isinstance(other, Trace)
            and self._meta == other._meta
            and _plain(self._table).equals(_plain(other._table))
        )

    def __repr__(self) -> str:
        return (
            f"Trace({self.num_ops} ops, gpus={self._meta.get('gpus')}, model={self._meta.get('model')!r}, "
            f"schema_version={self._meta.get('schema_version')})"
        )

    # -- engine view -----------------------------------------------------------------------
    def arrays(self) -> dict[str, Any]:
        """Struct-of-arrays view for the C++ collective executor.

        Primitive columns are zero-copy views of the Arrow buffers when the table has one
        chunk; otherwise they are concatenated (a copy, logged at DEBUG level).

        Returns
        -------
        dict
            ``op_id`` int64, ``iteration`` int32, ``stage``/``phase``/``kind``/``algorithm``
            int32 codes with ``stage_names``/``phase_names``/``kind_names``/
            ``algorithm_names`` (lists of str; ``kind_names`` is always ``KINDS`` and
            ``algorithm_names`` always ``ALGORITHMS``, so their codes are stable),
            ``ranks_offsets`` int64 (len num_ops + 1) and ``ranks`` int32 (CSR),
            ``deps_offsets`` int64 and ``deps`` int64 (CSR), ``size_bytes`` int64 (bytes),
            ``compute_ps`` int64 (ps), ``period`` int32, ``m2n_senders`` int32 (0 except
            on m2n ops), ``gpus`` int.
        """
        t = self._table
        out: dict[str, Any] = {}
        for name in ("op_id", "iteration", "size_bytes", "compute_ps", "period"):
            out[name] = _primitive(t.column(name), name)
        if "m2n_senders" in t.schema.names:
            out["m2n_senders"] = _primitive(t.column("m2n_senders"), "m2n_senders")
        else:
            out["m2n_senders"] = np.zeros(self.num_ops, dtype=np.int32)
        for name in ("stage", "phase", "kind", "algorithm"):
            codes, names = _dict_codes(t.column(name), name)
            if name in ("kind", "algorithm"):
                fixed = KINDS if name == "kind" else ALGORITHMS
                lut = np.array([fixed.index(w) for w in names], dtype=np.int32)
                codes = lut[codes] if len(lut) else codes
                names = list(fixed)
            out[name] = codes
            out[f"{name}_names"] = names
        out["ranks_offsets"], out["ranks"] = _csr(t.column("ranks"), np.int32)
        out["deps_offsets"], out["deps"] = _csr(t.column("deps"), np.int64)
        out["gpus"] = self.gpus
        return out

    def sent_bytes(self) -> np.ndarray:
        """Payload bytes each op's ranks send in total, by the size convention (bytes).

        all_reduce 2(n-1) x size; all_gather, reduce_scatter and all_to_all (n-1) x size;
        broadcast (n-1) x size (every rank but the root receives the buffer once); send
        size; m2n senders x size. Every algorithm the executor runs sends exactly this
        (ring, tree, hierarchical ring and halving-doubling all move 2(n-1) x size for an
        all-reduce): it is ``res.flows`` summed per op (tested), the volume a replay puts
        on NVLink and the network together, headers excluded.

        Returns
        -------
        numpy.ndarray
            int64, one entry per op, in table order.
        """
        a = self.arrays()
        n = np.diff(a["ranks_offsets"]).astype(np.int64)
        size = a["size_bytes"].astype(np.int64)
        kind = np.asarray(KINDS, dtype=object)[a["kind"]] if self.num_ops else np.array([], dtype=object)
        factor = np.where(kind == "all_reduce", 2 * (n - 1), n - 1)
        factor = np.where(kind == "send", 1, factor)
        factor = np.where(kind == "m2n", a["m2n_senders"].astype(np.int64), factor)
        return factor * size

    def summary(self) -> pa.Table:
        """Per (iteration, stage, phase, kind): op count, total sizes and sent bytes, compute.

        Returns
        -------
        pyarrow.Table
            Columns ``iteration``, ``stage``, ``phase``, ``kind``, ``ops``, ``size_bytes``
            (sum, bytes), ``sent_bytes`` (sum of ``sent_bytes()``, bytes), ``compute_ps``
            (sum, ps), ``max_ranks``.
        """
        t = self._table
        n_ranks = pc.list_value_length(t.column("ranks"))
        plain = pa.table(
            {
                "iteration": t.column("iteration"),
                "stage": t.column("stage").cast(pa.string()),
                "phase": t.column("phase").cast(pa.string()),
                "kind": t.column("kind").cast(pa.string()),
                "size_bytes": t.column("size_bytes"),
                "sent_bytes": pa.array(self.sent_bytes(), type=pa.int64()),
                "compute_ps": t.column("compute_ps"),
                "n_ranks": n_ranks,
                "op_id": t.column("op_id"),
            }
        )
        g = plain.group_by(["iteration", "stage", "phase", "kind"], use_threads=False).aggregate(
            [
                ("op_id", "count"),
                ("size_bytes", "sum"),
                ("sent_bytes", "sum"),
                ("compute_ps", "sum"),
                ("n_ranks", "max"),
                ("op_id", "min"),
            ]
        )
        g = g.sort_by([("iteration", "ascending"), ("op_id_min", "ascending")])
        return pa.table(
            {
                "iteration": g.column("iteration"),
                "stage": g.column("stage"),
                "phase": g.column("phase"),
                "kind": g.column("kind"),
                "ops": g.column("op_id_count"),
                "size_bytes": g.column("size_bytes_sum"),
                "sent_bytes": g.column("sent_bytes_sum"),
                "compute_ps": g.column("compute_ps_sum"),
                "max_ranks": g.column("n_ranks_max"),
            }
        )


# -- from_columns: one column at a time, each entry checked against its column's type ------

_INT_RANGE = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}


def _bad(source: str, name: str, row: int | None, msg: str):
    where = "all rows" if row is None else f"row {row}"
    raise TraceError(f"{source}: {where}, column {name!r}: {msg}")


def _length(values, name: str, source: str) -> int:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        _bad(source, name, None, f"expected a sequence with one entry per op, got {type(values).__name__}")
    return len(values)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _entries(values, name: str, source: str, n: int | None, scalar) -> list | np.ndarray:
    """``values`` as a sequence of n entries (a scalar, as ``scalar(values)`` says, repeated)."""
    if scalar(values):
        if n is None:
            _bad(source, name, None, "expected a sequence with one entry per op")
        return [values] * n
    _length(values, name, source)
    if isinstance(values, np.ndarray) and values.ndim != 1:
        _bad(source, name, None, f"expected a 1-d sequence, got an array of shape {values.shape}")
    return values


def _int_column(values, typ, name: str, source: str, n: int | None = None) -> pa.Array:
    values = _entries(values, name, source, n, _is_int)
    lo, hi = _INT_RANGE[typ]
    if isinstance(values, np.ndarray) and np.issubdtype(values.dtype, np.integer):
        arr = values
    elif isinstance(values, list) and set(map(type, values)) <= {int} and _fits_int64(values):
        arr = np.array(values, dtype=np.int64)  # (Python ints: in bulk)
    else:
        for i, v in enumerate(values):
            if not _is_int(v):
                _bad(source, name, i, f"{v!r} is not an integer")
        arr = np.array([int(v) for v in values], dtype=object) if len(values) else np.empty(0, np.int64)
    if len(arr):
        out = np.flatnonzero((arr < lo) | (arr > hi))
        if len(out):
            _bad(source, name, int(out[0]), f"{arr[out[0]]} does not fit in {typ}")
    return pa.array(np.asarray(arr, dtype=np.int64), type=typ)


def _str_column(values, name: str, source: str, n: int) -> pa.Array:
    values = _entries(values, name, source, n, lambda v: isinstance(v, str))
    for i, v in enumerate(values):
        if not isinstance(v, str):
            _bad(source, name, i, f"{v!r} is not a string")
    return pa.array(list(values), type=pa.string())


def _list_column(values, typ, name: str, source: str) -> pa.Array:
    _length(values, name, source)
    lo, hi = _INT_RANGE[typ]
    fast = _int_lists(values, typ, lo, hi)
    if fast is not None:
        return fast
    rows = []
    for i, row in enumerate(values):
        if isinstance(row, (str, bytes, dict)) or not hasattr(row, "__iter__"):
            _bad(source, name, i, f"{row!r} is not a list of integers")
        row = list(row)
        for v in row:
            if not _is_int(v):
                _bad(source, name, i, f"entry {v!r} is not an integer")
            if not lo <= v <= hi:
                _bad(source, name, i, f"entry {v} does not fit in {typ}")
        rows.append([int(v) for v in row])
    return pa.array(rows, type=pa.list_(typ))


def _fits_int64(values: list) -> bool:
    return not values or (-(2**63) <= min(values) and max(values) < 2**63)


def _int_lists(values, typ, lo: int, hi: int) -> pa.Array | None:
    """``values`` as a list<typ> array when every row is a list of Python ints in [lo, hi]
    (what the generators and readers pass), built in bulk; None otherwise, for the checks
    row by row that name the offending entry."""
    if not isinstance(values, list) or any(type(r) is not list for r in values):
        return None
    flat = list(itertools.chain.from_iterable(values))
    if not set(map(type, flat)) <= {int}:  # (bool, numpy integers, floats: row by row)
        return None
    try:
        arr = np.array(flat, dtype=np.int64)
    except OverflowError:
        return None
    if len(arr) and (arr.min() < lo or arr.max() > hi):
        return None
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)), out=offsets[1:])
    if offsets[-1] >= 2**31:
        return None
    flat_arr = pa.array(arr, type=pa.int64()).cast(typ)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), flat_arr, type=pa.list_(typ))


def _quantity_column(values, what: str, name: str, source: str, n: int) -> pa.Array:
    """size_bytes or compute_ps: integers in the base unit, or unit strings (rfabric.units).
    Negative and too-large integers are left for the checker, which names the op_id."""
    from ..errors import SpecError
    from ..units import parse_size, parse_time

    parse = parse_size if what == "size" else parse_time
    values = _entries(values, name, source, n, lambda v: isinstance(v, (str, int, float, np.number)))
    if isinstance(values, np.ndarray) and np.issubdtype(values.dtype, np.integer):
        return pa.array(values.astype(np.int64, copy=False), type=pa.int64())
    out = []
    for i, v in enumerate(values):
        if _is_int(v):
            v = int(v)
            if not -(2**63) <= v < 2**63:
                _bad(source, name, i, f"{v} is beyond the engine's limit")
            out.append(v)
            continue
        try:
            out.append(parse(v))
        except SpecError as exc:
            _bad(source, name, i, str(exc))
    return pa.array(out, type=pa.int64())


def _field(name: str) -> pa.Field:
    return SCHEMA.field(name) if name in SCHEMA.names else OPTIONAL_COLUMNS.field(name)


def _plain(table: pa.Table) -> pa.Table:
    """The table with dictionary columns decoded to strings and no metadata (for comparison)."""
    cols = [c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.table(cols, names=table.schema.names)


def _primitive(col: pa.ChunkedArray, name: str) -> np.ndarray:
    if col.num_chunks == 1:
        return col.chunk(0).to_numpy(zero_copy_only=True)
    _log.debug("trace column %r has %d chunks: concatenating (copy)", name, col.num_chunks)
    if col.num_chunks == 0:
        return np.empty(0, dtype=col.type.to_pandas_dtype())
    return col.combine_chunks().to_numpy(zero_copy_only=True)


def _dict_codes(col: pa.ChunkedArray, name: str) -> tuple[np.ndarray, list[str]]:
    if col.num_chunks == 0:
        return np.empty(0, dtype=np.int32), []
    names = col.chunk(0).dictionary.to_pylist()
    if col.num_chunks > 1:
        _log.debug("trace column %r has %d chunks: concatenating codes (copy)", name, col.num_chunks)
    # Tables built here have unified dictionaries: every chunk shares chunk 0's dictionary.
    parts = [c.indices.to_numpy(zero_copy_only=True) for c in col.chunks]
    codes = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return codes, names


def _csr(col: pa.ChunkedArray, dtype) -> tuple[np.ndarray, np.ndarray]:
    offs, vals, shift = [np.zeros(1, dtype=np.int64)], [], 0
    for c in col.chunks:
        off = c.offsets.to_numpy(zero_copy_only=True)
        lo, hi = int(off[0]), int(off[-1])
        vals.append(c.values.slice(lo, hi - lo).to_numpy(zero_copy_only=True))
        offs.append(off[1:].astype(np.int64) - lo + shift)
        shift += hi - lo
    if len(vals) == 1:
        return np.concatenate(offs), vals[0]
    if col.num_chunks > 1:
        _log.debug("trace list column has %d chunks: concatenating (copy)", col.num_chunks)
    return np.concatenate(offs), (np.concatenate(vals) if vals else np.empty(0, dtype=dtype))
