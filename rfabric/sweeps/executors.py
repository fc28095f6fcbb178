"""Where a sweep's points run: ``"serial"`` (this process), ``"local"`` (a spawn process pool)
or ``"ray"`` (Ray tasks); each calls ``on_row`` with every finished point's row.
"""

from __future__ import annotations

import os
import sys
import tempfile
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from ..errors import SpecError, SweepError
from .memory import workers_that_fit
from .rows import _run_point

EXECUTORS = ("local", "serial", "ray")


def _check_picklable(points, executor: str) -> None:
    """Processes and Ray tasks receive points by pickling: name what cannot travel."""
    import pickle

    for p in points:
        for what, obj in (("fabric", p.fabric), ("workload", p.workload), ("controller", p.controller)):
            try:
                pickle.dumps(obj)
            except Exception as exc:
                raise SpecError(
                    f"sweep point {p.key}: its {what} cannot be sent to executor={executor!r} workers ({exc}); "
                    "define factories at module level (not lambdas or local functions), or use executor='serial'"
                ) from None


_GUARD = (
    'put the code that calls rf.sweep under `if __name__ == "__main__":` (executor="local" starts '
    "its workers with spawn, and each worker imports the main script again; unguarded, the script's "
    'sweep runs again inside every worker), or run the sweep with executor="serial"'
)


def _main_script() -> str | None:
    main = sys.modules.get("__main__")
    return getattr(main, "__file__", None)


def _in_spawned_worker(where: str) -> None:
    """A process-pool worker that is still importing the main script (spawn) and reaches a
    sweep: the script has no main guard. Say so here, where the worker's traceback shows it."""
    import multiprocessing as mp

    if getattr(mp.current_process(), "_inheriting", False):
        raise SweepError(
            f"{where}: rf.sweep was called while a worker process imported the main script: {_GUARD}"
        )


def _run_serial(points, on_row):
    for p in points:
        on_row(_run_point(p))


def _run_local(points, on_row, workers: int | None, max_memory: int | None = None):
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool

    n = max(1, min(workers or os.cpu_count() or 1, len(points)))
    # bounded points: no more at once than the machine's free memory holds, each in a fresh
    # process (its peak is its own, and what it allocated goes back to the system after it)
    n = workers_that_fit(n, max_memory)
    try:
        _pool(points, on_row, n, mp.get_context("spawn"), 1 if max_memory is not None else None)
    except BrokenProcessPool as exc:
        raise _broken_pool(exc) from None


def _broken_pool(exc) -> SweepError:
    started = getattr(exc, "_rf_rows", 0)
    script = _main_script()
    if started == 0 and script is not None:
        return SweepError(
            f"sweep: the local executor's worker processes died before finishing any point; with a "
            f"script ({script}), the usual cause is a missing main guard: {_GUARD}. (Otherwise a "
            "worker was killed, e.g. out of memory: executor='serial' runs the points in this process.)"
        )
    return SweepError(
        f"sweep: a worker process of the local executor died ({exc}): killed (out of memory?) or "
        f"crashed; {started} point(s) had finished (with out=, saved: a rerun resumes from them); "
        "executor='serial' runs the points in this process and shows the error"
    )


def _pool(points, on_row, n: int, ctx, tasks_per_child: int | None = None) -> None:
    from concurrent.futures.process import BrokenProcessPool

    error = None
    finished_rows = 0
    # spawn, not fork: workers start from a clean interpreter (no copied threads or locks of
    # the parent, e.g. the progress bar's or pyarrow's), and the compiled engine loads afresh
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx, max_tasks_per_child=tasks_per_child) as pool:
        pending = {pool.submit(_run_point, p) for p in points}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    if f.cancelled():
                        continue
                    exc = f.exception()
                    if exc is None:
                        on_row(f.result())  # rows of points that finish are kept, even after a failure
                        finished_rows += 1
                    elif isinstance(exc, BrokenProcessPool):
                        exc._rf_rows = finished_rows
                        raise exc
                    elif error is None:
                        error = exc
                        for other in pending:  # stop what has not started; let running points end
                            other.cancel()
        except BaseException:  # KeyboardInterrupt: stop what has not started
            for f in pending:
                f.cancel()
            raise
    if error is not None:
        raise error


def _run_ray(points, on_row, address: str | None, workers: int | None, max_memory: int | None = None):
    from .._optional import require

    ray = require("ray", "ray", "rf.sweep(executor='ray')")
    started = not ray.is_initialized()
    if started:
        kwargs = {"address": address} if address else {"num_cpus": workers or os.cpu_count() or 1}
        # Ray puts the driver's working directory first on its workers' sys.path: run from a
        # source checkout, that directory's rfabric/ (no compiled engine when rfabric was
        # pip-installed, not installed in place) would shadow the installed package.
        here = os.getcwd()
        os.chdir(tempfile.gettempdir())
        try:
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
        finally:
            os.chdir(here)
    # a bounded point also reserves its bound from Ray's memory resource, so a node runs no more
    # of them at once than its memory holds
    resources = {"memory": max_memory} if max_memory is not None else {}
    task = ray.remote(num_cpus=1, max_retries=0, **resources)(_run_point)
    pending = [task.remote(p) for p in points]
    try:
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                try:
                    on_row(ray.get(ref))
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.as_instanceof_cause()
                    raise (cause if isinstance(cause, (SpecError, SweepError)) else exc) from None
    finally:
        for ref in pending:
            ray.cancel(ref)
        if started:  # a Ray the caller started (ray.init before the sweep) stays up
            ray.shutdown()
