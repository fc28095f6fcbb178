"""Failures and circuits of a running Simulation: link states, circuit plans and the mask of
failed OCS ports (the part of :class:`rfabric.Simulation` that changes the fabric).

``CircuitsAndFailures`` is a mixin of ``Simulation`` (rfabric/simulation/core.py), which
sets the state it uses: ``spec``, ``config``, ``t_ocs_ps``, the engine handle and the link
changes and plans scheduled so far.
"""

from __future__ import annotations

import numpy as np

from ..errors import SpecError
from ..spec import CircuitTable
from ..units import parse_time
from ..validators import boolean, integer

__all__ = ["CircuitsAndFailures"]


class CircuitsAndFailures:
    """Link failures and circuit plans (methods of :class:`rfabric.Simulation`)."""

    def set_link_state(self, link: int, at, up: bool) -> None:
        """Take link row ``link`` down (``up=False``) or up at simulated time ``at``.

        Routing avoids a down link from that instant, for flows starting at ``at`` too
        (unless the run already ran that instant's events: ``run(until=at)`` does); frames
        on it are lost (lossy) or re-forwarded (lossless). A link that ends at an optical
        device is an OCS port: it is masked from circuit plans applied afterwards.
        """
        link = integer(link, "link")
        if not 0 <= link < self.spec.num_links:
            raise SpecError(f"link {link} does not exist ({self.spec.name} has {self.spec.num_links} links)")
        up = boolean(up, "set_link_state: up")
        at_ps = parse_time(at, name="at")
        self._engine.set_link_state(link, at_ps, up)
        self._link_changes.setdefault(link, []).append((at_ps, up))
        self._link_change_log.append((at_ps, link, up))

    def _link_down_at(self, link: int, t: int) -> bool:
        """Whether link row ``link`` is down at time ``t`` by the changes scheduled so far (the
        latest change at or before ``t`` wins; equal times go by call order, as in the engine)."""
        state = True
        for at_ps, up in sorted(self._link_changes.get(link, ()), key=lambda c: c[0]):
            if at_ps > t:
                break
            state = up
        return not state

    def down_links(self, at=None) -> list[int]:
        """The link rows down at simulated time ``at`` (default: now) by the state changes
        scheduled so far (``set_link_state``, ``fail_link``, ``fail_nic``), in the order they
        were first changed. Plans may not use an OCS port on one of them."""
        t = int(self._engine.now) if at is None else parse_time(at, name="at")
        return self._down_at(t)

    def _down_at(self, t: int) -> list[int]:
        return [link for link in self._link_changes if self._link_down_at(link, t)]

    def fail_link(self, link: int, at=0) -> None:
        """Take link row ``link`` down at time ``at`` (both directions). Find rows with
        ``spec.nic_link(gpu)``, ``spec.link_between(a, b)`` or ``spec.links_of(node)``."""
        self.set_link_state(link, at, False)

    def fail_nic(self, gpu: int, at=0) -> None:
        """Fail GPU ``gpu``'s NIC link at ``at``: its traffic then crosses the NVSwitch to
        another GPU of the server and leaves (and arrives) through that GPU's NIC."""
        self.fail_link(self.spec.nic_link(gpu), at)

    def apply_circuits(self, plan, at, t_ocs=None) -> int:
        """Switch to circuit plan ``plan`` (a CircuitTable) at simulated time ``at``.

        Circuits in the current plan but not in ``plan`` go dark at ``at``; circuits new in
        ``plan`` carry light from ``at + t_ocs`` (default: the config's ``t_ocs``); circuits in
        both keep carrying traffic throughout (non-blocking reconfiguration, paper §5.4).
        Frames on a circuit when it goes dark are lost on a lossy fabric and held back and
        re-forwarded by the sender on a lossless one. Returns the plan id.
        """
        if not isinstance(plan, CircuitTable):
            raise SpecError(f"plan must be a CircuitTable, got {type(plan).__name__}")
        at_ps = parse_time(at, name="at")
        self._check_plan(plan, at_ps, "apply_circuits")
        dark = parse_time(t_ocs if t_ocs is not None else self.config.t_ocs, name="t_ocs")
        self._engine.schedule_plan(
            at_ps,
            plan.ocs.astype(np.uint32),
            plan.a.astype(np.uint32),
            plan.b.astype(np.uint32),
            dark,
        )
        return self._new_plan_id(-1)

    def check_plan(self, plan, at=None, *, where: str = "check_plan") -> None:
        """Raise SpecError (naming ``where`` and the first bad row) unless ``plan`` is a valid
        circuit plan for this fabric that uses no OCS port down at time ``at`` (default: now;
        failed ports are masked from plans). Changes nothing."""
        at_ps = int(self._engine.now) if at is None else parse_time(at, name="at")
        self._check_plan(plan, at_ps, where)

    def _check_plan(self, plan, at_ps: int, where: str) -> None:
        self.spec.validate_circuits(plan, where=where)
        down = self._down_at(at_ps)
        bad = np.isin(plan.a, down) | np.isin(plan.b, down)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            masked = sorted(set(plan.a[bad].tolist() + plan.b[bad].tolist()) & set(down))
            raise SpecError(
                f"{where}: circuit {i} (device {plan.ocs[i]}, links {plan.a[i]}-{plan.b[i]}) uses failed "
                f"OCS port(s) on link(s) {masked} at {at_ps} ps; failed ports are masked from later plans"
            )

    def _new_plan_id(self, period: int, job: str | None = None) -> int:
        self._plans += 1
        self._plan_periods.append(period)
        self._plan_jobs.append(job)
        return self._plans - 1

    def apply_circuits_now(
        self, plan, *, period: int = -1, job: str | None = None, where: str = "apply_circuits_now"
    ) -> int:
        """Check ``plan`` as :meth:`check_plan` does and switch to it at once, with the
        config's ``t_ocs``, before any event already queued for this instant (the control
        loop's path, between ``run`` epochs or at a boundary). ``period``: the trace period it
        was planned for (``Results.circuits["period"]``; -1: none); ``job``: that period's job
        (``Results.circuits["job"]``; None: none). On error nothing changes. Returns the plan
        id."""
        if not isinstance(plan, CircuitTable):
            raise SpecError(f"{where}: plan must be a CircuitTable, got {type(plan).__name__}")
        self._check_plan(plan, int(self._engine.now), where)
        try:
            self._engine.apply_plan(
                plan.ocs.astype(np.uint32), plan.a.astype(np.uint32), plan.b.astype(np.uint32), self.t_ocs_ps
            )
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
        return self._new_plan_id(int(period), None if job is None else str(job))

    def current_circuits(self) -> CircuitTable:
        """The circuits in place now (lit or dark) as a CircuitTable."""
        flat = self._engine.current_circuits().reshape(-1, 3).astype(np.int64)
        return CircuitTable.build(flat[:, 0], flat[:, 1], flat[:, 2])

    def circuits_lit_at(self) -> np.ndarray:
        """Per circuit of ``current_circuits()`` (same rows): when it carries light (ps; at or
        before now: lit)."""
        return np.asarray(self._engine.current_circuits_lit_at(), dtype=np.int64)
