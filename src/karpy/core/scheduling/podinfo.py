"""What the scheduler derives from one pod: its node requirements and its requests.

``pod_requirements`` follows Karpenter's ``NewPodRequirements``: nodeSelector + the
heaviest preferred node-affinity term (treated as required, unless preferences are
ignored) + the *first* required nodeSelectorTerm; ``strict_requirements`` leaves the
preference out. ``validate`` rejects pods Karpenter will not provision for.
Called by :mod:`karpy.core.scheduling.scheduler` and the topology code.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.core.scheduling.cache import ObjectMemo
from karpy.core.scheduling.volumes import PodVolumes
from karpy.model import labels
from karpy.model.objects import Pod
from karpy.model.requirements import Requirements
from karpy.model.resources import PODS, Resources

__all__ = [
    "PodData",
    "pod_data",
    "pod_requests",
    "signature",
    "strict_requirements",
    "validate",
    "with_pod_slot",
]

_ONE_POD = Resources({PODS: 1})


@dataclass(frozen=True, slots=True)
class PodData:
    requirements: Requirements
    strict: Requirements
    requests: Resources
    signature: tuple[object, ...] = ()  # see :func:`signature`
    volumes: PodVolumes | None = None  # what its volumes ask (set by the solver; None: no volumes)


# Per pod object (frozen): asked for every pod of every solve, and by the topology as well.
_SIGNATURES: ObjectMemo[tuple[object, ...]] = ObjectMemo(16384)


def signature(pod: Pod) -> tuple[object, ...]:
    """Everything of a pending pod's spec that scheduling reads, except its requests.

    Two pods with equal signatures derive the same requirements, tolerate the same taints,
    use the same host ports, own the same topology groups and are selected by the same ones.
    """
    return _SIGNATURES.get(pod, lambda: _signature(pod))


def _signature(pod: Pod) -> tuple[object, ...]:
    return (
        pod.namespace,
        tuple(sorted(pod.labels.items())),
        tuple(sorted(pod.node_selector.items())),
        pod.required_terms,
        pod.preferred_terms,
        pod.tolerations,
        pod.host_ports,
        pod.spread,
        pod.affinity,
        pod.affinity_preferred,
        pod.anti_affinity,
        pod.anti_affinity_preferred,
        bool(pod.node_name),
        *_volume_signature(pod),
    )


def _volume_signature(pod: Pod) -> tuple[object, ...]:
    """A pod's volumes (an ephemeral volume's claim is named after the pod: then the pod too)."""
    if not pod.volumes:
        return ()
    return (pod.volumes, pod.name if any(v.ephemeral for v in pod.volumes) else "")


def pod_requests(pod: Pod) -> Resources:
    """A pod's scheduling requests plus the one ``pods`` slot it takes."""
    return pod.requests + _ONE_POD


def with_pod_slot(requests: Resources) -> Resources:
    """Container requests plus the one ``pods`` slot a pod takes (:func:`pod_requests`)."""
    return requests + _ONE_POD


def strict_requirements(pod: Pod) -> Requirements:
    reqs = Requirements.from_labels(pod.node_selector)
    if pod.required_terms:
        reqs = reqs.add(*pod.required_terms[0].requirements)
    return reqs


def pod_data(pod: Pod, *, respect_preferences: bool = True) -> PodData:
    strict = strict_requirements(pod)
    reqs = strict
    if respect_preferences and pod.preferred_terms:
        heaviest = max(pod.preferred_terms, key=lambda t: t.weight)
        reqs = Requirements(heaviest.term.requirements).union_with(strict)
    return PodData(reqs, strict, pod_requests(pod), signature(pod))


def validate(pod: Pod, well_known: frozenset[str]) -> str | None:
    """Why Karpenter refuses to provision for ``pod``, or None."""
    keys: list[str] = list(pod.node_selector)
    for term in pod.required_terms:
        keys.extend(r.key for r in term.requirements)
    for weighted in pod.preferred_terms:
        keys.extend(r.key for r in weighted.term.requirements)
    for key in keys:
        if labels.is_restricted_for_pods(key, well_known):
            return f'label "{key}" is restricted; Karpenter does not provision for pods that select on it'
    return None
