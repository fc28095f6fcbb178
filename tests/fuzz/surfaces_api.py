"""Surfaces that call the API: units, flows, presets, links, circuit plans, controllers, engine settings, failures, user fabrics, sizes, sweeps, arguments."""

from __future__ import annotations

import random
import string
from pathlib import Path

import numpy as np

import rfabric as rf

from .common import _FABRICS, _PRESETS, ROOT, _odd

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


def topology_toml(rng: random.Random, workdir: Path) -> None:
    """A topology preset with a line added, dropped or changed, loaded with rf.topologies.load."""
    lines = rng.choice(_PRESETS).read_text().splitlines()
    mode = rng.randrange(4)
    if mode == 0 and lines:
        del lines[rng.randrange(len(lines))]
    elif mode == 1:
        key = rng.choice(
            ["gpus", "link", "radix", "oversubscription", "parms", "famly", "buffer", "pxn", "family"]
        )
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


_RATES = ["200Gbps", "1Gbps", 10**9, "0bps", -5, "x", None, 2.5e9, "1e30bps", True, np.int64(2**60)]


_LATENCIES = [None, "1us", 0, "0.5us", -1, "x", "1e30ps", 2.5, 2**62 - 1, "2s", np.int64(2**62)]


def user_topology(rng: random.Random, workdir: Path) -> None:
    """A user's Topology subclass whose build() emits random node and link tables: servers,
    switches wired at random (parallel links included), unwired switches or optical devices,
    links to no node or with odd ids, rates, latencies and buffers. Accepted: every node is
    wired and every GPU reaches the others (independent checks on the tables), and a short
    run of flows keeps the engine's invariants; every flow ends unless PFC deadlocked."""
    servers, gps = rng.randint(1, 4), rng.choice([1, 2, 2, 4])
    clean = rng.random() < 0.5  # no junk value: the tables' structure alone decides
    n_sw = rng.choice([1, 1, 2, 3, 4] if clean else [0, 1, 2, 3, 4])
    spare = None if clean else rng.choice([None, "eps", "ocs", "nvswitch", "patch_panel"])
    odd_link = not clean and rng.random() < 0.3
    p_bad = 0.0 if clean else 0.15
    arrays = not clean and rng.random() < 0.25  # per-link numpy columns, one of them odd, no other junk
    if arrays:
        spare, odd_link, p_bad = None, False, 0.0

    class Fuzzed(rf.Topology):
        family = "fuzzed"

        def __init__(self):
            super().__init__(gpus=servers * gps, gpus_per_server=gps)

        def build(self, net):
            gpu = net.add_servers(servers, gps, nvlink=rng.random() < 0.9)
            sw = net.add_nodes("eps", n_sw, prefix="sw")
            if len(sw):
                nics = dict(
                    rate=_odd(rng, ["200Gbps", "100Gbps", 10**11], _RATES, p_bad),
                    latency=_odd(rng, [None, "1us", 0], _LATENCIES, p_bad),
                )
                if arrays:  # per-link arrays, as a vectorised build() gives
                    cols = {"rate": 10**11, "latency": 10**6, "buffer": 1 << 20}
                    odd = rng.choice(sorted(cols))
                    cols[odd] = rng.choice(
                        {
                            "rate": [2**60, 0, -1],
                            "latency": [2**62, 2**61, -1, 10**12 + 1],
                            "buffer": [2**62, 0],
                        }[odd]
                    )
                    nics = {k: np.full(gpu.size, v, dtype=np.int64) for k, v in cols.items()}
                net.add_links(gpu.ravel(), [rng.choice(sw) for _ in range(gpu.size)], **nics)
                # switch to switch: a chain (connected when clean), then random extra links,
                # parallel ones likely; a switch to itself only in the junk inputs
                chain = list(zip(sw[:-1], sw[1:], strict=True)) if clean or rng.random() < 0.7 else []
                extra = [(rng.choice(sw), rng.choice(sw)) for _ in range(rng.randint(0, 4))]
                for a, b in chain + [(a, b) for a, b in extra if a != b or not clean]:
                    net.add_links(
                        a,
                        b,
                        rate=_odd(rng, ["200Gbps", "400Gbps"], _RATES, p_bad),
                        buffer=_odd(rng, [None, "1MiB", "64KiB"], [0, -1, "x", "1e30B", 2.5], p_bad),
                    )
            if spare:
                extra = net.add_nodes(spare, rng.randint(1, 2), prefix="spare")
                if len(extra) == 2 and rng.random() < 0.5:  # an island: wired, but not to the GPUs
                    net.add_links(extra[0], extra[1], rate="200Gbps")
            if odd_link:
                n = net.num_nodes
                net.add_links(
                    rng.choice([-1, n, 0, 2.5, "x", None, np.int64(1), [0, 1], 2**40]),
                    rng.choice([0, 1, n - 1, "1", True, np.nan]),
                    rate=rng.choice(_RATES),
                )

    fab = Fuzzed()
    spec = fab.to_spec()
    nodes, links = spec.nodes, spec.links
    degree = np.bincount(np.concatenate([links.src, links.dst]), minlength=spec.num_nodes)
    assert (degree > 0).all(), "a node without links was accepted"
    import networkx as nx

    g = nx.MultiGraph()
    g.add_nodes_from(range(spec.num_nodes))
    g.add_edges_from(zip(links.src.tolist(), links.dst.tolist(), strict=True))
    assert nx.number_connected_components(g) == 1, "a node not wired to the GPUs was accepted"
    assert (links.rate_bps > 0).all() and (links.buffer_bytes > 0).all() and (links.latency_ps >= 0).all()
    assert len(nodes.kind) == spec.num_nodes and spec.num_gpus == servers * gps
    if spec.num_gpus < 2:
        return
    sim = rf.Simulation(
        spec,
        rf.Flows.permutation(spec.num_gpus, 1 << 14, seed=rng.randrange(3)),
        backend=rng.choice(_BACKENDS),
    )
    sim.run("20ms")
    _check_run(sim)
    res = sim.results()
    done = res.flows["end_ps"].to_numpy(zero_copy_only=False) >= 0
    assert done.all() or res.run.get("deadlock"), ("flows left unfinished", res.run)


def _fabric_params(cls) -> list[str]:
    import inspect

    names = []
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            for p in inspect.signature(klass.__init__).parameters.values():
                if p.name not in ("self", "gpus") and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                    names.append(p.name)
    return sorted(set(names))


def fabric_size(rng: random.Random, workdir: Path) -> None:
    """Every fabric class with sizes beyond what can be built (2^40 GPUs), odd sizes and a
    constructor argument set to a huge, tiny or wrong value: refused at once or built within
    the per-input time limit; an accepted fabric has the GPUs asked for."""
    cls = rng.choice(sorted(rf.topologies.FAMILIES.values(), key=lambda c: c.family))
    gpus = _odd(
        rng, [8, 16, 16, 32, 32, 64], [2**40, 2**63, 2**20 + 8, 2**21, -8, 0, 24, 1.5, "16", None], 0.4
    )
    kwargs = {}
    for name in rng.sample(_fabric_params(cls), rng.choice([0, 0, 1, 2])):
        kwargs[name] = rng.choice([2**40, 2**31, 10**9, 0, -1, 1, 2, 3, 4, 8, 64, 1.5, "8", None, True, [1]])
    fab = cls(gpus, **kwargs)
    if fab.gpus <= 4096:
        spec = fab.to_spec()
        assert spec.num_gpus == gpus


def sweep_config(rng: random.Random, workdir: Path) -> None:
    """A small sweep config (TOML) with odd fabrics, link speeds, GPU counts, workloads and
    settings, run serially. Accepted: one complete row per grid point, positive times."""
    from rfabric.sweeps import run_config

    good_fabrics = ['"FT"', '"RO"', '"TopoOpt"', '"MixNet"', '{ family = "fat_tree", oversubscription = 3 }']
    bad_fabrics = ['"XX"', '{ family = "nope" }', "3", '{ family = "fat_tree", radix = 3 }']
    fabrics = [_odd(rng, good_fabrics, bad_fabrics, 0.1) for _ in range(rng.randint(1, 2))]
    links = [_odd(rng, ['"100Gbps"', '"200Gbps"'], ['"fast"', "0", "2.5", '"1e30bps"'], 0.1)]
    gpus = [_odd(rng, ["16", "32"], ["0", "-8", "24", "2.5", '"16"', str(2**40)], 0.1)]
    size = _odd(rng, ['"64KiB"', '"256KiB"'], ['"x"', "0", "-1", '"1e30B"'], 0.1)
    pattern = _odd(rng, ['"permutation"', '"all_to_all"', '"incast"'], ['"ring"', "1"], 0.1)
    lines = [
        f"fabrics = [{', '.join(fabrics)}]",
        f"links = [{', '.join(links)}]",
        f"gpus = [{', '.join(gpus)}]",
        f'out = "{workdir / "sweep.parquet"}"',
        "progress = false",
    ]
    if rng.random() < 0.2:
        lines.append(
            rng.choice(
                ["seed = -1", 'seed = "x"', "workers = 0", "settings = { mtu_bytes = 0 }", "frobnicate = 1"]
            )
        )
    lines += ["[workloads.w.flows]", f"pattern = {pattern}", f"size = {size}"]
    path = workdir / "sweep.toml"
    path.write_text("\n".join(lines) + "\n")
    parts = workdir / "sweep.parquet.parts"
    if parts.exists():
        import shutil

        shutil.rmtree(parts)
    table = run_config(path, executor="serial")
    expect = len(fabrics) * len(links) * len(gpus)
    assert table.num_rows == expect, (table.num_rows, expect)
    assert all(table["complete"].to_pylist()), "a sweep point did not complete"
    assert all(m > 0 for m in table["makespan_ps"].to_pylist())


_ARGS = [None, 5, 2.5, True, "", b"x", [1], {"a": 1}, np.int64(4), -1, "16", object()]


def api_args(rng: random.Random, workdir: Path) -> None:
    """The file and trace entry points with arguments of the wrong type or value (a path
    that is None or a number, gpus as a string, a folder that does not exist, metadata that
    is not a dict): each is accepted (a valid value) or refused by name, never a TypeError
    from deep inside. Accepted reads equal the sample they read."""
    from rfabric.sweeps import load_config
    from rfabric.traces import Trace
    from rfabric.traces.importers import chakra, htsim, simai

    sample = ROOT / "traces" / "sample.arrow"
    good_path = {
        "read": [sample, str(sample)],
        "write": [workdir / "w.arrow", str(workdir / "w.parquet")],
    }
    junk = lambda: rng.choice(_ARGS + [workdir / "nowhere" / "x.arrow", workdir])  # noqa: E731
    call = rng.randrange(9)
    if call == 0:
        path = rng.choice(good_path["read"]) if rng.random() < 0.4 else junk()
        gpus = rng.choice([None, 16, 32] + _ARGS) if rng.random() < 0.5 else None
        fmt = rng.choice([None, "simai", "x"] + _ARGS) if rng.random() < 0.3 else None
        trace = rf.traces.read(path, gpus=gpus, format=fmt)
        assert trace.equals(rf.traces.read(sample))
    elif call == 1:
        trace = rf.traces.read(sample) if rng.random() < 0.7 else rng.choice(_ARGS)
        path = rng.choice(good_path["write"]) if rng.random() < 0.5 else junk()
        written = rf.traces.write(trace, path)
        assert rf.traces.read(written).equals(rf.traces.read(sample))
    elif call == 2:
        table = rf.traces.read(sample).table if rng.random() < 0.6 else rng.choice(_ARGS)
        meta = rng.choice([None, {}, {"model": "m"}, {"gpus": "x"}, {"nope": 1}] + _ARGS)
        gpus = rng.choice([None, 16] + _ARGS)
        Trace.from_table(table, meta, gpus=gpus)
    elif call == 3:
        rf.topologies.load(rng.choice([rng.choice(_PRESETS)] + _ARGS))
    elif call == 4:
        load_config(rng.choice([ROOT / "examples" / "sweep.toml"] + _ARGS))
    elif call == 5:
        path = workdir / "w.txt"
        path.write_text(
            "MICRO\n1\nm -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 4096 1\n" if rng.random() < 0.7 else "x"
        )
        options = {
            k: rng.choice(v + _ARGS)
            for k, v in (("gpus", [4, 8]), ("time_unit", ["ns", "us"]), ("dim0", [None, 2]))
            if rng.random() < 0.6
        }
        if "gpus" not in options and rng.random() < 0.8:
            options["gpus"] = 4
        simai.read(rng.choice([path, str(path)] * 3 + _ARGS), **options)
    elif call == 6:
        path = workdir / "w.cm"
        path.write_text("Nodes 2\nConnections 1\n0->1 start 0 size 100\n")
        fn = rng.choice([htsim.read, htsim.flows])
        target = rng.choice([path, str(path)] * 3 + _ARGS)
        fn(target) if fn is htsim.flows else fn(target, gpus=rng.choice([None, 2, 4] + _ARGS))
    elif call == 7:
        chakra.read(rng.choice(_ARGS + [workdir / "none.et"]), gpus=rng.choice([None, 2] + _ARGS))
    else:
        rf.simulate(
            rf.topologies.FatTree(16),
            rng.choice([rf.traces.read(sample), rf.Flows.permutation(16, 4096)] + _ARGS),
            backend=rng.choice(_BACKENDS + ["x", None, 3]),
            until=rng.choice([None, "1s", "x", -1, 2.5]),
        )
