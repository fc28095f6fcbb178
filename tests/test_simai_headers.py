"""Every first line SimAI's workload parser accepts imports (issue 23 item 2, part 4).

SimAI's ``Workload::decode_parallelsim`` knows eleven policies; its micro-benchmark files
start with ``MICRO`` and carry no group sizes. The files in ``tests/data/simai`` were written
here, one per policy, in SimAI's format. The expected ops below are worked out by hand from
each file and from which comm columns SimAI's loop for that policy issues over which GPUs
(``rfabric/traces/importers/simai.py`` states the mapping); compute gaps are the file's ns
times 1000."""

from pathlib import Path

import pytest

import rfabric as rf
from rfabric.errors import TraceError
from rfabric.traces.importers import simai

DATA = Path(__file__).parent / "data" / "simai"

#: the policy names SimAI's decode_parallelsim maps (astra-sim/workload/Workload.cc)
SIMAI_POLICIES = {
    "DATA",
    "HYBRID_TRANSFORMER",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_CUSTOMIZED",
    "MICRO",
    "DISTRIBUTED_INFERENCE",
}

W = [0, 1, 2, 3]  # the whole 4-GPU fabric

# (kind, ranks, size_bytes, compute_ps, deps) per op, in op_id order
EXPECTED = {
    # one row: its weight-grad all-reduce over every GPU, no compute gap, nothing before it
    "micro_allreduce.txt": [("all_reduce", W, 1048576, 0, [])],
    # two rows: two independent collectives
    "micro_two.txt": [("all_gather", W, 65536, 0, []), ("all_to_all", W, 4096, 0, [])],
    # weight-grad comms only (fc2's forward ALLREDUCE is not issued under DATA); order fwd
    # 100 + 400, then fc2: ig 500, wg 600 -> its all-reduce at 1600 ns; then conv1: ig 200,
    # wg 300 -> 2100 ns (weight-grad comms do not block, so the gap keeps counting)
    "data.txt": [("all_reduce", W, 16384, 1_600_000, []), ("all_reduce", W, 8192, 2_100_000, [])],
    # forward and input-grad comms, blocking, over every GPU; layer0's weight-grad
    # ALLREDUCE is not issued under MODEL. fwd 100 | 100 after it | layer1 ig 200 |
    # layer1 wg 300 + layer0 ig 200
    "model.txt": [
        ("all_gather", W, 4096, 100_000, []),
        ("all_gather", W, 8192, 100_000, [0]),
        ("reduce_scatter", W, 8192, 200_000, [1]),
        ("reduce_scatter", W, 4096, 500_000, [2]),
    ],
    # forward comms only
    "inference.txt": [("all_reduce", W, 2048, 1_000_000, [])],
    # DLRM: the first row issues all three columns, the others weight-grad only.
    # fwd: embedding a2a at 10; mlp fwd (10) not issued; mlp ig 20 (none), mlp wg 30 ->
    # all-reduce 2048 at 10 + 20 + 30 = 60 after the a2a; embedding ig a2a at 60 + 20 = 80;
    # embedding wg all-reduce 30 after that
    "dlrm.txt": [
        ("all_to_all", W, 4096, 10_000, []),
        ("all_reduce", W, 2048, 60_000, [0]),
        ("all_to_all", W, 4096, 80_000, [0]),
        ("all_reduce", W, 1024, 30_000, [2]),
    ],
    "dlrm_enhanced.txt": [("all_to_all", W, 4096, 10_000, []), ("all_reduce", W, 1024, 50_000, [0])],
    # first dimension (2 GPUs: {0,1} {2,3}) carries forward and input-grad, the other
    # dimension ({0,2} {1,3}) weight-grad
    "data_model.txt": [
        ("all_reduce", [0, 1], 4096, 10_000, []),
        ("all_reduce", [2, 3], 4096, 10_000, []),
        ("all_reduce", [0, 1], 4096, 20_000, [0]),
        ("all_reduce", [2, 3], 4096, 20_000, [1]),
        ("all_reduce", [0, 2], 8192, 30_000, [2, 3]),
        ("all_reduce", [1, 3], 8192, 30_000, [2, 3]),
    ],
    # the reverse
    "model_data.txt": [
        ("all_reduce", [0, 2], 4096, 10_000, []),
        ("all_reduce", [1, 3], 4096, 10_000, []),
        ("all_reduce", [0, 2], 4096, 20_000, [0]),
        ("all_reduce", [1, 3], 4096, 20_000, [1]),
        ("all_reduce", [0, 1], 8192, 30_000, [2, 3]),
        ("all_reduce", [2, 3], 8192, 30_000, [2, 3]),
    ],
    # transformer: TP 2 ({0,1} {2,3}), DP 2 ({0,2} {1,3})
    "transformer.txt": [
        ("all_reduce", [0, 1], 4096, 100_000, []),
        ("all_reduce", [2, 3], 4096, 100_000, []),
        ("all_reduce", [0, 1], 4096, 200_000, [0]),
        ("all_reduce", [2, 3], 4096, 200_000, [1]),
        ("all_reduce", [0, 2], 65536, 300_000, [2, 3]),
        ("all_reduce", [1, 3], 65536, 300_000, [2, 3]),
    ],
    # a header with every key SimAI's examples carry (TP 4 = every GPU), padded columns and
    # trailing blanks: two forward all-reduces, 123000 ns each
    "fwd_in_bckwd.txt": [
        ("all_reduce", W, 8388608, 123_000_000, []),
        ("all_reduce", W, 33554432, 123_000_000, [0]),
    ],
    # per row: emb (DATA) weight-grad over all; attn (MODEL) forward/input-grad over all; mlp
    # (a transformer row, dim0 = 2) forward/input-grad over {0,1} {2,3}, weight-grad over
    # {0,2} {1,3}. fwd: attn all-gather at 10 + 10; mlp all-reduces 10 after it; backward:
    # mlp ig 20, mlp wg 30 -> {0,2} {1,3} at 30 after the ig all-reduces; attn ig 20 after
    # mlp's wg compute -> 50 after the ig all-reduces (it waits for both); emb wg at
    # 50 + 30 (attn wg) + 20 (emb ig) + 30 = 130 after the attn reduce-scatter
    "customized.txt": [
        ("all_gather", W, 2048, 20_000, []),
        ("all_reduce", [0, 1], 4096, 10_000, [0]),
        ("all_reduce", [2, 3], 4096, 10_000, [0]),
        ("all_reduce", [0, 1], 4096, 20_000, [1]),
        ("all_reduce", [2, 3], 4096, 20_000, [2]),
        ("all_reduce", [0, 2], 512, 30_000, [3, 4]),
        ("all_reduce", [1, 3], 512, 30_000, [3, 4]),
        ("reduce_scatter", W, 2048, 50_000, [3, 4]),
        ("all_reduce", W, 1024, 80_000, [7]),
    ],
}


def _ops(trace):
    t = trace.table.to_pydict()
    return list(zip(t["kind"], t["ranks"], t["size_bytes"], t["compute_ps"], t["deps"], strict=True))


def test_the_importer_knows_every_policy_simai_decodes():
    assert set(simai.POLICIES) == SIMAI_POLICIES
    headers = {(DATA / name).read_text().split()[0] for name in EXPECTED}
    assert headers == SIMAI_POLICIES  # a test file for every header kind


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_header_kind_imports_as_simai_runs_it(name):
    trace = simai.read(DATA / name, gpus=4, dim0=2 if name == "customized.txt" else None)
    assert _ops(trace) == [tuple(x) for x in EXPECTED[name]]
    assert trace.gpus == 4
    assert trace.metadata["parameters"]["policy"] == (DATA / name).read_text().split()[0]


def test_a_micro_benchmark_replays_to_completion():
    """The imported micro-benchmark runs: its one all-reduce ends, and its ranks send the
    all-reduce's 2(n-1) x size bytes (the size convention, checked on the flows; Simple
    protocol, whose wire bytes are the payload: docs/nccl-model.md)."""
    trace = rf.traces.read(DATA / "micro_allreduce.txt", format="simai", gpus=4)
    fab = rf.topologies.FatTree(4, gpus_per_server=2)
    res = rf.simulate(fab, trace, record_flows=True, coll_protocol="simple")
    assert res.ops["end_ps"].to_pylist()[0] > 0
    assert sum(res.flows["size_bytes"].to_pylist()) == 2 * 3 * 1048576


@pytest.mark.parametrize(
    "name, options, match",
    [
        (
            "micro_allreduce.txt",
            {},
            r"micro_allreduce\.txt: line 1: a MICRO header does not give the GPU count",
        ),
        ("data_model.txt", {"gpus": 4, "dim0": 3}, r"first dimension \(3 GPUs\) does not divide the 4 GPUs"),
        (
            "customized.txt",
            {"gpus": 4},
            r"customized\.txt: line 5: a HYBRID_TRANSFORMER row splits the fabric",
        ),
        (
            "transformer.txt",
            {"dim0": 2},
            r"transformer\.txt: dim0: a HYBRID_TRANSFORMER header gives its own",
        ),
        ("micro_allreduce.txt", {"gpus": 2.5}, r"gpus: must be a positive integer, got 2\.5"),
    ],
)
def test_what_a_header_leaves_open_is_asked_for_by_name(name, options, match):
    with pytest.raises(TraceError, match=match):
        simai.read(DATA / name, **options)


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE_EP 64 1\n",
            r"line 3: comm type 'ALLREDUCE_EP': the EP group",
        ),
        (
            "HYBRID_CUSTOMIZED\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1 SOMETHING\n",
            r"row policy 'SOMETHING'",
        ),
        ("HYBRID_CUSTOMIZED\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\n", r"12 fields, expected 13"),
        ("DATA\n1\nx -1 1 ALLREDUCE 64 1 NONE 0 1 NONE 0 1\n", r"all rows: no communication: under DATA"),
        (
            "MICRO\n1\nx -1 1 NONE 0 1 NONE 0 1 ALLREDUCEALLTOALL 64 1\n",
            r"unknown comm type 'ALLREDUCEALLTOALL'",
        ),
    ],
)
def test_bad_rows_under_the_new_headers_are_named(tmp_path, text, match):
    path = tmp_path / "w.txt"
    path.write_text(text)
    with pytest.raises(TraceError, match=rf"w\.txt: .*{match}"):
        simai.read(path, gpus=4)


def test_cli_imports_a_micro_benchmark(tmp_path):
    from rfabric.cli import main

    out = tmp_path / "m.arrow"
    assert (
        main(["trace", "import", "simai", str(DATA / "micro_allreduce.txt"), "-o", str(out), "--gpus", "4"])
        == 0
    )
    assert rf.traces.read(out).num_ops == 1
    out2 = tmp_path / "c.arrow"
    args = ["trace", "import", "simai", str(DATA / "customized.txt"), "-o", str(out2), "--gpus", "4"]
    assert main([*args, "--dim0", "2"]) == 0
    assert rf.traces.read(out2).num_ops == len(EXPECTED["customized.txt"])
