"""Disruption decisions as a pure function of a snapshot and ``now``."""

from karpy.core.disruption.memo import Memo
from karpy.core.disruption.methods import compute, validate
from karpy.core.disruption.types import (
    DRIFTED,
    EMPTY,
    EXPIRED,
    UNDERUTILIZED,
    Candidate,
    Command,
    Decision,
    NodeRecord,
)

__all__ = [
    "DRIFTED",
    "EMPTY",
    "EXPIRED",
    "UNDERUTILIZED",
    "Candidate",
    "Command",
    "Decision",
    "Memo",
    "NodeRecord",
    "compute",
    "validate",
]
