"""The control loop: what Simulation runs at each communication-period boundary.

The engine stops when an op of a period not seen before becomes ready (granularity
``"op"``: any op). Python then builds the period's :class:`Intent` (cached: computed once per
period, or per op) and the :class:`FabricView` of the moment, calls ``controller.plan`` and
applies a returned plan at once with ``t_ocs`` through the checks of
:meth:`rfabric.Simulation.apply_circuits`. A plan equal to the one in force (the same set
of circuits) is checked as any other, then counts as no change: it is not applied and not
logged. Python runs only here, never
per packet or per event.

Look-ahead (``controller.lookahead``, granularity ``"period"``): after the ready periods,
the loop offers every upcoming period (not seen yet, with a *root* op, one that depends on
no op of its own period, whose dependencies all lie in periods already seen) with
``view.ahead`` set and ``view.slack_ps`` a lower bound on its first start: over its root
ops, the compute gaps along their dependency chains through unfinished ops, each
unfinished op ending no earlier than now, communication taking no time. A plan returned
then is applied at once, like any other.

Re-plan (``controller.replan``, granularity ``"period"``): when periods go idle (the engine
stops then), the loop also offers every period still running that was seen before and is
not at its own boundary now, with ``view.ended`` the periods that went idle and
``view.slack_ps`` 0, so that a plan made while those periods held ports can be revisited.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .. import _engine
from ..errors import SpecError
from ..jobs import DEFAULT_JOB
from ..spec import CircuitTable
from .base import FabricView, Intent

GRANULARITIES = ("period", "op")


def plan_key(plan: CircuitTable) -> np.ndarray:
    """Rows ``(device, lower link, higher link)`` sorted: equal keys, equal circuit sets."""
    lo, hi = np.minimum(plan.a, plan.b), np.maximum(plan.a, plan.b)
    rows = np.stack([np.asarray(plan.ocs, np.int64), lo, hi], axis=1)
    return rows[np.lexsort(rows.T[::-1])] if len(rows) else rows.reshape(0, 3)


def same_plan(a: CircuitTable, b: CircuitTable) -> bool:
    """True when the two plans hold the same circuits (row order and a/b order aside)."""
    return len(a) == len(b) and np.array_equal(plan_key(a), plan_key(b))


class ControlLoop:
    """Calls a controller at the boundaries of one Simulation and applies its plans."""

    def __init__(self, sim, controller):
        self.sim = sim
        self.controller = controller
        self.name = controller_name(controller)
        self.granularity = getattr(controller, "granularity", "period")  # checked by Simulation
        self.calls = 0
        self.wall_s = 0.0
        self.changes = 0
        self._state = None  # what view() read from the engine at this boundary (see view)
        a = sim.trace.arrays()
        self._a = a
        self._period = np.asarray(a["period"], dtype=np.int64)
        self._kind_names = list(a["kind_names"])
        self._stage_names = list(a["stage_names"])
        self._phase_names = list(a["phase_names"])
        self._job = sim.trace.job_of_ops()  # per op row its job's name, or None (one job)
        order = np.argsort(self._period, kind="stable")
        ids, first = np.unique(self._period[order], return_index=True)
        pieces = np.split(order, first[1:]) if len(order) else []
        self._period_rows = dict(zip(ids.tolist(), pieces, strict=True))
        spec = sim.spec
        optical = spec.is_circuit_device(np.arange(spec.num_nodes))
        src, dst = spec.links.src, spec.links.dst
        self.ocs_ports = np.flatnonzero(optical[src] | optical[dst]).astype(np.int64)
        self._intents: dict[int, Intent] = {}
        self._flows: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._alt_flows: dict[tuple, tuple] = {}  # signature -> its flows under each tunable algorithm
        self._gpu_server = np.asarray(spec.nodes.server, dtype=np.int64)[
            np.asarray(spec.gpu_nodes, dtype=np.int64)
        ]
        self.lookahead = bool(getattr(controller, "lookahead", False)) and self.granularity == "period"
        self.ahead_calls = 0
        self.replan = bool(getattr(controller, "replan", False)) and self.granularity == "period"
        self.replan_calls = 0
        self._seen: set[int] = set()
        self._candidates: set[int] = set()
        if self.lookahead:
            self._init_lookahead()

    # -- look-ahead --------------------------------------------------------------------------

    def _init_lookahead(self) -> None:
        """Dependency rows (trace rows are topological: deps earlier, op ids ascending), and
        per period its root ops with the other periods each waits on."""
        a = self._a
        op_id = np.asarray(a["op_id"], dtype=np.int64)
        self._dep_off = np.asarray(a["deps_offsets"], dtype=np.int64)
        self._dep_rows = np.searchsorted(op_id, np.asarray(a["deps"], dtype=np.int64))
        n = len(op_id)
        owner = np.repeat(np.arange(n), np.diff(self._dep_off))
        dep_period = self._period[self._dep_rows]
        internal = np.zeros(n, dtype=bool)
        internal[owner[dep_period == self._period[owner]]] = True
        self._roots: dict[int, list[tuple[int, frozenset]]] = {}
        self._succ: dict[int, set[int]] = {}
        for r in np.flatnonzero(~internal).tolist():
            waits = frozenset(dep_period[self._dep_off[r] : self._dep_off[r + 1]].tolist())
            p = int(self._period[r])
            self._roots.setdefault(p, []).append((r, waits))
            for q in waits:
                self._succ.setdefault(q, set()).add(p)
        # egress capacity of each GPU (bits/s: all its links, NIC and NVLink), for the lower
        # bound of an op's duration
        spec = self.sim.spec
        node_gpu = np.full(spec.num_nodes, -1, dtype=np.int64)
        node_gpu[spec.gpu_nodes] = np.arange(spec.num_gpus)
        rate = spec.links.rate_bps.astype(np.float64)
        cap = np.zeros(spec.num_gpus)
        for ends in (spec.links.src, spec.links.dst):
            g = node_gpu[np.asarray(ends, dtype=np.int64)]
            np.add.at(cap, g[g >= 0], rate[g >= 0])
        self._gpu_cap = cap
        # per op row: a lower bound of its communication time (ps), filled in as its period is
        # seen (its sends dry-run); 0 for ops of periods not seen
        self._dur = np.zeros(len(op_id), dtype=np.int64)
        self._dur_of: dict[int, int] = {}  # by the id of an _op_flows result (one per signature)

    def _durations(self, rows: np.ndarray) -> None:
        """Fill the lower bound of each op's communication time: the most bytes one GPU sends
        in it over that GPU's egress capacity (every link it has, at line rate)."""
        has = self._gpu_cap > 0
        for row, flows in zip(rows.tolist(), self._op_flows(rows), strict=True):
            d = self._dur_of.get(id(flows))
            if d is None:
                src, _, nbytes = flows
                d = 0
                if len(src):
                    out = np.bincount(src, weights=nbytes.astype(np.float64), minlength=len(self._gpu_cap))
                    d = int((out[has] * 8e12 / self._gpu_cap[has]).max(initial=0.0))
                self._dur_of[id(flows)] = d
            self._dur[row] = d

    def _see(self, period: int) -> None:
        if period in self._seen:
            return
        self._seen.add(period)
        if self.lookahead:
            self._durations(self._period_rows[period])
        self._candidates.discard(period)
        if self.lookahead:
            self._candidates |= self._succ.get(period, set()) - self._seen

    def upcoming(self) -> list[tuple[int, int]]:
        """``(period, lower bound of its first start in ps)`` of every upcoming period,
        earliest first."""
        if not self._candidates:
            return []
        now = int(self.sim.now)
        periods, rows = [], []
        for p in sorted(self._candidates):
            roots = self._roots[p]
            if any(w <= self._seen for _, w in roots):
                periods.append(p)
                rows.append([r for r, _ in roots])
        if not periods:
            return []
        # the start bound of each root: its compute gap after the latest lower bound of its
        # dependencies' ends (a finished op: its end; an unfinished one: no earlier than now,
        # nor than its start bound plus its communication time's bound, self._dur), walked
        # over the unfinished ops in the executor
        flat = np.fromiter((r for rs in rows for r in rs), dtype=np.uint32)
        bounds = self.sim.engine.start_bounds(flat, self._dur, now).tolist()
        out, at = [], 0
        for p, rs in zip(periods, rows, strict=True):
            out.append((p, max(min(bounds[at : at + len(rs)]), now)))
            at += len(rs)
        out.sort(key=lambda x: (x[1], x[0]))
        return out

    # -- intents -----------------------------------------------------------------------------

    def _signature(self, row: int) -> tuple:
        a = self._a
        r0, r1 = a["ranks_offsets"][row], a["ranks_offsets"][row + 1]
        return (
            int(a["kind"][row]),
            int(a["algorithm"][row]),
            int(a["size_bytes"][row]),
            int(a["m2n_senders"][row]),
            a["ranks"][r0:r1].tobytes(),
        )

    def _op_flows(self, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(src, dst, bytes) each op would send, by the executor's own dry run; ops with the
        same kind, algorithm, size and ranks share one run. An auto-tuned all-reduce over two
        or more servers is also run with each algorithm the tuner may pick (for
        :meth:`_tuned`), in the same batch: the executor computes the tuner's view of a rank
        set's paths once per batch, not once per dry run."""
        sigs = [self._signature(int(r)) for r in rows]
        todo = {s: int(r) for s, r in zip(sigs, rows, strict=True) if s not in self._flows}
        if todo:
            alts = {s: r for s, r in todo.items() if s not in self._alt_flows and self._tunable(r)}
            codes = [self._algorithm_code(name) for name in self.TUNABLE] if alts else []
            reps = list(todo.values()) + [r for _ in codes for r in alts.values()]
            algos = [-1] * len(todo) + [c for c in codes for _ in alts]
            f = self.sim.engine.op_flows(
                np.array(reps, dtype=np.int64), algorithm=np.array(algos, dtype=np.int64)
            )
            ends = np.cumsum(f["counts"])
            src, dst, nbytes = (f[k].astype(np.int64) for k in ("src", "dst", "size_bytes"))
            runs = [
                (src[a:b], dst[a:b], nbytes[a:b])
                for a, b in zip(np.r_[0, ends[:-1]].tolist(), ends.tolist(), strict=True)
            ]
            for i, s in enumerate(todo):
                self._flows[s] = runs[i]
            for k, s in enumerate(alts):
                self._alt_flows[s] = tuple(runs[len(todo) + c * len(alts) + k] for c in range(len(codes)))
        return [self._flows[s] for s in sigs]

    def _algorithm_code(self, name: str) -> int:
        return list(self._a["algorithm_names"]).index(name)

    def _tunable(self, row: int) -> bool:
        """Whether op ``row`` is an all-reduce the executor's tuner picks ring or tree for: its
        algorithm is ``auto`` and its ranks span two or more servers (on one: always a ring)."""
        a = self._a
        kinds, algos = list(a["kind_names"]), list(a["algorithm_names"])
        if "all_reduce" not in kinds or "auto" not in algos:
            return False
        if int(a["kind"][row]) != kinds.index("all_reduce") or int(a["algorithm"][row]) != algos.index(
            "auto"
        ):
            return False
        offsets = a["ranks_offsets"]
        ranks = np.asarray(a["ranks"][offsets[row] : offsets[row + 1]], dtype=np.int64)
        return np.unique(self._gpu_server[ranks]).size >= 2

    def intent(self, key: int) -> Intent:
        """The Intent of period ``key`` (granularity "op": of op row ``key``), cached."""
        if key in self._intents:
            return self._intents[key]
        rows = np.array([key], dtype=np.int64) if self.granularity == "op" else self._period_rows[key]
        intent = self._intent_of(rows)
        self._intents[key] = intent
        return intent

    def remaining(self, period: int) -> Intent:
        """The Intent of period ``period``'s ops that have not finished (a re-plan call's: what
        a new plan would still carry); the whole period's when none has finished or started.
        An op that started keeps the algorithm it runs whatever the plan (the tuner picks at
        its start), so its flows are that algorithm's and it is not in ``tuned``."""
        rows = self._period_rows[period]
        left = rows[self.sim.engine.op_ends(rows.astype(np.uint32, copy=False)) < 0]
        if not len(left):
            return self.intent(period)
        ran = None
        auto = self._auto_all_reduce(left)
        if auto.any():  # (-1: not an auto-tuned all-reduce, or not started)
            ran = np.where(auto, self.sim.engine.op_algorithms_ran(left.astype(np.uint32, copy=False)), -1)
            if len(left) == len(rows) and (ran < 0).all():
                return self.intent(period)
        elif len(left) == len(rows):
            return self.intent(period)
        return self._intent_of(left, ran)

    def _auto_all_reduce(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` are all-reduces with algorithm ``auto`` (a superset of the
        ops the tuner picks for: :meth:`_tunable`)."""
        a = self._a
        kinds, algos = list(a["kind_names"]), list(a["algorithm_names"])
        if "all_reduce" not in kinds or "auto" not in algos:
            return np.zeros(len(rows), dtype=bool)
        kind = np.asarray(a["kind"])[rows] == kinds.index("all_reduce")
        return kind & (np.asarray(a["algorithm"])[rows] == algos.index("auto"))

    def _ran_flows(self, rows: np.ndarray, ran: np.ndarray, flows: list) -> tuple[list, np.ndarray]:
        """``flows`` with each started auto-tuned all-reduce's replaced by the dry run of the
        algorithm it runs (``ran``: the engine's algorithm code of each started auto-tuned
        all-reduce, -1 for every other row), and which rows those are."""
        names = _engine.op_algorithms()
        fixed = np.zeros(len(rows), dtype=bool)
        out = list(flows)
        for i in np.flatnonzero(ran >= 0).tolist():
            name = names[int(ran[i])]
            alts = self._alt_flows.get(self._signature(int(rows[i])))
            if name in self.TUNABLE and alts is not None:
                out[i] = alts[self.TUNABLE.index(name)]
                fixed[i] = True
        return out, fixed

    def _intent_of(self, rows: np.ndarray, ran: np.ndarray | None = None) -> Intent:
        a = self._a
        flows = self._op_flows(rows)
        fixed = np.zeros(len(rows), dtype=bool)
        if ran is not None:
            flows, fixed = self._ran_flows(rows, ran, flows)
        # ops with the same signature send the same pairs (one cached tuple): fold them first,
        # each distinct one's bytes times its count, so a period of 21 k all-to-alls sorts the
        # pairs of the few distinct ones, not 20 M; totals summed exactly, in integers
        count: dict[int, int] = {}
        distinct: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for f in flows:
            k = id(f)
            if k in count:
                count[k] += 1
            else:
                count[k] = 1
                distinct[k] = f
        src = np.concatenate([f[0] for f in distinct.values()])
        dst = np.concatenate([f[1] for f in distinct.values()])
        nbytes = np.concatenate([f[2] * count[k] for k, f in distinct.items()])
        gpus = max(self.sim.spec.num_gpus, 1)
        key_pair = src * gpus + dst
        order = np.argsort(key_pair, kind="stable")
        sorted_pair = key_pair[order]
        if len(sorted_pair):
            starts = np.flatnonzero(np.r_[True, sorted_pair[1:] != sorted_pair[:-1]])
            pair = sorted_pair[starts]
            total = np.add.reduceat(nbytes[order], starts)
        else:
            pair = total = np.zeros(0, dtype=np.int64)
        keep = total > 0
        pair, total = pair[keep], total[keep]
        kinds = a["kind"][rows]
        sent_of = {k: int(f[2].sum()) for k, f in distinct.items()}
        sent = np.array([sent_of[id(f)] for f in flows], dtype=np.int64)
        by_kind = np.bincount(kinds, weights=sent, minlength=len(self._kind_names))
        top = int(np.argmax(by_kind)) if by_kind.sum() > 0 else int(kinds[0])
        groups: dict[bytes, np.ndarray] = {}
        offsets = a["ranks_offsets"]
        for r in rows:
            ranks = a["ranks"][offsets[r] : offsets[r + 1]]
            k = ranks.tobytes()
            if k not in groups:
                groups[k] = ranks.astype(np.int64)
        first = int(rows[0])
        intent = Intent(
            period=int(a["period"][first]),
            iteration=int(a["iteration"][first]),
            stage=self._stage_names[a["stage"][first]],
            phase=self._phase_names[a["phase"][first]],
            primitive=self._kind_names[top],
            ops=rows.astype(np.int64),
            groups=tuple(groups.values()),
            src=pair // gpus,
            dst=pair % gpus,
            bytes=total,
            job=DEFAULT_JOB if self._job is None else str(self._job[first]),
        )
        tuned = self._tuned(rows[~fixed], [f for f, x in zip(flows, fixed, strict=True) if not x], count)
        if tuned:
            intent = dataclasses.replace(intent, tuned=tuned)
        return intent

    #: algorithms the executor's tuner picks from for an all-reduce over several servers
    TUNABLE = ("ring", "tree")

    def _tuned(self, rows: np.ndarray, flows: list, count: dict) -> tuple:
        """Intent.tuned: per signature of the rows' auto-tuned all-reduces over two or more
        servers, the flows the dry run chose, then those of each algorithm the tuner may pick
        (dry runs with the algorithm forced), all times the signature's count in the period."""
        a = self._a
        kinds, algos = list(a["kind_names"]), list(a["algorithm_names"])
        if "all_reduce" not in kinds or "auto" not in algos:
            return ()
        ar, auto = kinds.index("all_reduce"), algos.index("auto")
        out, done = [], set()
        offsets = a["ranks_offsets"]
        for r, f in zip(rows.tolist(), flows, strict=True):
            if id(f) in done or int(a["kind"][r]) != ar or int(a["algorithm"][r]) != auto:
                continue
            done.add(id(f))
            ranks = np.asarray(a["ranks"][offsets[r] : offsets[r + 1]], dtype=np.int64)
            if np.unique(self._gpu_server[ranks]).size < 2:
                continue  # one server: always a ring
            sig = self._signature(r)
            alts = self._alt_flows.get(sig)
            if alts is None:  # (a signature dry-run before it was tunable: not in a trace's run)
                alts = []
                for name in self.TUNABLE:
                    g = self.sim.engine.op_flows(np.array([r], dtype=np.int64), algorithm=algos.index(name))
                    alts.append(tuple(g[k].astype(np.int64) for k in ("src", "dst", "size_bytes")))
                alts = self._alt_flows[sig] = tuple(alts)
            c = count[id(f)]
            out.append(tuple((x[0], x[1], x[2] * c) for x in (f, *alts)))
        return tuple(out)

    # -- the fabric now ----------------------------------------------------------------------

    def view(self, start_ps: int) -> FabricView:
        """The fabric as the controller sees it now, for a period that starts at ``start_ps``.
        Within one boundary the engine does not run, so what the view reads from it changes
        only when a plan is applied (``_call`` then forgets it): it is read once per
        boundary and plan, and each view gets its own copies of the arrays."""
        sim = self.sim
        now = int(sim.now)
        if self._state is None or self._state[0] != now:
            plan = sim.current_circuits()
            lit = sim.circuits_lit_at() <= now
            down = sim.down_links()
            failed = np.isin(self.ocs_ports, down) if down else np.zeros(len(self.ocs_ports), dtype=bool)
            used = np.zeros(sim.spec.num_links, dtype=bool)
            used[plan.a] = True
            used[plan.b] = True
            free = ~used[self.ocs_ports] & ~failed
            active = tuple(int(p) for p in sim.engine.active_periods())
            self._state = (now, plan, lit, failed, free, active)
        _, plan, lit, failed, free, active = self._state
        return FabricView(
            spec=sim.spec,
            now_ps=now,
            plan=CircuitTable(ocs=plan.ocs.copy(), a=plan.a.copy(), b=plan.b.copy()),
            lit=lit.copy(),
            ocs_ports=self.ocs_ports,
            failed=failed.copy(),
            free=free.copy(),
            slack_ps=int(start_ps) - now,
            t_ocs_ps=sim.t_ocs_ps,
            active_periods=active,
        )

    # -- one boundary ------------------------------------------------------------------------

    def handle(self, boundary: dict) -> None:
        """Call the controller once per period (or op) of the pending boundary, in the order
        they became ready, and apply each returned plan."""
        ops, periods, starts = boundary["op"], boundary["period"], boundary["start_ps"]
        keys = ops if self.granularity == "op" else periods
        self._state = None  # (the engine ran since the last boundary)
        seen: dict[int, int] = {}
        for k, s in zip(keys.tolist(), starts.tolist(), strict=True):
            seen[k] = min(seen.get(k, s), s)
        for key, start in seen.items():
            if self.granularity == "period":
                self._see(key)
            self._call(key, start)
        ended = boundary.get("ended")
        if self.replan and ended is not None and len(ended):
            gone = tuple(sorted(set(ended.tolist())))
            active = tuple(int(p) for p in self.sim.engine.active_periods())
            pick = getattr(self.controller, "replan_periods", None)
            for period in active if pick is None else pick(gone, active):
                if period in self._seen and period not in seen:
                    self.replan_calls += 1
                    self._call(period, int(self.sim.now), ended=gone)
        # (a boundary may hold only periods that went idle: then only look-ahead and re-plan calls)
        if self.lookahead:
            for period, start in self.upcoming():
                self.ahead_calls += 1
                self._call(period, start, ahead=True)

    def _call(self, key: int, start_ps: int, ahead: bool = False, ended: tuple = ()) -> None:
        intent = self.remaining(key) if ended else self.intent(key)
        view = self.view(start_ps)
        if ahead:
            view = dataclasses.replace(view, ahead=True)
        elif ended:
            view = dataclasses.replace(view, ended=ended)
        where = f"controller {self.name}, period {intent.period}"
        if self._job is not None:
            where += f" of job {intent.job!r}"
        if self.granularity == "op":
            where += f" (op row {key})"
        elif ahead:
            where += " (look-ahead)"
        elif ended:
            where += " (re-plan)"
        t0 = time.perf_counter()
        try:
            plan = self.controller.plan(intent, view)
        except Exception as exc:
            raise SpecError(f"{where}: plan() raised {type(exc).__name__}: {exc}") from exc
        finally:
            self.calls += 1
            self.wall_s += time.perf_counter() - t0
        if plan is None:
            return
        if not isinstance(plan, CircuitTable):
            got = type(plan).__name__
            raise SpecError(f"{where}: plan() returned {got}, expected a CircuitTable or None")
        # checked even when it equals the plan in force: a returned plan never uses a masked port
        self.sim.check_plan(plan, where=where)
        if same_plan(plan, view.plan):
            return
        self._state = None  # (what view() read changes with the plan)
        self.sim.apply_circuits_now(plan, period=intent.period, job=intent.job, where=where)
        self.changes += 1


def controller_name(controller) -> str:
    """A controller's name: its ``name`` attribute if that is a string, else its class name."""
    name = getattr(controller, "name", None)
    return name if isinstance(name, str) else type(controller).__name__
