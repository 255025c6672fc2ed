"""Relaxing a pod's soft constraints one step at a time, in Karpenter's order.

1. drop the first required node-affinity term while more than one ORed term remains;
2. drop the heaviest preferred pod-affinity term;
3. drop the heaviest preferred pod-anti-affinity term;
4. drop the heaviest preferred node-affinity term (the next one becomes "required");
5. drop one ``ScheduleAnyway`` topology spread constraint;
6. if some NodePool has a ``PreferNoSchedule`` taint, tolerate ``PreferNoSchedule``.

``relax`` returns the relaxed pod and a description of the step, or None when nothing
is left to relax. Called by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

import dataclasses

from karpy.model.objects import Pod
from karpy.model.taints import PREFER_NO_SCHEDULE, Toleration

__all__ = ["PREFER_NO_SCHEDULE_TOLERATION", "relax"]

PREFER_NO_SCHEDULE_TOLERATION = Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)


def _drop_heaviest(items: tuple[object, ...]) -> tuple[object, ...]:
    index = max(range(len(items)), key=lambda i: (getattr(items[i], "weight", 0), -i))
    return items[:index] + items[index + 1 :]


def relax(pod: Pod, *, prefer_no_schedule_pools: bool) -> tuple[Pod, str] | None:
    if len(pod.required_terms) > 1:
        return dataclasses.replace(
            pod, required_terms=pod.required_terms[1:]
        ), "dropped required node affinity term"
    if pod.affinity_preferred:
        rest = _drop_heaviest(pod.affinity_preferred)
        return dataclasses.replace(pod, affinity_preferred=rest), "dropped preferred pod affinity"  # type: ignore[arg-type]
    if pod.anti_affinity_preferred:
        rest = _drop_heaviest(pod.anti_affinity_preferred)
        return (
            dataclasses.replace(pod, anti_affinity_preferred=rest),  # type: ignore[arg-type]
            "dropped preferred pod anti-affinity",
        )
    if pod.preferred_terms:
        rest = _drop_heaviest(pod.preferred_terms)
        return dataclasses.replace(pod, preferred_terms=rest), "dropped preferred node affinity"  # type: ignore[arg-type]
    for index, tsc in enumerate(pod.spread):
        if tsc.when_unsatisfiable == "ScheduleAnyway":
            rest_spread = pod.spread[:index] + pod.spread[index + 1 :]
            return dataclasses.replace(
                pod, spread=rest_spread
            ), f"dropped ScheduleAnyway spread on {tsc.topology_key}"
    if prefer_no_schedule_pools and PREFER_NO_SCHEDULE_TOLERATION not in pod.tolerations:
        return (
            dataclasses.replace(pod, tolerations=(*pod.tolerations, PREFER_NO_SCHEDULE_TOLERATION)),
            "tolerated PreferNoSchedule taints",
        )
    return None
