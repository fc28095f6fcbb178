"""Importers: other simulators' workload formats -> `rfabric.traces.Trace`.

One module per format, each with ``read(path, *, gpus=None, ...) -> Trace``; every trace
they return has passed the same strict checker as `rfabric.traces.read`, and every malformed
input is refused with `rfabric.TraceError` naming the file and the record (line, node id,
rank file). ``traces/README.md`` ("Importing other formats") lists the fields each one uses.

========  =====================================  ==========================================
format    input                                  module
========  =====================================  ==========================================
chakra    MLCommons Chakra ET, one .et per rank  `chakra` (a directory, glob or one file)
simai     SimAI/AICB workload .txt               `simai`
htsim     htsim connection matrix .cm            `htsim` (also `htsim.flows` -> rf.Flows)
========  =====================================  ==========================================
"""

from __future__ import annotations

import os

from ...errors import TraceError
from ...validators import file_path
from . import chakra, htsim, simai

__all__ = ["FORMATS", "SUFFIXES", "import_trace", "format_of", "chakra", "simai", "htsim"]

#: Format name -> its module's ``read``.
FORMATS = {"chakra": chakra.read, "simai": simai.read, "htsim": htsim.read}

#: File suffixes that name a format unambiguously (a ``.txt`` does not: pass the format).
SUFFIXES = {".et": "chakra", ".cm": "htsim"}


def format_of(path: str | os.PathLike) -> str | None:
    """The import format ``path``'s suffix names (a directory of ``.et`` files is chakra), or None."""
    p = file_path(path, "rf.traces.read: path", TraceError)
    if p.suffix.lower() in SUFFIXES:
        return SUFFIXES[p.suffix.lower()]
    if p.is_dir() and any(p.glob("*.et")):
        return "chakra"
    return None


def import_trace(fmt: str, path: str | os.PathLike, **options):
    """Import ``path`` in format ``fmt`` (a key of `FORMATS`); ``options`` go to its ``read``.

    Raises
    ------
    TraceError
        On an unknown format, or any malformed input.
    """
    path = file_path(path, f"rf.traces.importers: {fmt} path", TraceError)
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise TraceError(f"{path}: unknown import format {fmt!r} (known: {', '.join(FORMATS)})")
    return FORMATS[fmt](path, **options)
