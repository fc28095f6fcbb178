"""The command line by name (issue 25 item 5): rfabric run and collective take the fabric
names rfabric cost takes, presets ship in the package and `rfabric presets` lists them."""

import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rfabric as rf
from rfabric.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _run_links(tmp_path, tag, *args):
    out = tmp_path / tag
    assert main(["run", *args, "--size", "64KiB", "-o", str(out)]) == 0
    return pq.read_table(out.with_suffix(".flows.parquet")), pq.read_table(out.with_suffix(".links.parquet"))


def test_run_by_fabric_name_equals_run_by_an_equivalent_toml(tmp_path, capsys):
    toml = tmp_path / "ft16.toml"
    toml.write_text('family = "fat_tree"\n[params]\ngpus = 16\nlink = "100Gbps"\noversubscription = 3\n')
    by_name = _run_links(tmp_path, "a", "FT-OS", "--gpus", "16", "--link", "100Gbps")
    by_file = _run_links(tmp_path, "b", str(toml))
    assert by_name[0].equals(by_file[0]) and by_name[1].equals(by_file[1])
    assert by_name[0].num_rows == 16  # a permutation of 16 GPUs
    assert capsys.readouterr().out.count("fat_tree-os3-16: permutation") == 2


def test_run_by_preset_name_equals_run_by_its_path(tmp_path):
    path = rf.topologies.presets()["rail_optimized_128_200g"]
    assert _run_links(tmp_path, "a", "rail_optimized_128_200g") == _run_links(tmp_path, "b", str(path))


def test_collective_by_fabric_name_equals_the_library_call(capsys):
    args = ["collective", "--topology", "RFabric", "--gpus", "16", "--link", "100Gbps"]
    assert main([*args, "-b", "1MiB", "-e", "2MiB"]) == 0
    out = capsys.readouterr().out
    table = rf.collective(rf.topologies.RFabric(16, "100Gbps"), "all_reduce", sizes=[2**20, 2**21])
    assert "on rfabric-16," in out
    for r in table.to_pylist():
        assert f"{r['time_ps'] / 1e6:>10.1f}" in out


@pytest.mark.parametrize("command", [["run"], ["collective", "--topology"], ["cost"]])
def test_an_unknown_name_lists_fabrics_and_presets(command, capsys):
    assert main([*command, "Torus"]) == 2
    err = capsys.readouterr().err
    assert "unknown fabric 'Torus'" in err and "FT-OS" in err and "fat_tree_128_200g" in err


def test_presets_ship_in_the_package_and_the_checkout_folder_is_the_same():
    presets = rf.topologies.presets()
    folder = Path(rf.__file__).parent / "data" / "presets"
    assert {p.parent for p in presets.values()} == {folder}
    assert sorted(presets) == sorted(p.stem for p in (ROOT / "topologies").glob("*.toml"))
    # the wheel's packages include rfabric/ whole (data files and all)
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"]
    assert build["wheel"]["packages"] == ["rfabric"]
    fab = rf.topologies.load("mixnet_128_200g")
    assert (fab.family, fab.gpus) == ("mixnet", 128)


def test_presets_lists_name_family_gpus_link(capsys):
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert lines[0].split() == ["name", "family", "gpus", "link"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows.keys() == rf.topologies.presets().keys()
    for name, path in rf.topologies.presets().items():
        doc = tomllib.loads(path.read_text())  # the oracle: each file read directly
        assert rows[name] == [doc["family"], str(doc["params"]["gpus"]), doc["params"]["link"]]
    assert main(["presets", "--paths"]) == 0
    assert str(rf.topologies.presets()["fat_tree_128_200g"]) in capsys.readouterr().out


def test_a_folder_named_like_a_fabric_does_not_hide_it(tmp_path, monkeypatch):
    from rfabric.cli.common import fabric_arg

    monkeypatch.chdir(tmp_path)
    (tmp_path / "FT").mkdir()
    (tmp_path / "fat_tree_128_200g").mkdir()
    assert fabric_arg("FT", 16, "100Gbps").gpus == 16
    assert fabric_arg("fat_tree_128_200g", 16, "100Gbps").gpus == 128
