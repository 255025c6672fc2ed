"""Disruption decisions as a pure function of a snapshot and ``now``."""

from karpy.core.disruption.memo import Memo
from karpy.core.disruption.methods import compute, validate
from karpy.core.disruption.types import (
    CONSOLIDATION_METHODS,
    DRIFTED,
    EMPTINESS,
    EMPTY,
    EXPIRED,
    MULTI_NODE,
    SINGLE_NODE,
    UNDERUTILIZED,
    Candidate,
    Command,
    Decision,
    NodeRecord,
)

__all__ = [
    "CONSOLIDATION_METHODS",
    "DRIFTED",
    "EMPTINESS",
    "EMPTY",
    "EXPIRED",
    "MULTI_NODE",
    "SINGLE_NODE",
    "UNDERUTILIZED",
    "Candidate",
    "Command",
    "Decision",
    "Memo",
    "NodeRecord",
    "compute",
    "validate",
]
