"""Every Python example of the README and of the docs site's pages runs as written (from the
repository root), and the figures the pages quote are what the engine gives.

The pages whose ```python blocks run: README.md and every page under docs/tutorials,
docs/how-to, docs/explanation and docs/reference (the site's pages; mkdocs.yml). Each
tutorial must have at least one block, so a tutorial's code cannot silently stop running.
"""

import os
import re
from pathlib import Path

import pytest
from conftest import load_bench

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md"] + sorted(
    p for sub in ("tutorials", "how-to", "explanation", "reference") for p in (DOCS / sub).rglob("*.md")
)
BLOCKS = [
    (page.relative_to(ROOT).as_posix(), i, code)
    for page in PAGES
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
]


def _text(relpath):
    return (ROOT / relpath).read_text()


@pytest.mark.parametrize("page,index,code", BLOCKS, ids=[f"{p}:{i}" for p, i, _ in BLOCKS])
def test_doc_example_runs(page, index, code, tmp_path, capsys):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        written = (
            "iter.arrow",
            "sweep.parquet",
            "sweep.csv",
            "front.png",
            "fct.png",
            "stages.png",
            "chain.cm",
        )
        for name in written:  # files the examples write
            code = code.replace(f'"{name}"', repr(str(tmp_path / name)))
        exec(compile(code, f"{page} block {index}", "exec"), {"__name__": "__main__"})  # as a script
    finally:
        os.chdir(cwd)


def test_every_tutorial_has_code_that_runs():
    tutorials = sorted((DOCS / "tutorials").glob("*.md"))
    assert len(tutorials) >= 6
    for page in tutorials:
        assert "```python\n" in page.read_text(), f"{page.name}: a tutorial without a Python block"


@pytest.mark.parametrize(
    "schema,page",
    [
        ("FLOW_SCHEMA", "results-flows.md"),
        ("LINK_SCHEMA", "results-links.md"),
        ("OP_SCHEMA", "results-ops.md"),
        ("STAGE_SCHEMA", "results-stages.md"),
        ("CIRCUIT_SCHEMA", "results-circuits-and-samples.md"),
        ("QUEUE_SAMPLE_SCHEMA", "results-circuits-and-samples.md"),
        ("RATE_SAMPLE_SCHEMA", "results-circuits-and-samples.md"),
        ("SWEEP_SCHEMA", "results-sweep.md"),
        ("COLLECTIVE_SCHEMA", "results-collective.md"),
        ("RUN_KEYS", "results-run.md"),
        ("PACKET_ONLY_RUN_KEYS", "results-run.md"),
    ],
)
def test_reference_page_names_every_column(schema, page):
    """Each result table's reference page names every column of its schema (the oracle:
    rfabric.results' and rfabric.collectives' schemas), so a new column cannot go undocumented."""
    import rfabric as rf

    obj = getattr(rf.results, schema, None) or getattr(rf.collectives, schema)
    names = obj.names if hasattr(obj, "names") else list(obj)
    text = (DOCS / "reference" / page).read_text()
    missing = [n for n in names if f"`{n}`" not in text]
    assert not missing, f"docs/reference/{page} does not name {missing}"


_bench = load_bench


def test_readme_trace_volume_figures():
    """The traces tutorial's volume sentence for its RL iteration is what bench/trace_volume.py prints."""
    import rfabric as rf

    tv = _bench("trace_volume")
    v = tv.volume(rf.traces.generate_rl(**tv.README_TRACE))
    text = _text("docs/tutorials/traces.md")
    m = re.search(
        r"its ([\d,]+) ops' sizes sum to ([\d.]+) TB; their ranks send ([\d.]+) TB, ([\d.]+) TB of it", text
    )
    assert m, "docs/tutorials/traces.md's trace volume sentence moved; update this test"
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


# Cells of the efficiency table (docs/explanation/routing.md) that are cheap to recompute (about 1 s each; the
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
    text = _text("docs/explanation/routing.md")
    header = re.search(r"^\| fabric \| all_reduce \|.*gpu_permutation \|$", text, re.M).group(0)
    columns = [c.strip() for c in header.strip("|").split("|")]
    row = re.search(rf"^\| {re.escape(fabric)} \|.*$", text[text.index(header) :], re.M).group(0)
    said = float(row.strip("|").split("|")[columns.index(kind)].strip().rstrip("!").strip())
    fab = fb.fabrics(128, "200Gbps")[fabric]
    got = fb.measure(fabric, fab, kind, 256 << 20, lp=False, seed=1)["efficiency"]
    assert said == round(got, 2)


def test_readme_controller_table_row():
    """A row of the traffic-aware table (docs/explanation/circuit-controllers.md) (`python bench/controllers.py alloc`):
    RFabric 128 without PXN, the skewed EP16 all_to_all, uniform and stage-aware times."""
    import rfabric as rf

    bc = _bench("controllers")
    text = _text("docs/explanation/circuit-controllers.md")
    row = re.search(r"^\| 128 \| off \| a2a ep16 zipf0\.8 \| ([\d.]+) \| ([\d.]+) \|", text, re.M)
    lead = rf.units.parse_time("25ms")
    trace = bc.skewed_all_to_all(128, 16, 16 << 20, 0.8, 0, lead_ps=lead)
    fab = rf.topologies.RFabric(128, pxn=False)
    got = [
        rf.simulate(fab, trace, controller=c, seed=0, t_ocs="25ms").run["makespan_ps"] - lead
        for c in (rf.controllers.UniformController(), rf.controllers.StageAwareController())
    ]
    assert [float(row.group(1)), float(row.group(2))] == [round(t / 1e9, 3) for t in got]
