"""Which pods a ReplicaSet deletes first when it has too many: kube-controller-manager's order.

Upstream's ``ActivePodsWithRanks`` (``pkg/controller/controller_utils.go``), as the ReplicaSet
controller's ``getPodsToDelete`` ranks a ReplicaSet's active pods, with the LogarithmicScaleDown
and PodDeletionCost features on (their defaults since Kubernetes 1.22). First deleted first:

1. a pod not assigned to a node;
2. Pending, then Unknown, then Running;
3. not Ready, then Ready;
4. the lower ``controller.kubernetes.io/pod-deletion-cost``;
5. the pod whose node runs more active pods of the same Deployment (any of its ReplicaSets):
   "doubled up" pods go first, which spreads what stays over the nodes;
6. (both Ready) the pod Ready more recently, times compared on a base-2 logarithmic scale of
   the nanoseconds since (``logarithmicRankDiff``);
7. more container restarts (never, in the simulator);
8. the pod created more recently, on the same scale;

ties broken by uid. Kubernetes' uids are random, so that last rule picks at random among pods
alike; the simulated API server numbers its uids, so the order compares a hash of the uid
(deterministic, and as unrelated to age as a random uid). Upstream compares pods pairwise and,
when two Ready times (or creation times) differ but share a logarithmic rank, orders them by
uid at once; here the rules are one sort key, where such a pair is next compared by creation
rank, then by the uid's hash. Used by :mod:`karpy.sim.workloads` for scale-downs and for the
old pods of a rollout.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

__all__ = ["DELETION_COST", "ScaledPod", "deletion_cost", "deletion_order", "log_rank", "shuffle"]

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASES = {"Pending": 0, "Unknown": 1, "Running": 2}


class ScaledPod(Protocol):
    """What the order reads of a pod."""

    @property
    def node(self) -> str: ...  # "" when not assigned

    @property
    def phase(self) -> str: ...

    @property
    def ready(self) -> bool: ...

    @property
    def ready_since(self) -> float | None: ...  # when it last turned Ready

    @property
    def created(self) -> float: ...

    @property
    def shuffle(self) -> bytes: ...  # :func:`shuffle` of its uid

    @property
    def deletion_cost(self) -> int: ...


def log_rank(now: float, then: float) -> int:
    """``floor(log2(nanoseconds from then to now))``, -1 when not after ``then`` (upstream's rank,
    ``int64(math.Log2(float64(d)))`` of a whole number of nanoseconds)."""
    return int((now - then) * 1e9).bit_length() - 1 if now > then else -1


P = TypeVar("P", bound=ScaledPod)


def deletion_order(
    related: Iterable[P], *, now: float, active: Callable[[P], bool]
) -> Callable[[P], tuple[object, ...]]:
    """The sort key that puts the pod to delete first first, given every pod of the Deployment
    (``related``: all its ReplicaSets; rule 5 counts the ``active`` ones per node)."""
    on_node = Counter(p.node for p in related if active(p))
    phases = _PHASES

    def key(pod: P) -> tuple[object, ...]:
        since = pod.ready_since
        # (not Ready: rule 3 has ordered it; Ready at no known time: first)
        ready_rank = log_rank(now, since) if pod.ready and since is not None else -1
        return (
            pod.node != "",
            phases.get(pod.phase, 1),
            pod.ready,
            pod.deletion_cost,
            -on_node[pod.node],
            ready_rank,
            log_rank(now, pod.created),
            pod.shuffle,
        )

    return key


def shuffle(uid: str) -> bytes:
    """The uid's stand-in in the last rule: a digest, ordered as unrelated to age as a random uid."""
    return hashlib.blake2b(uid.encode(), digest_size=8).digest()


def deletion_cost(annotations: dict[str, str]) -> int:
    """The pod's ``controller.kubernetes.io/pod-deletion-cost`` (0 when absent or not an int32)."""
    text = annotations.get(DELETION_COST)
    try:
        value = int(text) if text is not None else 0
    except ValueError:
        return 0
    return value if -(2**31) <= value < 2**31 else 0
