"""The stage-aware controller's gain check: a period's time on a plan, predicted without a
simulation (step 10 of :class:`~rfabric.controllers.StageAwareController`)."""

from __future__ import annotations

import numpy as np

__all__ = ["Predictor"]


class Predictor:
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
    over its traced receivers in proportion to their own bytes.

    It keeps two forwarding states, each with the (failed ports, plan) it was last set to: a
    check lays the demand on the candidate and on the plan in force, so the plan in force
    (the same from check to check until one commits) keeps its tables, and only the keys its
    paths had not asked for are built (up*/down* tables build a key on its first lookup).
    A state set to the same failed ports and plan again routes exactly as a fresh one: each
    plan applied takes a new up*/down* order from the channels alone."""

    budget = 4096
    #: pairs of one tuned group's algorithm laid out one by one for the tuner's pick (beyond:
    #: sampled as the rest)
    exact_pairs = 20_000
    #: forwarding states kept (the plan in force and the candidate)
    states = 2

    def __init__(self, spec):
        self.spec = spec
        self.rate = spec.links.rate_bps.astype(np.float64)
        self.nvlink = np.asarray(spec.links.kind == "nvlink")
        self.net = np.asarray(spec.links.kind != "nic") & ~self.nvlink
        # [forwarding, its failed links, (failed links, plan) it was last set to], most
        # recently used last
        self._fwds: list[list] = []

    def sample(self, intent, tpl, budget=None):
        """The (sender GPUs, receiver GPUs, bytes) of the paths to trace for the intent."""
        return self._sample(intent.src, intent.dst, intent.bytes, tpl.ts, tpl.td, tpl.net, budget)

    def variants(self, intent, lay):
        """What the period may send on another plan than the one in force, for
        :meth:`time_ps`: ``None`` when it sends the intent's flows on any plan, else
        ``(fixed, groups)``, the sampled paths of the flows no plan changes and, per group of
        ``intent.tuned``, for each algorithm the executor may pick for it, its sampled paths
        and every one of its pairs (for the tuner's pick).

        An all-reduce with algorithm ``auto`` picks ring or tree on the paths at its start
        (the executor's tuner), so the intent's flows (its dry run on the plan in force) are
        not what it sends on a new plan: a group whose ring's cross-rail hops all take one
        circuit of the candidate runs a tree there, and one whose tree would squeeze through
        it a ring."""
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

        def exact(src, dst, nbytes):
            # every pair on its own path, no ToR-pair sampling: the tuner's bandwidth term is
            # the algorithm's busiest port, often a NIC, which the sample (pairs that leave
            # their ToR) does not see whole
            u, inv = np.unique(np.asarray(src, np.int64) * g + np.asarray(dst, np.int64), return_inverse=True)
            w = np.bincount(inv, weights=np.asarray(nbytes, np.float64))
            if u.size > self.exact_pairs:
                return paths(src, dst, nbytes)
            return (u // g).tolist(), (u % g).tolist(), w

        fixed = paths(k[keep] // g, k[keep] % g, left[keep])
        return fixed, [[(paths(*f), exact(*f)) for f in grp[1:]] for grp in intent.tuned]

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
        the flows of the algorithm the executor's tuner picks on this plan, as it picks at a
        large op's start (:meth:`_tuner_pick`; ``paths`` is then unused)."""
        fwd = self._forwarding(plan, set(view.ocs_ports[view.failed].tolist()))
        if variants is None:
            load = self._load(fwd, paths)
        else:
            fixed, groups = variants
            load = self._load(fwd, fixed)
            for alts in groups:
                pick = self._tuner_pick([self._load(fwd, whole) for _, whole in alts])
                load = load + self._load(fwd, alts[pick][0])
        busy = np.flatnonzero(load)
        if not busy.size:
            return 0, 0
        t = load[busy] * 8 / self.rate[busy // 2] * 1e12
        net = self.net[busy // 2]
        return int(np.ceil(t.max())), int(np.ceil(t[net].max(initial=0.0)))

    def _tuner_pick(self, loads: list[np.ndarray]) -> int:
        """Of one group's per-algorithm port loads (ring first, then tree; every pair of the
        group on its path), the index of the one the executor's tuner picks: for an op of many
        bytes its bandwidth term, the algorithm's own busiest port over its rate (NVLink aside:
        the tuner counts a GPU's copies in its pipeline terms), decides; a tie goes to the
        ring, as in the tuner. Charging every group the most any algorithm puts on a port
        instead (a bound) charged the 36 all-reduces not yet started of a 2,048-GPU MoE
        re-plan their trees, 6.53 s, where the rings they ran took 1.09 s."""
        per_byte = np.repeat(np.where(self.nvlink, 0.0, 8e12 / self.rate), 2)  # ps per byte, per port
        times = [float((ld * per_byte).max(initial=0.0)) for ld in loads]
        return int(np.argmin(times))

    def _forwarding(self, plan, down: set[int]):
        """A forwarding state with links ``down`` failed and ``plan`` applied: the one kept
        in that state if there is one, else the least recently used one (or a new one) set
        to it."""
        from ..forwarding import Forwarding

        state = (frozenset(down), plan.ocs.tobytes(), plan.a.tobytes(), plan.b.tobytes())
        for i, entry in enumerate(self._fwds):
            if entry[2] == state:
                self._fwds.append(self._fwds.pop(i))
                return entry[0]
        if len(self._fwds) < self.states:
            entry = [Forwarding(self.spec), set(), None]
        else:
            entry = self._fwds.pop(0)
        fwd, was = entry[0], entry[1]
        for link in was - down:
            fwd.restore_link(link)
        for link in down - was:
            fwd.fail_link(link)
        # (always applied, even when the plan is the one in place: a new up*/down* order then,
        # from the channels alone, so the tables do not depend on what the state held before)
        fwd.apply_circuits(plan)
        entry[1], entry[2] = set(down), state
        self._fwds.append(entry)
        return fwd

    def _load(self, fwd, paths) -> np.ndarray:
        """Bytes per port (``2 * link + direction``) of the sampled paths on ``fwd``."""
        load = np.zeros(2 * len(self.rate))
        s, d, w = paths
        if not len(s):
            return load
        path = fwd._fwd.path
        ports = [path(a, b, 0) for a, b in zip(s, d, strict=True)]
        lens = np.fromiter((p.size for p in ports), dtype=np.int64, count=len(ports))
        flat = np.concatenate(ports).astype(np.int64)
        load += np.bincount(flat, weights=np.repeat(w, lens), minlength=load.size)
        return load
