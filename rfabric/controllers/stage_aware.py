"""StageAwareController: RFabric's control plane (paper §5.2-5.3, appendices D and E).

Per communication period it turns the intent's GPU-pair demand into ToR-level demand per PoD
and PoD-level demand across the core, allocates circuits with the pair-bottleneck greedy
(:func:`~rfabric.controllers.allocate_circuits`), checks Core-Agg coupling, maps the
multiplicities to concrete OCS port pairs and commits only in a window whose slack covers
``t_ocs``. The weight sync is replayed over the appendix-E dissemination forest, a workload
rewrite (:class:`rfabric.rewrites.WeightSyncForest`) the controller asks for and plans for.

This module holds the controller's decisions (stages, safe windows, look-ahead, the
routability guard, the forest's waves and teardown); the pieces it calls live in modules of
their own: :mod:`.templates` (decision log, Phase 1 templates), :mod:`.materialize` (plans
from ToR-level demand, appendix D), :mod:`.connectivity` (keeping ToRs joined),
:mod:`.waves` (the weight-sync forest's waves and teardown), :mod:`.gain` (the gain
check's prediction) and :mod:`.plan_rows`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import SpecError
from ..spec import CircuitTable, NetworkSpec
from .base import Controller, FabricView, Intent
from .connectivity import _spanning_rows
from .gain import Predictor
from .layout import RFabricLayout
from .loop import same_plan
from .materialize import materialize
from .plan_rows import _contains, _rows, _rows_touching
from .templates import Decision, Template, template_key
from .tenants import TenantPolicy, reserve, row_key
from .waves import fanout_flows, forest_schedule, restore, scheme_choices, wave_pins

__all__ = ["Decision", "GainCheck", "StageAwareController"]


class GainCheck(NamedTuple):
    """One gain check (step 10): the predicted ``(ps, network ps)`` of the materialised
    candidate, of the fabric's initial plan in the same PoDs (None when not offered), and of
    the plan in force; ``late`` the reconfiguration delay the commit adds (ps); whether the
    faster candidate was committed."""

    period: int
    candidate: tuple
    initial: tuple | None
    kept: tuple
    late: int
    committed: bool


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
       (``T_A = sum_t T_A^(t)``), so each waits for its light. The first period of a
       forest obeys the safe window too, but at its own boundary (not ahead) its plan is
       still computed and committed when the gain check (step 10) predicts it faster than
       the plan in force by more than the ``t_ocs - slack`` it delays the wave (the log's
       detail says so; ``check_gain=False`` keeps the safe window alone): the plan in force
       is the last period's, made for other traffic, and at 4,096 GPUs Kimi K2's first
       wave ran 41.3 s on it where one send takes 0.34 s
       (docs/explanation/weight-sync-at-scale.md).

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

       **Re-plan when the periods holding its ports end.** At a period's own boundary the
       controller notes the running periods whose traffic meets its PoDs (a forest's period:
       other than the forest's own): the plan made then, or the plan kept, left them their
       ports. With ``replan=True`` (default) the loop stops when periods go idle, and once
       all of those have, the period, if still running, is offered again (``view.ended``,
       its intent the ops not finished yet) and planned as at its boundary, committed only
       when the gain check predicts it faster on those ops by more than ``t_ocs`` (the dark
       time of the circuits it changes), else ``"keep: no gain"``; once per decision at its
       own boundary. A forest's wave that meets such periods at its own boundary is not
       planned then (``"keep: busy"``): each shard's sends start as its holder's training
       ends, so the first waves come while training's periods hold the train PoDs' ports, and
       a wave planned then took them (training ran on what the wave left) and kept a plan
       short of chains after training ended. It runs on the plan in force and is planned
       when they end (docs/explanation/weight-sync-at-scale.md).
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
        against uniform's 12.1 s; now predicted 31.0 s and kept). A re-plan's ops that have
        started are not retuned: the tuner picked at their start, so they carry the flows of
        the algorithm they run on any plan (:meth:`ControlLoop.remaining
        <rfabric.controllers.loop.ControlLoop.remaining>`), and only ops not started are
        charged the most either algorithm puts on a port. ``check_gain=False`` commits every
        feasible candidate, as before.

        **Never worse than the plan in force or the fabric's own plan, by the prediction.**
        Where no other running period has traffic in the re-planned PoDs, the fabric's
        initial plan there (``spec.circuits`` in those PoDs, where their ports work and are
        free, the rest of the plan in force kept; offered only if step 11 passes it) is a
        second candidate, committed instead of the materialised one when predicted faster
        (the detail says ``"the fabric's initial plan"``). So every commit is predicted faster
        than the plan in force and no slower than the fabric's own plan in its PoDs
        (:attr:`checks`). The materialiser's plan for a demand is a greedy, not the best
        plan: on the 2,048-GPU MoE sweep point the gradient all-reduce's candidate at its
        own boundary was predicted slower than the plan in force (9.27 against 7.60 s) where
        the initial plan ran it in 3.0 s; its re-plan, judged on the rings the all-reduces
        already running send, commits and the stage ends 2.6 s sooner.
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
        :func:`~rfabric.controllers.dissemination_forest` where it predicts the forest
        faster than the trace's own ops (:func:`~rfabric.controllers.forest.sync_time`, the
        same rule on every fabric: it reads the ops and the fabric's locality only; the log
        records each choice, ``"scheme: forest"`` or ``"scheme: trace's own"``, with both
        predictions); the simulation applies it (a sweep offers it to every fabric,
        docs/fairness.md) and hands the forests back (:meth:`adopt`). A Phase A wave's plan is its edges' chains, ``c_uv`` circuits
        each (the forest's per-PoD budget ``d_p`` = the PoD's core ports), step 8's
        placement; Phase B (intra-PoD fan-out) goes through steps 5-7 like any period. A
        wave carries the fan-out of the shards seeded by its end
        (:func:`~rfabric.controllers.waves.fanout_flows`: Phase B's flows whose shard an
        earlier wave or this one brings, whether or not Phase B has started; not those of
        later waves) and the bytes of the other running periods: the wave's chains take the
        free ports (a chain with no free port is left out; the detail counts them), and the
        uplinks they leave get ToR-ToR circuits for those bytes (step 6's greedy, with the
        relay legs of edges left without a chain). The plan in force keeps what step 11
        needs, tried in turn until the plan strands nothing: the fewest of its channels that
        still join every ToR pair of the other running periods (a spanning forest of its
        channels, a PoD's own ToR-ToR circuits first, pruned to the ToRs those periods use),
        then also those of the fan-out already running, then also the wave's own
        (docs/explanation/weight-sync-at-scale.md). The
        first plan after the weight sync restores, in the PoDs the forest used and the new
        period does not re-plan, the rows in place before the weight sync (the forest is
        torn down).
    13. **Several jobs (tenants).** A run of several jobs (``rf.Job``) gives each period one
        job (:attr:`Intent.job`); the log and ``res.circuits`` name it. The controller
        remembers which job's plan allocated each circuit (default channels on leftover ports
        belong to no job) and, when a job's period re-plans PoDs where other jobs have an
        active period, leaves them the ports ``tenants`` gives them
        (:func:`rfabric.controllers.tenants.reserve`): per PoD its core ports, per ToR that
        both use its uplinks. The rows on those ports are kept as they are (a chain whole),
        the free ones are not allocated; the rest is planned as above. With one job, or jobs
        whose PoDs never have active periods of another job at once, nothing changes
        (docs/explanation/multi-tenant-circuits.md).

    Parameters
    ----------
    granularity : {"period", "op"}
        When the loop calls :meth:`plan` (see :class:`~rfabric.controllers.Controller`).
    forest : True, False or "always"
        Ask for the weight-sync forest rewrite (:meth:`rewrites`). True (default): the
        rewrite chooses, per weight sync, the forest or the trace's own ops, whichever
        :func:`~rfabric.controllers.forest.sync_time` predicts faster on the fabric's
        locality (``WeightSyncForest(choose="faster")``; the log records the choice);
        ``"always"``: the forest whatever the trace; False leaves the trace's weight sync to
        the generic allocation.
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
    replan : bool
        Offer a running period again when the periods holding its ports end, and let a
        forest's wave wait for them (step 3; default True; granularity ``"period"`` only).
    tenants : "fair", "shared", dict or list
        How jobs share OCS ports (step 13). ``"fair"`` (default): each job with an active
        period in a PoD keeps ``floor(n / jobs)`` of its ``n`` working core ports (and of the
        uplinks of a ToR they share), lent to the others while it has none; ``{"a": 2, "b": 1}``:
        shares by weight (every job named); ``["a", "b"]``: priority, first highest (a plan
        keeps every circuit an active job of higher priority allocated, and may take a lower
        one's); ``"shared"``: one pool, each plan may take any port (as for one job).

    Attributes
    ----------
    log : list of Decision
        One entry per call (two on a template's first sight).
    templates : dict
        Cached templates by key.
    predictions : list of tuple
        ``(period, (candidate ps, its network ps), (kept ps, its network ps))`` per gain check
        (the materialised candidate's; :attr:`checks` has the initial plan's too).
    checks : list of GainCheck
        Per gain check both candidates' predictions, the plan in force's, the delay counted
        and whether it committed.
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
        replan: bool = True,
        tenants="fair",
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
        if forest not in (True, False, "always"):
            raise SpecError(f"StageAwareController: forest must be True, False or 'always', got {forest!r}")
        self.forest = forest if forest == "always" else bool(forest)
        self.seeds_per_pod = seeds_per_pod
        self.fanout = fanout
        self.log: list[Decision] = []
        self.templates: dict[tuple, Template] = {}
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
        self._fanout: dict[int, tuple] = {}  # wave period -> its fan-out flows (fanout_flows)
        self._period_stage: dict[int, str] = {}
        self.forest_plan = None  # the last Forest adopted, for inspection
        self.check_gain = bool(check_gain)
        self.lookahead = bool(lookahead)
        self.replan = bool(replan)
        self._holders: dict[int, frozenset] = {}  # period -> running periods its last call left ports to
        self._period_pods: dict[int, frozenset] = {}  # PoDs of each seen period's network traffic
        self._ahead: dict[int, CircuitTable] = {}  # period -> its rows committed ahead
        self._ahead_at, self._ahead_pods = -1, set()  # PoDs planned ahead at this instant
        self._ahead_kept: dict[int, str] = {}  # period -> last "keep" logged for it ahead
        self._ahead_memo: dict[int, tuple] = {}  # period -> inputs of its last ahead "keep"
        self._ahead_key: tuple | None = None  # inputs of the ahead call in progress
        self.predictions: list[tuple] = []  # (period, new plan (ps, network ps), kept plan (ps, network ps))
        self.checks: list[GainCheck] = []
        self._predictors: dict[int, Predictor] = {}
        self.tenants = None if tenants == "shared" else TenantPolicy(tenants)
        self._period_job: dict[int, str] = {}  # period -> its job (Intent.job)
        self._owner: dict[tuple, str] = {}  # row key -> the job whose plan put it in place

    # -- fabric ------------------------------------------------------------------------------

    def _predictor(self, spec: NetworkSpec) -> Predictor:
        pr = self._predictors.get(id(spec))
        if pr is None or pr.spec is not spec:
            pr = Predictor(spec)
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

    template_key = staticmethod(template_key)

    def _template(self, lay: RFabricLayout, intent: Intent) -> tuple[Template, bool]:
        key = self.template_key(intent)
        tpl = self.templates.get(key)
        if tpl is not None and np.array_equal(tpl.src, intent.src) and np.array_equal(tpl.dst, intent.dst):
            return tpl, False
        first = tpl is None
        ts, td, net = lay.tor_pairs(intent.src, intent.dst)
        used = np.unique(np.concatenate([ts[net], td[net]]))
        pairs = np.unique(ts[net].astype(np.int64) * lay.num_tors + td[net])
        tpl = Template(
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
        self.log.append(Decision(intent.period, intent.stage, action, len(view.plan), detail, intent.job))
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
        if view.ended:  # a re-plan call (step 3): only once the periods that held its ports end
            held = self._holders.get(intent.period)
            if not held or held & set(view.active_periods):
                return None
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
                    intent.period,
                    intent.stage,
                    "cached template",
                    len(view.plan),
                    f"{len(tpl.tors)} ToRs",
                    intent.job,
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
        self._period_job[intent.period] = intent.job
        if view.ended:  # one re-plan per decision at the period's own boundary
            self._holders[intent.period] = frozenset()
        elif not view.ahead:
            held = self._holders[intent.period] = self._holding(intent.period, tpl.pods, view)
            if held and self.replan and intent.period in self._forest_waves:
                # a wave does not take the ports of periods outside its forest (training's, when
                # each shard's sends start as its holder's training ends): planned when they end
                return self._keep(
                    intent,
                    view,
                    "keep: busy",
                    f"periods {sorted(held)} carry running traffic in its PoDs: planned again when they end",
                )
        if self.tenants is not None:
            self.tenants.check(intent.job)
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
        elif not view.ended:
            done = self._ahead.get(intent.period)
            if done is not None and _contains(view.plan, done):
                return self._keep(intent, view, "keep: planned ahead", "its circuits are in place")
        late = 0  # what committing now delays the period by (inside the safe window, step 3)
        if view.ended:
            if not self.check_gain:
                return None
            late = view.t_ocs_ps
        elif view.slack_ps < view.t_ocs_ps and not forest_step:
            first_wave = (
                self.check_gain
                and not view.ahead
                and stage == "weight_sync"
                and intent.period in self._ws_first
                and intent.period in self._forest_waves
            )
            if not first_wave:
                return self._keep(
                    intent, view, "keep: slack", f"slack {view.slack_ps} ps < t_ocs {view.t_ocs_ps} ps"
                )
            late = view.t_ocs_ps - view.slack_ps
        ws_active = any(
            self._period_stage.get(int(p)) == "weight_sync" for p in view.active_periods if p != intent.period
        )
        teardown = stage != "weight_sync" and self._pre_ws is not None and not ws_active
        if teardown and view.ended:
            return None  # (the forest's teardown waits for a period's own boundary)
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
        if chains is not None and view.ended:  # a re-plan: the chains of the sends left
            left = set(zip(np.asarray(intent.src).tolist(), np.asarray(intent.dst).tolist(), strict=True))
            chains = [e for e in chains if (e[0], e[1]) in left]
        protected = frozenset(others - tpl.tors)
        running, tries = None, [frozenset()]
        if chains is not None:  # a wave's ToR-ToR circuits carry the periods still running
            fan = self._fanout.get(intent.period)
            if fan is not None:  # and the fan-out of the shards seeded so far (step 12)
                src, dst, nbytes, ready, b_period = fan
                ts, td, net = lay.tor_pairs(src, dst)
                codes = ts[net].astype(np.int64) * n + td[net]
                fan = (codes, nbytes[net], ready[net], b_period)
            running, tries = wave_pins(lay, view, intent.period, self._period_demand, tpl.pairs, fan)
        base = view.plan
        if teardown:
            base = self._restore(lay, view, tpl.pods)
        tenant_pins, tenant_blocked, tenant_note = self._tenant_ports(lay, view, intent, tpl)
        skeleton = False
        kept: set = set()
        filled: set = set()
        at = 0
        while at < len(tries):
            pinned = tries[at] | tenant_pins
            out: dict = {}
            result = self._materialize(
                lay, view, base, D, tpl.pods, protected, chains, running, pinned, tenant_blocked, out
            )
            if isinstance(result, str):
                return self._keep(intent, view, "keep: infeasible", result)
            plan, detail = result
            kept, filled = out.get("kept", set()), out.get("filled", set())
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
        if self.check_gain and not teardown and (chains is None or late):
            pred = self._predictor(view.spec)
            paths = pred.sample(intent, tpl)
            variants = pred.variants(intent, lay) if chains is None else None
            new_ps = pred.time_ps(plan, view, paths, variants)
            cur_ps = pred.time_ps(view.plan, view, paths)
            check = GainCheck(intent.period, new_ps, None, cur_ps, late, False)
            self.predictions.append((intent.period, new_ps, cur_ps))
            if chains is None and not tenant_pins and not self._meeting(intent.period, tpl.pods, view):
                # the fabric's initial plan, a candidate too where no other period runs
                alt = self._initial(lay, intent, view, tpl.pods)
                if alt is not None and not same_plan(alt, view.plan):
                    alt_ps = pred.time_ps(alt, view, paths, variants)
                    check = check._replace(initial=alt_ps)
                    if alt_ps < new_ps:
                        detail = (
                            f"PoDs {sorted(tpl.pods)}: the fabric's initial plan, predicted {alt_ps[0]} ps "
                            f"({alt_ps[1]} ps in the network) against {new_ps[0]} ps ({new_ps[1]} ps) "
                            f"with the materialised candidate"
                        )
                        plan, new_ps = alt, alt_ps
                        kept, filled = set(), set(_rows(plan))
            why = self._no_gain(view, new_ps, cur_ps, late)
            self.checks.append(check._replace(committed=not why))
            if why:
                return self._keep(intent, view, *why)
            if late:
                where = (
                    "running, after the periods holding its ports ended"
                    if view.ended
                    else f"inside the safe window (slack {view.slack_ps} ps < t_ocs {view.t_ocs_ps} ps)"
                )
                detail += (
                    f", {where}: predicted {new_ps[0]} ps + {late} ps of reconfiguration against "
                    f"{cur_ps[0]} ps kept"
                )
            else:
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
        if self.tenants is not None:
            self._own(plan, kept, filled, intent.job)
            if tenant_note:
                detail += f", {tenant_note}"
        self.log.append(Decision(intent.period, stage, "commit", len(plan), detail, intent.job))
        return plan

    def _no_gain(self, view: FabricView, new_ps, cur_ps, late: int) -> tuple | None:
        """The gain check's verdict (step 10): None to commit, else the ``(action, detail)``
        of the keep. Committed only when predicted faster than the plan in force, by more than
        ``late``, the reconfiguration it adds to a period already due (inside the safe window:
        ``t_ocs - slack``; a re-plan of a running period: ``t_ocs``). Without ``late`` a tie
        keeps the plan in force unless that plan has circuits on failed ports, whose working
        ends the new plan puts to use."""
        if late:
            if new_ps[0] + late < cur_ps[0]:
                return None
            action = "keep: no gain" if view.ended else "keep: slack"
            head = (
                "re-planned after the periods holding its ports ended"
                if view.ended
                else f"slack {view.slack_ps} ps < t_ocs {view.t_ocs_ps} ps"
            )
            return action, (
                f"{head}; predicted {new_ps[0]} ps + {late} ps of reconfiguration with the new plan, "
                f"{cur_ps[0]} ps kept"
            )
        dead = bool(view.failed.any()) and bool(
            set(view.ocs_ports[view.failed].tolist()) & set(view.plan.a.tolist() + view.plan.b.tolist())
        )
        if new_ps > cur_ps or (new_ps == cur_ps and not dead):
            return "keep: no gain", (
                f"predicted {new_ps[0]} ps ({new_ps[1]} ps in the network) with the new plan, "
                f"{cur_ps[0]} ps ({cur_ps[1]} ps) kept"
            )
        return None

    def replan_periods(self, ended: tuple, active: tuple) -> list:
        """The running periods whose last call left ports to periods that have all ended now
        (:meth:`_holding`; step 3, re-plan)."""
        if not self.replan:
            return []
        now = set(active)
        return [p for p in active if (h := self._holders.get(p)) and not h & now]

    def _meeting(self, period: int, pods, view: FabricView, skip=()) -> frozenset:
        """The running periods other than ``period`` (and those in ``skip``) whose traffic
        meets ``pods``."""
        return frozenset(
            int(p)
            for p in view.active_periods
            if p != period and p not in skip and self._period_pods.get(int(p), frozenset()) & pods
        )

    def _holding(self, period: int, pods, view: FabricView) -> frozenset:
        """The running periods whose traffic meets ``pods`` (the ports a plan for ``period``
        now must leave them), but for a weight-sync forest's period the forest's own periods
        (its waves replace each other's circuits by design). When they have all ended, the
        period is offered again (step 3, re-plan)."""
        return self._meeting(period, pods, view, self._ws_periods if period in self._ws_periods else ())

    def _initial(self, lay, intent: Intent, view: FabricView, pods) -> CircuitTable | None:
        """The gain check's second candidate: the plan in force with ``pods`` set back to the
        fabric's initial rows (``spec.circuits``, where their ports work and are free), or
        None when there are none or that plan would strand traffic (step 11)."""
        init = view.spec.circuits
        if not len(init):
            return None
        alt = restore(lay, view, init, pods)
        if not len(alt) or self._strands(lay, intent, view, alt):
            return None
        return alt

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
        set back to their rows from before the weight sync (:func:`.waves.restore`)."""
        return restore(lay, view, self._pre_ws, self._ws_pods - set(replanned))

    # -- materialisation (App. D) ------------------------------------------------------------

    def _materialize(
        self,
        lay,
        view,
        base,
        D,
        pods,
        protected,
        forced_chains,
        running=None,
        pinned=frozenset(),
        blocked=frozenset(),
        out=None,
    ):
        """(plan, detail), or a str saying why the plan is infeasible
        (:func:`rfabric.controllers.materialize.materialize`)."""
        return materialize(lay, view, base, D, pods, protected, forced_chains, running, pinned, blocked, out)

    # -- several jobs (tenants) -------------------------------------------------------------

    def _tenant_ports(self, lay, view, intent: Intent, tpl: Template) -> tuple[frozenset, frozenset, str]:
        """The rows to keep and free ports to leave so that the other jobs with an active
        period in the template's PoDs keep their share (:func:`.tenants.reserve`); nothing without a
        tenant policy or other jobs."""
        if self.tenants is None:
            return frozenset(), frozenset(), ""
        pod_jobs: dict[int, set] = {}
        tor_jobs: dict[int, set] = {}
        for p in view.active_periods:
            job = self._period_job.get(int(p))
            if p == intent.period or job is None or job == intent.job:
                continue
            for t in self._period_tors.get(int(p), ()):
                tor_jobs.setdefault(int(t), set()).add(job)
                pod_jobs.setdefault(int(lay.tor_pod[t]), set()).add(job)
        if not pod_jobs:
            return frozenset(), frozenset(), ""
        failed = set(view.failed_ports.tolist())
        return reserve(
            lay,
            view.plan,
            failed,
            self._owner,
            self.tenants,
            intent.job,
            tpl.pods,
            tpl.tors,
            pod_jobs,
            tor_jobs,
        )

    def _own(self, plan: CircuitTable, kept: set, filled: set, job: str) -> None:
        """Owners after a commit: rows the plan kept as they were keep theirs, the rows it
        allocated for the period's demand are ``job``'s, default channels on leftover ports (and
        those added back to keep ToRs connected) are no job's."""
        owner = {}
        for r in _rows(plan):
            k = row_key(r)
            o = self._owner.get(k) if r in kept else (None if r in filled else job)
            if o is not None:
                owner[k] = o
        self._owner = owner

    # -- the weight-sync forest (App. E): a workload rewrite this controller plans for -------

    def rewrites(self) -> list:
        """``[WeightSyncForest(seeds_per_pod, fanout, fanout_ops, choose="faster")]`` (the
        appendix-E forest where it is predicted faster than the trace's own weight sync,
        ``choose="always"`` with ``forest="always"``;
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
        choose = "always" if self.forest == "always" else "faster"
        return [WeightSyncForest(self.seeds_per_pod, self.fanout, self.fanout_ops, choose=choose)]

    def adopt(self, applied, spec: NetworkSpec) -> None:
        """Take the schedule of the forests the run's rewrites made (``applied``: the
        :class:`rfabric.rewrites.Rewritten` of each rewrite applied): each Phase A wave is
        a period whose plan is its edges' chains (step 12), the first period of each forest
        obeys the safe window, later ones commit whatever the slack. Without a forest (a run
        with ``rewrites="none"``, or the trace's own weight sync chosen) the weight sync is
        planned like any period. The rewrite's choices go to the log
        (:func:`.waves.scheme_choices`)."""
        self._forest_waves, self._ws_periods, self._ws_first, self.forest_plan = forest_schedule(applied)
        self._fanout = fanout_flows(applied)
        self.log += scheme_choices(applied, spec)
