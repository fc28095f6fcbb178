"""Building blocks shared by the built-in fabrics: parameter checks, ring offsets, Clos tiers.

Nothing here is public API; each fabric module documents the structure it builds with them.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import SpecError
from ..validators import boolean, integer
from .base import TopologyBuilder

__all__ = [
    "MAX_PORTS",
    "check_int",
    "check_bool",
    "check_radix",
    "default_radix",
    "round_robin_offsets",
    "totient_offsets",
    "ring_circuits",
    "add_clos_tiers",
]


#: Ports of one switch or optical device, at most (radix, uplinks, core ports, device
#: counts): 2^16, far above any device built (the default OCS has 576, a robotic patch panel
#: 1008); a larger value is a typo, and refusing it keeps the searches over port splits short.
MAX_PORTS = 1 << 16


def check_int(owner: str, name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise SpecError naming ``owner``'s parameter ``name``."""
    return integer(value, f"{owner}: {name}", lo=minimum, hi=maximum)


def group_servers(owner: str, name: str, value, servers: int, default_cap: int, gpus: int) -> int:
    """Servers per group (MixNet region, RFabric PoD): ``value``, or by default all servers up
    to ``default_cap``, else the largest divisor of ``servers`` that divides ``default_cap``.
    Raises SpecError when that default leaves one-server groups, or ``value`` does not divide."""
    if value is None:
        value = servers if servers <= default_cap else math.gcd(servers, default_cap)
        if value == 1 and servers > 1:
            raise SpecError(
                f"{owner}: no default {name} for {servers} servers (gpus={gpus}): it shares no "
                f"factor with {default_cap}, which would leave one-server groups; pass {name}="
            )
    value = check_int(owner, name, value)
    if servers % value:
        raise SpecError(f"{owner}: {name}={value} does not divide the {servers} servers of gpus={gpus}")
    return value


def check_server_matrix(owner: str, name: str, value, servers: int) -> np.ndarray:
    """``value`` as a finite, non-negative servers x servers float matrix, or SpecError
    naming ``owner``'s parameter ``name`` and the first bad cell."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise SpecError(f"{owner}: {name} must be a numeric servers x servers matrix") from None
    if arr.shape != (servers, servers):
        raise SpecError(
            f"{owner}: {name} has shape {arr.shape}, expected ({servers}, {servers}) (servers x servers)"
        )
    bad = np.argwhere(~np.isfinite(arr) | (arr < 0))
    if bad.size:
        a, b = bad[0]
        raise SpecError(f"{owner}: {name}[{a}, {b}] = {float(arr[a, b])!r} must be finite and non-negative")
    return arr


def check_bool(owner: str, name: str, value) -> bool:
    return boolean(value, f"{owner}: {name}")


def check_radix(owner: str, radix) -> int:
    if isinstance(radix, bool) or not isinstance(radix, (int, np.integer)) or radix < 4 or radix % 2:
        raise SpecError(f"{owner}: radix must be an even integer >= 4, got {radix!r}")
    if radix > MAX_PORTS:
        raise SpecError(
            f"{owner}: radix={radix} is beyond the {MAX_PORTS} ports of the largest switch modelled"
        )
    return int(radix)


def default_radix(owner: str, gpus_per_server: int, capacity, gpus: int) -> int:
    """The smallest power of two that is at least ``2 * gpus_per_server`` (so a non-blocking
    ToR holds whole servers, as FatTree chooses) and whose ``capacity(radix)`` holds ``gpus``."""
    radix = 4
    while radix < 2 * gpus_per_server:
        radix *= 2
    while capacity(radix) < gpus:
        radix *= 2
        if radix > 1024:
            raise SpecError(f"{owner}: no power-of-two radix up to 1024 fits gpus={gpus}")
    return radix


def round_robin_offsets(n: int, k: int) -> list[int]:
    """``k`` ring offsets over ``n`` nodes, nearest neighbours first: 1, 2, ..., n//2, 1, 2, ...

    Ring ``p`` joins node ``i`` to ``i + p mod n``; offsets ``1..(n-1)//2`` give every node two
    new distinct peers each, so ``k`` rings reach ``2k`` distinct peers when ``n > 2k``. Offset 1
    is always first, so the union is connected. Empty when ``n < 2``.
    """
    if n < 2:
        return []
    return [1 + m % (n // 2) for m in range(k)]


def totient_offsets(n: int, k: int) -> list[int]:
    """``k`` ring offsets over ``n`` nodes in the spirit of TopoOpt's TotientPerms.

    Candidates are the ``p`` with ``1 <= p <= n/2`` and ``gcd(p, n) = 1`` (``p`` and ``n - p``
    give the same undirected ring, and a coprime ``p`` makes the ring one Hamiltonian cycle).
    Ring ``m`` takes the unused candidate nearest to ``n ** (m / k)`` (ties: the smaller), so
    the offsets grow roughly geometrically from 1 and short paths exist between any two
    nodes. When fewer than ``k`` candidates exist (``n <= 6``), they are reused cyclically,
    which yields parallel rings. Empty when ``n < 2``.
    """
    if n < 2 or k <= 0:
        return []
    cands = [p for p in range(1, n // 2 + 1) if math.gcd(p, n) == 1]
    if len(cands) < k:
        return [cands[m % len(cands)] for m in range(k)]
    chosen: list[int] = []
    for m in range(k):
        target = n ** (m / k)
        free = [p for p in cands if p not in chosen]
        chosen.append(min(free, key=lambda p: (abs(p - target), p)))
    return chosen


def ring_circuits(device, out_links, in_links, offset: int):
    """Circuits of ring ``i -> i + offset``: node i's ``out_links[i]`` joins node
    ``(i + offset) mod n``'s ``in_links``, inside ``device`` (scalar or per-node array)."""
    out_links = np.asarray(out_links, dtype=np.int64)
    in_links = np.asarray(in_links, dtype=np.int64)
    n = len(out_links)
    return (
        np.broadcast_to(np.asarray(device, dtype=np.int64), (n,)),
        out_links,
        in_links[(np.arange(n) + offset) % n],
    )


def add_clos_tiers(
    net: TopologyBuilder, tors: np.ndarray, radix: int, rate_bps: int, pod_of_tor: np.ndarray | None = None
) -> None:
    """Non-blocking tiers above ``tors``, each of which has ``radix/2`` uplinks.

    * one ToR: nothing above it;
    * at most ``radix`` ToRs: a leaf-spine tier of ``radix/2`` spines, every ToR linked once to
      every spine (``tor-spine``), each spine using one port per ToR;
    * more: a fat-tree's upper two tiers. ToRs are grouped into pods of at most ``radix/2``
      (``pod_of_tor``, default consecutive); a pod has ``radix/2`` aggregation switches and
      ToR uplink ``j`` goes to agg ``j`` (``tor-agg``); ``radix/2`` planes of ``radix/2`` cores,
      agg ``a`` of every pod linked to each core of plane ``a`` (``agg-core``). Aggregation
      and core switches are kept whole, so bisection is full. Needs at most ``radix`` pods.
    """
    half = radix // 2
    n = len(tors)
    if n <= 1:
        return
    if n <= radix:
        spine = net.add_nodes("eps", half, prefix="spine")
        net.add_links(np.repeat(tors, half), np.tile(spine, n), rate=rate_bps, kind="tor-spine")
        return
    if pod_of_tor is None:
        pod_of_tor = np.arange(n) // half
    pod_of_tor = np.asarray(pod_of_tor, dtype=np.int64)
    pods = int(pod_of_tor.max()) + 1
    sizes = np.bincount(pod_of_tor, minlength=pods)
    if pods > radix or sizes.max() > half:
        raise SpecError(
            f"radix={radix}: {pods} pods of up to {sizes.max()} ToRs do not fit a 3-tier Clos "
            f"(at most {radix} pods of {half} ToRs)"
        )
    agg = net.add_nodes("eps", pods * half, names=[f"agg{p}.{a}" for p in range(pods) for a in range(half)])
    core = net.add_nodes("eps", half * half, names=[f"core{a}.{c}" for a in range(half) for c in range(half)])
    net.add_links(
        np.repeat(tors, half),
        agg[(pod_of_tor[:, None] * half + np.arange(half)).ravel()],
        rate=rate_bps,
        kind="tor-agg",
    )
    plane = np.arange(pods * half) % half
    net.add_links(
        np.repeat(agg, half),
        core[(plane[:, None] * half + np.arange(half)).ravel()],
        rate=rate_bps,
        kind="agg-core",
    )


def ring_row(servers, entry, exit, gpus_per_server: int) -> np.ndarray:
    """One ring order over all GPUs (a row of ``Topology.ring_orders()``): the servers in
    the order given, each visited from its GPU ``entry`` through its other GPUs (ascending) to
    its GPU ``exit``, whose NIC sends to the next server's ``entry`` GPU. ``entry`` and
    ``exit`` are local GPU indices, one for all servers or one per position in ``servers``."""
    d = gpus_per_server
    servers = np.asarray(servers, dtype=np.int64)
    entry = np.broadcast_to(np.asarray(entry, dtype=np.int64), servers.shape)
    exit = np.broadcast_to(np.asarray(exit, dtype=np.int64), servers.shape)
    rows = []
    for srv, a, b in zip(servers.tolist(), entry.tolist(), exit.tolist(), strict=True):
        if d == 1:
            local = [0]
        else:
            if a == b:
                raise ValueError("a ring must enter and leave a server through different GPUs")
            local = [a, *[j for j in range(d) if j not in (a, b)], b]
        rows.extend(srv * d + j for j in local)
    return np.array(rows, dtype=np.int64)
