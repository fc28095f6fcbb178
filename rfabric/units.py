"""Unit strings <-> integer base units.

The engine works in integers only: time in picoseconds, sizes in bytes, rates in bit/s.
This module is the one place that parses human strings ("200Gbps", "1us", "4MiB") and
floats; everything downstream takes the integers it returns.

Decimal prefixes (k, M, G, T) are powers of 1000 and binary ones (Ki, Mi, Gi, Ti) powers of
1024, for both sizes and rates, as in the SI/IEC conventions: "1MB" is 1_000_000 bytes and
"1MiB" is 1_048_576 bytes. A bare number is taken in the base unit.
"""

from __future__ import annotations

import math
import re
from numbers import Integral, Real

from .errors import SpecError

__all__ = [
    "parse_time",
    "parse_size",
    "parse_rate",
    "format_time",
    "format_rate",
    "format_size",
    "MAX_TIME_PS",
    "MAX_SIZE_BYTES",
    "MAX_RATE_BPS",
]

#: The engine's horizon: a time given as a unit string or number (``until``, ``at``,
#: ``t_ocs``, ...) is below 2^62 ps (about 53 days), so any two such times add up without
#: wrapping int64. Inside the engine (``engine::kHorizon``, the same value) no op and no flow
#: starts after it: an op whose dependencies' end plus its compute gap passes it is a
#: SpecError naming the op, and a flow-level finish beyond int64 time saturates and is
#: refused rather than wrapped.
MAX_TIME_PS = 2**62 - 1
#: The largest size of one flow or op: 2^48 bytes (256 TiB).
MAX_SIZE_BYTES = 2**48
#: The largest rate: 2^50 bit/s (about 1.1 Pb/s).
MAX_RATE_BPS = 2**50

_PREFIX = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_TIME = {"ps": 1, "ns": 10**3, "us": 10**6, "µs": 10**6, "ms": 10**9, "s": 10**12, "min": 60 * 10**12}
_NUM = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"
_TIME_RE = re.compile(_NUM + r"(ps|ns|us|µs|ms|s|min)\s*$")
_SIZE_RE = re.compile(_NUM + r"(|k|K|M|G|T|Ki|Mi|Gi|Ti)(B|bytes?)?\s*$")
_RATE_RE = re.compile(_NUM + r"(|k|K|M|G|T|Ki|Mi|Gi|Ti)(bps|bit/s|b/s)\s*$")


def _exact(value: float, what: str, text: object) -> int:
    if not math.isfinite(value):
        raise SpecError(f"{what} {text!r} is not a finite number")
    rounded = round(value)
    if abs(value - rounded) > 1e-6 * max(1.0, abs(value)):
        raise SpecError(f"{what} {text!r} is not a whole number of base units ({value!r})")
    return int(rounded)


def _parse(value: object, regex: re.Pattern, scale, what: str, allow_zero: bool) -> int:
    if isinstance(value, bool):
        raise SpecError(f"{what} {value!r} is a bool, not a quantity")
    if isinstance(value, Integral):
        out = int(value)
    elif isinstance(value, Real):
        out = _exact(float(value), what, value)
    elif isinstance(value, str):
        m = regex.match(value)
        if not m:
            raise SpecError(f"{what} {value!r} is malformed (examples: {_EXAMPLES[what]})")
        out = _exact(float(m.group(1)) * scale(m), what, value)
    else:
        raise SpecError(f"{what} {value!r} has type {type(value).__name__}, expected str or number")
    if out < 0 or (out == 0 and not allow_zero):
        raise SpecError(f"{what} {value!r} must be {'non-negative' if allow_zero else 'positive'}")
    if out > _MAX[what]:
        raise SpecError(f"{what} {value!r} is beyond the engine's limit of {_MAX_TEXT[what]}")
    return out


_MAX = {"time": MAX_TIME_PS, "size": MAX_SIZE_BYTES, "rate": MAX_RATE_BPS}
_MAX_TEXT = {
    "time": f"{MAX_TIME_PS} ps (2^62 - 1 ps, about 53 days)",
    "size": f"{MAX_SIZE_BYTES} bytes (2^48, 256 TiB)",
    "rate": f"{MAX_RATE_BPS} bit/s (2^50)",
}


_EXAMPLES = {
    "time": "'1us', '25ms', 800000",
    "size": "'4MiB', '9216B', 1024",
    "rate": "'200Gbps', '400Gbit/s'",
}


def parse_time(value: object, *, allow_zero: bool = True) -> int:
    """Parse a duration ("1us", "0.8 us", "25ms", "2s", or int picoseconds) into picoseconds."""
    return _parse(value, _TIME_RE, lambda m: _TIME[m.group(2)], "time", allow_zero)


def parse_size(value: object, *, allow_zero: bool = True) -> int:
    """Parse a size ("4MiB", "9216B", "2MB", or int bytes) into bytes."""
    return _parse(value, _SIZE_RE, lambda m: _PREFIX[m.group(2)], "size", allow_zero)


def parse_rate(value: object) -> int:
    """Parse a rate ("200Gbps", "100 Gbit/s", or int bit/s) into bit/s; must be positive."""
    return _parse(value, _RATE_RE, lambda m: _PREFIX[m.group(2)], "rate", allow_zero=False)


def _fmt(value: float, steps: list[tuple[int, str]]) -> str:
    for scale, unit in steps:
        if abs(value) >= scale:
            return f"{value / scale:.4g}{unit}"
    return f"{value:.4g}{steps[-1][1]}"


def format_time(ps: float) -> str:
    """Human form of a picosecond count, e.g. 1_500_000 -> '1.5us'."""
    return _fmt(ps, [(10**12, "s"), (10**9, "ms"), (10**6, "us"), (10**3, "ns"), (1, "ps")])


def format_rate(bps: float) -> str:
    """Human form of a bit/s rate, e.g. 2e11 -> '200Gbps'."""
    return _fmt(bps, [(10**12, "Tbps"), (10**9, "Gbps"), (10**6, "Mbps"), (10**3, "kbps"), (1, "bps")])


def format_size(nbytes: float) -> str:
    """Human form of a byte count with binary prefixes, e.g. 4194304 -> '4MiB'."""
    return _fmt(nbytes, [(2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")])
