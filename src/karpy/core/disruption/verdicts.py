"""Consolidation verdicts kept from pass to pass while everything they read stays the same.

A disruption pass runs every 10 s while the cluster state is dirty, and most passes of a busy
day see the very same nodes, pods and NodePools as the pass before (what dirtied the state
changed nothing a consolidation solve reads, or was undone). ``consolidation.compute`` is a
pure function of the snapshot's objects, the consolidateAfter window of each node at the
pass's time, the candidates and the method, so a verdict found for the same inputs is the
verdict. :class:`Verdicts` files them under

- the *state*: :func:`~karpy.core.disruption.horizon.state_ids` (the identity of every node,
  pod, NodePool, instance-type tuple, DaemonSet and PDB of the snapshot, and
  consolidation's switch ``EARLY_STOP``), its namespaces, well-known
  labels and settings (by equality), the window flags of the existing nodes and the pods of
  leaving nodes a solve places; an entry
  keeps its snapshot alive, so the identities stay valid;
- the *candidates*: each one's node, NodePool, instance type and pods (by identity), price,
  capacity type, zone and rescheduling cost; with a ``Balanced`` NodePool among them, the
  price and cost of every candidate of the pass (the score reads them); and the method.

Only the latest few states are kept, each with a bounded table. Verdicts the room check gives
before any solve (:mod:`.room`) are cheaper to find again than to file, and are not filed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from karpy.core.disruption import candidates as cand_mod
from karpy.core.disruption import horizon
from karpy.core.disruption.types import Candidate, Command
from karpy.core.scheduling.cache import ObjectMemo
from karpy.core.scheduling.caches import SchedulingCaches
from karpy.core.scheduling.existing import existing_places
from karpy.core.snapshot import Snapshot

__all__ = ["MAX_STATES", "MAX_VERDICTS", "Verdicts"]

MAX_STATES = 4  # states remembered (a pass, its validation recompute, the expired recompute)
MAX_VERDICTS = 8192  # verdicts per state (cleared at once when full)

Verdict = tuple[Command | None, str]


@dataclass(slots=True)
class _State:
    ids: tuple[object, ...]  # identities of what the snapshot holds, and the window flags
    snapshot: Snapshot  # kept alive: the identities stay valid while the entry lives
    # candidate key -> (the candidates, kept alive: their identities stay valid; the verdict)
    found: dict[tuple[object, ...], tuple[Sequence[Candidate], Verdict]] = field(default_factory=dict)

    def same(self, ids: tuple[object, ...], snapshot: Snapshot) -> bool:
        return self.ids == ids and horizon.same_values(self.snapshot, snapshot)


def _ids(snapshot: Snapshot, early_stop: bool, caches: SchedulingCaches) -> tuple[object, ...]:
    windows = existing_places(snapshot, caches.places).inside_windows(snapshot.node_pools, snapshot.now)
    # the pods of leaving nodes a solve places (a do-not-disrupt duration there may end meanwhile)
    leaving = tuple(tuple(map(id, pods)) for _, pods in cand_mod.leaving_pods(snapshot))
    return (windows, leaving, *horizon.state_ids(snapshot, early_stop))  # the switches last


def _candidate_key(
    chosen: Sequence[Candidate], all_candidates: Sequence[Candidate], method: str
) -> tuple[object, ...]:
    parts: list[object] = [method]
    balanced = False
    for c in chosen:
        parts.append(
            (
                id(c.node),
                id(c.pool),
                id(c.instance_type),
                c.price,
                c.capacity_type,
                c.zone,
                c.reschedule_cost,
                tuple(map(id, c.moved)),
            )
        )
        balanced = balanced or c.pool.disruption.consolidation_policy == "Balanced"
    if balanced:
        parts.append(tuple((c.pool.name, c.price, c.reschedule_cost) for c in all_candidates))
    return tuple(parts)


class Verdicts:
    """``get(snapshot, chosen, all_candidates, method, compute)``: the remembered verdict for the
    same inputs, else ``compute()``'s, remembered. ``computed`` counts the verdicts computed (for
    tests and profiles: a compiled core calls ``compute`` without any module attribute lookup)."""

    def __init__(self) -> None:
        self._states: list[_State] = []
        self._current: ObjectMemo[_State] = ObjectMemo(MAX_STATES)
        self.computed = 0

    def get(
        self,
        snapshot: Snapshot,
        chosen: Sequence[Candidate],
        all_candidates: Sequence[Candidate],
        method: str,
        early_stop: bool,
        compute: Callable[[], Verdict],
        caches: SchedulingCaches,
    ) -> Verdict:
        state = self._current.get(snapshot, lambda: self._state(snapshot, early_stop, caches))
        if state.ids[-1:] != horizon.switches(early_stop):  # a switch changed since
            state = self._state(snapshot, early_stop, caches)
        key = _candidate_key(chosen, all_candidates, method)
        found = state.found.get(key)
        if found is not None:
            return found[1]
        verdict = compute()
        self.computed += 1
        if len(state.found) >= MAX_VERDICTS:
            state.found.clear()
        state.found[key] = (tuple(chosen), verdict)
        return verdict

    def _state(self, snapshot: Snapshot, early_stop: bool, caches: SchedulingCaches) -> _State:
        ids = _ids(snapshot, early_stop, caches)
        for i, state in enumerate(self._states):
            if state.same(ids, snapshot):
                self._states.append(self._states.pop(i))
                return state
        state = _State(ids, snapshot)
        self._states.append(state)
        del self._states[:-MAX_STATES]
        return state

    def clear(self) -> None:
        self._states.clear()
        self._current.clear()
