"""UniformController: the fabric's uniform plan over the OCS ports that work (paper baseline)."""

from __future__ import annotations

import numpy as np

from ..spec import CircuitTable
from .base import Controller


class UniformController(Controller):
    """Splits OCS ports evenly over eligible pairs, whatever the traffic (the paper's baseline).

    The fabrics' own initial plans are already the uniform splitting (``RFabric``: each
    ToR's uplink pairs spread as ring permutations over its same-rail peers and, lifted, over
    the other PoDs, paper appendix I; ``MixNet``: ring permutations over each region's
    servers; ``TopoOpt``: its TotientPerms rings), so this controller plans ``spec.circuits``
    with failed ports masked and re-planned:

    * every circuit of the uniform plan that uses a port down now is dropped;
    * the ports those circuits leave without a partner (their other end works) are joined
      again, inside each device, in link order, two at a time, never two ports whose far ends
      are the same node (a circuit from a switch back to itself carries nothing); a port left
      over stays dark.

    The plan starts from the spec's initial circuits: a fabric built to follow a demand
    (``MixNet(..., demand=D)``) starts from that demand's plan, and so does this controller;
    build it without ``demand`` for the uniform baseline. With no failures the plan is the
    fabric's initial one, so nothing changes. The plan does
    not depend on the intent: it is returned at every boundary and applied only when it
    differs from the plan in force (after a failure, or after another plan was installed).
    """

    def plan(self, intent, view):
        spec = view.spec
        base = spec.circuits
        failed = set(view.failed_ports.tolist())
        if not failed:
            return base
        a, b, ocs = base.a, base.b, base.ocs
        dead = np.isin(a, list(failed)) | np.isin(b, list(failed))
        keep = ~dead
        rows = [(int(o), int(x), int(y)) for o, x, y in zip(ocs[keep], a[keep], b[keep], strict=True)]
        # ports of dropped circuits that still work, per device, in link order
        orphans: dict[int, list[int]] = {}
        for o, x, y in zip(ocs[dead], a[dead], b[dead], strict=True):
            for port in (int(x), int(y)):
                if port not in failed:
                    orphans.setdefault(int(o), []).append(port)
        src, dst = spec.links.src, spec.links.dst
        for device, ports in sorted(orphans.items()):
            far = {p: int(dst[p] if src[p] == device else src[p]) for p in ports}
            waiting = sorted(ports)
            while len(waiting) >= 2:
                p = waiting.pop(0)
                q = next((q for q in waiting if far[q] != far[p]), None)
                if q is None:
                    continue
                waiting.remove(q)
                rows.append((device, p, q))
        if not rows:
            return CircuitTable.empty()
        o, x, y = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
        return CircuitTable.build(o, x, y)
