import math

import numpy as np
import pytest

import rfabric as rf


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/* from the current code (review the diff!)",
    )


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")


def ser_ps(nbytes: int, rate_bps: int) -> int:
    """Serialization time, rounded up to a whole picosecond (independent of the engine)."""
    return -(-nbytes * 8 * 10**12 // rate_bps)


def ideal_fct_ps(size: int, hops, *, mtu: int, header: int) -> int:
    """Store-and-forward completion time of a lone message on an idle path.

    ``hops`` is a list of (rate_bps, delay_ps) per link, where delay is the propagation plus
    the processing latency of the node the link enters. Frames leave the NIC back to back;
    at every hop a frame starts when it has arrived and the previous frame has left
    (max-plus recursion), and the message ends when its last frame reaches the destination.
    """
    payload = mtu - header
    n = max(1, math.ceil(size / payload))
    sizes = [payload + header] * (n - 1) + [size - payload * (n - 1) + header]
    free = [0] * len(hops)
    arrival = 0
    for s in sizes:
        t = 0
        for h, (rate, delay) in enumerate(hops):
            start = max(t, free[h])
            free[h] = start + ser_ps(s, rate)
            t = free[h] + delay
        arrival = t
    return arrival


def jain(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def tiny_rl_trace(**overrides):
    """Two RL iterations of a small user-given model on 32 train + 32 gen GPUs (a unit-test
    size: a Qwen2.5-14B iteration on 64 GPUs moves ~300 GB, 650 M packet-hops, ~25 s)."""
    tiny = rf.traces.ModelConfig(
        name="tiny", layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000
    )
    args = dict(
        train_gpus=32,
        gen_gpus=32,
        train=dict(tp=8, pp=2, dp=2),
        gen=dict(tp=8),
        iterations=2,
        seed=3,
        global_batch=16,
        decode_steps_per_op=256,
    )
    return rf.traces.generate_rl(model=tiny, **(args | overrides))


@pytest.fixture(scope="session")
def ft128():
    return rf.topologies.FatTree(gpus=128, link="200Gbps", radix=16)


def rows(table, **equal):
    """Rows of an Arrow table whose columns equal the given values."""
    import pyarrow as pa

    mask = np.ones(len(table), dtype=bool)
    for col, value in equal.items():
        mask &= table[col].to_numpy(zero_copy_only=False) == value
    return table.filter(pa.array(mask))


@pytest.fixture(autouse=True)
def engine_invariants(monkeypatch):
    """Every run of every test keeps the engine's own rules: no frame started on a port that
    is still serialising another (busy_starts) and none put on a down or dark channel."""
    import rfabric.simulation.collect as collect

    class Checked(collect.Results):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            packet = self.run.get("backend") != "flow"  # (the flow backend has no frames: None)
            for key in ("busy_starts", "dark_transmits") if packet else ():
                assert self.run.get(key, 0) == 0, f"engine invariant broken: run[{key!r}] = {self.run[key]}"

    monkeypatch.setattr(collect, "Results", Checked)


def load_bench(name: str):
    """The module of ``bench/<name>.py`` (bench scripts are not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def weight_sync_trace(gen_gpus):
    """A tiny model's RL iteration: 64 train GPUs (16 weight shards) and ``gen_gpus``
    generation GPUs in one generator pod (tp 8)."""
    tiny = rf.traces.ModelConfig(
        name="tiny", layers=8, hidden=2048, heads=16, kv_heads=16, ffn=8192, vocab=32000
    )
    return rf.traces.generate_rl(
        model=tiny,
        train_gpus=64,
        gen_gpus=gen_gpus,
        train=dict(tp=8, pp=2, dp=4),
        gen=dict(tp=8),
        iterations=1,
        seed=3,
        global_batch=32,
        decode_steps_per_op=256,
        pod_gpus=gen_gpus,
    )
