"""The op-DAG builder: per-rank program order, pending compute, columnar storage.

`OpBuilder.emit` appends K ops of one width at a time (numpy, one call per collective per
group family) and derives each op's dependencies from the program order of its ranks plus
explicit hand-offs (`OpBuilder.expect`). INVARIANT: ops are emitted in a topological order,
so op_ids ascend and every dependency points to an earlier op. Knows nothing about models,
layouts or stages.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ...errors import SpecError
from ..schema import ALGORITHMS, KINDS, OPTIONAL_COLUMNS, SCHEMA

__all__ = ["OpBuilder", "cdiv", "to_ps"]

_PS = 1e12
_I64 = np.int64


def cdiv(a: int, b: int) -> int:
    """Ceiling of a / b for integers (whole bytes, whole micro-batches)."""
    return -(-a // b)


def to_ps(seconds: np.ndarray | float) -> np.ndarray:
    """Seconds (float) -> integer picoseconds, rounded to nearest."""
    return np.rint(np.asarray(seconds, dtype=np.float64) * _PS).astype(_I64)


class OpBuilder:
    """Accumulates ops column by column; computes deps from per-rank program order."""

    def __init__(self, n_ranks: int):
        self.last_op = np.full(n_ranks, -1, dtype=_I64)
        self.pending = np.zeros(n_ranks, dtype=_I64)  # compute (ps) owed before the next op
        # Hand-offs: op ids a rank's next op must wait for (pipeline receives, streamed
        # samples). One slot per rank, vectorised; further ones per rank in a dict.
        self.hand = np.full(n_ranks, -1, dtype=_I64)
        self.hand_more: dict[int, list[int]] = {}
        self.has_more = np.zeros(n_ranks, dtype=bool)
        self.next_id = 0
        self.iteration = 0
        self.period = 0
        self.stage_names: list[str] = []
        self.phase_names: list[str] = []
        self.cols: dict[str, list[np.ndarray]] = {
            k: []
            for k in (
                "iteration",
                "stage",
                "phase",
                "kind",
                "algorithm",
                "size",
                "compute",
                "period",
                "m2n",
                "rank_counts",
                "ranks",
                "dep_counts",
                "deps",
            )
        }

    def _code(self, names: list[str], name: str) -> int:
        if name not in names:
            names.append(name)
        return names.index(name)

    def compute(self, ranks: np.ndarray, seconds: np.ndarray | float) -> None:
        """Add compute time to ``ranks`` (disjoint); it delays each rank's next op."""
        ranks = np.asarray(ranks)
        ps = to_ps(seconds)
        if ps.ndim and ranks.ndim == 2:
            ps = ps[:, None]
        self.pending[ranks] += ps

    def expect(self, ranks: np.ndarray, op_ids: np.ndarray) -> None:
        """Make the next op of each rank wait for the matching op id (a hand-off)."""
        ranks = np.asarray(ranks, dtype=_I64).ravel()
        op_ids = np.asarray(op_ids, dtype=_I64).ravel()
        first = np.zeros(len(ranks), dtype=bool)
        _, idx = np.unique(ranks, return_index=True)
        first[idx] = True
        free = first & (self.hand[ranks] < 0)
        self.hand[ranks[free]] = op_ids[free]
        for r, o in zip(ranks[~free].tolist(), op_ids[~free].tolist(), strict=True):
            self.hand_more.setdefault(r, []).append(o)
            self.has_more[r] = True

    def emit(
        self,
        ranks: np.ndarray,
        size: np.ndarray | int,
        *,
        stage: str,
        phase: str,
        kind: str,
        algorithm: str = "auto",
        program: Sequence[int] | None = None,
        chain: bool = True,
        m2n_senders: int = 0,
        compute: np.ndarray | int = 0,
        after: np.ndarray | None = None,
    ) -> np.ndarray:
        """Append K ops of equal width w; return their op ids.

        Parameters
        ----------
        ranks : ndarray (K, w)
            Global ranks of each op; rows must not share a rank in the columns in ``program``.
        size : ndarray (K,) or int
            size_bytes (nccl-tests convention).
        program : sequence of int, optional
            Columns whose ranks run this op in their program order: the op depends on their
            previous ops and takes their pending compute. Default: all columns.
        chain : bool
            If True, the op becomes the latest op of the ``program`` ranks (their next op
            depends on it). False makes a side op (a send that does not block its sender).
        after : ndarray (K,) or (K, n), optional
            More op ids each row waits for (a side stream's previous op); -1 entries are
            none. With ``program=[]`` (no column) the op is in no rank's program order: it
            waits for ``after`` only (a transfer between buffers the GPUs do not own).
        """
        ranks = np.asarray(ranks, dtype=_I64)
        k, w = ranks.shape
        if k == 0:
            return np.empty(0, dtype=_I64)
        cols = list(range(w)) if program is None else list(program)
        prog = ranks[:, cols]
        ids = np.arange(self.next_id, self.next_id + k, dtype=_I64)
        self.next_id += k

        dmat = self.last_op[prog]
        if after is not None:
            dmat = np.concatenate([dmat, np.asarray(after, dtype=_I64).reshape(k, -1)], axis=1)
        if chain:
            hand = self.hand[prog]
            if (hand >= 0).any():
                dmat = np.concatenate([dmat, hand], axis=1)
                self.hand[prog] = -1
        dmat = np.sort(dmat, axis=1)
        keep = dmat >= 0
        keep[:, 1:] &= dmat[:, 1:] != dmat[:, :-1]
        dep_counts = keep.sum(axis=1)
        dep_vals = dmat[keep]
        if chain and self.has_more[prog].any():
            dep_counts, dep_vals = self._merge_more(prog, dmat, keep)

        comp = np.broadcast_to(np.asarray(compute, dtype=_I64), (k,)) + self.pending[prog].max(
            axis=1, initial=0
        )
        if chain:
            self.pending[prog] = 0
            self.last_op[prog] = ids[:, None]

        c = self.cols
        c["iteration"].append(np.full(k, self.iteration, dtype=np.int32))
        c["stage"].append(np.full(k, self._code(self.stage_names, stage), dtype=np.int32))
        c["phase"].append(np.full(k, self._code(self.phase_names, phase), dtype=np.int32))
        c["kind"].append(np.full(k, KINDS.index(kind), dtype=np.int32))
        c["algorithm"].append(np.full(k, ALGORITHMS.index(algorithm), dtype=np.int32))
        c["size"].append(np.broadcast_to(np.asarray(size, dtype=_I64), (k,)).copy())
        c["compute"].append(comp)
        c["period"].append(np.full(k, self.period, dtype=np.int32))
        c["m2n"].append(np.full(k, m2n_senders, dtype=np.int32))
        c["rank_counts"].append(np.full(k, w, dtype=_I64))
        c["ranks"].append(ranks.ravel())
        c["dep_counts"].append(dep_counts.astype(_I64))
        c["deps"].append(dep_vals)
        return ids

    def _merge_more(self, prog, dmat, keep):
        counts, vals = [], []
        for row in range(prog.shape[0]):
            deps = set(dmat[row][keep[row]].tolist())
            for r in prog[row].tolist():
                if self.has_more[r]:
                    deps.update(self.hand_more.pop(r))
                    self.has_more[r] = False
            counts.append(len(deps))
            vals.extend(sorted(deps))
        return np.array(counts, dtype=_I64), np.array(vals, dtype=_I64)

    def table(self, rank_map: np.ndarray | None) -> pa.Table:
        """The accumulated ops as a table of ``SCHEMA`` (+ ``m2n_senders``)."""
        c = {k: (np.concatenate(v) if v else np.empty(0, dtype=_I64)) for k, v in self.cols.items()}
        n = self.next_id
        ranks = c["ranks"].astype(np.int32) if rank_map is None else rank_map[c["ranks"]].astype(np.int32)
        r_off = np.zeros(n + 1, dtype=_I64)
        np.cumsum(c["rank_counts"], out=r_off[1:])
        d_off = np.zeros(n + 1, dtype=_I64)
        np.cumsum(c["dep_counts"], out=d_off[1:])
        if r_off[-1] >= 2**31 or d_off[-1] >= 2**31:
            raise SpecError(
                "trace too large for list<int32> offsets: generate fewer iterations or coarser ops"
            )

        def dict_col(codes, names):
            return pa.DictionaryArray.from_arrays(
                pa.array(codes.astype(np.int32)), pa.array(names, pa.string())
            )

        arrays = {
            "op_id": pa.array(np.arange(n, dtype=_I64)),
            "iteration": pa.array(c["iteration"].astype(np.int32)),
            "stage": dict_col(c["stage"], self.stage_names),
            "phase": dict_col(c["phase"], self.phase_names),
            "kind": dict_col(c["kind"], list(KINDS)),
            "ranks": pa.ListArray.from_arrays(pa.array(r_off.astype(np.int32)), pa.array(ranks)),
            "size_bytes": pa.array(c["size"].astype(_I64)),
            "algorithm": dict_col(c["algorithm"], list(ALGORITHMS)),
            "deps": pa.ListArray.from_arrays(
                pa.array(d_off.astype(np.int32)), pa.array(c["deps"].astype(_I64))
            ),
            "compute_ps": pa.array(c["compute"].astype(_I64)),
            "period": pa.array(c["period"].astype(np.int32)),
            "m2n_senders": pa.array(c["m2n"].astype(np.int32)),
        }
        fields = list(SCHEMA) + [OPTIONAL_COLUMNS.field("m2n_senders")]
        return pa.Table.from_arrays([arrays[f.name] for f in fields], schema=pa.schema(fields))
