"""Provisioning simulation: ``solve(snapshot, pods) -> Results`` and the launch rule."""

from karpy.core.scheduling.caches import SchedulingCaches
from karpy.core.scheduling.launch import Launched, Launcher, catalog_rank, launch
from karpy.core.scheduling.results import PlannedClaim, PodError, Results
from karpy.core.scheduling.scheduler import solve

__all__ = [
    "Launched",
    "Launcher",
    "PlannedClaim",
    "PodError",
    "Results",
    "SchedulingCaches",
    "catalog_rank",
    "launch",
    "solve",
]
