"""Exceptions raised for user mistakes.

Every user-reachable error in rfabric is one of these, and every message names the
offending value (file, row, column, node, link or field), so that a sweep over many
configurations can be debugged from its log alone.
"""

from __future__ import annotations

__all__ = ["SpecError", "TraceError"]


class SpecError(ValueError):
    """A topology, flow set, unit string or engine configuration is inconsistent."""


class TraceError(ValueError):
    """A communication trace (Arrow IPC or Parquet) is malformed."""
