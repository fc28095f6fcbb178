"""Type stubs for rfabric's compiled engine (private: use the rfabric package).

Units: time in int picoseconds, sizes in int bytes, rates in int bit/s.
"""

from typing import Any, type_check_only

import numpy as np
from numpy.typing import NDArray

debug_checks: bool  # built with RF_DCHECK live (the RF_SANITIZE debug build)
MAX_TIME_PS: int  # the engine's horizon (engine::kHorizon), equal to rfabric.units.MAX_TIME_PS

def transports() -> list[str]: ...
def transport_traits() -> dict[str, dict[str, int | bool]]: ...
def config_fields() -> dict[str, int | float | bool | str]: ...
def op_kinds() -> list[str]: ...
def op_algorithms() -> list[str]: ...
def op_protocols() -> list[str]: ...
def check_event_queue(seed: int, operations: int) -> int:
    """Self-check of the calendar queue against a reference heap; returns disagreements (0)."""

@type_check_only
class _Simulation:
    """The calls Engine and FlowEngine answer alike (csrc/bindings/bind_simulator.hpp binds
    them once for both); not a class at run time."""

    def __init__(self, spec: dict[str, object], config: dict[str, object]) -> None: ...
    def add_flows(
        self,
        src: NDArray[np.uint32],
        dst: NDArray[np.uint32],
        size_bytes: NDArray[np.int64],
        start_ps: NDArray[np.int64],
    ) -> None: ...
    def boundary(self) -> dict[str, NDArray[np.generic]]:
        """Pending boundary: ``op`` (int64 rows), ``period`` (int32), ``start_ps`` (int64,
        when each op starts sending), ``ended`` (int32, periods that went idle: loaded with
        period_ends); all empty when none is pending."""
    def resume(self) -> None:
        """Clear the pending boundary so that run() goes on."""
    def active_periods(self) -> NDArray[np.int32]:
        """Periods with an op running or ready (deps done, not finished), sorted; loaded with
        boundaries only."""
    def op_flows(
        self, ops: NDArray[np.int64], algorithm: int | NDArray[np.int64] = -1
    ) -> dict[str, NDArray[np.generic]]:
        """Bytes each op (rows) would send per directed GPU pair, by a dry run of its
        algorithm on the current paths: ``op``, ``src``, ``dst``, ``size_bytes``, and
        ``counts`` (the rows of each op asked, in order). ``algorithm`` >= 0 (a code of the
        trace schema's ALGORITHMS) runs that one instead; an array gives one per op (-1: its
        own). The ops run as one batch sharing the tuner's path caches."""
    def apply_plan(
        self, ocs: NDArray[np.uint32], a: NDArray[np.uint32], b: NDArray[np.uint32], dark_ps: int
    ) -> None:
        """Replace the circuit plan now, at once; a bad plan raises and changes nothing."""
    def schedule_plan(
        self, at_ps: int, ocs: NDArray[np.uint32], a: NDArray[np.uint32], b: NDArray[np.uint32], dark_ps: int
    ) -> None: ...
    def set_link_state(self, link: int, time_ps: int, up: bool) -> None: ...
    def run(self, until: int = ..., max_events: int = 0) -> int:
        """Run events up to time `until` (ps) or `max_events`; releases the GIL."""
    @property
    def now(self) -> int: ...
    def peek(self) -> int: ...
    @property
    def events_processed(self) -> int: ...
    @property
    def pending(self) -> int: ...
    @property
    def idle(self) -> bool: ...
    @property
    def flows_done(self) -> int: ...
    @property
    def ops_done(self) -> int: ...
    @property
    def num_gpus(self) -> int: ...
    @property
    def num_links(self) -> int: ...
    @property
    def lossless(self) -> bool: ...
    @property
    def header_bytes(self) -> int: ...
    record_flows: bool
    def op_log(self) -> dict[str, NDArray[np.int64]]: ...
    def op_ends(self, rows: NDArray[np.uint32]) -> NDArray[np.int64]: ...
    def op_algorithms_ran(self, rows: NDArray[np.uint32]) -> NDArray[np.int32]: ...
    def start_bounds(self, rows: NDArray[np.uint32], dur: NDArray[np.int64], now: int) -> NDArray[np.int64]:
        """A lower bound of each op's start (ps, workload rows): a started op its start, else
        its compute gap after its dependencies' end bounds (a finished op its end; an
        unfinished one no earlier than now, nor than its start bound plus dur[op])."""
    def circuit_log(self) -> dict[str, NDArray[np.generic]]: ...
    def current_circuits(self) -> NDArray[np.uint32]: ...
    def current_circuits_lit_at(self) -> NDArray[np.int64]:
        """When each circuit of current_circuits() carries light (ps)."""
    def trace_path(self, src: int, dst: int, flow_hash: int = 0) -> list[int]: ...

class Engine(_Simulation):
    """One packet-level simulation: network, flows or a collective workload, event loop."""

    def load_workload(
        self,
        arrays: dict[str, object],
        channels: int = 8,
        chunk_bytes: int = 524288,
        rings: NDArray[np.uint32] | None = None,
        boundaries: str = "none",
        period_ends: bool = False,
        nccl_model: bool = True,
        protocol: str = "auto",
    ) -> None:
        """boundaries: 'none', 'period' (run() returns when an op of a new period becomes
        ready) or 'op' (when any op becomes ready); see boundary() and resume().
        period_ends (with boundaries): also return when a period goes idle."""
    def counters(self) -> dict[str, int]: ...
    def event_counts(self) -> NDArray[np.uint64]: ...
    def flow_log(self) -> dict[str, NDArray[np.generic]]:
        """Rows recorded and not yet taken, then the flows alive now, sorted by flow_id
        (with ideal_fct_ps: the flow alone on its idle path, frame by frame)."""
    def take_flow_log(self) -> dict[str, NDArray[np.generic]]:
        """Move out the rows of the flows that retired since the last call."""
    @property
    def flow_log_rows(self) -> int: ...
    def op_flow_stats(self) -> dict[str, NDArray[np.int64]]:
        """Per op: totals of its retired flows (flows, retransmits, bytes, max_fct_ps)."""
    def delivered_bytes(self) -> NDArray[np.int64]: ...
    def payload_in_flight(self) -> NDArray[np.int64]: ...
    def flow_rates(self) -> NDArray[np.float64]: ...
    def port_stats(self) -> dict[str, NDArray[np.generic]]: ...
    def enable_sampling(self, period_ps: int) -> None:
        """Sample queue depths and flow rates every period_ps from now on; once."""
    def take_samples(self) -> dict[str, NDArray[np.generic]]:
        """Move out the samples so far (queue_* and rate_* columns; empty when off)."""

class FlowEngine(_Simulation):
    """One flow-level simulation (``backend="flow"``): max-min fair rates over the same
    forwarding, collective executor, control-loop boundaries and circuits as Engine, which it
    answers by the same names but for the packet-only ones (event_counts, payload_in_flight).
    Its flow_log has sent_ps and no retransmission columns; port_stats only link_id, src, dst,
    rate_bps, tx_bytes (wire bytes) and busy_ps; counters the flow model's own (recomputes,
    rate_updates, subflows, max_component, component_subflows, blocked, reroutes, quiet_ends,
    handoffs, finishes_cancelled, stale_finishes, active_subflows, blocked_now)."""

    def load_workload(
        self,
        arrays: dict[str, object],
        channels: int = 8,
        chunk_bytes: int = 524288,
        rings: NDArray[np.uint32] | None = None,
        boundaries: str = "none",
        period_ends: bool = False,
        ring_slices: int = 0,
        merge_channels: bool = True,
        nccl_model: bool = True,
        protocol: str = "auto",
        pipeline_slices: int = 0,
    ) -> None:
        """As Engine.load_workload; ring_slices: the most slices a ring step is cut into
        (0: slices of chunk_bytes, as the packet engine); merge_channels: a ring collective's
        channels with the same edges and paths run as one flow of n copies per message;
        pipeline_slices: the most streamed pieces between a pipeline's first and last chunk
        (0: a flow per chunk)."""
    def counters(self) -> dict[str, int]: ...
    def flow_log(self) -> dict[str, NDArray[np.generic]]:
        """Per-flow columns (with ideal_fct_ps: the flow model's lone time on its path)."""
    def op_flow_stats(self) -> dict[str, NDArray[np.int64]]:
        """Per op: totals of its finished flows (flows, delivered_bytes, max_fct_ps)."""
    def delivered_bytes(self) -> NDArray[np.int64]:
        """Payload bytes per flow that have left the source by now (the fluid's progress)."""
    def flow_rates(self) -> NDArray[np.float64]:
        """Current max-min rate per flow slot, bit/s of wire bytes (0 when not sending)."""
    def sending_flows(self) -> dict[str, NDArray[np.generic]]:
        """The messages sending now, one row each (a flow of n copies is n rows), by flow_id:
        flow_id, src, dst, hash, rate_bps (max-min, bit/s of wire bytes)."""
    def set_local_min(self, n: int) -> None:
        """Subflows sending from which a lossy run's max-min recomputation refills only the
        flows a change can reach before the whole component (default 4096; 0: always). For
        tests."""
    def port_stats(self) -> dict[str, NDArray[np.generic]]: ...

class Forwarding:
    """A fabric's forwarding state (topology, channels, routing tables) without a simulation."""

    def __init__(self, spec: dict[str, Any], config: dict[str, Any]) -> None: ...
    def path(self, src: int, dst: int, flow_hash: int = 0) -> NDArray[np.uint32]: ...
    def path_cost(self, src: int, dst: int) -> tuple[int, int]: ...
    def set_link_state(self, link: int, up: bool) -> None: ...
    def set_plan(
        self, ocs: NDArray[np.uint32], a: NDArray[np.uint32], b: NDArray[np.uint32]
    ) -> tuple[int, int]: ...
    def current_circuits(self) -> NDArray[np.uint32]: ...
    def channels(self) -> dict[str, NDArray[np.generic]]: ...
    @property
    def num_gpus(self) -> int: ...
    @property
    def num_links(self) -> int: ...
