"""``sweep()``: resolve the grid, resume what is on disk, run the rest on an executor and
gather the rows in grid order.
"""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from ..errors import SpecError
from ..units import format_rate
from ..validators import integer
from .executors import EXECUTORS, _check_picklable, _in_spawned_worker, _run_local, _run_ray, _run_serial
from .memory import parse_bound
from .points import _grid, _identify
from .resume import _atomic_parquet, _read_done
from .rows import _table

_log = logging.getLogger("rfabric.sweep")


def sweep(
    fabrics=None,
    links=("200Gbps",),
    gpus=(128,),
    workload=None,
    controller=None,
    *,
    executor: str = "local",
    out: str | Path | None = "sweep.parquet",
    seed: int = 0,
    progress: bool = True,
    workers: int | None = None,
    prices=None,
    gpu_price_usd: float | None = None,
    settings: Mapping | None = None,
    ray_address: str | None = None,
    rewrites="offered",
    where: str = "sweep",
    max_memory=None,
) -> pa.Table:
    """Run one simulation per point of fabrics x links x gpus x workloads; return the rows.

    Parameters
    ----------
    fabrics : list or dict
        Fabric specs (module docstring): names, Topology subclasses, factories, tables.
    links : list of str or int
        Link speeds ("200Gbps" or bit/s): every NIC and switch link of the fabric.
    gpus : list of int
        Scales (GPU counts).
    workload : workload spec, list or dict
        What each point runs (module docstring).
    controller : optional
        Passed to ``rf.simulate(controller=...)``: a Controller instance (each point runs a
        fresh deep copy), a class (instantiated per point), a name (``rfabric.catalog.CONTROLLERS``:
        ``"stage_aware"``, ``"uniform"``, ...; or a class name in ``rf.controllers``), or a
        dict ``{fabric label: controller}``, or ``"own"``: each fabric's own
        (``Topology.controller()``: StageAware on RFabric, MixNet's on MixNet, TopoOpt's
        static plan; for flow workloads, which have no periods, the initial circuits).
        None: the fabric's initial circuits throughout.
        The row records its name.
    rewrites : {"offered", "none", "own"} or list of rfabric.rewrites.Rewrite
        The fairness rule for workload rewrites (docs/fairness.md; DESIGN §12): a comparison
        changes the fabric and nothing else. ``"offered"`` (default): every point gets every
        rewrite any controller of the sweep asks for (``Controller.rewrites()``: the
        stage-aware controller's weight-sync forest), applied at its own fabric's locality
        (``Topology.locality()``), whatever its own controller. ``"none"``: no point gets a
        rewrite (the trace's own algorithms everywhere; the stage-aware controller then plans
        the weight sync like any period). ``"own"``: each point its controller's rewrites only
        (the rule broken on purpose, for ablations). A list: exactly those rewrites at every
        point. Rows record the rule (``rewrite_rule``) and what ran (``rewrites``).
    executor : {"local", "serial", "ray"}
        "local" needs the ``if __name__ == "__main__":`` guard in a script (else SweepError).
    out : path or None
        Parquet file of the rows; ``OUT.parts/`` holds finished points until all are done, and
        a rerun resumes from them. None: keep nothing on disk (no resume).
    seed : int
        Sweep seed; each point's seeds derive from it (module docstring).
    progress : bool
        A progress bar (tqdm) on stderr, after a line saying how many points were resumed from
        ``out`` and how many will run (also logged at INFO on ``rfabric.sweep``).
    workers : int, optional
        Processes (local) or CPUs of a local Ray instance; default all cores.
    prices : optional
        Component prices (``rf.cost.load_prices``); default Table 4 of the paper.
    gpu_price_usd : float, optional
        USD per GPU: fills ``cluster_cost_usd`` (the paper gives no GPU price).
    settings : dict, optional
        Extra ``rf.simulate`` settings for every point (``transport``, ``mtu_bytes``, ...).
    ray_address : str, optional
        Ray cluster address for ``executor="ray"`` (default: start a local instance).
    max_memory : str or int, optional
        Each point's memory bound ("6GiB" or bytes): what it may allocate beyond its process's
        baseline (``rfabric.sweeps.memory``). A point past it fails with a SweepError naming
        it; the local executor runs each bounded point in a fresh process and no more at once
        than the machine's available memory holds; Ray reserves the bound from each node's
        memory. Rows report every point's resident peak (``peak_rss_bytes``) either way.

    Returns
    -------
    pyarrow.Table
        ``rfabric.results.SWEEP_SCHEMA``, one row per point in grid order (fabric, link,
        gpus, workload, the last varying fastest). Its schema metadata ``rfabric.sweep.points``,
        ``.resumed``, ``.ran`` and ``.replaced`` (run again because the saved row of the same
        labels no longer matched its config_id) count the points.
    """
    _in_spawned_worker(where)
    if executor not in EXECUTORS:
        raise SpecError(f"{where}: unknown executor {executor!r} (known: {', '.join(EXECUTORS)})")
    integer(seed, f"{where}: seed")
    points = _grid(
        fabrics, links, gpus, workload, controller, seed, prices, gpu_price_usd, settings, where, rewrites
    )

    out_path = Path(out) if out is not None else None
    parts = out_path.with_name(out_path.name + ".parts") if out_path is not None else None
    done = _read_done(out_path, parts) if out_path is not None else {}
    bound = parse_bound(max_memory, where)
    points = [replace(p, max_memory=bound) for p in _identify(points)]
    rows: dict[int, dict] = {p.index: done[p.config_id] for p in points if p.config_id in done}
    todo = [p for p in points if p.index not in rows]
    # saved rows of a point (same fabric, link, scale and workload labels) whose config_id
    # no longer matches: its fabric's tables, its workload's content or a setting changed
    saved = {(r["fabric"], r["link_speed"], r["gpus"], r["workload"]) for r in done.values()}
    replaced = sum((p.fabric.label, format_rate(p.link_bps), p.gpus, p.workload.label) in saved for p in todo)
    counts = {"points": len(points), "resumed": len(rows), "ran": len(todo), "replaced": replaced}
    if out_path is not None:
        note = (
            f" ({replaced} saved with another fabric, workload or settings: recomputed)" if replaced else ""
        )
        message = (
            f"sweep: {len(rows)} of {len(points)} points resumed from {out_path}, {len(todo)} to run{note}"
        )
        _log.info(message)
        if progress:
            print(message, file=sys.stderr)

    bar = None
    if progress:
        from .._optional import progress_bar

        bar = progress_bar(len(points), len(points) - len(todo), "sweep", "point")

    def on_row(row: dict) -> None:
        rows[row["point"]] = row
        if parts is not None:
            parts.mkdir(parents=True, exist_ok=True)
            _atomic_parquet(_table([row]), parts / f"{row['config_id']}.parquet")
        if bar is not None:
            bar.set_postfix_str(f"{row['fabric']} {row['link_speed']} {row['gpus']} GPUs", refresh=False)
            bar.update(1)

    try:
        if todo:
            if executor == "serial":
                _run_serial(todo, on_row)
            elif executor == "local":
                _check_picklable(todo, executor)
                _run_local(todo, on_row, workers, bound)
            else:
                _check_picklable(todo, executor)
                _run_ray(todo, on_row, ray_address, workers, bound)
    finally:
        if bar is not None:
            bar.close()

    table = _table([dict(rows[p.index], point=p.index) for p in points])
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), **{f"rfabric.sweep.{k}": str(v) for k, v in counts.items()}}
    )
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_parquet(table, out_path)
        if parts.is_dir():
            shutil.rmtree(parts)
    return table
