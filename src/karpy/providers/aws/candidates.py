"""The instance types a launch offers EC2, filtered as upstream's ``instance/filter`` does.

:func:`candidates`: of a NodeClaim's instance-type options, those that fit its requests and have an
available offering compatible with its requirements; GPU, accelerator and metal types dropped
unless nothing else is left; when both spot and on-demand are allowed, spot offerings dearer than
the cheapest on-demand one dropped (both filters skipped with ``minValues``, as upstream); then the
:data:`MAX_INSTANCE_TYPES` cheapest. :func:`capacity_type` is the first of reserved, spot and
on-demand that some candidate offers. Pure; used by :mod:`karpy.providers.aws.provider`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.requirements import Requirements
from karpy.model.resources import Resources

__all__ = ["MAX_INSTANCE_TYPES", "candidates", "capacity_type", "exotic"]

MAX_INSTANCE_TYPES = 60  # upstream truncates a launch to the 60 cheapest types
_GPU_LABELS = ("karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-accelerator-count")
_CT_ORDER = (labels.CAPACITY_TYPE_RESERVED, labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND)


def exotic(it: InstanceType) -> bool:
    """GPU, accelerator or bare-metal types: offered only when nothing else fits."""
    return any(key in it.labels for key in _GPU_LABELS) or "metal" in it.name.split(".", 1)[-1]


def candidates(
    reqs: Requirements,
    requests: Resources,
    offered: Sequence[InstanceType],
    *,
    by_name: Mapping[str, InstanceType] | None = None,
) -> list[InstanceType]:
    """The types that can launch a claim of ``reqs`` and ``requests`` (``by_name`` indexes ``offered``
    so that a claim listing its options is looked up, not walked over the whole catalog)."""
    named = reqs.get(labels.INSTANCE_TYPE)
    if by_name is not None and named is not None and not named.complement:
        offered = [by_name[n] for n in sorted(named.values) if n in by_name]
    fits: list[tuple[float, InstanceType]] = []
    for it in offered:
        if not it.requirements.overlaps(reqs) or not requests.fits(it.allocatable):
            continue
        cheapest = it.cheapest_offering(reqs)
        if cheapest is not None:
            fits.append((cheapest.price, it))
    if not reqs.has_min_values():
        fits = [(p, it) for p, it in fits if not exotic(it)] or fits
        fits = _spot_no_dearer_than_on_demand(reqs, fits)
    fits.sort(key=lambda pair: (pair[0], pair[1].name))
    return [it for _, it in fits[:MAX_INSTANCE_TYPES]]


def _spot_no_dearer_than_on_demand(
    reqs: Requirements, fits: list[tuple[float, InstanceType]]
) -> list[tuple[float, InstanceType]]:
    ct = reqs.get(labels.CAPACITY_TYPE)
    both = ct is None or (ct.has(labels.CAPACITY_TYPE_SPOT) and ct.has(labels.CAPACITY_TYPE_ON_DEMAND))
    if not both:
        return fits
    on_demand = [
        o.price
        for _, it in fits
        for o in it.offerings
        if o.available and o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND and o.compatible(reqs)
    ]
    if not on_demand:
        return fits
    ceiling = min(on_demand)
    out: list[tuple[float, InstanceType]] = []
    for price, it in fits:
        kept = tuple(
            o
            for o in it.offerings
            if o.capacity_type != labels.CAPACITY_TYPE_SPOT or o.price <= ceiling or not o.available
        )
        if len(kept) != len(it.offerings):
            it = dataclasses.replace(it, offerings=kept)
        if it.cheapest_offering(reqs) is not None:
            out.append((price, it))
    return out


def capacity_type(reqs: Requirements, types: Sequence[InstanceType]) -> str:
    """Reserved, else spot, else on-demand: the first some type offers (available, compatible)."""
    for ct in _CT_ORDER:
        for it in types:
            if any(o.available and o.capacity_type == ct and o.compatible(reqs) for o in it.offerings):
                return ct
    return labels.CAPACITY_TYPE_ON_DEMAND
