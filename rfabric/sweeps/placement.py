"""The placement sweep (issue 26 item 2): the same jobs under each placement policy on each
fabric, one row per (fabric, policy, job).

``placement_sweep(fabrics, jobs, policies, gpus=...)`` places the jobs with ``rf.place``, runs
them together (``rf.simulate(fabric, [rf.Job(...), ...], record_flows=True)``) and, with
``alone=True``, runs each job by itself on the same GPUs, so a row says what sharing the fabric
cost the job under that placement: its iteration time together and alone, the slowdown of its
flows (``res.flows["slowdown"]``: FCT over the flow's ideal on an idle path) and the deepest
queue at its ToRs and at the packet switches above the ToRs (``res.links["max_queue_bytes"]``,
classified by tier with ``rf.placement.gpu_groups``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..errors import SpecError
from ..placement import POLICIES, footprint, gpu_groups, place
from ..rewrites import resolve_rewrites
from ..units import parse_rate
from .fabrics import resolve_fabric
from .points import REWRITE_RULES, _resolve_controller, derive_seed
from .rows import _rewrites_text

__all__ = ["placement_sweep", "PLACEMENT_SWEEP_SCHEMA", "tier_queues"]

#: The rows of :func:`placement_sweep`, one per (fabric, policy, job).
PLACEMENT_SWEEP_SCHEMA = pa.schema(
    [
        ("fabric", pa.string()),
        ("topology", pa.string()),
        ("policy", pa.string()),
        ("job", pa.string()),
        ("gpus", pa.int64()),
        ("servers", pa.int64()),
        ("tors", pa.int64()),
        ("pods", pa.int64()),
        ("shared_tors", pa.int64()),
        ("iteration_time_ps", pa.int64()),
        ("alone_iteration_time_ps", pa.int64()),
        ("slowdown_vs_alone", pa.float64()),
        ("flows", pa.int64()),
        ("fct_slowdown_mean", pa.float64()),
        ("fct_slowdown_p99", pa.float64()),
        ("alone_fct_slowdown_p99", pa.float64()),
        ("tor_max_queue_bytes", pa.int64()),
        ("alone_tor_max_queue_bytes", pa.int64()),
        ("spine_max_queue_bytes", pa.int64()),
        ("makespan_ps", pa.int64()),
        ("rewrites", pa.string()),
        ("seed", pa.int64()),
        ("wall_s", pa.float64()),
    ]
)


def tier_queues(fabric, links: pa.Table, tors=None) -> dict:
    """The deepest egress queue (``max_queue_bytes``) per tier of a run's ``res.links``:
    ``tor`` (ports of the packet switches GPUs' NICs attach to, or only of the ToR nodes
    ``tors`` when given), ``spine`` (ports of the other packet switches: aggregation, spine,
    core; None when the fabric has none, as RFabric and TopoOpt, whose upper tiers are
    optical). None too under the flow backend, which has no queues."""
    from ..spec import NODE_KINDS

    spec = fabric if not hasattr(fabric, "to_spec") else fabric.to_spec()
    groups = gpu_groups(spec)
    all_tors = np.unique(groups.tor_node[groups.tor_node >= 0])
    want = all_tors if tors is None else np.asarray(tors, dtype=np.int64)
    sender = links["src"].to_numpy()
    depth = links["max_queue_bytes"]
    if depth.null_count == len(depth) and len(depth):
        return {"tor": None, "spine": None}
    depth = depth.to_numpy(zero_copy_only=False)
    eps = spec.nodes.kind[sender] == NODE_KINDS["eps"]
    at_tor = np.isin(sender, want)
    above = eps & ~np.isin(sender, all_tors)
    return {
        "tor": int(depth[at_tor].max()) if at_tor.any() else None,
        "spine": int(depth[above].max()) if above.any() else None,
    }


def _named(items, what: str) -> list[tuple[str, object]]:
    if isinstance(items, Mapping):
        return [(str(k), v) for k, v in items.items()]
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        items = [items]
    return [(None, v) for v in items]


def _job_size(workload, label: str) -> int:
    from ..flows import Flows
    from ..traces import Trace

    if isinstance(workload, Trace):
        if "job" in workload.table.column_names:
            raise SpecError(
                f"placement_sweep: job {label!r} is a trace of several jobs (it has a 'job' column); "
                "the sweep places and reports whole jobs: pass each job's trace on its own"
            )
        return workload.gpus
    if isinstance(workload, Flows):
        return int(max(workload.src.max(), workload.dst.max())) + 1 if len(workload) else 0
    raise SpecError(f"placement_sweep: job {label!r} is a {type(workload).__name__}, not a Trace or Flows")


def _finished(ps):
    return None if ps is None or ps < 0 else int(ps)


def _stats(flows: pa.Table, job: str | None) -> tuple[int, float | None, float | None]:
    if flows.num_rows == 0:
        return 0, None, None
    s = flows["slowdown"].to_numpy(zero_copy_only=False).astype(np.float64)  # nulls: NaN
    if job is not None:
        s = s[np.asarray(flows["job"].to_pylist()) == job]
    s = s[~np.isnan(s)]
    if s.size == 0:
        return 0, None, None
    return int(s.size), float(s.mean()), float(np.percentile(s, 99))


def placement_sweep(
    fabrics,
    jobs,
    policies=("packed", "spread"),
    *,
    gpus: int,
    link="200Gbps",
    alone: bool = True,
    controller="own",
    rewrites="offered",
    seed: int = 0,
    placement_seed: int = 0,
    **settings,
) -> pa.Table:
    """Run the same jobs under each placement policy on each fabric: one row per (fabric,
    policy, job), ``PLACEMENT_SWEEP_SCHEMA`` (docs/explanation/shared-clusters.md).

    Parameters
    ----------
    fabrics : list or dict
        Fabric specs as ``rf.sweep`` takes them (``"FT"``, ``"FT-OS"``, ``"RFabric"``, a
        Topology subclass, a factory, a table; a dict chooses the row labels), built at
        ``gpus`` GPUs and ``link``; or built Topology objects.
    jobs : list or dict
        The jobs' workloads (``rf.traces.Trace`` or ``rf.Flows``, ranks from 0); a dict
        ``{name: workload}`` names them (default ``job0``, ``job1``, ...). A job's size is its
        workload's GPU count.
    policies : list or dict
        ``rf.place`` policies (names of ``rf.placement.POLICIES`` or explicit GPU lists; a dict
        ``{label: policy}`` names explicit ones).
    gpus : int
        GPUs of each fabric.
    alone : bool
        Also run each job by itself on the GPUs the policy gave it (the ``alone_*`` columns
        and ``slowdown_vs_alone``); False leaves them null.
    controller : "own", None, a class or an instance
        Circuit controller of every run: ``"own"`` (default) the fabric's own
        (``rf.controllers.default_for``), a class or a catalog name built fresh per run, an
        instance copied per run.
    rewrites : "offered", "none", "own" or a list of rfabric.rewrites.Rewrite
        Workload rewrites, by ``rf.sweep``'s fairness rule (docs/fairness.md): ``"offered"``
        (default) applies the rewrites any fabric's controller asks for on every fabric (the
        stage-aware controller's weight-sync forest), so fabrics differ in the fabric only;
        ``"own"`` each controller its own; ``"none"`` none; a list: exactly those.
    seed : int
        Engine seed: every run on one fabric uses the same one (a hash of ``seed`` and the
        fabric's label), so the placement is what changes.
    placement_seed : int
        Seed of the ``"random"`` policy.
    **settings
        Further ``rf.simulate`` keyword arguments (``transport=``, ``backend=``, ...).
    """
    from .. import simulation
    from ..controllers import default_for
    from ..jobs import Job
    from ..topologies import Topology

    link_bps = parse_rate(link, name="placement_sweep: link")
    built = []
    for label, spec in _named(fabrics, "fabrics"):
        if isinstance(spec, Topology):
            built.append((label or spec.name, spec))
        else:
            f = resolve_fabric(spec, label, "placement_sweep: fabrics")
            built.append((f.label, f.build(gpus, link_bps)))
    named_jobs = [(name or f"job{i}", w) for i, (name, w) in enumerate(_named(jobs, "jobs"))]
    if not named_jobs:
        raise SpecError("placement_sweep: no jobs")
    sizes = [_job_size(w, name) for name, w in named_jobs]
    pols = []
    for label, pol in _named(policies, "policies"):
        if label is None and not isinstance(pol, str):
            raise SpecError("placement_sweep: give explicit placements as a dict {label: GPU lists}")
        if isinstance(pol, str) and pol not in POLICIES:
            raise SpecError(f"placement_sweep: unknown policy {pol!r} (known: {', '.join(POLICIES)})")
        pols.append((label or pol, pol))
    ctrl_spec = _resolve_controller(controller, "placement_sweep: controller")
    if "record_flows" in settings:
        raise SpecError("placement_sweep: record_flows is always on (the FCT columns come from the flows)")

    from ..flows import Flows

    # flows have no communication periods to plan circuits for: they run on the initial plan
    # under "own" (as rf.sweep's points do)
    only_flows = all(isinstance(w, Flows) for _, w in named_jobs)

    # the fairness rule, as rf.sweep's: the rewrites any controller asks for, on every fabric
    if isinstance(rewrites, str) and rewrites not in REWRITE_RULES:
        raise SpecError(
            f"placement_sweep: rewrites must be one of {', '.join(map(repr, REWRITE_RULES))} or a list "
            f"of rfabric.rewrites.Rewrite, got {rewrites!r}"
        )
    if rewrites == "offered":
        offered = []
        for _, fab in built:
            ctrl = (
                default_for(fab)
                if ctrl_spec == "own"
                else (ctrl_spec() if isinstance(ctrl_spec, type) else ctrl_spec)
            )
            ask = getattr(ctrl, "rewrites", None) if ctrl is not None else None
            offered.extend((ask() if callable(ask) else None) or [])
        run_rewrites = resolve_rewrites(offered, "placement_sweep: rewrites offered by the controllers")
    elif isinstance(rewrites, str):
        run_rewrites = rewrites
    else:
        run_rewrites = resolve_rewrites(rewrites, "placement_sweep: rewrites")
        if isinstance(run_rewrites, str):
            raise SpecError("placement_sweep: rewrites: expected a list of rfabric.rewrites.Rewrite")

    def run(fab, job_list, run_seed):
        kwargs = dict(settings)
        kwargs["rewrites"] = (
            "none"
            if only_flows
            else (list(run_rewrites) if not isinstance(run_rewrites, str) else run_rewrites)
        )
        if ctrl_spec == "own":
            if not only_flows:
                kwargs["controller"] = default_for(fab)
        elif ctrl_spec is not None:
            kwargs["controller"] = ctrl_spec() if isinstance(ctrl_spec, type) else copy.deepcopy(ctrl_spec)
        return simulation.simulate(fab, job_list, seed=run_seed, record_flows=True, **kwargs)

    rows = []
    for label, fab in built:
        run_seed = derive_seed(seed, "placement", label)
        groups = gpu_groups(fab)
        for pol_label, pol in pols:
            placed = place(fab, sizes, pol, seed=placement_seed)
            feet = footprint(fab, placed)
            t0 = time.perf_counter()
            together = run(
                fab, [Job(w, gpus=g, name=n) for (n, w), g in zip(named_jobs, placed, strict=True)], run_seed
            )
            jt = {r["job"]: _finished(r["iteration_time_ps"]) for r in together.jobs.to_pylist()}
            spine = tier_queues(fab, together.links)["spine"]
            together_s = time.perf_counter() - t0
            for (name, w), g, foot in zip(named_jobs, placed, feet, strict=True):
                tor_nodes = np.unique(groups.tor_node[g][groups.tor_node[g] >= 0])
                n_flows, mean, p99 = _stats(together.flows, name)
                row = {
                    "fabric": label,
                    "topology": fab.name,
                    "policy": pol_label,
                    "job": name,
                    "gpus": foot["gpus"],
                    "servers": foot["servers"],
                    "tors": foot["tors"],
                    "pods": foot["pods"],
                    "shared_tors": foot["shared_tors"],
                    "iteration_time_ps": jt[name],
                    "flows": n_flows,
                    "fct_slowdown_mean": mean,
                    "fct_slowdown_p99": p99,
                    "tor_max_queue_bytes": tier_queues(fab, together.links, tor_nodes)["tor"],
                    "spine_max_queue_bytes": spine,
                    "makespan_ps": int(together.run["makespan_ps"]),
                    "rewrites": _rewrites_text(together.run.get("rewrites") or []),
                    "seed": run_seed,
                    "alone_iteration_time_ps": None,
                    "slowdown_vs_alone": None,
                    "alone_fct_slowdown_p99": None,
                    "alone_tor_max_queue_bytes": None,
                }
                row["wall_s"] = together_s
                if alone:
                    t1 = time.perf_counter()
                    res = run(fab, [Job(w, gpus=g, name=name)], run_seed)
                    it = _finished(res.jobs.to_pylist()[0]["iteration_time_ps"])
                    row["alone_iteration_time_ps"] = it
                    if it and row["iteration_time_ps"] is not None:
                        row["slowdown_vs_alone"] = row["iteration_time_ps"] / it
                    row["alone_fct_slowdown_p99"] = _stats(res.flows, name)[2]
                    row["alone_tor_max_queue_bytes"] = tier_queues(fab, res.links, tor_nodes)["tor"]
                    row["wall_s"] += time.perf_counter() - t1
                rows.append(row)
    return pa.Table.from_pylist(rows, schema=PLACEMENT_SWEEP_SCHEMA)
