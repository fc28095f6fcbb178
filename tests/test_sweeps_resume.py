"""rfabric/sweeps/resume.py: parts written whole or not at all, and read back by config_id."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rfabric as rf
from rfabric.results import SWEEP_SCHEMA
from rfabric.sweeps.resume import _atomic_parquet, _read_done


def test_rows_are_read_back_by_config_id_from_the_output_and_its_parts(tmp_path):
    out = tmp_path / "s.parquet"
    parts = tmp_path / "s.parquet.parts"
    parts.mkdir()
    row = {name: None for name in SWEEP_SCHEMA.names}
    a = dict(row, point=0, config_id="aaaa", fabric="FT", makespan_ps=5)
    b = dict(row, point=1, config_id="bbbb", fabric="RO", makespan_ps=7)
    _atomic_parquet(pa.Table.from_pylist([a], schema=SWEEP_SCHEMA), out)
    _atomic_parquet(pa.Table.from_pylist([b], schema=SWEEP_SCHEMA), parts / "bbbb.parquet")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["bbbb.parquet", "s.parquet", "s.parquet.parts"]
    done = _read_done(out, parts)
    assert set(done) == {"aaaa", "bbbb"}
    assert done["aaaa"]["makespan_ps"] == 5 and done["bbbb"]["fabric"] == "RO"
    assert _read_done(tmp_path / "none.parquet", tmp_path / "none.parts") == {}


def test_a_table_of_other_columns_is_refused_by_name(tmp_path):
    old = tmp_path / "old.parquet"
    pq.write_table(pa.table({"point": [0], "makespan_s": [1.0]}), old)  # e.g. a sweep before 0.2
    with pytest.raises(rf.SpecError, match="old.parquet: not a sweep table of this rfabric version"):
        _read_done(old, tmp_path / "old.parquet.parts")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(rf.SpecError, match="junk.parquet: cannot read it as a sweep table"):
        _read_done(tmp_path / "junk.parquet", tmp_path / "x.parts")
