"""rf.report and ``rfabric report``: a sweep's rows as one self-contained HTML page.

Oracles: the sweep table itself (every row and value in the page's table, every stage value
in the stage plot), a brute-force dominance check for the front's points (and the table's own
``pareto`` column), and Debian's headless Chromium loading the page with the network
blocked: the plots render, clicking a column's name sorts the rows, and the console stays
empty (a page that throws is seen to, so the check can fail).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

import rfabric as rf
from rfabric.cli import main

pytest.importorskip("plotly")

RL = {
    "generate_rl": {
        "model": {"base": "qwen2.5-14b", "layers": 1},
        "global_batch": 4,
        "decode_steps_per_op": 1024,
    }
}
PERM = {"flows": {"pattern": "permutation", "size": "64KiB"}}


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    """A real sweep: 2 fabrics x 2 link speeds x 1 scale x 2 workloads (an RL iteration, with
    stage times, and a permutation, without)."""
    out = tmp_path_factory.mktemp("sweep") / "sweep.parquet"
    rf.sweep(
        fabrics=["FT", "RFabric"],
        links=["100Gbps", "200Gbps"],
        gpus=[16],
        workload={"rl": RL, "perm": PERM},
        executor="serial",
        out=out,
        progress=False,
    )
    return out


@pytest.fixture(scope="module")
def page(sweep_file, tmp_path_factory) -> tuple[Path, str]:
    path = rf.report.write(sweep_file, tmp_path_factory.mktemp("page") / "report.html", title="test sweep")
    return path, path.read_text(encoding="utf-8")


class _Rows(HTMLParser):
    """The header names and each row's data-v values of the page's table#rows."""

    def __init__(self):
        super().__init__()
        self.head, self.rows, self._in, self._row, self.attrs_seen = [], [], False, None, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.attrs_seen.append((tag, a))
        if tag == "table" and a.get("id") == "rows":
            self._in = True
        elif self._in and tag == "th":
            self.head.append(a["data-col"])
        elif self._in and tag == "tr":
            self._row = []
        elif self._in and tag == "td":
            self._row.append(a["data-v"])

    def handle_endtag(self, tag):
        if tag == "table":
            self._in = False
        elif tag == "tr" and self._in and self._row:
            self.rows.append(self._row)
            self._row = None


def _expected(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list) and all(isinstance(p, tuple) for p in value):  # a map column
        return ", ".join(f"{k}: {v}" for k, v in value)
    if isinstance(value, list):  # a list of structs (the jobs column): as JSON
        return json.dumps(value)
    return str(value)


def _figures(text: str) -> dict[str, dict]:
    blocks = re.findall(
        r'<script type="application/json" class="rf-figure" data-div="([^"]+)">(.*?)</script>', text, re.S
    )
    return {div: json.loads(spec) for div, spec in blocks}


def _front_oracle(table: pa.Table) -> set[int]:
    """Points no row of the same workload and scale dominates (cost no higher, throughput no
    lower, one strictly), by comparing every pair."""
    rows = table.to_pylist()
    on = set()
    for r in rows:
        if not (math.isfinite(r["network_cost_usd"]) and math.isfinite(r["throughput_iter_per_s"])):
            continue
        dominated = any(
            (o["workload"], o["gpus"]) == (r["workload"], r["gpus"])
            and o["network_cost_usd"] <= r["network_cost_usd"]
            and o["throughput_iter_per_s"] >= r["throughput_iter_per_s"]
            and (
                o["network_cost_usd"] < r["network_cost_usd"]
                or o["throughput_iter_per_s"] > r["throughput_iter_per_s"]
            )
            for o in rows
        )
        if not dominated:
            on.add(r["point"])
    return on


def test_the_page_holds_every_row_and_value(sweep_file, page):
    import pyarrow.parquet as pq

    table = rf.pareto.front(pq.read_table(sweep_file))
    rows = _Rows()
    rows.feed(page[1])
    assert sorted(rows.head) == sorted(table.column_names)
    assert len(rows.rows) == table.num_rows == 8
    expect = [[_expected(table[c][i].as_py()) for c in rows.head] for i in range(table.num_rows)]
    assert rows.rows == expect
    assert "<title>test sweep</title>" in page[1]


def test_the_front_is_the_pareto_column_and_nondominated(sweep_file, page):
    import pyarrow.parquet as pq

    table = rf.pareto.front(pq.read_table(sweep_file))
    marked = {p for p, on in zip(table["point"].to_pylist(), table["pareto"].to_pylist(), strict=True) if on}
    assert marked == _front_oracle(table) and marked
    figs = _figures(page[1])
    fronts = {k: v for k, v in figs.items() if k.startswith("front-")}
    assert len(fronts) == 2  # one per workload (one scale)
    drawn = set()
    by_point = {r["point"]: r for r in table.to_pylist()}
    for fig in fronts.values():
        front = [t for t in fig["data"] if t.get("meta") == "front"]
        assert len(front) == 1
        pts = front[0]["customdata"]
        assert len({by_point[p]["workload"] for p in pts}) == 1  # one group per plot
        drawn |= set(pts)
        # every row of the group is drawn once, by its fabric, at its cost (thousand USD here)
        fabric_pts = [p for t in fig["data"] if t.get("meta") == "fabric" for p in t["customdata"]]
        workload = by_point[pts[0]]["workload"]
        assert sorted(fabric_pts) == sorted(p for p, r in by_point.items() if r["workload"] == workload)
        for t in fig["data"]:
            if t.get("meta") == "fabric":
                for p, x, y in zip(t["customdata"], t["x"], t["y"], strict=True):
                    assert by_point[p]["fabric"] == t["name"]
                    assert x * 1e3 == pytest.approx(by_point[p]["network_cost_usd"])
                    assert y == pytest.approx(by_point[p]["throughput_iter_per_s"])
        assert "thousand USD" in fig["layout"]["xaxis"]["title"]["text"]
    assert drawn == marked


def test_stage_values_match_the_table(sweep_file, page):
    import pyarrow.parquet as pq

    table = pq.read_table(sweep_file)
    figs = _figures(page[1])
    stages = [v for k, v in figs.items() if k.startswith("stages-")]
    assert len(stages) == 1  # the RL workload; the permutation has no stages
    fig = stages[0]
    rl = [r for r in table.to_pylist() if r["workload"] == "rl"]
    labels = [f"{r['fabric']} · {r['link_speed']}" for r in rl]
    unit = re.search(r"time \((\w+)\)", fig["layout"]["yaxis"]["title"]["text"]).group(1)
    scale = {"s": 1e12, "ms": 1e9, "µs": 1e6, "ns": 1e3, "ps": 1}[unit]
    bars = {t["meta"]: t for t in fig["data"]}
    shown = {c for c in bars if c.startswith("stage_")}
    assert shown == {
        c
        for c in table.column_names
        if re.fullmatch(r"stage_.+_ps", c) and c != "stage_ps" and any(r[c] is not None for r in rl)
    }
    assert "stage_gen_ps" not in shown  # all null in this sweep: no empty bars
    for col in [*shown, "makespan_ps"]:
        t = bars[col]
        assert t["x"] == labels
        assert t["customdata"] == [r[col] for r in rl]  # exact integer ps
        assert t["y"] == pytest.approx([r[col] / scale for r in rl])


def test_the_page_is_self_contained(page):
    rows = _Rows()
    rows.feed(page[1])
    for tag, attrs in rows.attrs_seen:
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)  # nothing to fetch
    assert "plotly.js v" in page[1][:20000]  # the library itself, in the head


def test_csv_input_gives_the_same_rows(sweep_file, page, tmp_path):
    import pyarrow.parquet as pq

    # a CSV keeps the pareto column but not front's record of its axes: checked, then used
    csv = rf.pareto.export(rf.pareto.front(pq.read_table(sweep_file)), tmp_path / "sweep.csv")
    out = rf.report.write(csv, tmp_path / "r.html")
    a, b = _Rows(), _Rows()
    a.feed(page[1])
    b.feed(out.read_text(encoding="utf-8"))
    assert a.head == b.head
    skip = a.head.index("stage_ps")  # a map in Parquet, JSON text in CSV

    def value(text):  # CSV reads a float column of whole numbers back as integers
        try:
            return float(text)
        except ValueError:
            return text

    assert [[value(v) for j, v in enumerate(r) if j != skip] for r in a.rows] == [
        [value(v) for j, v in enumerate(r) if j != skip] for r in b.rows
    ]
    assert _figures(page[1]).keys() == _figures(out.read_text(encoding="utf-8")).keys()


def test_an_unfinished_row_is_listed_not_drawn(sweep_file):
    import pyarrow.parquet as pq

    table = pq.read_table(sweep_file)
    rows = table.to_pylist()
    rows[0].update(complete=False, makespan_ps=None, iteration_time_ps=None, throughput_iter_per_s=math.nan)
    table = pa.Table.from_pylist(rows, schema=table.schema)
    text = rf.report.render(table)
    fig = _figures(text)["front-0"]
    assert fig["layout"]["title"]["text"] == "rl, 16 GPUs (1 row without a value not drawn)"
    drawn = [p for t in fig["data"] if t.get("meta") == "fabric" for p in t["customdata"]]
    assert rows[0]["point"] not in drawn and len(drawn) == 3
    parsed = _Rows()
    parsed.feed(text)
    first = dict(zip(parsed.head, parsed.rows[0], strict=True))
    assert first["throughput_iter_per_s"] == first["makespan_ps"] == "" and first["complete"] == "false"
    assert first["pareto"] == "false"


def test_a_csv_pareto_column_of_other_axes_is_refused(sweep_file, tmp_path):
    import pyarrow.parquet as pq

    one = rf.pareto.export(rf.pareto.front(pq.read_table(sweep_file), by=[]), tmp_path / "one.csv")
    with pytest.raises(rf.SpecError, match="pareto column .* is not the front of 'throughput_iter_per_s'"):
        rf.report.write(one, tmp_path / "r.html")


def test_a_marked_front_sets_the_axes(sweep_file, tmp_path):
    import pyarrow.parquet as pq

    table = rf.pareto.front(pq.read_table(sweep_file), perf="iteration_time_ps")
    text = rf.report.render(table)
    fig = _figures(text)["front-0"]
    assert fig["layout"]["yaxis"]["title"]["text"].endswith("lower is better")
    assert fig["layout"]["yaxis"]["title"]["text"].startswith("iteration time (")
    with pytest.raises(rf.SpecError, match="marks the front of 'iteration_time_ps'"):
        rf.report.render(table, perf="throughput_iter_per_s")


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(rf.SpecError, match="nope.parquet: no such file"):
        rf.report.write(tmp_path / "nope.parquet", tmp_path / "r.html")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(rf.SpecError, match=r"unknown suffix '\.json'"):
        rf.report.write(tmp_path / "x.json", tmp_path / "r.html")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(rf.SpecError, match="bad.parquet: not a readable parquet file"):
        rf.report.write(tmp_path / "bad.parquet", tmp_path / "r.html")
    with pytest.raises(rf.SpecError, match="no 'fabric' column"):
        rf.report.render(pa.table({"network_cost_usd": [1.0], "throughput_iter_per_s": [1.0]}))
    with pytest.raises(rf.SpecError, match="no rows"):
        rf.report.render(pa.table({"fabric": pa.array([], pa.string())}))
    with pytest.raises(rf.SpecError, match="no performance column 'nope'"):
        rf.report.render(pa.table({"fabric": ["a"], "network_cost_usd": [1.0]}), perf="nope")
    with pytest.raises(rf.SpecError, match="expected a pyarrow Table"):
        rf.report.write([1, 2], tmp_path / "r.html")


def test_cli_writes_the_page(sweep_file, tmp_path, capsys):
    out = tmp_path / "sub" / "report.html"
    assert main(["report", str(sweep_file), "-o", str(out), "--title", "cli sweep"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert "<title>cli sweep</title>" in out.read_text(encoding="utf-8")
    assert main(["report", str(tmp_path / "missing.parquet"), "-o", str(out)]) == 2
    assert "missing.parquet: no such file" in capsys.readouterr().err
    # a column whose name says nothing of its direction needs the flag
    import pyarrow.parquet as pq

    table = pq.read_table(sweep_file)
    score = pa.array([float(p % 3) for p in table["point"].to_pylist()])
    pq.write_table(table.append_column("score", score), tmp_path / "s.parquet")
    args = ["report", str(tmp_path / "s.parquet"), "-o", str(out), "--perf", "score"]
    assert main(args) == 2
    assert "cannot tell whether higher or lower 'score' is better" in capsys.readouterr().err
    assert main([*args, "--lower-is-better"]) == 0
    fig = _figures(out.read_text(encoding="utf-8"))["front-0"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "score, lower is better"


# --- in a browser -------------------------------------------------------------------------

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)",
)


def _chromium(page: Path, *args: str) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium with every host name unresolvable (no network);
    return the DOM after the page's scripts ran and the console messages it logged."""
    run = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=5000",
            *args,
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    console = [line for line in run.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]
    return run.stdout, console


@needs_chromium
def test_chromium_sees_console_errors(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<html><body><p id=x>0</p><script>document.getElementById('x').textContent = '1'; throw new Error('boom');</script></body></html>"
    )
    dom, console = _chromium(bad)
    assert '<p id="x">1</p>' in dom
    assert any("Uncaught Error: boom" in line for line in console)


@needs_chromium
def test_the_page_renders_in_chromium_without_console_messages(page):
    dom, console = _chromium(page[0])
    assert console == []
    divs = list(_figures(page[1]))
    assert len(divs) == 3  # two fronts, one stage plot
    for k, div in enumerate(divs):
        start = dom.index(f'id="{div}"')
        end = dom.index(f'id="{divs[k + 1]}"') if k + 1 < len(divs) else len(dom)
        part = dom[start:end]
        assert "plot-container plotly" in part and 'class="main-svg"' in part, div  # drawn by plotly.js
    assert "Pareto front" in dom and "weight_sync" in dom  # legend entries, drawn as SVG text


@needs_chromium
def test_clicking_a_column_sorts_the_rows_in_chromium(page, sweep_file, tmp_path):
    import pyarrow.parquet as pq

    table = pq.read_table(sweep_file)
    head = _Rows()
    head.feed(page[1])
    cost, point = head.head.index("network_cost_usd"), head.head.index("point")
    probe = f"""<script>
const th = document.querySelectorAll("#rows th")[{cost}], out = [];
const order = () => Array.from(document.querySelectorAll("#rows tbody tr")).map(r => r.cells[{point}].dataset.v).join(",");
th.click(); out.push(order()); th.click(); out.push(order());
const p = document.createElement("pre"); p.id = "probe"; p.textContent = out.join(";"); document.body.append(p);
</script></body>"""
    probed = tmp_path / "probe.html"
    probed.write_text(page[1].replace("</body>", probe), encoding="utf-8")
    dom, console = _chromium(probed)
    assert console == []
    asc, desc = re.search(r'<pre id="probe">([^<]*)</pre>', dom).group(1).split(";")
    rows = table.to_pylist()  # page order = table order (stable sorts from there)
    up = sorted(rows, key=lambda r: r["network_cost_usd"])
    down = sorted(up, key=lambda r: r["network_cost_usd"], reverse=True)
    assert asc.split(",") == [str(r["point"]) for r in up]
    assert desc.split(",") == [str(r["point"]) for r in down]
    assert asc != desc
