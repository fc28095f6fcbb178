"""rf.sweep: reproducible rows whatever the executor, resume, configs and their errors."""

import hashlib
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import rfabric as rf
import rfabric.sweeps as sweep_mod
from rfabric.results import SWEEP_HOST_COLUMNS, SWEEP_SCHEMA

PERM = {"flows": {"pattern": "permutation", "size": "64KiB"}}
GRID = dict(fabrics=["FT", "RFabric"], links=["100Gbps", "200Gbps"], gpus=[16], workload=PERM)


def without_wall(table):
    """The rows without the host's measurements (wall time, memory)."""
    return table.drop_columns(list(SWEEP_HOST_COLUMNS))


def test_rows_have_the_schema_cost_and_performance(tmp_path):
    out = tmp_path / "s.parquet"
    t = rf.sweep(**GRID, executor="serial", out=out, progress=False)
    assert t.schema == SWEEP_SCHEMA and t.num_rows == 4
    assert [(r["fabric"], r["link_speed"]) for r in t.to_pylist()] == [
        ("FT", "100Gbps"),
        ("FT", "200Gbps"),
        ("RFabric", "100Gbps"),
        ("RFabric", "200Gbps"),
    ]
    for r in t.to_pylist():
        fab = sweep_mod.resolve_fabric(r["fabric"]).build(16, r["link_bps"])
        assert r["network_cost_usd"] == rf.cost.network_cost(fab)
        assert r["complete"] and r["flows"] == r["flows_done"] == 16
        assert r["iteration_time_ps"] == r["makespan_ps"] > 0  # a flow set is one iteration
        assert isinstance(r["makespan_ps"], int)  # integer ps, as every simulated time
        assert r["throughput_iter_per_s"] == pytest.approx(1e12 / r["makespan_ps"])
        assert r["controller"] == "none" and r["cluster_cost_usd"] is None
    # 64 KiB at 200 Gb/s finishes before 64 KiB at 100 Gb/s
    ms = {(r["fabric"], r["link_speed"]): r["makespan_ps"] for r in t.to_pylist()}
    assert ms[("FT", "200Gbps")] < ms[("FT", "100Gbps")]
    assert pq.read_table(out).equals(t)
    assert not (tmp_path / "s.parquet.parts").exists()


def test_two_runs_and_the_local_pool_give_identical_rows(tmp_path):
    a = rf.sweep(**GRID, executor="serial", out=None, progress=False)
    b = rf.sweep(**GRID, executor="serial", out=None, progress=False)
    c = rf.sweep(**GRID, executor="local", workers=2, out=tmp_path / "c.parquet", progress=False)
    assert without_wall(a).equals(without_wall(b))
    assert without_wall(a).equals(without_wall(c))


def test_ray_executor_gives_the_same_rows(tmp_path):
    pytest.importorskip("ray")
    a = rf.sweep(**GRID, executor="serial", out=None, progress=False)
    b = rf.sweep(**GRID, executor="ray", workers=2, out=tmp_path / "r.parquet", progress=False)
    assert without_wall(a).equals(without_wall(b))


def test_rows_do_not_depend_on_grid_order():
    a = rf.sweep(**GRID, executor="serial", out=None, progress=False)
    b = rf.sweep(**dict(GRID, fabrics=["RFabric", "FT"]), executor="serial", out=None, progress=False)
    key = ["fabric", "link_speed"]
    a_rows = {tuple(r[k] for k in key): r for r in without_wall(a).drop_columns(["point"]).to_pylist()}
    b_rows = {tuple(r[k] for k in key): r for r in without_wall(b).drop_columns(["point"]).to_pylist()}
    assert a_rows == b_rows


def test_seeds_are_a_stable_hash_of_sweep_seed_and_point():
    key = "fabric=FT|link=200Gbps|gpus=16|workload=x|controller=none"
    digest = hashlib.sha256(f"7\x1fengine\x1f{key}".encode()).digest()
    assert sweep_mod.derive_seed(7, "engine", key) == int.from_bytes(digest[:8], "little") % 2**31
    t = rf.sweep(**dict(GRID, links=["200Gbps"]), executor="serial", out=None, progress=False, seed=7)
    assert t["seed"].to_pylist() == [
        sweep_mod.derive_seed(
            7, "engine", f"fabric={f}|link=200Gbps|gpus=16|workload=permutation 64KiB|controller=none"
        )
        for f in ("FT", "RFabric")
    ]
    # the workload's seed does not depend on the fabric: every fabric replays the same flows
    assert len(set(t["workload_seed"].to_pylist())) == 1
    other = rf.sweep(**dict(GRID, links=["200Gbps"]), executor="serial", out=None, progress=False, seed=8)
    assert other["seed"].to_pylist() != t["seed"].to_pylist()


CALLS = []
FAIL_AT = {"gpus": None}


def flaky_fat_tree(gpus, link):
    """A fabric factory that fails at one scale while FAIL_AT says so (a crashed point)."""
    CALLS.append((gpus, link))
    if gpus == FAIL_AT["gpus"]:
        raise rf.SpecError(f"injected failure at {gpus} GPUs")
    return rf.topologies.FatTree(gpus, link)


def counting_simulate(monkeypatch):
    """Record the GPU count of every point that is simulated (not resumed)."""
    runs = []
    real = rf.simulation.simulate

    def spy(fab, workload, **kwargs):
        runs.append(fab.gpus)
        return real(fab, workload, **kwargs)

    monkeypatch.setattr(rf.simulation, "simulate", spy)
    return runs


def counts(table) -> dict:
    meta = table.schema.metadata
    return {k: int(meta[f"rfabric.sweep.{k}".encode()]) for k in ("points", "resumed", "ran", "replaced")}


def test_an_interrupted_sweep_resumes_where_it_stopped(tmp_path, monkeypatch, capsys):
    grid = dict(fabrics={"FT": flaky_fat_tree}, links=["200Gbps"], gpus=[16, 24, 32], workload=PERM)
    whole = rf.sweep(**grid, executor="serial", out=tmp_path / "whole.parquet", progress=False)
    runs = counting_simulate(monkeypatch)

    out = tmp_path / "resumed.parquet"
    FAIL_AT["gpus"] = 32  # the third point fails: the first two are on disk
    with pytest.raises(
        rf.SpecError, match=r"^sweep: sweep point fabric=FT\|link=200Gbps\|gpus=32.*injected failure"
    ):
        rf.sweep(**grid, executor="serial", out=out, progress=False)
    assert runs == [16, 24]
    assert len(list((tmp_path / "resumed.parquet.parts").glob("*.parquet"))) == 2
    assert not out.exists()

    FAIL_AT["gpus"] = None
    runs.clear()
    resumed = rf.sweep(**grid, executor="serial", out=out, progress=True)
    assert runs == [32]  # only the missing point ran
    assert counts(resumed) == {"points": 3, "resumed": 2, "ran": 1, "replaced": 0}
    assert f"sweep: 2 of 3 points resumed from {out}, 1 to run" in capsys.readouterr().err
    assert without_wall(resumed).equals(without_wall(whole))
    assert not (tmp_path / "resumed.parquet.parts").exists()

    runs.clear()
    again = rf.sweep(**grid, executor="serial", out=out, progress=False)
    assert runs == [] and again.equals(resumed)  # a finished sweep reruns nothing
    assert counts(again) == {"points": 3, "resumed": 3, "ran": 0, "replaced": 0}


def fat_tree_failing_by_env(gpus, link):
    """Fails at the scale RF_TEST_FAIL_GPUS names: worker processes see the environment,
    not this module's globals."""
    import os

    if str(gpus) == os.environ.get("RF_TEST_FAIL_GPUS"):
        raise rf.SpecError(f"injected failure at {gpus} GPUs")
    return rf.topologies.FatTree(gpus, link)


def test_a_sweep_interrupted_on_the_process_pool_resumes_serially(tmp_path, monkeypatch):
    grid = dict(
        fabrics={"FT": fat_tree_failing_by_env}, links=["100Gbps", "200Gbps"], gpus=[16, 24], workload=PERM
    )
    whole = rf.sweep(**grid, executor="serial", out=None, progress=False)
    out = tmp_path / "s.parquet"
    monkeypatch.setenv("RF_TEST_FAIL_GPUS", "24")
    with pytest.raises(rf.SpecError, match="injected failure at 24 GPUs"):
        rf.sweep(**grid, executor="local", workers=2, out=out, progress=False)
    saved = len(list((tmp_path / "s.parquet.parts").glob("*.parquet")))
    assert saved <= 2  # points that finished before the failure (the 16-GPU ones at most)
    monkeypatch.delenv("RF_TEST_FAIL_GPUS")
    resumed = rf.sweep(**grid, executor="serial", out=out, progress=False)
    assert without_wall(resumed).equals(without_wall(whole))


def test_a_changed_configuration_does_not_reuse_rows(tmp_path):
    out = tmp_path / "s.parquet"
    a = rf.sweep(**GRID, executor="serial", out=out, progress=False)
    b = rf.sweep(**GRID, executor="serial", out=out, progress=False, prices={"200Gbps": {"nic": 0}})
    assert set(a["config_id"].to_pylist()).isdisjoint(b["config_id"].to_pylist())
    cheaper = {(r["fabric"], r["link_speed"]): r["network_cost_usd"] for r in b.to_pylist()}
    for r in a.to_pylist():
        saved = 16 * 1291 if r["link_speed"] == "200Gbps" else 0
        assert cheaper[(r["fabric"], r["link_speed"])] == r["network_cost_usd"] - saved


SHAPE = {"spines": 2, "trace_bytes": 1 << 20}


class LeafSpine(rf.Topology):
    """A user's fabric whose build() reads SHAPE: editing SHAPE stands for editing build()."""

    family = "leaf_spine_test"

    def build(self, net):
        import numpy as np

        gpu = net.add_servers(self.gpus // 8)
        leaves = net.add_nodes("eps", self.gpus // 8, prefix="leaf")
        spines = net.add_nodes("eps", SHAPE["spines"], prefix="spine")
        net.add_links(gpu.ravel(), np.repeat(leaves, 8), rate=self.link, kind="nic")
        net.add_links(
            np.repeat(leaves, len(spines)), np.tile(spines, len(leaves)), rate=self.link, kind="leaf-spine"
        )


def one_all_reduce(gpus, seed):
    """A workload factory whose trace's content reads SHAPE (its name and arguments do not)."""
    return rf.op_trace("all_reduce", range(gpus), SHAPE["trace_bytes"], gpus=gpus)


def test_a_changed_build_or_trace_content_is_recomputed_not_resumed(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(SHAPE, "spines", 2)
    monkeypatch.setitem(SHAPE, "trace_bytes", 1 << 20)
    runs = counting_simulate(monkeypatch)
    grid = dict(fabrics=[LeafSpine], links=["200Gbps"], gpus=[16], workload={"ar": one_all_reduce})
    out = tmp_path / "s.parquet"
    first = rf.sweep(**grid, executor="serial", out=out, progress=False)
    assert runs == [16] and counts(first)["ran"] == 1

    SHAPE["spines"] = 4  # build() changed: same class, label and arguments
    second = rf.sweep(**grid, executor="serial", out=out, progress=True)
    assert runs == [16, 16], "the stale row was resumed"
    assert counts(second) == {"points": 1, "resumed": 0, "ran": 1, "replaced": 1}
    assert "0 of 1 points resumed" in capsys.readouterr().err
    assert second["config_id"][0].as_py() != first["config_id"][0].as_py()
    # the oracle: the cost model on the fabric as build() now makes it (2 more spines, 4 more links)
    assert second["network_cost_usd"][0].as_py() == rf.cost.network_cost(LeafSpine(16))
    assert second["network_cost_usd"][0].as_py() > first["network_cost_usd"][0].as_py()

    SHAPE["trace_bytes"] = 4 << 20  # the factory's trace changed: same name, same arguments
    third = rf.sweep(**grid, executor="serial", out=out, progress=False)
    assert runs == [16, 16, 16] and counts(third)["replaced"] == 1
    assert third["config_id"][0].as_py() != second["config_id"][0].as_py()
    assert (
        third["makespan_ps"][0].as_py() > second["makespan_ps"][0].as_py()
    )  # 4x the bytes on the same fabric

    again = rf.sweep(**grid, executor="serial", out=out, progress=False)  # nothing changed
    assert runs == [16, 16, 16] and counts(again) == {"points": 1, "resumed": 1, "ran": 0, "replaced": 0}
    assert again.equals(third)


def nondeterministic_fat_tree(gpus, link):
    """A factory whose fabric differs from one build to the next (an unseeded random choice)."""
    import os

    return rf.topologies.FatTree(gpus, link, buffer=f"{512 + int.from_bytes(os.urandom(2), 'little')}KiB")


def test_a_fabric_that_builds_differently_in_the_worker_is_named():
    with pytest.raises(rf.SweepError, match="built different tables in the worker.*deterministic"):
        rf.sweep(
            fabrics={"R": nondeterministic_fat_tree},
            links=["200Gbps"],
            gpus=[16],
            workload=PERM,
            executor="serial",
            out=None,
            progress=False,
        )


def test_workload_forms_trace_flows_factory_and_rl_generator():
    flows = rf.Flows.permutation(16, 1 << 16, seed=3)

    def make(gpus, seed):
        return rf.Flows.permutation(gpus, 1 << 16, seed=seed)

    rl = {
        "generate_rl": {
            "model": {"base": "qwen2.5-14b", "layers": 1},
            "global_batch": 4,
            "decode_steps_per_op": 1024,
        }
    }
    t = rf.sweep(
        fabrics=["FT"],
        links=["200Gbps"],
        gpus=[16],
        workload={"fixed": flows, "made": make, "rl": rl},
        executor="serial",
        out=None,
        progress=False,
        gpu_price_usd=20_000,
    )
    rows = {r["workload"]: r for r in t.to_pylist()}
    assert set(rows) == {"fixed", "made", "rl"}
    assert rows["fixed"]["flows"] == rows["made"]["flows"] == 16
    r = rows["rl"]
    assert r["complete"] and r["iterations"] == 1
    assert r["samples_per_s"] == pytest.approx(4e12 / r["makespan_ps"])
    assert r["stage_train_ps"] > 0 and r["stage_weight_sync_ps"] > 0
    assert dict(r["stage_ps"])["train"] == r["stage_train_ps"]
    assert r["cluster_cost_usd"] == r["network_cost_usd"] + 16 * 20_000


def test_controller_is_passed_to_simulate_fresh_per_point(monkeypatch):
    seen = []
    real = rf.simulation.simulate

    def spy(fab, workload, **kwargs):
        ctrl = kwargs.pop("controller")
        seen.append(ctrl)
        ctrl.calls += 1
        return real(fab, workload, **kwargs)

    class Recorder:
        name = "recorder"

        def __init__(self):
            self.calls = 0

    monkeypatch.setattr(rf.simulation, "simulate", spy)
    proto = Recorder()
    t = rf.sweep(**GRID, controller=proto, executor="serial", out=None, progress=False)
    assert t["controller"].to_pylist() == ["recorder"] * 4
    assert len(seen) == 4 and len({id(c) for c in seen}) == 4 and proto.calls == 0
    assert all(c.calls == 1 for c in seen)  # a deep copy per point: no state crosses points


def test_unpicklable_factories_are_named_for_process_executors():
    with pytest.raises(rf.SpecError, match="define factories at module level"):
        rf.sweep(
            **dict(GRID, fabrics={"L": lambda g, link: rf.topologies.FatTree(g, link)}),
            out=None,
            progress=False,
        )


def fat_tree_dying_in_workers(gpus, link):
    """Kills the worker process that builds it at 24 GPUs (an out-of-memory kill, say)."""
    import multiprocessing
    import os

    if gpus == 24 and multiprocessing.current_process().name != "MainProcess":
        os._exit(9)
    return rf.topologies.FatTree(gpus, link)


def test_a_worker_that_dies_is_a_named_error():
    grid = dict(fabrics={"FT": fat_tree_dying_in_workers}, links=["200Gbps"], gpus=[16, 24], workload=PERM)
    with pytest.raises(rf.SweepError, match="worker process.*died.*executor='serial'") as info:
        rf.sweep(**grid, executor="local", workers=1, out=None, progress=False)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert rf.sweep(**grid, executor="serial", out=None, progress=False).num_rows == 2  # what it says to do


SCRIPT = """
import rfabric as rf

table = rf.sweep(fabrics=["FT"], links=["200Gbps"], gpus=[16], workload={PERM!r}, out=None, progress=False,
                 workers=1)
print("rows", table.num_rows)
"""


@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_the_main_guard_gets_a_named_error(tmp_path, guarded):
    import os
    import subprocess

    code = SCRIPT.format(PERM=PERM)
    if guarded:
        code = 'if __name__ == "__main__":\n' + "".join(f"    {line}\n" for line in code.strip().splitlines())
    script = tmp_path / "run_sweep.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(Path(rf.__file__).parent.parent))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    if guarded:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "rows 1"
        return
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rfabric.errors.SweepError: sweep: the local executor's worker processes died")
    assert f"with a script ({script})" in last and 'if __name__ == "__main__":' in last
    assert 'executor="serial"' in last
    assert "BrokenProcessPool" not in done.stderr


def test_progress_bar(capsys):
    rf.sweep(**dict(GRID, links=["200Gbps"]), executor="serial", out=None, progress=True)
    err = capsys.readouterr().err
    assert "sweep" in err and "2/2" in err


def write(tmp_path, text: str, name="sweep.toml") -> Path:
    """Write a config file; GOOD's {extra} (top-level keys) defaults to nothing."""
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = """
fabrics = ["FT", {{ name = "FT-OS k8", family = "fat_tree", oversubscription = 3, radix = 8 }}]
links = [{links}]
gpus = [16]
executor = "serial"
out = "rows.parquet"
{extra}
{workload}
"""
WORKLOAD = '[workload.flows]\npattern = "permutation"\nsize = "64KiB"\n'


@pytest.mark.parametrize(
    "links, workload, message",
    [
        ('"200Gbps"', WORKLOAD.replace("permutation", "ring"), r"unknown flows pattern 'ring'"),
        ('"200Gbs"', WORKLOAD, r"links\[0\]: .*200Gbs"),
        ('"200Gbps"', "", r"missing key 'workload'"),
        ('"200Gbps"', "[workload.generate_rl]\ntrain_gpus = 8\n", r"workload: generate_rl needs 'model'"),
    ],
)
def test_bad_configs_name_the_key_and_file(tmp_path, links, workload, message):
    path = write(tmp_path, GOOD.format(links=links, workload=workload, extra=""))
    with pytest.raises(rf.SpecError, match=rf"{path.name}.*{message}|{message}.*{path.name}") as info:
        sweep_mod.run_config(path)
    assert str(path) in str(info.value)


def test_unknown_fabric_and_unknown_key_name_the_file(tmp_path):
    path = write(
        tmp_path,
        GOOD.format(links='"200Gbps"', workload=WORKLOAD, extra="").replace('"FT",', '"FT", "Torus",'),
    )
    with pytest.raises(rf.SpecError, match=rf"{path}: fabrics\[1\]: unknown fabric 'Torus'"):
        sweep_mod.run_config(path)
    path = write(tmp_path, GOOD.format(links='"200Gbps"', workload=WORKLOAD, extra="fabric_list = []"))
    with pytest.raises(rf.SpecError, match=rf"{path}: unknown key 'fabric_list'"):
        sweep_mod.run_config(path)


def test_unknown_price_key_in_a_sweep_names_the_prices_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # prices = "prices.toml" is relative to the working folder
    prices = write(tmp_path, '["200Gbps"]\nswitch = 700\n', name="prices.toml")
    path = write(tmp_path, GOOD.format(links='"200Gbps"', workload=WORKLOAD, extra='prices = "prices.toml"'))
    with pytest.raises(rf.SpecError, match=rf"{prices}: \['200Gbps'\] unknown component 'switch'"):
        sweep_mod.run_config(path)


def test_bad_arguments_to_sweep():
    with pytest.raises(rf.SpecError, match="unknown executor 'dask'"):
        rf.sweep(**GRID, executor="dask", out=None)
    with pytest.raises(rf.SpecError, match="sweep: workload: missing workload"):
        rf.sweep(**dict(GRID, workload=None), out=None)
    with pytest.raises(rf.SpecError, match=r"sweep: gpus\[0\] must be an integer >= 1"):
        rf.sweep(**dict(GRID, gpus=[0]), out=None)
    with pytest.raises(rf.SpecError, match="fabric 'FT' appears twice"):
        rf.sweep(**dict(GRID, fabrics=["FT", "FT"]), out=None)
    with pytest.raises(rf.SpecError, match="built fabric"):
        rf.sweep(**dict(GRID, fabrics=[rf.topologies.FatTree(16)]), out=None)


def test_the_docs_config_and_the_example_config_resolve(tmp_path):
    import re

    root = Path(__file__).parent.parent
    text = re.search(r"```toml\n(.*?)```", (root / "docs/how-to/sweeps.md").read_text(), re.S).group(1)
    kwargs = sweep_mod.load_config(write(tmp_path, text))
    points = grid(kwargs)
    assert len(points) == 7 * 2 * 2 * 2  # fabrics x links x gpus x workloads
    assert {p.workload.label for p in points} == {"rl", "perm"}
    kwargs = sweep_mod.load_config(root / "examples" / "sweep.toml")
    points = grid(kwargs)
    assert [p.fabric.label for p in points[::2]] == ["FT", "FT-OS", "RO", "TopoOpt", "MixNet", "RFabric"]
    assert points[0].workload.label == "rl qwen2.5-14b-2L"
    assert kwargs["out"] == str(Path.cwd() / "sweep.parquet")  # the working folder's


def grid(kw):
    """The points a config's sweep would run, without running them."""
    args = [kw["fabrics"], kw["links"], kw["gpus"], kw["workload"], kw.get("controller"), kw.get("seed", 0)]
    return sweep_mod.points._grid(
        *args, kw.get("prices"), kw.get("gpu_price_usd"), kw.get("settings"), kw["where"]
    )


TINY_RL = {
    "generate_rl": {
        "model": dict(name="tiny", layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000),
        "train": {"tp": 8},
        "gen": {"tp": 8},
        "global_batch": 8,
        "decode_steps_per_op": 256,
    }
}


def test_controllers_by_name_per_fabric_same_rows_on_the_pool(tmp_path):
    kw = dict(fabrics=["FT", "RFabric"], links=["200Gbps"], gpus=[32], workload=TINY_RL, progress=False)
    ctl = {"RFabric": "UniformController"}  # FT has no circuits: no controller
    a = rf.sweep(**kw, controller=ctl, executor="serial", out=None)
    b = rf.sweep(**kw, controller=ctl, executor="local", workers=2, out=tmp_path / "c.parquet")
    assert without_wall(a).equals(without_wall(b))
    rows = {r["fabric"]: r for r in a.to_pylist()}
    assert rows["FT"]["controller"] == "none" and rows["FT"]["controller_calls"] == 0
    assert rows["RFabric"]["controller"] == "UniformController" and rows["RFabric"]["controller_calls"] > 0
    assert all(r["complete"] and r["ops"] == r["ops_done"] > 0 for r in rows.values())
    assert a["workload"].to_pylist() == ["rl tiny", "rl tiny"]
    with pytest.raises(
        rf.SpecError, match=r"controller.RFabric: unknown controller 'Oracle' \(known: .*UniformController"
    ):
        rf.sweep(**kw, controller={"RFabric": "Oracle"}, out=None)


RESUME_SCRIPT = """
import sys
import rfabric as rf

if __name__ == "__main__":
    t = rf.sweep(fabrics=["FT", "RFabric"], links=["200Gbps"], gpus=[32], workload={TINY_RL!r}, controller="own",
                 executor="serial", out=sys.argv[1], progress=False)
    print(t.schema.metadata[b"rfabric.sweep.resumed"].decode(), t.schema.metadata[b"rfabric.sweep.ran"].decode())
"""


def test_a_second_process_resumes_every_point(tmp_path):
    """config_id is the same in another interpreter (other hash seed): the digests hash bytes,
    never Python's hash() or an object's address."""
    import os
    import subprocess

    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT.format(TINY_RL=TINY_RL))
    said = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=str(Path(rf.__file__).parent.parent), PYTHONHASHSEED=hash_seed)
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "s.parquet")],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        said.append(done.stdout.split())
    assert said == [["0", "2"], ["2", "0"]]
