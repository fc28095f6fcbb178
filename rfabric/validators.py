"""Strict argument checks at the Python boundary: a bool is a bool and an integer is an
integer (no silent truncation of 2.9 to 2, no "no" read as True), each refusal a SpecError
naming the argument and the value."""

from __future__ import annotations

from numbers import Integral

import numpy as np

from .errors import SpecError

__all__ = ["boolean", "integer"]


def boolean(value, what: str) -> bool:
    """``value`` if it is a bool (Python or numpy), else SpecError naming ``what``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise SpecError(f"{what} must be True or False, got {value!r}")


def integer(value, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int if it is an integer (Python or numpy; not a bool, not 2.0 or
    "2") in ``[lo, hi]``, else SpecError naming ``what`` and the range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (Integral, np.integer)):
        raise SpecError(f"{what} must be an integer, got {value!r}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        span = f"{'' if lo is None else lo}..{'' if hi is None else hi}"
        raise SpecError(f"{what} must be in {span}, got {v}")
    return v
