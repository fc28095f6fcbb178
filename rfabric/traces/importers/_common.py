"""What every importer shares: the op list it builds, the topological numbering of its ops,
and the refusal helper. An importer turns its format's records into `Op`s keyed by
anything hashable, with deps on other keys; `OpList.trace` numbers them in a topological
order (a cycle or a dangling key is a TraceError naming the records) and hands the columns to
`Trace.from_columns`, so an imported trace passes the same strict checker as a read one.
Knows nothing about any one format.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ...errors import TraceError
from ...units import MAX_SIZE_BYTES, MAX_TIME_PS
from ...validators import file_path
from ..schema import check_gpus
from ..trace import Trace

__all__ = ["Op", "OpList", "fail"]


def fail(source, record: str, msg: str) -> NoReturn:
    """Raise TraceError "``source``: ``record``: ``msg``" (the file, then the record in it)."""
    raise TraceError(f"{source}: {record}: {msg}")


@dataclass
class Op:
    """One op of an imported trace, before numbering.

    ``where`` names the record(s) it came from (for messages); ``deps`` are keys of other ops.
    """

    kind: str
    ranks: list[int]
    size_bytes: int
    where: str
    deps: set = field(default_factory=set)
    compute_ps: int = 0
    stage: str = "imported"
    phase: str = "comm"


class OpList:
    """Ops keyed by any hashable, in insertion order; ``source`` names the input in messages."""

    def __init__(self, source):
        self.source = str(source)
        self.ops: dict[Any, Op] = {}

    def add(self, key, op: Op) -> Op:
        if op.size_bytes < 0 or op.size_bytes > MAX_SIZE_BYTES:
            fail(self.source, op.where, f"size {op.size_bytes} bytes is outside 0..{MAX_SIZE_BYTES}")
        if op.compute_ps < 0 or op.compute_ps > MAX_TIME_PS:
            fail(self.source, op.where, f"compute gap {op.compute_ps} ps is outside 0..{MAX_TIME_PS}")
        self.ops[key] = op
        return op

    def _order(self) -> list:
        """Keys in a topological order of the deps, ties broken by insertion order (Kahn)."""
        index = {k: i for i, k in enumerate(self.ops)}
        keys = list(self.ops)
        users: dict[Any, list] = {k: [] for k in keys}
        missing = {}
        for k, op in self.ops.items():
            missing[k] = len(op.deps)
            for d in op.deps:
                if d not in index:
                    fail(self.source, op.where, f"depends on {d!r}, which is not an op")
                if d == k:
                    fail(self.source, op.where, "depends on itself (a dependency cycle)")
                users[d].append(k)
        ready = [index[k] for k in keys if missing[k] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            k = keys[heapq.heappop(ready)]
            order.append(k)
            for u in users[k]:
                missing[u] -= 1
                if missing[u] == 0:
                    heapq.heappush(ready, index[u])
        if len(order) < len(keys):
            raise TraceError(f"{self.source}: dependency cycle: {self._cycle(missing)}")
        return order

    def _cycle(self, missing: dict) -> str:
        """A cycle among the ops left unordered, as "a -> b -> a" of their records."""
        left = {k for k, m in missing.items() if m > 0}
        k = min(left, key=list(self.ops).index)
        path, seen = [], {}
        while k not in seen:
            seen[k] = len(path)
            path.append(k)
            k = next(d for d in self.ops[k].deps if d in left)
        loop = path[seen[k] :] + [k]
        return " -> ".join(self.ops[x].where for x in loop)

    def trace(self, *, gpus: int, generator: str, parameters: dict[str, Any]) -> Trace:
        """The checked Trace of these ops (op_ids 0.. in topological order).

        ``gpus`` is the rank count; ``generator`` and ``parameters`` go into the metadata.
        """
        gpus = check_gpus(gpus, self.source)
        if not self.ops:
            fail(
                self.source, "all records", "no communication (compute only): an empty trace replays nothing"
            )
        order = self._order()
        number = {k: i for i, k in enumerate(order)}
        ops = [self.ops[k] for k in order]
        for op in ops:
            for r in op.ranks:
                if not 0 <= r < gpus:
                    fail(self.source, op.where, f"rank {r} is outside 0..{gpus - 1}")
        return Trace.from_columns(
            op_id=list(range(len(ops))),
            stage=[op.stage for op in ops],
            phase=[op.phase for op in ops],
            kind=[op.kind for op in ops],
            ranks=[op.ranks for op in ops],
            size_bytes=[op.size_bytes for op in ops],
            deps=[sorted(number[d] for d in op.deps) for op in ops],
            compute_ps=[op.compute_ps for op in ops],
            metadata={"gpus": gpus, "generator": generator, "parameters": parameters},
            source=self.source,
        )


def read_text(path: Path) -> list[str]:
    """The lines of text file ``path``; a missing or unreadable file, or one that is not
    UTF-8 (named by line), is a TraceError."""
    path = file_path(path, "workload path", TraceError)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read ({exc})") from None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TraceError(f"{path}: line {line}: byte {exc.start} is not UTF-8 text ({exc.reason})") from None
