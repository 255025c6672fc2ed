"""DaemonSet-aware instance sizing: the NodePool opt-in ``karpy.sh/sizing: usable-price``.

Upstream launches a new NodeClaim on its cheapest fitting instance type. With DaemonSets
costing a fixed share of every node (say 0.6 vCPU), that is often a small type whose usable
part is a poor deal: a 2-vCPU type keeps 1.3 vCPU for pods, a 4-vCPU type at twice the price
keeps 3.3. With ``usable-price`` the claim's options are ranked by **price per usable
resource** instead, and the claim launches the best-ranked type.

- **Usable** resources of a type: its allocatable (capacity minus kubelet and system reserved)
  minus the DaemonSet overhead on that type (both as the scheduler has them in the template's
  :class:`~karpy.core.scheduling.typeindex.TypeIndex`).
- **Measure**: the bottleneck of the claim's own pods. ``units`` = how many times the claim's
  summed pod requests fit the usable resources, taken over every resource the pods request
  (CPU, memory, pod slots, GPUs, ...) and keeping the smallest; the score is the cheapest
  compatible offering's price divided by ``units`` (dollars per hour per "claim's worth" of
  usable room). CPU-heavy pods are thus ranked by price per usable vCPU, memory-heavy pods by
  price per usable GiB.
- **Fill floor**: prices grow about linearly with size while the DaemonSet overhead is fixed,
  so the largest type always has the best price per usable resource. Only types the claim's
  pods fill to at least :data:`MIN_FILL` (``units <= 1 / MIN_FILL``) compete, plus the
  cheapest fitting type (upstream's choice) always: a claim is never sized beyond four times
  what its pods need, and a consolidation replacement of an emptied big node can still be small.
- **Margin**: a type other than the cheapest fitting one wins only when its score is at least
  :data:`MARGIN` (10%) below the cheapest's, so a near-tie keeps upstream's choice. With the fill
  floor this bounds the price: the type launched never costs more than
  ``(1 - MARGIN) / MIN_FILL`` (3.6) times the cheapest fitting type.
- **Ties** (scores equal within one part in 10^9) go to the cheaper type, then upstream's order
  (price, then name). Pods that request nothing leave the default order.

The ranking sees only the claim's own pods, not the ones still to come: a claim of one small pod
(filling less than a quarter of the next size up) stays on the cheapest type; the saving comes
when claims carry a few pods at a time and the room left on a bigger node takes the next ones.

:func:`sized` turns the price order into the options the NodeClaim carries: the best type
first, then only the types that cost more than it (in price order), so every launch rule that
picks the cheapest allowed option (:func:`karpy.core.scheduling.launch.choose`: ``karpy plan``,
the kwok provider of the operator and the simulator) launches the best type, and falls back to
pricier ones only when its offerings are unavailable. Used by
:class:`~karpy.core.scheduling.finalize.Finalizer`. Pure: no I/O.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from karpy.core.scheduling.typeindex import Options, TypeIndex
from karpy.model.objects import SIZING_USABLE_PRICE, NodePool
from karpy.model.requirements import Requirements
from karpy.model.resources import Resources

__all__ = ["MARGIN", "MIN_FILL", "TIE", "best_position", "enabled", "sized", "units"]

MIN_FILL = 0.25  # a competing type holds the claim's pods at most 1 / MIN_FILL times
MARGIN = 0.10  # a type other than the cheapest must be this much cheaper per usable resource
TIE = 1e-9  # relative difference below which two scores are equal


def enabled(pool: NodePool) -> bool:
    """True when the NodePool opted in with ``karpy.sh/sizing: usable-price``."""
    return pool.sizing() == SIZING_USABLE_PRICE


def units(index: TypeIndex, options: Options, demand: Resources) -> npt.NDArray[np.float64] | None:
    """Per option: how many times ``demand`` fits its usable resources (the bottleneck resource);
    None when ``demand`` requests nothing or the index cannot hold its quantities."""
    if not index.usable:
        return None
    wanted = [(index.columns.get(name), value) for name, value in demand.items() if value > 0]
    if not wanted:
        return None
    out = np.full(len(options), np.inf)
    for column, value in wanted:
        if column is None:  # no type has this resource: none of them fits
            return np.zeros(len(options))
        usable = index.alloc[options, column] - index.overhead[options, column]
        out = np.minimum(out, np.maximum(usable, 0) / float(value))
    return out


def best_position(index: TypeIndex, ordered: Options, reqs: Requirements, demand: Resources) -> int | None:
    """The position in ``ordered`` (options by price, then name) of the type the claim launches:
    the best price per usable resource among the types within the fill floor, when it beats the
    cheapest fitting type's (position 0) by at least :data:`MARGIN`; 0 when none does; None when
    the pods request nothing (the default order stands)."""
    if len(ordered) < 2:
        return None
    fits = units(index, ordered, demand)
    if fits is None:
        return None
    prices = index.cheapest(reqs)[ordered]
    counts, costs = fits.tolist(), prices.tolist()
    if counts[0] <= 0 or not np.isfinite(costs[0]):
        return None
    bar = costs[0] / counts[0] * (1.0 - MARGIN)  # what a bigger type must beat
    best, best_score = 0, np.inf
    for pos in range(1, len(counts)):
        count, price = counts[pos], costs[pos]
        if count <= 0 or count > 1.0 / MIN_FILL or not np.isfinite(price):
            continue  # does not fit, or too big for these pods
        score = price / count
        if score <= bar and score < best_score * (1.0 - TIE):
            best, best_score = pos, score
    return best


def sized(index: TypeIndex, ordered: Options, reqs: Requirements, demand: Resources) -> Options:
    """``ordered`` (by price, then name) as the claim's options under usable-price sizing: the
    best type first, then the types priced above it, in order. ``ordered`` itself when the
    default order stands (the best type is the cheapest, or the pods request nothing)."""
    pos = best_position(index, ordered, reqs, demand)
    if not pos:
        return ordered
    prices = index.cheapest(reqs)[ordered]
    best = ordered[pos]
    pricier = ordered[prices > prices[pos]]
    return np.concatenate((np.array([best], dtype=np.intp), pricier))
