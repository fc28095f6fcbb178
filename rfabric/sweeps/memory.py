"""Each sweep point's memory: the bound a sweep puts on it (``max_memory``) and the peak it
reports (``peak_rss_bytes``).

A bounded point may allocate at most ``max_memory`` bytes beyond what its process holds when
the point starts (the interpreter, the libraries, the engine module). The bound is the kernel's
data-segment limit (``RLIMIT_DATA``: private writable memory the process maps, which is at or
above what it keeps resident), set as the soft limit for the point's duration and restored
after it; Arrow's allocations go to the system allocator meanwhile, since its default
(mimalloc) reserves about a gigabyte of address space at its first use whether it fills it or
not. An allocation past the bound fails (``MemoryError`` in Python, ``std::bad_alloc`` in the
engine, which pybind11 turns into ``MemoryError``); the point fails with a ``SweepError``
naming it and the bound, and the sweep's other points go on as after any failed point.

The peak is the process's resident high-water mark over the point (Linux ``VmHWM``, reset
at the point's start through ``/proc/self/clear_refs``); elsewhere the process's lifetime
peak (``ru_maxrss``), which is the point's when each point has a process of its own (the
local executor gives each bounded point a fresh process).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from ..errors import SpecError
from ..units import format_size, parse_size

_PROC = "/proc/self"


def parse_bound(value, where: str) -> int | None:
    """``max_memory`` as bytes ("6GiB", "512MB" or an int); None for no bound."""
    if value is None:
        return None
    try:
        n = parse_size(value, name="max_memory")
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None
    if n < (64 << 20):
        raise SpecError(f"{where}: max_memory={format_size(n)} is below 64 MiB: no point fits in it")
    if sys.platform != "linux":
        raise SpecError(
            f"{where}: max_memory needs Linux (the data-segment limit and /proc); this is {sys.platform}"
        )
    return n


def _status_kib(field: str) -> int | None:
    try:
        with open(f"{_PROC}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open(f"{_PROC}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident size
        return True
    except OSError:
        return False


def _lifetime_peak() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


class PointMemory:
    """What ``point_memory`` measured: ``peak_bytes`` once the point is over."""

    peak_bytes: int | None = None


@contextmanager
def point_memory(limit: int | None):
    """Run the body as one sweep point: its allocations bounded by ``limit`` bytes (None: not
    bounded), its resident peak measured (``PointMemory.peak_bytes``)."""
    out = PointMemory()
    exact = _reset_peak()
    restore = None
    if limit is not None:
        import resource

        import pyarrow as pa

        data = (_status_kib("VmData") or 0) * 1024
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        want = data + limit
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        pool = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())
        resource.setrlimit(resource.RLIMIT_DATA, (want, hard))
        restore = (soft, hard, pool)
    try:
        yield out
    finally:
        if restore is not None:
            import resource

            import pyarrow as pa

            soft, hard, pool = restore
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
            pa.set_memory_pool(pool)
        hwm = _status_kib("VmHWM") if exact else None
        out.peak_bytes = hwm * 1024 if hwm is not None else _lifetime_peak()


def available_bytes() -> int | None:
    """Memory the machine can still give (``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def workers_that_fit(workers: int, limit: int | None) -> int:
    """How many bounded points may run at once: no more than the machine's available memory
    holds at ``limit`` each (and at least one)."""
    if limit is None:
        return workers
    avail = available_bytes()
    if avail is None:
        return workers
    return max(1, min(workers, avail // limit))


def over_bound_message(key: str, where: str, limit: int, exc: BaseException) -> str:
    return (
        f"{where}: sweep point {key}: needs more than its memory bound max_memory={format_size(limit)} "
        f"({type(exc).__name__}: {exc or 'allocation failed'}); raise max_memory or make the point smaller"
    )


__all__ = ["parse_bound", "point_memory", "workers_that_fit", "available_bytes"]
