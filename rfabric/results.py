"""Results of a run: documented Arrow tables and a run summary.

Result schemas are part of the API; ``FLOW_SCHEMA`` and ``LINK_SCHEMA`` below list every
column with its unit (suffixes: ``_ps`` picoseconds, ``_bytes`` bytes, ``_bps`` bit/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

__all__ = ["Results", "FLOW_SCHEMA", "LINK_SCHEMA", "RUN_KEYS"]

FLOW_SCHEMA = pa.schema([
    ("flow_id", pa.int64()),          # row in the input flow set
    ("op_id", pa.int64()),            # collective op the flow belongs to; -1 for plain flows
    ("src", pa.int32()),              # source GPU id
    ("dst", pa.int32()),              # destination GPU id
    ("size_bytes", pa.int64()),       # message bytes (payload, headers excluded)
    ("start_ps", pa.int64()),         # when the flow was released to its NIC
    ("end_ps", pa.int64()),           # when its last byte reached dst; -1 if it did not finish
    ("fct_ps", pa.int64()),           # end_ps - start_ps; -1 if it did not finish
    ("delivered_bytes", pa.int64()),  # payload bytes received by dst
    ("retransmits", pa.int64()),      # data packets sent more than once
])

LINK_SCHEMA = pa.schema([
    ("link_id", pa.int64()),            # row of the topology's link table
    ("direction", pa.int8()),           # 0: link src -> dst, 1: dst -> src
    ("kind", pa.string()),              # the link's kind label (nic, nvlink, tor-agg, ...)
    ("src", pa.int64()),                # sending node
    ("dst", pa.int64()),                # receiving node
    ("src_name", pa.string()),
    ("dst_name", pa.string()),
    ("rate_bps", pa.int64()),
    ("bytes", pa.int64()),              # bytes put on the wire, headers included
    ("packets", pa.int64()),
    ("busy_ps", pa.int64()),            # time spent serializing
    ("utilization", pa.float64()),      # busy_ps / run sim_ps
    ("max_queue_bytes", pa.int64()),    # largest egress queue seen (excludes the frame in service)
    ("max_ingress_bytes", pa.int64()),  # largest PFC ingress occupancy at the receiving switch
    ("buffer_bytes", pa.int64()),       # per-port buffer
    ("drops", pa.int64()),
    ("ecn_marks", pa.int64()),
    ("pfc_pauses", pa.int64()),         # PAUSE frames the receiving end sent back over this direction
])

#: keys always present in Results.run
RUN_KEYS = ("backend", "transport", "events", "packets", "packet_hops", "drops", "ecn_marks", "pfc_pauses",
            "flows", "flows_done", "wall_s", "sim_ps", "makespan_ps", "seed", "events_per_s",
            "packet_hops_per_s")


@dataclass
class Results:
    """What a simulation returns.

    Attributes
    ----------
    flows : pyarrow.Table
        One row per flow (``FLOW_SCHEMA``).
    links : pyarrow.Table
        One row per link direction (``LINK_SCHEMA``).
    run : dict
        Run summary: ``backend``, ``transport``, ``events``, ``packets``, ``packet_hops``
        (packets leaving a link), ``drops``, ``ecn_marks``, ``pfc_pauses``, ``flows``,
        ``flows_done``, ``wall_s`` (engine wall time, s), ``sim_ps`` (engine clock at the
        end), ``makespan_ps`` (last flow end), ``seed``, ``events_per_s``, ``packet_hops_per_s``.
    """

    flows: pa.Table
    links: pa.Table
    run: dict = field(default_factory=dict)

    @property
    def fct_ps(self) -> np.ndarray:
        return self.flows.column("fct_ps").to_numpy()

    @property
    def complete(self) -> bool:
        return self.run["flows_done"] == self.run["flows"]

    def summary(self) -> str:
        r = self.run
        fct = self.fct_ps[self.fct_ps >= 0]
        lines = [
            f"backend={r['backend']} transport={r['transport']} seed={r['seed']}",
            f"flows {r['flows_done']}/{r['flows']} done, makespan {r['makespan_ps'] / 1e6:.3f} us",
        ]
        if fct.size:
            lines.append(f"FCT us: median {np.median(fct) / 1e6:.3f}, p99 {np.percentile(fct, 99) / 1e6:.3f}, "
                         f"max {fct.max() / 1e6:.3f}")
        lines.append(f"events {r['events']:,}  packet-hops {r['packet_hops']:,}  drops {r['drops']:,}  "
                     f"pfc pauses {r['pfc_pauses']:,}  wall {r['wall_s']:.3f} s")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Results({self.run.get('flows_done')}/{self.run.get('flows')} flows, backend={self.run.get('backend')})"


def build_flow_table(log: dict, op_id: np.ndarray | None = None) -> pa.Table:
    n = len(log["src"])
    end = log["end_ps"]
    fct = np.where(end >= 0, end - log["start_ps"], -1)
    cols = {
        "flow_id": np.arange(n, dtype=np.int64),
        "op_id": op_id if op_id is not None else np.full(n, -1, dtype=np.int64),
        "src": log["src"].astype(np.int32),
        "dst": log["dst"].astype(np.int32),
        "size_bytes": log["size_bytes"],
        "start_ps": log["start_ps"],
        "end_ps": end,
        "fct_ps": fct,
        "delivered_bytes": log["delivered_bytes"],
        "retransmits": log["retransmits"].astype(np.int64),
    }
    return pa.table(cols, schema=FLOW_SCHEMA)


def build_link_table(stats: dict, spec, sim_ps: int) -> pa.Table:
    link_id = stats["link_id"].astype(np.int64)
    names = spec.nodes.name
    busy = stats["busy_ps"]
    cols = {
        "link_id": link_id,
        "direction": (stats["port_id"] % 2).astype(np.int8),
        "kind": spec.links.kind[link_id].astype(str),
        "src": stats["src"].astype(np.int64),
        "dst": stats["dst"].astype(np.int64),
        "src_name": names[stats["src"]].astype(str),
        "dst_name": names[stats["dst"]].astype(str),
        "rate_bps": stats["rate_bps"],
        "bytes": stats["tx_bytes"],
        "packets": stats["tx_packets"],
        "busy_ps": busy,
        "utilization": busy / sim_ps if sim_ps > 0 else np.zeros(len(busy)),
        "max_queue_bytes": stats["max_queue_bytes"],
        "max_ingress_bytes": stats["max_ingress_bytes"],
        "buffer_bytes": stats["buffer_bytes"],
        "drops": stats["drops"],
        "ecn_marks": stats["ecn_marks"],
        "pfc_pauses": stats["pfc_pauses_sent"],
    }
    return pa.table(cols, schema=LINK_SCHEMA)
