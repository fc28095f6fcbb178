"""Sweeps (``rf.sweep``): a grid of fabrics x link speeds x scales x workloads, one simulation per point.

``sweep(fabrics=..., links=..., gpus=..., workload=...)`` runs every point of the grid as an
independent ``rf.simulate`` call, prices each point's fabric (``rf.cost``), and returns one
row per point (``SWEEP_SCHEMA`` in ``rfabric.results``). ``rfabric sweep CONFIG.toml`` reads the
same arguments from a file (``load_config``).

Modules (docs/python-layers.md): ``fabrics`` and ``workloads`` (the specs below),
``points`` (the grid and its seeds), ``digests`` (``config_id``), ``rows`` (one point run into
its row), ``executors``, ``resume`` (output on disk), ``runner`` (``sweep()``) and ``configs``
(TOML files).

Specifications
--------------
fabric
    A name (``"FT"``, ``"FT-OS"`` = FatTree 3:1, ``"FT-OS4"``, ``"RO"``, ``"TopoOpt"``,
    ``"MixNet"``, ``"RFabric"``; class names such as ``"FatTree"`` and family names such as
    ``"fat_tree"`` or a ``rf.topologies.register``-ed family work too); a Topology subclass; a
    factory ``f(gpus, link_bps) -> Topology``; or a dict ``{"family": ..., "name": label,
    **params}`` (constructor keyword arguments, e.g. ``oversubscription = 4``). Give
    ``fabrics`` as a list, or as a dict ``{label: spec}`` to choose the row labels.
workload
    A ``rf.traces.Trace`` or ``rf.Flows`` (used at every scale), or a generator spec:
    ``{"generate_rl": {...}}`` (keyword arguments of ``rf.traces.generate_rl``;
    ``train_gpus``/``gen_gpus`` default to half of the point's GPUs each),
    ``{"flows": {"pattern": "permutation" | "all_to_all" | "incast", "size": "4MiB",
    "fan_in": 16}}`` or ``{"trace": "path.arrow"}``; or a factory ``f(gpus, seed)``.
    Several: a list, or a dict ``{label: workload}``.

Seeds
-----
Each point's engine seed is a stable hash (SHA-256, not Python's ``hash``) of the sweep seed
and the point's key; a generated workload's seed is a hash of the sweep seed, the workload's
label and the GPU count, so every fabric and link speed at one scale replays the same
workload. Rows therefore do not depend on the executor, the number of workers or the order
in which points finish.

Output and resume
-----------------
Each finished point is written at once as one Parquet file in ``OUT.parts/`` (written to a
temporary name, then renamed: a point is either whole or absent). When every point is done,
the rows are gathered in grid order into ``OUT`` (Parquet; same write-then-rename) and the
parts folder is removed. Running the same sweep again, after an interruption, a failed point
or a finished run, skips every point already in ``OUT`` or ``OUT.parts/``: points are matched
by ``config_id``, a BLAKE2b hash of what determines their row: the built fabric's tables
(every array of its ``NetworkSpec``: nodes, links, rates, latencies, buffers, circuits, names,
kinds, flags, routing, rings), the workload's content (the trace's table with its metadata,
the flows' arrays), the controller (its class and pickled state), the run settings, the
seeds, the prices and the rfabric version. To hash them, the sweep builds every point's fabric
and makes every workload (once per workload and scale; the made workload is what the point
then runs) in the calling process before running anything. A changed ``build()``, trace file
or factory therefore never reuses a stale row; a change to rfabric's or a controller's code
under the same version is not seen (use another ``out=``). The sweep says how many points it
resumed and ran (stderr with ``progress``, the ``rfabric.sweep`` logger at INFO, and the
returned table's schema metadata ``rfabric.sweep.resumed``/``ran``/``replaced``).

Executors
---------
``"local"`` (default): a process pool (``spawn``) over the machine's cores (``workers=``); a
script calling ``sweep`` needs the ``if __name__ == "__main__":`` guard (workers re-import
it), else ``SweepError`` says so.
``"serial"``: one point after another in this process. ``"ray"``: Ray tasks, on the cluster
``ray_address`` names or on a local Ray instance (``pip install 'rfabric[ray]'``).
"""

from __future__ import annotations

from .configs import load_config, run_config
from .digests import fabric_digest, workload_digest
from .executors import EXECUTORS
from .fabrics import FABRIC_NAMES, resolve_fabric
from .placement import PLACEMENT_SWEEP_SCHEMA, placement_sweep
from .points import derive_seed
from .runner import sweep
from .workloads import pattern_flows, resolve_workload

__all__ = [
    "sweep",
    "placement_sweep",
    "PLACEMENT_SWEEP_SCHEMA",
    "load_config",
    "run_config",
    "resolve_fabric",
    "resolve_workload",
    "pattern_flows",
    "derive_seed",
    "fabric_digest",
    "workload_digest",
    "EXECUTORS",
    "FABRIC_NAMES",
]
