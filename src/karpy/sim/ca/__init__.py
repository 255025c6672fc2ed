"""The Cluster Autoscaler baseline that ``karpy simulate --compare cluster-autoscaler`` runs.

Modules, each importing only those before it: :mod:`~karpy.sim.ca.config` (the scenario block),
:mod:`~karpy.sim.ca.world` (CA's cluster snapshot and Filter plugins), :mod:`~karpy.sim.ca.scaledown`
(unneeded nodes and their deletion), :mod:`~karpy.sim.ca.groups` (node groups and template
nodes), :mod:`~karpy.sim.ca.scaleup` (unschedulable pods, binpacking estimator, expander) and
:mod:`~karpy.sim.ca.autoscaler` (the ``RunOnce`` loop task). This package re-exports the names
the simulator and its tests use.
"""

from __future__ import annotations

from karpy.sim.ca.autoscaler import ASGCloud, CAEvent, ClusterAutoscaler
from karpy.sim.ca.config import (
    EXPANDERS,
    CAConfig,
    NodeGroupConfig,
    OverprovisioningConfig,
    parse_config,
)
from karpy.sim.ca.groups import NODE_GROUP_LABEL
from karpy.sim.ca.scaledown import (
    SAFE_TO_EVICT,
    SAFE_TO_EVICT_LOCAL_VOLUMES,
    SCALE_DOWN_DISABLED,
    TO_BE_DELETED,
    ScaleDown,
    blocking_reason,
    utilization,
)
from karpy.sim.ca.scaleup import ScaleUp
from karpy.sim.ca.world import SimNode, World, requested

__all__ = [
    "EXPANDERS",
    "NODE_GROUP_LABEL",
    "SAFE_TO_EVICT",
    "SAFE_TO_EVICT_LOCAL_VOLUMES",
    "SCALE_DOWN_DISABLED",
    "TO_BE_DELETED",
    "ASGCloud",
    "CAConfig",
    "CAEvent",
    "ClusterAutoscaler",
    "NodeGroupConfig",
    "OverprovisioningConfig",
    "ScaleDown",
    "ScaleUp",
    "SimNode",
    "World",
    "blocking_reason",
    "parse_config",
    "requested",
    "utilization",
]
