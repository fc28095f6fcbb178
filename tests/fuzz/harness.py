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


SURFACES = {
    "trace_file": trace_file,
    "import_file": import_file,
    "unit_string": unit_string,
    "flows_args": flows_args,
    "topology_toml": topology_toml,
    "link_calls": link_calls,
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
