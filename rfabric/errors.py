"""Exceptions rfabric raises: for user mistakes, and SimulationError for an engine fault.

Every user-reachable error in rfabric is one of these, and every message names the
offending value (file, row, column, node, link or field), so that a sweep over many
configurations can be debugged from its log alone.
"""

from __future__ import annotations

__all__ = [
    "LayoutFitError",
    "MissingDependency",
    "SimulationError",
    "SpecError",
    "SweepError",
    "TraceError",
    "read_toml",
]


class SpecError(ValueError):
    """A topology, flow set, unit string or engine configuration is inconsistent."""


class SweepError(SpecError):
    """A sweep cannot run as asked: its process pool's workers died (a script without the
    ``if __name__ == "__main__":`` guard, a killed or crashed worker), or a point's fabric
    built differently in a worker than in the sweep's process."""


class LayoutFitError(SpecError):
    """No parallel layout of the given GPUs fits the model in GPU memory (raised by
    `rfabric.traces.generate_rl` when it has to choose a layout); the message says what
    would fit."""


class TraceError(ValueError):
    """A communication trace (Arrow IPC or Parquet) is malformed."""


class SimulationError(RuntimeError):
    """A run ended in a state the engine should never reach (nothing left to happen, yet
    flows or ops unfinished with no failure, dark circuit or deadlock to explain it): an
    engine fault, raised rather than returning wrong numbers."""


class MissingDependency(ImportError):
    """An optional feature's package is not installed; the message names the extra that
    installs it (``pip install 'rfabric[lp]'``; docs/api-style.md lists the extras)."""


def read_toml(path, what: str) -> dict:
    """Parse TOML file ``path`` (a ``what``: "topology", "sweep config", "prices"); a missing
    or unreadable file, one that is not UTF-8 text (a binary file) or bad TOML raises
    SpecError naming the file."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such {what} file") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, not a {what} file") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{path}: not a {what} file: byte {exc.start} is not UTF-8 text (a binary file?)"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc})") from None
