"""nccl-tests-style collective benchmarks on a simulated fabric.

``rf.collective(fabric, "all_reduce", sizes=...)`` runs one op per message size, each in its
own simulation of an idle fabric, and returns the table nccl-tests prints: size, count,
time, algbw and busbw (GB/s = 1e9 bytes/s, nccl-tests' bus-bandwidth factors), so the
figures can be set beside ``all_reduce_perf`` output from a real cluster.

This module is ``rfabric.collectives``; ``rf.collective`` is its function. (Until 0.2 the
module was ``rfabric.collective``, shadowed by the function of the same name:
``import rfabric.collective`` still finds this module, see rfabric/__init__.py.)
"""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa

from . import catalog
from .errors import SpecError
from .simulation import simulate
from .units import parse_size

__all__ = ["collective", "op_trace", "format_table", "size_range", "COLLECTIVE_SCHEMA"]

COLLECTIVE_SCHEMA = pa.schema(
    [
        ("size_bytes", pa.int64()),  # nccl-tests "size" (traces/README.md convention)
        ("count", pa.int64()),  # elements of `dtype_bytes` bytes
        ("kind", pa.string()),
        ("algorithm", pa.string()),  # the one that ran ("auto" resolved by the tuner)
        ("protocol", pa.string()),  # NCCL protocol that ran (null: none modelled)
        ("channels", pa.int32()),
        ("n_ranks", pa.int32()),
        ("time_ps", pa.int64()),  # the op's time, start to end (the ops table's time_ps)
        ("algbw_GBps", pa.float64()),
        ("busbw_GBps", pa.float64()),
    ]
)


def _kind(kind):
    """The catalog's spelling of a collective (hyphens read as underscores); anything else is
    left for the trace's own check, which names the known kinds."""
    try:
        return catalog.canonical(kind, "collective")
    except ValueError:
        return kind


def op_trace(kind: str, ranks, size_bytes: int, algorithm: str = "auto", *, gpus: int | None = None):
    """A one-op trace: collective ``kind`` over ``ranks`` (GPU ids; for broadcast the first is
    the root) of ``size_bytes`` (nccl-tests convention), starting at time 0. ``gpus`` bounds
    the rank check (default: the largest rank + 1). ``all-to-all`` is read as ``all_to_all``."""
    from .traces import Trace

    kind = _kind(kind)

    return Trace.from_columns(
        op_id=[0],
        stage="bench",
        phase=kind,
        kind=kind,
        ranks=[[int(r) for r in ranks]],
        size_bytes=[size_bytes],
        algorithm=algorithm,
        deps=[[]],
        gpus=gpus,
    )


def size_range(min_bytes="8MiB", max_bytes="1GiB", factor: int = 2) -> list[int]:
    """Message sizes from min to max, multiplying by ``factor`` (nccl-tests -b/-e/-f)."""
    lo = parse_size(min_bytes, allow_zero=False, name="min_bytes")
    hi = parse_size(max_bytes, allow_zero=False, name="max_bytes")
    if hi < lo:
        raise SpecError(f"max size {hi} is below min size {lo}")
    if not isinstance(factor, int) or factor < 2:
        raise SpecError(f"factor must be an integer >= 2, got {factor!r}")
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def collective(
    topology=None,
    kind: str | None = None,
    *,
    sizes=None,
    ranks=None,
    algorithm: str = "auto",
    dtype_bytes: int = 4,
    **settings,
) -> pa.Table:
    """Time one collective per message size on an idle fabric.

    Parameters
    ----------
    topology : Topology or NetworkSpec
        The fabric (first, as in every rfabric call).
    kind : str
        ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``broadcast``.
    sizes : list of sizes, optional
        Message sizes (nccl-tests ``size``); default ``size_range()`` (8 MiB .. 1 GiB).
    ranks : list of int, optional
        Participating GPUs (default: all of the fabric's). For broadcast the first is the root.
    algorithm : str
        As in traces (``auto``, ``ring``, ``hier_ring``, ``direct``, ``tree``, ``chain``,
        ``halving_doubling``).
    dtype_bytes : int
        Element size for the ``count`` column (4: float32, as nccl-tests' default).
    **settings
        `rf.simulate` settings: ``backend``, ``transport``, ``seed`` and EngineConfig fields
        (``ecmp``, ``coll_channels``, ``nccl_model``, ``coll_protocol``, ...).

    Returns
    -------
    pyarrow.Table
        One row per size (`COLLECTIVE_SCHEMA`): ``time_ps`` is the op's time in ps (int64;
        `format_table` prints it in us, as nccl-tests). The ``algorithm``, ``protocol`` and
        ``channels`` columns say what ran (``auto`` resolved by the NCCL-like tuner;
        docs/nccl-model.md).

    The order before 0.2, ``collective(kind, topology, ...)``, still works with a
    DeprecationWarning (a str first argument is taken as the kind); it goes in 0.3.
    """
    if "fabric" in settings:  # the keyword's name before 0.2
        warnings.warn(
            "rf.collective(fabric=...) is deprecated: pass the fabric first, or as topology=; "
            "fabric= goes in rfabric 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        if topology is not None:
            if kind is None and isinstance(topology, str):
                kind = topology
            else:
                raise SpecError("rf.collective: the fabric given twice (topology and fabric=)")
        topology = settings.pop("fabric")
    elif isinstance(topology, str) and not isinstance(kind, str):
        warnings.warn(
            "rf.collective(kind, topology, ...) is deprecated: the fabric comes first, "
            f"rf.collective(topology, {topology!r}, ...) (docs/api-style.md); the old order "
            "goes in rfabric 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        topology, kind = kind, topology
    if topology is None or kind is None:
        raise SpecError("rf.collective(topology, kind, ...): both the fabric and the collective are needed")
    kind = _kind(kind)
    from .config import as_spec as _as_spec

    spec = _as_spec(topology)
    ranks = list(range(spec.num_gpus)) if ranks is None else [int(r) for r in ranks]
    sizes = size_range() if sizes is None else [parse_size(s, allow_zero=False, name="sizes") for s in sizes]
    rows = []
    for size in sizes:
        trace = op_trace(kind, ranks, size, algorithm, gpus=spec.num_gpus)
        res = simulate(spec, trace, **settings)
        op = res.ops.to_pylist()[0]
        if op["end_ps"] < 0:
            raise SpecError(f"{kind} of {size} bytes did not finish (drops: {res.run['drops']})")
        rows.append(
            {
                "size_bytes": size,
                "count": size // dtype_bytes,
                "kind": kind,
                "algorithm": op["algorithm"],
                "protocol": op["protocol"],
                "channels": op["channels"],
                "n_ranks": len(ranks),
                "time_ps": op["time_ps"],
                "algbw_GBps": op["algbw_GBps"],
                "busbw_GBps": op["busbw_GBps"],
            }
        )
    return pa.Table.from_pylist(rows, schema=COLLECTIVE_SCHEMA)


def format_table(table: pa.Table) -> str:
    """The table as nccl-tests prints it, and what ran: the algorithm, protocol and channels."""
    lines = [
        f"#{'size':>14} {'count':>13} {'type':>6}   {'time (us)':>10} {'algbw (GB/s)':>12} {'busbw (GB/s)':>12}"
        f"  {'algorithm':>16} {'protocol':>8} {'channels':>8}"
    ]
    for r in table.to_pylist():
        lines.append(
            f"{r['size_bytes']:>15} {r['count']:>13} {'float':>6}   {r['time_ps'] / 1e6:>10.1f} "
            f"{r['algbw_GBps']:>12.2f} {r['busbw_GBps']:>12.2f}"
            f"  {r['algorithm']:>16} {r['protocol'] or '-':>8} {r['channels']:>8}"
        )
    busbw = np.array(table["busbw_GBps"].to_pylist(), dtype=float)
    if len(busbw):
        lines.append(f"# Avg bus bandwidth    : {busbw.mean():.3f} GB/s")
    return "\n".join(lines)
