"""The StatefulSet stand-in's rules: which ordinals to create and delete, and its API object.

A StatefulSet of ``replicas`` keeps the pods ``<name>-0`` .. ``<name>-<replicas-1>``.
:func:`plan` is one pass of the StatefulSet controller over the pods it has (by ordinal):

- ``OrderedReady`` (the default): the lowest missing ordinal is created, and nothing more while
  a pod below it is not Running and Ready or is going away; scaling down deletes the highest
  ordinal first, one at a time, each only once the one before is gone, and only while every
  pod it keeps is Running and Ready;
- ``Parallel``: every missing ordinal is created and every ordinal at or above ``replicas``
  deleted at once.

A pod deleted (evicted by a drain, lost with its node) comes back with its name. :class:`Publisher`
writes the StatefulSet object (``spec.replicas``; ``status.replicas``, ``updatedReplicas`` and
``readyReplicas``, one revision current, as there are no rollouts) when its figures change, so what
watches the API server (``karpy record`` over a simulated cluster) sees its scale.

:class:`ClaimTemplates` are the set's ``volumeClaimTemplates``: pod ``<set>-<i>`` gets, for each
template ``t``, the volume ``t`` backed by the claim ``t-<set>-<i>`` (replacing a pod-template
volume of that name), and the controller creates the claims it misses before the pod. Claims
outlive their pods (``persistentVolumeClaimRetentionPolicy`` Retain, the default); with
``whenScaled: Delete`` the claims of an ordinal removed by a scale-down are deleted once its pod is
gone. Used by :class:`~karpy.sim.workloads.Workloads`.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.ports import KubeAPI, RawObject
from karpy.sim import apps_object

__all__ = ["KIND", "ClaimTemplates", "Ordinal", "Publisher", "ordinal_of", "plan"]

KIND = "StatefulSet"


@dataclass(frozen=True, slots=True)
class Ordinal:
    """One pod of the set: Running and Ready, and whether it is going away (deleted, terminal)."""

    ready: bool
    going: bool


@dataclass(frozen=True, slots=True)
class ClaimTemplates:
    """A StatefulSet's ``volumeClaimTemplates`` (raw claims: ``metadata.name`` and ``spec``), the
    labels its claims get besides their template's (the set's ``selector.matchLabels``), and
    whether a scale-down deletes the claims of the ordinals it removes."""

    templates: tuple[Mapping[str, Any], ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    delete_when_scaled: bool = False

    def names(self, set_name: str, ordinal: int) -> list[str]:
        """The claims of pod ``<set_name>-<ordinal>``, in template order."""
        return [f"{_name(t)}-{set_name}-{ordinal}" for t in self.templates]

    def pod_volumes(self, volumes: Sequence[Mapping[str, Any]], set_name: str, ordinal: int) -> list[Any]:
        """The pod's ``spec.volumes``: its template's, those named as a claim template replaced."""
        mine = {
            _name(t): claim for t, claim in zip(self.templates, self.names(set_name, ordinal), strict=True)
        }
        kept = [dict(v) for v in volumes if v.get("name") not in mine]
        return kept + [{"name": n, "persistentVolumeClaim": {"claimName": c}} for n, c in mine.items()]

    def released(
        self, set_name: str, condemned: set[int], *, alive: Container[str], replicas: int
    ) -> list[str]:
        """``whenScaled: Delete``: the claims to delete now of the ``condemned`` ordinals (those a
        scale-down removed; taken out of the set once their pod is gone): an ordinal wanted again
        before then keeps its claims."""
        out: list[str] = []
        for ordinal in sorted(condemned):
            if f"{set_name}-{ordinal}" in alive:
                continue
            condemned.discard(ordinal)
            if ordinal >= replicas:
                out.extend(self.names(set_name, ordinal))
        return out

    def claims(self, namespace: str, set_name: str, ordinal: int) -> list[dict[str, Any]]:
        """The claim objects of the ordinal, as the StatefulSet controller creates them."""
        out = []
        for template, name in zip(self.templates, self.names(set_name, ordinal), strict=True):
            meta = template.get("metadata") or {}
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": {**(meta.get("labels") or {}), **self.labels},
                        "annotations": dict(meta.get("annotations") or {}),
                    },
                    "spec": dict(template.get("spec") or {}),
                    "status": {"phase": "Pending"},
                }
            )
        return out


def _name(template: Mapping[str, Any]) -> str:
    return str((template.get("metadata") or {}).get("name", ""))


def ordinal_of(set_name: str, pod_name: str) -> int | None:
    """The ordinal of a pod ``<set_name>-<i>`` (None for another name)."""
    head, _, tail = pod_name.rpartition("-")
    return int(tail) if head == set_name and tail.isdigit() else None


def plan(replicas: int, pods: Mapping[int, Ordinal], *, parallel: bool) -> tuple[list[int], list[int]]:
    """The ordinals to create and to delete now (see the module docstring)."""
    create: list[int] = []
    for i in range(replicas):
        pod = pods.get(i)
        if pod is None:
            create.append(i)
            if not parallel:
                return create, []
        elif not parallel and (pod.going or not pod.ready):
            return create, []
    delete: list[int] = []
    for i in sorted((i for i in pods if i >= replicas), reverse=True):
        if pods[i].going:
            if not parallel:
                break
            continue
        delete.append(i)
        if not parallel:
            break
    return create, delete


class Publisher:
    """One StatefulSet object, written when its figures change."""

    def __init__(self, kube: KubeAPI, namespace: str, name: str, *, parallel: bool, revision: str) -> None:
        self._kube, self.namespace, self.name = kube, namespace, name
        self._policy = "Parallel" if parallel else "OrderedReady"
        self._revision = revision
        self.published: tuple[int, int, int] | None = None  # replicas, active, ready

    def publish(self, *, replicas: int, active: int, ready: int) -> None:
        view = (replicas, active, ready)
        if view == self.published:
            return
        first, self.published = self.published is None, view
        body: RawObject = {
            "spec": {"replicas": replicas, "podManagementPolicy": self._policy},
            "status": {
                "replicas": active,
                "updatedReplicas": active,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "currentRevision": self._revision,
                "updateRevision": self._revision,
            },
        }
        apps_object.write(self._kube, KIND, self.namespace, self.name, body, first=first)
