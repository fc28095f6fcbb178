"""Workload specs of a sweep: a Trace or Flows, a list of Jobs (several jobs on each
fabric), a generator table (``generate_rl``, ``flows``, ``trace``) or a factory ``f(gpus,
seed)`` returning any of those, resolved into a maker with a row label
(``resolve_workload``); ``pattern_flows`` makes the synthetic flow patterns of
``rfabric.catalog.FLOW_PATTERNS`` (also ``rfabric run --pattern``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import catalog
from ..errors import SpecError
from ..jobs import Job, as_jobs
from ..units import parse_size
from .digests import _canon, _qualname

__all__ = ["resolve_workload", "pattern_flows", "FLOW_PATTERNS"]

#: The synthetic flow patterns (``rfabric.catalog.FLOW_PATTERNS``).
FLOW_PATTERNS = catalog.FLOW_PATTERNS


def flow_pattern(name, where: str = "flows") -> str:
    """The catalog's spelling of a flow pattern (``all-to-all`` reads as ``all_to_all``);
    SpecError naming ``where`` and the known patterns for another name."""
    try:
        return catalog.canonical(name, "pattern")
    except ValueError:
        raise SpecError(
            f"{where}: unknown flows pattern {name!r} (known: {', '.join(FLOW_PATTERNS)})"
        ) from None


def pattern_flows(
    pattern: str,
    gpus: int,
    size: int,
    *,
    seed: int,
    fan_in=16,
    where: str = "flows",
    fan_in_name: str = "fan_in",
):
    """The flows of a synthetic ``pattern`` over ``gpus`` GPUs, ``size`` bytes each:
    ``permutation`` (``Flows.permutation``, seeded), ``all_to_all`` (every ordered pair) or
    ``incast`` (``fan_in`` senders drawn with ``seed`` from GPUs 1.., at most ``gpus - 1``,
    all to GPU 0)."""
    from ..flows import Flows
    from ..validators import integer

    pattern = flow_pattern(pattern, where)
    if pattern == "permutation":
        return Flows.permutation(gpus, size, seed=seed)
    if pattern == "all_to_all":
        src, dst = np.meshgrid(np.arange(gpus), np.arange(gpus), indexing="ij")
        keep = src != dst
        return Flows(src[keep], dst[keep], size)
    # incast
    fan_in = integer(fan_in, f"{where}: {fan_in_name}")
    if fan_in < 1:
        raise SpecError(f"{fan_in_name} must be at least 1 (senders for the incast), got {fan_in}")
    rng = np.random.default_rng(seed)
    fan = min(fan_in, gpus - 1)
    src = rng.choice(np.arange(1, gpus), size=fan, replace=False)
    return Flows(src, np.zeros(fan, dtype=np.int64), size)


@dataclass(frozen=True)
class _Workload:
    label: str
    spec: Any  # Trace, Flows, a {"kind": {...}} dict or a factory(gpus, seed)
    fingerprint: str

    def make(self, gpus: int, seed: int):
        from ..flows import Flows
        from ..traces import Trace

        s = self.spec
        if isinstance(s, (Trace, Flows)) or as_jobs(s) is not None:
            return s
        if isinstance(s, Mapping):
            ((kind, args),) = s.items()
            return _generate(kind, dict(args), gpus, seed, self.label)
        out = s(gpus, seed)
        if not isinstance(out, (Trace, Flows)):
            try:
                if as_jobs(out) is not None:
                    return out
            except SpecError as exc:
                raise SpecError(f"workload {self.label!r}: the factory returned {exc}") from None
            raise SpecError(
                f"workload {self.label!r}: the factory returned {type(out).__name__} "
                "(expected a Trace, Flows, Job or list of Jobs)"
            )
        return out


def _generate(kind: str, args: dict, gpus: int, seed: int, label: str):
    from .. import traces

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
        size = parse_size(args.get("size", "1MiB"), allow_zero=False, name="size")
        return pattern_flows(
            args.get("pattern", "permutation"),
            gpus,
            size,
            seed=int(args.get("seed", seed)),
            fan_in=args.get("fan_in", 16),
            where=where,
        )
    if kind == "trace":
        trace = traces.read(args["path"])
        return trace
    raise SpecError(f"{where}: unknown workload kind {kind!r}")


def _model(spec, where: str):
    """generate_rl's model: a name, a ModelConfig, or a table (``{base = NAME, **fields}``,
    e.g. ``layers = 2`` for a quick sweep, or every ModelConfig field): rf.traces.models.get_model."""
    from ..traces.models import get_model

    if not isinstance(spec, Mapping):
        return spec
    return get_model(spec, where)


_WORKLOAD_KINDS = ("generate_rl", "flows", "trace")


def _is_workload_spec(obj) -> bool:
    return isinstance(obj, Mapping) and len(obj) == 1 and next(iter(obj)) in _WORKLOAD_KINDS


def resolve_workload(spec, label: str | None, where: str) -> _Workload:
    from ..flows import Flows
    from ..traces import Trace

    if spec is None:
        raise SpecError(f"{where}: missing workload (a Trace, Flows, {{'generate_rl': {{...}}}}, ...)")
    # fingerprints describe the spec; config_id hashes the made workload's content (_identify)
    if isinstance(spec, Trace):
        return _Workload(label or f"trace {spec.metadata.get('model') or ''}".strip(), spec, "trace")
    if isinstance(spec, Flows):
        return _Workload(label or f"flows({len(spec)})", spec, "flows")
    if isinstance(spec, list | tuple) or isinstance(spec, Job):
        jobs = as_jobs(spec)
        names = ", ".join(j.name or f"job{i}" for i, j in enumerate(jobs))
        return _Workload(label or f"jobs({names})", jobs, "jobs")
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
            if "pattern" in args:
                args["pattern"] = flow_pattern(args["pattern"], where)
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
        if all(isinstance(v, Job) for v in spec):  # one workload: these jobs together
            return [resolve_workload(list(spec), None, where)]
        return [resolve_workload(v, None, f"{where}[{i}]") for i, v in enumerate(spec)]
    return [resolve_workload(spec, None, where)]
