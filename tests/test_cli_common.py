"""rfabric/cli/common.py: the text tables the subcommands print."""

import math

from rfabric.cli.common import _ms, _print_rewrites, _table


def test_table_right_aligns_each_column_to_its_widest_cell():
    text = _table([{"a": "x", "b": 1234.5}, {"a": "long name", "b": 1.0}], [("a", "{}"), ("b", "{:,.1f}")])
    head, rule, *rows = text.split("\n")
    assert head == "        a        b"
    assert rule == "---------  -------"
    assert rows == ["        x  1,234.5", "long name      1.0"]
    assert {len(line) for line in text.split("\n")} == {len(head)}


def test_ms_of_a_time_column():
    assert _ms(2_500_000_000) == 2.5 and math.isnan(_ms(None))


def test_rewrites_note_groups_fabrics(capsys):
    rows = [
        {"rewrites": "none", "fabric": "FT", "link_speed": "200Gbps"},
        {"rewrites": "forest", "fabric": "RFabric", "link_speed": "200Gbps"},
    ]
    _print_rewrites(rows, "own")
    out = capsys.readouterr().out
    assert "--rewrites own" in out and "FT 200Gbps: none" in out and "RFabric 200Gbps: forest" in out
