"""rfabric/tables.py: rf.format_table, the CLI's plain-text table as a library function."""

import math

import pyarrow as pa
import pytest

import rfabric as rf
from rfabric.tables import SWEEP_COLUMNS, format_table


def test_right_aligns_each_column_to_its_widest_cell():
    text = format_table(
        [{"a": "x", "b": 1234.5}, {"a": "long name", "b": 1.0}], [("a", "{}"), ("b", "{:,.1f}")]
    )
    head, rule, *rows = text.split("\n")
    assert head == "        a        b"
    assert rule == "---------  -------"
    assert rows == ["        x  1,234.5", "long name      1.0"]
    assert {len(line) for line in text.split("\n")} == {len(head)}


def test_left_alignment_and_default_formats():
    rows = [{"name": "a", "n": 123456, "x": 0.5, "ok": True}, {"name": "bcd", "n": 7, "x": None, "ok": False}]
    head, rule, *lines = format_table(rows, align="left").split("\n")
    assert head.split() == ["name", "n", "x", "ok"]
    # big integers get thousands separators, floats 3 decimals, None and False are empty, True is yes
    assert lines[0].split() == ["a", "123,456", "0.500", "yes"]
    assert lines[1].split() == ["bcd", "7"]
    assert lines[0].startswith("a    ")


def test_a_table_a_list_of_rows_and_a_dataframe_print_alike():
    rows = [{"fabric": "FT", "v": 1.25}, {"fabric": "RFabric", "v": 2.0}]
    table = pa.Table.from_pylist(rows)
    assert format_table(table) == format_table(rows)
    pd = pytest.importorskip("pandas")
    assert format_table(pd.DataFrame(rows)) == format_table(rows)


SWEEP_ROWS = [
    {
        "fabric": "FT",
        "link_speed": "200Gbps",
        "gpus": 16,
        "workload": "rl",
        "network_cost_usd": 123_456.0,
        "iteration_time_ps": 2_500_000_000,
        "throughput_iter_per_s": 400.0,
        "throughput_per_musd": 3240.0,
        "stage_ps": [("train", 1_000_000_000), ("gen", 2_000_000_000)],
        "wall_s": 0.5,
        "seed": 0,
    },
    {
        "fabric": "RFabric",
        "link_speed": "200Gbps",
        "gpus": 16,
        "workload": "rl",
        "network_cost_usd": 98_000.0,
        "iteration_time_ps": None,  # did not finish
        "throughput_iter_per_s": 0.0,
        "throughput_per_musd": 0.0,
        "stage_ps": [("train", 1_500_000_000)],
        "wall_s": 0.25,
        "seed": 0,
    },
]


def test_sweep_rows_get_the_sweep_columns_with_derived_ones():
    head, _, ft, rfab = format_table(SWEEP_ROWS).split("\n")
    # pareto is not a column of these rows, so it is left out; seed and stage_ps are not shown
    assert head.split() == [k for k, _ in SWEEP_COLUMNS if k != "pareto"]
    assert ft.split() == ["FT", "200Gbps", "16", "rl", "123.5", "2.500", "400.000", "3240.000", "0.50"]
    assert rfab.split()[5] == "nan"  # an unfinished run's iteration time
    text = format_table(SWEEP_ROWS, ["fabric", "train_ms", "gen_ms", ("network_cost_usd", "{:,.0f}")])
    lines = [line.split() for line in text.split("\n")]
    assert lines[2] == ["FT", "1.000", "2.000", "123,456"]
    assert lines[3][:2] == ["RFabric", "1.500"] and lines[3][2] == "nan"


def test_the_cli_sweep_table_is_format_table(tmp_path, capsys):
    """rfabric sweep prints its rows through rf.format_table: the same lines."""
    from rfabric.cli import main

    cfg = tmp_path / "s.toml"
    cfg.write_text(
        'fabrics = ["FT", "RO"]\nlinks = ["100Gbps"]\ngpus = [8]\nexecutor = "serial"\n'
        f'out = "{tmp_path / "rows.parquet"}"\n[workload.flows]\npattern = "permutation"\nsize = "64KiB"\n'
    )
    assert main(["sweep", str(cfg), "--no-progress"]) == 0
    out = capsys.readouterr().out
    head = out.split("\n")[0].split()
    assert head[:4] == ["fabric", "link_speed", "gpus", "workload"] and "pareto" in head


def test_errors_name_the_column():
    with pytest.raises(rf.SpecError, match="no column 'nope'"):
        format_table([{"a": 1}], ["nope"])
    with pytest.raises(rf.SpecError, match="a column is a name or"):
        format_table([{"a": 1}], [("a", 1)])
    with pytest.raises(rf.SpecError, match="expected a list of row dicts"):
        format_table({"a": 1})
    with pytest.raises(rf.SpecError, match="align"):
        format_table([{"a": 1}], align="centre")
    assert format_table([], ["a"]) == "a\n-"


def test_public_name():
    assert rf.format_table is format_table and "format_table" in rf.__all__
    assert math.isnan(rf.tables._ms(None))
