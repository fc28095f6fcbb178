"""The Arrow schema of a communication trace, and its strict row-by-row checker.

One table, one row per collective op; ``traces/README.md`` is the reference for every
column. This module owns the column list, the type rules, the file-level metadata block
and the checks that `rfabric.traces.read` and `Trace.from_table` run. The checks are
vectorised over record batches so that a multi-million-row trace is checked while it
streams in, and every failure raises `rfabric.TraceError` naming the source, the row, the
op_id and the column.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TraceError
from ..units import MAX_SIZE_BYTES, MAX_TIME_PS

#: Per-row limits of the numeric columns (the engine's horizon, rfabric.units).
_LIMITS = {"size_bytes": MAX_SIZE_BYTES, "compute_ps": MAX_TIME_PS}

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "KINDS",
    "ALGORITHMS",
    "STAGES",
    "OPTIONAL_COLUMNS",
    "encode_metadata",
    "decode_metadata",
]

#: Version of the column set and semantics documented in ``traces/README.md``.
SCHEMA_VERSION = 1

_DICT = pa.dictionary(pa.int32(), pa.string())

#: The canonical schema: required columns, in this order, with these exact types.
SCHEMA = pa.schema(
    [
        pa.field("op_id", pa.int64(), nullable=False),
        pa.field("iteration", pa.int32(), nullable=False),
        pa.field("stage", _DICT, nullable=False),
        pa.field("phase", _DICT, nullable=False),
        pa.field("kind", _DICT, nullable=False),
        pa.field("ranks", pa.list_(pa.int32()), nullable=False),
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("algorithm", _DICT, nullable=False),
        pa.field("deps", pa.list_(pa.int64()), nullable=False),
        pa.field("compute_ps", pa.int64(), nullable=False),
        pa.field("period", pa.int32(), nullable=False),
    ]
)

#: Optional columns. ``m2n_senders`` is required as soon as one row has kind ``m2n``.
#: ``job`` names the job each op belongs to when a trace holds several jobs sharing one
#: fabric (``rf.Job``; a scheduler emitting several jobs with cross-job dependencies writes it
#: itself); a trace without it is one job.
OPTIONAL_COLUMNS = pa.schema(
    [pa.field("m2n_senders", pa.int32(), nullable=False), pa.field("job", _DICT, nullable=False)]
)

#: Collective kinds. The code of a kind in `Trace.arrays` is its index in this tuple.
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send", "m2n")

#: Algorithms. The code of an algorithm in `Trace.arrays` is its index in this tuple.
ALGORITHMS = ("auto", "ring", "hier_ring", "direct", "tree", "chain", "halving_doubling")


def check_engine_names(engine_kinds, engine_algorithms) -> None:
    """Check that the engine's op kind and algorithm codes name what ``KINDS`` and
    ``ALGORITHMS`` say, code by code (the engine exports its names: ``_engine.op_kinds()``,
    ``_engine.op_algorithms()``). Raises TraceError naming the first code that differs.
    Run when this module is imported, so a Python schema and an engine that disagree on a
    code can never replay a trace."""
    for what, ours, theirs in (("KINDS", KINDS, engine_kinds), ("ALGORITHMS", ALGORITHMS, engine_algorithms)):
        theirs = list(theirs)
        for code in range(max(len(ours), len(theirs))):
            a = ours[code] if code < len(ours) else None
            b = theirs[code] if code < len(theirs) else None
            if a != b:
                raise TraceError(
                    f"rfabric.traces.{what}[{code}] is {a!r} but the engine's code {code} is {b!r}: "
                    "the Python schema and the compiled engine disagree (rebuild the engine)"
                )


def _check_compiled_engine() -> None:
    from .. import _engine

    check_engine_names(_engine.op_kinds(), _engine.op_algorithms())


_check_compiled_engine()

#: Stage names the RL generator uses; traces may use any other non-empty name as well.
STAGES = ("train", "gen", "weight_sync", "response_stream")

_DICT_COLUMNS = ("stage", "phase", "kind", "algorithm", "job")
_LIST_COLUMNS = {"ranks": pa.int32(), "deps": pa.int64()}
_META_PREFIX = "rfabric."
_META_KEYS = ("schema_version", "gpus", "model", "generator", "parameters")


def encode_metadata(meta: dict[str, Any]) -> dict[bytes, bytes]:
    """Arrow schema metadata (``rfabric.<key>`` -> JSON text) from a metadata dict."""
    out = {}
    for key in _META_KEYS:
        value = meta.get(key)
        if key == "schema_version" and value is None:
            value = SCHEMA_VERSION
        if value is not None:
            out[(_META_PREFIX + key).encode()] = json.dumps(value, sort_keys=True).encode()
    return out


def decode_metadata(raw: dict[bytes, bytes] | None, source: str) -> dict[str, Any]:
    """The metadata dict of a trace from its Arrow schema metadata.

    Missing keys read as None (``schema_version`` as the current version, ``parameters`` as
    an empty dict), so that a table written by plain pyarrow is accepted.

    Raises
    ------
    TraceError
        If a key is not valid JSON, or the schema version is not an integer or is newer
        than `SCHEMA_VERSION`.
    """
    raw = raw or {}
    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "gpus": None,
        "model": None,
        "generator": None,
        "parameters": {},
    }
    for key in _META_KEYS:
        blob = raw.get((_META_PREFIX + key).encode())
        if blob is None:
            continue
        try:
            meta[key] = json.loads(blob)
        except ValueError:
            raise TraceError(f"{source}: metadata {_META_PREFIX + key!r} is not valid JSON") from None
    version = meta["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TraceError(
            f"{source}: metadata 'rfabric.schema_version' is {version!r}, expected an integer >= 1"
        )
    if version > SCHEMA_VERSION:
        raise TraceError(
            f"{source}: trace has schema version {version}, "
            f"newer than the {SCHEMA_VERSION} this rfabric reads"
        )
    gpus = meta["gpus"]
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise TraceError(f"{source}: metadata 'rfabric.gpus' is {gpus!r}, expected a positive integer")
    if not isinstance(meta["parameters"], dict):
        raise TraceError(f"{source}: metadata 'rfabric.parameters' must be a JSON object")
    return meta


def check_gpus(gpus, source: str) -> int | None:
    """``gpus`` (the fabric size ranks are checked against) if None or a positive integer,
    else TraceError naming ``source``."""
    if gpus is None:
        return None
    if isinstance(gpus, bool | np.bool_) or not isinstance(gpus, int | np.integer) or gpus < 1:
        raise TraceError(f"{source}: gpus must be a positive integer (the fabric size), got {gpus!r}")
    return int(gpus)


def _expected(name: str) -> str:
    if name in _DICT_COLUMNS:
        return "dictionary<string> or string"
    if name in _LIST_COLUMNS:
        return f"list<{_LIST_COLUMNS[name]}>"
    field = SCHEMA.field(name) if name in SCHEMA.names else OPTIONAL_COLUMNS.field(name)
    return str(field.type)


def _type_ok(name: str, typ: pa.DataType) -> bool:
    if name in _DICT_COLUMNS:
        if pa.types.is_dictionary(typ):
            return pa.types.is_integer(typ.index_type) and (
                pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)
            )
        return pa.types.is_string(typ) or pa.types.is_large_string(typ)
    if name in _LIST_COLUMNS:
        return (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and typ.value_type == _LIST_COLUMNS[
            name
        ]
    field = SCHEMA.field(name) if name in SCHEMA.names else OPTIONAL_COLUMNS.field(name)
    return typ == field.type


def check_schema(schema: pa.Schema, source: str) -> list[str]:
    """Check the column set and types; return the canonical column order for this file.

    Raises
    ------
    TraceError
        On a missing, duplicated, unknown or mistyped column.
    """
    names = schema.names
    known = set(SCHEMA.names) | set(OPTIONAL_COLUMNS.names)
    for name in names:
        if names.count(name) > 1:
            raise TraceError(f"{source}: all rows, column {name!r}: appears {names.count(name)} times")
        if name not in known:
            raise TraceError(
                f"{source}: all rows, column {name!r}: unknown column (schema version {SCHEMA_VERSION} "
                f"has {', '.join(SCHEMA.names + OPTIONAL_COLUMNS.names)})"
            )
    for name in SCHEMA.names:
        if name not in names:
            raise TraceError(f"{source}: all rows, column {name!r}: missing (expected {_expected(name)})")
    for name in names:
        typ = schema.field(name).type
        if not _type_ok(name, typ):
            raise TraceError(
                f"{source}: all rows, column {name!r}: has type {typ}, expected {_expected(name)}"
            )
    return SCHEMA.names + [n for n in OPTIONAL_COLUMNS.names if n in names]


def _canonical_column(name: str, arr: pa.Array) -> pa.Array:
    if name in _DICT_COLUMNS:
        if pa.types.is_dictionary(arr.type):
            if arr.type != _DICT:
                arr = arr.cast(_DICT)
            return arr
        return pc.dictionary_encode(arr.cast(pa.string()))
    if name in _LIST_COLUMNS:
        want = pa.list_(_LIST_COLUMNS[name])
        return arr if arr.type == want else arr.cast(want)
    return arr


class Checker:
    """Strict, streaming check of a trace's record batches.

    Feed the batches in file order to `check`; call `finish` at the end. Both raise
    `TraceError` at the first malformed row, naming ``source``, the row number (0-based,
    counted over the whole file), its op_id and the column.

    Parameters
    ----------
    source : str
        Name used in messages (a file path, or ``"<table>"``).
    gpus : int or None
        Fabric size in GPUs: every rank must be in ``[0, gpus)``. None checks only that
        ranks are non-negative.
    """

    def __init__(self, source: str, gpus: int | None):
        self.source = source
        self.gpus = check_gpus(gpus, source)
        self.rows = 0
        self._ids = np.empty(1024, dtype=np.int64)
        self._n = 0
        self._forward: tuple[int, int, int] | None = None  # (row, op_id, dep) of the first forward dep

    # -- helpers -------------------------------------------------------------------------
    def _fail(self, row: int, op_ids: np.ndarray | None, column: str, msg: str) -> None:
        op = "null" if op_ids is None else int(op_ids[row - self.rows])
        raise TraceError(f"{self.source}: row {row} (op_id {op}), column {column!r}: {msg}")

    def _push_ids(self, ids: np.ndarray) -> None:
        need = self._n + len(ids)
        if need > len(self._ids):
            grown = np.empty(max(need, 2 * len(self._ids)), dtype=np.int64)
            grown[: self._n] = self._ids[: self._n]
            self._ids = grown
        self._ids[self._n : need] = ids
        self._n = need

    # -- the check -------------------------------------------------------------------------
    def check(self, batch: pa.RecordBatch, columns: list[str]) -> pa.RecordBatch:
        """Check one batch (already schema-checked); return it in canonical types and order."""
        base = self.rows
        n = batch.num_rows
        arrays = {}
        for name in columns:
            arr = batch.column(name)
            flat = pc.list_flatten(arr) if name in _LIST_COLUMNS else None
            if arr.null_count or (flat is not None and flat.null_count):
                if arr.null_count:
                    row, what = (
                        int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0]),
                        "null value",
                    )
                else:
                    inner = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
                    nulls = np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))
                    row, what = int(np.searchsorted(np.cumsum(inner), nulls[0], side="right")), "null element"
                ids = None if name == "op_id" else _ints(batch.column("op_id"))
                self._fail(base + row, ids, name, f"{what} (every column is non-nullable)")
            arrays[name] = _canonical_column(name, arr)
        ids = _ints(arrays["op_id"])

        # op_id: unique and ascending, across batches too.
        prev = self._ids[self._n - 1] if self._n else None
        bad = np.flatnonzero(np.diff(ids) <= 0)
        if prev is not None and n and ids[0] <= prev:
            self._fail(
                base,
                ids,
                "op_id",
                f"{ids[0]} is not greater than the previous op_id {prev} "
                "(op_ids must be unique and sorted ascending)",
            )
        if len(bad):
            r = int(bad[0]) + 1
            self._fail(
                base + r,
                ids,
                "op_id",
                f"{ids[r]} is not greater than the previous op_id {ids[r - 1]} "
                "(op_ids must be unique and sorted ascending)",
            )
        self._push_ids(ids)

        for name in ("iteration", "size_bytes", "compute_ps", "period"):
            vals = _ints(arrays[name])
            neg = np.flatnonzero(vals < 0)
            if len(neg):
                r = int(neg[0])
                self._fail(base + r, ids, name, f"is negative ({vals[r]})")
            limit = _LIMITS.get(name)
            over = np.flatnonzero(vals > limit) if limit is not None else ()
            if len(over):
                r = int(over[0])
                self._fail(base + r, ids, name, f"{vals[r]} is beyond the engine's limit of {limit}")

        # Dictionary columns: names known (kind, algorithm) or non-empty (stage, phase, job).
        codes = {}
        for name in _DICT_COLUMNS:
            if name not in arrays:  # (job is optional)
                continue
            arr = arrays[name]
            words = arr.dictionary.to_pylist()
            idx = _ints(arr.indices)
            words = [w if isinstance(w, str) else "" for w in words]  # a null dictionary entry reads as ""
            if name == "kind":
                ok = np.array([w in KINDS for w in words], dtype=bool)
                why = f"unknown kind (known: {', '.join(KINDS)})"
            elif name == "algorithm":
                ok = np.array([w in ALGORITHMS for w in words], dtype=bool)
                why = f"unknown algorithm (known: {', '.join(ALGORITHMS)})"
            else:
                ok = np.array([len(w) > 0 for w in words], dtype=bool)
                why = "empty name"
            if len(idx) and not ok.all():
                rows = np.flatnonzero(~ok[idx])
                if len(rows):
                    r = int(rows[0])
                    self._fail(base + r, ids, name, f"{words[idx[r]]!r}: {why}")
            if name == "kind":
                lut = np.array([KINDS.index(w) if w in KINDS else -1 for w in words], dtype=np.int32)
                codes[name] = lut[idx] if len(idx) else np.empty(0, np.int32)

        # ranks: non-empty, per-kind arity, in range, unique within a row.
        off, vals = _list_parts(arrays["ranks"])
        counts = np.diff(off)
        kind = codes["kind"]
        send, m2n = KINDS.index("send"), KINDS.index("m2n")
        for r_mask, msg in (
            (counts == 0, "is empty (an op needs at least one rank)"),
            ((kind == send) & (counts != 2), "a send needs exactly 2 ranks [src, dst], got {n}"),
            ((kind == m2n) & (counts < 2), "an m2n needs at least 2 ranks, got {n}"),
        ):
            rows = np.flatnonzero(r_mask)
            if len(rows):
                r = int(rows[0])
                self._fail(base + r, ids, "ranks", msg.format(n=int(counts[r])))
        if len(vals):
            row_of = np.repeat(np.arange(n), counts)
            bad = (
                np.flatnonzero(vals < 0)
                if self.gpus is None
                else np.flatnonzero((vals < 0) | (vals >= self.gpus))
            )
            if len(bad):
                v = int(vals[bad[0]])
                where = (
                    "negative"
                    if v < 0
                    else f"outside the fabric (gpus={self.gpus}, ranks 0..{self.gpus - 1})"
                )
                self._fail(base + int(row_of[bad[0]]), ids, "ranks", f"rank {v} is {where}")
            order = np.lexsort((vals, row_of))
            sv, sr = vals[order], row_of[order]
            dup = np.flatnonzero((sv[1:] == sv[:-1]) & (sr[1:] == sr[:-1]))
            if len(dup):
                r = int(sr[dup].min())
                first = sv[dup][sr[dup] == r][0]
                self._fail(base + r, ids, "ranks", f"rank {int(first)} appears more than once")

        # m2n_senders: required for m2n rows, 1 <= senders < len(ranks); 0 elsewhere.
        if "m2n_senders" in arrays:
            snd = _ints(arrays["m2n_senders"])
            is_m2n = kind == m2n
            bad_m2n = np.flatnonzero(is_m2n & ((snd < 1) | (snd >= counts)))
            if len(bad_m2n):
                r = int(bad_m2n[0])
                self._fail(
                    base + r,
                    ids,
                    "m2n_senders",
                    f"is {snd[r]}, expected 1..{int(counts[r]) - 1} (the number of leading ranks that send)",
                )
            bad_other = np.flatnonzero(~is_m2n & (snd != 0))
            if len(bad_other):
                r = int(bad_other[0])
                self._fail(base + r, ids, "m2n_senders", f"is {snd[r]} on a {KINDS[kind[r]]} op, expected 0")
        else:
            rows = np.flatnonzero(kind == m2n)
            if len(rows):
                self._fail(
                    base + int(rows[0]),
                    ids,
                    "m2n_senders",
                    "missing: an m2n op needs this column to split its ranks into senders and receivers",
                )

        # deps: refer to existing, earlier op_ids; unique within a row.
        doff, dvals = _list_parts(arrays["deps"])
        dcounts = np.diff(doff)
        if len(dvals):
            drow = np.repeat(np.arange(n), dcounts)
            own = ids[drow]
            backward = dvals < own
            known = self._ids[: self._n]
            pos = np.searchsorted(known, dvals)
            exists = (pos < self._n) & (known[np.minimum(pos, self._n - 1)] == dvals)
            missing = np.flatnonzero(backward & ~exists)
            selfdep = np.flatnonzero(dvals == own)
            first_bad = min([int(a[0]) for a in (missing, selfdep) if len(a)], default=None)
            if first_bad is not None:
                r = int(drow[first_bad])
                if dvals[first_bad] == own[first_bad]:
                    self._fail(
                        base + r, ids, "deps", f"depends on itself (op {own[first_bad]}): a dependency cycle"
                    )
                self._fail(base + r, ids, "deps", f"depends on op {dvals[first_bad]} which does not exist")
            order = np.lexsort((dvals, drow))
            sv, sr = dvals[order], drow[order]
            dup = np.flatnonzero((sv[1:] == sv[:-1]) & (sr[1:] == sr[:-1]))
            if len(dup):
                r = int(sr[dup].min())
                self._fail(base + r, ids, "deps", f"lists op {int(sv[dup][sr[dup] == r][0])} more than once")
            fwd = np.flatnonzero(~backward)
            if len(fwd) and self._forward is None:
                k = int(fwd[0])
                self._forward = (base + int(drow[k]), int(own[k]), int(dvals[k]))

        self.rows += n
        return pa.RecordBatch.from_arrays([arrays[c] for c in columns], names=columns)

    def finish(self, batches: list[pa.RecordBatch]) -> None:
        """Resolve deferred dependency errors (a forward dep needs the whole file).

        ``batches`` are the canonical batches `check` returned, in order. A trace without a
        single op is refused here: it would replay nothing and report a makespan of 0.
        """
        if self.rows == 0:
            raise TraceError(
                f"{self.source}: has no ops (0 rows): an empty trace replays nothing; give at least one op"
            )
        if self._forward is None:
            return
        row, op, dep = self._forward
        ids = self._ids[: self._n]
        offs, vals, shift = [], [], 0
        for b in batches:
            off, v = _list_parts(b.column("deps"))
            offs.append(off[:-1] + shift)
            vals.append(v)
            shift += len(v)
        offsets = np.concatenate(offs + [np.array([shift], dtype=np.int64)])
        deps = np.concatenate(vals)
        cycle = _find_cycle(ids, offsets, deps)
        if cycle is not None:
            start = min(cycle)  # the smallest op of a cycle depends on a later one: name its row
            k = cycle.index(start)
            cycle = cycle[k:] + cycle[:k]
            path = " -> ".join(f"op {c}" for c in cycle + [start])
            first_row = int(np.searchsorted(ids, start))
            raise TraceError(
                f"{self.source}: row {first_row} (op_id {start}), column 'deps': dependency cycle {path}"
            )
        pos = int(np.searchsorted(ids, dep))
        if pos < self._n and ids[pos] == dep:
            why = f"depends on op {dep} which comes later (deps must refer to earlier op_ids)"
        else:
            why = f"depends on op {dep} which does not exist"
        raise TraceError(f"{self.source}: row {row} (op_id {op}), column 'deps': {why}")


def _ints(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _list_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets starting at 0, values) of a list array, honouring slices."""
    off = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    lo, hi = int(off[0]), int(off[-1])
    vals = arr.values.slice(lo, hi - lo).to_numpy(zero_copy_only=False)
    return off - lo, vals


def _find_cycle(ids: np.ndarray, offsets: np.ndarray, deps: np.ndarray) -> list[int] | None:
    """A dependency cycle as a list of op_ids (each depends on the next), or None.

    Iterative depth-first search; only run on the error path (a forward dependency).
    """
    n = len(ids)
    target = np.searchsorted(ids, deps)
    target = np.where((target < n) & (ids[np.minimum(target, n - 1)] == deps), target, -1)
    state = np.zeros(n, dtype=np.int8)  # 0 new, 1 on stack, 2 done
    for root in range(n):
        if state[root]:
            continue
        stack = [(root, int(offsets[root]))]
        state[root] = 1
        while stack:
            node, k = stack[-1]
            if k < offsets[node + 1]:
                stack[-1] = (node, k + 1)
                nxt = int(target[k])
                if nxt < 0:
                    continue
                if state[nxt] == 1:
                    path = [s[0] for s in stack]
                    return [int(ids[p]) for p in path[path.index(nxt) :]]
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, int(offsets[nxt])))
            else:
                state[node] = 2
                stack.pop()
    return None
