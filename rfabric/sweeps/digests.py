"""Content hashes of a sweep's points: ``config_id`` (the resume key) from the built fabric's
tables, the made workload's content, the controller's state and the point's settings.
"""

from __future__ import annotations

import hashlib
import inspect
import json

import numpy as np
import pyarrow as pa


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


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
    IPC bytes), a flow set's four arrays, or each job's name, start, GPUs and workload."""
    from ..flows import Flows
    from ..jobs import as_jobs

    jobs = as_jobs(workload)
    if jobs is not None:  # each job's placement, start, name and workload
        h = _Hash().add("kind", "jobs")
        for j in jobs:
            h.add("job", _canon([j.name, j.start_ps])).add("gpus", j.gpus).add(
                "workload", workload_digest(j.workload)
            )
        return h.hexdigest()
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


def _config_id(p, fab_digest: str, own: str | None, w_digest: str) -> str:
    h = _Hash().add("config", p.config).add("fabric", fab_digest).add("own_controller", own or "")
    return h.add("workload", w_digest).hexdigest()[:16]
