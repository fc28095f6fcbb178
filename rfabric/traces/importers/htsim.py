"""htsim connection matrices (``.cm``, Broadcom/csg-htsim ``ConnectionMatrix::load``) ->
`Trace` (send ops, triggers as deps) or, without triggers, `rfabric.Flows`.

The grammar relied on (htsim's ``sim/datacenter/connection_matrix.cpp``):

* header lines ``Nodes N``, ``Connections M``, optional ``Triggers T`` and ``Failures F``;
  ``#`` starts a comment line (htsim allows them in the header only; here anywhere);
* a connection ``S->D`` followed by keyword/value pairs: ``start T`` (a decimal),
  ``size B`` (bytes), ``id X`` (a flow id, not 0), ``trigger X`` (start when trigger X
  fires, instead of ``start``), ``send_done_trigger X`` / ``recv_done_trigger X`` (signal
  trigger X when the flow has sent / received everything), ``prio P``, ``addon``;
  exactly one of ``start`` and ``trigger``;
* ``trigger id X oneshot|multishot|barrier [count C]``;
* ``failure switch_type TOR|AGG|CORE switch_id I link_id L``;
* the counts in the header must match the lines, and every trigger used must be declared.

Units: ``start`` is microseconds. htsim's loader stores the number as is, and its transports
convert it when they connect a flow (``EqdsSrc::connect`` calls
``timeFromUs((uint32_t)start_time)``); here it is read exactly (not truncated) and rounded to
the picosecond. Tokens are split on any whitespace (htsim splits on single spaces).

Mapping: every connection is a ``send`` op [S, D] of ``size`` bytes. A flow with ``start``
has no deps and ``compute_ps`` = start. A flow with ``trigger X`` depends on the flows that
signal X (``send_done_trigger``/``recv_done_trigger``; both become "after that op ends"): a
``barrier`` must count exactly its signallers, and a ``oneshot``/``multishot`` trigger must
have exactly one (it fires at the first signal, which a dependency cannot express when
there are several). Failures are checked and ignored (rfabric fails links with
``Simulation.set_link_state``). ``prio`` and ``addon`` are ignored.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from ...errors import SpecError, TraceError
from ...units import MAX_TIME_PS
from ...validators import file_path
from ._common import Op, OpList, fail, read_text

__all__ = ["read", "flows", "parse"]

_PAIR = re.compile(r"^(\d+)->(\d+)$")
_COUNTS = {"Nodes": "nodes", "Connections": "connections", "Triggers": "triggers", "Failures": "failures"}
_TRIGGER_TYPES = ("oneshot", "multishot", "barrier")


def _uint(path, where: str, text: str | None, what: str, lo: int = 0) -> int:
    if text is None:
        fail(path, where, f"{what} has no value")
    if not re.fullmatch(r"[0-9]{1,19}", text):
        fail(path, where, f"{what} {text!r} is not a non-negative integer (at most 19 digits)")
    v = int(text)
    if v < lo:
        fail(path, where, f"{what} is {v}, expected >= {lo}")
    return v


def _start_ps(path, where: str, text: str | None) -> int:
    if text is None:
        fail(path, where, "start has no value")
    try:
        us = Decimal(text)
    except InvalidOperation:
        fail(path, where, f"start {text!r} is not a number (microseconds)")
    if not us.is_finite() or us < 0:
        fail(path, where, f"start {text!r} must be a finite number >= 0 (microseconds)")
    if us * 1_000_000 > MAX_TIME_PS:  # compared as a Decimal: 1e999999999 never becomes an int
        fail(path, where, f"start {text} us is beyond the engine's horizon")
    return int((us * 1_000_000).to_integral_value())


def parse(path) -> dict:
    """Parse and check a connection matrix.

    Returns
    -------
    dict
        ``nodes`` (int), ``connections`` (list of dicts: src, dst, size, start_ps or None,
        id, trigger, send_done, recv_done, line), ``triggers`` ({id: dict(type, count, line)}),
        ``failures`` (count).
    """
    path = file_path(path, "htsim: path", TraceError)
    counts: dict[str, int] = {}
    conns, triggers, failures = [], {}, 0
    for lineno, line in enumerate(read_text(path), start=1):
        tok = line.split()
        where = f"line {lineno}"
        if not tok or tok[0].startswith("#"):
            continue
        head = tok[0]
        if head in _COUNTS:
            if conns or triggers or failures:
                fail(path, where, f"{head} after the first connection, trigger or failure line")
            if len(tok) != 2:
                fail(path, where, f"expected '{head} <count>'")
            if _COUNTS[head] in counts:
                fail(path, where, f"{head} given twice")
            counts[_COUNTS[head]] = _uint(path, where, tok[1], head)
        elif "->" in head:
            conns.append(_connection(path, where, tok, lineno))
        elif head == "trigger":
            t = _trigger(path, where, tok, lineno)
            if t["id"] in triggers:
                fail(
                    path,
                    where,
                    f"trigger {t['id']} declared again (first on line {triggers[t['id']]['line']})",
                )
            triggers[t["id"]] = t
        elif head == "failure":
            _failure(path, where, tok)
            failures += 1
        else:
            fail(
                path,
                where,
                f"unknown line starting with {head!r} (expected Nodes, Connections, Triggers, Failures, S->D, trigger or failure)",
            )
    if "nodes" not in counts:
        fail(path, "header", "no 'Nodes <count>' line")
    if "connections" not in counts:
        fail(path, "header", "no 'Connections <count>' line")
    for what, have in (("connections", len(conns)), ("triggers", len(triggers)), ("failures", failures)):
        if counts.get(what, 0) != have:
            fail(path, "header", f"says {counts.get(what, 0)} {what}, the file has {have}")
    n = counts["nodes"]
    ids = {}
    for c in conns:
        where = f"line {c['line']}"
        for end in ("src", "dst"):
            if c[end] >= n:
                fail(path, where, f"node {c[end]} is outside 0..{n - 1} (Nodes {n})")
        if c["id"]:
            if c["id"] in ids:
                fail(path, where, f"flow id {c['id']} used again (first on line {ids[c['id']]})")
            ids[c["id"]] = c["line"]
        for key in ("trigger", "send_done", "recv_done"):
            t = c[key]
            if t and t not in triggers:
                fail(path, where, f"refers to trigger {t}, which is not declared")
    return {"nodes": n, "connections": conns, "triggers": triggers, "failures": failures}


def _connection(path, where: str, tok: list[str], lineno: int) -> dict:
    m = _PAIR.match(tok[0])
    if m is None:
        fail(path, where, f"{tok[0]!r} is not SRC->DST with node numbers")
    c = {
        "src": int(m.group(1)),
        "dst": int(m.group(2)),
        "size": None,
        "start_ps": None,
        "id": 0,
        "trigger": 0,
        "send_done": 0,
        "recv_done": 0,
        "line": lineno,
    }
    if c["src"] == c["dst"]:
        fail(path, where, f"connection from node {c['src']} to itself")
    i = 1
    while i < len(tok):
        key = tok[i]
        value = tok[i + 1] if i + 1 < len(tok) else None
        if key == "addon":
            i += 1
            continue
        if key == "start":
            c["start_ps"] = _start_ps(path, where, value)
        elif key == "size":
            c["size"] = _uint(path, where, value, "size", lo=1)
        elif key == "id":
            c["id"] = _uint(path, where, value, "id", lo=1)
        elif key in ("trigger", "send_done_trigger", "recv_done_trigger"):
            c[key.replace("_trigger", "")] = _uint(path, where, value, key, lo=1)
        elif key == "prio":
            _uint(path, where, value, "prio")
        else:
            fail(path, where, f"unknown token {key!r}")
        i += 2
    if c["size"] is None:
        fail(path, where, "no size (htsim runs a flow without one forever)")
    if (c["start_ps"] is None) == (not c["trigger"]):
        fail(path, where, "needs exactly one of 'start' and 'trigger'")
    if c["trigger"] and not c["id"]:
        fail(path, where, "a triggered flow needs an 'id'")
    return c


def _trigger(path, where: str, tok: list[str], lineno: int) -> dict:
    t = {"id": 0, "type": None, "count": 0, "line": lineno}
    i = 1
    while i < len(tok):
        key = tok[i]
        if key in _TRIGGER_TYPES:
            if t["type"] is not None:
                fail(path, where, f"trigger type given twice ({t['type']}, {key})")
            t["type"] = key
            i += 1
            continue
        value = tok[i + 1] if i + 1 < len(tok) else None
        if key == "id":
            t["id"] = _uint(path, where, value, "trigger id", lo=1)
        elif key == "count":
            t["count"] = _uint(path, where, value, "count")
        else:
            fail(path, where, f"unknown token {key!r} in a trigger")
        i += 2
    if not t["id"]:
        fail(path, where, "trigger without an id")
    if t["type"] is None:
        fail(path, where, f"trigger {t['id']} without a type ({', '.join(_TRIGGER_TYPES)})")
    return t


def _failure(path, where: str, tok: list[str]) -> None:
    i = 1
    while i < len(tok):
        key, value = tok[i], (tok[i + 1] if i + 1 < len(tok) else None)
        if key == "switch_type":
            if value not in ("TOR", "AGG", "CORE"):
                fail(path, where, f"switch_type {value!r} is not TOR, AGG or CORE")
        elif key in ("switch_id", "link_id"):
            _uint(path, where, value, key)
        else:
            fail(path, where, f"unknown failure attribute {key!r}")
        i += 2


def read(path, *, gpus: int | None = None):
    """Import a connection matrix as a `Trace` of send ops (triggers as deps).

    Parameters
    ----------
    path : str or path-like
        The ``.cm`` file.
    gpus : int, optional
        Fabric size for the rank check; defaults to the matrix's ``Nodes``.

    Raises
    ------
    TraceError
        On any malformed input, naming the file and the line (or trigger).
    """
    cm = parse(path)
    signals: dict[int, list[int]] = {t: [] for t in cm["triggers"]}
    for k, c in enumerate(cm["connections"]):
        for t in {c["send_done"], c["recv_done"]} - {0}:
            signals[t].append(k)
    ops = OpList(path)
    for k, c in enumerate(cm["connections"]):
        deps = set()
        if c["trigger"]:
            t = cm["triggers"][c["trigger"]]
            by = signals[c["trigger"]]
            where = f"line {t['line']} (trigger {t['id']}, used by line {c['line']})"
            if not by:
                fail(path, where, "no flow signals it (send_done_trigger/recv_done_trigger): it never fires")
            if t["type"] == "barrier" and t["count"] != len(by):
                fail(path, where, f"barrier counts {t['count']} signals but {len(by)} flows signal it")
            if t["type"] != "barrier" and len(by) > 1:
                fail(
                    path,
                    where,
                    f"{t['type']} fires at the first of {len(by)} signals, which deps cannot express",
                )
            deps = set(by)
        ops.add(
            k,
            Op(
                "send",
                [c["src"], c["dst"]],
                c["size"],
                f"line {c['line']}",
                deps=deps,
                compute_ps=c["start_ps"] or 0,
                stage="htsim",
                phase="flow",
            ),
        )
    return ops.trace(
        gpus=gpus if gpus is not None else cm["nodes"],
        generator="rfabric.traces.importers.htsim",
        parameters={"format": "htsim", "nodes": cm["nodes"], "triggers": len(cm["triggers"])},
    )


def flows(path):
    """Import a connection matrix without triggers as `rfabric.Flows` (src, dst, size,
    start). A matrix with triggers is a TraceError: read it as a trace with `read`."""
    from ...flows import Flows

    cm = parse(path)
    if cm["triggers"]:
        raise TraceError(
            f"{path}: has {len(cm['triggers'])} triggers; import it as a trace (read), not as flows"
        )
    conns = cm["connections"]
    try:
        return Flows(
            [c["src"] for c in conns],
            [c["dst"] for c in conns],
            [c["size"] for c in conns],
            start_ps=[c["start_ps"] for c in conns],
        )
    except SpecError as exc:
        raise TraceError(f"{path}: {exc}") from None
