"""What the stage-aware controller remembers: its decision log and the templates of Phase 1
(paper §5.3): which ToRs and PoDs an intent's traffic uses, cached per intent key."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Intent

__all__ = ["Decision", "Template", "template_key"]


@dataclass(frozen=True)
class Decision:
    """One entry of :attr:`StageAwareController.log`.

    Attributes
    ----------
    period : int
        The intent's period.
    stage : str
        The intent's stage.
    action : str
        ``"cached template"`` (first sight of the intent's key, Phase 1 of §5.3; followed by
        the entry of what was done with it), ``"commit"`` (a plan was returned),
        ``"keep: slack"`` (slack < t_ocs), ``"keep: no gain"`` (the candidate is not
        predicted faster than the plan in force), ``"keep: infeasible"`` (Core-Agg coupling or a
        device's ports failed the check), ``"keep: would strand"`` (the candidate cuts a route a
        running or the coming period needs), ``"keep: deployment"`` (gen: the deployment's plan
        is still in place), ``"keep: no demand"`` (nothing of the period crosses the OCS
        layer) or ``"keep: same broadcast"`` (weight sync, per-op calls inside one period);
        before the run, ``"scheme: forest"`` or ``"scheme: trace's own"`` per weight sync
        (which one the forest rewrite chose, :func:`rfabric.controllers.waves.scheme_choices`).
    circuits : int
        Rows of the returned plan (``commit``), else of the plan kept.
    detail : str
        Why, for the ``keep`` actions; what changed, for ``commit``.
    job : str
        The intent's job (:attr:`Intent.job`): whose period triggered the call.
    """

    period: int
    stage: str
    action: str
    circuits: int
    detail: str = ""
    job: str = "job0"


@dataclass
class Template:
    """What Phase 1 caches per intent key: which ToRs and PoDs the intent's traffic uses
    (the template's endpoints) and how its GPU pairs map onto ToR pairs."""

    key: tuple
    src: np.ndarray
    dst: np.ndarray
    ts: np.ndarray
    td: np.ndarray
    net: np.ndarray
    tors: frozenset
    pods: frozenset
    pairs: np.ndarray  # distinct ToR pairs of its network traffic, as ``ts * num_tors + td``


def template_key(intent: Intent) -> tuple:
    """``(stage, phase, primitive, groups)``, groups as the bytes of their sizes and of
    their ranks end to end (exact, like a tuple of rank tuples, but built in numpy: a
    1024-GPU EP64 dispatch has 64 512 two-rank groups, whose tuples took 130 ms a call)."""
    gs = intent.groups
    sizes = np.fromiter(map(len, gs), dtype=np.int64, count=len(gs))
    ranks = np.concatenate(gs).astype(np.int64) if len(gs) else np.zeros(0, dtype=np.int64)
    return (intent.stage, intent.phase, intent.primitive, (sizes.tobytes(), ranks.tobytes()))
