"""Sweep config files (TOML): ``load_config`` reads one into ``sweep()`` keyword arguments,
``run_config`` runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from ..errors import SpecError, read_toml
from ..validators import file_path, known_keys
from .runner import sweep
from .workloads import _is_workload_spec

_CONFIG_KEYS = {
    "fabrics",
    "links",
    "gpus",
    "workload",
    "workloads",
    "controller",
    "executor",
    "out",
    "seed",
    "progress",
    "workers",
    "prices",
    "gpu_price_usd",
    "settings",
    "ray_address",
    "rewrites",
    "max_memory",
}


def load_config(path) -> dict:
    """Read a sweep config (TOML) into ``sweep()`` keyword arguments. Relative paths in it
    (``out``, ``prices``, trace paths) are taken from the current working folder, as a
    command line's are (not from the config file's folder), and returned absolute."""
    path = file_path(path, "sweep config: path")
    doc = read_toml(path, "sweep config")
    known_keys(doc, _CONFIG_KEYS, str(path))
    if "workload" in doc and "workloads" in doc:
        raise SpecError(f"{path}: give 'workload' or 'workloads', not both")
    for key in ("fabrics", "links", "gpus"):
        if key not in doc:
            raise SpecError(f"{path}: missing key '{key}'")
    wl = doc.pop("workloads", None) if "workloads" in doc else doc.pop("workload", None)
    if wl is None:
        raise SpecError(f"{path}: missing key 'workload' (or a [workloads.NAME] table per workload)")
    base = Path.cwd()

    def rel(p):
        return str(p if Path(p).is_absolute() else base / p)

    def fix_traces(spec):
        if _is_workload_spec(spec) and "trace" in spec:
            args = spec["trace"]
            if isinstance(args, str):
                return {"trace": {"path": rel(args)}}
            if isinstance(args, Mapping) and "path" in args:
                return {"trace": dict(args, path=rel(args["path"]))}
        return spec

    if isinstance(wl, Mapping) and not _is_workload_spec(wl):
        wl = {k: fix_traces(v) for k, v in wl.items()}
    elif isinstance(wl, list):
        wl = [fix_traces(v) for v in wl]
    else:
        wl = fix_traces(wl)
    doc["workload"] = wl
    if "out" in doc:
        doc["out"] = rel(doc["out"])
    if isinstance(doc.get("prices"), str):
        doc["prices"] = rel(doc["prices"])
    doc["where"] = str(path)
    return doc


def run_config(path, **overrides) -> pa.Table:
    """``sweep(**load_config(path))``, with keyword ``overrides`` (e.g. ``executor="serial"``)."""
    kwargs = load_config(path)
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    return sweep(**kwargs)
