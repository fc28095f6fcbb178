"""MixNetController: MixNet's regional OCS reconfiguration, driven by the period's demand."""

from __future__ import annotations

import numpy as np

from ..errors import SpecError
from ..spec import CircuitTable, NetworkSpec
from .base import Controller, FabricView, Intent
from .regional import Regions, greedy_circuits
from .templates import Decision

__all__ = ["MixNetController"]


class MixNetController(Controller):
    """MixNet's own regional reconfiguration (Liao et al., SIGCOMM'25; paper §7.2).

    At each period boundary:

    1. **Regional demand.** The intent's GPU-pair bytes summed per (sender server,
       receiver server) pair inside each region (the servers whose OCS NICs are on one
       regional OCS). Traffic between regions, or inside a server, never uses a regional
       OCS and is left to the packet fabric.
    2. **Scope.** Regions with no such demand keep their rows of ``view.plan`` as they
       are (minus rows on failed ports): another stage may be using them.
    3. **Greedy (MixNet's topology manager).** In each region with demand,
       :func:`rfabric.controllers.regional.greedy_circuits`, the same greedy
       :meth:`rfabric.topologies.MixNet.plan_for_demand` uses: one circuit at a time to the
       server pair with the most demand per circuit it already has, while both servers
       have a free OCS NIC. A server's budget is its OCS NICs that work (failed ports are
       masked); each circuit takes the server's next working NIC in GPU order. Pairs with
       no demand get no circuit, unused NICs stay dark (as in MixNet).
    4. **Safe window.** As the stage-aware controller: nothing is changed unless
       ``view.slack_ps >= view.t_ocs_ps`` (``None``: keep the plan). MixNet has no stage
       granularity of its own: it re-plans at every call (``granularity`` "period" by
       default, "op" for per-collective reconfiguration).
    5. **Look-ahead** (``lookahead=True``, the default, as the stage-aware controller):
       an upcoming period is planned while the compute before it runs, unless a region it
       touches carries an active period's regional traffic (``"keep: busy"``); at its own
       boundary a period whose circuits were committed ahead and are still in place is
       kept (``"keep: planned ahead"``).

    Attributes
    ----------
    log : list of Decision
        One entry per call: ``commit``, ``keep: slack`` or ``keep: no demand``.
    """

    def __init__(self, granularity: str = "period", *, lookahead: bool = True):
        if granularity not in ("period", "op"):
            raise SpecError(f"MixNetController: granularity must be 'period' or 'op', got {granularity!r}")
        self.granularity = granularity
        self.lookahead = bool(lookahead)
        self.log: list[Decision] = []
        self._regions: dict[int, Regions] = {}
        self._period_regions: dict[int, frozenset] = {}  # regions of each seen period's traffic
        self._ahead: dict[int, set] = {}  # period -> its rows committed ahead
        self._ahead_kept: dict[int, str] = {}

    def _keep(self, intent, view, action, detail=""):
        if view.ahead:  # offered at every stop: log each outcome once
            if self._ahead_kept.get(intent.period) == action:
                return None
            self._ahead_kept[intent.period] = action
        self.log.append(Decision(intent.period, intent.stage, action, len(view.plan), detail))
        return None

    def regions(self, spec: NetworkSpec) -> Regions:
        reg = self._regions.get(id(spec))
        if reg is None:
            reg = Regions(spec, self.name)
            self._regions[id(spec)] = reg
        return reg

    def plan(self, intent: Intent, view: FabricView) -> CircuitTable | None:
        reg = self.regions(view.spec)
        ss = reg.gpu_server[np.asarray(intent.src, dtype=np.int64)]
        sd = reg.gpu_server[np.asarray(intent.dst, dtype=np.int64)]
        rs = np.array([reg.region_of_server.get(s, -1) for s in ss.tolist()], dtype=np.int64)
        rd = np.array([reg.region_of_server.get(s, -1) for s in sd.tolist()], dtype=np.int64)
        m = (ss != sd) & (rs == rd) & (rs >= 0) & (np.asarray(intent.bytes) > 0)
        touched = sorted(set(rs[m].tolist()))
        if not view.ahead:
            self._period_regions[intent.period] = frozenset(touched)
        if not touched:
            return self._keep(intent, view, "keep: no demand")
        if view.ahead:
            busy = set()
            for p in view.active_periods:
                busy |= self._period_regions.get(int(p), frozenset())
            clash = sorted(busy & set(touched))
            if clash:
                return self._keep(intent, view, "keep: busy", f"regions {clash} carry running traffic")
        else:
            done = self._ahead.get(intent.period)
            if done and done <= _rows(view.plan):
                return self._keep(intent, view, "keep: planned ahead", "its circuits are in place")
        if view.slack_ps < view.t_ocs_ps:
            return self._keep(
                intent, view, "keep: slack", f"slack {view.slack_ps} ps < t_ocs {view.t_ocs_ps} ps"
            )
        failed = set(view.failed_ports.tolist())
        devs = {reg.devices[r] for r in touched}
        plan = view.plan
        keep = [
            (o, a, b)
            for o, a, b in zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True)
            if o not in devs and a not in failed and b not in failed
        ]
        new = []
        for r in touched:
            members = reg.servers[r]
            index = {s: i for i, s in enumerate(members.tolist())}
            k = len(members)
            w = np.zeros((k, k))
            sel = m & (rs == r)
            np.add.at(
                w,
                (
                    np.array([index[s] for s in ss[sel].tolist()], dtype=np.int64),
                    np.array([index[s] for s in sd[sel].tolist()], dtype=np.int64),
                ),
                np.asarray(intent.bytes, dtype=np.float64)[sel],
            )
            ports = [[p for p in reg.ports[r][i] if p not in failed] for i in range(k)]
            for i, j in greedy_circuits(w, [len(p) for p in ports]):
                new.append((reg.devices[r], ports[i].pop(0), ports[j].pop(0)))
        rows = keep + new
        o, a, b = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)) if rows else ([], [], [])
        out = CircuitTable.build(o, a, b) if rows else CircuitTable.empty()
        view.spec.validate_circuits(out, where=f"{self.name}, period {intent.period}")
        if view.ahead:
            if set(new) <= _rows(view.plan):  # offered again after its plan was committed
                return self._keep(intent, view, "keep: planned ahead", "its circuits are in place")
            self._ahead[intent.period] = set(new)
        self.log.append(
            Decision(
                intent.period,
                intent.stage,
                "commit",
                len(out),
                f"regions {touched}: {len(new)} circuits, {len(keep)} rows kept",
            )
        )
        return out


def _rows(plan: CircuitTable) -> set:
    return set(zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True))
