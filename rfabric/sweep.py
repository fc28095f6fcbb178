"""Sweeps: a grid of fabrics x link speeds x scales x workloads, one simulation per point.

``sweep(fabrics=..., links=..., gpus=..., workload=...)`` runs every point of the grid as an
independent ``rf.simulate`` call, prices each point's fabric (``rf.cost``), and returns one
row per point (``SWEEP_SCHEMA`` in ``rfabric.results``). ``rfabric sweep CONFIG.toml`` reads the
same arguments from a file (``load_config``).

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

import copy
import hashlib
import inspect
import json
import logging
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import catalog
from .errors import SpecError, SweepError, read_toml
from .results import SWEEP_SCHEMA
from .units import format_rate, parse_rate, parse_size
from .validators import file_path, integer, known_keys

__all__ = ["sweep", "load_config", "run_config", "resolve_fabric", "derive_seed", "EXECUTORS", "FABRIC_NAMES"]

EXECUTORS = ("local", "serial", "ray")
#: Stages the generator emits, each with its own column (``stage_<name>_s``).
STAGES = ("gen", "response_stream", "train", "weight_sync")
FLOW_PATTERNS = catalog.FLOW_PATTERNS


#: Paper and class names of the built-in fabrics -> (family, constructor parameters).
FABRIC_NAMES: dict[str, tuple[str, dict]] = catalog.FABRICS
_log = logging.getLogger("rfabric.sweep")
_OS_RE = re.compile(r"^(?:FT|FatTree|fat_tree)-?OS(\d+)(?::1)?$", re.I)


def derive_seed(seed: int, *parts) -> int:
    """A seed in [0, 2**31) from ``seed`` and ``parts``: SHA-256, stable across processes,
    machines and Python versions (unlike ``hash()``)."""
    text = "\x1f".join([str(int(seed)), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") % (2**31)


# -- fabrics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fabric:
    label: str
    family: str
    maker: Any  # a Topology subclass (called maker(gpus, link, **params)) or a factory(gpus, link)
    params: dict
    fingerprint: str

    def build(self, gpus: int, link_bps: int):
        from .topology import Topology

        fab = self.maker(gpus, link_bps, **self.params)
        if not isinstance(fab, Topology):
            raise SpecError(
                f"fabric {self.label!r}: the factory returned {type(fab).__name__}, not a Topology"
            )
        return fab


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def resolve_fabric(spec, label: str | None = None, where: str = "fabrics") -> _Fabric:
    """Turn one fabric spec (see the module docstring) into a builder with a row label."""
    from .topology import FAMILIES, Topology

    def family_class(name: str):
        if name in FABRIC_NAMES:
            fam, params = FABRIC_NAMES[name]
            return FAMILIES[fam], dict(params)
        m = _OS_RE.match(name)
        if m:
            return FAMILIES["fat_tree"], {"oversubscription": int(m.group(1))}
        if name in FAMILIES:
            return FAMILIES[name], {}
        known = sorted(set(FABRIC_NAMES) | set(FAMILIES))
        raise SpecError(f"{where}: unknown fabric {name!r} (known: {', '.join(known)}, or FT-OS<ratio>)")

    if isinstance(spec, str):
        cls, params = family_class(spec)
        return _Fabric(label or spec, cls.family, cls, params, f"{_qualname(cls)}{_canon(params)}")
    if isinstance(spec, type) and issubclass(spec, Topology):
        return _Fabric(label or spec.__name__, spec.family, spec, {}, _qualname(spec))
    if isinstance(spec, Topology):
        raise SpecError(
            f"{where}: got a built fabric ({spec!r}); a sweep builds one per scale and link speed, "
            "so give its class, a name or a factory f(gpus, link)"
        )
    if isinstance(spec, Mapping):
        params = dict(spec)
        name = params.pop("family", None) or params.pop("class", None)
        lab = params.pop("name", None)
        if name is None:
            raise SpecError(f"{where}: fabric table {dict(spec)!r} needs 'family' (e.g. \"fat_tree\")")
        if isinstance(params.get("params"), Mapping):
            params.update(params.pop("params"))
        cls, base = family_class(name) if isinstance(name, str) else (name, {})
        if not (isinstance(cls, type) and issubclass(cls, Topology)):
            raise SpecError(f"{where}: 'family' must name a fabric, got {name!r}")
        for bad in ("gpus", "link"):
            if bad in params:
                raise SpecError(f"{where}: fabric {lab or name!r} sets {bad!r}; the sweep's grid sets it")
        from .topology import _accepted_params

        unknown = sorted(set(params) - _accepted_params(cls))
        if unknown:
            raise SpecError(
                f"{where}: unknown parameter(s) {', '.join(unknown)} for fabric {lab or name!r} "
                f"(accepted: {', '.join(sorted(_accepted_params(cls) - {'gpus', 'link'}))})"
            )
        base.update(params)
        label = label or lab or (name if isinstance(name, str) else cls.__name__)
        return _Fabric(label, cls.family, cls, base, f"{_qualname(cls)}{_canon(base)}")
    if callable(spec):
        name = getattr(spec, "__name__", type(spec).__name__)
        return _Fabric(label or name, name, spec, {}, _qualname(spec))
    raise SpecError(f"{where}: a fabric is a name, a Topology subclass, a factory or a table; got {spec!r}")


# -- workloads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Workload:
    label: str
    spec: Any  # Trace, Flows, a {"kind": {...}} dict or a factory(gpus, seed)
    fingerprint: str

    def make(self, gpus: int, seed: int):
        from .flows import Flows
        from .traces import Trace

        s = self.spec
        if isinstance(s, (Trace, Flows)):
            return s
        if isinstance(s, Mapping):
            ((kind, args),) = s.items()
            return _generate(kind, dict(args), gpus, seed, self.label)
        out = s(gpus, seed)
        if not isinstance(out, (Trace, Flows)):
            raise SpecError(f"workload {self.label!r}: the factory returned {type(out).__name__}")
        return out


def _generate(kind: str, args: dict, gpus: int, seed: int, label: str):
    from . import traces
    from .flows import Flows

    where = f"workload {label!r}"
    if kind == "generate_rl":
        args["model"] = _model(args.get("model"), where)
        args.setdefault("train_gpus", gpus // 2)
        args.setdefault("gen_gpus", gpus - args["train_gpus"])
        args.setdefault("seed", seed)
        try:
            return traces.generate_rl(**args)
        except TypeError as exc:
            raise SpecError(f"{where}: generate_rl: {exc}") from None
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
    if kind == "flows":
        unknown = sorted(set(args) - {"pattern", "size", "fan_in", "seed"})
        if unknown:
            raise SpecError(
                f"{where}: unknown flows key(s) {', '.join(unknown)} (pattern, size, fan_in, seed)"
            )
        pattern = args.get("pattern", "permutation")
        size = parse_size(args.get("size", "1MiB"), allow_zero=False, name="size")
        rng_seed = int(args.get("seed", seed))
        if pattern == "permutation":
            return Flows.permutation(gpus, size, seed=rng_seed)
        if pattern == "all_to_all":
            src, dst = np.meshgrid(np.arange(gpus), np.arange(gpus), indexing="ij")
            keep = src != dst
            return Flows(src[keep], dst[keep], size)
        if pattern == "incast":
            rng = np.random.default_rng(rng_seed)
            fan = min(int(args.get("fan_in", 16)), gpus - 1)
            src = rng.choice(np.arange(1, gpus), size=fan, replace=False)
            return Flows(src, np.zeros(fan, dtype=np.int64), size)
        raise SpecError(f"{where}: unknown flows pattern {pattern!r} (known: {', '.join(FLOW_PATTERNS)})")
    if kind == "trace":
        trace = traces.read(args["path"])
        return trace
    raise SpecError(f"{where}: unknown workload kind {kind!r}")


def _model(spec, where: str):
    """generate_rl's model: a name, a ModelConfig, a table ``{base = NAME, **fields}`` that
    changes some fields of a named model (e.g. ``layers = 2`` for a quick sweep; named
    ``NAME-<layers>L`` unless the table sets ``name``), or a table of every ModelConfig field."""
    import dataclasses

    from .traces.models import ModelConfig, get_model

    if not isinstance(spec, Mapping):
        return spec
    fields = dict(spec)
    base = fields.pop("base", None)
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise SpecError(
            f"{where}: unknown model field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    if base is None:  # a whole model of the user's
        try:
            return ModelConfig(**fields)
        except (TypeError, ValueError) as exc:
            raise SpecError(
                f"{where}: a model table needs 'base' (a model name such as 'qwen2.5-14b') "
                f"or every ModelConfig field ({exc})"
            ) from None
    shape = get_model(base)
    if "name" not in fields:
        fields["name"] = f"{shape.name}-{fields['layers']}L" if "layers" in fields else shape.name
    try:
        return dataclasses.replace(shape, **fields)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{where}: model: {exc}") from None


_WORKLOAD_KINDS = ("generate_rl", "flows", "trace")


def _is_workload_spec(obj) -> bool:
    return isinstance(obj, Mapping) and len(obj) == 1 and next(iter(obj)) in _WORKLOAD_KINDS


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))


class _Hash:
    """BLAKE2b over named, length-prefixed fields: two different sequences of fields never
    feed the same bytes. Arrays enter as dtype, shape and raw bytes (strings joined)."""

    def __init__(self):
        self._h = hashlib.blake2b(digest_size=16)

    def add(self, name: str, value) -> _Hash:
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                data = "\x1f".join(map(str, value.tolist())).encode()
                head = f"{name}:object{value.shape}"
            else:
                data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
                head = f"{name}:{value.dtype.str}{value.shape}"
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data, head = value, f"{name}:bytes"
        elif value is None or isinstance(value, (str, int, float, bool, list, tuple, dict)):
            data, head = json.dumps(value, sort_keys=True, separators=(",", ":")).encode(), f"{name}:json"
        else:  # str() of an object may hold its address: never hash it
            raise TypeError(f"_Hash.add({name!r}): cannot hash a {type(value).__name__}")
        for chunk in (head.encode(), data):
            self._h.update(len(memoryview(chunk).cast("B")).to_bytes(8, "little"))
            self._h.update(chunk)
        return self

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def fabric_digest(fab) -> str:
    """Hash of a built fabric: every array and setting of its NetworkSpec (what the engine,
    the cost model and the controllers read) and its class, family and name (row columns).
    About 1 ms for a 2,048-GPU fabric."""
    spec = fab.to_spec()
    h = _Hash().add("class", _qualname(type(fab))).add("family", fab.family).add("name", fab.name)
    h.add("spec_name", spec.name).add("routing", spec.routing)
    for key, value in sorted(spec.arrays().items()):
        h.add(key, value if isinstance(value, np.ndarray) else bool(value))
    h.add("node_name", spec.nodes.name).add("link_kind", spec.links.kind).add("gpu_nodes", spec.gpu_nodes)
    h.add("rings", spec.rings if spec.rings is not None else "none")
    return h.hexdigest()


def workload_digest(workload) -> str:
    """Hash of a workload's content: a trace's table (columns and schema metadata, as Arrow
    IPC bytes) or a flow set's four arrays."""
    from .flows import Flows

    if isinstance(workload, Flows):
        h = _Hash().add("kind", "flows")
        for name in ("src", "dst", "size_bytes", "start_ps"):
            h.add(name, np.asarray(getattr(workload, name)))
        return h.hexdigest()
    table = workload.table.combine_chunks()  # the same rows hash alike however they are chunked
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return _Hash().add("kind", "trace").add("ipc", memoryview(sink.getvalue())).hexdigest()


def _object_digest(obj) -> str:
    """A controller's identity: None, a name, a class (by qualified name) or an instance (its
    class and pickled state; by class alone if it cannot be pickled)."""
    import pickle

    if obj is None or isinstance(obj, str):
        return _canon(obj)
    if isinstance(obj, type) or inspect.isfunction(obj):
        return _qualname(obj)
    try:
        return (
            _qualname(type(obj))
            + ":"
            + hashlib.blake2b(pickle.dumps(obj, protocol=4), digest_size=16).hexdigest()
        )
    except Exception:
        return _qualname(type(obj))


def resolve_workload(spec, label: str | None, where: str) -> _Workload:
    from .flows import Flows
    from .traces import Trace

    if spec is None:
        raise SpecError(f"{where}: missing workload (a Trace, Flows, {{'generate_rl': {{...}}}}, ...)")
    # fingerprints describe the spec; config_id hashes the made workload's content (_identify)
    if isinstance(spec, Trace):
        return _Workload(label or f"trace {spec.metadata.get('model') or ''}".strip(), spec, "trace")
    if isinstance(spec, Flows):
        return _Workload(label or f"flows({len(spec)})", spec, "flows")
    if _is_workload_spec(spec):
        ((kind, args),) = spec.items()
        if kind == "trace" and isinstance(args, (str, Path)):
            args = {"path": str(args)}
        if not isinstance(args, Mapping):
            raise SpecError(f"{where}: {kind} needs a table of arguments, got {args!r}")
        args = dict(args)
        if kind == "trace":
            if "path" not in args:
                raise SpecError(f"{where}: trace needs 'path'")
            if not Path(args["path"]).exists():
                raise SpecError(f"{where}: trace file {args['path']!r} does not exist")
        if kind == "flows":
            unknown = sorted(set(args) - {"pattern", "size", "fan_in", "seed"})
            if unknown:
                raise SpecError(
                    f"{where}: unknown flows key(s) {', '.join(unknown)} (pattern, size, fan_in, seed)"
                )
            if args.get("pattern", "permutation") not in FLOW_PATTERNS:
                raise SpecError(
                    f"{where}: unknown flows pattern {args['pattern']!r} (known: {', '.join(FLOW_PATTERNS)})"
                )
            try:
                parse_size(args.get("size", "1MiB"), allow_zero=False, name="size")
            except SpecError as exc:
                raise SpecError(f"{where}: flows size: {exc}") from None
        if kind == "generate_rl" and "model" not in args:
            raise SpecError(f"{where}: generate_rl needs 'model' (e.g. \"qwen2.5-14b\")")
        if label is None:
            if kind == "generate_rl":
                model = _model(args["model"], where)
                label = f"rl {getattr(model, 'name', model)}"
            elif kind == "flows":
                label = f"{args.get('pattern', 'permutation')} {args.get('size', '1MiB')}"
            else:
                label = Path(args["path"]).stem
        return _Workload(label, {kind: args}, kind + ":" + _canon(args))
    if isinstance(spec, Mapping):
        raise SpecError(
            f"{where}: a workload table has exactly one key of {', '.join(_WORKLOAD_KINDS)}; got {sorted(spec)}"
        )
    if callable(spec):
        return _Workload(label or getattr(spec, "__name__", "workload"), spec, _qualname(spec))
    raise SpecError(f"{where}: cannot use {type(spec).__name__} as a workload")


def _workloads(spec, where: str) -> list[_Workload]:
    if spec is None:
        raise SpecError(f"{where}: missing workload (a Trace, Flows, {{'generate_rl': {{...}}}}, ...)")
    if isinstance(spec, Mapping) and not _is_workload_spec(spec):
        if not spec:
            raise SpecError(f"{where}: no workloads given")
        return [resolve_workload(v, str(k), f"{where}.{k}") for k, v in spec.items()]
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise SpecError(f"{where}: no workloads given")
        return [resolve_workload(v, None, f"{where}[{i}]") for i, v in enumerate(spec)]
    return [resolve_workload(spec, None, where)]


# -- controllers -----------------------------------------------------------------------------


def _controller_name(ctrl) -> str:
    if ctrl is None:
        return "none"
    if isinstance(ctrl, str):
        return ctrl
    if isinstance(ctrl, type) or inspect.isfunction(ctrl):
        return ctrl.__name__
    name = getattr(ctrl, "name", None)
    return name if isinstance(name, str) and name else type(ctrl).__name__


def _resolve_controller(spec, where: str):
    if isinstance(spec, str):
        from . import controllers

        if spec.lower() == "none":
            return None
        if spec.lower() == "own":
            return "own"  # each fabric's own: Topology.controller(), built per point
        obj = getattr(controllers, spec, None)
        if not isinstance(obj, type):
            known = sorted(n for n in dir(controllers) if n.endswith("Controller") and n != "Controller")
            raise SpecError(f"{where}: unknown controller {spec!r} (known: {', '.join(known) or 'none yet'})")
        return obj
    return spec


# -- points ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Point:
    index: int
    key: str
    config: str  # canonical JSON of the point's settings; config_id adds the built content
    fabric: _Fabric
    link_bps: int
    gpus: int
    workload: _Workload
    workload_seed: int
    controller: Any
    controller_name: str
    rewrites: Any  # "own", "none" or a tuple of rfabric.rewrites.Rewrite
    rewrite_rule: str
    seed: int
    prices: Any
    gpu_price_usd: float | None
    settings: dict
    where: str  # the sweep's config file, or "sweep": error messages name it
    config_id: str | None = None  # set by _identify; None: its fabric or workload failed to build
    fabric_digest: str | None = None  # of the fabric built in the sweep's process (workers check)
    workload_obj: Any = None  # the workload made in the sweep's process (what the point runs)


def _run_point(p: _Point) -> dict:
    """Build, price and simulate one point; returns its row (SWEEP_SCHEMA)."""
    from . import cost
    from .simulation import simulate
    from .traces import Trace

    t0 = time.perf_counter()
    try:
        fab = p.fabric.build(p.gpus, p.link_bps)
        if p.fabric_digest is not None and fabric_digest(fab) != p.fabric_digest:
            raise SweepError(
                f"{p.where}: sweep point {p.key}: fabric {p.fabric.label!r} built different tables in "
                "the worker than in the sweep's process, so config_id would not describe the row: "
                "make its build() deterministic (seed its random choices)"
            )
        net_usd = cost.network_cost(fab, p.prices)
        workload = p.workload_obj if p.workload_obj is not None else p.workload.make(p.gpus, p.workload_seed)
        kwargs = dict(p.settings)
        # rewrites change a trace's ops; a flow set has none to change
        kwargs["rewrites"] = list(p.rewrites) if isinstance(p.rewrites, tuple) else p.rewrites
        if not isinstance(workload, Trace):
            kwargs["rewrites"] = "none"
        if p.controller == "own":
            if isinstance(workload, Trace):  # flows have no periods to plan for: initial circuits
                kwargs["controller"] = fab.controller()
        elif p.controller is not None:
            ctrl = p.controller
            kwargs["controller"] = ctrl() if isinstance(ctrl, type) else copy.deepcopy(ctrl)
        res = simulate(fab, workload, seed=p.seed, **kwargs)
    except SweepError:
        raise
    except SpecError as exc:
        raise SpecError(f"{p.where}: sweep point {p.key}: {exc}") from None
    config_id = p.config_id
    if config_id is None:  # its fabric or workload failed to build in the sweep's process only
        own = _object_digest(fab.controller()) if p.controller == "own" else None
        config_id = _config_id(p, fabric_digest(fab), own, workload_digest(workload))
    run = res.run
    makespan_ps = int(run["makespan_ps"])
    complete = makespan_ps > 0
    makespan_s = makespan_ps / 1e12 if complete else math.nan
    iterations, samples = 1, None
    stage_s: dict[str, float | None] = {}
    if isinstance(workload, Trace):
        it = workload.table["iteration"].to_numpy()
        iterations = max(1, len(np.unique(it)))
        batch = (workload.metadata.get("parameters") or {}).get("global_batch")
        if isinstance(batch, int):
            samples = batch * iterations
        # a stage's time: the sum over iterations of its first op's start to its last op's
        # end; None if any of its ops did not finish
        for row in res.stages.to_pylist():
            name = row["stage"]
            span = (row["end_ps"] - row["start_ps"]) / 1e12 if row["end_ps"] >= 0 else None
            if name not in stage_s:
                stage_s[name] = span
            elif stage_s[name] is not None and span is not None:
                stage_s[name] += span
            else:
                stage_s[name] = None
    iter_s = makespan_s / iterations if complete else math.nan
    thr = 1.0 / iter_s if complete else math.nan
    cluster = None if p.gpu_price_usd is None else net_usd + p.gpus * p.gpu_price_usd
    row = {
        "point": p.index,
        "config_id": config_id,
        "fabric": p.fabric.label,
        "family": fab.family,
        "topology": fab.name,
        "link_speed": format_rate(p.link_bps),
        "link_bps": p.link_bps,
        "gpus": p.gpus,
        "workload": p.workload.label,
        "controller": (run.get("controller") or "none") if p.controller == "own" else p.controller_name,
        "rewrite_rule": p.rewrite_rule,
        "rewrites": _rewrites_text(run.get("rewrites") or []),
        "seed": p.seed,
        "workload_seed": p.workload_seed,
        "network_cost_usd": net_usd,
        "cluster_cost_usd": cluster,
        "complete": complete,
        "makespan_s": makespan_s,
        "iterations": iterations,
        "iteration_time_s": iter_s,
        "throughput_iter_per_s": thr,
        "samples_per_s": samples / makespan_s if samples is not None and complete else None,
        "throughput_per_musd": thr / (net_usd / 1e6) if net_usd > 0 else math.nan,
        **{f"stage_{s}_s": stage_s.get(s) for s in STAGES},
        "stage_s": sorted((k, v) for k, v in stage_s.items() if v is not None),
        "events": run["events"],
        "packets": run["packets"],
        "packet_hops": run["packet_hops"],
        "drops": run["drops"],
        "ecn_marks": run["ecn_marks"],
        "pfc_pauses": run["pfc_pauses"],
        "flows": run["flows"],
        "flows_done": run["flows_done"],
        "sim_ps": run["sim_ps"],
        "ops": run.get("ops", 0),
        "ops_done": run.get("ops_done", 0),
        "deadlock": bool(run.get("deadlock", False)),
        "controller_calls": run.get("controller_calls", 0),
        "plan_changes": run.get("plan_changes", 0),
        "controller_wall_s": run.get("controller_wall_s", 0.0),
        "wall_s": time.perf_counter() - t0,
    }
    return row


def _rewrites_text(done: list[dict]) -> str:
    """The ``rewrites`` column: each rewrite that ran, its parameters and what it replaced."""
    if not done:
        return "none"
    parts = []
    for d in done:
        p = ",".join(f"{k}={v}" for k, v in sorted((d.get("params") or {}).items()))
        where = f", {d['locality']}" if d.get("locality") else ""
        parts.append(f"{d['rewrite']}({p}): {d['ops_replaced']} ops -> {d['ops_produced']}{where}")
    return "; ".join(parts)


REWRITE_RULES = ("offered", "none", "own")


def _controller_rewrites(ctrl, fab: _Fabric, gpus: int, link_bps: int, where: str) -> list:
    """The rewrites the controller a point runs would ask for (``Controller.rewrites()``)."""
    from .rewrites import resolve_rewrites

    try:
        if ctrl == "own":
            ctrl = fab.build(gpus, link_bps).controller()
        elif isinstance(ctrl, type):
            ctrl = ctrl()
        ask = getattr(ctrl, "rewrites", None) if ctrl is not None else None
        got = ask() if callable(ask) else []
    except SpecError as exc:
        raise SpecError(f"{where}: fabric {fab.label}: {exc}") from None
    out = resolve_rewrites(got if got is not None else [], f"{where}: {_controller_name(ctrl)}.rewrites()")
    if isinstance(out, str):
        raise SpecError(f"{where}: {_controller_name(ctrl)}.rewrites() must return a list of Rewrite")
    return out


def _grid(
    fabrics,
    links,
    gpus,
    workloads,
    controller,
    seed,
    prices,
    gpu_price_usd,
    settings,
    where,
    rewrites="offered",
) -> list[_Point]:
    from . import __version__, cost

    if fabrics is None or (isinstance(fabrics, (list, tuple, Mapping)) and not fabrics):
        raise SpecError(f"{where}: no fabrics given")
    if isinstance(fabrics, Mapping):
        fabs = [resolve_fabric(v, str(k), f"{where}: fabrics.{k}") for k, v in fabrics.items()]
    elif isinstance(fabrics, (list, tuple)):
        fabs = [resolve_fabric(v, None, f"{where}: fabrics[{i}]") for i, v in enumerate(fabrics)]
    else:
        fabs = [resolve_fabric(fabrics, None, f"{where}: fabrics")]
    _unique([f.label for f in fabs], "fabric", where)

    link_list = links if isinstance(links, (list, tuple)) else [links]
    if not link_list or links is None:
        raise SpecError(f'{where}: no link speeds given (links = ["200Gbps", ...])')
    rates = []
    for i, v in enumerate(link_list):
        try:
            rates.append(parse_rate(v, name="links"))
        except SpecError as exc:
            raise SpecError(f"{where}: links[{i}]: {exc}") from None
    _unique(rates, "link speed", where)

    gpu_list = gpus if isinstance(gpus, (list, tuple)) else [gpus]
    if not gpu_list or gpus is None:
        raise SpecError(f"{where}: no GPU counts given (gpus = [128, ...])")
    for i, g in enumerate(gpu_list):
        integer(g, f"{where}: gpus[{i}]", lo=1)
    _unique(list(gpu_list), "GPU count", where)

    wls = _workloads(workloads, f"{where}: workload")
    _unique([w.label for w in wls], "workload", where)

    p = cost.load_prices(prices)
    price_fp = _canon({str(r): row for r, row in sorted(p.by_speed.items())})
    if gpu_price_usd is None:
        gpu_price_usd = p.gpu_usd
    if controller is not None and not isinstance(controller, Mapping):
        controller = _resolve_controller(controller, f"{where}: controller")
    settings = dict(settings or {})
    for bad in ("seed", "controller", "progress", "rewrites"):
        if bad in settings:
            raise SpecError(f"{where}: settings may not set {bad!r} (the sweep sets it)")

    from .rewrites import Rewrite, resolve_rewrites

    ctrls = {}
    for fab in fabs:
        ctrl = controller
        if isinstance(controller, Mapping):
            ctrl = _resolve_controller(controller.get(fab.label), f"{where}: controller.{fab.label}")
        ctrls[fab.label] = ctrl
    # the fairness rule (docs/fairness.md): "offered" gives every point the rewrites any
    # controller of the sweep asks for, at its own fabric's locality; "none" none; "own" each
    # controller its own (not a fair comparison; for ablations); a list: exactly those
    if isinstance(rewrites, str):
        if rewrites not in REWRITE_RULES:
            raise SpecError(
                f"{where}: rewrites must be one of {', '.join(map(repr, REWRITE_RULES))} or a list of "
                f"rfabric.rewrites.Rewrite, got {rewrites!r}"
            )
        rule = rewrites
    else:
        rule = "given"
    if rule == "offered":
        offered: list = []
        for fab in fabs:
            for rate in rates:
                for n in gpu_list:
                    for rw in _controller_rewrites(ctrls[fab.label], fab, int(n), rate, where):
                        offered.append(rw)
        point_rewrites = tuple(resolve_rewrites(offered, f"{where}: rewrites offered by the controllers"))
    elif rule == "given":
        got = resolve_rewrites(rewrites, f"{where}: rewrites")
        if isinstance(got, str) or not all(isinstance(r, Rewrite) for r in got):
            raise SpecError(f"{where}: rewrites: expected a list of rfabric.rewrites.Rewrite")
        point_rewrites = tuple(got)
    else:
        point_rewrites = rule
    rw_fp = point_rewrites if isinstance(point_rewrites, str) else [r.key() for r in point_rewrites]

    points = []
    for fab in fabs:
        ctrl = ctrls[fab.label]
        cname = _controller_name(ctrl)
        for rate in rates:
            for n in gpu_list:
                for w in wls:
                    key = f"fabric={fab.label}|link={format_rate(rate)}|gpus={n}|workload={w.label}|controller={cname}"
                    config = _canon(
                        {
                            "key": key,
                            "controller": _object_digest(ctrl),
                            "seed": int(seed),
                            "prices": price_fp,
                            "gpu_price": gpu_price_usd,
                            "settings": settings,
                            "rfabric": __version__,
                            "rewrites": rw_fp,
                        }
                    )
                    points.append(
                        _Point(
                            index=len(points),
                            key=key,
                            config=config,
                            fabric=fab,
                            link_bps=rate,
                            gpus=int(n),
                            workload=w,
                            workload_seed=derive_seed(seed, "workload", w.label, n),
                            controller=ctrl,
                            controller_name=cname,
                            rewrites=point_rewrites,
                            rewrite_rule=rule,
                            seed=derive_seed(seed, "engine", key),
                            prices=p,
                            gpu_price_usd=gpu_price_usd,
                            settings=settings,
                            where=where,
                        )
                    )
    return points


def _config_id(p: _Point, fab_digest: str, own: str | None, w_digest: str) -> str:
    h = _Hash().add("config", p.config).add("fabric", fab_digest).add("own_controller", own or "")
    return h.add("workload", w_digest).hexdigest()[:16]


def _identify(points: list[_Point]) -> list[_Point]:
    """Give each point its ``config_id``: build its fabric and make its workload (once per
    workload and scale) here, hash their content (``fabric_digest``, ``workload_digest``) with
    the point's settings. The made workload rides with the point (workers run it as made); a
    point whose fabric or workload fails to build keeps ``config_id`` None and fails at its turn,
    in the executor, as before."""
    fabrics: dict[tuple, tuple] = {}  # (label, link, gpus) -> (digest, own controller digest)
    workloads: dict[tuple, tuple] = {}  # (label, gpus) -> (workload, digest)
    out = []
    for p in points:
        fkey = (p.fabric.label, p.link_bps, p.gpus)
        if fkey not in fabrics:
            try:
                fab = p.fabric.build(p.gpus, p.link_bps)
                own = _object_digest(fab.controller()) if p.controller == "own" else None
                fabrics[fkey] = (fabric_digest(fab), own)
            except Exception:  # raised again when the point runs, with its key
                fabrics[fkey] = (None, None)
        wkey = (p.workload.label, p.gpus)
        if wkey not in workloads:
            try:
                made = p.workload.make(p.gpus, p.workload_seed)
                workloads[wkey] = (made, workload_digest(made))
            except Exception:
                workloads[wkey] = (None, None)
        fab_digest, own = fabrics[fkey]
        made, w_digest = workloads[wkey]
        if fab_digest is None or w_digest is None:
            out.append(replace(p, fabric_digest=fab_digest))
            continue
        w = p.workload
        out.append(
            replace(
                p,
                config_id=_config_id(p, fab_digest, own, w_digest),
                fabric_digest=fab_digest,
                workload=_Workload(w.label, None, w.fingerprint),  # the spec (a factory) stays here
                workload_obj=made,
            )
        )
    return out


def _unique(values: Sequence, what: str, where: str) -> None:
    seen = set()
    for v in values:
        if v in seen:
            raise SpecError(f"{where}: {what} {v!r} appears twice in the grid")
        seen.add(v)


# -- output ----------------------------------------------------------------------------------


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SWEEP_SCHEMA)


def _atomic_parquet(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _read_done(out: Path, parts: Path) -> dict[str, dict]:
    done: dict[str, dict] = {}
    files = ([out] if out.exists() else []) + (sorted(parts.glob("*.parquet")) if parts.is_dir() else [])
    for f in files:
        try:
            t = pq.read_table(f)
        except Exception as exc:
            raise SpecError(
                f"{f}: cannot read it as a sweep table ({exc}); remove it or choose another out="
            ) from None
        if t.schema.names != SWEEP_SCHEMA.names:
            raise SpecError(
                f"{f}: not a sweep table of this rfabric version (columns differ); remove it or choose another out="
            )
        for row in t.cast(SWEEP_SCHEMA).to_pylist():
            done[row["config_id"]] = row
    return done


# -- executors -------------------------------------------------------------------------------


def _check_picklable(points, executor: str) -> None:
    """Processes and Ray tasks receive points by pickling: name what cannot travel."""
    import pickle

    for p in points:
        for what, obj in (("fabric", p.fabric), ("workload", p.workload), ("controller", p.controller)):
            try:
                pickle.dumps(obj)
            except Exception as exc:
                raise SpecError(
                    f"sweep point {p.key}: its {what} cannot be sent to executor={executor!r} workers ({exc}); "
                    "define factories at module level (not lambdas or local functions), or use executor='serial'"
                ) from None


_GUARD = (
    'put the code that calls rf.sweep under `if __name__ == "__main__":` (executor="local" starts '
    "its workers with spawn, and each worker imports the main script again; unguarded, the script's "
    'sweep runs again inside every worker), or run the sweep with executor="serial"'
)


def _main_script() -> str | None:
    main = sys.modules.get("__main__")
    return getattr(main, "__file__", None)


def _in_spawned_worker(where: str) -> None:
    """A process-pool worker that is still importing the main script (spawn) and reaches a
    sweep: the script has no main guard. Say so here, where the worker's traceback shows it."""
    import multiprocessing as mp

    if getattr(mp.current_process(), "_inheriting", False):
        raise SweepError(
            f"{where}: rf.sweep was called while a worker process imported the main script: {_GUARD}"
        )


def _run_serial(points, on_row):
    for p in points:
        on_row(_run_point(p))


def _run_local(points, on_row, workers: int | None):
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool

    n = max(1, min(workers or os.cpu_count() or 1, len(points)))
    try:
        _pool(points, on_row, n, mp.get_context("spawn"))
    except BrokenProcessPool as exc:
        raise _broken_pool(exc) from None


def _broken_pool(exc) -> SweepError:
    started = getattr(exc, "_rf_rows", 0)
    script = _main_script()
    if started == 0 and script is not None:
        return SweepError(
            f"sweep: the local executor's worker processes died before finishing any point; with a "
            f"script ({script}), the usual cause is a missing main guard: {_GUARD}. (Otherwise a "
            "worker was killed, e.g. out of memory: executor='serial' runs the points in this process.)"
        )
    return SweepError(
        f"sweep: a worker process of the local executor died ({exc}): killed (out of memory?) or "
        f"crashed; {started} point(s) had finished (with out=, saved: a rerun resumes from them); "
        "executor='serial' runs the points in this process and shows the error"
    )


def _pool(points, on_row, n: int, ctx) -> None:
    from concurrent.futures.process import BrokenProcessPool

    error = None
    finished_rows = 0
    # spawn, not fork: workers start from a clean interpreter (no copied threads or locks of
    # the parent, e.g. the progress bar's or pyarrow's), and the compiled engine loads afresh
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        pending = {pool.submit(_run_point, p) for p in points}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    if f.cancelled():
                        continue
                    exc = f.exception()
                    if exc is None:
                        on_row(f.result())  # rows of points that finish are kept, even after a failure
                        finished_rows += 1
                    elif isinstance(exc, BrokenProcessPool):
                        exc._rf_rows = finished_rows
                        raise exc
                    elif error is None:
                        error = exc
                        for other in pending:  # stop what has not started; let running points end
                            other.cancel()
        except BaseException:  # KeyboardInterrupt: stop what has not started
            for f in pending:
                f.cancel()
            raise
    if error is not None:
        raise error


def _run_ray(points, on_row, address: str | None, workers: int | None):
    try:
        import ray
    except ImportError:
        raise SpecError(
            "executor='ray' needs Ray, which is not installed: pip install 'rfabric[ray]' (or ray)"
        ) from None
    started = not ray.is_initialized()
    if started:
        kwargs = {"address": address} if address else {"num_cpus": workers or os.cpu_count() or 1}
        # Ray puts the driver's working directory first on its workers' sys.path: run from a
        # source checkout, that directory's rfabric/ (no compiled engine when rfabric was
        # pip-installed, not installed in place) would shadow the installed package.
        here = os.getcwd()
        os.chdir(tempfile.gettempdir())
        try:
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
        finally:
            os.chdir(here)
    task = ray.remote(num_cpus=1, max_retries=0)(_run_point)
    pending = [task.remote(p) for p in points]
    try:
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                try:
                    on_row(ray.get(ref))
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.as_instanceof_cause()
                    raise (cause if isinstance(cause, SpecError) else exc) from None
    finally:
        for ref in pending:
            ray.cancel(ref)
        if started:  # a Ray the caller started (ray.init before the sweep) stays up
            ray.shutdown()


# -- the sweep -------------------------------------------------------------------------------


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
        fresh deep copy), a class (instantiated per point), a name in ``rf.controllers``, or a
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
    points = _identify(points)
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
        from tqdm import tqdm

        bar = tqdm(total=len(points), initial=len(points) - len(todo), desc="sweep", unit="point")

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
                _run_local(todo, on_row, workers)
            else:
                _check_picklable(todo, executor)
                _run_ray(todo, on_row, ray_address, workers)
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


# -- config files ----------------------------------------------------------------------------

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
}


def load_config(path) -> dict:
    """Read a sweep config (TOML) into ``sweep()`` keyword arguments. Relative paths in it
    (``out``, ``prices``, trace paths) are taken from the config file's folder."""
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
    base = path.parent

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
