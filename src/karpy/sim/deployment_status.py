"""The Deployment object of the simulator's Deployment stand-in, with the status it would have.

:class:`~karpy.sim.workloads.Workloads` keeps a Deployment's pods itself (no API object needed);
what watches the API server for Deployments (the rollout guard's cluster state) reads this object
instead: its ``spec.replicas`` (no template) and the status the Deployment controller writes,
``replicas`` (active pods of every template), ``updatedReplicas`` (of the current template),
``readyReplicas``, ``availableReplicas`` (the ready ones: no minReadySeconds) and a
``Progressing`` condition: ``NewReplicaSetAvailable`` once every desired pod is of the current
template and ready with no other pod left, else ``ReplicaSetUpdated``. Its ``lastUpdateTime``
moves with every change while in progress and when the rollout completes (not on a change after
that, such as a scale-down), its ``lastTransitionTime`` is the object's creation. The object is
created by the first :meth:`Publisher.publish` and written again only when a figure changes.
"""

from __future__ import annotations

import contextlib

from karpy.api import encode
from karpy.model import errors
from karpy.ports import KubeAPI, RawObject
from karpy.sim import apps_object

__all__ = ["NEW_RS_AVAILABLE", "RS_UPDATED", "Publisher"]

NEW_RS_AVAILABLE, RS_UPDATED = "NewReplicaSetAvailable", "ReplicaSetUpdated"  # Progressing reasons
KIND = "Deployment"


class Publisher:
    """One Deployment object, written when its figures change (see the module docstring)."""

    def __init__(self, kube: KubeAPI, namespace: str, name: str) -> None:
        self._kube, self.namespace, self.name = kube, namespace, name
        self.published: tuple[int, int, int, int, str] | None = None  # replicas, counts, reason
        self._since = 0.0  # the condition's lastTransitionTime
        self._updated = 0.0  # its lastUpdateTime

    def publish(self, now: float, *, replicas: int, active: int, updated: int, ready: int) -> None:
        """Write ``spec.replicas`` and the status for these pod counts, if they changed."""
        done = updated == replicas == active == ready
        view = (replicas, active, updated, ready, NEW_RS_AVAILABLE if done else RS_UPDATED)
        if view == self.published:
            return
        before, self.published = self.published, view
        first = before is None
        if before is None:
            self._since = now
        if not done or before is None or before[4] != NEW_RS_AVAILABLE:
            self._updated = now  # progress, or the rollout just completed
        condition = {
            "type": "Progressing",
            "status": "True",
            "reason": view[4],
            "lastUpdateTime": encode.time(self._updated),
            "lastTransitionTime": encode.time(self._since),
        }
        status = {
            "replicas": active,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [condition],
        }
        body: RawObject = {"spec": {"replicas": replicas}, "status": status}
        apps_object.write(self._kube, KIND, self.namespace, self.name, body, first=first)

    def delete(self) -> None:
        """Delete the object (once written)."""
        if self.published is not None:
            with contextlib.suppress(errors.NotFound):
                self._kube.delete(KIND, self.name, self.namespace)
