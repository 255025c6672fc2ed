"""What one provisioning simulation decides: new NodeClaims, bindings and pod errors.

Returned by :func:`karpy.core.scheduling.scheduler.solve`; rendered by ``karpy plan``,
the conformance runner and (later) events and ``explain``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from karpy.model.catalog import InstanceType
from karpy.model.objects import Pod
from karpy.model.requirements import Requirements
from karpy.model.resources import Resources
from karpy.model.taints import Taint

__all__ = ["PlannedClaim", "PodError", "Results"]


@dataclass(frozen=True, slots=True)
class PlannedClaim:
    """A NodeClaim the solve wants launched."""

    name: str
    node_pool: str
    requirements: Requirements
    instance_types: tuple[InstanceType, ...]  # cheapest first, at most the configured cap
    pods: tuple[Pod, ...]
    requests: Resources  # pod requests + the smallest DaemonSet overhead over the options
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class PodError:
    """Why a pod could not be placed: one reason per place tried."""

    pod: Pod
    reasons: dict[str, str]  # "nodepool/<name>", "existing nodes", "validation" -> reason
    relaxations: tuple[str, ...] = ()

    def summary(self) -> str:
        return "; ".join(f"{where}: {why}" for where, why in sorted(self.reasons.items()))


@dataclass(frozen=True, slots=True)
class Results:
    new_claims: tuple[PlannedClaim, ...]
    existing: dict[str, str]  # pod key -> existing node name
    errors: tuple[PodError, ...]
    relaxations: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pod key -> steps that were needed

    def placement(self) -> dict[str, str]:
        """Pod key -> node or NodeClaim name for every placed pod."""
        out = dict(self.existing)
        for claim in self.new_claims:
            for pod in claim.pods:
                out[pod.key] = claim.name
        return out
