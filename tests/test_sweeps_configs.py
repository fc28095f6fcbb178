"""rfabric/sweeps/configs.py: TOML sweep configs into sweep() arguments."""

import pytest

import rfabric as rf
from rfabric.sweeps import load_config


def write(tmp_path, text):
    path = tmp_path / "conf" / "s.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


HEAD = 'fabrics = ["FT"]\nlinks = ["100Gbps"]\ngpus = [16]\n'


def test_relative_paths_are_the_working_folder(tmp_path, monkeypatch):
    path = write(
        tmp_path,
        HEAD
        + 'out = "rows.parquet"\nprices = "p.toml"\ncontroller = "stage-aware"\n[workload]\ntrace = "t.arrow"\n',
    )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    kw = load_config(path)
    assert kw["out"] == str(work / "rows.parquet") and kw["prices"] == str(work / "p.toml")
    assert kw["workload"] == {"trace": {"path": str(work / "t.arrow")}}
    absolute = write(tmp_path, HEAD + f'out = "{tmp_path / "abs.parquet"}"\n[workload.flows]\n')
    assert load_config(absolute)["out"] == str(tmp_path / "abs.parquet")
    assert kw["where"] == str(path) and kw["controller"] == "stage-aware"


@pytest.mark.parametrize(
    "text, match",
    [
        (HEAD, "missing key 'workload'"),
        ('links = ["100Gbps"]\ngpus = [16]\n[workload.flows]\n', "missing key 'fabrics'"),
        (HEAD + "[workload.flows]\n[workloads.a.flows]\n", "give 'workload' or 'workloads', not both"),
        (HEAD + "execuutor = 'serial'\n[workload.flows]\n", "executor"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path, text, match):
    with pytest.raises(rf.SpecError, match=match):
        load_config(write(tmp_path, text))
