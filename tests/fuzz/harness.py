"""The surfaces and the loop that classifies their outcomes (see the package docstring)."""

from __future__ import annotations

import collections
import random
import signal
import string
import tempfile
from pathlib import Path

import numpy as np

import rfabric as rf

ROOT = Path(__file__).resolve().parents[2]
OUTCOMES = ("accepted", "named", "generic", "hang")


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


# -- surfaces: each takes (rng, workdir) and makes one call ---------------------------------


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    mode = rng.randrange(4)
    if mode == 0:  # bit flips
        for _ in range(rng.randint(1, 20)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif mode == 1:  # truncation
        b = b[: rng.randrange(len(b))]
    elif mode == 2:  # a run of random bytes
        i = rng.randrange(len(b))
        b[i : i + 8] = bytes(rng.randrange(256) for _ in range(8))
    else:  # a slice repeated
        i, j = sorted(rng.randrange(len(b)) for _ in range(2))
        b = b[:j] + b[i:j] + b[j:]
    return bytes(b)


_SAMPLES: dict[str, bytes] = {}


def _sample(suffix: str, workdir: Path) -> bytes:
    if suffix not in _SAMPLES:
        trace = rf.traces.read(ROOT / "traces" / "sample.arrow")
        path = workdir / f"sample{suffix}"
        rf.traces.write(trace, path)
        _SAMPLES[suffix] = path.read_bytes()
    return _SAMPLES[suffix]


def trace_file(rng: random.Random, workdir: Path) -> None:
    """A damaged Arrow IPC or Parquet trace file, read with rf.traces.read."""
    suffix = rng.choice([".arrow", ".parquet"])
    path = workdir / f"fuzz{suffix}"
    path.write_bytes(_mutate_bytes(rng, _sample(suffix, workdir)))
    rf.traces.read(path)


_SIMAI = (
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 4\n"
    "2\n"
    "embedding_layer\t-1\t300\tALLREDUCE\t4096\t1\tNONE\t0\t20\tNONE\t0\t100\n"
    "mlp_row\t-1\t500\tREDUCESCATTER\t8192\t400\tALLGATHER\t8192\t400\tALLREDUCE\t65536\t100\n"
)
_HTSIM = (
    "Nodes 4\nConnections 3\nTriggers 1\n"
    "0->1 id 1 start 0.5 size 4096 send_done_trigger 1\n"
    "1->2 id 2 trigger 1 size 8192\n"
    "3->0 id 3 start 2 size 100\n"
    "trigger id 1 oneshot\n"
)


def _chakra_ranks() -> list[bytes]:
    """Two rank files: compute, a world all-reduce, a message 0 -> 1, a group all-gather."""
    from rfabric.traces.importers import chakra as c

    attr, kinds = c.AttributeProto, c.NODE_TYPES
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for rank in range(2):
            nodes = [
                c.Node(id=1, type=kinds["COMP_NODE"], duration_micros=3),
                c.Node(
                    id=2,
                    type=kinds["COMM_COLL_NODE"],
                    data_deps=[1],
                    attr=[attr(name="comm_type", int64_val=0), attr(name="comm_size", int64_val=1 << 16)],
                ),
                c.Node(
                    id=3,
                    type=kinds["COMM_SEND_NODE" if rank == 0 else "COMM_RECV_NODE"],
                    ctrl_deps=[2],
                    attr=[
                        attr(name="comm_dst" if rank == 0 else "comm_src", int32_val=1 - rank),
                        attr(name="comm_size", int64_val=4096),
                    ],
                ),
                c.Node(
                    id=4,
                    type=kinds["COMM_COLL_NODE"],
                    data_deps=[3],
                    attr=[
                        attr(name="comm_type", int64_val=2),
                        attr(name="comm_size", int64_val=8192),
                        attr(name="pg_name", string_val="tp"),
                    ],
                ),
            ]
            out.append(c.write_rank(Path(tmp) / f"r.{rank}.et", nodes).read_bytes())
    return out


def import_file(rng: random.Random, workdir: Path) -> None:
    """A Chakra rank file, SimAI workload or htsim matrix, damaged (or, one time in six,
    intact), imported with rf.traces.read."""
    fmt = rng.choice(["chakra", "simai", "htsim"])
    intact = rng.randrange(6) == 0
    if fmt == "chakra":
        ranks = _chakra_ranks()
        victim = rng.randrange(len(ranks))
        target = workdir / "et"
        target.mkdir(exist_ok=True)
        for old in target.glob("*"):
            old.unlink()
        for r, data in enumerate(ranks):
            damaged = data if intact or r != victim else _mutate_bytes(rng, data)
            (target / f"r.{r}.et").write_bytes(damaged)
        rf.traces.read(target)
        return
    text = (_SIMAI if fmt == "simai" else _HTSIM).encode()
    path = workdir / ("fuzz.txt" if fmt == "simai" else "fuzz.cm")
    path.write_bytes(text if intact else _mutate_bytes(rng, text))
    rf.traces.read(path, format=fmt)


_NUMBERS = ["0", "1", "-1", "1.5", "1e3", "1e30", "1e400", "nan", "inf", ".5", "2.9", "9" * 25]
_UNITS = [
    "ps",
    "ns",
    "us",
    "ms",
    "s",
    "min",
    "B",
    "KiB",
    "MiB",
    "GiB",
    "MB",
    "Gbps",
    "bps",
    "Gbit/s",
    "",
    "x",
]


def unit_string(rng: random.Random, workdir: Path) -> None:
    """A quantity as a user types it (or a number, bool, None...), to parse_time/size/rate."""
    kind = rng.randrange(4)
    if kind == 0:
        value: object = rng.choice(_NUMBERS) + rng.choice([""] * 3 + [" "]) + rng.choice(_UNITS)
    elif kind == 1:
        value = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 8)))
    elif kind == 2:
        value = rng.choice([0, 1, -1, 2**62, 2**63, 2**80, 1.5, float("nan"), float("inf"), True, None, [1]])
    else:
        value = np.float64(rng.choice([1e3, 1e30, -2.0, 2.5]))
    fn = rng.choice([rf.units.parse_time, rf.units.parse_size, rf.units.parse_rate])
    fn(value)


def flows_args(rng: random.Random, workdir: Path) -> None:
    """rf.Flows and Flows.permutation with odd arguments."""
    odd = [0, 1, -1, 2.9, "4MiB", "x", 2**50, 2**70, None, True, [1, 2], np.nan, "1e400ps"]
    if rng.random() < 0.5:
        n = rng.choice([1, 2, 1.5, 0, -3, "8", True, 8])
        rf.Flows.permutation(
            n, rng.choice(odd), seed=rng.randrange(5), start_ps=rng.choice([0, "1us", -1, "1e30ps"])
        )
    else:
        size = rng.choice(odd)
        rf.Flows(
            rng.choice([[0, 1], [0, -1], [0.5, 1], "01", [[0]]]), rng.choice([[1, 0], [1], [1, 1]]), size
        )


_PRESETS = sorted((ROOT / "topologies").glob("*.toml"))


def topology_toml(rng: random.Random, workdir: Path) -> None:
    """A topology preset with a line added, dropped or changed, loaded with rf.topologies.load."""
    lines = rng.choice(_PRESETS).read_text().splitlines()
    mode = rng.randrange(4)
    if mode == 0 and lines:
        del lines[rng.randrange(len(lines))]
    elif mode == 1:
        key = rng.choice(["gpus", "link", "radix", "oversubscription", "parms", "famly", "buffer", "pxn"])
        value = rng.choice(["0", "-1", "3", "1.5", "true", '"x"', '"200Gbps"', "[1]"])
        lines.insert(rng.randrange(len(lines) + 1), f"{key} = {value}")
    elif mode == 2 and lines:
        i = rng.randrange(len(lines))
        lines[i] = lines[i].replace("=", rng.choice(["==", "= =", "="]), 1)
    else:
        lines.append("[params]")
    path = workdir / "fuzz.toml"
    path.write_text("\n".join(lines) + "\n")
    rf.topologies.load(path)


def link_calls(rng: random.Random, workdir: Path) -> None:
    """Failures and engine settings with odd values, then a short run whose invariants hold."""
    fab = rf.topologies.FatTree(16)
    settings = rng.choice(
        [
            {},
            {"lossless": rng.choice([True, False, "no", 1])},
            {"ecn_pmax": rng.choice([0.5, "abc", 2, -1])},
            {"dcqcn_f": rng.choice([5, 1.5, "5"])},
            {"seed": rng.choice([1, -1, 2.5, "3"])},
            {"mtu_bytes": rng.choice([9216, 0, "9KiB", True, 2**40])},
            {"transport": rng.choice(["roce", "dctcp", "tcp", 3])},
        ]
    )
    sim = rf.Simulation(fab, rf.Flows.permutation(16, 1 << 16, seed=1), **settings)
    link = rng.choice([0, 3, 2.9, "2", -1, 10**9, np.int64(5)])
    up = rng.choice([True, False, "no", 0, None])
    sim.set_link_state(link, rng.choice([0, "1us", "1e30ps", -5, "x"]), up)
    sim.run("200us")
    res = sim.results()
    assert res.run["dark_transmits"] == 0 and res.run["busy_starts"] == 0


_FABRICS: dict[str, object] = {}


def _fabric(name: str):
    """Small fabrics, built once: an RFabric with circuits in force (3 PoDs of 4 servers)
    and a MixNet (a regional OCS), both with optical devices a plan can name, and a FatTree."""
    if name not in _FABRICS:
        _FABRICS[name] = {
            "rfabric": lambda: rf.topologies.RFabric(64, pod_servers=4),
            "mixnet": lambda: rf.topologies.MixNet(32),
            "fat_tree": lambda: rf.topologies.FatTree(32),
        }[name]().to_spec()
    return _FABRICS[name]


def _check_run(sim) -> None:
    """The invariants every accepted run keeps: no frame on a dark or down channel, none
    started on a busy port, no negative or unordered time."""
    res = sim.results()
    assert res.run["dark_transmits"] in (0, None) and res.run["busy_starts"] in (0, None), res.run
    for table in (res.flows, res.ops):
        if table is None or table.num_rows == 0:
            continue
        start = table["start_ps"].to_numpy(zero_copy_only=False)
        end = table["end_ps"].to_numpy(zero_copy_only=False)
        done = end >= 0
        assert (start >= -1).all() and (end[done] >= start[done]).all(), "negative or unordered times"


_JUNK = [None, 5, 2.5, "x", "1us", True, [1, 2], {"a": 1}, -1, 2**70, np.nan, b"\x00", object()]


def _odd_plan(rng: random.Random, spec, valid: float = 0.2):
    """A circuit plan as a user or a controller might get it wrong, or (with probability
    ``valid``) a valid one: the fabric's own circuits, a subset, or none."""
    from rfabric.spec import CircuitTable

    base = spec.circuits
    n = len(base)
    mode = 0 if rng.random() < valid else rng.randrange(2, 10)
    if mode == 0:  # valid: the initial plan, a subset, or empty
        keep = sorted(rng.sample(range(n), rng.randint(0, n))) if n else []
        return CircuitTable.build(base.ocs[keep], base.a[keep], base.b[keep])
    if mode == 2:  # not a CircuitTable at all
        return rng.choice(_JUNK + [(base.ocs, base.a, base.b), {"ocs": base.ocs, "a": base.a, "b": base.b}])
    if mode == 3:  # a CircuitTable built around the checks: wrong column types or shapes
        col = rng.choice(["ocs", "a", "b"])
        cols = {"ocs": base.ocs, "a": base.a, "b": base.b}
        cols[col] = rng.choice(
            [
                list(cols[col]),
                cols[col].astype(float) + 0.5,
                cols[col].astype(str),
                cols[col][:-1],
                cols[col].reshape(-1, 1),
                None,
                5,
                np.array([], dtype=np.int64),
                cols[col].astype(np.uint8),
            ]
        )
        return CircuitTable(**cols)
    # CircuitTable.build with one value changed: out of range, negative, a duplicate port, a
    # non-optical device, a link to itself, a float, a string, a huge integer
    ocs, a, b = (list(map(int, c)) for c in (base.ocs, base.a, base.b))
    if not ocs:
        ocs, a, b = [0], [0], [1]
    i = rng.randrange(len(ocs))
    col = rng.choice([ocs, a, b])
    j = rng.randrange(len(ocs))
    col[i] = rng.choice(
        [
            -1,
            spec.num_links,
            spec.num_nodes,
            2**40,
            2**70,
            2.5,
            "3",
            None,
            col[j],  # a duplicate port (or the same)
            a[i],  # a link to itself
            rng.randrange(spec.num_nodes),  # likely not an optical device
            rng.randrange(spec.num_links),
        ]
    )
    if rng.random() < 0.2:  # a row repeated
        ocs.append(ocs[i]), a.append(a[i]), b.append(b[i])
    return CircuitTable.build(ocs, a, b)


def circuit_plan(rng: random.Random, workdir: Path) -> None:
    """Simulation.apply_circuits with a plan, time and t_ocs as a user might get them wrong,
    then a short run whose invariants hold."""
    spec = _fabric(rng.choice(["rfabric", "mixnet"]))
    sim = rf.Simulation(
        spec,
        rf.Flows.permutation(spec.num_gpus, 1 << 16, seed=rng.randrange(3)),
        backend=rng.choice(_BACKENDS),
    )
    if rng.random() < 0.3:  # a failed OCS port the plan may use
        sim.fail_link(rng.randrange(spec.num_links), rng.choice([0, "5us"]))
    at = rng.choice([0, "10us", "1us"] * 3 + [-1, "1e30ps", 2.5, None])
    t_ocs = rng.choice([None, "1us", 0, "10us"] * 3 + [-1, "x", True])
    last = None
    for _ in range(rng.randint(1, 2)):
        last = _odd_plan(rng, spec, valid=0.6)
        sim.apply_circuits(last, at, t_ocs)
    sim.run("300us")
    _check_run(sim)
    # the plan applied last is the one in place: nothing dropped, added or reordered
    assert _circuit_set(sim.current_circuits()) == _circuit_set(last)


def _circuit_set(plan) -> set:
    return {(int(o), *sorted((int(a), int(b)))) for o, a, b in zip(plan.ocs, plan.a, plan.b, strict=True)}


_BACKENDS = ["packet", "flow"]


def _periods_trace(spec, rng: random.Random):
    """A small trace of three communication periods (all-reduce, all-to-all, broadcast) over
    all the fabric's GPUs, each after the previous."""
    from rfabric.traces import Trace

    n, g = 3, spec.num_gpus
    return Trace.from_columns(
        op_id=list(range(n)),
        iteration=[0] * n,
        stage=["train", "gen", "weight_sync"],
        phase=["grad_sync", "decode", "broadcast"],
        kind=["all_reduce", "all_to_all", "broadcast"],
        ranks=[list(range(g))] * n,
        size_bytes=[rng.choice([1 << 12, 1 << 16])] * n,
        algorithm=["auto"] * n,
        deps=[[], [0], [1]],
        compute_ps=[rng.choice([0, 1_000_000])] * n,
        period=[0, 1, 2],
    )


class _Odd(rf.controllers.Controller):
    """A user's controller whose plan() (and maybe prepare()) returns junk or raises."""

    def __init__(self, rng: random.Random, spec):
        self.rng, self.spec = rng, spec
        if rng.random() < 0.2:
            self.granularity = rng.choice(["op", "period", "stage", 3, None])
        if rng.random() < 0.1:
            self.lookahead = rng.choice([True, "yes", 1])
        if rng.random() < 0.1:
            self.prepare = rng.choice([None, 5, lambda trace, spec: rng.choice([trace, None, "x", 1 / 0])])

    def plan(self, intent, view):
        mode = self.rng.randrange(6)
        if mode == 0:
            raise self.rng.choice([ValueError, KeyError, ZeroDivisionError, RuntimeError, rf.SpecError])(
                "boom"
            )
        if mode == 1:
            return self.rng.choice(_JUNK)
        if mode == 2:
            return None
        return _odd_plan(self.rng, self.spec)


def controller_plans(rng: random.Random, workdir: Path) -> None:
    """A trace run under a controller that returns bad tables (wrong types, out-of-range,
    duplicate or failed ports, non-optical devices), junk or raises; or the library's
    controllers with odd arguments. The run's invariants hold where it is accepted."""
    from rfabric import controllers as c

    spec = _fabric(rng.choice(["rfabric", "mixnet"]))
    mode = rng.randrange(4)
    if mode == 0:
        ctl = c.StaticController(_odd_plan(rng, spec))
    elif mode == 1:
        ctl = _Odd(rng, spec)
    else:
        cls = rng.choice([c.UniformController, c.StageAwareController, c.MixNetController])
        kwargs = {}
        if cls is not c.UniformController and rng.random() < 0.5:
            kwargs = {
                rng.choice(["granularity", "lookahead"]): rng.choice(["op", "period", "x", True, 2, None])
            }
        ctl = cls(**kwargs)
    sim = rf.Simulation(spec, _periods_trace(spec, rng), controller=ctl, backend=rng.choice(_BACKENDS))
    if rng.random() < 0.3:
        sim.fail_link(rng.randrange(spec.num_links), 0)
    sim.run("2ms")
    _check_run(sim)


def _config_value(rng: random.Random, name: str, default):
    """An odd value for EngineConfig field ``name`` (its default shows the kind)."""
    common = [None, True, "x", -1, 0, 1, 2.5, 2**70, float("nan"), float("inf"), [1], np.int64(3)]
    by_kind = {
        "time": ["1us", "0ps", "-1us", "1e30ps", "5 ms", "1e400ps", "3kg", 10**6],
        "size": ["4KiB", "9216B", "0B", "1e30B", "-4B", 2**40, 1 << 20, "64"],
        "rate": ["5Mbps", "0bps", "1e30bps", "100Gbit/s", 10**9],
        "float": [0.0, 0.5, 1.0, 1.5, -0.5, 1e300, "0.1", np.float32(0.25)],
        "int": [1, 8, 0, -3, 2**31, 2**63, "4", 4.0],
        "str": ["roce", "dctcp", "tcp", "dmodk", "flow", "packet", "adaptive", "multipath", "ROCE", ""]
        + ["auto", "ll", "ll128", "simple", "LL"],
        "bool": [True, False, "no", 0, 1, np.bool_(True)],
    }
    if (
        name.endswith(("_ps",))
        or name in ("ecn_kmin", "ecn_kmax", "pfc_xoff", "t_ocs")
        or name.startswith(("dcqcn_timer", "dcqcn_cnp", "dctcp_min_rto"))
    ):
        kind = "time"
    elif name in ("mtu_bytes", "header_bytes", "control_bytes", "dcqcn_byte_counter", "coll_chunk"):
        kind = "size"
    elif name in ("dcqcn_rai", "dcqcn_rhai", "dcqcn_min_rate"):
        kind = "rate"
    elif name in ("transport", "ecmp", "coll_protocol"):
        kind = "str"
    elif name in ("lossless", "nccl_model"):
        kind = "bool"
    elif isinstance(default, float) or name in ("ecn_pmax",):
        kind = "float"
    else:
        kind = "int"
    return rng.choice(by_kind[kind] * 2 + common)


def engine_config(rng: random.Random, workdir: Path) -> None:
    """Every EngineConfig field, one to three at a time, with wrong types, out-of-range
    values and unit strings (as keyword settings or an EngineConfig), then a short run of
    flows or a trace on either backend whose invariants hold."""
    import dataclasses

    fields = {f.name: f.default for f in dataclasses.fields(rf.EngineConfig)}
    names = rng.sample(sorted(fields), rng.randint(1, 3))
    settings = {n: _config_value(rng, n, fields[n]) for n in names}
    unknown = rng.random() < 0.05
    if unknown:  # a misspelt setting (EngineConfig(**) itself raises Python's TypeError)
        settings[rng.choice(["mtu", "ecmp_mode", "tranport", "seeed"])] = 1
    fab = rf.topologies.FatTree(16)
    spec = fab.to_spec()
    backend = rng.choice(_BACKENDS)
    workload = rf.Flows.permutation(16, 1 << 16, seed=1) if rng.random() < 0.7 else _periods_trace(spec, rng)
    if unknown or rng.random() < 0.5:
        sim = rf.Simulation(fab, workload, backend=backend, **settings)
    else:
        sim = rf.Simulation(fab, workload, rf.EngineConfig(**settings), backend=backend)
    sim.run("300us")
    _check_run(sim)


def failures_spec(rng: random.Random, workdir: Path) -> None:
    """rf.simulate(..., failures=...) with a failure schedule as a user might write it. Links
    that fail at time 0 are known to routing from the start: no frame is lost on them."""
    spec = _fabric(rng.choice(["mixnet", "fat_tree"]))
    item = lambda: rng.choice(  # noqa: E731
        [
            (rng.randrange(spec.num_links), rng.choice([0, "10us", "1e30ps", -1, 2.5, "x"])),
            (rng.choice([-1, spec.num_links, 2.9, "3", None, np.int64(2), True]), 0),
            (1,),
            (1, 0, 2),
            5,
            "ab",
            None,
            [spec.nic_link(rng.randrange(spec.num_gpus)), "5us"],
        ]
    )
    failures = rng.choice(
        [
            [item() for _ in range(rng.randint(0, 4))],
            tuple(item() for _ in range(rng.randint(0, 3))),
            5,
            None,
            "x",
            {1: 0},
            np.array([[1, 0], [2, 10**6]]),
            (item() for _ in range(2)),
        ]
    )
    res = rf.simulate(
        spec,
        rf.Flows.permutation(spec.num_gpus, 1 << 16, seed=1),
        failures=failures,
        backend=rng.choice(_BACKENDS),
        until="300us",
    )
    assert res.run["dark_transmits"] in (0, None) and res.run["busy_starts"] in (0, None)
    if isinstance(failures, list) and all(
        isinstance(f, (tuple, list)) and f[1:] == type(f)([0]) for f in failures
    ):
        assert res.run["link_down_drops"] in (0, None), (failures, res.run)


SURFACES = {
    "trace_file": trace_file,
    "import_file": import_file,
    "unit_string": unit_string,
    "flows_args": flows_args,
    "topology_toml": topology_toml,
    "link_calls": link_calls,
    "circuit_plan": circuit_plan,
    "controller_plans": controller_plans,
    "engine_config": engine_config,
    "failures_spec": failures_spec,
}


def run(n: int, seed: int = 0, surfaces=None, timeout_s: int = 20) -> dict:
    """Run ``n`` inputs spread over ``surfaces`` (default all); returns
    ``{surface: Counter(outcome)}`` and, under the key ``"generic"``, the first examples
    of generic exceptions as ``(surface, input seed, repr)``."""
    names = list(surfaces or SURFACES)
    table = {s: collections.Counter() for s in names}
    examples: list[tuple[str, int, str]] = []
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            for i in range(n):
                name = names[i % len(names)]
                k = seed * 1_000_003 + i
                rng = random.Random(f"{name}:{k}")
                signal.alarm(timeout_s)
                try:
                    SURFACES[name](rng, workdir)
                    outcome = "accepted"
                except (rf.SpecError, rf.TraceError):
                    outcome = "named"
                except Hang:
                    outcome = "hang"
                    examples.append((name, k, "hang"))
                except Exception as exc:  # the bug class the harness exists to find
                    outcome = "generic"
                    if len(examples) < 20:
                        examples.append((name, k, f"{type(exc).__name__}: {exc}"[:200]))
                finally:
                    signal.alarm(0)
                table[name][outcome] += 1
    finally:
        signal.signal(signal.SIGALRM, old)
    return {"table": table, "examples": examples}


def format_table(result: dict) -> str:
    rows = [("surface", *OUTCOMES, "total")]
    totals = collections.Counter()
    for name, c in result["table"].items():
        rows.append((name, *(str(c[o]) for o in OUTCOMES), str(sum(c.values()))))
        totals.update(c)
    rows.append(("all", *(str(totals[o]) for o in OUTCOMES), str(sum(totals.values()))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(x.rjust(w) if j else x.ljust(w) for j, (x, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    for name, k, text in result["examples"]:
        lines.append(f"  {name} #{k}: {text}")
    return "\n".join(lines)
