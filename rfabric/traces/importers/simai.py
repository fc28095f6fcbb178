"""SimAI / AICB workload files (the ``.txt`` that aliyun/aicb writes for SimAI) -> `Trace`.

What is relied on (SimAI's ``astra-sim/workload/Workload.cc``, ``initialize_workload``):

* line 1, the header: a parallelism policy (``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` or
  ``HYBRID_TRANSFORMER``; others are refused), then ``key: value`` pairs, of which
  ``model_parallel_NPU_group:`` (TP), ``ep:``, ``pp:`` and ``all_gpus:`` are used;
* line 2: the number of rows;
* then one row per line, 12 whitespace-separated fields: name, reserved, forward compute,
  forward comm type, forward comm size, input-grad compute, input-grad comm type, size,
  weight-grad compute, weight-grad comm type, size, update time.

Comm types are ``NONE`` or ``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``, ``ALLTOALL``,
optionally suffixed ``_EP`` or ``_DP_EP``; unsuffixed they run over the TP group in the
forward and input-grad columns and over the DP group in the weight-grad column (as
Workload.cc maps them). Groups, with DP = all_gpus / (TP x PP) and DP_EP = DP / EP, are laid
out Megatron-style (TP fastest, then DP, then PP): rank = stage x TP x DP + d x TP + t. A TP
group is TP consecutive ranks; a DP group the ranks of one (stage, t); an EP group EP
consecutive members of a DP group; a DP_EP group the members of a DP group with the same
index mod EP. Each row's comm becomes one op per group instance.

Compute times are SimAI ``Tick``\\ s, nanoseconds (its ns-3 front end schedules them as
``NanoSeconds``); ``time_unit="us"`` reads them as microseconds instead. The order is
SimAI's: forward over the rows, then input-grad and weight-grad from the last row back to the
first. Forward and input-grad comms block (each waits for the previous blocking op on its
ranks); weight-grad comms do not (nothing in the pass waits for them). Every compute time
adds to the gap before the next op of the rank.
"""

from __future__ import annotations

from pathlib import Path

from ._common import Op, OpList, fail, read_text

__all__ = ["read", "POLICIES", "COMM_TYPES"]

POLICIES = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_TRANSFORMER")
COMM_TYPES = {
    "ALLREDUCE": "all_reduce",
    "ALLGATHER": "all_gather",
    "REDUCESCATTER": "reduce_scatter",
    "ALLTOALL": "all_to_all",
}
_UNITS_PS = {"ns": 1_000, "us": 1_000_000}
#: Largest all_gpus accepted (every row becomes one op per group instance).
MAX_GPUS = 1 << 17
_HEADER = {"model_parallel_NPU_group:": "tp", "ep:": "ep", "pp:": "pp", "all_gpus:": "gpus"}


def _int(path, where: str, text: str, what: str, lo: int = 0) -> int:
    try:
        v = int(text)
    except ValueError:
        fail(path, where, f"{what} {text!r} is not an integer")
    if v < lo:
        fail(path, where, f"{what} is {v}, expected >= {lo}")
    return v


def _header(path, line: str) -> dict[str, int]:
    tokens = line.split()
    if not tokens or tokens[0] not in POLICIES:
        got = tokens[0] if tokens else "an empty line"
        fail(path, "line 1", f"header starts with {got!r}, expected one of {', '.join(POLICIES)}")
    out = {"ep": 1, "pp": 1}
    for i, tok in enumerate(tokens[1:], start=1):
        if tok in _HEADER:
            if i + 1 >= len(tokens):
                fail(path, "line 1", f"{tok} has no value")
            out[_HEADER[tok]] = _int(path, "line 1", tokens[i + 1], tok[:-1], lo=1)
    for key, name in (("tp", "model_parallel_NPU_group"), ("gpus", "all_gpus")):
        if key not in out:
            fail(path, "line 1", f"header has no {name}:")
    tp, pp, ep, gpus = out["tp"], out["pp"], out["ep"], out["gpus"]
    if gpus % (tp * pp):
        fail(path, "line 1", f"all_gpus {gpus} is not a multiple of TP x PP = {tp} x {pp}")
    dp = gpus // (tp * pp)
    if dp % ep:
        fail(path, "line 1", f"DP = {dp} (all_gpus / (TP x PP)) is not a multiple of ep {ep}")
    if gpus > MAX_GPUS:
        fail(path, "line 1", f"all_gpus {gpus} is beyond the {MAX_GPUS} GPUs an import builds groups for")
    out["dp"] = dp
    return out


def groups(tp: int, dp: int, pp: int, ep: int) -> dict[str, list[list[int]]]:
    """The rank groups of each group type (TP, DP, EP, DP_EP) for this layout."""

    def rank(s, d, t):
        return s * tp * dp + d * tp + t

    out = {"TP": [], "DP": [], "EP": [], "DP_EP": []}
    for s in range(pp):
        for d in range(dp):
            out["TP"].append([rank(s, d, t) for t in range(tp)])
        for t in range(tp):
            members = [rank(s, d, t) for d in range(dp)]
            out["DP"].append(members)
            out["EP"] += [members[i : i + ep] for i in range(0, dp, ep)]
            out["DP_EP"] += [members[i::ep] for i in range(ep)]
    return out


def _comm(path, where: str, text: str, weight_grad: bool) -> tuple[str, str] | None:
    """(kind, group type) of a comm-type field, or None for NONE."""
    if text == "NONE":
        return None
    for suffix, group in (("_DP_EP", "DP_EP"), ("_EP", "EP"), ("", "DP" if weight_grad else "TP")):
        base = text[: len(text) - len(suffix)] if suffix else text
        if text.endswith(suffix) and base in COMM_TYPES:
            return COMM_TYPES[base], group
    fail(
        path,
        where,
        f"unknown comm type {text!r} (known: NONE, or {', '.join(COMM_TYPES)} with an optional _EP or _DP_EP suffix)",
    )


def read(path, *, gpus: int | None = None, time_unit: str = "ns"):
    """Import a SimAI/AICB workload ``.txt`` as a `Trace` (one training pass).

    Parameters
    ----------
    path : str or path-like
        The workload file.
    gpus : int, optional
        Fabric size for the rank check; defaults to the header's ``all_gpus``.
    time_unit : {"ns", "us"}
        Unit of the compute-time fields (SimAI's Tick is ns).

    Raises
    ------
    TraceError
        On any malformed input, naming the file and the line.
    """
    path = Path(path)
    if time_unit not in _UNITS_PS:
        fail(path, "time_unit", f"{time_unit!r} is not one of {', '.join(_UNITS_PS)}")
    scale = _UNITS_PS[time_unit]
    lines = read_text(path)
    if not lines:
        fail(path, "line 1", "empty file (no header)")
    h = _header(path, lines[0])
    if len(lines) < 2:
        fail(path, "line 2", "missing (the number of rows)")
    count = _int(path, "line 2", lines[1].strip(), "row count")
    body = [(i + 3, line) for i, line in enumerate(lines[2:]) if line.strip()]
    if len(body) != count:
        fail(path, "line 2", f"says {count} rows, the file has {len(body)}")
    layout = groups(h["tp"], h["dp"], h["pp"], h["ep"])
    rows = []
    for lineno, line in body:
        where = f"line {lineno}"
        f = line.split()
        if len(f) != 12:
            fail(
                path,
                where,
                f"{len(f)} fields, expected 12 (name, reserved, then 3 x (compute, comm type, size), update)",
            )
        rows.append(
            {
                "name": f[0],
                "where": where,
                "fwd": (
                    _int(path, where, f[2], "forward compute"),
                    _comm(path, where, f[3], False),
                    _int(path, where, f[4], "forward comm size"),
                ),
                "ig": (
                    _int(path, where, f[5], "input-grad compute"),
                    _comm(path, where, f[6], False),
                    _int(path, where, f[7], "input-grad comm size"),
                ),
                "wg": (
                    _int(path, where, f[8], "weight-grad compute"),
                    _comm(path, where, f[9], True),
                    _int(path, where, f[10], "weight-grad comm size"),
                ),
            }
        )
        _int(path, where, f[11], "update time")
    world = gpus if gpus is not None else h["gpus"]
    ops = OpList(path)
    state = {"pending_ps": 0, "last": {}}  # compute since each rank's last blocking op; that op's key
    steps = [(r, "fwd", "fwd") for r in rows]
    for r in reversed(rows):
        steps += [(r, "ig", "bwd"), (r, "wg", "grad_sync")]
    for n, (row, col, phase) in enumerate(steps):
        compute, comm, size = row[col]
        state["pending_ps"] += compute * scale
        if comm is None or size == 0:
            continue
        kind, group = comm
        blocking = col != "wg"
        for g, ranks in enumerate(layout[group]):
            if len(ranks) < 2:
                continue
            key = (n, g)
            deps = {state["last"][r] for r in ranks if r in state["last"]}
            where = f"{row['where']} ({row['name']}, {col} {kind} over {group} group {g})"
            ops.add(
                key,
                Op(
                    kind,
                    ranks,
                    size,
                    where,
                    deps=deps,
                    compute_ps=state["pending_ps"],
                    stage="train",
                    phase=phase,
                ),
            )
        if blocking and any(len(r) > 1 for r in layout[group]):
            for g, ranks in enumerate(layout[group]):
                if len(ranks) > 1:
                    state["last"].update(dict.fromkeys(ranks, (n, g)))
            state["pending_ps"] = 0
    return ops.trace(
        gpus=world,
        generator="rfabric.traces.importers.simai",
        parameters={
            "format": "simai",
            "tp": h["tp"],
            "dp": h["dp"],
            "pp": h["pp"],
            "ep": h["ep"],
            "time_unit": time_unit,
        },
    )
