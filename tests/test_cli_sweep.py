"""rfabric/cli/sweep.py: `rfabric sweep CONFIG.toml` prints the rows, resumes, plots."""

from pathlib import Path

import pyarrow.parquet as pq

GOOD = """
fabrics = ["FT", {{ name = "FT-OS k8", family = "fat_tree", oversubscription = 3, radix = 8 }}]
links = [{links}]
gpus = [16]
executor = "serial"
out = "rows.parquet"
{extra}
{workload}
"""
WORKLOAD = '[workload.flows]\npattern = "all-to-all"\nsize = "16KiB"\n'


def write(tmp_path, text: str, name="sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_config_file_and_cli(tmp_path, capsys, monkeypatch):
    from rfabric.cli import main

    monkeypatch.chdir(tmp_path)  # out = "rows.parquet" is relative to the working folder
    path = write(tmp_path, GOOD.format(links='"100Gbps", "200Gbps"', workload=WORKLOAD, extra=""))
    assert main(["sweep", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "FT-OS k8" in out and "4 points (0 resumed, 4 run)" in out
    t = pq.read_table(tmp_path / "rows.parquet")
    assert t.num_rows == 4 and set(t["fabric"].to_pylist()) == {"FT", "FT-OS k8"}
    assert set(t["topology"].to_pylist()) == {"fat_tree-16", "fat_tree-os3-16"}
    # again, with a plot: every point comes from rows.parquet (nothing reruns)
    assert main(["sweep", str(path), "--no-progress", "--plot", str(tmp_path / "f.png")]) == 0
    out = capsys.readouterr().out
    assert "pareto" in out and f"wrote {tmp_path / 'f.png'}" in out
    assert "4 points (4 resumed, 0 run)" in out
    assert (tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")
    assert pq.read_table(tmp_path / "rows.parquet").equals(t)
