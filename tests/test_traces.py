"""Trace format: round trips, strict checks with precise messages, the engine view, the CLI."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import rfabric as rf
import rfabric.traces as rt
from rfabric.cli import main as cli_main
from rfabric.errors import TraceError

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "traces").glob("*.arrow")) + sorted((ROOT / "traces").glob("*.parquet"))


def base_columns() -> dict:
    """Six valid ops on 8 GPUs, as plain Python columns."""
    return {
        "op_id": [0, 1, 2, 3, 4, 5],
        "iteration": [0, 0, 0, 0, 0, 1],
        "stage": ["train", "train", "train", "weight_sync", "gen", "gen"],
        "phase": ["fwd", "fwd", "grad_sync", "broadcast", "decode", "decode"],
        "kind": ["all_reduce", "send", "all_reduce", "broadcast", "m2n", "all_to_all"],
        "ranks": [[0, 1], [1, 2], [0, 1, 2, 3], [0, 4, 6], [4, 5, 6, 7], [4, 5]],
        "size_bytes": [1024, 512, 4096, 8192, 300, 64],
        "algorithm": ["ring", "direct", "auto", "direct", "direct", "auto"],
        "deps": [[], [0], [1], [2], [3], [4]],
        "compute_ps": [10, 0, 5, 0, 7, 0],
        "period": [0, 0, 1, 2, 3, 3],
        "m2n_senders": [0, 0, 0, 0, 2, 0],
    }


TYPES = {
    "op_id": pa.int64(),
    "iteration": pa.int32(),
    "stage": pa.string(),
    "phase": pa.string(),
    "kind": pa.string(),
    "ranks": pa.list_(pa.int32()),
    "size_bytes": pa.int64(),
    "algorithm": pa.string(),
    "deps": pa.list_(pa.int64()),
    "compute_ps": pa.int64(),
    "period": pa.int32(),
    "m2n_senders": pa.int32(),
}


def raw_table(cols: dict, types: dict | None = None, metadata: dict | None = None) -> pa.Table:
    types = {**TYPES, **(types or {})}
    table = pa.table({k: pa.array(v, type=types[k]) for k, v in cols.items()})
    return table.replace_schema_metadata(metadata) if metadata else table


def write_raw(table: pa.Table, path: Path, batch_rows: int | None = None) -> Path:
    """Write with plain pyarrow (no checks), as a user's own tool would."""
    if path.suffix == ".parquet":
        pq.write_table(table, path, row_group_size=batch_rows)
    else:
        with ipc.new_file(str(path), table.schema) as w:
            w.write_table(table, max_chunksize=batch_rows)
    return path


@pytest.fixture(scope="module")
def small_rl() -> rt.Trace:
    return rt.generate_rl(
        "qwen2-57b-a14b",
        train_gpus=16,
        gen_gpus=16,
        train=dict(tp=2, pp=2, ep=2),
        gen=dict(tp=2, afd=dict(attn=4, ffn=4)),
        iterations=2,
        global_batch=16,
        prompt_len=64,
        response=dict(median=200, max=600),
        seed=3,
        mode="async",
    )


# -- round trips ---------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".arrow", ".parquet", ".feather", ".ipc"])
def test_round_trip_generated(small_rl, tmp_path, suffix):
    path = rt.write(small_rl, tmp_path / f"t{suffix}")
    back = rt.read(path)
    assert back.equals(small_rl)
    assert back.metadata == small_rl.metadata
    assert back.num_ops == small_rl.num_ops and back.gpus == 32
    a, b = small_rl.arrays(), back.arrays()
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert np.array_equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("suffix", [".arrow", ".parquet"])
def test_round_trip_user_table(tmp_path, suffix):
    trace = rt.Trace.from_table(raw_table(base_columns()), {"gpus": 8, "model": "toy"})
    back = rt.read(rt.write(trace, tmp_path / f"u{suffix}"))
    assert back.equals(trace)
    assert back.metadata["model"] == "toy" and back.gpus == 8
    assert back.table.column("kind").type == pa.dictionary(pa.int32(), pa.string())


def test_read_streams_batches_and_ipc_stream(tmp_path):
    cols = base_columns()
    table = raw_table(cols)
    # Many small record batches: cross-batch deps, sorted check across batch boundaries.
    t1 = rt.read(write_raw(table, tmp_path / "batched.arrow", batch_rows=2))
    t2 = rt.read(write_raw(table, tmp_path / "batched.parquet", batch_rows=2))
    assert t1.equals(t2)
    assert t1.table.column("op_id").num_chunks == 3
    # The IPC stream format is read as well.
    path = tmp_path / "stream.arrow"
    with ipc.new_stream(str(path), table.schema) as w:
        w.write_table(table, max_chunksize=4)
    assert rt.read(path).equals(t1)
    arrays = t1.arrays()  # chunked table: copies, same content
    assert arrays["ranks_offsets"].tolist() == [0, 2, 4, 8, 11, 15, 17]
    assert arrays["deps"].tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_committed_samples(path, tmp_path):
    trace = rt.read(path)
    assert trace.num_ops > 0
    assert path.stat().st_size < 1_000_000
    assert set(trace.table["kind"].to_pylist()) <= set(rt.KINDS)
    # the committed file is what traces/gen_samples.py writes today (not a stale copy)
    spec = importlib.util.spec_from_file_location("gen_samples", ROOT / "traces" / "gen_samples.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(["--out", str(tmp_path)]) == 0
    assert rt.read(tmp_path / path.name).equals(trace)


def test_hand_written_sample_has_every_kind():
    trace = rt.read(ROOT / "traces" / "sample.arrow", gpus=16)
    kinds = set(trace.table.column("kind").to_pylist())
    assert kinds == set(rt.KINDS)


def test_plain_string_and_large_types_accepted(tmp_path):
    cols = base_columns()
    types = {
        "stage": pa.large_string(),
        "ranks": pa.large_list(pa.int32()),
        "deps": pa.large_list(pa.int64()),
    }
    table = raw_table(cols, types)
    table = table.set_column(
        table.schema.get_field_index("kind"),
        "kind",
        pa.array(cols["kind"]).dictionary_encode().cast(pa.dictionary(pa.int8(), pa.large_string())),
    )
    trace = rt.read(write_raw(table, tmp_path / "types.arrow"))
    assert trace.table.schema.field("stage").type == pa.dictionary(pa.int32(), pa.string())
    assert trace.table.schema.field("ranks").type == pa.list_(pa.int32())
    assert trace.equals(rt.Trace.from_table(raw_table(cols)))


# -- engine view ---------------------------------------------------------------------------
def test_arrays_zero_copy_and_csr(small_rl):
    a = small_rl.arrays()
    col = small_rl.table.column("size_bytes").chunk(0)
    buf = np.frombuffer(col.buffers()[1], dtype=np.int64)
    assert np.shares_memory(a["size_bytes"], buf)
    assert a["op_id"].dtype == np.int64 and a["iteration"].dtype == np.int32
    assert a["ranks"].dtype == np.int32 and a["ranks_offsets"].dtype == np.int64
    assert a["deps"].dtype == np.int64 and a["deps_offsets"].dtype == np.int64
    assert a["kind_names"] == list(rt.KINDS) and a["algorithm_names"] == list(rt.ALGORITHMS)
    ranks = small_rl.table.column("ranks").to_pylist()
    kinds = small_rl.table.column("kind").to_pylist()
    for i in (0, 7, len(ranks) // 2, len(ranks) - 1):
        lo, hi = a["ranks_offsets"][i], a["ranks_offsets"][i + 1]
        assert a["ranks"][lo:hi].tolist() == ranks[i]
        assert rt.KINDS[a["kind"][i]] == kinds[i]
    assert a["ranks_offsets"][-1] == len(a["ranks"]) and a["deps_offsets"][-1] == len(a["deps"])
    assert (a["m2n_senders"][a["kind"] == rt.KINDS.index("m2n")] == 4).all()
    assert a["gpus"] == 32


def test_from_columns_and_summary():
    c = base_columns()
    trace = rt.Trace.from_columns(
        op_id=c["op_id"],
        stage=c["stage"],
        phase=c["phase"],
        kind=c["kind"],
        ranks=c["ranks"],
        size_bytes=c["size_bytes"],
        deps=c["deps"],
        iteration=c["iteration"],
        algorithm=c["algorithm"],
        compute_ps=c["compute_ps"],
        period=c["period"],
        m2n_senders=c["m2n_senders"],
        gpus=16,
    )
    # gpus= only bounds the rank check; with no metadata gpus the count is max rank + 1
    assert trace.num_ops == 6 and trace.gpus == 8
    s = trace.summary().to_pylist()
    assert sum(r["ops"] for r in s) == 6 and sum(r["size_bytes"] for r in s) == sum(c["size_bytes"])


def test_from_columns_broadcasts_scalar_strings():
    # a str for stage/phase/kind/algorithm applies to every op (not split into characters)
    trace = rt.Trace.from_columns(
        op_id=[0, 1, 2],
        stage="train",
        phase="moe_dispatch",
        kind="send",
        ranks=[[0, 1], [1, 2], [2, 0]],
        size_bytes=[10, 20, 30],
        deps=[[], [], []],
        algorithm="direct",
        gpus=4,
    )
    t = trace.table
    assert [t.column(c).to_pylist() for c in ("stage", "phase", "kind", "algorithm")] == [
        ["train"] * 3,
        ["moe_dispatch"] * 3,
        ["send"] * 3,
        ["direct"] * 3,
    ]


# -- strict checks -------------------------------------------------------------------------
def mutate(**changes):
    cols = base_columns()
    types = {}
    for key, value in changes.items():
        if isinstance(value, tuple):  # (values, type)
            cols[key], types[key] = value
        elif value is None:
            del cols[key]
        else:
            cols[key] = value
    return cols, types


ROW_CASES = {
    # name: (column changes, row, op_id, column, message fragment)
    "unknown dep": (
        dict(deps=[[], [0], [1], [99], [3], [4]]),
        3,
        3,
        "deps",
        "depends on op 99 which does not exist",
    ),
    "missing earlier dep": (
        dict(op_id=[0, 2, 4, 6, 8, 10], deps=[[], [0], [2], [3], [6], [8]]),
        3,
        6,
        "deps",
        "depends on op 3 which does not exist",
    ),
    "later dep": (
        dict(deps=[[], [0], [4], [1], [3], [4]]),
        2,
        2,
        "deps",
        "depends on op 4 which comes later",
    ),
    "cycle": (
        dict(deps=[[], [3], [1], [2], [3], [4]]),
        1,
        1,
        "deps",
        "dependency cycle op 1 -> op 3 -> op 2 -> op 1",
    ),
    "self cycle": (dict(deps=[[], [0], [2], [2], [3], [4]]), 2, 2, "deps", "depends on itself"),
    "repeated dep": (
        dict(deps=[[], [0], [0, 1, 1], [2], [3], [4]]),
        2,
        2,
        "deps",
        "lists op 1 more than once",
    ),
    "rank outside": (
        dict(ranks=[[0, 1], [1, 2], [0, 1, 2, 3], [0, 4, 6], [4, 5, 6, 7], [4, 8]]),
        5,
        5,
        "ranks",
        "rank 8 is outside the fabric (gpus=8",
    ),
    "negative rank": (
        dict(ranks=[[0, 1], [1, -2], [0, 1, 2, 3], [0, 4, 6], [4, 5, 6, 7], [4, 5]]),
        1,
        1,
        "ranks",
        "rank -2 is negative",
    ),
    "repeated rank": (
        dict(ranks=[[0, 1], [1, 2], [0, 1, 2, 1], [0, 4, 6], [4, 5, 6, 7], [4, 5]]),
        2,
        2,
        "ranks",
        "rank 1 appears more than once",
    ),
    "empty ranks": (
        dict(ranks=[[0, 1], [1, 2], [], [0, 4, 6], [4, 5, 6, 7], [4, 5]]),
        2,
        2,
        "ranks",
        "is empty",
    ),
    "send arity": (
        dict(ranks=[[0, 1], [1, 2, 3], [0, 1, 2, 3], [0, 4, 6], [4, 5, 6, 7], [4, 5]]),
        1,
        1,
        "ranks",
        "a send needs exactly 2 ranks",
    ),
    "negative size": (
        dict(size_bytes=[1024, 512, 4096, 8192, -1, 64]),
        4,
        4,
        "size_bytes",
        "is negative (-1)",
    ),
    "negative compute": (dict(compute_ps=[10, 0, 5, -3, 7, 0]), 3, 3, "compute_ps", "is negative (-3)"),
    "negative period": (dict(period=[0, 0, 1, 2, 3, -1]), 5, 5, "period", "is negative"),
    "duplicate op_id": (
        dict(op_id=[0, 1, 2, 2, 4, 5], deps=[[], [0], [1], [1], [2], [4]]),
        3,
        2,
        "op_id",
        "not greater than the previous op_id 2",
    ),
    "unsorted op_id": (
        dict(op_id=[0, 1, 5, 3, 4, 6], deps=[[], [0], [1], [1], [3], [4]]),
        3,
        3,
        "op_id",
        "not greater than the previous op_id 5",
    ),
    "unknown kind": (
        dict(kind=["all_reduce", "send", "allreduce", "broadcast", "m2n", "all_to_all"]),
        2,
        2,
        "kind",
        "'allreduce': unknown kind",
    ),
    "unknown algorithm": (
        dict(algorithm=["ring", "direct", "auto", "butterfly", "direct", "auto"]),
        3,
        3,
        "algorithm",
        "'butterfly': unknown algorithm",
    ),
    "empty stage": (dict(stage=["train", "train", "train", "", "gen", "gen"]), 3, 3, "stage", "empty name"),
    "m2n senders": (dict(m2n_senders=[0, 0, 0, 0, 4, 0]), 4, 4, "m2n_senders", "is 4, expected 1..3"),
    "m2n senders elsewhere": (dict(m2n_senders=[0, 1, 0, 0, 2, 0]), 1, 1, "m2n_senders", "on a send op"),
    "m2n without senders": (dict(m2n_senders=None), 4, 4, "m2n_senders", "missing"),
    "null size": (dict(size_bytes=[1024, 512, None, 8192, 300, 64]), 2, 2, "size_bytes", "null value"),
    "null rank": (
        dict(ranks=[[0, 1], [1, 2], [0, 1, 2, 3], [0, 4, 6], [4, None, 6, 7], [4, 5]]),
        4,
        4,
        "ranks",
        "null element",
    ),
}


@pytest.mark.parametrize("suffix", [".arrow", ".parquet"])
@pytest.mark.parametrize("case", list(ROW_CASES), ids=lambda c: c.replace(" ", "_"))
def test_malformed_rows_name_file_row_column(tmp_path, case, suffix):
    changes, row, op_id, column, fragment = ROW_CASES[case]
    cols, types = mutate(**changes)
    path = write_raw(raw_table(cols, types), tmp_path / f"bad{suffix}", batch_rows=2)
    with pytest.raises(TraceError) as exc:
        rt.read(path, gpus=8)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: row {row} (op_id {op_id}), column '{column}': "), msg
    assert fragment in msg, msg
    assert isinstance(exc.value, ValueError)


def test_rank_checked_against_metadata_gpus(tmp_path):
    table = raw_table(base_columns(), metadata={b"rfabric.gpus": b"6"})
    path = write_raw(table, tmp_path / "meta.arrow")
    with pytest.raises(
        TraceError, match=r"row 3 \(op_id 3\), column 'ranks': rank 6 is outside the fabric \(gpus=6"
    ):
        rt.read(path)
    assert rt.read(path, gpus=8).num_ops == 6  # the fabric size given by the caller wins


SCHEMA_CASES = {
    "missing column": (dict(deps=None), "deps", "missing (expected list<int64>)"),
    "mistyped size": (
        dict(size_bytes=([1.0] * 6, pa.float64())),
        "size_bytes",
        "has type double, expected int64",
    ),
    "mistyped iteration": (
        dict(iteration=([0] * 6, pa.int64())),
        "iteration",
        "has type int64, expected int32",
    ),
    "mistyped ranks": (dict(ranks=([[0, 1]] * 6, pa.list_(pa.int64()))), "ranks", "expected list<int32>"),
    "unknown column": (dict(colour=(["red"] * 6, pa.string())), "colour", "unknown column"),
}


@pytest.mark.parametrize("suffix", [".arrow", ".parquet"])
@pytest.mark.parametrize("case", list(SCHEMA_CASES), ids=lambda c: c.replace(" ", "_"))
def test_malformed_schema_names_file_and_column(tmp_path, case, suffix):
    changes, column, fragment = SCHEMA_CASES[case]
    cols, types = mutate(**changes)
    path = write_raw(raw_table(cols, {**TYPES, "colour": pa.string(), **types}), tmp_path / f"bad{suffix}")
    with pytest.raises(TraceError) as exc:
        rt.read(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: all rows, column '{column}': "), msg
    assert fragment in msg, msg


def test_newer_schema_version_and_bad_metadata(tmp_path):
    newer = write_raw(
        raw_table(base_columns(), metadata={b"rfabric.schema_version": b"2"}), tmp_path / "v2.arrow"
    )
    with pytest.raises(TraceError, match=r"v2.arrow: trace has schema version 2, newer than the 1"):
        rt.read(newer)
    bad = write_raw(
        raw_table(base_columns(), metadata={b"rfabric.parameters": b"{oops"}), tmp_path / "bad.arrow"
    )
    with pytest.raises(TraceError, match=r"bad.arrow: metadata 'rfabric.parameters' is not valid JSON"):
        rt.read(bad)


def test_sliced_table_is_checked_as_given():
    table = raw_table(base_columns())
    assert rt.Trace.from_table(table.slice(0, 3)).num_ops == 3
    with pytest.raises(
        TraceError, match=r"<table>: row 0 \(op_id 1\), column 'deps': depends on op 0 which does not"
    ):
        rt.Trace.from_table(table.slice(1))


def test_error_rows_count_across_batches(tmp_path):
    cols = base_columns()
    cols["size_bytes"][5] = -7
    path = write_raw(raw_table(cols), tmp_path / "late.parquet", batch_rows=2)
    with pytest.raises(TraceError, match=r"late.parquet: row 5 \(op_id 5\), column 'size_bytes'"):
        rt.read(path)


def test_file_errors(tmp_path):
    with pytest.raises(TraceError, match="unknown trace suffix '.csv'"):
        rt.read(tmp_path / "x.csv")
    with pytest.raises(TraceError, match="no such file"):
        rt.read(tmp_path / "missing.arrow")
    junk = tmp_path / "junk.arrow"
    junk.write_bytes(b"not arrow at all")
    with pytest.raises(TraceError, match="junk.arrow: not an Arrow IPC file or stream"):
        rt.read(junk)
    trace = rt.Trace.from_table(raw_table(base_columns()))
    with pytest.raises(TraceError, match="unknown trace suffix"):
        rt.write(trace, tmp_path / "x.json")
    with pytest.raises(TraceError, match=r"<table>: row 4 \(op_id 4\), column 'size_bytes'"):
        cols = base_columns()
        cols["size_bytes"][4] = -1
        rt.write(raw_table(cols), tmp_path / "y.arrow")


# -- command line --------------------------------------------------------------------------
def test_cli_generate_and_info(tmp_path, capsys):
    out = tmp_path / "cli.parquet"
    argv = [
        "trace",
        "generate",
        "--model",
        "qwen2.5-14b",
        "--train-gpus",
        "8",
        "--gen-gpus",
        "8",
        "--train-tp",
        "4",
        "--train-pp",
        "2",
        "--gen-tp",
        "4",
        "--global-batch",
        "8",
        "--response-median",
        "100",
        "--response-max",
        "300",
        "--seed",
        "5",
        "--weight-sync",
        "flat",
        "-o",
        str(out),
    ]
    assert cli_main(argv) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    trace = rt.read(out)
    params = trace.metadata["parameters"]
    assert params["train"] == {"tp": 4, "pp": 2, "dp": 1, "cp": 1, "ep": 1}
    assert params["seed"] == 5 and params["weight_sync"] == "flat" and trace.gpus == 16
    assert trace.equals(
        rt.generate_rl(
            "qwen2.5-14b",
            train_gpus=8,
            gen_gpus=8,
            train=dict(tp=4, pp=2),
            gen=dict(tp=4),
            global_batch=8,
            response=dict(median=100, max=300),
            seed=5,
            weight_sync="flat",
        )
    )
    for cmd in ("info", "show"):
        assert cli_main(["trace", cmd, str(out)]) == 0
        text = capsys.readouterr().out
        assert f"{out}: {trace.num_ops} ops, 16 GPUs, schema version 1" in text
        assert "weight_sync" in text and "broadcast" in text and "model: qwen2.5-14b" in text
        assert json.loads(text.split("parameters: ")[1].splitlines()[0])["mode"] == "sync"


@pytest.mark.parametrize(
    "flags, kwargs",
    [
        (["--placement", "colocated", "--gen-gpus", "8"], dict(placement="colocated", gen_gpus=8)),
        (
            ["--prefill-dp", "2", "--prefill-tp", "2", "--gen-gpus", "8"],
            dict(prefill=dict(tp=2, dp=2), gen_gpus=8),
        ),
        (["--decode-granularity", "step", "--gen-gpus", "4"], dict(decode_granularity="step", gen_gpus=4)),
    ],
    ids=["colocated", "prefill", "step"],
)
def test_cli_generate_placement_prefill_granularity(tmp_path, capsys, flags, kwargs):
    out = tmp_path / "t.arrow"
    base = [
        "trace",
        "generate",
        "--train-gpus",
        "8",
        "--train-tp",
        "2",
        "--gen-tp",
        "2",
        "--global-batch",
        "8",
    ]
    base += ["--response-median", "16", "--response-max", "32", "-o", str(out)]
    assert cli_main(base + flags) == 0
    capsys.readouterr()
    args = dict(
        train_gpus=8, train=dict(tp=2), gen=dict(tp=2), global_batch=8, response=dict(median=16, max=32)
    )
    assert rt.read(out).equals(rt.generate_rl("qwen2.5-14b", **(args | kwargs)))


def test_cli_errors(tmp_path, capsys):
    assert cli_main(["trace", "info", str(ROOT / "traces" / "sample.arrow"), "--gpus", "8"]) == 2
    assert "column 'ranks': rank 8 is outside the fabric" in capsys.readouterr().err
    bad = [
        "trace",
        "generate",
        "--train-gpus",
        "8",
        "--gen-gpus",
        "8",
        "--train-tp",
        "3",
        "-o",
        str(tmp_path / "x.arrow"),
    ]
    assert cli_main(bad) == 2
    assert "train_gpus=8 is not a multiple of tp*pp*cp=3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(
            ["trace", "generate", "--train-gpus", "8", "--gen-gpus", "8", "--gen-afd", "x", "-o", "y.arrow"]
        )
    capsys.readouterr()


# -- volume --------------------------------------------------------------------------------
# (kind, algorithm, ranks): every algorithm the executor runs for each kind, on ranks that
# span servers of a 16-GPU fat-tree (8 GPUs each) and on ranks inside one server.
VOLUME_CASES = [
    ("all_reduce", "ring", list(range(16))),
    ("all_reduce", "tree", list(range(16))),
    ("all_reduce", "hier_ring", list(range(16))),
    ("all_reduce", "halving_doubling", [0, 1, 8, 9]),
    ("all_reduce", "auto", [0, 1, 2, 3, 4, 5, 6, 7]),
    ("all_gather", "ring", [0, 3, 9, 12, 15]),
    ("all_gather", "direct", [0, 3, 9]),
    ("reduce_scatter", "hier_ring", list(range(16))),
    ("all_to_all", "direct", [1, 2, 10, 11, 14]),
    ("all_to_all", "ring", [1, 2, 10]),
    ("broadcast", "chain", [5, 0, 9, 13]),
    ("broadcast", "tree", [5, 0, 9, 13, 2]),
    ("broadcast", "direct", [5, 0, 9]),
    ("send", "direct", [3, 12]),
]


def test_sent_bytes_is_what_the_replay_sends():
    """Trace.sent_bytes() (closed form per kind) equals the flows the executor creates per op,
    whatever algorithm runs it; summary() sums it."""
    import rfabric as rf

    size = 3 << 20  # divisible by every rank count and channel count above
    kinds, algos, ranks = zip(*VOLUME_CASES, strict=True)
    n = len(VOLUME_CASES)
    trace = rt.Trace.from_columns(
        op_id=list(range(n)),
        stage=["train"] * n,
        phase=["fwd"] * n,
        kind=list(kinds),
        ranks=list(ranks),
        size_bytes=[size * len(r) for r in ranks],
        deps=[[i - 1] if i else [] for i in range(n)],
        algorithm=list(algos),
        gpus=16,
    )
    # payload bytes: the Simple protocol (LL and LL128 lines add flags, tests/test_nccl_model.py)
    res = rf.simulate(rf.topologies.FatTree(16), trace, record_flows=True, coll_protocol="simple")
    op = res.flows["op_id"].to_numpy()
    moved = np.bincount(op, weights=res.flows["size_bytes"].to_numpy(), minlength=n).astype(np.int64)
    assert moved.tolist() == trace.sent_bytes().tolist()
    assert sum(r["sent_bytes"] for r in trace.summary().to_pylist()) == int(moved.sum())


def test_sent_bytes_on_the_hand_written_sample():
    import rfabric as rf

    trace = rt.read(Path(__file__).parent.parent / "traces" / "sample.arrow")
    res = rf.simulate(rf.topologies.FatTree(16), trace, record_flows=True, coll_protocol="simple")
    moved = np.bincount(
        res.flows["op_id"].to_numpy(), weights=res.flows["size_bytes"].to_numpy(), minlength=trace.num_ops
    ).astype(np.int64)
    assert moved.tolist() == trace.sent_bytes().tolist()


def test_sizes_and_compute_gaps_beyond_the_engine_horizon_are_named():
    # they used to run: a compute gap of 2^63 - 1 ps ended the op at -1, a 2^60-byte op
    # raised MemoryError (std::bad_alloc) from the executor
    base = dict(op_id=[0], stage="train", phase="fwd", kind="all_reduce", ranks=[[0, 9]], deps=[[]], gpus=16)
    with pytest.raises(
        TraceError, match=r"row 0 \(op_id 0\), column 'compute_ps': .* beyond the engine's limit"
    ):
        rt.Trace.from_columns(**base, size_bytes=[1024], compute_ps=2**63 - 1)
    with pytest.raises(TraceError, match=r"column 'size_bytes': 1152921504606846976 is beyond"):
        rt.Trace.from_columns(**base, size_bytes=[2**60])
    assert rt.Trace.from_columns(**base, size_bytes=[2**48]).num_ops == 1


def test_from_columns_bulk_and_checked_lists_agree():
    # lists of Python ints take the bulk path; tuples, numpy integers and bad entries the
    # checks row by row: the same column either way, and the same errors as before
    ranks = [[0, 1], [1, 2, 3], [2], [3, 0]]
    deps = [[], [0], [0, 1], [2]]

    def build(r, d):
        return rt.Trace.from_columns(
            op_id=[0, 1, 2, 3],
            stage="train",
            phase="p",
            kind="all_gather",
            ranks=r,
            size_bytes=8,
            deps=d,
            gpus=4,
        ).table

    bulk = build(ranks, deps)
    checked = build([tuple(x) for x in ranks], [[np.int64(v) for v in x] for x in deps])
    assert bulk["ranks"].to_pylist() == checked["ranks"].to_pylist() == ranks
    assert bulk["deps"].to_pylist() == checked["deps"].to_pylist() == deps
    assert bulk["ranks"].type == checked["ranks"].type
    with pytest.raises(rf.TraceError, match=r"row 1, column 'deps': entry True is not an integer"):
        build(ranks, [[], [True], [0], [2]])
    with pytest.raises(rf.TraceError, match=r"row 2, column 'ranks': entry 2147483648 does not fit"):
        build([[0], [1], [2**31], [3]], deps)
