"""Inputs that used to be accepted or to fail with a generic exception (issue 23, item 2):
empty traces, unwired nodes, fabric sizes beyond what can be built, binary TOML files and
unit strings in ``Trace.from_columns``. Each is refused with an rfabric error that names
the file, row, column or node; the accepted forms are checked against an independent value
(the unit arithmetic done here by hand)."""

import time

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import rfabric as rf
from rfabric.errors import SpecError, TraceError
from rfabric.spec import MAX_LINKS, MAX_NODES
from rfabric.sweeps import load_config
from rfabric.traces import Trace

# -- traces -----------------------------------------------------------------------------------

_ONE = dict(
    op_id=[0, 1],
    stage="train",
    phase="grad_sync",
    kind="all_reduce",
    ranks=[[0, 1], [0, 1]],
    deps=[[], [0]],
)


def test_empty_trace_is_refused_from_columns_and_from_files(tmp_path):
    with pytest.raises(TraceError, match=r"<columns>: has no ops \(0 rows\)"):
        Trace.from_columns(op_id=[], stage=[], phase=[], kind=[], ranks=[], deps=[], size_bytes=[])
    empty = rf.traces.read("traces/sample.arrow").table.slice(0, 0)
    with pytest.raises(TraceError, match="has no ops"):
        Trace.from_table(empty)
    for suffix, write in ((".arrow", feather.write_feather), (".parquet", pq.write_table)):
        path = tmp_path / f"empty{suffix}"
        write(empty, str(path))
        with pytest.raises(TraceError, match=rf"empty{suffix}: has no ops"):
            rf.traces.read(path)


def test_from_columns_parses_unit_strings_in_size_and_time_columns():
    t = Trace.from_columns(**_ONE, size_bytes=["64MiB", "1KB"], compute_ps=["1.5us", 7])
    assert t.table["size_bytes"].to_pylist() == [64 * 2**20, 1000]
    assert t.table["compute_ps"].to_pylist() == [1_500_000, 7]
    # a scalar unit string applies to every op, as a scalar int does
    t = Trace.from_columns(**_ONE, size_bytes=np.array([4, 8]), compute_ps="2ms")
    assert t.table["compute_ps"].to_pylist() == [2 * 10**9] * 2
    assert t.table["size_bytes"].to_pylist() == [4, 8]
    # the same trace from integers
    same = Trace.from_columns(**_ONE, size_bytes=[4, 8], compute_ps=[2 * 10**9] * 2)
    assert same.equals(t)


@pytest.mark.parametrize(
    "columns, row, column, why",
    [
        (dict(size_bytes=["64MiB", "64 parsecs"]), 1, "size_bytes", "malformed"),
        (dict(size_bytes=[1, 2], compute_ps=["1us", "3kg"]), 1, "compute_ps", "malformed"),
        (dict(size_bytes=[1.5, 2]), 0, "size_bytes", "not a whole number"),
        (dict(size_bytes=[True, 2]), 0, "size_bytes", "is a bool"),
        (dict(size_bytes=[None, 2]), 0, "size_bytes", "NoneType"),
        (dict(size_bytes=["1e400B", 2]), 0, "size_bytes", "not a finite number"),
        (dict(size_bytes=["1PiB", 2]), 0, "size_bytes", "malformed"),
        (dict(size_bytes=[2**70, 2]), 0, "size_bytes", "beyond the engine's limit"),
        (dict(size_bytes=[1, 2], period=[0, 2.0]), 1, "period", "2.0 is not an integer"),
        (dict(size_bytes=[1, 2], iteration=[0, "1"]), 1, "iteration", "'1' is not an integer"),
        (dict(size_bytes=[1, 2], iteration=[0, 2**40]), 1, "iteration", "does not fit in int32"),
        (dict(size_bytes=[1, 2], phase=["a", 3]), 1, "phase", "3 is not a string"),
    ],
)
def test_from_columns_names_the_row_and_column_of_a_bad_entry(columns, row, column, why):
    with pytest.raises(TraceError, match=rf"<columns>: row {row}.*column '{column}': .*{why}"):
        Trace.from_columns(**{**_ONE, **columns})


def test_from_columns_refuses_float_and_ragged_ranks_instead_of_truncating():
    cols = {**_ONE, "size_bytes": [1, 2]}
    with pytest.raises(TraceError, match=r"row 1, column 'ranks': entry 1.9 is not an integer"):
        Trace.from_columns(**{**cols, "ranks": [[0, 1], [0, 1.9]]})
    with pytest.raises(TraceError, match=r"row 0, column 'deps': 5 is not a list of integers"):
        Trace.from_columns(**{**cols, "deps": [5, [0]]})
    with pytest.raises(TraceError, match=r"all rows, column 'op_id': expected a sequence"):
        Trace.from_columns(**{**cols, "op_id": 3})


# -- fabrics ----------------------------------------------------------------------------------


class _Star(rf.Topology):
    """Two servers on one switch, plus ``extra`` nodes of ``kind`` wired to nothing."""

    family = "test_star"

    def __init__(self, kind="eps", extra=1):
        super().__init__(gpus=4, gpus_per_server=2)
        self.kind, self.extra = kind, extra

    def build(self, net):
        gpus = net.add_servers(2, 2)
        sw = net.add_nodes("eps", 1, prefix="sw")
        net.add_links(gpus.ravel(), sw[0], rate=self.link)
        net.add_nodes(self.kind, self.extra, prefix="spare")


@pytest.mark.parametrize("kind", ["eps", "ocs", "patch_panel", "nvswitch"])
def test_a_node_without_links_is_refused_by_name_and_id(kind):
    # 4 GPUs + 2 NVSwitches + the switch come first: the spare is node 7
    with pytest.raises(SpecError, match=rf"{kind} node 7 \(spare0\) has no links \(1 more such nodes\)"):
        _Star(kind, extra=2).to_spec()
    assert _Star(kind, extra=0).to_spec().num_nodes == 7


class _Island(_Star):
    family = "test_island"

    def build(self, net):
        super().build(net)
        a, b = net.add_nodes("eps", 2, prefix="isle")
        net.add_links(a, b, rate=self.link)


def test_switches_wired_only_to_each_other_are_refused():
    with pytest.raises(
        SpecError, match=r"eps node 7 \(isle0\) is not wired to any GPU: .* 2 nodes isle0, isle1"
    ):
        _Island(extra=0).to_spec()


@pytest.mark.parametrize("family", sorted(rf.topologies.FAMILIES))
def test_every_fabric_refuses_sizes_beyond_the_limit_at_once(family):
    cls = rf.topologies.FAMILIES[family]
    t0 = time.perf_counter()
    for gpus in (2**40, rf.Topology.MAX_GPUS + 8):
        with pytest.raises(
            SpecError, match=rf"gpus={gpus} is beyond the largest fabric rfabric builds, 1048576"
        ):
            cls(gpus)
    assert time.perf_counter() - t0 < 1.0


def test_builder_refuses_node_and_link_counts_beyond_the_engine_tables():
    net = rf.topologies.FatTree(16).builder()
    with pytest.raises(SpecError, match=rf"add_nodes\('eps'\): {2**40} more nodes .* limit of {MAX_NODES}"):
        net.add_nodes("eps", 2**40)
    with pytest.raises(SpecError, match=r"add_nodes\('eps'\): count must be an integer >= 0, got 2.5"):
        net.add_nodes("eps", 2.5)
    a = net.add_nodes("eps", 2)
    with pytest.raises(SpecError, match=rf"limit of {MAX_LINKS}"):
        net.add_links(np.zeros(MAX_LINKS + 1, dtype=np.int64), a[1], rate="1Gbps")


# -- TOML files -------------------------------------------------------------------------------


@pytest.mark.parametrize("load, what", [(rf.topologies.load, "topology"), (load_config, "sweep config")])
def test_a_binary_or_directory_toml_is_a_named_error(tmp_path, load, what):
    path = tmp_path / "preset.toml"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(SpecError, match=rf"preset\.toml: not a {what} file: byte \d+ is not UTF-8"):
        load(path)
    with pytest.raises(SpecError, match=rf"{tmp_path.name}: is a directory, not a {what} file"):
        load(tmp_path)


def test_read_toml_still_parses_text_and_names_bad_toml(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('family = "fat_tree"\n[params]\ngpus = 16\n')
    assert rf.topologies.load(path).gpus == 16
    path.write_text("family = = 1\n")
    with pytest.raises(SpecError, match=r"t\.toml: not valid TOML"):
        rf.topologies.load(path)


def test_a_file_with_a_column_missing_is_refused_naming_it(tmp_path):
    table = rf.traces.read("traces/sample.arrow").table
    for name in table.schema.names:
        if name == "m2n_senders":
            continue
        short = table.drop_columns([name])
        path = tmp_path / "short.parquet"
        pq.write_table(short, str(path))
        with pytest.raises(TraceError, match=rf"short\.parquet: all rows, column '{name}': missing"):
            rf.traces.read(path)
        stream = tmp_path / "short.arrow"  # an IPC stream, not a file
        with pa.OSFile(str(stream), "wb") as sink, pa.ipc.new_stream(sink, short.schema) as writer:
            writer.write_table(short)
        with pytest.raises(TraceError, match=rf"short\.arrow: all rows, column '{name}': missing"):
            rf.traces.read(stream)


@pytest.mark.parametrize(
    "family, param",
    [
        ("fat_tree", "radix"),
        ("rail_optimized", "radix"),
        ("mixnet", "radix"),
        ("rfabric", "radix"),
        ("rfabric", "core_ports"),
        ("rfabric", "ocs_radix"),
        ("rfabric", "tor_uplinks"),
        ("rfabric", "ocs_agg"),
    ],
)
def test_port_counts_beyond_any_device_are_refused_at_once(family, param):
    # RFabric(32, radix=2**40) used to search 2**40 port splits (a hang)
    cls = rf.topologies.FAMILIES[family]
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match=rf"{param}.*65536"):
        cls(32, **{param: 2**40})
    assert time.perf_counter() - t0 < 1.0


class _Junk(rf.Topology):
    family = "test_junk"

    def __init__(self, src, count=1):
        super().__init__(gpus=2, gpus_per_server=2)
        self.src, self.count = src, count

    def build(self, net):
        gpus = net.add_servers(self.count, 2)
        sw = net.add_nodes("eps", 1)
        net.add_links(gpus.ravel(), sw[0], rate=self.link)
        net.add_links(self.src, sw[0], rate=self.link, kind="odd")


@pytest.mark.parametrize("src", ["x", None, 2.5, np.nan, [[0], [1, 2]]])
def test_builder_node_ids_must_be_integers_and_errors_name_the_fabric(src):
    with pytest.raises(
        SpecError, match=r"test_junk-2: build\(\): add_links\('odd'\): src: expected node ids"
    ):
        _Junk(src).to_spec()
    with pytest.raises(
        SpecError, match=r"test_junk-2: build\(\): add_servers: count must be an integer >= 0"
    ):
        _Junk(0, count=1.5).to_spec()


@pytest.mark.parametrize("junk", [None, 5, [1], {"a": 1}])
def test_entry_points_name_arguments_of_the_wrong_type(tmp_path, junk):
    from rfabric.traces.importers import chakra, htsim, simai

    sample = rf.traces.read("traces/sample.arrow")
    for call in (
        lambda: rf.traces.read(junk),
        lambda: rf.traces.write(sample, junk),
        lambda: simai.read(junk),
        lambda: htsim.read(junk),
        lambda: chakra.read(junk),
    ):
        with pytest.raises(TraceError, match="must be a file path"):
            call()
    for call in (lambda: rf.topologies.load(junk), lambda: load_config(junk)):
        with pytest.raises(SpecError, match="must be a file path"):
            call()
    with pytest.raises(TraceError, match="gpus must be a positive integer"):
        rf.traces.read("traces/sample.arrow", gpus=junk if not isinstance(junk, int | None) else "16")
    with pytest.raises(TraceError, match="from_table takes a pyarrow.Table"):
        Trace.from_table(junk)
    if not isinstance(junk, dict | None):
        with pytest.raises(TraceError, match="metadata must be a dict"):
            Trace.from_table(sample.table, junk)
    if junk is not None:
        with pytest.raises(TraceError, match="time_unit"):
            simai.read("tests/data/simai/data.txt", gpus=4, time_unit=junk)
    with pytest.raises(TraceError, match=r"nowhere/x\.arrow: cannot be written"):
        rf.traces.write(sample, tmp_path / "nowhere" / "x.arrow")
    preset = tmp_path / "p.toml"
    preset.write_text("family = [1]\n")
    with pytest.raises(SpecError, match=r"p\.toml: field 'family' is \[1\]"):
        rf.topologies.load(preset)


def test_an_import_with_no_communication_is_refused(tmp_path):
    from rfabric.traces.importers import chakra as c

    for r in range(2):
        c.write_rank(
            tmp_path / f"only.{r}.et", [c.Node(id=1, type=c.NODE_TYPES["COMP_NODE"], duration_micros=3)]
        )
    with pytest.raises(TraceError, match=r"all records: no communication \(compute only\)"):
        rf.traces.read(tmp_path)
    cm = tmp_path / "none.cm"
    cm.write_text("Nodes 2\nConnections 0\n")
    with pytest.raises(TraceError, match=r"none\.cm: all records: no communication"):
        rf.traces.read(cm)


class _Arrays(rf.Topology):
    """Per-link numpy columns (no unit parsing on the way): rate, latency, buffer."""

    family = "test_arrays"

    def __init__(self, rate=10**11, latency=10**6, buffer=1 << 20):
        super().__init__(gpus=4, gpus_per_server=2)
        self.cols = rate, latency, buffer

    def build(self, net):
        gpus = net.add_servers(2, 2)
        sw = net.add_nodes("eps", 1)
        rate, latency, buffer = (np.full(4, v, dtype=np.int64) for v in self.cols)
        net.add_links(gpus.ravel(), sw[0], rate=rate, latency=latency, buffer=buffer)


@pytest.mark.parametrize(
    "cols, match",
    [
        (dict(latency=2**62), r"link 4: latency_ps 4611686018427387904 is beyond 1000000000000 \(1 s"),
        (dict(rate=2**60), r"link 4: rate_bps 1152921504606846976 is beyond 1125899906842624"),
        (dict(buffer=2**62), r"link 4: buffer_bytes 4611686018427387904 is beyond 281474976710656"),
    ],
)
def test_link_columns_beyond_the_engine_limits_are_refused(cols, match):
    # latency 2**62 per link used to wrap the makespan negative (-9.2e18 ps) with every flow
    # reported unfinished
    with pytest.raises(SpecError, match=match):
        _Arrays(**cols).to_spec()
    res = rf.simulate(_Arrays(), rf.Flows.permutation(4, 1 << 16))
    assert res.run["makespan_ps"] > 0 and (res.flows["end_ps"].to_numpy() > 0).all()
