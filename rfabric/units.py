"""Unit strings <-> integer base units.

The engine works in integers only: time in picoseconds, sizes in bytes, rates in bit/s.
This module is the one place that parses human strings ("200Gbps", "1us", "4MiB") and
floats; everything downstream takes the integers it returns.

Decimal prefixes (k, M, G, T) are powers of 1000 and binary ones (Ki, Mi, Gi, Ti) powers of
1024, for both sizes and rates, as in the SI/IEC conventions: "1MB" is 1_000_000 bytes and
"1MiB" is 1_048_576 bytes.

A bare number (an int or float, or a string of digits with no unit) is a count of the base
unit, and one rule guards it at every API site (docs/units.md): below its quantity's floor
(``BARE_FLOOR``: a rate under 1 Mbit/s, a time under 1 ns other than 0, a buffer under 1 KiB)
it is a unit left out, refused with a SpecError that names the argument and suggests the unit
string ("link=200 is 200 bit/s; did you mean '200Gbps'?"). An argument whose name carries its
unit (``start_ps``, ``size_bytes``, ``mtu_bytes``) is explicit and has no floor. The API sites
apply it by naming the argument (``parse_rate(link, name="link")``); without a name the
parsers are the plain conversion the internals use (``parse_time(42) == 42``).
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
    "BARE_FLOOR",
    "check_bare",
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

#: The bare-number rule's floors, in base units: a number without a unit below its quantity's
#: floor is refused (docs/units.md gives the reasons). Sizes of messages and flows have none:
#: every byte count from 1 is a real message (nccl-tests starts at 8 B, control frames are 64).
BARE_FLOOR = {
    "rate": 10**6,  # 1 Mbit/s: the fabrics here run at 100 Gb/s and up, 10^5 times more
    "time": 10**3,  # 1 ns: a hop's latency or a 64 B frame at 400 Gb/s is longer
    "buffer": 2**10,  # 1 KiB: smaller than one frame (MTU 9216 B by default)
    "size": 0,
}
_BASE = {"rate": "bit/s", "time": "ps", "buffer": "bytes", "size": "bytes"}
_SUGGEST = {"rate": ("Gbps",), "time": ("us", "ms"), "buffer": ("KiB", "MiB"), "size": ("KiB", "MiB")}
_UNIT_SUFFIXES = ("_ps", "_bytes", "_bps", "_byte_counter")


def check_bare(value, kind: str, name: str | None = None, floor: int | None = None) -> None:
    """The bare-number rule at one API site: SpecError if ``value``, a number given without a
    unit for argument ``name`` (a quantity of ``kind``: "rate", "time", "buffer" or "size"),
    is above 0 and below ``BARE_FLOOR[kind]``, naming the argument and suggesting the unit
    string. A numpy array is checked element by element. Arguments whose name ends in their
    unit (``_ps``, ``_bytes``, ``_bps``) are explicit and pass. ``floor``: a lower floor for
    this site (a fabric given "1kbps" as a unit string takes its own bare 1000s)."""
    floor = BARE_FLOOR[kind] if floor is None else min(floor, BARE_FLOOR[kind])
    if floor <= 0 or (name is not None and name.endswith(_UNIT_SUFFIXES)):
        return
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.size == 0 or value.dtype.kind not in "iuf":
            return
        low = value[(value > 0) & (value < floor)]
        if low.size:
            check_bare(low.flat[0].item(), kind, name, floor)
        return
    if isinstance(value, bool) or not isinstance(value, Real):
        return
    v = float(value)
    if 0 < v < floor:
        shown = f"{v:g}"
        hints = " or ".join(f"'{shown}{u}'" for u in _SUGGEST[kind])
        label = f"{name}={value!r}" if name else f"{kind} {value!r}"
        if floor < BARE_FLOOR[kind]:
            raise SpecError(
                f"{label} is {shown} {_BASE[kind]}, below the smallest this fabric was given; "
                f"did you mean {hints}? (docs/units.md)"
            )
        raise SpecError(
            f"{label} is {shown} {_BASE[kind]}; did you mean {hints}? A number without a unit "
            f"counts {_BASE[kind]}, and below {_format_floor(kind)} it is refused as a unit left "
            f"out (docs/units.md): write the unit"
        )


def _format_floor(kind: str) -> str:
    return {"rate": "1 Mbit/s", "time": "1 ns", "buffer": "1 KiB"}[kind]


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


def _exact(value: float, label: str) -> int:
    if not math.isfinite(value):
        raise SpecError(f"{label} is not a finite number")
    rounded = round(value)
    if abs(value - rounded) > 1e-6 * max(1.0, abs(value)):
        raise SpecError(f"{label} is not a whole number of base units ({value!r})")
    return int(rounded)


_BARE_RE = re.compile(_NUM + r"$")


def _parse(
    value: object, regex: re.Pattern, scale, what: str, allow_zero: bool, name: str | None, kind: str
) -> int:
    label = f"{name}: {what} {value!r}" if name else f"{what} {value!r}"
    if isinstance(value, bool):
        raise SpecError(f"{label} is a bool, not a quantity")
    if isinstance(value, Real) and name is not None:  # an API site's argument: the rule
        check_bare(value, kind, name)
    if isinstance(value, Integral):
        out = int(value)
    elif isinstance(value, Real):
        out = _exact(float(value), label)
    elif isinstance(value, str):
        m = regex.match(value)
        if not m and _BARE_RE.match(value):
            if what == "size":  # (digits alone are bytes: the rule as for a number)
                if name is not None:
                    check_bare(float(value), kind, name)
            else:
                raise SpecError(
                    f"{name or what}={value!r} has no unit; did you mean "
                    + " or ".join(f"'{value.strip()}{u}'" for u in _SUGGEST[kind])
                    + f"? (examples: {_EXAMPLES[what]})"
                )
        if not m:
            raise SpecError(f"{label} is malformed (examples: {_EXAMPLES[what]})")
        out = _exact(float(m.group(1)) * scale(m), label)
    else:
        raise SpecError(f"{label} has type {type(value).__name__}, expected str or number")
    if out < 0 or (out == 0 and not allow_zero):
        raise SpecError(f"{label} must be {'non-negative' if allow_zero else 'positive'}")
    if out > _MAX[what]:
        raise SpecError(f"{label} is beyond the engine's limit of {_MAX_TEXT[what]}")
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


def parse_time(value: object, *, allow_zero: bool = True, name: str | None = None) -> int:
    """Parse a duration ("1us", "0.8 us", "25ms", "2s", or int picoseconds) into picoseconds.
    ``name``: the API argument, for errors and the bare-number rule: with it, a bare number
    under 1 ns (other than 0) is refused (``check_bare``)."""
    return _parse(value, _TIME_RE, lambda m: _TIME[m.group(2)], "time", allow_zero, name, "time")


def parse_size(
    value: object, *, allow_zero: bool = True, name: str | None = None, buffer: bool = False
) -> int:
    """Parse a size ("4MiB", "9216B", "2MB", or int bytes) into bytes. ``buffer``: the size
    of a buffer, where a bare number under 1 KiB is refused when ``name`` is given
    (``check_bare``); a message or flow size has no floor."""
    kind = "buffer" if buffer else "size"
    return _parse(value, _SIZE_RE, lambda m: _PREFIX[m.group(2)], "size", allow_zero, name, kind)


def parse_rate(value: object, *, name: str | None = None) -> int:
    """Parse a rate ("200Gbps", "100 Gbit/s", or int bit/s) into bit/s; must be positive.
    With ``name`` (an API argument), a bare number under 1 Mbit/s is refused (``check_bare``)."""
    return _parse(value, _RATE_RE, lambda m: _PREFIX[m.group(2)], "rate", False, name, "rate")


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
