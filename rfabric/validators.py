"""Strict argument checks at the Python boundary: a bool is a bool and an integer is an
integer (no silent truncation of 2.9 to 2, no "no" read as True), each refusal a SpecError
naming the argument and the value."""

from __future__ import annotations

from numbers import Integral

import numpy as np

from .errors import SpecError

__all__ = ["boolean", "integer", "known_keys", "file_path"]


def boolean(value, what: str) -> bool:
    """``value`` if it is a bool (Python or numpy), else SpecError naming ``what``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise SpecError(f"{what} must be True or False, got {value!r}")


def integer(value, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int if it is an integer (Python or numpy; not a bool, not 2.0 or
    "2") in ``[lo, hi]``, else SpecError naming ``what``, the range and the value
    ("gpus must be an integer >= 1, got 0")."""
    if lo is not None and hi is not None:
        kind = f"an integer in {lo}..{hi}"
    elif lo is not None:
        kind = f"an integer >= {lo}"
    elif hi is not None:
        kind = f"an integer <= {hi}"
    else:
        kind = "an integer"
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (Integral, np.integer))
        or (lo is not None and value < lo)
        or (hi is not None and value > hi)
    ):
        raise SpecError(f"{what} must be {kind}, got {value!r}")
    return int(value)


def file_path(value, what: str, error: type[Exception] = SpecError):
    """``value`` as a ``pathlib.Path`` if it is a str or path-like, else ``error`` naming
    ``what`` (None, a number or a Trace given where a file name belongs)."""
    import os
    from pathlib import Path

    if isinstance(value, str | os.PathLike) and not isinstance(value, bytes):
        return Path(value)
    raise error(f"{what} must be a file path (str or path-like), got {type(value).__name__} {value!r}"[:300])


def known_keys(keys, known, where: str, what: str = "key") -> None:
    """SpecError naming the first unknown key of ``keys`` (not in ``known``) with the
    closest known one, if any is close ("did you mean ..."), and the known ones."""
    import difflib

    unknown = sorted(set(keys) - set(known))
    if not unknown:
        return
    bad = unknown[0]
    names = [str(k) for k in known]
    # the closest by spelling, else one it begins ("mtu" -> "mtu_bytes": a unit suffix left out)
    near = (
        difflib.get_close_matches(str(bad), names, n=1)
        or sorted(k for k in names if bad != "" and k.startswith(str(bad)))[:1]
    )
    hint = f"; did you mean {near[0]!r}?" if near else ""
    more = f" (and {len(unknown) - 1} more: {', '.join(map(str, unknown[1:]))})" if len(unknown) > 1 else ""
    raise SpecError(
        f"{where}: unknown {what} {bad!r}{hint}{more} (known: {', '.join(sorted(map(str, known)))})"
    )
