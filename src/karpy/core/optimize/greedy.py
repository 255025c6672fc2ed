"""Open node configurations from the LP's solution until every pod of a problem is placed.

For every kind of node the pods the LP put on such a node are placed first, then the
remaining pods first-fit decreasing while they fit and their requirements stay
compatible; the configuration whose pods are worth most per dollar (worth = the LP's dual
price of each pod) is opened, as many times as the remaining pods allow.

Pure: no I/O, no clock. Used by :mod:`karpy.core.optimize.repack`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from karpy.core.optimize import bound

__all__ = ["Config", "open_configs"]


@dataclass(slots=True)
class Config:
    kind: int
    counts: np.ndarray  # pods per group on one node
    copies: int


def open_configs(problem: bound.Problem, solution: bound.Solution) -> list[Config] | None:
    """Open node configurations until every pod is placed (None when that gets stuck)."""
    groups, kinds = problem.groups, problem.kinds
    n_g, n_k = len(groups), len(kinds)
    res = problem.resources
    req = np.array([[g.requests.get(r, 0) for r in res] for g in groups], dtype=np.int64).reshape(
        n_g, len(res)
    )
    alloc = np.array([[max(k.allocatable.get(r, 0), 0) for r in res] for k in kinds], dtype=np.int64).reshape(
        n_k, len(res)
    )
    price = np.array([k.price for k in kinds])
    once = np.array([bool(k.node) for k in kinds], dtype=bool)
    allowed = np.zeros((n_k, n_g), dtype=bool)
    for g, ks in enumerate(problem.allowed):
        allowed[list(ks), g] = True
    # signatures that may share a node: their requirements intersect
    sigs = sorted({g.signature for g in groups})
    sig_pos = {s: i for i, s in enumerate(sigs)}
    reqs = {g.signature: bound.alternatives(g.pods[0])[0] for g in groups}
    clash = np.array([[not reqs[a].overlaps(reqs[b]) for b in sigs] for a in sigs], dtype=bool).reshape(
        len(sigs), len(sigs)
    )
    group_sig = np.array([sig_pos[g.signature] for g in groups])
    # worth of one pod: its LP dual, or (degenerate duals) a tiny share of its cheapest node
    duals = np.array(solution.duals) if solution.duals else np.zeros(n_g)
    cheapest = np.array([price[list(problem.allowed[g])].min() for g in range(n_g)])
    worth = np.where(duals > 1e-12, duals, 1e-6 * cheapest)
    # per-node targets from the LP: z_{g,k} / x_k pods of g on each node of kind k
    target = np.zeros((n_k, n_g), dtype=np.int64)
    for (g, k), pods in solution.z.items():
        if solution.x[k] > 1e-9:
            target[k, g] = math.floor(pods / solution.x[k] + 1e-9)
    remaining = np.array([len(g.pods) for g in groups], dtype=np.int64)
    configs: list[Config] = []
    big = np.iinfo(np.int64).max
    while remaining.any():
        room = alloc.copy()
        fill = np.zeros((n_k, n_g), dtype=np.int64)
        placed = np.zeros((n_k, len(sigs)), dtype=bool)
        for phase in (0, 1):
            for g in range(n_g):
                if remaining[g] == 0:
                    continue
                ok = allowed[:, g] & ~(placed & clash[group_sig[g]]).any(axis=1)
                need = req[g]
                fit = np.full(n_k, big, dtype=np.int64)
                for r in np.flatnonzero(need > 0):
                    fit = np.minimum(fit, room[:, r] // need[r])
                want = remaining[g] - fill[:, g]
                if phase == 0:
                    want = np.minimum(want, target[:, g])
                n = np.where(ok, np.clip(np.minimum(fit, want), 0, None), 0)
                if not n.any():
                    continue
                fill[:, g] += n
                room -= n[:, None] * need[None, :]
                placed[n > 0, group_sig[g]] = True
        value = fill @ worth
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(price > 0, value / price, np.where(value > 0, np.inf, 0.0))
        best = int(np.argmax(score))
        if value[best] <= 0:
            return None
        counts = fill[best].copy()
        used = counts > 0
        copies = 1 if once[best] else max(int((remaining[used] // counts[used]).min()), 1)
        if once[best]:
            allowed[best] = False  # room already paid for: filled once
        configs.append(Config(best, counts, copies))
        remaining -= counts * copies
    return configs
