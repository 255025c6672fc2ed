"""The ``scheduler_consistency`` figures of a karpy run: the scheduler's bindings against karpy's nominations.

In a karpy run the operator's own check (:class:`~karpy.controllers.scheduler_consistency.
SchedulerConsistency`, wired by ``runtime.wiring.build``) hears every nomination of the
provisioner and every binding the scheduler stand-in (:class:`~karpy.sim.binder.Binder`) makes.
The stand-in does not read karpy's nominations (kube-scheduler does not either): it binds by
its own filters and scores, so how often it binds a pod elsewhere than karpy nominated measures
how well karpy's packing agrees with the scheduler's scoring (LeastAllocated or MostAllocated).
:func:`figures` turns the check's counts into the block of the run's figures:

``{"nominated", "bound_as_nominated", "diverged", "divergence_rate", "by_reason": {"gone",
"not-ready", "scoring"}}``: ``nominated`` is the pods that were bound after a nomination (so
``bound_as_nominated + diverged``; a nominated pod deleted or still pending at the end is not
counted), ``divergence_rate`` is ``diverged / nominated`` rounded to 6 digits, 0.0 when nothing
was nominated. Cluster Autoscaler runs nominate nothing; their block is ``None`` (``null``).
:func:`line` is the run's line under the terminal table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["KEY", "REASONS", "Counts", "figures", "line"]

KEY = "scheduler_consistency"
REASONS = ("gone", "not-ready", "scoring")
_DIGITS = 6


class Counts(Protocol):
    """What the scheduler consistency check counts (its plain attributes)."""

    @property
    def bound(self) -> int: ...

    @property
    def diverged(self) -> int: ...

    @property
    def divergence(self) -> Mapping[str, int]: ...


def figures(counts: Counts) -> dict[str, Any]:
    """The ``scheduler_consistency`` block of a karpy run (see the module docstring)."""
    bound, diverged = int(counts.bound), int(counts.diverged)
    nominated = bound + diverged
    reasons = {reason: int(counts.divergence.get(reason, 0)) for reason in REASONS}
    for reason in sorted(set(counts.divergence) - set(REASONS)):  # a reason class added later
        reasons[reason] = int(counts.divergence[reason])
    return {
        "nominated": nominated,
        "bound_as_nominated": bound,
        "diverged": diverged,
        "divergence_rate": round(diverged / nominated, _DIGITS) if nominated else 0.0,
        "by_reason": reasons,
    }


def line(run: str, block: Mapping[str, Any]) -> str:
    """``scheduler consistency (RUN): N nominated pods bound, B as nominated, D elsewhere (R%: ...)``."""
    reasons = ", ".join(f"{reason} {n}" for reason, n in block["by_reason"].items())
    return (
        f"scheduler consistency ({run}): {block['nominated']} nominated pods bound, "
        f"{block['bound_as_nominated']} as nominated, {block['diverged']} elsewhere "
        f"({block['divergence_rate']:.1%}: {reasons})"
    )
