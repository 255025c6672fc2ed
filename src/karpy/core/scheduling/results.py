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

__all__ = ["STOP_CLAIMS", "STOP_POOL", "PlannedClaim", "PodError", "Results", "StopWhen"]

STOP_CLAIMS = "claims"  # Results.stopped: more new NodeClaims than StopWhen.claims_over
STOP_POOL = "pool"  # Results.stopped: a new NodeClaim of a NodePool in StopWhen.any_claim_of


@dataclass(frozen=True, slots=True)
class StopWhen:
    """When a caller has no use for the rest of a solve (consolidation: see its ``compute``)."""

    claims_over: int  # stop when more new NodeClaims than this are open
    any_claim_of: frozenset[str] = frozenset()  # or when any new NodeClaim of these NodePools opens


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
    stopped: str = ""  # the solve stopped early (STOP_CLAIMS or STOP_POOL); the rest is then empty

    def placement(self) -> dict[str, str]:
        """Pod key -> node or NodeClaim name for every placed pod."""
        out = dict(self.existing)
        for claim in self.new_claims:
            for pod in claim.pods:
                out[pod.key] = claim.name
        return out
