"""rfabric/simulation/streams.py: rows and samples out of the engine, in memory or streamed
to Parquet parts (the same rows either way)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rfabric as rf
from rfabric.simulation import Simulation
from rfabric.simulation.streams import stream_dir

FLOWS = rf.Flows.permutation(16, 128 << 10, seed=5)


def test_stream_dir_refuses_a_file_or_a_directory_with_files(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(rf.SpecError, match="flows_path: .* exists and is not a directory"):
        stream_dir(tmp_path / "f", "flows_path")
    with pytest.raises(rf.SpecError, match="samples_path: directory .* is not empty"):
        stream_dir(tmp_path, "samples_path")
    with pytest.raises(rf.SpecError, match="flows_path must be a path, got int"):
        stream_dir(3, "flows_path")
    made = stream_dir(tmp_path / "new" / "dir", "flows_path")
    assert made.is_dir() and not any(made.iterdir())


def test_streamed_flow_rows_are_the_rows_kept_in_memory(tmp_path, monkeypatch):
    fab = rf.topologies.FatTree(16)
    memory = rf.simulate(fab, FLOWS, seed=1)
    # several parts: a batch of 4 finished flows per part, checked every 64 events
    monkeypatch.setattr(Simulation, "FLOW_BATCH_ROWS", 4)
    monkeypatch.setattr(Simulation, "_STREAM_CHUNK_EVENTS", 64)
    res = rf.simulate(fab, FLOWS, seed=1, flows_path=tmp_path / "flows")
    parts = sorted((tmp_path / "flows").glob("part-*.parquet"))
    assert len(parts) >= 2 and res.flows.num_rows == 0 and res.flows_path == str(tmp_path / "flows")
    back = pq.read_table(tmp_path / "flows").sort_by("flow_id")
    assert back.equals(memory.flows.cast(back.schema))
    assert res.run["events"] == memory.run["events"]


def test_streamed_samples_are_the_samples_kept_in_memory(tmp_path):
    fab = rf.topologies.FatTree(16)
    memory = rf.simulate(fab, FLOWS, seed=1, sample_every="2us")
    res = rf.simulate(fab, FLOWS, seed=1, sample_every="2us", samples_path=tmp_path / "s")
    assert res.queue_samples.num_rows == 0 and memory.queue_samples.num_rows > 0
    for name, table, cols in (
        ("queues", memory.queue_samples, ("time_ps", "link_id", "direction")),
        ("rates", memory.rate_samples, ("time_ps", "flow_id")),
    ):
        back = pq.read_table(tmp_path / "s" / name)
        keys = [(c, "ascending") for c in cols]
        assert back.sort_by(keys).equals(pa.Table.from_batches(table.to_batches()).sort_by(keys))
