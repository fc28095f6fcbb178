"""What a circuit controller sees and returns (DESIGN §6, paper §5.2-5.3).

The simulation runs in C++ until the next communication-period boundary (the first op of a
period not seen before becomes ready), then calls the controller once with an :class:`Intent`
(what the coming period will send) and a :class:`FabricView` (the optical layer now). The
controller returns a :class:`~rfabric.spec.CircuitTable` to switch to, or ``None`` to keep
the plan in force. The engine applies a returned plan at the boundary through the same path
as :meth:`rfabric.Simulation.apply_circuits`: circuits kept carry traffic throughout, removed
ones go dark at once, new ones carry light ``t_ocs`` later.

Subclass :class:`Controller` and implement :meth:`Controller.plan`::

    class KeepFirst(rf.controllers.Controller):
        def plan(self, intent, view):
            return None  # never change the fabric's initial plan
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..spec import CircuitTable, NetworkSpec


@dataclass(frozen=True)
class Intent:
    """The coming communication period, computed from the trace.

    Attributes
    ----------
    period : int
        The trace's ``period`` id.
    iteration : int
        Iteration of the period's first op.
    stage, phase : str
        Stage and phase of the period's first op (``train``, ``gen``, ``weight_sync``, ...).
    primitive : str
        The op kind that sends the most bytes in the period (``all_reduce``, ``all_to_all``,
        ``broadcast``, ...).
    ops : numpy.ndarray
        Row indices (int64) of the period's ops in the trace, in trace order.
    groups : tuple of numpy.ndarray
        The distinct rank lists (int64 GPU ids) of the period's ops.
    src, dst, bytes : numpy.ndarray
        Expected payload bytes per directed GPU pair over the whole period (int64; each
        ``(src, dst)`` at most once), as the collective executor will send them on the
        paths in force (a dry run).
    tuned : tuple
        The period's ops whose algorithm the executor picks on the paths at their start
        (all-reduces with algorithm ``auto`` over two or more servers: ring or tree, NCCL's
        tuner), whose flows a new plan may thus change. One entry per group of such ops with
        the same kind, size and ranks: a tuple of ``(src, dst, bytes)`` flows of the whole
        group, first the ones ``src``/``dst``/``bytes`` count (the dry run's choice), then
        one per algorithm the tuner may pick (ring, tree). Empty when there are none. A
        re-plan's intent (the period's ops not finished) leaves out the ops that have
        started: their algorithm is picked, and ``src``/``dst``/``bytes`` count its flows.
    job : str
        The job of the period's first op: the trace's ``job`` column (``rf.Job``; every op of
        a period is one job's), ``"job0"`` for a trace without one.
    """

    period: int
    iteration: int
    stage: str
    phase: str
    primitive: str
    ops: np.ndarray
    groups: tuple[np.ndarray, ...]
    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    tuned: tuple = ()
    job: str = "job0"

    def demand(self, gpus: int) -> np.ndarray:
        """Dense ``gpus x gpus`` matrix of expected bytes (int64), row = sender."""
        d = np.zeros((gpus, gpus), dtype=np.int64)
        np.add.at(d, (self.src, self.dst), self.bytes)
        return d


@dataclass(frozen=True)
class FabricView:
    """The optical layer at a period boundary.

    Attributes
    ----------
    spec : NetworkSpec
        The fabric (node, link and initial circuit tables).
    now_ps : int
        Simulated time of the boundary.
    plan : CircuitTable
        The circuits in place now (lit or still dark after a change).
    lit : numpy.ndarray
        bool per row of ``plan``: the circuit carries light now.
    ocs_ports : numpy.ndarray
        Link ids (int64) of every port of an optical device (links ending at an ``ocs`` or
        ``patch_panel`` node): the ports a plan may join.
    failed : numpy.ndarray
        bool per ``ocs_ports`` entry: the link is down now. Failed ports are masked: a plan
        that uses one is rejected.
    free : numpy.ndarray
        bool per ``ocs_ports`` entry: in no circuit of ``plan`` and not failed.
    slack_ps : int
        Time from ``now_ps`` until the period's first op starts sending (its compute gap):
        a plan applied now is fully lit in time when ``slack_ps >= t_ocs_ps``.
    t_ocs_ps : int
        Reconfiguration (dark) time of the optical devices.
    active_periods : tuple of int
        Periods with ops running or ready now (other stages share the fabric: a plan should
        keep the circuits they use).
    ahead : bool
        The intent's period is not ready yet: it is offered early, at another period's
        boundary, to a controller with ``lookahead = True``. ``slack_ps`` is then a lower
        bound on the time until its first op can start sending: the compute gaps along its
        dependency chains through unfinished ops, communication counted as taking no time.
        A plan applied now is lit before that op sends when ``slack_ps >= t_ocs_ps``; the
        periods in ``active_periods`` are still running on the plan in force.
    ended : tuple of int
        Non-empty on a *re-plan* call (a controller with ``replan = True``): the intent's
        period is running (``slack_ps`` is 0) and these periods just went idle, so the ports
        they held may be free; a plan applied now delays the traffic on the circuits it
        changes by ``t_ocs``.
    """

    spec: NetworkSpec
    now_ps: int
    plan: CircuitTable
    lit: np.ndarray
    ocs_ports: np.ndarray
    failed: np.ndarray
    free: np.ndarray
    slack_ps: int
    t_ocs_ps: int
    active_periods: tuple[int, ...] = field(default=())
    ahead: bool = False
    ended: tuple[int, ...] = field(default=())

    @property
    def failed_ports(self) -> np.ndarray:
        """Link ids of the failed (masked) OCS ports."""
        return self.ocs_ports[self.failed]

    @property
    def free_ports(self) -> np.ndarray:
        """Link ids of the OCS ports in no circuit and not failed."""
        return self.ocs_ports[self.free]


class Controller:
    """Base class of circuit controllers.

    Class attributes
    ----------------
    granularity : str
        ``"period"`` (default): :meth:`plan` is called when the first op of each new
        communication period becomes ready. ``"op"``: called before every op (fine-grained,
        per-collective reconfiguration).
    lookahead : bool
        With granularity ``"period"``: at each boundary, after the periods that became
        ready, :meth:`plan` is also called for every *upcoming* period (not ready yet, but
        one of its first ops waits only on periods already seen) with ``view.ahead`` True
        and ``view.slack_ps`` the lower bound of its start, so that a plan can be committed
        while the compute before it runs (default False: called at a period's own boundary
        only). The period's own boundary still calls :meth:`plan` when it comes.
    replan : bool
        With granularity ``"period"``: when periods go idle, :meth:`plan` is called again for
        the running periods :meth:`replan_periods` picks (seen before, not at their own
        boundary now) with ``view.ended`` those periods and the intent of the ops not finished
        yet, so that a plan made while they held ports can be revisited (default False).
    """

    granularity: str = "period"
    lookahead: bool = False
    replan: bool = False

    def rewrites(self) -> list:
        """The workload rewrites this controller plans for (:class:`rfabric.rewrites.Rewrite`:
        e.g. the weight-sync dissemination forest); none by default. They are not private:
        the simulation applies them with the fabric's locality (``rewrites="own"``, the
        default of ``rf.simulate``), records them in the results, and a sweep offers them to
        every fabric it compares (docs/fairness.md). The controller learns which ran from
        :meth:`adopt`."""
        return []

    def adopt(self, applied, spec: NetworkSpec) -> None:
        """Called once before the run with the :class:`rfabric.rewrites.Rewritten` of every
        rewrite the run applied (whoever asked for them; empty with ``rewrites="none"``), so
        that the controller can plan for what they produced. Does nothing by default."""

    def prepare(self, trace, spec: NetworkSpec):
        """The trace to replay: by default ``trace`` with this controller's :meth:`rewrites`
        applied at the locality of ``spec`` (:func:`rfabric.rewrites.locality`), after
        :meth:`adopt`. The simulation does this itself (and with the rewrites its
        ``rewrites=`` argument names); it calls ``prepare`` only when a subclass overrides
        it, and then records the result as a private rewrite that no other fabric is offered
        (``Results.run["rewrites"]``): put a rewrite in :meth:`rewrites` instead."""
        from ..rewrites import apply_rewrites, locality

        rws = self.rewrites()
        if not rws:
            self.adopt([], spec)
            return trace
        out, applied, _ = apply_rewrites(trace, rws, locality(spec))
        self.adopt(applied, spec)
        return out

    def replan_periods(self, ended: tuple, active: tuple) -> list:
        """With ``replan = True``: which of the running periods (``active``) to offer again now
        that the periods ``ended`` went idle (the loop offers those seen before and not at
        their own boundary now, their intent the ops not finished yet). All of them by
        default."""
        return list(active)

    def plan(self, intent: Intent, view: FabricView) -> CircuitTable | None:
        """The circuit plan for the coming period, or ``None`` to keep the current one."""
        raise NotImplementedError(f"{type(self).__name__} must implement plan(intent, view)")

    @property
    def name(self) -> str:
        return type(self).__name__
