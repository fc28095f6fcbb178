"""Reading and writing trace files: Arrow IPC (``.arrow``, ``.feather``, ``.ipc``) and Parquet.

`read` streams the file's record batches through the strict checker of `schema` one
batch at a time (IPC files are memory-mapped, so their columns stay zero-copy views of
the file); `write` picks the format from the suffix and writes atomically through a
temporary file. Nothing here knows how a trace is generated.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..errors import SpecError, TraceError
from ..validators import file_path
from .schema import Checker, check_gpus, check_schema, decode_metadata
from .trace import Trace

__all__ = ["read", "write", "IPC_SUFFIXES", "PARQUET_SUFFIXES"]

IPC_SUFFIXES = (".arrow", ".feather", ".ipc")
PARQUET_SUFFIXES = (".parquet", ".pq")

#: Rows per record batch when streaming a Parquet file.
_PARQUET_BATCH_ROWS = 1 << 16


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in IPC_SUFFIXES:
        return "ipc"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    raise TraceError(
        f"{path}: unknown trace suffix {path.suffix!r} (use {', '.join(IPC_SUFFIXES + PARQUET_SUFFIXES)}; "
        "import .et/.cm, or pass format= for chakra, simai or htsim)"
    )


def _ipc_batches(path: Path) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    source = pa.memory_map(str(path), "r")
    try:
        reader = ipc.open_file(source)
        return reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))
    except (pa.ArrowException, OSError):
        pass
    source.seek(0)
    try:
        stream = ipc.open_stream(source)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not an Arrow IPC file or stream ({exc})") from None
    return stream.schema, iter(stream)


def _parquet_batches(path: Path) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    try:
        pf = pq.ParquetFile(str(path))
    except _CORRUPT as exc:
        raise TraceError(f"{path}: not a Parquet file ({exc})") from None
    return pf.schema_arrow, pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS)


def read(path: str | os.PathLike, *, gpus: int | None = None, format: str | None = None) -> Trace:
    """Read and strictly check a trace file, or import one of another simulator's.

    The record batches are streamed: each is checked and converted to the canonical
    types as it is read, so a large trace is never held twice in memory.

    Parameters
    ----------
    path : str or path-like
        ``.arrow`` / ``.feather`` / ``.ipc`` (Arrow IPC file or stream) or ``.parquet``;
        or, imported (`rfabric.traces.importers`): ``.et`` or a directory of ``.et`` files
        (Chakra), ``.cm`` (htsim). A SimAI ``.txt`` needs ``format="simai"``.
    gpus : int, optional
        Fabric size in GPUs: every rank must be in ``[0, gpus)``. Defaults to the file's
        ``rfabric.gpus`` metadata (if present).
    format : str, optional
        An import format (``"chakra"``, ``"simai"``, ``"htsim"``) to use whatever the suffix.

    Returns
    -------
    Trace

    Raises
    ------
    TraceError
        If the file is unreadable or breaks any rule of ``traces/README.md``; the message
        names the file, and for row-level problems the row, its op_id and the column.
    """
    from .importers import format_of, import_trace

    path = file_path(path, "rf.traces.read: path", TraceError)
    if format is not None and not isinstance(format, str):
        raise TraceError(f"{path}: format must be a format name (str), got {format!r}")
    check_gpus(gpus, str(path))
    fmt = format or format_of(path)
    if fmt is not None:
        return import_trace(fmt, path, gpus=gpus)
    path = Path(path)
    if path.suffix.lower() == ".txt":
        raise TraceError(f"{path}: a .txt trace is ambiguous: pass format='simai' for a SimAI/AICB workload")
    fmt = _format(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    schema, batches = _ipc_batches(path) if fmt == "ipc" else _parquet_batches(path)
    try:
        meta = decode_metadata(schema.metadata, str(path))
        columns = check_schema(schema, str(path))
    except (TraceError, SpecError):
        raise
    except _CORRUPT as exc:
        raise TraceError(f"{path}: corrupt schema or metadata ({type(exc).__name__}: {exc})") from None
    checker = Checker(str(path), gpus if gpus is not None else meta["gpus"])
    try:
        # full validation first: a damaged file's offsets can otherwise send pyarrow's own
        # slicing past its buffers, which aborts the process
        checked = [checker.check(_validated(b), columns) for b in batches]
    except (TraceError, SpecError):
        raise
    except _CORRUPT as exc:
        raise TraceError(
            f"{path}: row {checker.rows} onwards could not be read ({type(exc).__name__}: {exc})"
        ) from None
    checker.finish(checked)
    return Trace._assemble(checked, columns, meta)


def _validated(batch: pa.RecordBatch) -> pa.RecordBatch:
    batch.validate(full=True)
    return batch


#: What pyarrow and the decoders raise on a damaged file (bit flips, truncation): each
#: becomes a TraceError naming the file (and the row where reading stopped).
_CORRUPT = (pa.ArrowException, OSError, IndexError, UnicodeDecodeError, SystemError, ValueError, KeyError)


def write(trace: Trace | pa.Table, path: str | os.PathLike, *, compression: str | None = "default") -> Path:
    """Write a trace as Arrow IPC or Parquet, chosen by the suffix of ``path``.

    The file is written to ``<path>.tmp`` and renamed, so readers never see half a file.

    Parameters
    ----------
    trace : Trace or pyarrow.Table
        A Table is checked first (as `Trace.from_table`).
    path : str or path-like
        ``.arrow`` / ``.feather`` / ``.ipc`` -> Arrow IPC file format (Feather v2);
        ``.parquet`` -> Parquet.
    compression : str or None
        ``"default"``: none for IPC (keeps reads zero-copy from the memory map), zstd for
        Parquet. Otherwise a codec name understood by pyarrow ("zstd", "lz4", ...), or
        None for no compression.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    TraceError
        On an unknown suffix or an invalid Table.
    """
    path = file_path(path, "rf.traces.write: path", TraceError)
    fmt = _format(path)
    if isinstance(trace, pa.Table):
        trace = Trace.from_table(trace)
    if not isinstance(trace, Trace):
        raise TraceError(f"{path}: write() takes a Trace or a pyarrow.Table, not {type(trace).__name__}")
    table = trace.table
    tmp = path.with_name(path.name + ".tmp")
    try:
        if fmt == "ipc":
            codec = None if compression == "default" else compression
            options = ipc.IpcWriteOptions(compression=codec, unify_dictionaries=True)
            with (
                pa.OSFile(str(tmp), "wb") as sink,
                ipc.new_file(sink, table.schema, options=options) as writer,
            ):
                writer.write_table(table)
        else:
            codec = "zstd" if compression == "default" else (compression or "none")
            pq.write_table(table, str(tmp), compression=codec)
        os.replace(tmp, path)
    except OSError as exc:  # a missing folder, no permission, a full disk
        raise TraceError(f"{path}: cannot be written ({exc})") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
