"""Helpers shared by the bench scripts (not part of the rfabric package)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

import rfabric as rf


def qwen3_trace(n: int) -> rf.traces.Trace:
    """One Qwen3-235B-A22B RL iteration with n GPUs training and n generating, as the 2,048-GPU
    bench lays it out: train tp 4, pp 8, ep up to 32; generation tp 4, ep 32; global batch 2n;
    PoDs of up to 512 GPUs; 256 decode steps per op."""
    return rf.traces.generate_rl(
        "qwen3-235b-a22b",
        train_gpus=n,
        gen_gpus=n,
        train=dict(tp=4, pp=8, ep=min(32, n // 32)),
        gen=dict(tp=4, ep=32),
        iterations=1,
        seed=0,
        global_batch=2 * n,
        pod_gpus=min(512, n),
        decode_steps_per_op=256,
    )


def only_stage(tr: rf.traces.Trace, stage: str) -> rf.traces.Trace:
    """The ops of one stage of ``tr``, their dependencies on other stages dropped: replayed
    alone, the stage starts at time 0 on the fabric's initial circuits."""
    t = tr.table.filter(pc.equal(tr.table["stage"].cast(pa.string()), stage))
    if t.num_rows == 0:
        known = sorted(set(tr.table["stage"].cast(pa.string()).to_pylist()))
        raise SystemExit(f"stage {stage!r} is not in the trace (its stages: {', '.join(known)})")
    ids = set(t["op_id"].to_pylist())
    deps = pa.array([[d for d in ds if d in ids] for ds in t["deps"].to_pylist()], type=pa.list_(pa.int64()))
    t = t.set_column(t.schema.get_field_index("deps"), "deps", deps)
    return rf.traces.Trace.from_table(t, tr.metadata, gpus=tr.gpus)


#: The counters a whole-iteration bench prints from ``Results.run`` (flow-backend ones, then
#: what the packet backend counts; missing keys print None).
RUN_KEYS = (
    "ops_done",
    "ops",
    "flows",
    "peak_live_flows",
    "events",
    "recomputes",
    "rate_updates",
    "component_subflows",
    "max_component",
    "quiet_ends",
    "handoffs",
    "controller_wall_s",
    "unroutable",
    "pfc_pauses",
    "ecn_marks",
    "drops",
)
