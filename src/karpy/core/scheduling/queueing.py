"""The order a solve tries things in: the pod queue and the NodePools.

Pods are queued by CPU, then memory (descending), then age and name; a pod that fails goes
back to the end, and the queue ends after a full pass without progress. NodePools are tried
by weight (descending, ties by name descending). Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from karpy.core.scheduling.topology import Topology
from karpy.model.objects import NodePool, Pod
from karpy.model.resources import CPU, MEMORY

__all__ = ["PodQueue", "order_pools", "queue_order"]


def queue_order(pods: Sequence[Pod]) -> list[Pod]:
    """Karpenter's queue order: CPU desc, memory desc, creation asc, then name."""
    return sorted(
        pods,
        key=lambda p: (-p.requests.get(CPU), -p.requests.get(MEMORY), p.created, p.namespace, p.name, p.uid),
    )


def order_pools(pools: Sequence[NodePool]) -> list[NodePool]:
    """Weight descending; ties by name descending (upstream ``OrderByWeight``)."""
    by_name = sorted(pools, key=lambda p: p.name, reverse=True)
    return sorted(by_name, key=lambda p: -p.weight)


@dataclass(slots=True)
class PodQueue:
    """The pods still to place; :meth:`pop` returns None after a full pass without progress."""

    pods: deque[Pod]
    last_len: dict[str, int]

    def pop(self) -> Pod | None:
        if not self.pods:
            return None
        pod = self.pods[0]
        if self.last_len.get(Topology.uid(pod)) == len(self.pods):
            return None
        self.pods.popleft()
        return pod

    def push(self, pod: Pod) -> None:
        self.pods.append(pod)
        self.last_len[Topology.uid(pod)] = len(self.pods)
