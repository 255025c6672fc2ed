"""The parts of topology counting that the solves of a disruption pass share.

A :class:`NodeView` remembers, per StateNode object, the domain one group key and node filter
register and count it in. A :class:`Whole` holds the nodes of a whole snapshot (before a
solve's ``without`` nodes are taken out) and each group's count over all of them, so a solve
of the pass only subtracts what it lacks. :func:`whole_of` finds the snapshot's ``Whole`` in
the caller's cache. Used by :mod:`karpy.core.scheduling.topology`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from karpy.core.scheduling.boundpods import BoundIndex
from karpy.core.scheduling.cache import IdentityCache, ObjectMemo, by_identity
from karpy.core.scheduling.topogroups import NodeFilter, TopologyGroup
from karpy.core.snapshot import StateNode
from karpy.model import labels
from karpy.model.objects import Pod
from karpy.model.requirements import Requirements

__all__ = [
    "FullCount",
    "NamesWithout",
    "NodeView",
    "Whole",
    "counted_domain",
    "node_view",
    "requirements_of",
    "whole_of",
]

# Label maps of nodes are immutable and shared (a Node's labels, a StateNode's cached merge), so
# their requirements are kept across solves by identity.
_LABEL_REQS: ObjectMemo[Requirements] = ObjectMemo(8192)


def requirements_of(node_labels: Mapping[str, str]) -> Requirements:
    return _LABEL_REQS.get(node_labels, lambda: Requirements.from_labels(node_labels))


class NodeView:
    """What one group key and node filter make of a node, remembered by StateNode identity: the
    domain its spread registers (``None`` if the filter rejects it or it lacks the key) and the
    domain its bound pods count in. Both are pure of the frozen StateNode, and the solves of a
    disruption pass (and the next passes) see the same StateNodes again."""

    def __init__(self, key: str, node_filter: NodeFilter) -> None:
        self.key = key
        self.node_filter = node_filter
        self._registered: dict[int, tuple[StateNode, str | None]] = {}
        self._counted: dict[int, tuple[StateNode, str | None]] = {}

    def registered(self, nodes: Sequence[StateNode]) -> list[str]:
        """The domains of ``nodes`` a new group registers, in node order (repeats included)."""
        out: list[str] = []
        memo = self._registered
        for node in nodes:
            found = memo.get(id(node))
            if found is None or found[0] is not node:
                found = self._remember(memo, node, self._registered_domain(node))
            if found[1] is not None:
                out.append(found[1])
        return out

    def counted(self, state: StateNode) -> str | None:
        """The domain the pods bound to ``state`` count in, or ``None`` if they do not count."""
        found = self._counted.get(id(state))
        if found is None or found[0] is not state:
            found = self._remember(self._counted, state, self._counted_domain(state))
        return found[1]

    @staticmethod
    def _remember(
        memo: dict[int, tuple[StateNode, str | None]], state: StateNode, domain: str | None
    ) -> tuple[StateNode, str | None]:
        if len(memo) >= _MAX_VIEW_NODES:
            memo.clear()
        found = memo[id(state)] = (state, domain)  # the entry keeps the state alive: ids stay valid
        return found

    def _registered_domain(self, node: StateNode) -> str | None:
        if node.node is None:
            return None
        nf = self.node_filter
        if nf.active and not nf.matches(node.node.taints, requirements_of(node.node.labels), frozenset()):
            return None
        return node.labels.get(self.key)

    def _counted_domain(self, state: StateNode) -> str | None:
        return counted_domain(state, self.key, self.node_filter, _shared_requirements)


def counted_domain(
    state: StateNode,
    key: str,
    node_filter: NodeFilter,
    requirements_of: Callable[[str, Mapping[str, str]], Requirements],
) -> str | None:
    """The domain of ``key`` the pods bound to ``state`` count in (a node without a hostname label
    is its own hostname domain), or ``None`` if it has none or ``node_filter`` rejects it."""
    node_labels = state.labels
    domain = node_labels.get(key)
    if domain is None and key == labels.HOSTNAME:
        domain = state.name
    if domain is None:
        return None
    taints = state.node.taints if state.node is not None else state.taints
    if node_filter.active and not node_filter.matches(
        taints, requirements_of(state.name, node_labels), frozenset()
    ):
        return None
    return domain


def _shared_requirements(_name: str, node_labels: Mapping[str, str]) -> Requirements:
    return requirements_of(node_labels)


_MAX_VIEW_NODES = 4096  # StateNodes remembered per view (a few passes of a 1,000-node cluster)
_MAX_VIEWS = 64
_VIEWS: dict[tuple[str, NodeFilter], NodeView] = {}


def node_view(key: str, node_filter: NodeFilter) -> NodeView:
    found = _VIEWS.get((key, node_filter))
    if found is None:
        if len(_VIEWS) >= _MAX_VIEWS:
            _VIEWS.clear()
        found = _VIEWS[(key, node_filter)] = NodeView(key, node_filter)
    return found


@dataclass(slots=True)
class FullCount:
    """One group's count over a whole snapshot, excluding no pod: per domain, the nodes that
    register it and the matched bound pods counted in it."""

    registered: dict[str, int]
    pods: dict[str, int]


class Whole:
    """The nodes of a whole snapshot that the solves of a pass take some nodes out of
    (``without``), with the group counts over all of them (:meth:`count`). A solve's count is
    the whole count minus the nodes it lacks and the pods it schedules; the order a group
    learns its domains in does not matter (every reader sorts, or takes a minimum or a set)."""

    __slots__ = ("active", "active_names", "by_name", "counts", "nodes", "pods", "registered", "usable")

    def __init__(
        self, active: tuple[StateNode, ...], nodes: tuple[StateNode, ...], pods: tuple[Pod, ...]
    ) -> None:
        self.active, self.nodes, self.pods = active, nodes, pods  # kept alive: the cache's ids stay valid
        self.by_name = {n.name: n for n in nodes}
        self.active_names = frozenset(n.name for n in active)
        # repeated names, or a name with ":" (see Topology._plain): only the plain count will do
        self.usable = len(self.by_name) == len(nodes) and ":" not in "".join(self.by_name)
        self.counts: dict[object, FullCount] = {}
        # id(view) -> (the view, the active nodes per domain it registers): the same for every
        # group of one key and node filter (readers never change it)
        self.registered: dict[int, tuple[NodeView, dict[str, int]]] = {}

    def count(self, key: object, group: TopologyGroup, view: NodeView, bound: BoundIndex) -> FullCount:
        found = self.counts.get(key)
        if found is not None:
            return found
        known = self.registered.get(id(view))
        if known is not None and known[0] is view:
            registered = known[1]
        else:
            registered = {}
            for domain in view.registered(self.active):
                registered[domain] = registered.get(domain, 0) + 1
            if len(self.registered) >= _MAX_VIEWS:
                self.registered.clear()
            self.registered[id(view)] = (view, registered)
        pods: dict[str, int] = {}
        if group.selector is not None:
            for matched in bound.matching(group.namespaces, group.selector):
                for name, count in matched.per_node.items():
                    state = self.by_name.get(name)
                    where = view.counted(state) if state is not None else None
                    if where is not None:
                        pods[where] = pods.get(where, 0) + count
        if len(self.counts) >= _MAX_WHOLE_COUNTS:
            self.counts.clear()
        found = self.counts[key] = FullCount(registered, pods)
        return found


class NamesWithout:
    """The whole snapshot's nodes by name, less the ``without`` ones: a solve's nodes by name."""

    __slots__ = ("by_name", "without")

    def __init__(self, by_name: dict[str, StateNode], without: frozenset[str]) -> None:
        self.by_name, self.without = by_name, without

    def get(self, name: str) -> StateNode | None:
        return None if name in self.without else self.by_name.get(name)


_MAX_WHOLE_COUNTS = 256  # groups remembered per whole snapshot


def whole_of(
    cache: IdentityCache[Whole],
    active: tuple[StateNode, ...],
    nodes: tuple[StateNode, ...],
    pods: tuple[Pod, ...],
) -> Whole:
    """The :class:`Whole` of these node and pod tuples, from ``cache`` (a pass uses one, a
    provisioning solve another)."""
    return cache.get(
        (by_identity(active), by_identity(nodes), by_identity(pods)), lambda: Whole(active, nodes, pods)
    )
