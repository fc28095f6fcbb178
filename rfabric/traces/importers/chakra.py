"""Chakra execution traces (MLCommons Chakra ET, as ASTRA-sim reads them) -> `Trace`.

One ``.et`` file per rank, named ``<prefix>.<rank>.et`` (ASTRA-sim's naming rule); each is a
stream of messages, every one preceded by its length as a protobuf varint: first a
``GlobalMetadata``, then ``Node``\\ s. The message types are built here, in code, from the
published schema (``schema/protobuf/et_def.proto`` of mlcommons/chakra: package
``ChakraProtoMsg``; the field names, numbers and types below are those of the schema), and
parsed by the ``protobuf`` package; nothing here decodes message bytes by hand.

Mapping (``traces/README.md``, "Importing other formats", lists every field used or ignored):

* ``COMM_COLL_NODE`` -> a collective: attribute ``comm_type`` (``ALL_REDUCE``,
  ``ALL_GATHER``, ``REDUCE_SCATTER``, ``ALL_TO_ALL``, ``BROADCAST``; others are refused),
  ``comm_size`` (bytes). The k-th collective of process group ``pg_name`` (attribute; absent
  means the world group) on every rank that has it is one op over those ranks (or, given
  ASTRA-sim's comm group file, over exactly the ranks it lists); without ``pg_name`` the op
  spans all ranks, and every rank must have it.
* ``COMM_SEND_NODE`` on rank s with ``comm_dst`` d and ``COMM_RECV_NODE`` on rank d with
  ``comm_src`` s are matched in order per (s, d, ``comm_tag``) into one ``send`` op [s, d].
* ``COMP_NODE``: ``duration_micros`` becomes compute time, folded into the ``compute_ps`` of
  the comm nodes that depend on it (the longest chain of compute between two comm nodes).
  Other node types pass their dependencies through with no time.
* ``data_deps`` and ``ctrl_deps`` (node ids of the same file) -> deps between ops.
"""

from __future__ import annotations

import glob
import json
import re
from collections import defaultdict
from functools import cache
from pathlib import Path
from types import SimpleNamespace

from ..._optional import require
from ...errors import TraceError
from ...validators import file_path
from ._common import Op, OpList, fail

# GlobalMetadata, Node, AttributeProto: module __getattr__ builds them on first use
__all__ = ["read", "write_rank", "GlobalMetadata", "Node", "AttributeProto"]  # noqa: F822

#: protobuf's scalar value types (FieldDescriptorProto.TYPE_<NAME>).
_SCALARS = (
    "double",
    "float",
    "int32",
    "int64",
    "uint32",
    "uint64",
    "sint32",
    "sint64",
    "fixed32",
    "fixed64",
    "sfixed32",
    "sfixed64",
    "bool",
    "string",
    "bytes",
)

#: NodeType and CollectiveCommType of et_def.proto (name -> number).
NODE_TYPES = {
    "INVALID_NODE": 0,
    "METADATA_NODE": 1,
    "MEM_LOAD_NODE": 2,
    "MEM_STORE_NODE": 3,
    "COMP_NODE": 4,
    "COMM_SEND_NODE": 5,
    "COMM_RECV_NODE": 6,
    "COMM_COLL_NODE": 7,
    "STORAGE_NODE": 8,
    "BATCH_NODE": 9,
    "CHECKPOINT_NODE": 10,
}
COMM_TYPES = {
    "ALL_REDUCE": 0,
    "REDUCE": 1,
    "ALL_GATHER": 2,
    "GATHER": 3,
    "SCATTER": 4,
    "BROADCAST": 5,
    "ALL_TO_ALL": 6,
    "REDUCE_SCATTER": 7,
    "REDUCE_SCATTER_BLOCK": 8,
    "BARRIER": 9,
}
#: The collectives a trace can hold, by CollectiveCommType number.
_KIND_OF_COMM = {
    COMM_TYPES["ALL_REDUCE"]: "all_reduce",
    COMM_TYPES["ALL_GATHER"]: "all_gather",
    COMM_TYPES["REDUCE_SCATTER"]: "reduce_scatter",
    COMM_TYPES["ALL_TO_ALL"]: "all_to_all",
    COMM_TYPES["BROADCAST"]: "broadcast",
}
_NAME_OF_COMM = {v: k for k, v in COMM_TYPES.items()}
_NAME_OF_NODE = {v: k for k, v in NODE_TYPES.items()}


def _field(msg, name, number, typ, *, repeated=False, oneof=None):
    _F = _protobuf().descriptor_pb2.FieldDescriptorProto
    f = msg.field.add(name=name, number=number)
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if typ in _SCALARS:
        f.type = getattr(_F, f"TYPE_{typ.upper()}")
    elif typ in ("NodeType", "CollectiveCommType"):
        f.type, f.type_name = _F.TYPE_ENUM, f".ChakraProtoMsg.{typ}"
    else:
        f.type, f.type_name = _F.TYPE_MESSAGE, f".ChakraProtoMsg.{typ}"
    if oneof is not None:
        f.oneof_index = oneof
    return f


def _schema():
    """et_def.proto's messages and enums that a network replay reads (not the storage ones):
    a FileDescriptorProto."""
    fd = _protobuf().descriptor_pb2.FileDescriptorProto(
        name="rfabric_chakra_et_def.proto", package="ChakraProtoMsg"
    )
    fd.syntax = "proto3"
    for t in _SCALARS:  # DoubleList ... BytesList: `repeated <t> values = 1`
        lst = fd.message_type.add(name=t.capitalize() + "List")
        _field(lst, "values", 1, t, repeated=True)
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, "string")
    _field(attr, "doc_string", 2, "string")
    attr.oneof_decl.add(name="value")
    for i, t in enumerate(_SCALARS):  # double_val = 3, double_list = 4, ... bytes_list = 32
        _field(attr, f"{t}_val", 3 + 2 * i, t, oneof=0)
        _field(attr, f"{t}_list", 4 + 2 * i, t.capitalize() + "List", oneof=0)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, "string")
    _field(meta, "attr", 2, "AttributeProto", repeated=True)
    for name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COMM_TYPES)):
        enum = fd.enum_type.add(name=name)
        for vname, number in values.items():
            enum.value.add(name=vname, number=number)
    io = fd.message_type.add(name="IOInfo")
    for i, name in enumerate(("values", "shapes", "types")):
        _field(io, name, i + 1, "string")
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, "uint64")
    _field(node, "name", 2, "string")
    _field(node, "type", 3, "NodeType")
    _field(node, "ctrl_deps", 4, "uint64", repeated=True)
    _field(node, "data_deps", 5, "uint64", repeated=True)
    _field(node, "start_time_micros", 6, "uint64")
    _field(node, "duration_micros", 7, "uint64")
    _field(node, "inputs", 8, "IOInfo")
    _field(node, "outputs", 9, "IOInfo")
    _field(node, "attr", 10, "AttributeProto", repeated=True)
    return fd


@cache
def _protobuf() -> SimpleNamespace:
    """The protobuf modules this importer uses (the ``chakra`` extra), imported on first use."""
    feature = "rf.traces.importers.chakra (Chakra ET files)"
    pb = SimpleNamespace(
        descriptor_pb2=require("google.protobuf.descriptor_pb2", "chakra", feature),
        descriptor_pool=require("google.protobuf.descriptor_pool", "chakra", feature),
        message_factory=require("google.protobuf.message_factory", "chakra", feature),
        decoder=require("google.protobuf.internal.decoder", "chakra", feature),
        encoder=require("google.protobuf.internal.encoder", "chakra", feature),
        DecodeError=require("google.protobuf.message", "chakra", feature).DecodeError,
    )
    return pb


@cache
def _messages_of_schema() -> SimpleNamespace:
    """The message classes GlobalMetadata, Node and AttributeProto, built once from _schema()."""
    pb = _protobuf()
    pool = pb.descriptor_pool.DescriptorPool()
    pool.Add(_schema())
    return SimpleNamespace(
        **{
            name: pb.message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ChakraProtoMsg.{name}"))
            for name in ("GlobalMetadata", "Node", "AttributeProto")
        }
    )


def __getattr__(name: str):
    # GlobalMetadata, Node and AttributeProto are built on first use: importing rfabric must
    # not need protobuf
    if name in ("GlobalMetadata", "Node", "AttributeProto"):
        return getattr(_messages_of_schema(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_INT_VALUES = {
    f"{t}_val" for t in ("int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64")
} | {"sfixed32_val", "sfixed64_val"}


def write_rank(path, nodes, metadata=None) -> Path:
    """Write one rank's ET file: ``metadata`` (a GlobalMetadata, default version "0.0.4")
    then ``nodes`` (Node messages), each preceded by its varint length."""
    path = Path(path)
    encoder = _protobuf().encoder
    meta = metadata if metadata is not None else _messages_of_schema().GlobalMetadata(version="0.0.4")
    with open(path, "wb") as fh:
        for msg in [meta, *nodes]:
            blob = msg.SerializeToString()
            fh.write(encoder._VarintBytes(len(blob)))
            fh.write(blob)
    return path


def _messages(path: Path, data: bytes):
    """(offset, bytes) of each length-delimited message of ``data``."""
    pb = _protobuf()
    pos = 0
    while pos < len(data):
        start = pos
        try:
            size, pos = pb.decoder._DecodeVarint32(data, pos)
        except (pb.DecodeError, IndexError):
            raise TraceError(f"{path}: byte {start}: bad varint length prefix") from None
        if pos + size > len(data):
            raise TraceError(
                f"{path}: byte {start}: message of {size} bytes runs past the end of the file "
                f"({len(data) - pos} left): truncated"
            )
        yield start, data[pos : pos + size]
        pos += size


def _attr_int(path, node, name: str, *, required: bool = True):
    """Integer attribute ``name`` of ``node`` (any integer value type), or None."""
    for a in node.attr:
        if a.name == name:
            which = a.WhichOneof("value")
            if which not in _INT_VALUES:
                fail(
                    path, f"node {node.id}", f"attribute {name!r} is {which or 'empty'}, expected an integer"
                )
            return int(getattr(a, which))
    if required:
        fail(path, f"node {node.id}", f"{_NAME_OF_NODE.get(node.type, node.type)} without attribute {name!r}")
    return None


def _attr_str(path, node, name: str):
    for a in node.attr:
        if a.name == name:
            if a.WhichOneof("value") != "string_val":
                fail(path, f"node {node.id}", f"attribute {name!r} must be a string")
            return a.string_val
    return None


def _rank_files(path) -> dict[int, Path]:
    """{rank: file} for a directory of ``*.et`` files, a glob pattern, or one file."""
    p = file_path(path, "chakra.read: path", TraceError)
    text = str(path)
    if p.is_dir():
        files = sorted(p.glob("*.et"))
        if not files:
            raise TraceError(f"{p}: directory holds no .et file")
    elif any(c in text for c in "*?["):
        files = sorted(Path(f) for f in glob.glob(text))
        if not files:
            raise TraceError(f"{text}: no file matches")
    elif p.is_file():
        files = [p]
    else:
        raise TraceError(f"{p}: no such file or directory")
    if len(files) == 1:
        m = re.search(r"\.(\d+)\.et$", files[0].name)
        return {int(m.group(1)) if m else 0: files[0]}
    ranks: dict[int, Path] = {}
    for f in files:
        m = re.search(r"\.(\d+)\.et$", f.name)
        if m is None:
            raise TraceError(f"{f}: name does not end in .<rank>.et (ASTRA-sim's naming rule)")
        r = int(m.group(1))
        if r in ranks:
            raise TraceError(f"{f}: rank {r} again (also {ranks[r]})")
        ranks[r] = f
    n = len(ranks)
    for r in range(n):
        if r not in ranks:
            raise TraceError(
                f"{path}: rank files 0..{n - 1} expected, rank {r} is missing (have {sorted(ranks)})"
            )
    return ranks


def _read_rank(path: Path) -> tuple[object, dict[int, object]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read ({exc})") from None
    msgs, DecodeError = _messages_of_schema(), _protobuf().DecodeError
    meta, nodes = None, {}
    for offset, blob in _messages(path, data):
        msg = msgs.GlobalMetadata() if meta is None else msgs.Node()
        try:
            msg.ParseFromString(blob)
        except DecodeError as exc:
            what = "GlobalMetadata" if meta is None else "Node"
            raise TraceError(f"{path}: byte {offset}: not a valid {what} message ({exc})") from None
        if meta is None:
            meta = msg
            continue
        if msg.id in nodes:
            fail(path, f"node {msg.id} (byte {offset})", "node id appears twice")
        nodes[msg.id] = msg
    if meta is None:
        raise TraceError(f"{path}: empty file (no GlobalMetadata)")
    return meta, nodes


def _walk(path: Path, nodes: dict) -> list[tuple[object, set[int], int]]:
    """Comm nodes of one rank in a topological order, each with the comm nodes it waits for
    and its compute gap in ps (the longest chain of COMP_NODE durations since them)."""
    order, state = [], {}
    for root in nodes:
        if root in state:
            continue
        stack = [(root, iter(_deps(path, nodes, root)))]
        state[root] = 1
        while stack:
            nid, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[nid] = 2
                order.append(nid)
                stack.pop()
            elif state.get(nxt) == 1:
                loop = [s[0] for s in stack]
                loop = loop[loop.index(nxt) :] + [nxt]
                fail(path, f"node {nid}", "dependency cycle " + " -> ".join(f"node {x}" for x in loop))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(_deps(path, nodes, nxt))))
    comm = (NODE_TYPES["COMM_COLL_NODE"], NODE_TYPES["COMM_SEND_NODE"], NODE_TYPES["COMM_RECV_NODE"])
    seen: dict[int, tuple[frozenset, int]] = {}  # what a successor of the node sees: (comm ancestors, gap)
    out = []
    for nid in order:
        node = nodes[nid]
        ancestors, gap = set(), 0
        for d in _deps(path, nodes, nid):
            a, g = seen[d]
            ancestors |= a
            gap = max(gap, g)
        if node.type in comm:
            out.append((node, ancestors, gap))
            seen[nid] = (frozenset([nid]), 0)
        else:
            own = node.duration_micros * 1_000_000 if node.type == NODE_TYPES["COMP_NODE"] else 0
            seen[nid] = (frozenset(ancestors), gap + own)
    return out


def _deps(path, nodes, nid) -> list[int]:
    node = nodes[nid]
    out = []
    for d in list(node.data_deps) + list(node.ctrl_deps):
        if d not in nodes:
            fail(path, f"node {nid}", f"depends on node {d}, which is not in the file")
        if d not in out:
            out.append(d)
    return out


def _comm_groups(source, groups, n: int) -> dict[str, list[int]] | None:
    """{pg_name: sorted ranks} from a dict or an ASTRA-sim comm group JSON file
    (``{"<pg_name>": [npu ids], ...}``, its ``--comm-group-configuration``), checked."""
    if groups is None:
        return None
    where = "comm groups"
    if not isinstance(groups, dict):
        where = str(groups)
        try:
            with open(groups, "rb") as fh:
                groups = json.load(fh)
        except OSError as exc:
            raise TraceError(f"{where}: cannot be read ({exc})") from None
        except ValueError as exc:
            raise TraceError(f"{where}: not valid JSON ({exc})") from None
        if not isinstance(groups, dict):
            raise TraceError(f"{where}: expected a JSON object {{pg_name: [ranks]}}")
    out = {}
    for name, ranks in groups.items():
        ok = isinstance(ranks, list) and ranks and all(type(r) is int and 0 <= r < n for r in ranks)
        if not ok or len(set(ranks)) != len(ranks):
            raise TraceError(
                f"{where}: group {name!r}: expected a list of distinct ranks in 0..{n - 1}, got {ranks!r}"
            )
        out[str(name)] = sorted(ranks)
    return out


def read(path, *, gpus: int | None = None, comm_groups=None):
    """Import Chakra ET rank files as a `Trace`.

    Parameters
    ----------
    path : str or path-like
        A directory (every ``*.et`` in it), a glob pattern (``"trace/llama.*.et"``), or one
        ``.et`` file. Files are named ``<prefix>.<rank>.et``; with several, ranks must be
        exactly 0..n-1. One file without a rank number is rank 0.
    gpus : int, optional
        Fabric size for the rank check; defaults to the highest rank + 1.
    comm_groups : dict or path-like, optional
        The ranks of each ``pg_name``: ``{name: [ranks]}`` or an ASTRA-sim comm group JSON
        file of that shape. Then the k-th collective of a group must be on exactly its
        ranks. Without it a group is the ranks whose files have its collectives.

    Raises
    ------
    TraceError
        On any malformed input, naming the file and the node id (or byte offset).
    rfabric._optional.MissingDependency
        When protobuf is not installed (``pip install 'rfabric[chakra]'``).
    """
    _protobuf()
    files = _rank_files(path)
    n = len(files)
    world = gpus if gpus is not None else max(files) + 1
    groups = _comm_groups(path, comm_groups, max(files) + 1)
    ops = OpList(path)
    colls: dict[tuple, list] = defaultdict(list)  # (pg_name, k) -> [(rank, node, ancestors, gap)]
    p2p: dict[tuple, list] = defaultdict(
        list
    )  # (src, dst, tag, k) -> [(rank, node, ancestors, gap, is_send)]
    key_of: dict[tuple[int, int], tuple] = {}  # (rank, node id) -> op key
    for rank, f in sorted(files.items()):
        _, nodes = _read_rank(f)
        count: dict[tuple, int] = defaultdict(int)
        for node, anc, gap in _walk(f, nodes):
            if node.type == NODE_TYPES["COMM_COLL_NODE"]:
                pg = _attr_str(f, node, "pg_name")
                k = count[("coll", pg)]
                count[("coll", pg)] += 1
                key = ("coll", pg, k)
                colls[key].append((rank, f, node, anc, gap))
            else:
                send = node.type == NODE_TYPES["COMM_SEND_NODE"]
                peer = _attr_int(f, node, "comm_dst" if send else "comm_src")
                tag = _attr_int(f, node, "comm_tag", required=False) or 0
                if not 0 <= peer < n:
                    fail(f, f"node {node.id}", f"peer rank {peer} is outside 0..{n - 1}")
                if peer == rank:
                    fail(f, f"node {node.id}", f"sends to or receives from its own rank {rank}")
                pair = (rank, peer, tag) if send else (peer, rank, tag)
                k = count[("p2p", send, pair)]
                count[("p2p", send, pair)] += 1
                key = ("p2p", *pair, k)
                p2p[key].append((rank, f, node, anc, gap))
            key_of[(rank, node.id)] = key
    for key, members in colls.items():
        _add_collective(ops, key, members, n, key_of, groups)
    for key, members in p2p.items():
        _add_send(ops, key, members, key_of)
    return ops.trace(
        gpus=world,
        generator="rfabric.traces.importers.chakra",
        parameters={"format": "chakra", "ranks": n},
    )


def _where(members) -> str:
    return ", ".join(f"{f.name} node {node.id}" for _, f, node, _, _ in members)


def _add_collective(ops: OpList, key, members, n: int, key_of, groups) -> None:
    _, pg, k = key
    rank0, f0, node0, _, _ = members[0]
    comm = _attr_int(f0, node0, "comm_type")
    if comm not in _KIND_OF_COMM:
        name = _NAME_OF_COMM.get(comm, str(comm))
        fail(
            f0,
            f"node {node0.id}",
            f"comm_type {name} is not supported (supported: ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST)",
        )
    size = _attr_int(f0, node0, "comm_size")
    for _, f, node, _, _ in members[1:]:
        c, s = _attr_int(f, node, "comm_type"), _attr_int(f, node, "comm_size")
        if (c, s) != (comm, size):
            fail(
                f,
                f"node {node.id}",
                f"collective #{k} of group {pg or '(world)'} is {_NAME_OF_COMM.get(c, c)} of {s} bytes here "
                f"but {_NAME_OF_COMM.get(comm, comm)} of {size} bytes in {f0.name} node {node0.id}",
            )
    ranks = sorted(m[0] for m in members)
    if pg is not None and groups is not None:
        if pg not in groups:
            fail(
                f0,
                f"node {node0.id}",
                f"pg_name {pg!r} is not in the comm groups (have {', '.join(sorted(groups))})",
            )
        if ranks != groups[pg]:
            odd = sorted(set(ranks) ^ set(groups[pg]))[0]
            has = "has" if odd in ranks else "lacks"
            fail(
                f0,
                f"node {node0.id}",
                f"collective #{k} of group {pg!r} (ranks {groups[pg]}): rank {odd} {has} it",
            )
    if pg is None and len(ranks) != n:
        missing = sorted(set(range(n)) - set(ranks))
        fail(
            f0,
            f"node {node0.id}",
            f"collective #{k} without pg_name spans all ranks, but rank {missing[0]} has no such collective",
        )
    _add(ops, key, _KIND_OF_COMM[comm], ranks, size, members, key_of)


def _add_send(ops: OpList, key, members, key_of) -> None:
    _, src, dst, tag, k = key
    sends = [m for m in members if m[2].type == NODE_TYPES["COMM_SEND_NODE"]]
    recvs = [m for m in members if m[2].type == NODE_TYPES["COMM_RECV_NODE"]]
    if not sends or not recvs:
        _, f, node, _, _ = members[0]
        what = "receive" if not recvs else "send"
        fail(
            f,
            f"node {node.id}",
            f"message #{k} from rank {src} to rank {dst} (tag {tag}) has no matching {what}",
        )
    _, fs, send, _, _ = sends[0]
    size = _attr_int(fs, send, "comm_size")
    _add(ops, key, "send", [src, dst], size, members, key_of)


def _add(ops: OpList, key, kind, ranks, size, members, key_of) -> None:
    deps, gap = set(), 0
    for rank, _, _, anc, g in members:
        deps |= {key_of[(rank, a)] for a in anc}
        gap = max(gap, g)
    _, f, node, _, _ = members[0]
    if size < 0:
        fail(f, f"node {node.id}", f"comm_size is negative ({size})")
    ops.add(key, Op(kind, ranks, size, _where(members), deps=deps, compute_ps=gap))
