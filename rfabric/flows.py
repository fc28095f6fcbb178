"""Plain flow workloads: point-to-point transfers between GPUs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import SpecError
from .units import MAX_SIZE_BYTES, MAX_TIME_PS, parse_size, parse_time
from .validators import integer

__all__ = ["Flows"]


def _int_col(values, name: str, n: int | None, parse=None) -> np.ndarray:
    """A column of int64: ints, whole floats, or (with ``parse``, e.g. parse_size) unit
    strings such as "4MiB", alone or per flow; values beyond ``parse``'s limit are refused."""
    if parse is not None:
        try:
            arr = np.asarray(values)
        except OverflowError:  # Python ints beyond int64: parse names the first
            arr = np.asarray(values, dtype=object)
        if arr.dtype.kind in "UOS":
            flat = arr.reshape(-1)
            out = np.empty(flat.size, dtype=np.int64)
            for i, v in enumerate(flat.tolist()):
                try:
                    out[i] = parse(v)
                except SpecError as exc:
                    where = f"flow {i}: " if arr.ndim else ""
                    raise SpecError(f"Flows: {where}{name}: {exc}") from None
            values = out.reshape(arr.shape)
    arr = np.asarray(values)
    if arr.ndim == 0:
        if n is None:
            arr = arr.reshape(1)
        else:
            arr = np.full(n, arr)
    if arr.ndim != 1:
        raise SpecError(f"Flows: '{name}' must be 1-d, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if (
            np.issubdtype(arr.dtype, np.floating)
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
        ):
            arr = arr.astype(np.int64)
        else:
            raise SpecError(f"Flows: '{name}' must hold integers, got dtype {arr.dtype}")
    if n is not None and len(arr) != n:
        raise SpecError(f"Flows: '{name}' has {len(arr)} entries, expected {n}")
    return np.ascontiguousarray(arr, dtype=np.int64)


@dataclass(frozen=True, init=False)
class Flows:
    """Point-to-point flows between GPU ids.

    Parameters
    ----------
    src, dst : array of int
        Source and destination GPU ids (the order of GPU nodes in the topology).
    size_bytes : array of int or int, or unit strings
        Message sizes in bytes (a scalar applies to all flows; "4MiB" as anywhere else).
    start_ps : array of int or int, or unit strings, optional
        Start times in picoseconds (default 0; "10us").
    """

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_ps: np.ndarray

    def __init__(self, src, dst, size_bytes, start_ps=0):
        src = _int_col(src, "src", None)
        n = len(src)
        dst = _int_col(dst, "dst", n)
        size = _int_col(size_bytes, "size_bytes", n, parse_size)
        start = _int_col(start_ps, "start_ps", n, parse_time)
        for name, arr in (("src", src), ("dst", dst), ("size_bytes", size), ("start_ps", start)):
            bad = np.flatnonzero(arr < 0)
            if bad.size:
                raise SpecError(f"Flows: flow {bad[0]}: negative {name} {arr[bad[0]]}")
        for name, arr, limit in (("size_bytes", size, MAX_SIZE_BYTES), ("start_ps", start, MAX_TIME_PS)):
            bad = np.flatnonzero(arr > limit)
            if bad.size:
                raise SpecError(
                    f"Flows: flow {bad[0]}: {name} {arr[bad[0]]} is beyond the engine's limit of {limit}"
                )
        same = np.flatnonzero(src == dst)
        if same.size:
            raise SpecError(f"Flows: flow {same[0]}: src and dst are both GPU {src[same[0]]}")
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "size_bytes", size)
        object.__setattr__(self, "start_ps", start)

    def __len__(self) -> int:
        return len(self.src)

    def check_gpus(self, num_gpus: int, where: str = "") -> None:
        """Raise SpecError if any flow names a GPU the fabric does not have."""
        for name, arr in (("src", self.src), ("dst", self.dst)):
            bad = np.flatnonzero(arr >= num_gpus)
            if bad.size:
                raise SpecError(
                    f"Flows: flow {bad[0]}: {name} {arr[bad[0]]} is not a GPU of {where or 'the fabric'} "
                    f"(it has GPUs 0..{num_gpus - 1})"
                )

    @classmethod
    def permutation(
        cls, gpus: int, size_bytes, *, seed: int = 0, start_ps=0, derangement: bool = True
    ) -> Flows:
        """Random permutation traffic: every GPU sends ``size_bytes`` to a distinct GPU
        (a derangement: nobody sends to itself). Deterministic in ``seed``.

        With ``derangement=False`` the permutation is uniform and the GPUs it maps to
        themselves send nothing. Raises SpecError when ``gpus`` is not a positive integer,
        or is 1 with ``derangement=True`` (a single GPU has nobody else to send to)."""
        integer(gpus, "Flows.permutation: gpus", lo=1)
        if derangement and gpus == 1:
            raise SpecError(
                "Flows.permutation: a derangement needs at least 2 GPUs, got 1 "
                "(pass derangement=False for the identity)"
            )
        rng = np.random.default_rng(seed)
        src = np.arange(gpus)
        while True:
            dst = rng.permutation(gpus)
            if not derangement or not np.any(dst == src):
                break
        moves = dst != src
        for name, v in (("size_bytes", size_bytes), ("start_ps", start_ps)):
            if np.ndim(v) and not isinstance(v, str) and np.shape(v) != (gpus,):
                raise SpecError(
                    f"Flows.permutation: {name} must be one value or one per GPU ({gpus}), "
                    f"got shape {np.shape(v)}"
                )
        per_gpu = [
            np.asarray(v)[moves] if np.ndim(v) and not isinstance(v, str) else v
            for v in (size_bytes, start_ps)
        ]
        return cls(src[moves], dst[moves], *per_gpu)
