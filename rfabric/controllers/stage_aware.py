"""StageAwareController: RFabric's control plane (paper §5.2-5.3, appendices D and E).

Per communication period it turns the intent's GPU-pair demand into ToR-level demand per PoD
and PoD-level demand across the core, allocates circuits with the pair-bottleneck greedy
(:func:`~rfabric.controllers.allocate_circuits`), checks Core-Agg coupling, maps the
multiplicities to concrete OCS port pairs and commits only in a window whose slack covers
``t_ocs``. The weight sync is replayed over the appendix-E dissemination forest, a workload
rewrite (:class:`rfabric.rewrites.WeightSyncForest`) the controller asks for and plans for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from ..spec import CircuitTable, NetworkSpec
from .allocate import allocate_circuits
from .base import Controller, FabricView, Intent
from .layout import RFabricLayout

__all__ = ["Decision", "StageAwareController"]


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
        layer) or ``"keep: same broadcast"`` (weight sync, per-op calls inside one period).
    circuits : int
        Rows of the returned plan (``commit``), else of the plan kept.
    detail : str
        Why, for the ``keep`` actions; what changed, for ``commit``.
    """

    period: int
    stage: str
    action: str
    circuits: int
    detail: str = ""


@dataclass
class _Template:
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


class StageAwareController(Controller):
    """RFabric's stage-aware, slack-aware circuit controller (OrchestrRL §5.2-5.3, App. D-E).

    What it does at each call (``plan(intent, view)``)
    ------------------------------------------------
    1. **Template (Phase 1, §5.3).** The intent's key is ``(stage, phase, primitive,
       groups)`` where ``groups`` is the tuple of the intent's rank lists (membership, not
       only sizes: which ToRs and PoDs a template spans depends on which GPUs are in it).
       On first sight the controller caches the template: the ToR pair of every GPU pair of
       the intent (:meth:`RFabricLayout.tor_pairs`: with PXN the sender's ToR on the
       receiver's rail), the ToRs and PoDs the traffic uses, and logs ``"cached template"``.
       Later intents with the same key reuse it and only bring new byte counts (Phase 2).
    2. **Stage granularity (§5.2).**

       * ``train`` and any stage not named below (``response_stream``, user stages): a plan
         at every call where the slack allows, i.e. at each collective-free boundary the
         trace marks as a period (fwd/bwd vs grad_sync), or before every op with
         ``granularity="op"`` (fine-grained reconfiguration).
       * ``gen``: once per deployment interval. A gen intent whose key was committed before
         and whose circuits are all still in place is kept (``"keep: deployment"``); a new
         key (a parallelism/layout change) or circuits torn down since (another stage
         re-planned those PoDs) gets a new plan. With ``granularity="op"`` decode ops thus
         do not re-plan.
       * ``weight_sync``: re-planned at each weight-sync period (each wave of the forest
         and its fan-out is a period), right before its sends; with ``granularity="op"``
         only at the first op of each such period (one attempt: a period whose first op
         found no safe window keeps the plan for its other ops too).
    3. **Safe window (§5.3).** If ``view.slack_ps < view.t_ocs_ps`` nothing is computed:
       ``None`` (keep the current plan), ``"keep: slack"``. The plan is not deferred: the
       next call re-plans from the demand of its own period. One exception, the forest's
       own schedule: Phase A waves after the first and Phase B of a forest commit whatever
       the slack, because appendix E's waves replace each other's circuits by design
       (``T_A = sum_t T_A^(t)``), so each waits for its light; the first period of a forest
       obeys the safe window like any other.

       **Look-ahead (the safe window found early).** In a generated RL iteration every
       period whose traffic leaves its ToRs starts the moment the one before it ends (no
       compute gap before grad_sync, response_stream or weight_sync): at its own boundary
       the slack is 0 and no ``t_ocs > 0`` fits. With ``lookahead=True`` (default) the loop
       also offers each upcoming period while the compute before it runs (``view.ahead``,
       ``view.slack_ps`` a lower bound of its start; see :class:`~rfabric.controllers.Controller`).
       Such a call is planned as at its own boundary, behind one more rule: the plan in
       force carries the running periods' traffic, so a period whose PoDs meet the PoDs of
       an active period's network traffic (or of another period committed ahead at the same
       instant) is not planned ahead (``"keep: busy"``). A plan committed ahead is kept at
       the period's own boundary while its rows are in place (``"keep: planned ahead"``);
       if another period re-planned those PoDs meanwhile, the own boundary plans as usual.
    4. **Scope.** Only the PoDs the intent's traffic uses are re-planned. Rows of
       ``view.plan`` kept as they are: every row in another PoD's OCS-Agg, OCS-Core rows
       between two such PoDs, and circuits still used by another active period
       (``view.active_periods``, whose ToRs the controller remembers from their intents):
       ToR-ToR circuits between two ToRs only they use, and core chains toward a PoD only
       they use. Rows on failed ports are dropped. Ports of kept rows are not allocatable.
    5. **Demand (App. D.1).** Bytes per ToR pair; inside a PoD the endpoints are its ToRs
       plus one boundary endpoint ``U`` (its PoD-boundary uplinks): ToR-ToR demand for
       intra-PoD pairs, ``D[t, U]`` the bytes ``t`` lifts to other PoDs and ``D[U, t]`` the
       bytes dropped to it. Across the core the endpoints are PoDs.
    6. **Allocation (App. D.2).** ``allocate_circuits`` per re-planned PoD over its ToRs
       and ``U`` (budgets: each ToR's uplink ports that work and are not kept; ``U``: the
       PoD's free core ports) gives the lift/drop access the PoD's ToRs offer; the core is
       then ``allocate_circuits`` over PoDs with budget ``min(free core ports, access)``
       per PoD (the paper leaves the order of the two tiers open; sizing the core within
       the access keeps the coupling check from failing on budgets alone); finally each
       PoD is allocated again with ``U`` = its planned core circuits, which the greedy,
       identical to the first pass until ``U`` runs out, reaches exactly. Eligible: ToR
       pairs of the PoD (with PXN only same-rail ToRs, the only pairs PXN traffic uses)
       and every ToR with ``U``. That pass fixes each ToR's lift/drop circuits; its
       ToR-ToR circuits are replaced by the relay-aware pass below.

       **Relay legs (a choice the paper leaves open).** Appendix D aggregates inter-PoD
       demand to ``U``, i.e. it assumes a PoD's ToRs reach other ToRs' chains inside the
       PoD, but feeds the ToR-ToR allocation only the PoD's own ToR-ToR bytes. When most
       bytes cross the core (EP groups strided over PoDs) that left every uplink beyond a
       ToR's chains dark (1024 GPUs without PXN, EP64: 256 chains and 0 ToR-ToR circuits
       on 1024 ToR uplinks), and the relays up*/down* routing then makes crowded the
       chains: 151.8 ms against uniform's 20.3 ms. Now, once step 8 has chosen the chains'
       ToRs, each PoD's ToR-ToR circuits are allocated (the same greedy) over the uplinks
       the chains left, for the PoD's own demand plus the *relay legs*: bytes ``a -> b``
       across PoDs ``p -> q`` with no chain ``(a, b)`` take the chains between ``p`` and
       ``q`` that need the fewest legs (``x = a`` or ``y = b`` first, the shorter path; with
       PXN only chains on ``a``'s and ``b``'s rails), split evenly, and add ``a -> x`` in
       ``p`` and ``y -> b`` in ``q``. PoD pairs without a chain (relayed through a third
       PoD) add nothing.
    7. **Core-Agg coupling (App. D).** Feasible when every PoD's lift/drop circuits equal
       its planned core circuits (its ToRs' uplink access can carry the core capacity) and
       every core circuit finds an OCS-Core device with a free port from each of its two
       PoDs, reached from an OCS-Agg where the chain's ToR has a free uplink (PoD-level
       budgets do not see which OCS-Core device a port is on: failures can leave two PoDs
       free ports only on different devices). Otherwise
       ``None`` and ``"keep: infeasible"`` with the PoD and the shortfall.
    8. **Concrete rows.** A core circuit between PoDs ``p`` and ``q`` becomes a chain
       ``ToR-(Agg)-uplink-(Core)-uplink-(Agg)-ToR``; which ToRs of ``p`` and ``q`` it joins
       is a greedy of its own: one chain at a time to the ToR pair (across PoDs with core
       circuits left between them, both ToRs with lift circuits left) with the largest
       ``max(D[t1, t2], D[t2, t1]) / (chains + 1)``, lowest ToR ids on ties. Circuits
       already in place between the same ToR pair (and chains between the same ToRs) are
       reused first, so re-planning the same demand changes nothing; new ones take the
       lowest free link ids, on the OCS-Agg where both ToRs have the most free ports.
    9. **Leftover ports and connectivity (§5.4).** Ports of re-planned PoDs that no
       allocated circuit uses get the fabric's default (uniform) channels wherever all of
       a channel's missing rows have free ports; then, if ToRs that must reach each other
       (with PXN the ToRs of one rail, else all ToRs) are apart, default channels between
       the parts are added back, taking ports from allocated channels of ToR pairs that
       keep another circuit (never from kept rows). Without this a PoD re-planned for its
       own train period dropped the core chains a later response-stream send needed, and
       that send waited forever on a lossless fabric. Connectivity is restored as far as
       such channels allow; it is not guaranteed when every candidate port belongs to a
       ToR pair's only circuit.
    10. **Gain check (not in the paper).** An operator expects a controller not to swap
        in a plan it predicts to be worse than the one in force. Before committing, the
        period's demand is laid on both plans by the fabric's own forwarding
        (:class:`rfabric.forwarding.Forwarding`: the up*/down* tables with D-mod-K the
        switches will use under each plan, relays included) and each plan's time is
        predicted as its busiest port's bytes over its rate (GPU pairs merged per sender
        ToR and receiver; at most 4096 paths per plan, every ToR pair's largest receiver
        first). A candidate not predicted faster is dropped: ``None`` and
        ``"keep: no gain"``. Plans compare by ``(time, time of the busiest network
        port)``, the second separating plans whose bottleneck is a NIC (which no plan
        changes); an exact tie is kept unless the plan in force has circuits on failed
        ports. Forest waves and the forest teardown are not checked (their plans are the
        forest's schedule). :attr:`predictions` records ``(period, candidate, kept)``. It
        is a bottleneck bound, not a simulation: on the ``bench/controllers.py alloc``
        cases the simulated time is 1-3x the prediction (bench/README.md). The prediction
        takes the spec's own routing and sees the failed OCS ports of the view only (a
        simulation run with another ``ecmp`` setting, or failed NICs, is judged on the
        spec's routing and working NICs, both plans alike). The intent's flows are the
        executor's dry run on the plan in force, but an all-reduce with algorithm ``auto``
        picks ring or tree on the paths at its start (``intent.tuned``): on the candidate
        each port carries the other flows plus, per group of such ops, the most either
        algorithm puts on it, so a new plan that makes the tuner switch is not judged on
        flows it will not carry (figure 23's PXN-off TP4_DP32: its candidate turned one DP
        group's tree into a ring over one circuit, predicted 8.0 s, simulated 31.2 s
        against uniform's 12.1 s; now predicted 31.0 s and kept). ``check_gain=False``
        commits every feasible candidate, as before.
    11. **Routability guard.** Before the gain check, the candidate must keep joined (the
        ToR graph of its channels, relays allowed) every two ToRs that must reach each other
        (with PXN the ToRs of one rail, else all ToRs: §5.4, "RFabric maintains
        switch-to-switch connectivity") wherever the plan in force joins them, and every ToR
        pair the coming period and each still-running period send between (pairs mapped as
        :meth:`RFabricLayout.tor_pairs` maps them). The first rule covers traffic the
        controller cannot see: ``view.active_periods`` lists periods with an op running or
        ready, not a period whose next ops wait on compute elsewhere (issue 23: on RFabric 256
        without PXN, radix 8, a train period planned ahead turned PoD 0's uplinks into ToR-ToR
        circuits only, while response-stream sends into PoD 0, ready later, still had to come;
        they stranded). A candidate that breaks a rule is built again with a spanning forest
        of the plan in force's channels over those ToR groups pinned (the allocation takes the
        ports it leaves); if that one breaks a rule too, it is dropped: ``None`` and
        ``"keep: would strand"`` with the count and an example pair (forest waves and
        teardowns included). Found at
        2,048 GPUs (Qwen3-235B): each forest wave re-planned every PoD into core chains only
        while Phase B's fan-out of the shards already seeded still ran on its intra-PoD
        circuits, and 384 of Phase B's ToR pairs were left without a route until the run ended
        stranded.
    12. **Weight sync forest (App. E).** The controller asks for the workload rewrite
        :class:`rfabric.rewrites.WeightSyncForest` (:meth:`rewrites`), which replaces the
        trace's weight-sync ops by the forest of
        :func:`~rfabric.controllers.dissemination_forest`; the simulation applies it (a sweep
        offers it to every fabric, docs/fairness.md) and hands the forests back
        (:meth:`adopt`). A Phase A wave's plan is its edges' chains, ``c_uv`` circuits
        each (the forest's per-PoD budget ``d_p`` = the PoD's core ports), step 8's
        placement; Phase B (intra-PoD fan-out) goes through steps 5-7 like any period. A
        wave is planned while Phase B of the shards already seeded runs: the plan in force
        keeps the fewest of its channels that still join every ToR pair of the running
        periods and of the wave itself (a spanning forest of its channels, a PoD's own ToR-ToR circuits first,
        pruned to the ToRs those periods use), the wave's chains take the ports left (a chain
        with no free port is left out; the detail counts them), and the uplinks they leave
        get ToR-ToR circuits for the running periods' bytes (step 6's greedy, with the relay
        legs of edges left without a chain). The
        first plan after the weight sync restores, in the PoDs the forest used and the new
        period does not re-plan, the rows in place before the weight sync (the forest is
        torn down).

    Parameters
    ----------
    granularity : {"period", "op"}
        When the loop calls :meth:`plan` (see :class:`~rfabric.controllers.Controller`).
    forest : bool
        Ask for the weight-sync forest rewrite (:meth:`rewrites`; default True); False
        leaves the trace's weight sync to the generic allocation.
    seeds_per_pod, fanout : int
        Forwarded to :func:`~rfabric.controllers.dissemination_forest`.
    fanout_ops : {"broadcast", "send"}
        How the forest replays Phase B: one pipelined chain broadcast per fan-out tree
        (default) or one store-and-forward send per tree edge
        (:class:`rfabric.rewrites.WeightSyncForest`).
    check_gain : bool
        Keep the plan in force when the candidate is not predicted faster (step 10;
        default True).
    lookahead : bool
        Plan upcoming periods during the compute before them (step 3; default True;
        granularity ``"period"`` only).

    Attributes
    ----------
    log : list of Decision
        One entry per call (two on a template's first sight).
    templates : dict
        Cached templates by key.
    predictions : list of tuple
        ``(period, (candidate ps, its network ps), (kept ps, its network ps))`` per gain check.
    """

    def __init__(
        self,
        granularity: str = "period",
        *,
        forest: bool = True,
        seeds_per_pod: int = 1,
        fanout: int = 2,
        fanout_ops: str = "broadcast",
        check_gain: bool = True,
        lookahead: bool = True,
    ):
        if granularity not in ("period", "op"):
            raise SpecError(
                f"StageAwareController: granularity must be 'period' or 'op', got {granularity!r}"
            )
        self.granularity = granularity
        if fanout_ops not in ("broadcast", "send"):
            raise SpecError(
                f"StageAwareController: fanout_ops must be 'broadcast' or 'send', got {fanout_ops!r}"
            )
        self.fanout_ops = fanout_ops
        self.forest = bool(forest)
        self.seeds_per_pod = seeds_per_pod
        self.fanout = fanout
        self.log: list[Decision] = []
        self.templates: dict[tuple, _Template] = {}
        self._layouts: dict[int, RFabricLayout] = {}
        self._period_tors: dict[int, frozenset] = {}
        self._period_pairs: dict[int, np.ndarray] = {}  # period -> its template's ToR pairs
        self._period_demand: dict[int, tuple] = {}  # period -> (ToR pair codes, bytes)
        self._committed: dict[tuple, CircuitTable] = {}  # gen key -> rows it committed
        self._forest_waves: dict[int, list[tuple[int, int, int]]] = {}  # period -> (src, dst, circuits)
        self._ws_periods: set[int] = set()
        self._pre_ws: CircuitTable | None = None  # plan in force before the weight sync
        self._ws_pods: set[int] = set()
        self._last_ws_period: int | None = None
        self._ws_first: set[int] = set()  # the first period of each forest
        self._period_stage: dict[int, str] = {}
        self.forest_plan = None  # the last Forest adopted, for inspection
        self.check_gain = bool(check_gain)
        self.lookahead = bool(lookahead)
        self._period_pods: dict[int, frozenset] = {}  # PoDs of each seen period's network traffic
        self._ahead: dict[int, CircuitTable] = {}  # period -> its rows committed ahead
        self._ahead_at, self._ahead_pods = -1, set()  # PoDs planned ahead at this instant
        self._ahead_kept: dict[int, str] = {}  # period -> last "keep" logged for it ahead
        self._ahead_memo: dict[int, tuple] = {}  # period -> inputs of its last ahead "keep"
        self._ahead_key: tuple | None = None  # inputs of the ahead call in progress
        self.predictions: list[tuple] = []  # (period, new plan (ps, network ps), kept plan (ps, network ps))
        self._predictors: dict[int, _Predictor] = {}

    # -- fabric ------------------------------------------------------------------------------

    def _predictor(self, spec: NetworkSpec) -> _Predictor:
        pr = self._predictors.get(id(spec))
        if pr is None or pr.spec is not spec:
            pr = _Predictor(spec)
            self._predictors[id(spec)] = pr
        return pr

    def layout(self, spec: NetworkSpec) -> RFabricLayout:
        """The :class:`RFabricLayout` of ``spec`` (read once per spec)."""
        lay = self._layouts.get(id(spec))
        if lay is None or lay.spec is not spec:
            lay = RFabricLayout(spec, self.name)
            self._layouts[id(spec)] = lay
        return lay

    # -- Phase 1: templates -----------------------------------------------------------------

    @staticmethod
    def template_key(intent: Intent) -> tuple:
        """``(stage, phase, primitive, groups)``, groups as the bytes of their sizes and of
        their ranks end to end (exact, like a tuple of rank tuples, but built in numpy: a
        1024-GPU EP64 dispatch has 64 512 two-rank groups, whose tuples took 130 ms a call)."""
        gs = intent.groups
        sizes = np.fromiter(map(len, gs), dtype=np.int64, count=len(gs))
        ranks = np.concatenate(gs).astype(np.int64) if len(gs) else np.zeros(0, dtype=np.int64)
        return (intent.stage, intent.phase, intent.primitive, (sizes.tobytes(), ranks.tobytes()))

    def _template(self, lay: RFabricLayout, intent: Intent) -> tuple[_Template, bool]:
        key = self.template_key(intent)
        tpl = self.templates.get(key)
        if tpl is not None and np.array_equal(tpl.src, intent.src) and np.array_equal(tpl.dst, intent.dst):
            return tpl, False
        first = tpl is None
        ts, td, net = lay.tor_pairs(intent.src, intent.dst)
        used = np.unique(np.concatenate([ts[net], td[net]]))
        pairs = np.unique(ts[net].astype(np.int64) * lay.num_tors + td[net])
        tpl = _Template(
            key=key,
            src=np.asarray(intent.src).copy(),
            dst=np.asarray(intent.dst).copy(),
            ts=ts,
            td=td,
            net=net,
            tors=frozenset(used.tolist()),
            pods=frozenset(lay.tor_pod[used].tolist()),
            pairs=pairs,
        )
        self.templates[key] = tpl
        return tpl, first

    # -- the call ----------------------------------------------------------------------------

    def _keep(self, intent, view, action, detail=""):
        if view.ahead:  # an upcoming period is offered at every stop: log each outcome once
            self._ahead_memo[intent.period] = self._ahead_key
            if self._ahead_kept.get(intent.period) == action:
                return None
            self._ahead_kept[intent.period] = action
        self.log.append(Decision(intent.period, intent.stage, action, len(view.plan), detail))
        return None

    def _ahead_inputs(self, intent: Intent, view: FabricView) -> tuple:
        """Everything an ahead call's outcome depends on besides the intent: equal inputs,
        equal outcome, so a period offered again at a later stop with nothing changed is not
        planned again (at 2,048 GPUs one such call took 0.4 s, and a period is offered at
        every stop of the periods before it)."""
        active = tuple(sorted(int(p) for p in view.active_periods))
        return (
            view.plan.ocs.tobytes() + view.plan.a.tobytes() + view.plan.b.tobytes(),
            np.asarray(view.lit).tobytes(),
            np.asarray(view.failed).tobytes(),
            active,
            tuple(sorted(self._ahead_pods)) if self._ahead_at == view.now_ps else (),
            view.slack_ps >= view.t_ocs_ps,
            self._pre_ws is None,
            frozenset(self._ws_periods & set(active)),
        )

    def plan(self, intent: Intent, view: FabricView) -> CircuitTable | None:
        if view.ahead:
            self._ahead_key = None
            done = self._ahead.get(intent.period)
            if done is not None and _contains(view.plan, done):
                return self._keep(intent, view, "keep: planned ahead", "its circuits are in place")
            self._ahead_key = self._ahead_inputs(intent, view)
            if self._ahead_memo.get(intent.period) == self._ahead_key:
                return None  # offered before with the same inputs: the same "keep"
        lay = self.layout(view.spec)
        tpl, first = self._template(lay, intent)
        if first:
            self.log.append(
                Decision(
                    intent.period, intent.stage, "cached template", len(view.plan), f"{len(tpl.tors)} ToRs"
                )
            )
        self._period_tors[intent.period] = tpl.tors
        self._period_pairs[intent.period] = tpl.pairs
        if intent.period not in self._period_demand:
            codes = tpl.ts[tpl.net].astype(np.int64) * lay.num_tors + tpl.td[tpl.net]
            pairs, inv = np.unique(codes, return_inverse=True)
            nbytes = np.bincount(inv, weights=np.asarray(intent.bytes, dtype=np.float64)[tpl.net])
            self._period_demand[intent.period] = (pairs, nbytes)
        if not view.ahead:
            self._period_pods[intent.period] = tpl.pods
        self._period_stage[intent.period] = intent.stage
        stage = intent.stage
        if stage == "weight_sync":
            if self.granularity == "op" and intent.period == self._last_ws_period:
                return self._keep(intent, view, "keep: same broadcast")
            self._last_ws_period = intent.period  # one attempt per period, at its first op
        if stage == "gen":
            done = self._committed.get(tpl.key)
            if done is not None and _contains(view.plan, done):
                return self._keep(intent, view, "keep: deployment", "the deployment's circuits are in place")
        forest_step = (
            stage == "weight_sync"
            and intent.period in self._ws_periods
            and intent.period not in self._ws_first
        )
        if view.ahead:
            busy = set(self._ahead_pods) if self._ahead_at == view.now_ps else set()
            for p in view.active_periods:
                busy |= self._period_pods.get(int(p), frozenset())
            clash = sorted(busy & tpl.pods)
            if clash:
                return self._keep(
                    intent, view, "keep: busy", f"PoDs {clash} carry running traffic (look-ahead)"
                )
        else:
            done = self._ahead.get(intent.period)
            if done is not None and _contains(view.plan, done):
                return self._keep(intent, view, "keep: planned ahead", "its circuits are in place")
        if view.slack_ps < view.t_ocs_ps and not forest_step:
            return self._keep(
                intent, view, "keep: slack", f"slack {view.slack_ps} ps < t_ocs {view.t_ocs_ps} ps"
            )
        ws_active = any(
            self._period_stage.get(int(p)) == "weight_sync" for p in view.active_periods if p != intent.period
        )
        teardown = stage != "weight_sync" and self._pre_ws is not None and not ws_active
        n = lay.num_tors
        m = tpl.net
        D = np.zeros((n, n), dtype=np.float64)
        np.add.at(D, (tpl.ts[m], tpl.td[m]), np.asarray(intent.bytes, dtype=np.float64)[m])
        if not tpl.tors and not teardown:
            return self._keep(intent, view, "keep: no demand", "all of the period's traffic stays in ToRs")
        others = set()
        for p in view.active_periods:
            if p != intent.period:
                others |= self._period_tors.get(int(p), frozenset())
        chains = self._forest_waves.get(intent.period) if stage == "weight_sync" else None
        protected = frozenset(others - tpl.tors)
        running, tries = None, [frozenset()]
        if chains is not None:  # a wave's ToR-ToR circuits carry the periods still running
            running = np.zeros((n, n), dtype=np.float64)
            need = []
            for p in view.active_periods:
                if p != intent.period and int(p) in self._period_demand:
                    codes, nbytes = self._period_demand[int(p)]
                    np.add.at(running, (codes // n, codes % n), nbytes)
                    need.append(codes)
            # first the running periods' routes pinned, then (if some edge of the wave found
            # no chain and no route) the wave's own too
            pin = [need, need + [tpl.pairs]]
            tries = [
                _spanning_rows(lay, view.plan, np.unique(np.concatenate(c)), view.failed_ports)
                if c
                else frozenset()
                for c in pin
            ]
        base = view.plan
        if teardown:
            base = self._restore(lay, view, tpl.pods)
        skeleton = False
        at = 0
        while at < len(tries):
            pinned = tries[at]
            result = self._materialize(lay, view, base, D, tpl.pods, protected, chains, running, pinned)
            if isinstance(result, str):
                return self._keep(intent, view, "keep: infeasible", result)
            plan, detail = result
            view.spec.validate_circuits(plan, where=f"{self.name}, period {intent.period}")
            stranded = self._strands(lay, intent, view, plan)
            if not stranded:
                break
            at += 1
            if at == len(tries) and not skeleton:
                # last resort: keep a spanning forest of the plan in force over every group of
                # ToRs that must reach each other, and allocate the ports it leaves (§5.4)
                skeleton = True
                tries.append(tries[-1] | _spanning_rows(lay, base, lay.reach_codes(), view.failed_ports))
        if skeleton and not stranded:
            detail += ", a spanning forest of the plan in force kept to keep its ToRs connected"
        if stranded:
            return self._keep(intent, view, "keep: would strand", stranded)
        if self.check_gain and chains is None and not teardown:
            pred = self._predictor(view.spec)
            paths = pred.sample(intent, tpl)
            new_ps = pred.time_ps(plan, view, paths, pred.variants(intent, lay))
            cur_ps = pred.time_ps(view.plan, view, paths)
            self.predictions.append((intent.period, new_ps, cur_ps))
            # a tie keeps the plan in force (no reconfiguration for nothing), unless that plan
            # has circuits on failed ports, whose working ends the new plan puts to use
            dead = bool(view.failed.any()) and bool(
                set(view.ocs_ports[view.failed].tolist()) & set(view.plan.a.tolist() + view.plan.b.tolist())
            )
            if new_ps > cur_ps or (new_ps == cur_ps and not dead):
                return self._keep(
                    intent,
                    view,
                    "keep: no gain",
                    f"predicted {new_ps[0]} ps ({new_ps[1]} ps in the network) with the new plan, {cur_ps[0]} ps ({cur_ps[1]} ps) kept",
                )
            detail += f", predicted {new_ps[0]} ps ({new_ps[1]} ps in the network) against {cur_ps[0]} ps ({cur_ps[1]} ps) kept"
        if stage == "weight_sync":
            if self._pre_ws is None:
                self._pre_ws = view.plan
            self._ws_pods |= set(tpl.pods)
        elif teardown:
            self._pre_ws = None
            self._ws_pods = set()
        if stage == "gen":
            self._committed[tpl.key] = _rows_touching(plan, lay, tpl.pods)
        if view.ahead:
            self._ahead[intent.period] = _rows_touching(plan, lay, tpl.pods)
            if self._ahead_at != view.now_ps:
                self._ahead_at, self._ahead_pods = view.now_ps, set()
            self._ahead_pods |= set(tpl.pods)
            detail += f", {view.slack_ps} ps ahead of its start (look-ahead)"
        self.log.append(Decision(intent.period, stage, "commit", len(plan), detail))
        return plan

    def _strands(self, lay, intent: Intent, view: FabricView, plan: CircuitTable) -> str:
        """Step 10's routability guard: why ``plan`` would strand traffic, or "".

        The ToR pairs of this period and of every period still running must stay connected
        by circuits wherever the plan in force connects them; a plan that cuts any such pair
        is refused (the plan in force is kept). Connectivity is taken on the ToR graph of
        the plan's channels (the forwarding relays through any ToR), ToR pairs as
        :meth:`RFabricLayout.tor_pairs` maps GPU pairs (PXN included)."""
        before = lay.components(view.plan, view.failed_ports)
        split = lay.splits(before, lay.components(plan))
        if split:
            a, b = split[0]
            return (
                f"the new plan leaves {len(split)} part(s) of a ToR group (with PXN a rail, else the "
                f"whole fabric) that the plan in force joins without a route to the rest, e.g. ToR "
                f"{int(lay.tors[a])} to ToR {int(lay.tors[b])}: traffic pending between them would strand"
            )
        periods = [intent.period] + [int(p) for p in view.active_periods if p != intent.period]
        parts = [self._period_pairs[p] for p in periods if p in self._period_pairs]
        if not parts:
            return ""
        n = lay.num_tors
        codes = np.unique(np.concatenate(parts))
        ts, td = codes // n, codes % n
        cut = lay.apart(plan, ts, td)
        if not cut.any():
            return ""
        cut &= ~lay.apart(view.plan, ts, td)
        if not cut.any():
            return ""
        i = int(np.flatnonzero(cut)[0])
        a, b = int(ts[i]), int(td[i])
        users = [p for p in periods if p in self._period_pairs and np.isin(codes[i], self._period_pairs[p])]
        return (
            f"the new plan leaves {int(cut.sum())} ToR pairs that the plan in force connects without "
            f"a route, e.g. ToR {int(lay.tors[a])} to ToR {int(lay.tors[b])} of period(s) {users}"
        )

    # -- the weight-sync forest teardown -----------------------------------------------------

    def _restore(self, lay, view, replanned) -> CircuitTable:
        """``view.plan`` with the PoDs the forest used (and this period does not re-plan)
        set back to their rows from before the weight sync, where those ports work."""
        pods = self._ws_pods - set(replanned)
        if not pods:
            return view.plan
        failed = set(view.failed_ports.tolist())
        cur = _rows(view.plan)
        old = _rows(self._pre_ws)
        keep = [r for r in cur if not _in_pods(lay, r, pods)]
        used = {x for r in keep for x in (r[1], r[2])}
        for r in old:
            if (
                _in_pods(lay, r, pods)
                and r[1] not in used
                and r[2] not in used
                and not ({r[1], r[2]} & failed)
            ):
                keep.append(r)
                used |= {r[1], r[2]}
        return _table(keep)

    # -- materialisation (App. D) ------------------------------------------------------------

    def _materialize(
        self, lay, view, base, D, pods, protected, forced_chains, running=None, pinned=frozenset()
    ):
        """(plan, detail), or a str saying why the plan is infeasible."""
        failed = set(view.failed_ports.tolist())
        pods = set(pods)
        if forced_chains is not None:
            pods |= {int(lay.tor_pod[lay.gpu_tor[s]]) for s, _, _ in forced_chains}
            pods |= {int(lay.tor_pod[lay.gpu_tor[d]]) for _, d, _ in forced_chains}
        protected_pods = {int(lay.tor_pod[t]) for t in protected} - pods
        pol = lay.port_of_link
        core_set = set(lay.core_nodes.tolist())

        # 1. rows kept as they are
        rows = _rows(base)
        partner_core = {}  # core port link -> its core row
        for r in rows:
            if r[0] in core_set:
                partner_core[r[1]] = r
                partner_core[r[2]] = r
        kept, kept_core_ports = [], set()
        for r in rows:
            if r[1] in failed or r[2] in failed:
                continue
            if r in pinned:
                kept.append(r)
                continue
            if r[0] in core_set:
                pa_, pb_ = pol[r[1]][1], pol[r[2]][1]
                inside = pa_ not in pods and pb_ not in pods
                chain_kept = (pa_ in pods) != (pb_ in pods) and (
                    (pa_ in protected_pods) or (pb_ in protected_pods)
                )
                if inside or chain_kept:
                    kept.append(r)
                    if chain_kept:
                        kept_core_ports |= {r[1], r[2]}
                continue
            p = lay.agg_pod.get(r[0])
            if p is None or p not in pods:
                kept.append(r)
                continue
            ka, kb = pol.get(r[1]), pol.get(r[2])
            if ka and kb and ka[0] == kb[0] == "tor" and ka[1] in protected and kb[1] in protected:
                kept.append(r)
            elif (
                ka
                and kb
                and {ka[0], kb[0]} == {"tor", "core"}
                and (r[1] in kept_core_ports or r[2] in kept_core_ports)
            ):
                kept.append(r)
        # a chain kept on the core side keeps its lift row, which may come after it: second pass
        kept_set = set(kept)
        for r in rows:
            if r in kept_set or r[1] in failed or r[2] in failed or lay.agg_pod.get(r[0]) not in pods:
                continue
            if r[1] in kept_core_ports or r[2] in kept_core_ports:
                kept.append(r)
                kept_set.add(r)
        taken = {x for r in kept for x in (r[1], r[2])} | failed

        # 2. free ports of the re-planned PoDs
        free_tor: dict[tuple[int, int], list[int]] = {}  # (ToR, agg) -> links
        for link, t, g in zip(
            lay.tor_port_link.tolist(), lay.tor_port_tor.tolist(), lay.tor_port_agg.tolist(), strict=True
        ):
            if link not in taken and int(lay.tor_pod[t]) in pods:
                free_tor.setdefault((t, g), []).append(link)
        free_core: dict[tuple[int, int, int], list[int]] = {}  # (PoD, agg, core) -> links
        for link, p, g, c in zip(
            lay.core_port_link.tolist(),
            lay.core_port_pod.tolist(),
            lay.core_port_agg.tolist(),
            lay.core_port_core.tolist(),
            strict=True,
        ):
            if link not in taken and p in pods:
                free_core.setdefault((p, g, c), []).append(link)
        for lst in list(free_tor.values()) + list(free_core.values()):
            lst.sort()
        tor_budget = np.zeros(lay.num_tors, dtype=np.int64)
        for (t, _), lst in free_tor.items():
            tor_budget[t] += len(lst)
        pod_budget = np.zeros(lay.pods, dtype=np.int64)
        for (p, _, _), lst in free_core.items():
            pod_budget[p] += len(lst)

        # 3. core plan and lift slots
        rate = lay.link_rate_bps
        pod_of = lay.tor_pod
        if forced_chains is not None:
            chain_list = []
            for s, d, c in forced_chains:
                ts, td, _ = lay.tor_pairs(np.array([s]), np.array([d]))
                chain_list += [(int(ts[0]), int(td[0]))] * int(c)
            # the uplinks the chains leave carry the running periods' ToR-ToR bytes (Phase B
            # of the shards already seeded) and the relay legs of unchained edges
            own_D = running if running is not None else np.zeros_like(D)
            intra_C = {p: None for p in pods}
        else:
            inter = pod_of[:, None] != pod_of[None, :]
            P = np.zeros((lay.pods, lay.pods))
            np.add.at(
                P, (np.repeat(pod_of, lay.num_tors), np.tile(pod_of, lay.num_tors)), (D * inter).ravel()
            )

            def agg(p, u_budget):
                """allocate_circuits over PoD p's ToRs and its boundary endpoint U."""
                tors = lay.pod_tors[p]
                k = len(tors)
                Dp = np.zeros((k + 1, k + 1))
                Dp[:k, :k] = D[np.ix_(tors, tors)]
                Dp[:k, k] = (D[tors] * inter[tors]).sum(axis=1)
                Dp[k, :k] = (D[:, tors] * inter[:, tors]).sum(axis=0)
                elig = np.zeros((k + 1, k + 1), dtype=bool)
                elig[:k, :k] = lay.tor_eligible(tors)
                elig[:k, k] = elig[k, :k] = True
                return tors, allocate_circuits(Dp, elig, np.append(tor_budget[tors], u_budget), rate)

            # pass 1: what lift/drop access each PoD's ToRs give with U = its free core ports;
            # the core is then allocated within min(core ports, access) per PoD (coupled
            # budgets); pass 2 re-allocates each PoD with U = its planned core circuits
            core_c = np.zeros((lay.pods, lay.pods), dtype=np.int64)
            if lay.pods > 1 and P.sum() > 0:
                access = np.zeros(lay.pods, dtype=np.int64)
                for p in sorted(pods):
                    tors, C = agg(p, pod_budget[p])
                    access[p] = C[: len(tors), len(tors)].sum()
                core_c = allocate_circuits(
                    P, ~np.eye(lay.pods, dtype=bool), np.minimum(pod_budget, access), rate
                )
            lifts = np.zeros(lay.num_tors, dtype=np.int64)
            intra_C = {}
            for p in sorted(pods):
                tors, C = agg(p, core_c[p].sum())
                k = len(tors)
                lift = int(C[:k, k].sum())
                if lift != int(core_c[p].sum()):
                    return (
                        f"Core-Agg coupling: PoD {p} has {int(core_c[p].sum())} core circuits planned but its "
                        f"ToRs' free uplinks carry only {lift} lift/drop circuits"
                    )
                lifts[tors] = C[:k, k]
                intra_C[p] = (tors, C[:k, :k])
            chain_list = _pair_chains(D, pod_of, lifts, core_c)
            own_D = D

        # 4. reuse: circuits and chains already in place between the same ToRs
        exist_intra: dict[tuple[int, int], list[tuple]] = {}
        exist_chain: dict[tuple[int, int], list[tuple]] = {}
        lift_of = {}  # core port link -> (agg row, ToR)
        for r in rows:
            g = lay.agg_pod.get(r[0])
            if g is None or g not in pods or r in kept_set:
                continue
            ka, kb = pol.get(r[1]), pol.get(r[2])
            if not ka or not kb:
                continue
            if ka[0] == kb[0] == "tor":
                exist_intra.setdefault((min(ka[1], kb[1]), max(ka[1], kb[1])), []).append(r)
            elif {ka[0], kb[0]} == {"tor", "core"}:
                core_port = r[1] if ka[0] == "core" else r[2]
                lift_of[core_port] = (r, ka[1] if ka[0] == "tor" else kb[1])
        for r in rows:
            if r[0] in core_set and r not in kept_set and r[1] in lift_of and r[2] in lift_of:
                (ra, ta), (rb, tb) = lift_of[r[1]], lift_of[r[2]]
                key = (ta, tb) if ta <= tb else (tb, ta)
                exist_chain.setdefault(key, []).append((ra, r, rb) if ta <= tb else (rb, r, ra))

        def take(lst, x):
            if x in lst:
                lst.remove(x)
                return True
            return False

        def port_free(t, g, link):
            return link in free_tor.get((t, g), [])

        new = []
        unchained = 0
        # 5. chains (core circuits) first: they are coupled across two PoDs
        for t1, t2 in chain_list:
            a, b = (t1, t2) if t1 <= t2 else (t2, t1)
            placed = False
            for ra, rc, rb in exist_chain.get((a, b), []):
                pa_, pb_ = pol[rc[1]][1], pol[rc[2]][1]
                ka = rc[1] if pa_ == pod_of[a] else rc[2]
                kb = rc[2] if ka == rc[1] else rc[1]
                ta_port = ra[1] if ra[2] == ka else ra[2]
                tb_port = rb[1] if rb[2] == kb else rb[2]
                ga, gb, c = ra[0], rb[0], rc[0]
                if (
                    port_free(a, ga, ta_port)
                    and port_free(b, gb, tb_port)
                    and ka in free_core.get((int(pod_of[a]), ga, c), [])
                    and kb in free_core.get((int(pod_of[b]), gb, c), [])
                ):
                    take(free_tor[(a, ga)], ta_port)
                    take(free_tor[(b, gb)], tb_port)
                    take(free_core[(int(pod_of[a]), ga, c)], ka)
                    take(free_core[(int(pod_of[b]), gb, c)], kb)
                    new.append(((ra, rc, rb), a, b))
                    exist_chain[(a, b)].remove((ra, rc, rb))
                    placed = True
                    break
            if placed:
                continue
            best = None
            pa_, pb_ = int(pod_of[a]), int(pod_of[b])
            for c in lay.core_nodes.tolist():
                ends = []
                for t, p in ((a, pa_), (b, pb_)):
                    opts = [
                        (len(free_tor[(t, g)]), g)
                        for (pp, g, cc), lst in free_core.items()
                        if pp == p and cc == c and lst and free_tor.get((t, g))
                    ]
                    if not opts:
                        break
                    ends.append(max(opts, key=lambda o: (o[0], -o[1]))[1])
                if len(ends) == 2:
                    room = min(len(free_core[(pa_, ends[0], c)]), len(free_core[(pb_, ends[1], c)]))
                    if best is None or room > best[0]:
                        best = (room, c, ends[0], ends[1])
            if best is None and forced_chains is not None:
                unchained += 1  # a forest wave takes the ports left by running periods
                continue
            if best is None:
                return (
                    f"Core-Agg coupling: no OCS-Core device has a free port from PoD {pa_} and from PoD "
                    f"{pb_} reachable from free uplinks of ToRs {int(lay.tors[a])} and {int(lay.tors[b])}"
                )
            _, c, ga, gb = best
            ka = free_core[(pa_, ga, c)].pop(0)
            kb = free_core[(pb_, gb, c)].pop(0)
            pa_port = free_tor[(a, ga)].pop(0)
            pb_port = free_tor[(b, gb)].pop(0)
            new.append((((ga, pa_port, ka), (c, ka, kb), (gb, kb, pb_port)), a, b))

        # 6. intra-PoD ToR-ToR circuits, re-allocated now that the chains' ToRs are known:
        # the PoD's own ToR-ToR demand plus the relay legs of inter-PoD traffic whose ToR
        # pair got no chain (sender -> a chain's ToR in its PoD, chain's far ToR -> the
        # receiver), over the uplinks the chains left
        unplaced = 0
        relayed = 0.0
        ends = np.zeros(lay.num_tors, dtype=np.int64)
        for _, a, b in new:
            ends[a] += 1
            ends[b] += 1
        R, relayed = _relay_demand(D, pod_of, [(a, b) for _, a, b in new], lay)
        for p in sorted(intra_C):
            tors = lay.pod_tors[p]
            Dp = own_D[np.ix_(tors, tors)] + R[np.ix_(tors, tors)]
            room = np.maximum(tor_budget[tors] - ends[tors], 0)
            intra_C[p] = (tors, allocate_circuits(Dp, lay.tor_eligible(tors), room, rate))
        for p in sorted(intra_C):
            tors, C = intra_C[p]
            iu, ju = np.nonzero(np.triu(C, 1))
            for i, j in zip(iu.tolist(), ju.tolist(), strict=True):
                a, b = int(tors[i]), int(tors[j])
                need = int(C[i, j])
                for r in exist_intra.get((a, b), []):
                    if need == 0:
                        break
                    ta = pol[r[1]][1]
                    pa_port, pb_port = (r[1], r[2]) if ta == a else (r[2], r[1])
                    if port_free(a, r[0], pa_port) and port_free(b, r[0], pb_port):
                        take(free_tor[(a, r[0])], pa_port)
                        take(free_tor[(b, r[0])], pb_port)
                        new.append(((r,), a, b))
                        need -= 1
                for _ in range(need):
                    opts = [
                        (min(len(free_tor[(a, g)]), len(free_tor.get((b, g), []))), -g, g)
                        for (t, g) in free_tor
                        if t == a and free_tor[(a, g)] and free_tor.get((b, g))
                    ]
                    if not opts:
                        unplaced += 1
                        continue
                    g = max(opts)[2]
                    new.append((((g, free_tor[(a, g)].pop(0), free_tor[(b, g)].pop(0)),), a, b))

        # 7. leftover ports: the fabric's default channels where all their ports are free
        n_alloc = len(new)
        used = {x for r in kept for x in (r[1], r[2])} | {x for u in new for r in u[0] for x in (r[1], r[2])}
        used |= failed
        agg_in = {g for g, p in lay.agg_pod.items() if p in pods}
        defaults = lay.default_channels()
        in_kept = {(r[0], min(r[1], r[2]), max(r[1], r[2])) for r in kept}
        for rws, a, b in defaults:
            need = _missing(rws, in_kept)
            ports = {x for r in need for x in (r[1], r[2])}
            if not need or ports & used or not all(r[0] in agg_in or r[0] in core_set for r in need):
                continue
            new.append((need, a, b))
            used |= ports
        filled = len(new) - n_alloc

        # 8. connectivity (§5.4): ToRs that must reach each other (with PXN the ToRs of one
        # rail, else all) and do not get a default channel back, taking its ports from
        # allocated channels of ToR pairs that keep another channel
        n_intra = sum(1 for u in new[:n_alloc] if len(u[0]) == 1)
        stolen = _connect(lay, kept, new, n_alloc, failed, defaults, agg_in | core_set, in_kept)
        rows_new = [r for u in new for r in u[0]]
        detail = (
            f"PoDs {sorted(pods)}: {len(chain_list)} core chains, "
            f"{n_intra} ToR-ToR circuits, {filled} default "
            f"channels on leftover ports, {len(kept)} rows kept"
        )
        if stolen:
            detail += f", {stolen} allocated channels given up to keep ToRs connected"
        if unplaced:
            detail += f", {unplaced} ToR-ToR circuits found no OCS-Agg with a free port at both ToRs"
        if unchained:
            detail += (
                f", {unchained} of the wave's core chains found no free ports (running periods keep theirs)"
            )
        return _table(kept + rows_new), detail

    # -- the weight-sync forest (App. E): a workload rewrite this controller plans for -------

    def rewrites(self) -> list:
        """``[WeightSyncForest(seeds_per_pod, fanout, fanout_ops)]`` (the appendix-E forest,
        :class:`rfabric.rewrites.WeightSyncForest`), or ``[]`` with ``forest=False``. The
        rewrite is fabric-independent: the simulation applies it with the fabric's locality
        (on an RFabric its PoDs, ``d_p`` = each PoD's OCS-Core ports), and a sweep offers it to
        every fabric of the comparison (docs/fairness.md). Measured on RFabric 256 (train PoD 0,
        gen PoD 1, tiny model, 32 shards of 16.6 MB, ``t_ocs`` 0): weight sync 2.16 ms with
        chain broadcasts in Phase B, 6.02 ms with sends (each tree level waits for the whole
        shard), 4.27 ms for the generator's own two-level broadcast over the uniform plan
        (``core_ports=16``); 2.93, 8.04 and 2.93 ms with 64 core ports."""
        from ..rewrites import WeightSyncForest

        if not self.forest:
            return []
        return [WeightSyncForest(self.seeds_per_pod, self.fanout, self.fanout_ops)]

    def adopt(self, applied, spec: NetworkSpec) -> None:
        """Take the schedule of the forests the run's rewrites made (``applied``: the
        :class:`rfabric.rewrites.Rewritten` of each rewrite applied): each Phase A wave is
        a period whose plan is its edges' chains (step 12), the first period of each forest
        obeys the safe window, later ones commit whatever the slack. Without a forest (a run
        with ``rewrites="none"``) the weight sync is planned like any period."""
        self._forest_waves, self._ws_periods, self._ws_first = {}, set(), set()
        self.forest_plan = None
        for r in applied:
            if r.rewrite.name != "weight_sync_forest":
                continue
            for f, first in r.schedule["forests"]:
                self.forest_plan = f
                for e in range(f.n_waves):
                    w = np.flatnonzero(f.wave == e)
                    self._forest_waves[first + e] = [
                        (int(f.src[i]), int(f.dst[i]), int(f.circuits[i])) for i in w.tolist()
                    ]
                self._ws_periods |= set(range(first, first + f.n_waves + 1))
                self._ws_first.add(first)


# -- helpers ------------------------------------------------------------------------------


class _Predictor:
    """The period's time on a plan, predicted without a simulation: the most loaded port's
    bytes over its rate, every demanded GPU pair's bytes laid on the path the fabric's own
    routing gives it under that plan (:class:`rfabric.forwarding.Forwarding`: up*/down*
    tables, D-mod-K among equal next hops, relays included). It ignores time (all of the
    period's bytes are in flight at once) and queueing, so it is a bottleneck estimate, used
    only to compare two plans on the same demand.

    A path depends on the sender's ToR and the receiver (D-mod-K keys on the receiver's
    position below its ToR), so GPU pairs are merged per (sender ToR, receiver). At most
    ``budget`` paths are traced per plan: every ToR pair first gets the path of its largest
    receiver, then a second, ... until the budget is spent; a ToR pair's bytes are spread
    over its traced receivers in proportion to their own bytes."""

    budget = 4096

    def __init__(self, spec):
        from ..forwarding import Forwarding

        self.spec = spec
        self.fwd = Forwarding(spec)
        self.rate = spec.links.rate_bps.astype(np.float64)
        self.net = np.asarray(spec.links.kind != "nic") & np.asarray(spec.links.kind != "nvlink")
        self._down: set[int] = set()

    def sample(self, intent, tpl, budget=None):
        """The (sender GPUs, receiver GPUs, bytes) of the paths to trace for the intent."""
        return self._sample(intent.src, intent.dst, intent.bytes, tpl.ts, tpl.td, tpl.net, budget)

    def variants(self, intent, lay):
        """What the period may send on another plan than the one in force, for
        :meth:`time_ps`: ``None`` when it sends the intent's flows on any plan, else
        ``(fixed, groups)``, the sampled paths of the flows no plan changes and, per group of
        ``intent.tuned``, those of each algorithm the executor may pick for it.

        An all-reduce with algorithm ``auto`` picks ring or tree on the paths at its start
        (the executor's tuner), so the intent's flows (its dry run on the plan in force) are
        not what it sends on a new plan: on PXN-less RFabric the DP all-reduce of figure 23
        (TP4_DP32) is a tree on the uniform plan, but on the candidate one of its four groups
        became a ring whose cross-rail hops all took one circuit, 2.6x slower than uniform
        while its tree flows predicted it 1.5x faster."""
        if not intent.tuned:
            return None
        g = max(int(np.max(intent.src, initial=0)), int(np.max(intent.dst, initial=0))) + 1
        for grp in intent.tuned:
            for f in grp:
                g = max(g, int(np.max(f[0], initial=0)) + 1, int(np.max(f[1], initial=0)) + 1)
        # the flows of the intent that no tuned group sends: its pairs minus each group's choice
        keys = [np.asarray(intent.src, np.int64) * g + np.asarray(intent.dst, np.int64)]
        vals = [np.asarray(intent.bytes, np.int64)]
        for grp in intent.tuned:
            keys.append(grp[0][0] * g + grp[0][1])
            vals.append(-np.asarray(grp[0][2], np.int64))
        k, inv = np.unique(np.concatenate(keys), return_inverse=True)
        left = np.bincount(inv, weights=np.concatenate(vals).astype(np.float64))
        keep = left > 0.5
        budget = max(512, self.budget // (1 + sum(len(grp) - 1 for grp in intent.tuned)))

        def paths(src, dst, nbytes):
            ts, td, net = lay.tor_pairs(src, dst)
            return self._sample(src, dst, nbytes, ts, td, net, budget)

        fixed = paths(k[keep] // g, k[keep] % g, left[keep])
        return fixed, [[paths(*f) for f in grp[1:]] for grp in intent.tuned]

    def _sample(self, src, dst, nbytes, ts, td, m, budget=None):
        budget = self.budget if budget is None else budget
        src = np.asarray(src, dtype=np.int64)[m]
        dst = np.asarray(dst, dtype=np.int64)[m]
        ts, td = ts[m], td[m]
        b = np.asarray(nbytes, dtype=np.float64)[m]
        if not src.size:
            return [], [], np.zeros(0)
        n_gpu = int(max(dst.max(initial=0), src.max(initial=0))) + 1
        k = ts * n_gpu + dst
        uk, first, inv = np.unique(k, return_index=True, return_inverse=True)
        kb = np.bincount(inv, weights=b, minlength=uk.size)
        pair = ts[first] * (int(td.max(initial=0)) + 1) + td[first]
        # rank of each key inside its ToR pair by bytes (largest first), then round-robin
        order = np.lexsort((uk, -kb, pair))
        ps = pair[order]
        start = np.r_[0, np.flatnonzero(ps[1:] != ps[:-1]) + 1]
        rank = np.arange(order.size) - np.repeat(start, np.diff(np.r_[start, order.size]))
        pick = order[np.lexsort((order, rank))][:budget]
        tot = np.bincount(np.searchsorted(np.unique(pair), pair), weights=kb)
        upair = np.unique(pair)
        pi = np.searchsorted(upair, pair[pick])
        got = np.bincount(pi, weights=kb[pick], minlength=upair.size)
        w = kb[pick] * tot[pi] / got[pi]
        return src[first[pick]].tolist(), dst[first[pick]].tolist(), w

    def time_ps(self, plan, view, paths, variants=None) -> tuple[int, int]:
        """(predicted time, predicted time of the busiest network port) in ps: the second
        orders two plans whose bottleneck is a NIC, which no plan changes.

        With ``variants`` (:meth:`variants`) the period's auto-tuned all-reduces are not
        taken at their dry run's algorithm: each port carries the fixed flows plus, per group,
        the most any algorithm the tuner may pick puts on it, a bound on the busiest port
        whatever the tuner picks on this plan (``paths`` is then unused)."""
        down = set(view.ocs_ports[view.failed].tolist())
        for link in self._down - down:
            self.fwd.restore_link(link)
        for link in down - self._down:
            self.fwd.fail_link(link)
        self._down = down
        self.fwd.apply_circuits(plan)
        if variants is None:
            load = self._load(paths)
        else:
            fixed, groups = variants
            load = self._load(fixed)
            for alts in groups:
                load = load + np.max([self._load(a) for a in alts], axis=0)
        busy = np.flatnonzero(load)
        if not busy.size:
            return 0, 0
        t = load[busy] * 8 / self.rate[busy // 2] * 1e12
        net = self.net[busy // 2]
        return int(np.ceil(t.max())), int(np.ceil(t[net].max(initial=0.0)))

    def _load(self, paths) -> np.ndarray:
        """Bytes per port (``2 * link + direction``) of the sampled paths on the plan applied."""
        load = np.zeros(2 * len(self.rate))
        s, d, w = paths
        if not len(s):
            return load
        path = self.fwd._fwd.path
        ports = [path(a, b, 0) for a, b in zip(s, d, strict=True)]
        lens = np.fromiter((p.size for p in ports), dtype=np.int64, count=len(ports))
        flat = np.concatenate(ports).astype(np.int64)
        load += np.bincount(flat, weights=np.repeat(w, lens), minlength=load.size)
        return load


def _missing(rws, present) -> tuple:
    """The rows of a chain not already among ``present`` ((device, low link, high link) keys)."""
    return tuple(r for r in rws if (r[0], min(r[1], r[2]), max(r[1], r[2])) not in present)


def _ends(rows) -> set:
    """The (device, link) ends the rows occupy (a link has one end at each of its devices)."""
    return {e for r in rows for e in ((r[0], r[1]), (r[0], r[2]))}


def _union_find(n: int):
    """(find, parent) over ``0 .. n-1``: join ``a`` and ``b`` with
    ``parent[find(a)] = find(b)``."""
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    return find, parent


def _connect(lay, kept, new, n_alloc, failed, defaults, devices, in_kept) -> int:
    """Add default channels (``defaults``: (rows, ToR, ToR)) until the ToRs that must reach
    each other do (with PXN the ToRs of each rail, else all), freeing ends from allocated
    channels (``new[:n_alloc]``) whose ToR pair keeps another channel; kept rows, failed
    links and default channels already added are never touched. Modifies ``new``; returns
    the number of allocated channels removed."""
    n = lay.num_tors
    find, parent = _union_find(n)

    owner = {}  # (device, link) end -> index of the unit in `new` using it
    pair_count: dict[tuple[int, int], int] = {}
    for i, (rws, a, b) in enumerate(new):
        for e in _ends(rws):
            owner[e] = i
        pair_count[(min(a, b), max(a, b))] = pair_count.get((min(a, b), max(a, b)), 0) + 1
    blocked = _ends(kept)
    for a, b in lay.channels_of(kept) + [(a, b) for _, a, b in new]:
        parent[find(a)] = find(b)
    group = lay.tor_rail if lay.pxn else np.zeros(n, dtype=np.int64)

    def split():
        roots = {}
        for t in range(n):
            roots.setdefault(int(group[t]), set()).add(find(t))
        return any(len(r) > 1 for r in roots.values())

    if not split():
        return 0
    removed = set()
    # candidates that free the fewest allocated channels first (none, then one, ...)
    for budget in range(4):
        for full, a, b in defaults:
            rws = _missing(full, in_kept)
            if find(a) == find(b) or not rws or not all(r[0] in devices for r in rws):
                continue
            ends = _ends(rws)
            if ends & blocked or any(r[1] in failed or r[2] in failed for r in rws):
                continue
            victims = {owner[e] for e in ends if e in owner}
            if len(victims) > budget:
                continue
            ok = True
            for v in victims:
                va, vb = new[v][1], new[v][2]
                if v in removed or v >= n_alloc or pair_count[(min(va, vb), max(va, vb))] < 2:
                    ok = False
                    break
            if not ok:
                continue
            for v in victims:
                va, vb = new[v][1], new[v][2]
                pair_count[(min(va, vb), max(va, vb))] -= 1
                removed.add(v)
                for e in _ends(new[v][0]):
                    owner.pop(e, None)
            new.append((rws, a, b))
            for e in ends:
                owner[e] = len(new) - 1
            parent[find(a)] = find(b)
            if not split():
                break
        if not split():
            break
    for v in sorted(removed, reverse=True):
        del new[v]
    return len(removed)


def _spanning_rows(lay, plan: CircuitTable, codes: np.ndarray, failed_ports) -> frozenset:
    """Rows of ``plan`` that keep joined every ToR pair (``codes``: ``ts * num_tors + td``)
    it joins now: a spanning forest of its channels (single circuits before chains, so a
    PoD's own ToR-ToR circuits carry its fan-out), pruned of the branches that lead to no
    ToR of a pair."""
    n = lay.num_tors
    dead = set(np.asarray(failed_ports).tolist())
    find, parent = _union_find(n)

    units = sorted(lay._channels(plan), key=lambda u: len(u[0]))
    adj: dict[int, list[tuple[int, int]]] = {}
    forest = []
    for rows, a, b in units:
        if a == b or any(r[1] in dead or r[2] in dead for r in rows) or find(a) == find(b):
            continue
        parent[find(a)] = find(b)
        adj.setdefault(a, []).append((b, len(forest)))
        adj.setdefault(b, []).append((a, len(forest)))
        forest.append(rows)
    wanted = set((codes // n).tolist()) | set((codes % n).tolist())
    alive = [True] * len(forest)
    degree = {t: len(e) for t, e in adj.items()}
    leaves = [t for t, d in degree.items() if d == 1 and t not in wanted]
    while leaves:
        t = leaves.pop()
        for u, k in adj[t]:
            if alive[k]:
                alive[k] = False
                degree[t] -= 1
                degree[u] -= 1
                if degree[u] == 1 and u not in wanted:
                    leaves.append(u)
    return frozenset(r for k, rows in enumerate(forest) if alive[k] for r in rows)


def _relay_demand(D, pod_of, chains, lay) -> tuple[np.ndarray, float]:
    """Intra-PoD relay legs of the inter-PoD demand that has no chain of its own.

    Bytes from ToR ``a`` (PoD ``p``) to ``b`` (PoD ``q``) without a chain ``(a, b)`` take a
    chain ``(x, y)`` between ``p`` and ``q`` and cross the PoDs' OCS-Agg on the legs
    ``a -> x`` and ``y -> b`` (those with ``x = a`` or ``y = b`` first: one leg, the shortest
    path, as the switches' routing prefers), split evenly over the chains that need the
    fewest legs; with PXN only chains whose ToRs are on the rails of ``a`` and ``b`` (a leg
    joins same-rail ToRs). Returns the leg demand ``R`` (ToR x ToR) and the relayed bytes.
    PoD pairs without any chain (traffic relayed through a third PoD) add nothing."""
    n = len(pod_of)
    R = np.zeros((n, n))
    by_pp: dict[tuple[int, int], list[tuple[int, int]]] = {}
    direct = set()
    for t1, t2 in chains:
        by_pp.setdefault((int(pod_of[t1]), int(pod_of[t2])), []).append((t1, t2))
        by_pp.setdefault((int(pod_of[t2]), int(pod_of[t1])), []).append((t2, t1))
        direct |= {(t1, t2), (t2, t1)}
    rail = lay.tor_rail
    inter = pod_of[:, None] != pod_of[None, :]
    src, dst = np.nonzero((D > 0) & inter)
    if direct:
        dk = np.array(sorted(x * n + y for x, y in direct), dtype=np.int64)
        keep = ~np.isin(src * n + dst, dk)
        src, dst = src[keep], dst[keep]
    relayed = 0.0
    if src.size == 0:
        return R, relayed
    pp = pod_of[src] * (int(pod_of.max()) + 1) + pod_of[dst]
    order = np.argsort(pp, kind="stable")
    src, dst, pp = src[order], dst[order], pp[order]
    cut = np.flatnonzero(np.r_[True, pp[1:] != pp[:-1], True])
    for lo, hi in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):
        a, b = src[lo:hi], dst[lo:hi]
        lst = by_pp.get((int(pod_of[a[0]]), int(pod_of[b[0]])))
        if not lst:
            continue
        x = np.array([c[0] for c in lst], dtype=np.int64)
        y = np.array([c[1] for c in lst], dtype=np.int64)
        legs = (x[None, :] != a[:, None]).astype(np.int64) + (y[None, :] != b[:, None])
        if lay.pxn:
            legs[(rail[x][None, :] != rail[a][:, None]) | (rail[y][None, :] != rail[b][:, None])] = 3
        best = legs == legs.min(axis=1, keepdims=True)
        best &= legs < 3
        cnt = best.sum(axis=1)
        ok = cnt > 0
        d = np.where(ok, D[a, b] / np.maximum(cnt, 1), 0.0)
        relayed += float(D[a, b][ok].sum())
        i, j = np.nonzero(best)
        w = d[i]
        m1 = x[j] != a[i]
        np.add.at(R, (a[i][m1], x[j][m1]), w[m1])
        m2 = y[j] != b[i]
        np.add.at(R, (y[j][m2], b[i][m2]), w[m2])
    return R, relayed


def _pair_chains(D, pod_of, lifts, core_c) -> list[tuple[int, int]]:
    """ToR pairs of the core chains: one at a time to the pair across PoDs with core circuits
    left between them and lift circuits left at both ToRs, largest max-directional demand
    per chain (+1) first, lowest ids on ties."""
    n = len(pod_of)
    sym = np.maximum(D, D.T) * (pod_of[:, None] != pod_of[None, :])
    have = np.zeros((n, n))
    slots = lifts.astype(np.int64).copy()
    rem = core_c.astype(np.int64).copy()
    out = []
    for _ in range(int(np.triu(core_c, 1).sum())):
        ok = (slots[:, None] > 0) & (slots[None, :] > 0) & (rem[pod_of][:, pod_of] > 0)
        ok &= np.triu(np.ones((n, n), dtype=bool), 1)
        if not ok.any():
            break
        score = np.where(ok, sym / (have + 1), -1.0)
        i, j = np.unravel_index(int(np.argmax(score)), score.shape)
        out.append((int(i), int(j)))
        have[i, j] += 1
        slots[i] -= 1
        slots[j] -= 1
        rem[pod_of[i], pod_of[j]] -= 1
        rem[pod_of[j], pod_of[i]] -= 1
    return out


def _rows(plan: CircuitTable) -> list[tuple[int, int, int]]:
    return list(zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True))


def _table(rows) -> CircuitTable:
    if not rows:
        return CircuitTable.empty()
    o, x, y = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    return CircuitTable.build(o, x, y)


def _key_set(plan: CircuitTable) -> set:
    return {(o, min(x, y), max(x, y)) for o, x, y in _rows(plan)}


def _contains(plan: CircuitTable, part: CircuitTable) -> bool:
    return _key_set(part) <= _key_set(plan)


def _in_pods(lay: RFabricLayout, row, pods) -> bool:
    """Whether a plan row belongs to the given PoDs: an OCS-Agg row of one of them, or an
    OCS-Core row with an end in one of them."""
    p = lay.agg_pod.get(row[0])
    if p is not None:
        return p in pods
    ends = [lay.port_of_link.get(row[1]), lay.port_of_link.get(row[2])]
    return any(e is not None and e[1] in pods for e in ends)


def _rows_touching(plan: CircuitTable, lay: RFabricLayout, pods) -> CircuitTable:
    return _table([r for r in _rows(plan) if _in_pods(lay, r, set(pods))])
