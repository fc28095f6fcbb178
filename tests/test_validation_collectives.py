"""bench/validation/collectives.py: the public measurements and their simulated rows."""

import importlib.util
import math
import re
from pathlib import Path

import pytest

import rfabric as rf

PATH = Path(__file__).resolve().parent.parent / "bench" / "validation" / "collectives.py"
KEYS = {
    "group",
    "what",
    "hardware",
    "setup",
    "measured",
    "unit",
    "source",
    "calibrated",
    "simulated",
    "note",
}


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("validation_collectives", PATH)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.fixture(scope="module")
def quick_rows(mod):
    return mod.rows(quick=True)


def test_every_case_has_a_source_and_a_measurement(mod):
    cases = mod.cases()
    assert len(cases) >= 12
    assert len({c.key for c in cases}) == len(cases)
    for c in cases:
        assert c.measured > 0 and math.isfinite(c.measured), c.key
        assert re.search(r"https://\S+", c.source), c.key  # every source names where, with a URL
        assert c.hardware and c.setup and c.unit and c.what, c.key
        assert isinstance(c.calibrated, bool)
    text = " ".join(c.what + " " + c.setup for c in cases)
    for needed in ("all_reduce", "all_gather", "all_to_all", "ring", "tree", "1 server", "32 servers"):
        assert needed in text or needed in " ".join(c.key for c in cases), needed
    units = {c.unit for c in cases}
    assert "us" in units and "GB/s busbw" in units


def test_quick_rows_structure(mod, quick_rows):
    assert 3 <= len(quick_rows) < len(mod.cases())
    for r in quick_rows:
        assert set(r) == KEYS
        assert r["group"] == "collectives"
        assert isinstance(r["measured"], float) and r["measured"] > 0
        assert isinstance(r["simulated"], float) and math.isfinite(r["simulated"]) and r["simulated"] > 0
        assert isinstance(r["calibrated"], bool)
        assert "http" in r["source"]


def test_quick_rows_obey_physical_bounds(mod, quick_rows):
    """Independent of the collective model: busbw cannot beat the bottleneck links. One A100
    server's all_reduce is bounded by NVLink (300 GB/s per direction); the 100G ring's busbw
    per NIC by 100 Gb/s = 12.5 GB/s; a latency is at least the wire latency."""
    by_what = {r["what"]: r for r in quick_rows}
    a100 = by_what["all_reduce 8 GiB, one A100 server"]
    assert 0.5 * 300 < a100["simulated"] <= 300.0
    per_nic = by_what["all_reduce ring busbw per 100G NIC"]
    assert 0.5 * 12.5 < per_nic["simulated"] <= 12.5
    lat = by_what["DeepEP low-latency dispatch EP16, latency"]
    # 7.59 MB per rank, half of it to the other server over one 400G NIC: >= 75.9 us
    assert lat["simulated"] >= mod.DEEPEP_LL_DISPATCH_BYTES / 2 / 50e3


def test_rows_use_the_public_api_at_run_time(mod, monkeypatch):
    """The simulated column comes from rf.collective when rows() runs (nothing cached)."""
    calls = []
    real = rf.collective

    def spy(*a, **k):
        calls.append(a[1])  # rf.collective(fabric, kind, ...)
        return real(*a, **k)

    monkeypatch.setattr(mod.rf, "collective", spy)
    out = mod.rows(only="a100-2srv-ring-8b")
    assert len(out) == 1 and calls == ["all_reduce"]


def test_table_reports_held_out_errors(mod, quick_rows):
    text = mod.format_table(quick_rows)
    assert f"held-out rows: {len(quick_rows)}" in text
    r = quick_rows[0]
    assert mod.error_pct(r) == pytest.approx((r["simulated"] - r["measured"]) / r["measured"] * 100)


def test_docs_table_lists_every_measurement(mod):
    """docs/validation-collectives.md's table has each case, with its measured value and unit
    (its simulated column is re-run with --markdown; the measurements must not drift)."""
    doc = (PATH.parent.parent.parent / "docs" / "validation-collectives.md").read_text()
    table = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[-1] in ("yes", "no"):
            table[cells[0]] = (float(cells[1]), cells[2], cells[-1] == "yes")
    for c in mod.cases():
        assert table.get(c.what) == (c.measured, c.unit, c.calibrated), c.key
    assert len(table) == len(mod.cases())


def test_every_setup_names_its_backend(mod):
    for c in mod.cases():
        assert re.search(r"(packet|flow) backend", c.full_setup), c.key
