"""How :class:`~karpy.state.cluster.Cluster` builds and keeps its StateNodes.

:class:`StateNodeCache` is the part of ``Cluster`` behind :meth:`Cluster.state_nodes
<StateNodeCache.state_nodes>`: Nodes are joined to their NodeClaims by providerID (else an
unlaunched claim naming the Node), and every unjoined NodeClaim is a StateNode of its own.
The result is cached under the state version and the interval of times over which no
nomination flips. After a change that keeps every join (bound pods, Nodes and NodeClaims
keeping their providerID and nodeName, deletion marks, nominations) only the StateNodes
holding the names concerned are rebuilt; any other change walks every Node and NodeClaim,
reusing each ``StateNode`` whose parts are unchanged. The indexes it reads (bound pods,
claims by providerID and by node name) are kept by ``Cluster.apply``.

Also :func:`replaced` and :func:`deletion_marked`, which the controllers use to compare
StateNodes and their marks.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from karpy.core.snapshot import StateNode
from karpy.model.objects import Node, NodeClaim, Pod

__all__ = ["NOMINATIONS_KEPT", "StateNodeCache", "deletion_marked", "replaced"]

NOMINATIONS_KEPT = 1024  # nominations held before the expired ones of names gone are dropped


def replaced(current: Sequence[object], previous: Sequence[object]) -> list[int]:
    """The places at which ``current`` holds another object than ``previous``, compared by identity
    (two tuples the cluster handed out at two moments, of the same length: StateNodes, claims in
    name order). The comparison runs in C: cheap next to a walk that looks at every entry."""
    return list(itertools.compress(range(len(current)), map(operator.is_not, current, previous)))


def deletion_marked(marked: set[str], node_name: str | None, claim: NodeClaim | None) -> bool:
    """A StateNode's deletion mark: a Node's (``node_name``) is its own name's or its claim's; an
    unjoined claim's (``node_name`` None) is the claim name's alone."""
    return (node_name is not None and node_name in marked) or (claim is not None and claim.name in marked)


def _is_nominated(
    nominations: dict[str, float], node_name: str | None, claim: NodeClaim | None, now: float
) -> bool:
    """A StateNode's nomination at ``now``: a Node's (``node_name``) is its own name's or its
    claim's; an unjoined claim's (``node_name`` None) is the claim name's alone."""
    return (node_name is not None and nominations.get(node_name, 0.0) > now) or (
        claim is not None and nominations.get(claim.name, 0.0) > now
    )


@dataclass(slots=True)
class _Build:
    """What a full build of the StateNodes gathers."""

    out: list[StateNode] = field(default_factory=list)
    joined: set[str] = field(default_factory=set)  # claims joined to a Node
    node_states: dict[str, StateNode] = field(default_factory=dict)
    claim_states: dict[str, StateNode] = field(default_factory=dict)
    positions: dict[str, list[int]] = field(default_factory=dict)
    claim_positions: dict[str, list[int]] = field(default_factory=dict)


class StateNodeCache:
    """The StateNodes of a :class:`~karpy.state.cluster.Cluster` (a base class of it, which
    sets every attribute below up in ``__post_init__`` and keeps the indexes and the change
    sets as objects are applied)."""

    nodes: dict[str, Node]
    claims: dict[str, NodeClaim]
    nominations: dict[str, float]
    marked_for_deletion: set[str]
    _state_version: int
    _by_provider: dict[str, set[str]]
    _unlaunched: dict[str, set[str]]
    _nodes_out: tuple[StateNode, ...]
    _nodes_key: tuple[int, float, float]
    _node_states: dict[str, StateNode]
    _claim_states: dict[str, StateNode]
    _pods_moved: set[str] | None
    _claims_changed: set[str]
    _nodes_changed: set[str]
    _marks_changed: set[str]
    _noms_changed: set[str]
    _nodes_now: float
    _nominations_limit: int
    _positions: dict[str, list[int]]
    _claim_positions: dict[str, list[int]]

    if TYPE_CHECKING:

        def node_names(self) -> tuple[str, ...]: ...

        def claim_names(self) -> tuple[str, ...]: ...

        def _pick(self, names: set[str] | None, *, last: bool) -> NodeClaim | None: ...

        def _bound_pods(self, node_name: str) -> tuple[Pod, ...]: ...

    def state_nodes(self, now: float = 0.0) -> tuple[StateNode, ...]:
        """Every Node (joined to its NodeClaim) by name, then every unjoined NodeClaim by name.

        A Node's claim is the last one (in the order of ``claims``) with its providerID, else
        the first one without a providerID that names the Node. ``nominated`` is evaluated at
        ``now``. The same tuple comes back while nothing it reads changed (and ``now`` crossed
        no nomination deadline); a ``StateNode`` whose fields are all unchanged is reused.
        """
        version, lo, hi = self._nodes_key
        within = lo <= now < hi
        if within and version == self._state_version:
            return self._nodes_out
        then = self._nodes_now
        # (past the 0.0 default of a name without a nomination, every name may flip: a full build)
        if self._pods_moved is not None and (within or (then < 0.0) == (now < 0.0)):
            if not within:  # a deadline crossed: only the names nominated until then flip
                self._noms_changed.update(
                    name for name, until in self.nominations.items() if (until > then) != (until > now)
                )
            # the same deadlines, and ``now`` between the same two: the same interval
            return self._repod(now, (lo, hi) if within and not self._noms_changed else None)
        return self._rebuild(now)

    def _rebuild(self, now: float) -> tuple[StateNode, ...]:
        """Every StateNode at ``now``, walking every Node and NodeClaim (an unchanged one reused)."""
        build = _Build()
        for name in self.node_names():
            self._add_node(build, name, now)
        for claim_name in self.claim_names():
            if claim_name not in build.joined:
                self._add_claim(build, claim_name, now)
        self._node_states = build.node_states
        self._claim_states = build.claim_states
        result = tuple(build.out)
        if len(result) == len(self._nodes_out) and all(
            a is b for a, b in zip(result, self._nodes_out, strict=True)
        ):
            result = self._nodes_out
        self._nodes_out = result
        self._positions = build.positions
        self._claim_positions = build.claim_positions
        self._pods_moved = set()
        self._built(now)
        return result

    def _add_node(self, build: _Build, name: str, now: float) -> None:
        """The StateNode of the Node ``name``, joined to its claim."""
        node = self.nodes[name]
        claim = self._pick(self._by_provider.get(node.provider_id), last=True) if node.provider_id else None
        if claim is None:
            claim = self._pick(self._unlaunched.get(name), last=False)
        if claim is not None:
            build.joined.add(claim.name)
            build.claim_positions.setdefault(claim.name, []).append(len(build.out))
        pods = self._bound_pods(name)
        is_marked = deletion_marked(self.marked_for_deletion, name, claim)
        nominated = _is_nominated(self.nominations, name, claim, now)
        state = self._node_states.get(name)
        if not (
            state is not None
            and state.node is node
            and state.claim is claim
            and state.pods is pods
            and state.marked_for_deletion == is_marked
            and state.nominated == nominated
        ):
            state = StateNode(name, node, claim, pods, is_marked, nominated)
        build.node_states[name] = state
        build.positions[name] = [len(build.out)]
        build.out.append(state)

    def _add_claim(self, build: _Build, claim_name: str, now: float) -> None:
        """The StateNode of the NodeClaim ``claim_name``, which no Node joined."""
        claim = self.claims[claim_name]
        node_name = claim.node_name or claim.name
        pods = self._bound_pods(node_name)
        is_marked = deletion_marked(self.marked_for_deletion, None, claim)
        nominated = _is_nominated(self.nominations, None, claim, now)
        state = self._claim_states.get(claim_name)
        if not (
            state is not None
            and state.claim is claim
            and state.name == node_name
            and state.pods is pods
            and state.marked_for_deletion == is_marked
            and state.nominated == nominated
        ):
            state = StateNode(node_name, None, claim, pods, is_marked, nominated)
        build.claim_states[claim_name] = state
        build.positions.setdefault(node_name, []).append(len(build.out))
        build.claim_positions[claim_name] = [len(build.out)]
        build.out.append(state)

    def _built(self, now: float, interval: tuple[float, float] | None = None) -> None:
        """``_nodes_out`` holds for ``now``: key it with the times it holds for (``interval``,
        when known), and forget the changes it took in."""
        if len(self.nominations) > self._nominations_limit:  # (before the walk below)
            self._prune_nominations(now)
        if interval is None:
            # ``nominated`` is the same for every time in [lo, hi): no deadline (nor the 0.0
            # default of a name without one) lies in (now, t] or (t, now]
            lo, hi = -math.inf, math.inf
            for until in (0.0, *self.nominations.values()):
                if until > now:
                    hi = min(hi, until)
                else:
                    lo = max(lo, until)
        else:
            lo, hi = interval
        self._nodes_key = (self._state_version, lo, hi)
        self._nodes_now = now
        assert self._pods_moved is not None
        self._pods_moved.clear()
        self._claims_changed.clear()
        self._nodes_changed.clear()
        self._marks_changed.clear()
        self._noms_changed.clear()

    def _prune_nominations(self, now: float) -> None:
        """Drop the nominations that no StateNode can read any more: expired at ``now`` and of a
        name no Node or NodeClaim has. Every launch nominates its claim, so without this the
        table (walked by full builds) would grow for as long as the process runs. Run when the
        table has doubled since the last pruning, so its cost is spread over the nominations."""
        nodes, claims, nominations = self.nodes, self.claims, self.nominations
        for name in [
            n for n, until in nominations.items() if until <= now and n not in nodes and n not in claims
        ]:
            del nominations[name]
        self._nominations_limit = max(NOMINATIONS_KEPT, 2 * len(nominations))

    def _repod(self, now: float, interval: tuple[float, float] | None) -> tuple[StateNode, ...]:
        """``_nodes_out`` at ``now`` after only bound pods, Nodes and NodeClaims keeping their
        joins, deletion marks and nominations (or ``now`` past a deadline) changed: the StateNodes
        holding those names anew."""
        moved = self._pods_moved
        assert moved is not None
        out = list(self._nodes_out)
        changed = False
        for name in self._nodes_changed:
            node = self.nodes[name]
            for i in self._positions.get(name, ()):
                old = out[i]
                if old.node is not None and old.node is not node:  # (the other places: unjoined claims)
                    self._replace(out, i, node, old.claim, old.pods)
                    changed = True
        for name in moved:
            places = self._positions.get(name)
            if not places:
                continue
            pods = self._bound_pods(name)
            for i in places:
                old = out[i]
                if old.pods is not pods:
                    self._replace(out, i, old.node, old.claim, pods)
                    changed = True
        for claim_name in self._claims_changed:
            claim = self.claims[claim_name]
            for i in self._claim_positions.get(claim_name, ()):
                old = out[i]
                if old.claim is not claim:
                    self._replace(out, i, old.node, claim, old.pods)
                    changed = True
        marked = self.marked_for_deletion
        for name in self._marks_changed:
            for i in {*self._positions.get(name, ()), *self._claim_positions.get(name, ())}:
                old = out[i]
                is_marked = deletion_marked(marked, old.name if old.node is not None else None, old.claim)
                if is_marked != old.marked_for_deletion:
                    self._replace(out, i, old.node, old.claim, old.pods, marked=is_marked)
                    changed = True
        nominations = self.nominations
        for name in self._noms_changed:
            for i in {*self._positions.get(name, ()), *self._claim_positions.get(name, ())}:
                old = out[i]
                nominated = _is_nominated(
                    nominations, old.name if old.node is not None else None, old.claim, now
                )
                if nominated != old.nominated:
                    self._replace(out, i, old.node, old.claim, old.pods, nominated=nominated)
                    changed = True
        if changed:
            self._nodes_out = tuple(out)
        self._built(now, interval)
        return self._nodes_out

    def _replace(
        self,
        out: list[StateNode],
        i: int,
        node: Node | None,
        claim: NodeClaim | None,
        pods: tuple[Pod, ...],
        *,
        marked: bool | None = None,
        nominated: bool | None = None,
    ) -> None:
        """Put a StateNode with these parts and the flags of ``out[i]`` (``marked``, ``nominated``:
        this deletion mark, this nomination instead) at ``i``."""
        old = out[i]
        is_marked = old.marked_for_deletion if marked is None else marked
        is_nominated = old.nominated if nominated is None else nominated
        out[i] = state = StateNode(old.name, node, claim, pods, is_marked, is_nominated)
        if state.node is not None:
            self._node_states[state.name] = state
        else:
            assert state.claim is not None
            self._claim_states[state.claim.name] = state
