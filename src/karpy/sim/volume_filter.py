"""The kube-scheduler stand-in's volume filters: VolumeBinding, VolumeZone and NodeVolumeLimits.

:class:`VolumeFilter` is what :class:`~karpy.sim.binder.Binder` asks of a pod's claim-backed
volumes when the run has storage (a :class:`Provisioning`: the simulator's
:class:`~karpy.sim.storage.Provisioner`; without one, a pod has no volume rules).
:meth:`~VolumeFilter.resolve` reads them as the scheduling core does
(:mod:`karpy.core.scheduling.volumes`): a pod whose claim, volume or class is missing, or whose
``Immediate`` claim has no volume yet, waits. :meth:`~VolumeFilter.unfit` says why the volumes
rule a node out (:func:`karpy.sim.predicates.volume_verdict`: outside a bound volume's node
affinity or an unbound ``WaitForFirstConsumer`` class's allowed topology, or over the node's
CSINode attach limit with the claims its pods attach already, kept while its pods and the storage
objects stay the same); :meth:`~VolumeFilter.keep` drops those nodes from the feasible ones.
:meth:`~VolumeFilter.prebind` provisions the pod's unbound ``WaitForFirstConsumer`` claims for the
chosen node just before the binding (PreBind), and :meth:`~VolumeFilter.bound` keeps a binding in
``pinned`` when a bound volume restricted where the pod could go. ``waits`` keeps, by reason
(:data:`~karpy.sim.predicates.VOLUME`, ``VOLUME_TOPOLOGY``, ``VOLUME_LIMIT``), the pods (by key
and creation time) that waited on their claims, or while every node with room was ruled out by
their volumes. Deterministic; no I/O of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from karpy.core.scheduling import volumes as volumes_mod
from karpy.model.objects import Node, Pod
from karpy.sim import predicates
from karpy.state.cluster import Cluster

__all__ = ["Provisioning", "VolumeFilter"]

_Row = TypeVar("_Row", bound=tuple[Any, ...])


class Provisioning(Protocol):
    """The storage side of scheduling: the volume rules now, and the provisioning at PreBind."""

    def context(self) -> volumes_mod.VolumeContext: ...

    def prebind(self, pod: Pod, node: Node) -> None: ...


class VolumeFilter:
    """A pod's volumes for the binder (see the module docstring)."""

    def __init__(
        self,
        provisioning: Provisioning | None,
        cluster: Cluster,
        on: Mapping[str, Mapping[str, Pod]],
        versions: Mapping[str, int],
    ) -> None:
        """``on``: the binder's pods per node, whose ``versions`` change with them (both kept
        current by the binder: read here, never written); ``cluster``: whose storage version
        says when the storage objects changed."""
        self.pinned: list[Any] = []  # the binder's Bindings of pods their bound volumes pinned
        self.waits: dict[str, set[str]] = {}  # reason -> pods ("namespace/name@created")
        self._provisioning = provisioning
        self._cluster = cluster
        self._on, self._versions = on, versions
        self._attached: dict[str, tuple[int, int, volumes_mod.Attached]] = {}  # node -> its claims

    def resolve(self, pod: Pod, created: float) -> volumes_mod.PodVolumes | None:
        """The pod's volumes (None: no claim-backed volume, or no storage); one with a problem
        counts the pod as waiting on its claims."""
        if self._provisioning is None or not pod.volumes:
            return None
        found = self._provisioning.context().resolve(pod)
        if found is not None and found.problem:
            self._waited(pod, created, (predicates.VOLUME,))
        return found

    def unfit(self, found: volumes_mod.PodVolumes | None, node: Node) -> str:
        """Why the volumes (``found``) rule ``node`` out ("" when they do not)."""
        if found is None:
            return ""
        return predicates.volume_verdict(found, node, lambda: self._claims(node.name, found))

    def keep(
        self,
        pod: Pod,
        created: float,
        found: volumes_mod.PodVolumes | None,
        rows: Sequence[_Row],
        nodes: Mapping[str, Node],
    ) -> Sequence[_Row]:
        """The ``rows`` (a node name first, its Node in ``nodes``) whose node the pod's volumes
        (``found``) allow; when none is left, the pod waited for the reasons they gave."""
        if found is None:
            return rows
        verdicts = [self.unfit(found, nodes[row[0]]) for row in rows]
        kept = [row for row, why in zip(rows, verdicts, strict=True) if not why]
        if rows and not kept:
            self._waited(pod, created, sorted(set(verdicts)))
        return kept

    def prebind(self, pod: Pod, node: Node, found: volumes_mod.PodVolumes | None) -> None:
        """Provision the pod's unbound ``WaitForFirstConsumer`` claims (its volumes: ``found``)
        for ``node``."""
        if self._provisioning is not None and found is not None:
            self._provisioning.prebind(pod, node)

    def bound(self, binding: Any, found: volumes_mod.PodVolumes | None) -> None:
        """Keep ``binding`` when a bound volume restricted where the pod could go."""
        if found is not None and any(s.startswith("PersistentVolume ") for s in found.sources):
            self.pinned.append(binding)

    def _waited(self, pod: Pod, created: float, reasons: Iterable[str]) -> None:
        for reason in reasons:
            self.waits.setdefault(reason, set()).add(f"{pod.key}@{created}")

    def _claims(self, node: str, found: volumes_mod.PodVolumes) -> volumes_mod.Attached:
        """The claims the pods on ``node`` attach, per driver (kept while its pods and the
        storage objects stay the same)."""
        key = (self._versions.get(node, 0), self._cluster.store_version("storage"))
        cached = self._attached.get(node)
        if cached is None or cached[:2] != key:
            context = found.context
            assert context is not None  # (resolved through a VolumeContext)
            pods = self._on.get(node, {}).values()
            cached = self._attached[node] = (*key, volumes_mod.attached(pods, context.storage))
        return cached[2]
