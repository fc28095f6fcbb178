"""Optional dependencies: imported where their feature runs, never at ``import rfabric``.

rfabric itself needs numpy and pyarrow only. Each optional feature names the extra that
installs what it needs (pyproject.toml ``[project.optional-dependencies]``, docs/api-style.md)
and, when that is missing, fails at the feature with `MissingDependency` saying which extra
to install, rather than at import or deep inside the feature.
"""

from __future__ import annotations

import importlib
import sys
import time

from .errors import MissingDependency

__all__ = ["EXTRAS", "MissingDependency", "require", "progress_bar"]

#: extra -> (pip distributions it installs, the features that need it). pyproject.toml lists
#: the same distributions with their version floors; tests/test_optional.py checks the two agree.
EXTRAS = {
    "plot": (("matplotlib",), "Results.plot, rf.pareto.plot"),
    "lp": (("scipy",), "rf.bounds (max-flow cuts and the max-concurrent-flow LP)"),
    "chakra": (("protobuf",), "rf.traces.importers.chakra (MLCommons Chakra ET files)"),
    "ray": (("ray",), "rf.sweep(executor='ray')"),
    "pandas": (("pandas",), "to_pandas() on any result table"),
    "graph": (("networkx",), "NetworkSpec.to_networkx"),
    "progress": (("tqdm",), "rf.sweep's tqdm progress bar (without it: a plain one)"),
    "report": (("plotly",), "rf.report, rfabric report (the sweep report page)"),
    # not imported by rfabric: the documentation site's build (mkdocs.yml, .ci/docs)
    "docs": (("mkdocs-material", "mkdocstrings", "mkdocstrings-python"), "mkdocs build (the docs site)"),
}


def require(module: str, extra: str, feature: str):
    """Import and return ``module`` for ``feature``, or raise `MissingDependency` naming
    ``extra``: ``require("scipy.optimize", "lp", "rf.bounds")``."""
    if extra not in EXTRAS:
        raise ValueError(f"rfabric._optional: unknown extra {extra!r} (known: {', '.join(EXTRAS)})")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingDependency(
            f"{feature} needs {top}, which is not installed: pip install 'rfabric[{extra}]'"
            f" (or {' '.join(EXTRAS[extra][0])})"
        ) from exc


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class _PlainBar:
    """What rf.sweep uses of tqdm (update, set_postfix_str, close), as one line redrawn in
    place (``\\r``): for a terminal."""

    def __init__(self, total: int, initial: int = 0, desc: str = "", unit: str = "it", file=None):
        self.total, self.n, self.desc, self.unit = total, initial, desc, unit
        self._file = sys.stderr if file is None else file
        self._initial, self._t0, self._postfix = initial, time.perf_counter(), ""
        self._draw()

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self._postfix = text
        if refresh:
            self._draw()

    def update(self, n: int = 1) -> None:
        self.n += n
        self._draw()

    def close(self) -> None:
        self._file.write("\n")
        self._file.flush()

    def _status(self) -> str:
        elapsed = time.perf_counter() - self._t0
        done = self.n - self._initial
        eta = (
            f"  eta {elapsed / done * (self.total - self.n):.0f} s"
            if done > 0 and self.n < self.total
            else ""
        )
        tail = f"  {self._postfix}" if self._postfix else ""
        return f"{self.n}/{self.total} {self.unit}  {elapsed:.0f} s{eta}{tail}"

    def _draw(self) -> None:
        width = 30
        filled = int(width * self.n / self.total) if self.total else width
        self._file.write(f"\r{self.desc}: [{'#' * filled}{'.' * (width - filled)}] {self._status()} ")
        self._file.flush()


class _LogBar(_PlainBar):
    """The bar for a log (stderr not a terminal): whole lines, one at the start, one each time
    another tenth of the total is done, so at most 11 lines however many updates, and none
    redrawn with ``\\r``."""

    STEPS = 10

    def __init__(self, total: int, initial: int = 0, desc: str = "", unit: str = "it", file=None):
        self._shown = None
        super().__init__(total, initial, desc, unit, file)

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self._postfix = text  # shown with the next line

    def close(self) -> None:
        self._file.flush()

    def _draw(self) -> None:
        step = self.STEPS * self.n // self.total if self.total else self.STEPS
        if step == self._shown:
            return
        self._shown = step
        pct = 100 * self.n // self.total if self.total else 100
        self._file.write(f"{self.desc}: {self._status()}  ({pct}%)\n")
        self._file.flush()


def progress_bar(total: int, initial: int = 0, desc: str = "", unit: str = "it", file=None):
    """A progress bar on ``file`` (default stderr) with tqdm's methods (update,
    set_postfix_str, close). On a terminal: tqdm's when tqdm is installed
    (``rfabric[progress]``), else a plain one-line bar redrawn in place. Not on a terminal (a
    log file, a pipe, CI): whole lines, one per tenth of the total (`_LogBar`), so a log
    gets at most 11 lines, not one per update."""
    file = sys.stderr if file is None else file
    if not _is_terminal(file):
        return _LogBar(total, initial, desc, unit, file)
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainBar(total, initial, desc, unit, file)
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=file)
