"""Every Python example in the README runs as written (from the repository root)."""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, capsys):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code = BLOCKS[index]
        written = ("iter.arrow", "sweep.parquet", "sweep.csv", "front.png", "fct.png", "stages.png")
        for name in written:  # files the examples write
            code = code.replace(f'"{name}"', repr(str(tmp_path / name)))
        exec(compile(code, f"README.md block {index}", "exec"), {"__name__": "__main__"})  # as a script
    finally:
        os.chdir(cwd)


def _bench(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_trace_volume_figures():
    """The README's volume sentence for its RL iteration is what bench/trace_volume.py prints."""
    import rfabric as rf

    tv = _bench("trace_volume")
    v = tv.volume(rf.traces.generate_rl(**tv.README_TRACE))
    text = (ROOT / "README.md").read_text()
    m = re.search(
        r"its ([\d,]+) ops' sizes sum to ([\d.]+) TB; their ranks send ([\d.]+) TB, ([\d.]+) TB of it", text
    )
    assert m, "the README's trace volume sentence moved; update this test"
    ops, size, sent, nvl = m.groups()
    assert int(ops.replace(",", "")) == v["ops"]
    assert float(size) == round(v["size_bytes"] / 1e12, 2)
    assert float(sent) == round(v["sent_bytes"] / 1e12, 1)
    assert float(nvl) == round(v["sent_one_server"] / 1e12, 1)


def test_traces_readme_all_reduce_curve():
    """traces/README.md's 128-GPU all-reduce time-vs-size figures are what the engine gives."""
    import rfabric as rf

    text = (ROOT / "traces" / "README.md").read_text()
    m = re.search(r"1, 2, 4, 8, 16, 32, 64, 128, 256 MiB take ([\d.,\s]+) µs", text)
    assert m, "traces/README.md's all-reduce curve moved; update this test"
    said = [float(x) for x in m.group(1).replace("\n", " ").split(",")]
    sizes = [f"{1 << k}MiB" for k in range(9)]
    got = rf.collective(rf.topologies.FatTree(128), "all_reduce", sizes=sizes)["time_ps"].to_pylist()
    assert said == [round(t / 1e6, 1) for t in got]


# Cells of the README's efficiency table that are cheap to recompute (about 1 s each; the
# whole table is `python bench/fabric_bounds.py --markdown`, about 2 minutes).
README_CELLS = [
    ("FT-OS", "reduce_scatter"),
    ("RO", "broadcast"),
    ("MixNet", "all_gather"),
    ("RFabric", "permutation"),
]


@pytest.mark.parametrize("fabric,kind", README_CELLS)
def test_readme_efficiency_cells(fabric, kind):
    fb = _bench("fabric_bounds")
    text = (ROOT / "README.md").read_text()
    header = re.search(r"^\| fabric \| all_reduce \|.*gpu_permutation \|$", text, re.M).group(0)
    columns = [c.strip() for c in header.strip("|").split("|")]
    row = re.search(rf"^\| {re.escape(fabric)} \|.*$", text[text.index(header) :], re.M).group(0)
    said = float(row.strip("|").split("|")[columns.index(kind)].strip().rstrip("!").strip())
    fab = fb.fabrics(128, "200Gbps")[fabric]
    got = fb.measure(fabric, fab, kind, 256 << 20, lp=False, seed=1)["efficiency"]
    assert said == round(got, 2)


def test_readme_controller_table_row():
    """A row of the README's traffic-aware table (`python bench/controllers.py alloc`):
    RFabric 128 without PXN, the skewed EP16 all_to_all, uniform and stage-aware times."""
    import rfabric as rf

    bc = _bench("controllers")
    text = (ROOT / "README.md").read_text()
    row = re.search(r"^\| 128 \| off \| a2a ep16 zipf0\.8 \| ([\d.]+) \| ([\d.]+) \|", text, re.M)
    lead = rf.units.parse_time("25ms")
    trace = bc.skewed_all_to_all(128, 16, 16 << 20, 0.8, 0, lead_ps=lead)
    fab = rf.topologies.RFabric(128, pxn=False)
    got = [
        rf.simulate(fab, trace, controller=c, seed=0, t_ocs="25ms").run["makespan_ps"] - lead
        for c in (rf.controllers.UniformController(), rf.controllers.StageAwareController())
    ]
    assert [float(row.group(1)), float(row.group(2))] == [round(t / 1e9, 3) for t in got]
