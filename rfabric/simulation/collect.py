"""Assembling a Simulation's Results: the run summary (``Results.run``) from the engine's
counters, the link, flow, op, stage and circuit tables, for either backend.

``ResultsAssembly`` is a mixin of ``Simulation`` (core.py), which sets the state it uses.
"""

from __future__ import annotations

import resource

import numpy as np
import pyarrow as pa

from ..errors import SimulationError
from ..results import (
    CIRCUIT_SCHEMA,
    FLOW_SCHEMA,
    LINK_CHANGE_SCHEMA,
    PACKET_ONLY_RUN_KEYS,
    Results,
    build_job_table,
    build_link_table,
    build_op_tables,
)

__all__ = ["ResultsAssembly"]


class ResultsAssembly:
    """``results()`` and its parts (methods of ``Simulation``)."""

    def results(self) -> Results:
        """The run's tables and summary so far (callable between epochs and at the end; with
        ``flows_path``, writes the buffered flow rows and the alive snapshot first)."""
        if self.backend == "flow":
            return self._flow_results()
        c = self._engine.counters()
        flows_path = None
        if self._flows_dir is not None:
            import pyarrow.parquet as pq

            self._write_flow_part()
            alive = self._flow_table(self._engine.flow_log())  # (the buffer is empty now)
            path = self._flows_dir / "alive.parquet"
            if alive.num_rows:
                pq.write_table(alive, path)
            elif path.exists():
                path.unlink()
            flow_table = FLOW_SCHEMA.empty_table()
            flows_path = str(self._flows_dir)
        elif self.record_flows:
            flow_table = self._flow_table(self._engine.flow_log())
        else:
            flow_table = FLOW_SCHEMA.empty_table()
        run = self._run_keys(c, "packet")
        wall, sim_ps, makespan = run["wall_s"], run["sim_ps"], run["makespan_ps"]
        run |= {
            "packets": int(c["packets"]),
            "packet_hops": int(c["packet_hops"]),
            "drops": int(c["drops"]),
            "no_route_drops": int(c["no_route_drops"]),
            "link_down_drops": int(c["link_down_drops"]),
            "ecn_marks": int(c["ecn_marks"]),
            "circuit_drops": int(c["circuit_drops"]),
            "circuit_reroutes": int(c["circuit_reroutes"]),
            "held": int(c["held"]),
            "dark_transmits": int(c["dark_transmits"]),
            "busy_starts": int(c["busy_starts"]),
            "packets_held": int(c["packets_held"]),
            "pfc_pauses": int(c["pfc_pauses"]),
            "packets_in_flight": int(c["packets_in_flight"]),
            "packets_delivered": int(c["packets_delivered"]),
            "packet_hops_per_s": c["packet_hops"] / wall if wall > 0 else float("nan"),
        }
        # Nothing left to happen, yet frames are stranded in the fabric: held at a switch with no
        # route to their destination (a lossless fabric holds rather than drops), or queued
        # behind PAUSEs that will never lift (a cyclic buffer dependency).
        stranded = self._engine.idle and c["packets_in_flight"] > 0 and self._engine.lossless
        run["unroutable"] = bool(stranded and c["packets_held"] > 0)
        run["deadlock"] = bool(stranded and c["packets_in_flight"] > c["packets_held"])
        links = build_link_table(self._engine.port_stats(), self.spec, makespan if makespan > 0 else sim_ps)
        res = Results(flows=flow_table, links=links, run=run, flows_path=flows_path)
        if self.sample_every_ps is not None:
            self._take_samples()
        if self._samples_dir is not None:
            res.samples_path = str(self._samples_dir)
        elif self.sample_every_ps is not None:
            res.queue_samples = pa.concat_tables([q for q, _ in self._samples])
            res.rate_samples = pa.concat_tables([r for _, r in self._samples])
        return self._finish_results(res)

    def _finish_results(self, res: Results) -> Results:
        """The parts of Results both backends fill alike: circuits, controller, ops, stages."""
        run = res.run
        circuit_log = {k: np.asarray(v, dtype=np.int64) for k, v in self._engine.circuit_log().items()}
        periods = np.asarray(self._plan_periods, dtype=np.int64)
        circuit_log["period"] = periods[circuit_log["plan_id"]]
        circuit_log["job"] = [self._plan_jobs[i] for i in circuit_log["plan_id"].tolist()]
        res.circuits = pa.table(circuit_log, schema=CIRCUIT_SCHEMA)
        # by time; equal times in the order they were scheduled (as the engine applies them)
        changes = sorted(self._link_change_log, key=lambda c: c[0])
        res.link_changes = pa.table(
            {
                "time_ps": [c[0] for c in changes],
                "link_id": [c[1] for c in changes],
                "up": [c[2] for c in changes],
            },
            schema=LINK_CHANGE_SCHEMA,
        )
        loop = self._loop
        run["controller"] = loop.name if loop else None
        run["controller_calls"] = loop.calls if loop else 0
        run["controller_ahead_calls"] = loop.ahead_calls if loop else 0
        run["controller_wall_s"] = loop.wall_s if loop else 0.0
        run["plan_changes"] = loop.changes if loop else 0
        run["rewrites"] = [r.summary() for r in self.rewritten] + list(self._private_rewrites)
        if self.trace is not None:
            res.ops, res.stages = build_op_tables(
                self.trace,
                self._engine.op_log(),
                self._engine.op_flow_stats() if self.backend == "packet" else self._flow_op_stats(),
                rewrite=self._rewrite_label,
                job_start_ps={j.name: j.start_ps for j in self.job_infos},
            )
            res.op_ranks = self.trace.table.column("ranks")
            end = res.ops["end_ps"].to_numpy()
            run["ops"] = len(end)
            run["ops_done"] = int(np.sum(end >= 0))
            run["makespan_ps"] = int(end.max()) if len(end) and np.all(end >= 0) else -1
            res.jobs = build_job_table(self.job_infos, res.ops)
        elif self.record_flows and self._flows_dir is None:  # (a Flows run: from its flow rows)
            f = res.flows
            names = {j.name: k for k, j in enumerate(self.job_infos)}
            idx = np.array([names[n] for n in f["job"].to_pylist()], dtype=np.int64)
            res.jobs = build_job_table(
                self.job_infos, None, idx, f["start_ps"].to_numpy(), f["end_ps"].to_numpy()
            )
        self._check_complete(res)
        return res

    def _check_complete(self, res: Results) -> None:
        """A run with nothing left to happen has finished every flow and op, or says why not
        (flows unroutable, a PFC deadlock, a stall of the dynamic fluid, a lossy transport's
        flows given up after their timeouts). Anything else is a
        fault of the engine, and its numbers would be silently wrong: raise, naming what is
        left."""
        run = res.run
        if not self._engine.idle or run.get("unroutable") or run.get("deadlock") or run.get("stalls"):
            return
        if self.backend == "packet" and not run["lossless"]:
            return  # (a lossy transport gives up on a peer it cannot reach: dctcp_max_timeouts)
        left = []
        if self.trace is not None and run["ops_done"] < run["ops"]:
            ops = res.ops
            end = ops["end_ps"].to_numpy()
            first = int(np.flatnonzero(end < 0)[0])
            left.append(
                f"{run['ops'] - run['ops_done']:,} of {run['ops']:,} ops unfinished (first: op "
                f"{ops['op_id'][first].as_py()}, {ops['kind'][first].as_py()} of stage "
                f"{ops['stage'][first].as_py()!r})"
            )
        if run["flows_done"] < run["flows"]:
            left.append(f"{run['flows'] - run['flows_done']:,} of {run['flows']:,} flows unfinished")
        if left:
            model = f"flow_model={self.flow_model!r}" if self.backend == "flow" else "packet"
            raise SimulationError(
                f"the {self.backend} backend ({model}) ran out of events with "
                + " and ".join(left)
                + ", though no flow is unroutable or deadlocked: an engine fault; its results "
                "would be wrong. Please report it with the fabric, trace and seed."
            )

    def _run_keys(self, c: dict, backend: str) -> dict:
        """The ``Results.run`` keys both backends fill alike, from the engine's counters."""
        sim_ps = int(self._engine.now) if self._engine.now < np.iinfo(np.int64).max else 0
        # the last flow's end, once every flow has finished
        all_done = c["flows_done"] == c["flows"] and c["flows"] > 0
        wall = self.wall_s
        return {
            "backend": backend,
            "transport": self.config.transport,
            "routing": self.routing,
            "events": int(c["events"]),
            "flows": int(c["flows"]),
            "flows_done": int(c["flows_done"]),
            "peak_live_flows": int(c["peak_live_flows"]),
            "flows_recorded": self.record_flows,
            "lossless": bool(self._engine.lossless),
            "header_bytes": int(self._engine.header_bytes),
            "wall_s": wall,
            "sim_ps": sim_ps,
            "makespan_ps": int(c["last_flow_end_ps"]) if all_done else -1,
            "seed": self.config.seed,
            "sample_every_ps": self.sample_every_ps,
            "events_per_s": c["events"] / wall if wall > 0 else float("nan"),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }

    def _flow_results(self) -> Results:
        """Results of the flow backend: the packet backend's tables and keys, with what only
        packets have (packets, hops, queues, drops, ECN marks, PFC pauses, retransmits) null,
        and the flow model's own counters added (docs/explanation/flow-backend.md)."""
        c = self._engine.counters()
        run = self._run_keys(c, "flow")
        sim_ps, makespan = run["sim_ps"], run["makespan_ps"]
        if self.flow_model == "dynamic":
            return self._fluid_results(c, run, sim_ps, makespan)
        run |= {
            # the flow model's own counters
            "recomputes": int(c["recomputes"]),
            "rate_updates": int(c["rate_updates"]),
            "subflows": int(c["subflows"]),
            "max_component": int(c["max_component"]),
            "component_subflows": int(c["component_subflows"]),
            "blocked_subflows": int(c["blocked"]),
            "reroutes": int(c["reroutes"]),
            "quiet_ends": int(c["quiet_ends"]),
            "handoffs": int(c["handoffs"]),
            # flows that can make no progress: their paths end at a failed link or dark circuit
            "unroutable": bool(self._engine.idle and c["blocked_now"] > 0),
        }
        for key in PACKET_ONLY_RUN_KEYS:
            run[key] = None
        links = build_link_table(self._engine.port_stats(), self.spec, makespan if makespan > 0 else sim_ps)
        flows = self._flow_table(self._engine.flow_log()) if self.record_flows else FLOW_SCHEMA.empty_table()
        res = Results(flows=flows, links=links, run=run)
        return self._finish_results(res)

    def _fluid_results(self, c: dict, run: dict, sim_ps: int, makespan: int) -> Results:
        """Results of ``flow_model="dynamic"``: the flow backend's tables, with the PFC pauses
        and (expected) ECN marks it models, and its own counters
        (docs/explanation/flow-dynamic.md)."""
        run |= {
            "flow_model": "dynamic",
            "flow_step_ps": int(self._engine.step),
            "plans": int(c["plans"]),
            "steps": int(c["steps"]),
            "jumps": int(c["jumps"]),
            "stepped_ps": int(c["stepped_ps"]),
            "jumped_ps": int(c["jumped_ps"]),
            "lane_hops": int(c["lane_hops"]),
            "cnps": int(c["cnps"]),
            "lanes": int(c["lanes"]),
            "max_lanes": int(c["max_lanes"]),
            "blocked_subflows": int(c["blocked"]),
            "reroutes": int(c["reroutes"]),
            "stalls": int(c["stalls"]),
            "unroutable": bool(self._engine.idle and c["blocked_now"] > 0),
        }
        for key in PACKET_ONLY_RUN_KEYS:
            run[key] = None
        run["pfc_pauses"] = int(c["pauses"])
        run["ecn_marks"] = int(round(c["ecn_marks"]))
        links = build_link_table(self._engine.port_stats(), self.spec, makespan if makespan > 0 else sim_ps)
        flows = self._flow_table(self._engine.flow_log()) if self.record_flows else FLOW_SCHEMA.empty_table()
        res = Results(flows=flows, links=links, run=run)
        return self._finish_results(res)

    def _flow_op_stats(self) -> dict:
        """Per-op flow totals of the flow backend (``Engine.op_flow_stats`` of the packet
        engine), folded in C++ as each flow finishes: flows, delivered bytes and the longest
        FCT; retransmits, resent and dropped bytes are packet-only (null)."""
        n = self.trace.num_ops
        return {
            **self._engine.op_flow_stats(),
            **{k: pa.nulls(n, pa.int64()) for k in ("retransmits", "resent_bytes", "dropped_bytes")},
        }
