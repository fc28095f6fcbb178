"""The grid of a sweep: one point per fabric x link speed x scale x workload, with its seeds
(``derive_seed``), controller, workload rewrites (the fairness rule) and ``config_id``
(``_identify``).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import catalog
from ..errors import SpecError
from ..units import format_rate, parse_rate
from ..validators import integer
from .digests import _canon, _config_id, _object_digest, fabric_digest, workload_digest
from .fabrics import _Fabric, resolve_fabric
from .workloads import _Workload, _workloads


def derive_seed(seed: int, *parts) -> int:
    """A seed in [0, 2**31) from ``seed`` and ``parts``: SHA-256, stable across processes,
    machines and Python versions (unlike ``hash()``)."""
    text = "\x1f".join([str(int(seed)), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") % (2**31)


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


def controller_class(name: str, where: str = "controller"):
    """The controller class a name stands for: a catalog name (``stage_aware``; the hyphenated
    ``stage-aware`` too) or a class name in ``rfabric.controllers`` (``StageAwareController``);
    None for ``"none"``. SpecError naming ``where`` and the known names otherwise."""
    from .. import controllers

    try:
        name = catalog.canonical(name, "controller")
    except ValueError:
        pass
    if name == "none":
        return None
    obj = getattr(controllers, controllers.CONTROLLER_CLASSES.get(name, name), None)
    if not (isinstance(obj, type) and name[:1] != "_"):
        classes = sorted(n for n in dir(controllers) if n.endswith("Controller") and n != "Controller")
        raise SpecError(
            f"{where}: unknown controller {name!r} (known: {', '.join(catalog.CONTROLLERS)}, "
            f"or a class: {', '.join(classes)})"
        )
    return obj


def _resolve_controller(spec, where: str):
    if isinstance(spec, str):
        if spec.lower() == "own":
            return "own"  # each fabric's own: Topology.controller(), built per point
        if spec.lower() == "none":
            return None
        cls = controller_class(spec, where)
        if cls is not None and cls.__name__ == "StaticController":
            raise SpecError(
                f"{where}: controller {spec!r} keeps a given plan: pass a StaticController(plan) "
                "instance (or a dict {fabric: controller})"
            )
        return cls
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
    max_memory: int | None = None  # bytes the point may allocate (sweeps.memory); None: unbounded


REWRITE_RULES = ("offered", "none", "own")


def _controller_rewrites(ctrl, fab: _Fabric, gpus: int, link_bps: int, where: str) -> list:
    """The rewrites the controller a point runs would ask for (``Controller.rewrites()``)."""
    from ..rewrites import resolve_rewrites

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
    from .. import cost
    from .._version import __version__

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

    from ..rewrites import Rewrite, resolve_rewrites

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
