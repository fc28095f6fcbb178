"""SimAI / AICB workload files (the ``.txt`` that aliyun/aicb writes for SimAI) -> `Trace`.

What is relied on (SimAI's ``astra-sim/workload/Workload.cc``, ``initialize_workload``):

* line 1, the header: a parallelism policy, any of the eleven SimAI's ``decode_parallelsim``
  knows (`POLICIES`), then ``key: value`` pairs. SimAI reads the group sizes
  (``model_parallel_NPU_group:`` (TP), ``ep:``, ``pp:``, ``all_gpus:``) for the two
  transformer policies only; the others (``DATA``, ``MICRO`` for micro-benchmarks, ``MODEL``,
  ``HYBRID_DLRM``, ...) run over the whole fabric, whose size comes from ``gpus=`` (or an
  ``all_gpus:`` the header has);
* line 2: the number of rows;
* then one row per line, 12 whitespace-separated fields: name, reserved, forward compute,
  forward comm type, forward comm size, input-grad compute, input-grad comm type, size,
  weight-grad compute, weight-grad comm type, size, update time; a ``HYBRID_CUSTOMIZED``
  row has a 13th, the policy of that row.

Which comm columns a policy issues, and over which ranks, follows SimAI's loop for it
(``Workload::iterate_*``) and its involved dimensions (``decode_involved_dimensions``):
``DATA``, ``MICRO`` and the DLRM policies issue weight-grad comms over all GPUs (DLRM's first
row all three columns), ``MODEL`` forward and input-grad comms, ``DISTRIBUTED_INFERENCE``
forward comms only, ``HYBRID_DATA_MODEL`` forward/input-grad over the first network dimension
(``dim0`` consecutive GPUs, ``model_parallel_NPU_group:`` or ``dim0=``) and weight-grad over
the others (GPUs equal modulo ``dim0``), ``HYBRID_MODEL_DATA`` the reverse. A column a
policy does not issue is ignored, as SimAI ignores it. A ``MICRO`` file's rows become
independent weight-grad collectives with no compute gap (SimAI's micro-benchmark loop waits
for no compute; it issues only the first row, and rfabric imports every row).

Comm types are ``NONE`` or ``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``, ``ALLTOALL``,
optionally suffixed ``_EP`` or ``_DP_EP`` (transformer headers only); unsuffixed, under a
transformer header, they run over the TP group in the forward and input-grad columns and
over the DP group in the weight-grad column (as Workload.cc maps them). Groups, with
DP = all_gpus / (TP x PP) and DP_EP = DP / EP, are laid out Megatron-style (TP fastest, then DP, then PP): rank = stage x TP x DP + d x TP + t. A TP
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

from ...errors import TraceError
from ...validators import file_path
from ._common import Op, OpList, fail, read_text

__all__ = ["read", "POLICIES", "COMM_TYPES"]

#: Every first-line policy SimAI's parser decodes (``decode_parallelsim``), and what this
#: importer runs for it: for each comm column of a row (``fwd``, ``ig``, ``wg``), the rank
#: groups it runs over, or None where SimAI's loop for that policy does not issue it.
#: ``tf`` is the transformer mapping (TP/DP/EP/DP_EP from the header and the comm type's
#: suffix); ``world`` is all GPUs; ``dim0`` the blocks of the first network dimension
#: (``dim0`` consecutive ranks); ``rest`` the other dimensions (ranks equal modulo ``dim0``).
POLICIES = {
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD": {"fwd": "tf", "ig": "tf", "wg": "tf"},
    "HYBRID_TRANSFORMER": {"fwd": "tf", "ig": "tf", "wg": "tf"},
    "DATA": {"fwd": None, "ig": None, "wg": "world"},
    "MICRO": {"fwd": None, "ig": None, "wg": "world"},
    "HYBRID_DLRM": {"fwd": None, "ig": None, "wg": "world"},
    "HYBRID_DLRM_ENHANCED": {"fwd": None, "ig": None, "wg": "world"},
    "MODEL": {"fwd": "world", "ig": "world", "wg": None},
    "DISTRIBUTED_INFERENCE": {"fwd": "world", "ig": None, "wg": None},
    "HYBRID_DATA_MODEL": {"fwd": "dim0", "ig": "dim0", "wg": "rest"},
    "HYBRID_MODEL_DATA": {"fwd": "rest", "ig": "rest", "wg": "dim0"},
    "HYBRID_CUSTOMIZED": {},  # per row: its 13th field names one of the others
}
_TRANSFORMER = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_TRANSFORMER")
#: HYBRID_CUSTOMIZED rows: a transformer row splits the dimensions as the hybrids do
_ROW_TRANSFORMER = {"fwd": "dim0", "ig": "dim0", "wg": "rest"}
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


def _header(path, line: str, gpus: int | None, dim0: int | None) -> dict:
    tokens = line.split()
    if not tokens or tokens[0] not in POLICIES:
        got = tokens[0] if tokens else "an empty line"
        fail(path, "line 1", f"header starts with {got!r}, expected one of {', '.join(POLICIES)}")
    out = {"policy": tokens[0], "ep": 1, "pp": 1}
    for i, tok in enumerate(tokens[1:], start=1):
        if tok in _HEADER:
            if i + 1 >= len(tokens):
                fail(path, "line 1", f"{tok} has no value")
            out[_HEADER[tok]] = _int(path, "line 1", tokens[i + 1], tok[:-1], lo=1)
    if out["policy"] not in _TRANSFORMER:
        # SimAI reads the group sizes for the transformer policies only: the others run over
        # the whole fabric (its size from gpus=, else an all_gpus: the header happens to have)
        # and the first dimension's size (the hybrids) from model_parallel_NPU_group: or dim0=
        world = gpus if gpus is not None else out.get("gpus")
        if world is None:
            fail(path, "line 1", f"a {out['policy']} header does not give the GPU count: pass gpus=")
        out.update(gpus=world, dp=world, tp=dim0 if dim0 is not None else out.get("tp"), ep=1, pp=1)
        if out["gpus"] > MAX_GPUS:
            fail(
                path,
                "line 1",
                f"{out['gpus']} GPUs is beyond the {MAX_GPUS} GPUs an import builds groups for",
            )
        if out["tp"] is not None and out["gpus"] % out["tp"]:
            fail(path, "line 1", f"the first dimension ({out['tp']} GPUs) does not divide the {world} GPUs")
        return out
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


def _comm(path, where: str, text: str, col: str, over: str | None) -> tuple[str, str] | None:
    """(kind, group type) of a comm-type field in column ``col`` whose policy runs it over
    ``over`` (see POLICIES), or None for NONE or a column the policy does not issue."""
    if text == "NONE":
        return None
    for suffix, group in (("_DP_EP", "DP_EP"), ("_EP", "EP"), ("", "DP" if col == "wg" else "TP")):
        base = text[: len(text) - len(suffix)] if suffix else text
        if text.endswith(suffix) and base in COMM_TYPES:
            if over is None:
                return None  # SimAI's loop for this policy never issues this column
            if over != "tf":
                if suffix:
                    fail(
                        path,
                        where,
                        f"comm type {text!r}: the {suffix[1:]} group needs a HYBRID_TRANSFORMER header "
                        "(its ep: gives the EP size)",
                    )
                group = over
            return COMM_TYPES[base], group
    fail(
        path,
        where,
        f"unknown comm type {text!r} (known: NONE, or {', '.join(COMM_TYPES)} with an optional _EP or _DP_EP suffix)",
    )


def _layout(h: dict) -> dict[str, list[list[int]]]:
    """Rank groups by group type: the transformer ones, plus world, dim0 and rest."""
    if h["policy"] in _TRANSFORMER:
        return groups(h["tp"], h["dp"], h["pp"], h["ep"])
    world, d0 = h["gpus"], h["tp"]
    out = {"world": [list(range(world))]}
    if d0 is not None:
        out["dim0"] = [list(range(b, b + d0)) for b in range(0, world, d0)]
        out["rest"] = [list(range(t, world, d0)) for t in range(d0)]
    return out


def read(path, *, gpus: int | None = None, time_unit: str = "ns", dim0: int | None = None):
    """Import a SimAI/AICB workload ``.txt`` as a `Trace` (one training pass).

    Parameters
    ----------
    path : str or path-like
        The workload file.
    gpus : int, optional
        Fabric size for the rank check; defaults to the header's ``all_gpus``. Required for
        the policies whose header does not give it (``DATA``, ``MICRO``, ``MODEL``, ...).
    time_unit : {"ns", "us"}
        Unit of the compute-time fields (SimAI's Tick is ns).
    dim0 : int, optional
        GPUs in the first network dimension, for ``HYBRID_DATA_MODEL``,
        ``HYBRID_MODEL_DATA`` and the transformer or hybrid rows of ``HYBRID_CUSTOMIZED``
        (default: the header's ``model_parallel_NPU_group:``, if it has one). A transformer
        header gives its own groups: ``dim0`` is refused with it.

    Raises
    ------
    TraceError
        On any malformed input, naming the file and the line.
    """
    path = file_path(path, "simai.read: path", TraceError)
    if not isinstance(time_unit, str) or time_unit not in _UNITS_PS:
        fail(path, "time_unit", f"{time_unit!r} is not one of {', '.join(_UNITS_PS)}")
    for name, value in (("gpus", gpus), ("dim0", dim0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            fail(path, name, f"must be a positive integer, got {value!r}")
    scale = _UNITS_PS[time_unit]
    lines = read_text(path)
    if not lines:
        fail(path, "line 1", "empty file (no header)")
    h = _header(path, lines[0], gpus, dim0)
    policy = h["policy"]
    if dim0 is not None and policy in _TRANSFORMER:
        fail(path, "dim0", f"a {policy} header gives its own groups (model_parallel_NPU_group:, ep:, pp:)")
    if len(lines) < 2:
        fail(path, "line 2", "missing (the number of rows)")
    count = _int(path, "line 2", lines[1].strip(), "row count")
    body = [(i + 3, line) for i, line in enumerate(lines[2:]) if line.strip()]
    if len(body) != count:
        fail(path, "line 2", f"says {count} rows, the file has {len(body)}")
    layout = _layout(h)
    nfields = 13 if policy == "HYBRID_CUSTOMIZED" else 12
    rows = []
    for k, (lineno, line) in enumerate(body):
        where = f"line {lineno}"
        f = line.split()
        if len(f) != nfields:
            extra = ", then the row's policy" if nfields == 13 else ""
            fail(
                path,
                where,
                f"{len(f)} fields, expected {nfields} (name, reserved, then 3 x (compute, comm type, size), "
                f"update{extra})",
            )
        over = POLICIES[policy]
        if policy == "HYBRID_CUSTOMIZED":
            if f[12] not in POLICIES or f[12] == "HYBRID_CUSTOMIZED":
                known = ", ".join(p for p in POLICIES if p != "HYBRID_CUSTOMIZED")
                fail(path, where, f"row policy {f[12]!r} is not one of {known}")
            over = _ROW_TRANSFORMER if f[12] in _TRANSFORMER else POLICIES[f[12]]
        elif policy.startswith("HYBRID_DLRM") and k == 0:
            over = {"fwd": "world", "ig": "world", "wg": "world"}  # SimAI: the first row uses all
        for col in ("fwd", "ig", "wg"):
            if over[col] in ("dim0", "rest") and "dim0" not in layout:
                fail(
                    path,
                    where,
                    f"a {f[12] if nfields == 13 else policy} row splits the fabric at its first dimension: "
                    "give its size with model_parallel_NPU_group: in the header or dim0=",
                )
        rows.append(
            {
                "name": f[0],
                "where": where,
                "fwd": (
                    _int(path, where, f[2], "forward compute"),
                    _comm(path, where, f[3], "fwd", over["fwd"]),
                    _int(path, where, f[4], "forward comm size"),
                ),
                "ig": (
                    _int(path, where, f[5], "input-grad compute"),
                    _comm(path, where, f[6], "ig", over["ig"]),
                    _int(path, where, f[7], "input-grad comm size"),
                ),
                "wg": (
                    _int(path, where, f[8], "weight-grad compute"),
                    _comm(path, where, f[9], "wg", over["wg"]),
                    _int(path, where, f[10], "weight-grad comm size"),
                ),
            }
        )
        _int(path, where, f[11], "update time")
    world = gpus if gpus is not None else h["gpus"]
    ops = OpList(path)
    state = {"pending_ps": 0, "last": {}}  # compute since each rank's last blocking op; that op's key
    if policy == "MICRO":
        # SimAI's micro-benchmark loop issues weight-grad collectives and waits for no compute
        steps = [(r, "wg", "grad_sync") for r in rows]
    else:
        steps = [(r, "fwd", "fwd") for r in rows]
        for r in reversed(rows):
            steps += [(r, "ig", "bwd"), (r, "wg", "grad_sync")]
    for n, (row, col, phase) in enumerate(steps):
        compute, comm, size = row[col]
        if policy != "MICRO":
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
    if not ops.ops:
        fail(
            path,
            "all rows",
            f"no communication: under {policy} every comm the rows give is NONE, of size 0, over groups "
            "of one GPU, or in a column that policy does not issue (an empty trace replays nothing)",
        )
    return ops.trace(
        gpus=world,
        generator="rfabric.traces.importers.simai",
        parameters={
            "format": "simai",
            "policy": policy,
            "tp": h["tp"],
            "dp": h["dp"],
            "pp": h["pp"],
            "ep": h["ep"],
            "time_unit": time_unit,
        },
    )
