"""Shadow mode's cost comparison: the installed fleet's price and the fleet karpy would run.

Called by :class:`karpy.controllers.shadow.Shadow` (at most once a minute, when pods, Nodes or
NodePools changed); pure functions of the snapshot, the catalog and the Nodes.

- :func:`installed_cost`: every Node of the cluster priced at the catalog's price of its instance
  type label in its zone and capacity type (``karpenter.sh/capacity-type``, else EKS's
  ``eks.amazonaws.com/capacityType``, else on-demand). A Node whose type the catalog does not
  know, or with no offering in its zone, is counted apart (``unpriced``).
- :func:`karpy_fleet`: what karpy would launch for the same pods from nothing: one provisioning
  solve (:func:`karpy.core.scheduling.solve`, the provisioner's, with the snapshot's NodePools,
  DaemonSets and settings) of every pod the cluster runs or waits to run (bound or pending; not
  DaemonSet or mirror pods, not finished, deleting or scheduling-gated), unbound, with no
  existing node, then the launch rule on each claim. The pods it cannot place are counted apart
  (``unplaced``). This is the fleet karpy's consolidation tends to, not a replay of its history.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from karpy.controllers import provisioning
from karpy.core import scheduling
from karpy.core.disruption import candidates
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import Node, Pod

__all__ = ["EKS_CAPACITY_TYPE", "Fleet", "capacity_type", "installed_cost", "karpy_fleet", "node_price"]

EKS_CAPACITY_TYPE = labels.EKS_CAPACITY_TYPE  # managed node groups: ON_DEMAND | SPOT | CAPACITY_BLOCK
_EKS_TYPES = {"ON_DEMAND": labels.CAPACITY_TYPE_ON_DEMAND, "SPOT": labels.CAPACITY_TYPE_SPOT}


@dataclass(frozen=True, slots=True)
class Fleet:
    cost: float  # $ per hour
    nodes: int  # nodes priced (installed) or launched (karpy)
    left_out: int  # installed: Nodes without a price; karpy: pods not placed


def capacity_type(node_labels: Mapping[str, str]) -> str:
    """A Node's capacity type: Karpenter's label, else the EKS node group's, else on-demand."""
    found = node_labels.get(labels.CAPACITY_TYPE)
    if found:
        return found
    eks = node_labels.get(EKS_CAPACITY_TYPE, "")
    return _EKS_TYPES.get(eks, eks.lower().replace("_", "-") or labels.CAPACITY_TYPE_ON_DEMAND)


def node_price(node: Node, types: Mapping[str, InstanceType]) -> float | None:
    """The catalog's hourly price of a Node (None: its type or offering is not in the catalog)."""
    it = types.get(node.labels.get(labels.INSTANCE_TYPE, ""))
    if it is None:
        return None
    price_labels = [(labels.CAPACITY_TYPE, capacity_type(node.labels))]
    zone = node.labels.get(labels.ZONE)
    if zone:
        price_labels.append((labels.ZONE, zone))
    return candidates.price(it, tuple(price_labels))


def installed_cost(nodes: Iterable[Node], types: Mapping[str, InstanceType]) -> Fleet:
    """The installed fleet: every Node, priced by :func:`node_price`."""
    cost, priced, unpriced = 0.0, 0, 0
    for node in nodes:
        price = node_price(node, types)
        if price is None:
            unpriced += 1
        else:
            cost += price
            priced += 1
    return Fleet(cost, priced, unpriced)


def _hosted(pod: Pod) -> bool:
    """A pod the fleet runs or must run (see the module docstring)."""
    return provisioning.reschedulable(pod) and not pod.scheduling_gated


def karpy_fleet(
    snapshot: Snapshot,
    *,
    rank: Mapping[str, int],
    caches: scheduling.SchedulingCaches | None = None,
) -> Fleet:
    """The fleet karpy would launch for the snapshot's pods from nothing (module docstring);
    ``rank``: :func:`karpy.core.scheduling.catalog_rank` of the catalog's order."""
    pods = tuple(dataclasses.replace(p, node_name="", nominated_node="") for p in snapshot.pods if _hosted(p))
    if not pods:
        return Fleet(0.0, 0, 0)
    fresh = dataclasses.replace(snapshot, nodes=(), pods=pods, unbound=pods)
    results = scheduling.solve(fresh, pods, caches=caches)
    cost, launched, placed = 0.0, 0, 0
    launcher = scheduling.Launcher(rank, well_known=snapshot.well_known)
    for claim in results.new_claims:
        node = launcher.launch(claim)
        if node is not None:
            cost += node.price
            launched += 1
            placed += len(claim.pods)
    return Fleet(cost, launched, len(pods) - placed)
