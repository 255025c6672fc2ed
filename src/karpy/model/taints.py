"""Taints and tolerations with Kubernetes' matching rules.

``tolerates(toleration, taint)`` mirrors ``Toleration.ToleratesTaint``; ``first_untolerated``
checks every taint of any effect (Karpenter counts ``PreferNoSchedule`` as well until a
pod's preferences are relaxed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "DISRUPTED",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "UNREGISTERED",
    "Taint",
    "Toleration",
    "first_untolerated",
    "tolerates",
]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = frozenset({NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


# Karpenter's own taints (its apis/v1/taints.go)
DISRUPTED = Taint("karpenter.sh/disrupted", NO_SCHEDULE)  # a node being disrupted: no new pods
UNREGISTERED = Taint("karpenter.sh/unregistered", NO_EXECUTE)  # a node not registered by karpy yet


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates one taint (Kubernetes semantics)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        # An empty key with Equal never matches (the API forbids it); keys matched above.
        return bool(toleration.key) and toleration.value == taint.value
    return False


def first_untolerated(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first taint no toleration tolerates, or None when all are tolerated."""
    for taint in taints:
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
