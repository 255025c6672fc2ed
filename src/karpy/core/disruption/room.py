"""Whether the pods moved off consolidation candidates could land on any other node at all.

A consolidation solve first tries every existing node for each pod. Some objections hold for
the whole solve, whatever is placed before and however the pod's preferences are relaxed: a
node inside its consolidateAfter window takes no running pod, a node's free resources only
shrink as pods join it, and relaxation never tolerates a NoSchedule or NoExecute taint. A
moved pod may land on a node that is not initialized yet, but ``consolidation.simulate`` then
counts it as stranded, so such a node is no way out either. A moved pod that every other node
refuses for such a reason can only end in a new NodeClaim or stay unplaced. When, besides,
every NodePool the pod could open a NodeClaim in is one whose first claim stops the solve
(``StopWhen.any_claim_of``, the spot-to-spot gate), the answer of ``consolidation.compute``
is certainly None, and :func:`unplaceable` says so without the solve. The solves of a pass
share one :class:`_PassRoom` (per snapshot object), which remembers per pod kind the nodes
with room and per pod size their slots, both read off one matrix of the open nodes' free
resources.

Room for each moved pod alone is not enough: the moved pods share the free room of the other
nodes. :func:`unplaceable` also counts, for each size ``r`` among the moved pods, how many of
them ask for at least ``r`` in every resource ``r`` names, and how many such pods the other
nodes could hold at most (per node ``min_k floor(free_k / r_k)``). Any placement a solve could
find, in any order and with any relaxation, puts at most that many there; more pods than slots
(:class:`Crowded`) means the solve would end without placing them all. Pending pods and the
pods of deleting nodes are left out of the count, which only adds room, so the bound stays
certain.

What the check reads of the moved pods themselves (their kinds, and per toleration set how
many ask for each size: :class:`_Moved`) does not depend on the pass, only on the pods, the
NodePools and the stop; it is kept per tuple of pods (a candidate's own tuple lives from pass
to pass while its node's pods do not change), and a multi-node prefix combines its
candidates' reads.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from karpy.core.scheduling.cache import ObjectMemo
from karpy.core.scheduling.caches import SchedulingCaches
from karpy.core.scheduling.existing import existing_places
from karpy.core.scheduling.podinfo import with_pod_slot
from karpy.core.scheduling.results import StopWhen
from karpy.core.snapshot import Snapshot
from karpy.model.objects import NodePool, Pod
from karpy.model.resources import Resources
from karpy.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration, tolerates

__all__ = ["Crowded", "Nowhere", "unplaceable"]

_HARD = (NO_SCHEDULE, NO_EXECUTE)


class OpenNode(Protocol):
    """What the room check reads of an open node (the solver's
    :class:`~karpy.core.scheduling.existing.NodeBase`)."""

    @property
    def available(self) -> Resources: ...

    @property
    def requests(self) -> Resources: ...

    @property
    def taints(self) -> tuple[Taint, ...]: ...


def _refuses(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> bool:
    """A taint no relaxation of the pod tolerates (relaxation adds PreferNoSchedule only)."""
    return any(t.effect in _HARD and not any(tolerates(tol, t) for tol in tolerations) for t in taints)


@dataclass(eq=False, slots=True)
class _Kind:
    """What the room checks read of a pod: its requests (alone and with the pod's slot) and its
    tolerations, with the index of those tolerations among the interned ones. Interned, so a
    kind is hashed by identity, and found by the identity of a pod's requests and tolerations
    objects (:func:`_kind`)."""

    requests: Resources
    slot: Resources
    tolerations: tuple[Toleration, ...]
    tolerations_index: int


_KINDS: dict[tuple[Resources, tuple[Toleration, ...]], _Kind] = {}
_TOLERATIONS: dict[tuple[Toleration, ...], int] = {}
# (id(requests), id(tolerations)) of a pod -> (those two objects, kept alive so the ids stay
# theirs; the kind): found by identity, holding small objects rather than pods
_KIND_OF: dict[tuple[int, int], tuple[Resources, tuple[Toleration, ...], _Kind]] = {}
MAX_KIND_PODS = 65536  # the per-pod table is cleared when full
MAX_KINDS = 4096  # the intern tables are cleared when full (only between two unplaceable calls)


def _kind(pod: Pod) -> _Kind:
    requests, tolerations = pod.requests, pod.tolerations
    ids = (id(requests), id(tolerations))
    entry = _KIND_OF.get(ids)
    if entry is not None and entry[0] is requests and entry[1] is tolerations:
        return entry[2]
    key = (requests, tolerations)
    kind = _KINDS.get(key)
    if kind is None:
        index = _TOLERATIONS.setdefault(tolerations, len(_TOLERATIONS))
        kind = _KINDS[key] = _Kind(requests, with_pod_slot(requests), tolerations, index)
    if len(_KIND_OF) >= MAX_KIND_PODS:
        _KIND_OF.clear()
    _KIND_OF[ids] = (requests, tolerations, kind)
    return kind


def _bound_kinds() -> None:
    if len(_KINDS) >= MAX_KINDS or len(_TOLERATIONS) >= MAX_KINDS:
        _KINDS.clear()
        _TOLERATIONS.clear()
        _KIND_OF.clear()
        _MOVED.clear()  # (its summaries hold kinds, grouped by the tolerations indexes)


@dataclass(frozen=True, slots=True)
class Nowhere:
    """A moved pod no other node can take, and what became of those nodes."""

    pod: str  # namespace/name
    others: int  # the other nodes a solve would try
    in_window: int  # of which inside their consolidateAfter window
    unready: int  # of which, outside it, not initialized
    new_node: bool  # whether a NodePool (one that stops the solve) could take the pod


@dataclass(frozen=True, slots=True)
class Crowded:
    """Moved pods that the other nodes cannot all take at once, each one alone would fit."""

    count: int  # moved pods asking for at least ``least`` in each resource it names
    least: Resources
    slots: int  # how many such pods the other nodes could hold at most
    others: int  # the other nodes a solve would try
    in_window: int  # of which inside their consolidateAfter window
    unready: int  # of which, outside it, not initialized
    new_node: bool  # whether a NodePool (one that stops the solve) could take them


@dataclass(slots=True)
class _Free:
    """What the open nodes have left for pods, as one matrix: a row per open node whose own
    overhead does not overflow it (:func:`_free`), a column per resource any of them has."""

    names: list[str]  # the row's node
    columns: dict[str, int]  # resource -> column
    free: np.ndarray  # int64 [rows, columns]
    tainted: list[tuple[int, OpenNode]]  # rows of nodes with a NoSchedule or NoExecute taint

    @staticmethod
    def of(open_nodes: Sequence[tuple[str, OpenNode]]) -> _Free:
        names: list[str] = []
        rows: list[dict[str, int]] = []
        tainted: list[tuple[int, OpenNode]] = []
        keys: set[str] = set()
        for name, base in open_nodes:
            free, hard = _FREE.of(base, _free_of)
            if free is None:
                continue
            if hard:
                tainted.append((len(rows), base))
            names.append(name)
            rows.append(free)
            keys.update(free)
        order = sorted(keys)
        columns = {k: i for i, k in enumerate(order)}
        matrix = np.array([[row.get(k, 0) for k in order] for row in rows], dtype=np.int64)
        return _Free(names, columns, matrix.reshape(len(rows), len(columns)), tainted)

    def tolerated(self, tolerations: tuple[Toleration, ...]) -> np.ndarray:
        """Per row: whether the pod's tolerations take every hard taint of the node."""
        mask = np.ones(len(self.names), dtype=bool)
        for row, base in self.tainted:
            if _refuses(base.taints, tolerations):
                mask[row] = False
        return mask

    def asked(self, least: Resources) -> tuple[list[int], np.ndarray] | None:
        """The columns of the resources ``least`` asks a positive amount of, and the amounts;
        None when it asks for a resource no open node has."""
        columns: list[int] = []
        amounts: list[int] = []
        for k, v in least.items():
            if v > 0:
                column = self.columns.get(k)
                if column is None:
                    return None
                columns.append(column)
                amounts.append(v)
        return columns, np.array(amounts, dtype=np.int64)


@dataclass(slots=True)
class _PassRoom:
    open: list[tuple[str, OpenNode]]  # initialized active nodes outside their consolidateAfter window
    window: frozenset[str]  # active nodes inside it
    unready: frozenset[str]  # active nodes outside it that are not initialized
    names: frozenset[str]  # all active nodes
    pools: tuple[NodePool, ...]  # the NodePools a solve opens claims in
    fits: dict[_Kind, frozenset[str]] = field(default_factory=dict)
    claims: dict[tuple[_Kind, frozenset[str]], bool] = field(default_factory=dict)
    new_nodes: dict[tuple[Toleration, ...], bool] = field(default_factory=dict)
    slots: dict[tuple[Resources, tuple[Toleration, ...]], tuple[int, dict[str, int]]] = field(
        default_factory=dict
    )
    matrix: _Free | None = None

    def _matrix(self) -> _Free:
        if self.matrix is None:
            self.matrix = _Free.of(self.open)
        return self.matrix

    def with_room(self, pod: Pod) -> frozenset[str]:
        """The open nodes whose free resources take the pod and whose hard taints it tolerates."""
        return self._with_room(_kind(pod))

    def _with_room(self, kind: _Kind) -> frozenset[str]:
        found = self.fits.get(kind)
        if found is None:
            free = self._matrix()
            mask = free.tolerated(kind.tolerations)
            # a resource it asks for that no node has: it fits nowhere (0 free); one it asks
            # none of never stops it
            asked = free.asked(kind.slot)
            if asked is None:
                mask[:] = False
            elif asked[0]:
                mask &= (free.free[:, asked[0]] >= asked[1]).all(axis=1)
            found = self.fits[kind] = frozenset(itertools.compress(free.names, mask.tolist()))
        return found

    def slots_for(self, least: Resources, tolerations: tuple[Toleration, ...]) -> tuple[int, dict[str, int]]:
        """How many pods asking for at least ``least`` the open nodes could hold at most: the
        total and, per node name with any, its share (so a solve's own candidates come off)."""
        key = (least, tolerations)
        found = self.slots.get(key)
        if found is None:
            free = self._matrix()
            asked = free.asked(least)
            per_node: dict[str, int] = {}
            if asked is not None and asked[0]:
                counts = (free.free[:, asked[0]] // asked[1]).min(axis=1)
                counts[~free.tolerated(tolerations)] = 0
                for row in np.flatnonzero(counts > 0).tolist():
                    name = free.names[row]
                    per_node[name] = per_node.get(name, 0) + int(counts[row])
            found = self.slots[key] = (sum(per_node.values()), per_node)
        return found

    def counts(self, chosen: frozenset[str]) -> tuple[int, int, int]:
        """The other nodes, those inside their window, those outside it not initialized."""
        return (
            len(self.names) - len(chosen & self.names),
            len(self.window) - len(chosen & self.window),
            len(self.unready) - len(chosen & self.unready),
        )

    def new_node(self, tolerations: tuple[Toleration, ...]) -> bool:
        """Whether some NodePool a solve opens claims in takes pods with these tolerations."""
        found = self.new_nodes.get(tolerations)
        if found is None:
            found = self.new_nodes[tolerations] = any(not _refuses(p.taints, tolerations) for p in self.pools)
        return found

    def claims_stop(self, kind: _Kind, stop_pools: frozenset[str]) -> bool:
        """Whether every NodePool a pod of this kind could open or join a claim of stops the solve."""
        key = (kind, stop_pools)
        found = self.claims.get(key)
        if found is None:
            found = self.claims[key] = all(
                p.name in stop_pools or _refuses(p.taints, kind.tolerations) for p in self.pools
            )
        return found


def _free_of(base: OpenNode) -> tuple[dict[str, int] | None, bool]:
    """(:func:`_free`, whether the node has a NoSchedule or NoExecute taint): what a matrix reads
    of an open node, kept per node object (:data:`_FREE`)."""
    return _free(base), any(t.effect in _HARD for t in base.taints)


# per open node object (a StateNode's NodeBase, the same from pass to pass while the StateNode
# is): its row (never changed by a reader) and hard-taint flag
_FREE: ObjectMemo[tuple[dict[str, int] | None, bool]] = ObjectMemo(8192)


def _free(base: OpenNode) -> dict[str, int] | None:
    """What the node has left for pods, or None when its own overhead already overflows it (it
    then takes no pod: ``fits_with`` checks every resource the node's requests name)."""
    available = base.available
    free = dict(available.items())
    for k, v in base.requests.items():
        left = available.get(k, 0) - v
        if left < 0:
            return None
        free[k] = left
    return free


_ROOMS: ObjectMemo[_PassRoom] = ObjectMemo(4)  # per snapshot object: the solves of one pass


def _pass_room(snapshot: Snapshot, caches: SchedulingCaches) -> _PassRoom:
    places = existing_places(snapshot, caches.places)  # the solver's existing nodes
    inside = places.inside_windows(snapshot.node_pools, snapshot.now)
    # a moved pod placed on a node of this name is stranded (the test in consolidation.simulate)
    by_name = {n.name: n for n in snapshot.nodes}
    open_nodes: list[tuple[str, OpenNode]] = []
    window: set[str] = set()
    unready: set[str] = set()
    for state, base, under in zip(places.active, places.bases, inside, strict=True):
        if under:
            window.add(state.name)
        elif not by_name[state.name].initialized:
            unready.add(state.name)
        else:
            open_nodes.append((state.name, base))
    pools = tuple(p for p in snapshot.node_pools if not p.deleting and p.replicas is None)
    names = frozenset(window).union(unready, (name for name, _ in open_nodes))
    return _PassRoom(open_nodes, frozenset(window), frozenset(unready), names, pools)


# when a list, every answer of :func:`unplaceable` is appended to it (tests and profiles: a
# compiled core calls the function directly, so wrapping the module attribute would see nothing)
OBSERVED: list[Nowhere | Crowded | None] | None = None


def unplaceable(
    snapshot: Snapshot,
    chosen: frozenset[str],
    moved: Sequence[Sequence[Pod]],
    stop: StopWhen,
    caches: SchedulingCaches | None = None,
) -> Nowhere | Crowded | None:
    """Why the ``moved`` pods (one sequence per candidate) cannot all land on nodes of
    ``snapshot`` other than the ``chosen``, in a consolidation solve with ``stop`` whose answer
    is therefore certainly no: one of them fits on none (:class:`Nowhere`), or together they
    outnumber the room (:class:`Crowded`). None when that is not certain.

    What the check reads of a candidate's pods (:class:`_Moved`) is kept per tuple of pods (a
    candidate's own), so the next passes only look up the room; several candidates' reads are
    combined."""
    found = _unplaceable(snapshot, chosen, moved, stop, caches or SchedulingCaches())
    if OBSERVED is not None:
        OBSERVED.append(found)
    return found


def _unplaceable(
    snapshot: Snapshot,
    chosen: frozenset[str],
    moved: Sequence[Sequence[Pod]],
    stop: StopWhen,
    caches: SchedulingCaches,
) -> Nowhere | Crowded | None:
    room = _pass_room_of(snapshot, caches)
    _bound_kinds()  # (never inside _moved: the tolerations indexes it groups by must stay apart)
    pools, stop_pools = snapshot.node_pools, stop.any_claim_of
    summaries: list[_Moved] = []
    seen: set[_Kind] = set()
    for part in moved:  # read part by part: the first kind
        summary = _moved_of(room, pools, part, stop_pools)  # without room ends it early
        summaries.append(summary)
        for kind, pod_key in summary.kinds:
            if kind in seen:
                continue
            seen.add(kind)
            if room._with_room(kind) <= chosen:  # (subset: stops at the first node not chosen)
                return Nowhere(pod_key, *room.counts(chosen), room.new_node(kind.tolerations))
    summary = summaries[0] if len(summaries) == 1 else _combined(summaries)
    for tolerations, sizes in summary.sizes:
        for least, count in sizes:
            total, per_node = room.slots_for(least, tolerations)
            slots = total - sum(per_node.get(name, 0) for name in chosen)
            if count > slots:
                return Crowded(count, least, slots, *room.counts(chosen), room.new_node(tolerations))
    return None


_Counts = tuple[tuple[int, tuple[Toleration, ...], tuple[tuple[Resources, int], ...]], ...]


_Sizes = tuple[tuple[tuple[Toleration, ...], tuple[tuple[Resources, int], ...]], ...]


@dataclass(eq=False, slots=True)
class _Moved:
    """What :func:`unplaceable` reads of the moved pods that only a NodeClaim stopping the solve
    could take otherwise (bound pods; the others could leave in a new NodeClaim): their kinds in
    the order first seen, each with its first pod's key; per toleration set (in the order first
    seen: its interned index, the tolerations) how many pods ask for each requests; and, made
    from those when first asked (a kind without room often answers before), the sizes the slot
    count tries, in order, each with how many of the pods ask for at least that much (none when
    fewer than two pods: the per-pod check has answered)."""

    kinds: tuple[tuple[_Kind, str], ...]
    counts: _Counts
    made_sizes: _Sizes | None = None

    @property
    def sizes(self) -> _Sizes:
        if self.made_sizes is None:
            self.made_sizes = tuple(
                (tolerations, _sizes(requests)) for _, tolerations, requests in self.counts
            )
        return self.made_sizes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Moved):
            return NotImplemented
        return (self.kinds, self.counts, self.sizes) == (other.kinds, other.counts, other.sizes)

    __hash__ = None  # type: ignore[assignment]


def _summary(
    kinds: Sequence[tuple[_Kind, str]], bounded: dict[int, tuple[tuple[Toleration, ...], Counter[Resources]]]
) -> _Moved:
    counts = tuple(
        (index, tolerations, tuple(requests.items())) for index, (tolerations, requests) in bounded.items()
    )
    return _Moved(tuple(kinds), counts)


def _combined(summaries: Sequence[_Moved]) -> _Moved:
    """The summary of the pods of several tuples in a row, from the tuples' summaries (all made
    since the intern tables were last cleared, so their tolerations indexes agree)."""
    kinds: list[tuple[_Kind, str]] = []
    seen: set[_Kind] = set()
    bounded: dict[int, tuple[tuple[Toleration, ...], Counter[Resources]]] = {}
    for summary in summaries:
        for kind, pod_key in summary.kinds:
            if kind not in seen:
                seen.add(kind)
                kinds.append((kind, pod_key))
        for index, tolerations, requests in summary.counts:
            held = bounded.get(index)
            if held is None:
                held = bounded[index] = (tolerations, Counter())
            for size, n in requests:
                held[1][size] += n
    return _summary(kinds, bounded)


# id(moved) -> (moved, the NodePools tuple, the stop's pools, its summary): the objects are kept
# so the ids stay theirs; a candidate's moved pods are one tuple from pass to pass
_MOVED: dict[int, tuple[Sequence[Pod], tuple[NodePool, ...], frozenset[str], _Moved]] = {}
MAX_MOVED = 8192  # the table is cleared when full


def _moved_of(
    room: _PassRoom, node_pools: tuple[NodePool, ...], moved: Sequence[Pod], stop_pools: frozenset[str]
) -> _Moved:
    if not isinstance(moved, tuple):  # only an immutable tuple can be recognised again
        return _moved(room, moved, stop_pools)
    entry = _MOVED.get(id(moved))
    if entry is not None and entry[0] is moved and entry[1] is node_pools and entry[2] == stop_pools:
        return entry[3]
    summary = _moved(room, moved, stop_pools)
    if len(_MOVED) >= MAX_MOVED:
        _MOVED.clear()
    # (room.pools is read from node_pools alone, so the summary holds for the same tuple)
    _MOVED[id(moved)] = (moved, node_pools, stop_pools, summary)
    return summary


def _moved(room: _PassRoom, moved: Sequence[Pod], stop_pools: frozenset[str]) -> _Moved:
    kinds: list[tuple[_Kind, str]] = []
    seen: set[_Kind] = set()
    bounded: dict[int, tuple[tuple[Toleration, ...], Counter[Resources]]] = {}
    for pod in moved:
        if not pod.node_name:
            continue  # only running pods are kept off nodes inside their window
        kind = _kind(pod)
        if not room.claims_stop(kind, stop_pools):
            continue  # it could leave in a new NodeClaim
        held = bounded.get(kind.tolerations_index)
        if held is None:
            held = bounded[kind.tolerations_index] = (kind.tolerations, Counter())
        held[1][kind.requests] += 1
        if kind not in seen:
            seen.add(kind)
            kinds.append((kind, pod.key))
    return _summary(kinds, bounded)


def _sizes(requests: Sequence[tuple[Resources, int]]) -> tuple[tuple[Resources, int], ...]:
    """For each size among the moved pods (``requests``: how many ask for each containers'
    requests), in order: the size with the pod's slot, and how many pods ask for at least it
    in every resource it names."""
    if sum(n for _, n in requests) < 2:
        return ()  # one pod alone: the per-pod check has answered
    ordered = sorted(requests, key=lambda item: sorted(item[0].items()))
    sizes = [(with_pod_slot(r), n) for r, n in ordered]
    out: list[tuple[Resources, int]] = []
    for least, _ in sizes:
        asked = [(k, v) for k, v in least.items() if v > 0]
        out.append((least, sum(n for size, n in sizes if all(size.get(k, 0) >= v for k, v in asked))))
    return tuple(out)


def _pass_room_of(snapshot: Snapshot, caches: SchedulingCaches) -> _PassRoom:
    return _ROOMS.get(snapshot, lambda: _pass_room(snapshot, caches))
