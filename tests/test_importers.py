"""rfabric.traces.importers: Chakra ET, SimAI/AICB and htsim connection matrices.

Every input here is written by the test from the public format descriptions (the Chakra
rank files with the importer's own message classes), and every expectation is worked out by
hand from the file, not from the importer's output: op counts, bytes per group, deps and
compute gaps. Malformed inputs must each raise TraceError naming the file and the record.
"""

from __future__ import annotations

import numpy as np
import pytest

import rfabric as rf
from rfabric.errors import TraceError
from rfabric.traces.importers import chakra, htsim, simai

# -- Chakra ---------------------------------------------------------------------------------

A = chakra.AttributeProto
COLL, SEND, RECV, COMP = (
    chakra.NODE_TYPES[k] for k in ("COMM_COLL_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE", "COMP_NODE")
)


def coll(nid, comm, size, deps=(), pg=None, ctrl=()):
    attrs = [A(name="comm_type", int64_val=chakra.COMM_TYPES[comm]), A(name="comm_size", int64_val=size)]
    if pg is not None:
        attrs.append(A(name="pg_name", string_val=pg))
    return chakra.Node(
        id=nid, name=f"coll{nid}", type=COLL, data_deps=list(deps), ctrl_deps=list(ctrl), attr=attrs
    )


def comp(nid, us, deps=()):
    return chakra.Node(id=nid, name=f"gemm{nid}", type=COMP, duration_micros=us, data_deps=list(deps))


def p2p(nid, send, peer, size, tag=0, deps=()):
    attrs = [
        A(name="comm_dst" if send else "comm_src", int32_val=peer),
        A(name="comm_size", uint64_val=size),
        A(name="comm_tag", int32_val=tag),
    ]
    return chakra.Node(id=nid, type=SEND if send else RECV, ctrl_deps=list(deps), attr=attrs)


def write_ranks(tmp_path, per_rank, prefix="llama"):
    d = tmp_path / "et"
    d.mkdir()
    for rank, nodes in enumerate(per_rank):
        chakra.write_rank(d / f"{prefix}.{rank}.et", nodes)
    return d


def four_ranks():
    """4 ranks: 5 us compute -> world all-reduce of 1 MiB -> 2 us compute -> a 2-rank
    all-gather of 64 KiB in group tp01 (ranks 0, 1) or tp23 (ranks 2, 3), then 3 us compute
    and a 4 KiB message rank 0 -> 2 (tag 7), then a world broadcast of 8 KiB after both."""
    out = []
    for r in range(4):
        pg = "tp01" if r < 2 else "tp23"
        nodes = [comp(10, 5), coll(11, "ALL_REDUCE", 1 << 20, [10]), comp(12, 2, [11])]
        nodes.append(coll(13, "ALL_GATHER", 1 << 16, [12], pg=pg))
        nodes.append(comp(14, 3, [13]))
        last = [14]
        if r == 0:
            nodes.append(p2p(15, True, 2, 4096, tag=7, deps=[14]))
            last = [15]
        elif r == 2:
            nodes.append(p2p(15, False, 0, 4096, tag=7, deps=[14]))
            last = [15]
        nodes.append(coll(16, "BROADCAST", 8192, ctrl=last))
        out.append(nodes)
    return out


def rows(trace):
    return trace.table.select(["op_id", "kind", "ranks", "size_bytes", "deps", "compute_ps"]).to_pylist()


def test_chakra_ops_groups_deps_and_compute_gaps(tmp_path):
    d = write_ranks(tmp_path, four_ranks())
    trace = rf.traces.read(d)  # a directory of rank files
    assert trace.gpus == 4 and trace.num_ops == 5
    got = {(r["kind"], tuple(r["ranks"])): r for r in rows(trace)}
    ar = got[("all_reduce", (0, 1, 2, 3))]
    ag01, ag23 = got[("all_gather", (0, 1))], got[("all_gather", (2, 3))]
    snd, bc = got[("send", (0, 2))], got[("broadcast", (0, 1, 2, 3))]
    assert (ar["size_bytes"], ag01["size_bytes"], snd["size_bytes"], bc["size_bytes"]) == (
        1 << 20,
        1 << 16,
        4096,
        8192,
    )
    # compute gaps: the COMP_NODE durations (us -> ps) between comm nodes
    assert ar["compute_ps"] == 5_000_000 and ar["deps"] == []
    assert ag01["compute_ps"] == ag23["compute_ps"] == 2_000_000
    assert ag01["deps"] == ag23["deps"] == [ar["op_id"]]
    assert snd["compute_ps"] == 3_000_000 and snd["deps"] == sorted([ag01["op_id"], ag23["op_id"]])
    # the broadcast waits for the send on ranks 0 and 2 and for the all-gathers (through the
    # 3 us compute) on ranks 1 and 3
    assert bc["deps"] == sorted([snd["op_id"], ag01["op_id"], ag23["op_id"]])
    assert bc["compute_ps"] == 3_000_000
    # bytes per group
    per = {}
    for r in rows(trace):
        per[tuple(r["ranks"])] = per.get(tuple(r["ranks"]), 0) + r["size_bytes"]
    assert per == {(0, 1, 2, 3): (1 << 20) + 8192, (0, 1): 1 << 16, (2, 3): 1 << 16, (0, 2): 4096}


def test_chakra_path_forms_give_the_same_trace(tmp_path):
    d = write_ranks(tmp_path, four_ranks())
    by_dir = chakra.read(d)
    assert chakra.read(str(d / "llama.*.et")).equals(by_dir)
    assert rf.traces.read(str(d / "llama.*.et")).equals(by_dir)
    one = chakra.read(d / "llama.1.et")  # one file: rank 1 alone (gpus 2), its world op over rank 1
    assert [r["ranks"] for r in rows(one)] == [[1], [1], [1]] and one.gpus == 2


OK = [coll(1, "ALL_REDUCE", 64)]
NEG = [
    chakra.Node(id=1, type=COLL, attr=[A(name="comm_type", int64_val=0), A(name="comm_size", int64_val=-5)])
]
NOSIZE = [chakra.Node(id=1, type=COLL, attr=[A(name="comm_type", int64_val=0)])]
CHAKRA_BAD = [  # (name, rank 0's nodes, rank 1's nodes, message)
    ("truncated", OK, OK, r"llama\.1\.et: byte \d+: message of \d+ bytes runs past the end of the file"),
    ("bad varint", OK, OK, r"llama\.1\.et: byte \d+: bad varint length prefix"),
    (
        "unknown comm type",
        [coll(1, "REDUCE", 64)],
        [coll(1, "REDUCE", 64)],
        r"llama\.0\.et: node 1: comm_type REDUCE is not supported",
    ),
    ("negative size", NEG, NEG, r"llama\.0\.et: node 1: comm_size is negative \(-5\)"),
    ("no size", NOSIZE, NOSIZE, r"llama\.0\.et: node 1: COMM_COLL_NODE without attribute 'comm_size'"),
    (
        "unknown dep",
        OK,
        [coll(1, "ALL_REDUCE", 64, deps=[99])],
        r"llama\.1\.et: node 1: depends on node 99, which is not in the file",
    ),
    (
        "node cycle",
        OK,
        [comp(1, 1, deps=[2]), comp(2, 1, deps=[1])],
        r"llama\.1\.et: node \d: dependency cycle node \d -> node \d -> node \d",
    ),
    (
        "duplicate id",
        OK,
        [comp(1, 1), comp(1, 2)],
        r"llama\.1\.et: node 1 \(byte \d+\): node id appears twice",
    ),
    (
        "unmatched send",
        OK,
        [*OK, p2p(2, True, 0, 64)],
        r"llama\.1\.et: node 2: message #0 from rank 1 to rank 0 \(tag 0\) has no matching receive",
    ),
    ("peer out of range", OK, [p2p(2, True, 9, 64)], r"llama\.1\.et: node 2: peer rank 9 is outside 0\.\.1"),
    (
        "mismatched collective",
        OK,
        [coll(1, "ALL_REDUCE", 128)],
        r"llama\.1\.et: node 1: collective #0 of group \(world\) is ALL_REDUCE of 128 bytes here but ALL_REDUCE of 64 bytes in llama\.0\.et node 1",
    ),
    (
        "missing world collective",
        OK,
        [comp(1, 1)],
        r"llama\.0\.et: node 1: collective #0 without pg_name spans all ranks, but rank 1 has no such collective",
    ),
]


@pytest.mark.parametrize("name,rank0,rank1,match", CHAKRA_BAD, ids=[c[0] for c in CHAKRA_BAD])
def test_chakra_malformed_inputs_are_named(tmp_path, name, rank0, rank1, match):
    d = write_ranks(tmp_path, [rank0, rank1])
    f = d / "llama.1.et"
    if name == "truncated":
        f.write_bytes(f.read_bytes()[:-3])
    elif name == "bad varint":
        f.write_bytes(f.read_bytes() + b"\xff" * 11)
    with pytest.raises(TraceError, match=match):
        chakra.read(d)


def test_chakra_cross_rank_cycle_and_missing_ranks_are_named(tmp_path):
    # rank 0 runs group a then b, rank 1 b then a: the merged ops wait for each other
    d = write_ranks(
        tmp_path,
        [
            [coll(1, "ALL_REDUCE", 64, pg="a"), coll(2, "ALL_REDUCE", 64, deps=[1], pg="b")],
            [coll(1, "ALL_REDUCE", 64, pg="b"), coll(2, "ALL_REDUCE", 64, deps=[1], pg="a")],
        ],
    )
    with pytest.raises(
        TraceError, match=r"et: dependency cycle: llama\.\d\.et node \d, llama\.\d\.et node \d -> "
    ):
        chakra.read(d)
    (d / "llama.1.et").rename(d / "llama.3.et")
    with pytest.raises(TraceError, match=r"rank files 0\.\.1 expected, rank 1 is missing"):
        chakra.read(d)
    (d / "llama.0.et").write_bytes(b"")
    with pytest.raises(TraceError, match=r"llama\.0\.et: empty file \(no GlobalMetadata\)"):
        chakra.read(d / "llama.0.et")


# -- SimAI / AICB --------------------------------------------------------------------------

SIMAI = """HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 2 pp: 1 vpp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0
3
grad_gather\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLGATHER\t4096\t100
attention_row\t-1\t1000\tALLREDUCE\t8192\t500\tALLREDUCE\t8192\t200\tNONE\t0\t100
mlp_moelayer\t-1\t3000\tALLTOALL_EP\t16384\t1500\tALLTOALL_EP\t16384\t700\tREDUCESCATTER_DP_EP\t2048\t100
"""


def test_simai_groups_sizes_deps_and_gaps(tmp_path):
    path = tmp_path / "gpt.txt"
    path.write_text(SIMAI)
    trace = rf.traces.read(path, format="simai")
    # TP 2, PP 1 -> DP 4; EP 2 -> DP_EP 2. TP groups {0,1} {2,3} {4,5} {6,7}; DP groups
    # {0,2,4,6} {1,3,5,7}; EP groups split each DP group in consecutive pairs; DP_EP takes
    # every other member.
    tp = [[0, 1], [2, 3], [4, 5], [6, 7]]
    ep = [[0, 2], [4, 6], [1, 3], [5, 7]]
    dp_ep = [[0, 4], [2, 6], [1, 5], [3, 7]]
    dp = [[0, 2, 4, 6], [1, 3, 5, 7]]
    t = trace.table.to_pylist()
    by = {}
    for r in t:
        by.setdefault((r["phase"], r["kind"]), []).append(r)
    assert {k: len(v) for k, v in by.items()} == {
        ("fwd", "all_reduce"): 4,
        ("fwd", "all_to_all"): 4,
        ("bwd", "all_to_all"): 4,
        ("bwd", "all_reduce"): 4,
        ("grad_sync", "reduce_scatter"): 4,
        ("grad_sync", "all_gather"): 2,
    }
    assert sorted(r["ranks"] for r in by[("fwd", "all_reduce")]) == tp
    assert sorted(r["ranks"] for r in by[("fwd", "all_to_all")]) == sorted(ep)
    assert sorted(r["ranks"] for r in by[("grad_sync", "reduce_scatter")]) == sorted(dp_ep)
    assert sorted(r["ranks"] for r in by[("grad_sync", "all_gather")]) == dp
    # bytes per (phase, kind): one size per group instance
    assert sum(r["size_bytes"] for r in by[("bwd", "all_to_all")]) == 4 * 16384
    assert sum(r["size_bytes"] for r in by[("grad_sync", "all_gather")]) == 2 * 4096
    # compute gaps (ns -> ps): fwd rows 0 and 1 (1 + 1000) before the first all-reduce; the
    # last row's forward (3000) before the all-to-all; its input-grad compute (1500) before
    # its input-grad all-to-all, then its weight-grad compute (700) before the non-blocking
    # reduce-scatter; row 1's input-grad all-reduce waits 700 + 500; the final all-gather
    # 200 + 1 + 1 after it.
    gaps = {k: {r["compute_ps"] for r in v} for k, v in by.items()}
    assert gaps == {
        ("fwd", "all_reduce"): {1_001_000},
        ("fwd", "all_to_all"): {3_000_000},
        ("bwd", "all_to_all"): {1_500_000},
        ("grad_sync", "reduce_scatter"): {700_000},
        ("bwd", "all_reduce"): {1_200_000},
        ("grad_sync", "all_gather"): {202_000},
    }
    ids = {tuple(r["ranks"]) + (r["phase"], r["kind"]): r["op_id"] for r in t}
    # the all-to-all over {0, 2} waits for the TP all-reduces of {0, 1} and {2, 3}
    assert by[("fwd", "all_to_all")][0]["deps"] == sorted(
        [ids[(0, 1, "fwd", "all_reduce")], ids[(2, 3, "fwd", "all_reduce")]]
    )
    # the reduce-scatter over {0, 4} waits for the input-grad all-to-alls of 0 and 4;
    # nothing waits for it (weight-grad comms do not block)
    rs = next(r for r in t if r["ranks"] == [0, 4])
    assert rs["deps"] == sorted([ids[(0, 2, "bwd", "all_to_all")], ids[(4, 6, "bwd", "all_to_all")]])
    assert not any(rs["op_id"] in r["deps"] for r in t)
    us = simai.read(path, time_unit="us")
    assert us.table.column("compute_ps").to_pylist() == [
        c * 1000 for c in trace.table.column("compute_ps").to_pylist()
    ]


SIMAI_BAD = [
    (
        "missing header",
        lambda s: s.split("\n", 1)[1],
        r"gpt\.txt: line 1: header starts with '3', expected one of",
    ),
    ("empty", lambda s: "", r"gpt\.txt: line 1: empty file \(no header\)"),
    ("no all_gpus", lambda s: s.replace(" all_gpus: 8", ""), r"line 1: header has no all_gpus:"),
    (
        "bad layout",
        lambda s: s.replace("all_gpus: 8", "all_gpus: 6"),
        r"line 1: DP = 3 \(all_gpus / \(TP x PP\)\) is not a multiple of ep 2",
    ),
    ("row count", lambda s: s.replace("\n3\n", "\n4\n"), r"line 2: says 4 rows, the file has 3"),
    (
        "unknown comm type",
        lambda s: s.replace("ALLTOALL_EP\t16384\t1500", "ALLTOALL_XP\t16384\t1500"),
        r"line 5: unknown comm type 'ALLTOALL_XP'",
    ),
    (
        "negative size",
        lambda s: s.replace("ALLREDUCE\t8192\t500", "ALLREDUCE\t-8192\t500"),
        r"line 4: forward comm size is -8192, expected >= 0",
    ),
    ("bad line", lambda s: s.replace("\t100\n", "\n", 1), r"line 3: 11 fields, expected 12"),
    (
        "not a number",
        lambda s: s.replace("\t1000\t", "\t1e3\t"),
        r"line 4: forward compute '1e3' is not an integer",
    ),
]


def test_a_txt_needs_its_format(tmp_path):
    path = tmp_path / "gpt.txt"
    path.write_text(SIMAI)
    with pytest.raises(TraceError, match=r"gpt\.txt: a \.txt trace is ambiguous: pass format='simai'"):
        rf.traces.read(path)
    with pytest.raises(TraceError, match=r"unknown import format 'astra'"):
        rf.traces.read(path, format="astra")


# -- htsim ---------------------------------------------------------------------------------

CM = """# a chain 0 -> 1 -> 2 and a barrier joining two flows
Nodes 4
Connections 5
Triggers 2
0->1 id 1 start 1.5 size 1000 send_done_trigger 1
1->2 id 2 trigger 1 size 2000 recv_done_trigger 2
2->3 id 3 start 0 size 3000 prio 2 recv_done_trigger 2
3->0 id 4 trigger 2 size 4000
0->2 start 0.000001 size 5
trigger id 1 oneshot
trigger id 2 barrier count 2
"""


def test_htsim_sends_triggers_and_start_times(tmp_path):
    path = tmp_path / "chain.cm"
    path.write_text(CM)
    trace = rf.traces.read(path)
    assert trace.gpus == 4
    r = rows(trace)
    by_ranks = {tuple(x["ranks"]): x for x in r}
    assert [x["kind"] for x in r] == ["send"] * 5
    f1, f2, f3, f4, f5 = (by_ranks[k] for k in ((0, 1), (1, 2), (2, 3), (3, 0), (0, 2)))
    assert (f1["compute_ps"], f1["deps"]) == (1_500_000, [])  # 1.5 us
    assert (f5["compute_ps"], f5["deps"]) == (1, [])  # 1e-6 us = 1 ps
    assert (f2["compute_ps"], f2["deps"]) == (0, [f1["op_id"]])
    assert f4["deps"] == sorted([f2["op_id"], f3["op_id"]])
    assert sum(x["size_bytes"] for x in r) == 1000 + 2000 + 3000 + 4000 + 5


def test_htsim_without_triggers_is_a_flow_set(tmp_path):
    path = tmp_path / "perm.cm"
    path.write_text("Nodes 3\nConnections 2\n0->1 start 2 size 100\n2->0 start 0.5 size 7\n")
    flows = htsim.flows(path)
    assert flows.src.tolist() == [0, 2] and flows.dst.tolist() == [1, 0]
    assert flows.size_bytes.tolist() == [100, 7] and flows.start_ps.tolist() == [2_000_000, 500_000]
    with pytest.raises(TraceError, match=r"has 2 triggers; import it as a trace"):
        (tmp_path / "t.cm").write_text(CM)
        htsim.flows(tmp_path / "t.cm")


CM_BAD = [
    ("missing nodes", lambda s: s.replace("Nodes 4\n", ""), r"chain\.cm: header: no 'Nodes <count>' line"),
    (
        "count",
        lambda s: s.replace("Connections 5", "Connections 6"),
        r"chain\.cm: header: says 6 connections, the file has 5",
    ),
    (
        "unknown trigger",
        lambda s: s.replace("trigger 1 size", "trigger 9 size"),
        r"chain\.cm: line 6: refers to trigger 9, which is not declared",
    ),
    (
        "node out of range",
        lambda s: s.replace("3->0", "7->0"),
        r"line 8: node 7 is outside 0\.\.3 \(Nodes 4\)",
    ),
    (
        "negative size",
        lambda s: s.replace("size 5\n", "size -5\n"),
        r"line 9: size '-5' is not a non-negative integer",
    ),
    (
        "bad line",
        lambda s: s.replace("trigger id 1 oneshot", "trigger id 1 oneshot\nflow 1 2"),
        r"line 11: unknown line starting with 'flow'",
    ),
    ("unknown token", lambda s: s.replace("prio 2", "priority 2"), r"line 7: unknown token 'priority'"),
    (
        "start and trigger",
        lambda s: s.replace("id 2 trigger 1", "id 2 start 1 trigger 1"),
        r"line 6: needs exactly one of 'start' and 'trigger'",
    ),
    ("bad start", lambda s: s.replace("start 1.5", "start 1.5us"), r"line 5: start '1\.5us' is not a number"),
    (
        "barrier count",
        lambda s: s.replace("count 2", "count 3"),
        r"line 11 \(trigger 2, used by line 8\): barrier counts 3 signals but 2 flows signal it",
    ),
    (
        "oneshot of two",
        lambda s: s.replace("barrier count 2", "oneshot"),
        r"line 11 \(trigger 2, used by line 8\): oneshot fires at the first of 2 signals",
    ),
    (
        "never fires",
        lambda s: s.replace(" send_done_trigger 1", ""),
        r"line 10 \(trigger 1, used by line 6\): no flow signals it",
    ),
    ("untyped trigger", lambda s: s.replace("id 1 oneshot", "id 1"), r"line 10: trigger 1 without a type"),
    (
        "trigger cycle",
        lambda s: s.replace("0->1 id 1 start 1.5 size 1000", "0->1 id 1 trigger 2 size 1000"),
        r"chain\.cm: dependency cycle: line \d -> line \d -> line \d",
    ),
]


TEXT_BAD = [("simai", "gpt.txt", SIMAI, *c) for c in SIMAI_BAD] + [
    ("htsim", "chain.cm", CM, *c) for c in CM_BAD
]


@pytest.mark.parametrize(
    "fmt,name,sample,case,edit,match", TEXT_BAD, ids=[f"{c[0]}-{c[3]}" for c in TEXT_BAD]
)
def test_malformed_text_inputs_are_named(tmp_path, fmt, name, sample, case, edit, match):
    """Each damaged SimAI workload or htsim matrix raises TraceError naming file and line."""
    path = tmp_path / name
    path.write_text(edit(sample))
    with pytest.raises(TraceError, match=match):
        rf.traces.read(path, format=fmt)


# -- replay and CLI ------------------------------------------------------------------------


def _imported(tmp_path):
    (tmp_path / "gpt.txt").write_text(SIMAI)
    (tmp_path / "chain.cm").write_text(CM)
    return {
        "chakra": chakra.read(write_ranks(tmp_path, four_ranks())),
        "simai": simai.read(tmp_path / "gpt.txt"),
        "htsim": htsim.read(tmp_path / "chain.cm"),
    }


@pytest.mark.parametrize("fmt", ["chakra", "simai", "htsim"])
def test_imported_traces_replay_and_conserve_bytes(tmp_path, fmt):
    trace = _imported(tmp_path)[fmt]
    # payload bytes: the Simple protocol (LL and LL128 lines add flags, tests/test_nccl_model.py)
    res = rf.simulate(rf.topologies.FatTree(16), trace, record_flows=True, coll_protocol="simple")
    ops = res.ops
    assert ops.num_rows == trace.num_ops and min(ops["end_ps"].to_pylist()) >= 0  # every op finished
    flows = res.flows
    assert flows["delivered_bytes"].to_pylist() == flows["size_bytes"].to_pylist()
    moved = np.bincount(
        flows["op_id"].to_numpy(), weights=flows["size_bytes"].to_numpy(), minlength=trace.num_ops
    ).astype(np.int64)
    assert moved.tolist() == trace.sent_bytes().tolist()


def test_cli_import_writes_the_same_trace(tmp_path, capsys):
    from rfabric.cli import main

    traces = _imported(tmp_path)
    for fmt, src in (
        ("simai", tmp_path / "gpt.txt"),
        ("htsim", tmp_path / "chain.cm"),
        ("chakra", tmp_path / "et"),
    ):
        out = tmp_path / f"{fmt}.arrow"
        assert main(["trace", "import", fmt, str(src), "-o", str(out)]) == 0
        assert f"wrote {out}" in capsys.readouterr().out
        assert rf.traces.read(out).equals(traces[fmt])
    (tmp_path / "bad.cm").write_text("Nodes 2\n")
    assert main(["trace", "import", "htsim", str(tmp_path / "bad.cm"), "-o", str(tmp_path / "x.arrow")]) == 2
    assert "bad.cm: header: no 'Connections <count>' line" in capsys.readouterr().err


def test_chakra_comm_group_file_fixes_the_groups(tmp_path):
    import json

    d = write_ranks(tmp_path, four_ranks())
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"tp01": [0, 1], "tp23": [3, 2]}))
    assert chakra.read(d, comm_groups=groups).equals(chakra.read(d))
    with pytest.raises(
        TraceError, match=r"node 13: collective #0 of group 'tp01' \(ranks \[0, 1, 2\]\): rank 2 lacks it"
    ):
        chakra.read(d, comm_groups={"tp01": [0, 1, 2], "tp23": [2, 3]})
    with pytest.raises(TraceError, match=r"llama\.2\.et: node 13: pg_name 'tp23' is not in the comm groups"):
        chakra.read(d, comm_groups={"tp01": [0, 1]})
    groups.write_text('{"tp01": [0, 7]}')
    with pytest.raises(
        TraceError, match=r"groups\.json: group 'tp01': expected a list of distinct ranks in 0\.\.3"
    ):
        chakra.read(d, comm_groups=groups)
    groups.write_text("{")
    with pytest.raises(TraceError, match=r"groups\.json: not valid JSON"):
        chakra.read(d, comm_groups=groups)
