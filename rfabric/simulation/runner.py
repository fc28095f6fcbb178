"""``simulate()``: build a Simulation, schedule its failures, run it to the end (or to
``until``) and return its Results, in one call.
"""

from __future__ import annotations

from ..config import EngineConfig
from ..errors import SpecError
from ..results import Results
from .core import Simulation

__all__ = ["simulate"]


def simulate(
    topology,
    workload,
    *,
    transport: str | None = None,
    backend: str = "packet",
    seed: int | None = None,
    mtu_bytes=None,
    progress: bool = False,
    until=None,
    config: EngineConfig | None = None,
    failures=(),
    controller=None,
    record_flows: bool | None = None,
    flows_path=None,
    sample_every=None,
    samples_path=None,
    rewrites="own",
    **settings,
) -> Results:
    """Simulate ``workload`` on ``topology`` and return Results.

    Parameters
    ----------
    topology : Topology or NetworkSpec
    workload : Flows or rfabric.traces.Trace
        Point-to-point flows, or a trace of collective ops (then ``Results.ops`` and
        ``Results.stages`` are filled).
    transport : str, optional
        ``"roce"`` or ``"dctcp"``; default the config's (EngineConfig: ``"roce"``).
    backend : str
        ``"packet"`` (default: every frame through queues, PFC and the transport) or
        ``"flow"`` (max-min fair rates over the same paths, collective executor and
        controllers; orders of magnitude fewer events; packet-only results are null: README
        "Flow-level backend" says what it models and how close it is).
    seed : int, optional
        Same seed, same results; default the config's (EngineConfig: 1).
    mtu_bytes : int or str, optional
        Frame size including headers; default the config's (EngineConfig: 9216).
    progress : bool
        Show a progress bar on stderr (flows done, simulated time, event rate).
    until : time, optional
        Stop at this simulated time instead of running to completion.
    config : EngineConfig, optional
        Base configuration. ``transport``, ``seed``, ``mtu_bytes`` and ``settings`` override
        its fields only when given; left out, the config's values stand.
    failures : iterable of (link, time)
        Failure schedule: link rows that go down at the given times (see
        ``Simulation.fail_link``; ``spec.nic_link(gpu)`` finds a GPU's NIC link).
    controller : rfabric.controllers.Controller, optional
        Circuit controller called at each communication-period boundary (see Simulation).
    record_flows : bool, optional
        Keep the per-flow table ``Results.flows``: default True for Flows, False for a trace
        (see Simulation).
    flows_path : str or path, optional
        Stream the per-flow rows to Parquet files in this directory instead (see Simulation).
    sample_every : time, optional
        Sample queues and flow goodputs at every multiple of this period (``"10us"``; packet
        backend; off by default): ``Results.queue_samples`` and ``Results.rate_samples``.
    samples_path : str or path, optional
        Stream those samples to Parquet files in this directory instead (see Simulation).
    rewrites : "own", "none" or list of rfabric.rewrites.Rewrite
        Workload rewrites applied to a trace before the run, at the fabric's locality (see
        Simulation; docs/fairness.md).
    """
    given = {"transport": transport, "seed": seed, "mtu_bytes": mtu_bytes}
    settings.update({k: v for k, v in given.items() if v is not None})
    sim = Simulation(
        topology,
        workload,
        config,
        controller=controller,
        backend=backend,
        record_flows=record_flows,
        flows_path=flows_path,
        sample_every=sample_every,
        samples_path=samples_path,
        rewrites=rewrites,
        **settings,
    )
    try:
        items = list(failures)
    except TypeError:
        raise SpecError(f"failures: expected an iterable of (link, time) pairs, got {failures!r}") from None
    for item in items:
        try:
            link, at = item
        except (TypeError, ValueError):
            raise SpecError(f"failures: expected (link, time) pairs, got {item!r}") from None
        sim.fail_link(link, at)
    sim.run(until, progress=progress)
    return sim.results()
