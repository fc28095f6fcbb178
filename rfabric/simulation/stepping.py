"""Running a Simulation in epochs: ``run(until=..., max_events=..., progress=...)``, the
engine calls in between (streaming rows out, sampling) and the control loop's boundaries.

``Stepping`` is a mixin of ``Simulation`` (core.py), which sets the state it uses.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .._optional import _is_terminal
from ..units import format_time, parse_time
from ..validators import boolean, integer

__all__ = ["Stepping"]

#: events per engine call while a progress bar is shown (the bar is redrawn between calls)
PROGRESS_CHUNK_EVENTS = 2_000_000


class Stepping:
    """``run`` and what it drives (methods of ``Simulation``)."""

    def run(self, until=None, *, progress: bool = False, max_events: int = 0):
        """Advance to simulated time ``until`` (unit string or ps), or until idle if None.

        ``max_events`` (0: no limit) stops after at most that many events; with a controller, the engine also stops at
        every boundary on the way, the controller plans, and the run goes on: ``max_events``
        counts events across those stops. ``progress`` draws a bar on stderr (flows or ops
        done, simulated time, event rate) and honours ``until`` and ``max_events`` alike.
        Returns the Simulation (``sim.run(...).results()``)."""
        limit = parse_time(until, name="until") if until is not None else np.iinfo(np.int64).max
        max_events = integer(max_events, "run: max_events", lo=0)
        progress = boolean(progress, "run: progress")
        t0 = time.perf_counter()
        control0 = self._loop.wall_s if self._loop else 0.0
        try:
            if progress:
                self._run_with_progress(limit, max_events)
            else:
                left = max_events  # 0: no limit; with a controller, counted across boundaries
                while True:
                    n = self._run_engine(limit, left)
                    if not self._boundary():
                        break
                    if left:
                        left -= n
                        if left <= 0:
                            break
        finally:
            # engine time only: the controller's own time is Results.run["controller_wall_s"]
            control = (self._loop.wall_s if self._loop else 0.0) - control0
            self.wall_s += time.perf_counter() - t0 - control
            self._take_samples()
        return self

    def _run_engine(self, limit: int, max_events: int) -> int:
        """engine.run(limit, max_events); when streaming flows or samples, in chunks, writing
        out the finished flows' rows and the samples between them. Returns the events
        processed."""
        if self._flows_dir is None and self._samples_dir is None:
            return self._engine.run(limit, max_events)
        total = 0
        while True:
            step = self._STREAM_CHUNK_EVENTS
            if max_events:
                step = min(step, max_events - total)
            n = self._engine.run(limit, step)
            total += n
            if self._flows_dir is not None and self._engine.flow_log_rows >= self.FLOW_BATCH_ROWS:
                self._write_flow_part()
            self._take_samples()
            if n < step or (max_events and total >= max_events):
                return total
            if self._engine.idle or self._engine.now >= limit:
                return total
            if self._loop is not None and any(map(len, self._engine.boundary().values())):
                return total

    def _boundary(self) -> bool:
        """At a pending control-loop boundary: call the controller, apply its plan, let the
        engine go on and return True. Otherwise False. On error the boundary stays pending."""
        if self._loop is None:
            return False
        b = self._engine.boundary()
        if not len(b["op"]) and not len(b["ended"]):
            return False
        self._loop.handle(b)
        self._engine.resume()
        return True

    def _run_with_progress(self, limit: int, max_events: int = 0) -> None:
        total = len(self.flows) if self.flows is not None else self.trace.num_ops
        unit = "flows" if self.flows is not None else "ops"
        chunk = PROGRESS_CHUNK_EVENTS
        ran = 0
        t0 = time.perf_counter()
        log, shown = not _is_terminal(sys.stderr), None
        while True:
            step = min(chunk, max_events - ran) if max_events else chunk
            n = self._run_engine(limit, step)
            ran += n
            elapsed = time.perf_counter() - t0
            ev = self._engine.events_processed
            done = self._engine.flows_done if self.flows is not None else self._engine.ops_done
            width = 30
            filled = int(width * done / total) if total else width
            status = (
                f"{unit} {done}/{total}  sim {format_time(self._engine.now)}  events {ev / 1e6:.1f}M  "
                f"{ev / max(elapsed, 1e-9) / 1e6:.1f} Mev/s"
            )
            if log:  # a log, not a terminal: a whole line per tenth done, not one per chunk
                tenth = 10 * done // total if total else 10
                if tenth != shown:
                    shown = tenth
                    sys.stderr.write(f"run: {status}\n")
            else:
                sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {status} ")
            sys.stderr.flush()
            at_boundary = self._boundary()
            if max_events and ran >= max_events:
                break
            if at_boundary:
                continue
            if n < step or self._engine.idle or self._engine.now >= limit:
                break
        if not log:
            sys.stderr.write("\n")
