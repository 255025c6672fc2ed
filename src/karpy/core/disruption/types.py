"""Values of one disruption pass: candidates, commands, per-node records, the decision.

Built by :mod:`karpy.core.disruption.candidates` and the methods; returned by
:func:`karpy.core.disruption.compute`; rendered by ``karpy disrupt`` and the conformance
runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from karpy.core.scheduling.results import PlannedClaim
from karpy.core.snapshot import StateNode
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod

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
    "NodeRecord",
]

EMPTY = "Empty"
DRIFTED = "Drifted"
UNDERUTILIZED = "Underutilized"
EXPIRED = "Expired"

# the methods that upstream skips while the cluster's consolidation state is unchanged since they
# last found nothing to do (``IsConsolidated``), by their ``Command.method`` names
EMPTINESS = "emptiness"
MULTI_NODE = "multi-node consolidation"
SINGLE_NODE = "single-node consolidation"
CONSOLIDATION_METHODS = (EMPTINESS, MULTI_NODE, SINGLE_NODE)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node that may be disrupted, with what its disruption would cost and save."""

    node: StateNode
    pool: NodePool
    instance_type: InstanceType | None
    capacity_type: str
    zone: str
    price: float | None  # cheapest offering of its type matching its zone and capacity type
    reschedulable: tuple[Pod, ...]
    pods: tuple[Pod, ...]
    reschedule_cost: float  # 1 + sum of positive eviction costs of the reschedulable pods
    eviction_cost: float  # sum of eviction costs of all pods (see ``disruption_cost``)
    blocked_eviction: str = ""  # why pods block eviction (kept for eventual disruption with a TGP)
    # the reschedulable pods a solve places when some are held back (an active do-not-disrupt, a
    # PDB that never allows an eviction: upstream's IsCurrentlyReschedulable); None: all of them
    moving: tuple[Pod, ...] | None = None

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def moved(self) -> tuple[Pod, ...]:
        """The pods a disruption solve places elsewhere (upstream's currently reschedulable pods)."""
        return self.reschedulable if self.moving is None else self.moving

    @property
    def empty(self) -> bool:
        """Upstream ``Candidate.IsEmpty``: no reschedulable pod adds to the rescheduling cost (each
        has an eviction cost <= 0, or there is none). Emptiness deletes such a node, consolidation
        leaves it to emptiness."""
        return self.reschedule_cost <= 1.0

    @property
    def savings_ratio(self) -> float:
        return (self.price or 0.0) / self.reschedule_cost

    def disruption_cost(self, now: float) -> float:
        """Upstream's DisruptionCost at ``now``: the eviction costs times the fraction of the
        NodeClaim's expireAfter left (upstream sorted candidates by it up to v1.13). A method, so
        a candidate is the same object from pass to pass while its node, pods and prices are."""
        return self.eviction_cost * lifetime_remaining(self.pool, self.node, now)


def lifetime_remaining(pool: NodePool, node: StateNode, now: float) -> float:
    """The fraction of the node's expireAfter (its NodeClaim's, else its NodePool's) left at ``now``."""
    claim = node.claim
    expire_after = (
        claim.expire_after if claim is not None and claim.expire_after is not None else pool.expire_after
    )
    if expire_after is None or claim is None or expire_after <= 0:
        return 1.0
    return max(0.0, min(1.0, 1 - (now - claim.created) / expire_after))


@dataclass(frozen=True, slots=True)
class Command:
    """What one pass would execute: remove ``candidates``, launch ``replacements`` first."""

    reason: str
    method: str
    candidates: tuple[str, ...]  # node names
    replacements: tuple[PlannedClaim, ...] = ()
    savings_per_hour: float | None = None
    detail: str = ""

    @property
    def decision(self) -> str:
        return "replace" if self.replacements else "delete"


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """Why one node is or is not disrupted in this pass."""

    node: str
    node_pool: str
    verdict: str  # disrupted | candidate | blocked | not-managed | skipped
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    command: Command | None
    records: dict[str, NodeRecord] = field(default_factory=dict)
    budgets: dict[str, dict[str, int]] = field(default_factory=dict)  # pool -> reason -> allowed
    # the consolidation methods that ran, found nothing to do and held no candidate back for a
    # budget: upstream's ``markConsolidated`` (a caller may skip them until the state changes)
    settled: frozenset[str] = frozenset()
