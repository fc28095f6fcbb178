"""rf.sweep(max_memory=): each point's memory bounded and its peak reported, on every executor."""

import resource
import sys

import pyarrow.parquet as pq
import pytest

import rfabric as rf
from rfabric.errors import SpecError, SweepError
from rfabric.results import SWEEP_HOST_COLUMNS
from rfabric.sweeps import memory

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="max_memory needs Linux")

SMALL = {"flows": {"pattern": "permutation", "size": "64KiB"}}
# 1,024 GPUs all-to-all in packets: ~1 M flows; its engine allocates far more than 96 MiB
BIG = {"flows": {"pattern": "all_to_all", "size": "64KiB"}}
GRID = dict(fabrics=["FT", "RFabric"], links=["200Gbps"], gpus=[16, 32], workload=SMALL, progress=False)


def host_free(table):
    return table.drop_columns(list(SWEEP_HOST_COLUMNS))


def rss_now() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


@pytest.mark.parametrize("executor", ["serial", "local"])
def test_a_bound_changes_no_row_and_every_row_has_its_peak(executor, tmp_path):
    free = rf.sweep(**GRID, executor="serial", out=None)
    bound = rf.sweep(**GRID, executor=executor, workers=2, out=tmp_path / "b.parquet", max_memory="1GiB")
    assert host_free(free).equals(host_free(bound))
    for t in (free, bound):
        peaks = t["peak_rss_bytes"].to_pylist()
        # a Python process with numpy, pyarrow and the engine loaded holds tens of MB; no
        # point this small reaches a gigabyte
        assert all(20 << 20 < p < 1 << 30 for p in peaks), peaks
    assert pq.read_table(tmp_path / "b.parquet")["peak_rss_bytes"].equals(bound["peak_rss_bytes"])


def test_the_serial_executor_restores_the_limit_and_arrow_pool():
    import pyarrow as pa

    before = resource.getrlimit(resource.RLIMIT_DATA)
    pool = pa.default_memory_pool().backend_name
    rf.sweep(**GRID, executor="serial", out=None, max_memory="512MiB")
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    assert pa.default_memory_pool().backend_name == pool


@pytest.mark.parametrize("executor", ["serial", "local"])
def test_a_point_over_its_bound_fails_naming_it_and_the_others_are_kept(executor, tmp_path):
    out = tmp_path / "s.parquet"
    kw = dict(fabrics=["FT"], links=["200Gbps"], progress=False, executor=executor, workers=1, out=out)
    with pytest.raises(SweepError, match=r"gpus=1024\|workload=a2a.*max_memory=96MiB"):
        rf.sweep(
            **kw, gpus=[16, 1024], workload={"a2a": BIG}, max_memory="96MiB", settings={"backend": "packet"}
        )
    # the 16-GPU point fit and was saved: a rerun with room for the big one resumes it
    parts = list((tmp_path / "s.parquet.parts").glob("*.parquet"))
    assert len(parts) == 1 and pq.read_table(parts[0])["gpus"].to_pylist() == [16]
    # the same process (serial) can still allocate after the failed point
    assert bytearray(200 << 20)


def test_bad_bounds_are_named():
    for bad, msg in (("lots", "max_memory"), (-5, "max_memory"), ("1KiB", "below 64 MiB")):
        with pytest.raises(SpecError, match=msg):
            rf.sweep(**GRID, executor="serial", out=None, max_memory=bad)


def test_no_more_bounded_workers_than_memory_holds(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 10 << 30)
    assert memory.workers_that_fit(8, 4 << 30) == 2
    assert memory.workers_that_fit(8, 16 << 30) == 1  # at least one: its bound says if it fits
    assert memory.workers_that_fit(2, 1 << 30) == 2
    assert memory.workers_that_fit(8, None) == 8


def test_a_point_peak_is_its_own_not_the_process_lifetime():
    junk = bytearray(300 << 20)  # raise this process's lifetime peak well above what follows
    junk[::4096] = b"x" * len(junk[::4096])
    del junk
    with memory.point_memory(None) as m:
        pass
    assert m.peak_bytes < rss_now() + (64 << 20)


def test_ray_bounds_points_and_names_the_one_over(tmp_path):
    pytest.importorskip("ray")
    free = rf.sweep(**GRID, executor="serial", out=None)
    bound = rf.sweep(**GRID, executor="ray", workers=2, out=None, max_memory="1GiB")
    assert host_free(free).equals(host_free(bound))
    with pytest.raises(SweepError, match=r"gpus=1024.*max_memory=96MiB"):
        rf.sweep(
            fabrics=["FT"],
            gpus=[1024],
            workload=BIG,
            progress=False,
            executor="ray",
            workers=1,
            out=None,
            max_memory="96MiB",
            settings={"backend": "packet"},
        )
