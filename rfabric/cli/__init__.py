"""The ``rfabric`` command line: a thin argparse layer over the Python API.

``parser`` builds the argument parser and holds ``main``; each subcommand's work is in its own
module (``demo``, ``run``, ``collective``, ``cost``, ``sweep``), ``common`` has the text table
they print. ``python -m rfabric.cli`` runs ``main``.
"""

from __future__ import annotations

from .demo import demo_trace
from .parser import build_parser, main

__all__ = ["main", "build_parser", "demo_trace"]
