"""Connected components of a graph given as edge arrays, in numpy (no scipy needed to
validate a spec)."""

from __future__ import annotations

import numpy as np

__all__ = ["connected_components"]


def connected_components(n: int, src, dst) -> np.ndarray:
    """Label of each of the ``n`` nodes, edges ``src[i] -- dst[i]`` undirected: two nodes
    share a label exactly when a path joins them. A label is the smallest node id of its
    component.

    Union by hooking each root onto the smallest root it has an edge to, then pointer
    jumping until every node points at its root; each round leaves fewer roots, and parents
    only ever decrease, so no cycle forms."""
    parent = np.arange(n, dtype=np.int64)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    while True:
        while True:  # point every node at its root
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
        ru, rv = parent[src], parent[dst]
        cross = ru != rv
        if not cross.any():
            return parent
        hi = np.maximum(ru[cross], rv[cross])
        lo = np.minimum(ru[cross], rv[cross])
        np.minimum.at(parent, hi, lo)
