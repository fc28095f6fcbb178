"""Preparing a Simulation's workload: the controller's checks, the run's workload rewrites
(docs/fairness.md) and a controller's own ``prepare``.

Functions of the inputs only (no engine): ``Simulation.__init__`` (core.py) calls them in
order before it loads the workload into the engine.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..errors import SpecError

__all__ = ["check_controller", "rewrite_workload", "prepare_workload", "changed_ops"]


def check_controller(controller, workload) -> None:
    """SpecError unless ``controller`` has ``plan(intent, view)``, the workload is a trace
    (whose periods it plans for) and its granularity is one the control loop knows."""
    from ..controllers.loop import GRANULARITIES, controller_name
    from ..traces import Trace

    name = controller_name(controller)
    if not callable(getattr(controller, "plan", None)):
        raise SpecError(
            f"controller must be an rfabric.controllers.Controller (with plan(intent, view)), "
            f"got {type(controller).__name__}"
        )
    if not isinstance(workload, Trace):
        raise SpecError(
            f"controller {name}: a controller needs a trace workload (rfabric.traces.Trace) whose "
            f"periods it plans for, got {type(workload).__name__}"
        )
    granularity = getattr(controller, "granularity", "period")
    if granularity not in GRANULARITIES:
        raise SpecError(f"controller {name}: granularity must be one of {GRANULARITIES}, got {granularity!r}")


def rewrite_workload(topology, spec, controller, workload, rewrites):
    """Apply the run's workload rewrites (docs/fairness.md): ``"own"`` the controller's
    (``controller.rewrites()``), ``"none"`` none, or the given list, each at the fabric's
    locality; then tell the controller which ran (``controller.adopt(applied, spec)``).

    Returns ``(workload, applied, label)``: the rewritten workload, the
    ``rfabric.rewrites.Rewritten`` records in order, and per op the rewrite that produced it
    (None: no rewrite ran)."""
    from ..controllers.loop import controller_name
    from ..rewrites import apply_rewrites, locality, resolve_rewrites
    from ..traces import Trace

    mode = resolve_rewrites(rewrites)
    if mode == "none":
        rws = []
    elif mode == "own":
        rws = []
        ask = getattr(controller, "rewrites", None) if controller is not None else None
        if ask is not None:
            name = controller_name(controller)
            try:
                got = ask()
            except SpecError:
                raise
            except Exception as exc:
                raise SpecError(f"controller {name}: rewrites() raised {type(exc).__name__}: {exc}") from exc
            rws = resolve_rewrites(got if got is not None else [], f"controller {name}: rewrites()")
            if isinstance(rws, str):
                raise SpecError(f"controller {name}: rewrites() must return a list of Rewrite, got {got!r}")
    else:
        rws = mode
    if rws and not isinstance(workload, Trace):
        raise SpecError(
            f"rewrites: {', '.join(r.key() for r in rws)} rewrite a trace's ops; the workload is "
            f"{type(workload).__name__} (pass rewrites='none')"
        )
    applied, label = [], None
    if rws:
        workload, applied, label = apply_rewrites(workload, rws, locality(topology))
    adopt = getattr(controller, "adopt", None) if controller is not None else None
    if callable(adopt):
        try:
            adopt(applied, spec)
        except SpecError:
            raise
        except Exception as exc:
            raise SpecError(
                f"controller {controller_name(controller)}: adopt() raised {type(exc).__name__}: {exc}"
            ) from exc
    return workload, applied, label


def prepare_workload(controller, workload, spec, label):
    """The trace a controller's own ``prepare`` wants replayed (only when it overrides
    ``Controller.prepare``: the rewrites were applied already), checked.

    Returns ``(workload, label, private)``: the trace, the per-op rewrite labels with the
    ops ``prepare`` changed marked ``"<name>.prepare"``, and the private rewrites to report
    (``Results.run["rewrites"]``; empty when ``prepare`` changed nothing)."""
    from ..controllers.base import Controller
    from ..controllers.loop import controller_name
    from ..traces import Trace

    name = controller_name(controller)
    prepare = getattr(controller, "prepare", None)
    if prepare is None or getattr(prepare, "__func__", None) is Controller.prepare:
        return workload, label, []
    try:
        out = prepare(workload, spec)
    except SpecError:
        raise
    except Exception as exc:
        raise SpecError(f"controller {name}: prepare() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(out, Trace):
        raise SpecError(f"controller {name}: prepare() returned {type(out).__name__}, expected a Trace")
    if out is workload:
        return workload, label, []
    new_label = changed_ops(workload, out, f"{name}.prepare", label)
    changed = int(sum(v == f"{name}.prepare" for v in new_label))
    private = {
        "rewrite": f"{name}.prepare",
        "algorithm": "private to the controller (not offered to other fabrics)",
        "params": {},
        "ops_replaced": workload.num_ops - (out.num_ops - changed),
        "ops_produced": changed,
        "locality": None,
    }
    return out, new_label, [private]


def changed_ops(before, after, name: str, label) -> np.ndarray:
    """Per op of ``after``: ``name`` when no op of ``before`` has its stage, phase, kind,
    ranks, size and algorithm (counted as a multiset), else the label it had (or None)."""

    def rows(t):
        tb = t.table
        cols = [tb[c].cast("string").to_pylist() for c in ("stage", "phase", "kind", "algorithm")]
        return [
            (a, b, c, d, tuple(r), int(z))
            for a, b, c, d, r, z in zip(
                *cols, tb["ranks"].to_pylist(), tb["size_bytes"].to_pylist(), strict=True
            )
        ]

    old = rows(before)
    where: dict[tuple, list[int]] = {}
    for i, r in enumerate(old):
        where.setdefault(r, []).append(i)
    left = Counter(old)
    out = np.full(after.num_ops, None, dtype=object)
    for j, r in enumerate(rows(after)):
        if left[r] > 0:
            i = where[r][len(where[r]) - left[r]]
            left[r] -= 1
            out[j] = label[i] if label is not None else None
        else:
            out[j] = name
    return out
