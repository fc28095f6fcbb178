"""Surfaces that feed files and columns: trace files, imports, importer text, trace columns and schemas, TOML bytes."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np

import rfabric as rf

from .common import _FABRICS, _PRESETS, ROOT, _odd


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    mode = rng.randrange(4)
    if mode == 0:  # bit flips
        for _ in range(rng.randint(1, 20)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif mode == 1:  # truncation
        b = b[: rng.randrange(len(b))]
    elif mode == 2:  # a run of random bytes
        i = rng.randrange(len(b))
        b[i : i + 8] = bytes(rng.randrange(256) for _ in range(8))
    else:  # a slice repeated
        i, j = sorted(rng.randrange(len(b)) for _ in range(2))
        b = b[:j] + b[i:j] + b[j:]
    return bytes(b)


_SAMPLES: dict[str, bytes] = {}


def _sample(suffix: str, workdir: Path) -> bytes:
    if suffix not in _SAMPLES:
        trace = rf.traces.read(ROOT / "traces" / "sample.arrow")
        path = workdir / f"sample{suffix}"
        rf.traces.write(trace, path)
        _SAMPLES[suffix] = path.read_bytes()
    return _SAMPLES[suffix]


def trace_file(rng: random.Random, workdir: Path) -> None:
    """A damaged Arrow IPC or Parquet trace file, read with rf.traces.read. Accepted: it
    replays to the end on a fabric of its size (flow backend): no op left waiting."""
    suffix = rng.choice([".arrow", ".parquet"])
    path = workdir / f"fuzz{suffix}"
    path.write_bytes(_mutate_bytes(rng, _sample(suffix, workdir)))
    trace = rf.traces.read(path)
    _replays(trace)


def _replays(trace) -> None:
    """An accepted trace runs to the end (every op ends) on a FatTree of its GPUs."""
    gpus = trace.gpus
    if not 2 <= gpus <= 64 or gpus % 2:
        return
    key = f"replay{gpus}"
    if key not in _FABRICS:
        _FABRICS[key] = rf.topologies.FatTree(gpus, gpus_per_server=2).to_spec()
    res = rf.simulate(_FABRICS[key], trace, backend="flow")
    ends = res.ops["end_ps"].to_numpy(zero_copy_only=False)
    assert (ends >= 0).all(), f"{int((ends < 0).sum())} of {len(ends)} ops never ended"


_SIMAI = (
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 4\n"
    "2\n"
    "embedding_layer\t-1\t300\tALLREDUCE\t4096\t1\tNONE\t0\t20\tNONE\t0\t100\n"
    "mlp_row\t-1\t500\tREDUCESCATTER\t8192\t400\tALLGATHER\t8192\t400\tALLREDUCE\t65536\t100\n"
)


_HTSIM = (
    "Nodes 4\nConnections 3\nTriggers 1\n"
    "0->1 id 1 start 0.5 size 4096 send_done_trigger 1\n"
    "1->2 id 2 trigger 1 size 8192\n"
    "3->0 id 3 start 2 size 100\n"
    "trigger id 1 oneshot\n"
)


def _chakra_ranks() -> list[bytes]:
    """Two rank files: compute, a world all-reduce, a message 0 -> 1, a group all-gather."""
    from rfabric.traces.importers import chakra as c

    attr, kinds = c.AttributeProto, c.NODE_TYPES
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for rank in range(2):
            nodes = [
                c.Node(id=1, type=kinds["COMP_NODE"], duration_micros=3),
                c.Node(
                    id=2,
                    type=kinds["COMM_COLL_NODE"],
                    data_deps=[1],
                    attr=[attr(name="comm_type", int64_val=0), attr(name="comm_size", int64_val=1 << 16)],
                ),
                c.Node(
                    id=3,
                    type=kinds["COMM_SEND_NODE" if rank == 0 else "COMM_RECV_NODE"],
                    ctrl_deps=[2],
                    attr=[
                        attr(name="comm_dst" if rank == 0 else "comm_src", int32_val=1 - rank),
                        attr(name="comm_size", int64_val=4096),
                    ],
                ),
                c.Node(
                    id=4,
                    type=kinds["COMM_COLL_NODE"],
                    data_deps=[3],
                    attr=[
                        attr(name="comm_type", int64_val=2),
                        attr(name="comm_size", int64_val=8192),
                        attr(name="pg_name", string_val="tp"),
                    ],
                ),
            ]
            out.append(c.write_rank(Path(tmp) / f"r.{rank}.et", nodes).read_bytes())
    return out


def import_file(rng: random.Random, workdir: Path) -> None:
    """A Chakra rank file, SimAI workload or htsim matrix, damaged (or, one time in six,
    intact), imported with rf.traces.read. Accepted: it replays to the end."""
    fmt = rng.choice(["chakra", "simai", "htsim"])
    intact = rng.randrange(6) == 0
    if fmt == "chakra":
        ranks = _chakra_ranks()
        victim = rng.randrange(len(ranks))
        target = workdir / "et"
        target.mkdir(exist_ok=True)
        for old in target.glob("*"):
            old.unlink()
        for r, data in enumerate(ranks):
            damaged = data if intact or r != victim else _mutate_bytes(rng, data)
            (target / f"r.{r}.et").write_bytes(damaged)
        _replays(rf.traces.read(target))
        return
    text = (_SIMAI if fmt == "simai" else _HTSIM).encode()
    path = workdir / ("fuzz.txt" if fmt == "simai" else "fuzz.cm")
    path.write_bytes(text if intact else _mutate_bytes(rng, text))
    _replays(rf.traces.read(path, format=fmt))


_SIMAI_HEADERS = [
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 4",
    "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 ep: 2 pp: 1 all_gpus: 8",
    "MICRO",
    "DATA",
    "MODEL",
    "DISTRIBUTED_INFERENCE",
    "HYBRID_DLRM DLRM_LAST_BOTTOM_LAYER: 0",
    "HYBRID_DLRM_ENHANCED",
    "HYBRID_DATA_MODEL model_parallel_NPU_group: 2",
    "HYBRID_MODEL_DATA",
    "HYBRID_CUSTOMIZED",
]


_SIMAI_COMMS = ["NONE"] + [
    "ALLREDUCE",
    "ALLGATHER",
    "REDUCESCATTER",
    "ALLTOALL",
    "ALLREDUCE_EP",
    "ALLTOALL_DP_EP",
    "ALLREDUCEALLTOALL",
    "ALLREDUCE_X",
    "allreduce",
]


def importer_text(rng: random.Random, workdir: Path) -> None:
    """SimAI workloads under every header SimAI decodes, and htsim matrices, generated field
    by field (odd counts, sizes, comm types, row policies, gpus=/dim0=) rather than damaged.
    Accepted: the trace is non-empty, its ranks within the GPUs, and it replays to the end
    on a fabric of that size (no op left waiting)."""
    which = rng.random()
    if which < 0.2:
        trace = _generated_chakra(rng, workdir)
    elif which < 0.65:
        header = rng.choice(_SIMAI_HEADERS)
        rows = rng.randint(0, 3)
        lines = [header, str(rows + rng.choice([0] * 18 + [1, -1]))]
        for r in range(rows):
            f = [f"layer{r}", "-1"]
            for _ in range(3):
                f += [
                    str(_odd(rng, [0, 1, 100, 5000], [-1, 2**70, "x"], 0.02)),
                    _odd(rng, _SIMAI_COMMS[:5], _SIMAI_COMMS[5:], 0.03),
                    str(_odd(rng, [64, 4096, 1 << 20, 0], [-4, 2**50, 1.5], 0.02)),
                ]
            f.append("1")
            if header.startswith("HYBRID_CUSTOMIZED") or rng.random() < 0.05:
                f.append(
                    rng.choice(["DATA", "MODEL", "HYBRID_TRANSFORMER", "MICRO", "HYBRID_CUSTOMIZED", "X"])
                )
            if rng.random() < 0.03:
                f.pop(rng.randrange(len(f)))
            lines.append(rng.choice(["\t", " ", "   "]).join(f))
        path = workdir / "w.txt"
        path.write_text("\n".join(lines) + "\n")
        # what the header leaves open, given as the importer asks (or, one time in ten, not)
        sized = "all_gpus:" in header
        options = {"gpus": _odd(rng, [None] if sized else [4, 8], [3, 0, 2.5, None, 4], 0.1)}
        splits = header.startswith(("HYBRID_MODEL_DATA", "HYBRID_CUSTOMIZED"))
        if splits or rng.random() < 0.1:
            options["dim0"] = _odd(rng, [2, 2, 4], [3, 0, "2"], 0.1)
        options = {k: v for k, v in options.items() if v is not None}
        if "dim0" in options:  # an importer option rf.traces.read does not take
            from rfabric.traces.importers import simai

            trace = simai.read(path, **options)
        else:
            trace = rf.traces.read(path, format="simai", **options)
    else:
        n = rng.choice([2, 4, 4])
        conns = []
        for c in range(rng.randint(0 if rng.random() < 0.1 else 1, 4)):
            src = rng.randrange(n + 1) if rng.random() < 0.03 else rng.randrange(n)
            dst = (src + rng.randrange(1, n)) % n if rng.random() < 0.97 else src
            key = _odd(rng, ["start 0.5", "start 0", "start 3"], ["start 1e400", "trigger 1", ""], 0.03)
            size = _odd(rng, ["size 4096", "size 1"], ["size 0", "", "size -3", f"size {2**60}"], 0.03)
            conns.append(f"{src}->{dst} id {c + 1} {key} {size}".strip())
        text = f"Nodes {n}\nConnections {len(conns)}\n" + "\n".join(conns) + "\n"
        path = workdir / "m.cm"
        path.write_text(text)
        trace = rf.traces.read(path)
    assert trace.num_ops > 0
    gpus = trace.gpus
    ranks = trace.table["ranks"].combine_chunks().flatten().to_numpy()
    assert (ranks >= 0).all() and (ranks < gpus).all()
    _replays(trace)


def _generated_chakra(rng: random.Random, workdir: Path):
    """Two or three Chakra rank files built node by node: compute, world and group
    collectives, matched or unmatched sends, deps (some dangling, to themselves, or forming a
    cycle), attributes missing or of the wrong type; imported with rf.traces.read."""
    from rfabric.traces.importers import chakra as c

    attr, kinds = c.AttributeProto, c.NODE_TYPES
    ranks = rng.choice([2, 2, 3])
    script = []  # the same sequence on every rank (collectives must agree), odd where chosen
    for _ in range(rng.randint(1, 4)):
        what = rng.choice(["comp", "coll", "coll", "p2p"])
        script.append((what, rng.choice([0, 2, 4]), rng.choice([1 << 12, 1 << 16]), rng.random() < 0.5))
    target = workdir / "et_gen"
    target.mkdir(exist_ok=True)
    for old in target.glob("*"):
        old.unlink()
    for r in range(ranks):
        nodes = []
        for i, (what, comm, size, grouped) in enumerate(script, start=1):
            deps = [i - 1] if i > 1 else []
            if rng.random() < 0.04:
                deps = rng.choice([[i], [99], [i + 1]])  # itself, dangling, forward
            if what == "comp":
                nodes.append(
                    c.Node(id=i, type=kinds["COMP_NODE"], duration_micros=rng.choice([0, 5]), data_deps=deps)
                )
                continue
            if what == "coll":
                a = [attr(name="comm_type", int64_val=comm), attr(name="comm_size", int64_val=size)]
                if grouped:
                    a.append(attr(name="pg_name", string_val="g"))
                if rng.random() < 0.04:
                    a = a[rng.randrange(1, 2) :]  # comm_type missing
                if rng.random() < 0.03:
                    a[0] = attr(name=a[0].name, string_val="x")  # a string where an int belongs
                nodes.append(c.Node(id=i, type=kinds["COMM_COLL_NODE"], data_deps=deps, attr=a))
                continue
            # p2p between ranks 0 and 1 (others pass a compute node); unmatched now and then
            if r > 1:
                nodes.append(c.Node(id=i, type=kinds["COMP_NODE"], data_deps=deps))
                continue
            send = r == 0 if rng.random() > 0.03 else True
            peer = 1 - r
            nodes.append(
                c.Node(
                    id=i,
                    type=kinds["COMM_SEND_NODE" if send else "COMM_RECV_NODE"],
                    ctrl_deps=deps,
                    attr=[
                        attr(name="comm_dst" if send else "comm_src", int32_val=peer),
                        attr(name="comm_size", int64_val=size),
                    ],
                )
            )
        c.write_rank(target / f"g.{r}.et", nodes)
    return rf.traces.read(target)


_SIZE_STRINGS = ["64MiB", "1KB", "4 KiB", "0B", "x", "1e400B", "1PiB", "-4B", "1.5B", "2GiB", ""]


_TIME_STRINGS = ["1us", "0.5 ms", "0ps", "3kg", "1e30ps", "-1ns", "1.5ps", "2s"]


def trace_columns(rng: random.Random, workdir: Path) -> None:
    """Trace.from_columns with unit strings, floats, bools, None, huge integers, numpy
    arrays, ragged lists and short columns. Accepted: every size and compute entry equals its
    value parsed independently (rfabric.units), every other column is as given."""
    from rfabric.traces import Trace
    from rfabric.units import parse_size, parse_time

    n = rng.randint(0, 4)
    size = [rng.choice([1 << 12, 1 << 20, "64MiB", "1KB"]) for _ in range(n)]
    compute = rng.choice([0, "1us", [rng.choice([0, 5, "2ns"]) for _ in range(n)]])
    cols = dict(
        op_id=list(range(n)),
        stage="train",
        phase="p",
        kind=rng.choice(["all_reduce", "all_gather", ["all_reduce"] * n]),
        ranks=[[0, 1, 2][: rng.randint(2, 3)] for _ in range(n)],
        deps=[[i - 1] if i else [] for i in range(n)],
        size_bytes=size,
        compute_ps=compute,
        iteration=0,
        period=0,
    )
    for _ in range(rng.randint(0, 2)):
        col = rng.choice(sorted(cols))
        junk = rng.choice(
            [
                rng.choice(_SIZE_STRINGS),
                rng.choice(_TIME_STRINGS),
                2.0,
                2.5,
                True,
                None,
                2**70,
                -1,
                "3",
                [1, 2],
                [1.5],
                np.int64(3),
                np.float64(2.0),
                np.nan,
            ]
        )
        value = cols[col]
        if isinstance(value, list) and value and rng.random() < 0.8:
            value = list(value)
            value[rng.randrange(len(value))] = junk
        elif rng.random() < 0.5:
            value = junk
        elif isinstance(value, list) and rng.random() < 0.5:
            value = value[:-1]  # a short column
        elif isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value):
            value = np.array(value)  # numpy, as a user's arrays come
        cols[col] = value
    trace = Trace.from_columns(**cols)
    t = trace.table.to_pydict()
    size = cols["size_bytes"]
    want_size = (
        [parse_size(v) for v in size] if isinstance(size, (list, np.ndarray)) else [parse_size(size)] * n
    )
    assert t["size_bytes"] == want_size, (cols["size_bytes"], t["size_bytes"])
    comp = cols["compute_ps"]
    want_comp = (
        [parse_time(v) for v in comp] if isinstance(comp, (list, np.ndarray)) else [parse_time(comp)] * n
    )
    assert t["compute_ps"] == want_comp, (comp, t["compute_ps"])
    assert t["op_id"] == [int(v) for v in cols["op_id"]]
    assert t["ranks"] == [[int(r) for r in row] for row in cols["ranks"]]
    assert trace.num_ops == n > 0


def trace_schema(rng: random.Random, workdir: Path) -> None:
    """A trace file with a column dropped, renamed, retyped, duplicated, added or moved, or
    its metadata changed. Accepted: the trace read back equals the original (a change that
    is accepted must be one that changes nothing, such as string for dictionary)."""
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    original = rf.traces.read(ROOT / "traces" / "sample.arrow")
    table = original.table
    names = table.schema.names
    name = rng.choice(names)
    mode = rng.randrange(7)
    if mode == 0:
        table = table.drop_columns([name])
    elif mode == 1:
        table = table.rename_columns([n + "_x" if n == name else n for n in names])
    elif mode == 2:
        typ = rng.choice([pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.large_string(), pa.uint64()])
        try:
            col = table[name].cast(typ)
        except (pa.ArrowException, NotImplementedError):
            return
        table = table.set_column(names.index(name), pa.field(name, typ), col)
    elif mode == 3:
        table = table.append_column(rng.choice([name, "extra"]), table[name])
    elif mode == 4:
        order = names[:]
        rng.shuffle(order)
        table = table.select(order)
    elif mode == 5:
        meta = dict(table.schema.metadata or {})
        key = rng.choice([b"rfabric.gpus", b"rfabric.schema_version", b"rfabric.parameters", b"other"])
        meta[key] = rng.choice([b"8", b"0", b"2", b"x", b"{}", b"[]", b"99", b"1"])
        table = table.replace_schema_metadata(meta)
    else:
        table = table.slice(0, rng.choice([0, 1, 5]))
    path = workdir / rng.choice(["s.arrow", "s.parquet"])
    if path.suffix == ".arrow":
        feather.write_feather(table, str(path))
    else:
        pq.write_table(table, str(path))
    got = rf.traces.read(path)
    if mode == 6:
        # a prefix of the sample: its rows, nothing else
        assert got.num_ops == table.num_rows > 0
        return
    assert got.equals(original) or (mode == 5 and got.table.num_rows == original.num_ops), mode


def toml_bytes(rng: random.Random, workdir: Path) -> None:
    """A preset or sweep config that is not text: random bytes, a preset with a byte
    flipped, a directory; read by rf.topologies.load or the sweep config loader."""
    from rfabric.sweeps import load_config

    load = rng.choice([rf.topologies.load, load_config])
    intact = rng.choice(_PRESETS) if load is rf.topologies.load else ROOT / "examples" / "sweep.toml"
    mode = rng.randrange(4)
    path = workdir / "b.toml"
    if mode == 0:
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
    elif mode == 1:
        path.write_bytes(_mutate_bytes(rng, intact.read_bytes()))
    elif mode == 2:
        path = workdir / "adir.toml"
        path.mkdir(exist_ok=True)
    else:  # intact: what the loader reads every day
        path.write_bytes(intact.read_bytes())
    load(path)
