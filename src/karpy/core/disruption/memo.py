"""What a disruption pass computes that does not depend on ``now``, kept from pass to pass.

A :class:`Memo` belongs to its caller (the disruption controller keeps one for its lifetime)
and is handed to :func:`karpy.core.disruption.compute`. It keeps, per object of the frozen
snapshot values: the :class:`~karpy.core.disruption.candidates.PodFacts` of a Pod, which PDBs
select it, the :class:`~karpy.core.disruption.candidates.NodeFacts` of a node (by its Node
and NodeClaim label maps, name and pod objects), the price of an instance type for a zone
and capacity type, a NodePool's hash, the NodePool requirements a node's labels conflict
with (by value), the PDB limits of a (PDBs, pods) pair (the next pair's counted from
the pods that differ), and each NodePool's instance types by name. A node's NodeFacts and
drift reason are also kept on its StateNode, with a tag of this memo (and of the PDBs'
selection, or of the NodePool values the reason read). Entries are keyed by
object identity and hold their key objects, so an id is never reused while its entry lives,
and a hit is checked with ``is``: an object that is not the same is computed afresh (model
objects are frozen and their maps never mutated). What depends on ``now`` (do-not-disrupt
durations, remaining lifetime, consolidateAfter, budgets) or on other objects (what a PDB
allows now) stays per pass.

Every few passes (``passes_per_generation``) :meth:`Memo.begin` starts a generation: entries
used in neither the previous nor the current generation are dropped, so a memo holds the
objects of at most twice that many passes. A memo changes no decision: a new memo per pass
(what ``compute`` uses when given none) computes the same values, only slower.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.core.disruption import candidates as cand
from karpy.core.disruption import drift
from karpy.core.disruption import pdbs as pdbs_mod
from karpy.core.disruption.types import Decision
from karpy.core.scheduling.caches import SchedulingCaches
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod, PodDisruptionBudget

__all__ = ["LastPass", "Memo"]


@dataclass(frozen=True, slots=True)
class LastPass:
    """The decision of the last pass, kept for passes over the same objects before ``until``."""

    snapshot: Snapshot  # kept alive: the identities in ``ids`` stay valid
    ids: tuple[object, ...]  # karpy.core.disruption.horizon.state_ids
    since: float  # the pass's time
    until: float  # the first time-derived change after it
    decision: Decision
    skip: frozenset[str] = frozenset()  # the consolidation methods the pass left out


_TypesByName = Mapping[str, Mapping[str, InstanceType]]
_MAX_TOKENS = 1024  # NodePool objects and values remembered for drift reasons (cleared when full)


def _same(old: tuple[object, ...], new: tuple[object, ...]) -> bool:
    """The same objects in the same order."""
    return old is new or (len(old) == len(new) and all(map(operator.is_, old, new)))


def _changes(old: tuple[Pod, ...], new: tuple[Pod, ...]) -> tuple[list[Pod], list[Pod]]:
    """(removed, added) such that ``new`` holds the pods of ``old`` less ``removed`` plus ``added``
    (as multisets): a merge by pod key, stepping over a pod both tuples hold at the same step
    (the same object). Every step consumes a pod of ``old`` (kept or removed) or of ``new`` (kept
    or added), so the equation holds for any two tuples; for the cluster's tuples (sorted by key)
    only the pods that changed are reported, without hashing every pod as a set difference would.
    """
    removed: list[Pod] = []
    added: list[Pod] = []
    i = j = 0
    n, m = len(old), len(new)
    while i < n and j < m:
        a, b = old[i], new[j]
        if a is b:
            i += 1
            j += 1
            continue
        ka, kb = a.key, b.key
        if ka == kb:  # the same pod, changed
            removed.append(a)
            added.append(b)
            i += 1
            j += 1
        elif ka < kb:
            removed.append(a)
            i += 1
        else:
            added.append(b)
            j += 1
    removed.extend(old[i:])
    added.extend(new[j:])
    return removed, added


class _Store:
    """Two generations of one table: a hit in the previous one moves to the current one."""

    __slots__ = ("cur", "old")

    def __init__(self) -> None:
        self.cur: dict[Any, Any] = {}
        self.old: dict[Any, Any] = {}

    def rotate(self) -> None:
        self.old = self.cur
        self.cur = {}

    def get(self, key: Any) -> Any:
        entry = self.cur.get(key)
        if entry is None:
            entry = self.old.get(key)
            if entry is not None:
                self.cur[key] = entry
        return entry

    def __len__(self) -> int:
        return len(self.cur.keys() | self.old.keys())


class Memo:
    """Now-independent facts of disruption passes, by object identity (see the module doc)."""

    def __init__(self, passes_per_generation: int = 8) -> None:
        self._per_generation = max(1, passes_per_generation)
        self._passes = 0
        self._pods = _Store()  # id(pod) -> [pod, PodFacts | None, token, PDB indices | None]
        self._nodes = _Store()  # (id(node labels), id(claim labels)) -> (..., name, pods, token, NodeFacts)
        self._prices = _Store()  # (id(type), zone/capacity-type labels) -> (type, price)
        self._hashes = _Store()  # id(pool) -> (pool, hash)
        self._conflicts = _Store()  # (node labels, pool requirements, pool labels) -> (conflicts,)
        # (id(Node labels), id(NodeClaim labels), id(drift token), claim-only name) -> (those, conflicts)
        self._conflict_ids = _Store()
        self._stores = (
            self._pods,
            self._nodes,
            self._prices,
            self._hashes,
            self._conflicts,
            self._conflict_ids,
        )
        self._pdbs: tuple[PodDisruptionBudget, ...] = ()
        self._pdb_key: tuple[object, ...] = ()
        self._token = 0  # changes when which PDBs select a pod may change
        self._tag = object()  # this memo at this token: what a StateNode keeps its facts with
        self._limits: tuple[tuple[PodDisruptionBudget, ...], tuple[Pod, ...], pdbs_mod.Limits] | None = None
        # the instance types of each NodePool by name, for the type tuples they were built from
        self._types: tuple[tuple[tuple[str, tuple[InstanceType, ...]], ...], _TypesByName] = ((), {})
        self.last_pass: LastPass | None = None  # set by karpy.core.disruption.compute
        self.scheduling = SchedulingCaches()  # what the pass's solves share with the next passes'
        # drift reasons: NodePool values -> the one token for them; id(pool) -> (pool, its token)
        self._drift_tokens: dict[tuple[object, ...], tuple[object, ...]] = {}
        self._drift_ids: dict[int, tuple[NodePool, tuple[object, ...]]] = {}

    def begin(self, snapshot: Snapshot) -> None:
        """Start a pass over ``snapshot`` (every few passes a new generation) with its PDBs."""
        if self._passes % self._per_generation == 0:
            for store in self._stores:
                store.rotate()
        self._passes += 1
        pdbs = snapshot.pdbs
        if pdbs is not self._pdbs:
            key = tuple((pdb.namespace, pdb.selector) for pdb in pdbs)
            if key != self._pdb_key:
                self._pdb_key = key
                self._token += 1
                self._tag = object()
            self._pdbs = pdbs

    def size(self) -> int:
        """Entries held (for tests)."""
        return sum(len(store) for store in self._stores)

    # -- pods --------------------------------------------------------------------------------
    def _pod_entry(self, pod: Pod) -> list[Any]:
        key = id(pod)
        entry: list[Any] | None = self._pods.cur.get(key)
        if entry is None:
            entry = self._pods.old.get(key)
            if entry is None or entry[0] is not pod:
                entry = [pod, None, None, None]
            self._pods.cur[key] = entry
        elif entry[0] is not pod:  # pragma: no cover - the entry keeps its pod alive
            entry = self._pods.cur[key] = [pod, None, None, None]
        return entry

    def pod(self, pod: Pod) -> cand.PodFacts:
        entry = self._pods.cur.get(id(pod))
        if entry is None or entry[0] is not pod:
            entry = self._pod_entry(pod)
        facts: cand.PodFacts | None = entry[1]
        if facts is None:
            facts = entry[1] = cand.pod_facts(pod)
        return facts

    def selected(self, pod: Pod) -> tuple[int, ...]:
        """:func:`karpy.core.disruption.pdbs.selecting` over the PDBs of the current pass."""
        entry = self._pods.cur.get(id(pod))
        if entry is None or entry[0] is not pod:
            entry = self._pod_entry(pod)
        if entry[2] != self._token:
            entry[2] = self._token
            entry[3] = pdbs_mod.selecting(self._pdbs, pod)
        chosen: tuple[int, ...] = entry[3]
        return chosen

    def limits(self, pdbs: tuple[PodDisruptionBudget, ...], pods: tuple[Pod, ...]) -> pdbs_mod.Limits:
        """The PDB limits of the current pass (``pdbs`` must be the snapshot's, as given to begin).

        After the last pass's limits over the same PDB objects, only the pods that left or came
        are counted (:func:`_changes`).
        """
        cached = self._limits
        same_pdbs = cached is not None and _same(cached[0], pdbs)
        if cached is not None and same_pdbs and _same(cached[1], pods):
            return cached[2]
        if cached is not None and same_pdbs:
            removed, added = _changes(cached[1], pods)
            limits = cached[2].with_pods(removed, added)
        else:
            limits = pdbs_mod.Limits(pdbs, pods, selected=self.selected)
        self._limits = (pdbs, pods, limits)
        return limits

    def types_by_name(self, instance_types: Mapping[str, tuple[InstanceType, ...]]) -> _TypesByName:
        """Each NodePool's instance types by name; the same mapping while the same type tuples come."""
        key, found = self._types
        if len(key) == len(instance_types) and all(instance_types.get(name) is its for name, its in key):
            return found
        found = {name: {it.name: it for it in its} for name, its in instance_types.items()}
        self._types = (tuple(instance_types.items()), found)
        return found

    # -- nodes -------------------------------------------------------------------------------
    def node(self, node: StateNode) -> cand.NodeFacts:
        """NodeFacts read the node's labels and pods: reused while those are the same objects
        (first as kept on the StateNode itself, with this memo's tag for the PDBs' selection)."""
        held = node._derived.get("facts")
        if held is not None and held[0] is self._tag:
            kept: cand.NodeFacts = held[1]
            return kept
        node_labels = node.node.labels if node.node is not None else None
        claim_labels = node.claim.labels if node.claim is not None else None
        key = (id(node_labels), id(claim_labels))
        entry = self._nodes.get(key)
        pods = node.pods
        if (
            entry is not None
            and entry[0] is node_labels
            and entry[1] is claim_labels
            and entry[2] == node.name
            and entry[4] == self._token
            and _same(entry[3], pods)
        ):
            facts: cand.NodeFacts = entry[5]
        else:
            facts = cand.node_facts(node, self.pod, self.selected)
            self._nodes.cur[key] = (node_labels, claim_labels, node.name, pods, self._token, facts)
        node._derived["facts"] = (self._tag, facts)
        return facts

    def price(self, it: InstanceType, price_labels: tuple[tuple[str, str], ...]) -> float | None:
        key = (id(it), price_labels)
        entry = self._prices.get(key)
        if entry is not None and entry[0] is it:
            found: float | None = entry[1]
            return found
        found = cand.price(it, price_labels)
        self._prices.cur[key] = (it, found)
        return found

    # -- drift -------------------------------------------------------------------------------
    def pool_hash(self, pool: NodePool) -> str:
        key = id(pool)
        entry = self._hashes.get(key)
        if entry is not None and entry[0] is pool:
            found: str = entry[1]
            return found
        found = drift.pool_hash(pool)
        self._hashes.cur[key] = (pool, found)
        return found

    def conflicts(self, node: StateNode, pool: NodePool) -> str | None:
        """:func:`karpy.core.disruption.drift.requirement_conflicts`, by value.

        It reads only the node's labels and the pool's requirements and template labels (all
        in order: the conflicts list follows it), and a NodePool object is replaced on every
        status update, so the key is those values. Before building that key, the same label
        maps and NodePool values (their token: one object per distinct values, whatever the
        NodePool object) as an earlier call give that call's answer.
        """
        node_labels = node.node.labels if node.node is not None else None
        claim_labels = node.claim.labels if node.claim is not None else None
        token = self._drift_token(pool)
        # a StateNode's labels are made of these two maps (and its name, without a Node): the
        # same objects, the same labels, whatever else of the StateNode changed
        ident = (id(node_labels), id(claim_labels), id(token), node.name if node_labels is None else "")
        held = self._conflict_ids.get(ident)
        if held is not None and held[0] is node_labels and held[1] is claim_labels and held[2] is token:
            cached: str | None = held[3]
            return cached
        key = (tuple(node.labels.items()), pool.requirements, tuple(pool.labels.items()))
        entry = self._conflicts.get(key)
        if entry is not None:
            found: str | None = entry[0]
        else:
            found = drift.requirement_conflicts(node, pool)
            self._conflicts.cur[key] = (found,)
        self._conflict_ids.cur[ident] = (node_labels, claim_labels, token, found)
        return found

    def drift_reason(self, node: StateNode, pool: NodePool) -> str | None:
        """:func:`karpy.core.disruption.drift.drift_reason` with the pool hash and conflicts memoized.

        The reason reads the node's (immutable) claim and labels, and of the NodePool its hash,
        requirements and template labels: it is kept on the StateNode with this memo's token
        for those NodePool values (one object per distinct values, whatever the NodePool object).
        """
        token = self._drift_token(pool)
        held = node._derived.get("drift")
        if held is not None and held[0] is token:
            kept: str | None = held[1]
            return kept
        found = drift.drift_reason(node, pool, hash_of=self.pool_hash, conflicts_of=self.conflicts)
        node._derived["drift"] = (token, found)
        return found

    def _drift_token(self, pool: NodePool) -> tuple[object, ...]:
        held = self._drift_ids.get(id(pool))
        if held is not None and held[0] is pool:
            token: tuple[object, ...] = held[1]
            return token
        values = (self.pool_hash(pool), pool.requirements, tuple(pool.labels.items()))
        if len(self._drift_tokens) >= _MAX_TOKENS:
            self._drift_tokens.clear()
        token = self._drift_tokens.setdefault(values, values)
        if len(self._drift_ids) >= _MAX_TOKENS:
            self._drift_ids.clear()
        self._drift_ids[id(pool)] = (pool, token)
        return token
