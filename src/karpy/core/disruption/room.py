"""Whether the pods moved off consolidation candidates could land on any other node at all.

A consolidation solve first tries every existing node for each pod. Some objections hold for
the whole solve, whatever is placed before and however the pod's preferences are relaxed: a
node inside its consolidateAfter window takes no running pod, a node's free resources only
shrink as pods join it, and relaxation never tolerates a NoSchedule or NoExecute taint. A
moved pod that every other node refuses for such a reason can only end in a new NodeClaim or
stay unplaced. When, besides, every NodePool the pod could open a NodeClaim in is one whose
first claim stops the solve (``StopWhen.any_claim_of``, the spot-to-spot gate), the answer
of ``consolidation.compute`` is certainly None, and :func:`unplaceable` says so without the
solve. The solves of a pass share one :class:`_PassRoom` (per snapshot object), which
remembers per pod kind the nodes with room.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from karpy.core.scheduling.cache import ObjectMemo
from karpy.core.scheduling.existing import NodeBase, existing_places
from karpy.core.scheduling.podinfo import pod_requests
from karpy.core.scheduling.results import StopWhen
from karpy.core.snapshot import Snapshot
from karpy.model.objects import NodePool, Pod
from karpy.model.resources import Resources
from karpy.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration, tolerates

__all__ = ["Nowhere", "unplaceable"]

_HARD = (NO_SCHEDULE, NO_EXECUTE)


def _refuses(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> bool:
    """A taint no relaxation of the pod tolerates (relaxation adds PreferNoSchedule only)."""
    return any(t.effect in _HARD and not any(tolerates(tol, t) for tol in tolerations) for t in taints)


@dataclass(frozen=True, slots=True)
class Nowhere:
    """A moved pod no other node can take, and what became of those nodes."""

    pod: str  # namespace/name
    others: int  # the other nodes a solve would try
    in_window: int  # of which inside their consolidateAfter window
    new_node: bool  # whether a NodePool (one that stops the solve) could take the pod


@dataclass(slots=True)
class _PassRoom:
    open: list[tuple[str, NodeBase]]  # active nodes outside their consolidateAfter window
    window: frozenset[str]  # active nodes inside it
    names: frozenset[str]  # all active nodes
    pools: tuple[NodePool, ...]  # the NodePools a solve opens claims in
    fits: dict[tuple[Resources, tuple[Toleration, ...]], frozenset[str]] = field(default_factory=dict)
    claims: dict[tuple[tuple[Toleration, ...], frozenset[str]], bool] = field(default_factory=dict)

    def with_room(self, pod: Pod) -> frozenset[str]:
        """The open nodes whose free resources take the pod and whose hard taints it tolerates."""
        requests = pod_requests(pod)
        key = (requests, pod.tolerations)
        found = self.fits.get(key)
        if found is None:
            found = self.fits[key] = frozenset(
                name
                for name, base in self.open
                if base.requests.fits_with(requests, base.available)
                and not _refuses(base.taints, pod.tolerations)
            )
        return found

    def claims_stop(self, pod: Pod, stop_pools: frozenset[str]) -> bool:
        """Whether every NodePool the pod could open or join a claim of stops the solve."""
        key = (pod.tolerations, stop_pools)
        found = self.claims.get(key)
        if found is None:
            found = self.claims[key] = all(
                p.name in stop_pools or _refuses(p.taints, pod.tolerations) for p in self.pools
            )
        return found


_ROOMS: ObjectMemo[_PassRoom] = ObjectMemo(4)  # per snapshot object: the solves of one pass


def _pass_room(snapshot: Snapshot) -> _PassRoom:
    places = existing_places(snapshot)  # the solver's existing nodes
    inside = places.inside_windows(snapshot.node_pools, snapshot.now)
    open_nodes: list[tuple[str, NodeBase]] = []
    window: set[str] = set()
    for state, base, under in zip(places.active, places.bases, inside, strict=True):
        if under:
            window.add(state.name)
        else:
            open_nodes.append((state.name, base))
    pools = tuple(p for p in snapshot.node_pools if not p.deleting and p.replicas is None)
    names = frozenset(window).union(name for name, _ in open_nodes)
    return _PassRoom(open_nodes, frozenset(window), names, pools)


def unplaceable(
    snapshot: Snapshot, chosen: frozenset[str], moved: Sequence[Pod], stop: StopWhen
) -> Nowhere | None:
    """A ``moved`` pod that no node of ``snapshot`` but the ``chosen`` can take, in a consolidation
    solve with ``stop`` whose answer is therefore certainly no; None when that is not certain."""
    room = _pass_room_of(snapshot)
    seen: set[tuple[Resources, tuple[Toleration, ...]]] = set()
    for pod in moved:
        if not pod.node_name:
            continue  # only running pods are kept off nodes inside their window
        key = (pod.requests, pod.tolerations)
        if key in seen:
            continue
        seen.add(key)
        if not room.with_room(pod) - chosen and room.claims_stop(pod, stop.any_claim_of):
            new_node = any(not _refuses(p.taints, pod.tolerations) for p in room.pools)
            return Nowhere(pod.key, len(room.names - chosen), len(room.window - chosen), new_node)
    return None


def _pass_room_of(snapshot: Snapshot) -> _PassRoom:
    return _ROOMS.get(snapshot, lambda: _pass_room(snapshot))
