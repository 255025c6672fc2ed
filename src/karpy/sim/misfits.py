"""The ``measured_capacity`` figures of a karpy run: what a wrong allocatable estimate costs.

When the simulated cloud registers nodes with less than the catalog says
(``cloud.trueAllocatable``, :class:`~karpy.sim.cloud.TrueAllocatable`), karpy packs pods onto
NodeClaims they will not fit once the Node is up. :class:`Misfits` hears every nomination of the
provisioner and every feed event and counts, with measured capacity off or on:

- ``nodes_below_estimate``: Nodes that registered with less of some resource than their
  NodeClaim said (its ``status.allocatable`` when the Node appeared);
- ``pods_not_fitting``: pods nominated to the NodeClaim of such a Node, then nominated elsewhere
  once the Node was up: the provisioner found they do not fit it (a pod bound first, deleted,
  or whose claim went away before its Node came, is not counted);
- ``relaunches``: the NodeClaims created after such a Node registered that took those pods
  (the second launches);
- ``claims_corrected`` and ``measured_types``: the measured-capacity controller's corrections
  of in-flight NodeClaims and its measurements at the end (0 when the setting is off).

Built by :mod:`karpy.sim.runner` only for scenarios with ``cloud.trueAllocatable`` or
``settings.measuredCapacity`` (other runs' figures stay as they were).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from karpy.model.objects import Node, NodeClaim, Pod
from karpy.runtime.wiring import Controllers
from karpy.sim.scenario import Scenario
from karpy.state.events import DELETED, ObjectEvent
from karpy.state.feed import Feed

__all__ = ["KEY", "Misfits", "watch"]

KEY = "measured_capacity"


class Misfits:
    def __init__(self) -> None:
        self.nodes_below_estimate = 0
        self.pods_not_fitting = 0
        self.relaunches: set[str] = set()  # NodeClaims launched for pods that did not fit
        self._targets: dict[str, str] = {}  # pending pod key -> the NodeClaim it was nominated to
        self._claims: dict[str, NodeClaim] = {}  # providerID -> its (launched) NodeClaim
        self._provider_ids: dict[str, str] = {}  # NodeClaim name -> its providerID
        self._created: dict[str, float] = {}  # NodeClaim name -> its creation time
        self._nodes: dict[str, Node] = {}  # providerID -> its Node (while it exists)
        self._short: dict[str, float] = {}  # NodeClaim name -> when its Node, below estimate, appeared
        self._compared: set[str] = set()  # providerIDs whose Node was compared with its claim

    def nominated(self, pod: Pod, kind: str, name: str) -> None:
        """The provisioner nominated ``kind``/``name`` for ``pod`` (a nomination listener)."""
        first = self._targets.get(pod.key)
        if first is not None and not (kind == "nodeclaim" and name == first):
            provider_id = self._provider_ids.get(first, "")
            node = self._nodes.get(provider_id)
            if kind == "node" and node is not None and name == node.name:
                return  # the Node of its claim: where it was meant to go
            since = self._short.get(first)
            if since is not None:
                self.pods_not_fitting += 1
                if kind == "nodeclaim" and self._created.get(name, since) >= since:
                    self.relaunches.add(name)
        if kind == "nodeclaim":
            self._targets[pod.key] = name
        else:
            self._targets.pop(pod.key, None)

    def on_event(self, event: ObjectEvent) -> None:
        """A feed listener: bindings, deletions, launches and registrations."""
        obj = event.obj
        if isinstance(obj, Pod):
            if event.type == DELETED or obj.node_name:
                self._targets.pop(obj.key, None)
        elif isinstance(obj, NodeClaim):
            if event.type == DELETED:
                self._created.pop(obj.name, None)
                self._short.pop(obj.name, None)
                self._provider_ids.pop(obj.name, None)
                self._claims.pop(obj.provider_id, None)
                self._compared.discard(obj.provider_id)
                return
            self._created[obj.name] = obj.created
            if obj.provider_id:
                self._claims[obj.provider_id] = obj
                self._provider_ids[obj.name] = obj.provider_id
                self._compare(obj.provider_id)
        elif isinstance(obj, Node) and obj.provider_id:
            if event.type == DELETED:
                self._nodes.pop(obj.provider_id, None)
                claim = self._claims.get(obj.provider_id)
                if claim is not None:
                    self._short.pop(claim.name, None)
            else:
                self._nodes[obj.provider_id] = obj
                self._compare(obj.provider_id)

    def _compare(self, provider_id: str) -> None:
        """Once per instance, when both its launched NodeClaim and its Node are known."""
        claim, node = self._claims.get(provider_id), self._nodes.get(provider_id)
        if provider_id in self._compared or claim is None or node is None or not claim.allocatable:
            return
        self._compared.add(provider_id)
        if any(node.allocatable.get(name, 0) < amount for name, amount in claim.allocatable.items()):
            self.nodes_below_estimate += 1
            self._short[claim.name] = node.created

    def figures(self, *, enabled: bool, corrected: int = 0, measured_types: int = 0) -> dict[str, Any]:
        return {
            "enabled": enabled,
            "nodes_below_estimate": self.nodes_below_estimate,
            "pods_not_fitting": self.pods_not_fitting,
            "relaunches": len(self.relaunches),
            "claims_corrected": corrected,
            "measured_types": measured_types,
        }


def watch(scenario: Scenario, controllers: Controllers, feed: Feed) -> Callable[[], dict[str, Any]] | None:
    """Count the run's misfits when ``scenario`` has a true allocatable or measured capacity on:
    the function that gives the figures at the end (None otherwise: nothing is counted)."""
    if scenario.cloud.true_allocatable is None and not scenario.measured_capacity:
        return None
    misfits = Misfits()
    controllers.provisioner.nomination_listeners.append(misfits.nominated)
    feed.listeners.append(misfits.on_event)
    measured = controllers.measured_capacity

    def figures() -> dict[str, Any]:
        return misfits.figures(
            enabled=measured is not None,
            corrected=0 if measured is None else measured.corrected,
            measured_types=0 if measured is None else len(measured.entries),
        )

    return figures
