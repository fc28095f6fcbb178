"""rfabric/cli/common.py: what the subcommands share (tables: tests/test_tables.py)."""

import math

from rfabric.cli.common import _ms, _print_rewrites


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
