"""PodDisruptionBudgets as the disruption core sees them: which pods may be evicted now.

A pod is blocked when a PDB selecting it allows no disruption (``status.disruptionsAllowed``
when the status is known, otherwise computed from ``minAvailable``/``maxUnavailable`` and the
ready pods it selects), unless the pod is not Ready and the PDB's
``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``. A pod selected by more than one PDB is
blocked too: the Eviction API rejects it. A PDB that never allows an eviction
(:func:`fully_blocking`) also keeps its pods out of the solves that plan where moved pods go
(:meth:`Limits.fully_blocked`).

Which PDBs select a pod (:func:`selecting`) does not change while the pod and the PDBs'
namespaces and selectors do not, so :class:`Limits` takes an optional ``selected`` function
(a memo of :func:`selecting`); what each PDB allows is evaluated per :class:`Limits`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from karpy.model.objects import Pod, PodDisruptionBudget

__all__ = ["Limits", "fully_blocking", "selecting"]


def _scaled(value: str, total: int, *, round_up: bool) -> int:
    if value.endswith("%"):
        fraction = int(value[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(value)


def _selects(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    return pdb.selector is not None and pod.namespace == pdb.namespace and pdb.selector.matches(pod.labels)


def selecting(pdbs: Sequence[PodDisruptionBudget], pod: Pod) -> tuple[int, ...]:
    """Indices (in ``pdbs`` order) of the PDBs whose selector picks ``pod``."""
    return tuple(i for i, pdb in enumerate(pdbs) if _selects(pdb, pod))


def fully_blocking(pdb: PodDisruptionBudget) -> bool:
    """A PDB that never allows an eviction, whatever its pods' health (upstream ``newPdb``'s
    ``isFullyBlocking``): ``maxUnavailable`` 0 or ``"0%"``, or ``minAvailable`` ``"100%"``."""
    return str(pdb.max_unavailable) in ("0", "0%") or str(pdb.min_available) == "100%"


def _allowed(pdb: PodDisruptionBudget, expected: int, healthy: int) -> int:
    if pdb.min_available is not None:
        desired = _scaled(pdb.min_available, expected, round_up=True)
    elif pdb.max_unavailable is not None:
        desired = expected - _scaled(pdb.max_unavailable, expected, round_up=True)
    else:
        desired = expected
    return max(0, healthy - desired)


class Limits:
    """What each PDB allows now, given the pods of one snapshot.

    ``selected(pod)`` must return :func:`selecting` ``(pdbs, pod)`` (default: computed).
    :meth:`with_pods` gives the limits of the same PDBs after some pods left and others came,
    counting only those.
    """

    def __init__(
        self,
        pdbs: Sequence[PodDisruptionBudget],
        pods: Sequence[Pod],
        *,
        selected: Callable[[Pod], tuple[int, ...]] | None = None,
    ) -> None:
        self._pdbs = tuple(pdbs)
        self.selected: Callable[[Pod], tuple[int, ...]] = selected if selected is not None else self._select
        # the pods counted only matter for a PDB without a known status.disruptionsAllowed
        self._counting = any(pdb.disruptions_allowed is None for pdb in self._pdbs)
        self._expected = [0] * len(self._pdbs)
        self._healthy = [0] * len(self._pdbs)
        self._count(pods, 1)
        self._settle()

    def _count(self, pods: Iterable[Pod], sign: int) -> None:
        if not self._counting:
            return
        expected, healthy = self._expected, self._healthy
        for pod in pods:
            if pod.is_terminal() or pod.deleting:
                continue
            for i in self.selected(pod):
                expected[i] += sign
                if pod.ready:
                    healthy[i] += sign

    def _settle(self) -> None:
        self._allowed = tuple(
            pdb.disruptions_allowed
            if pdb.disruptions_allowed is not None
            else _allowed(pdb, self._expected[i], self._healthy[i])
            for i, pdb in enumerate(self._pdbs)
        )

    def with_pods(self, removed: Iterable[Pod], added: Iterable[Pod]) -> Limits:
        """The limits of the same PDBs over the pods counted here, less ``removed``, plus ``added``."""
        out = Limits(self._pdbs, (), selected=self.selected)  # (no pods: the counts come next)
        out._expected = list(self._expected)
        out._healthy = list(self._healthy)
        out._count(removed, -1)
        out._count(added, 1)
        out._settle()
        return out

    def _select(self, pod: Pod) -> tuple[int, ...]:
        return selecting(self._pdbs, pod)

    def fully_blocked(self, pod: Pod, selected: tuple[int, ...] | None = None) -> bool:
        """Upstream ``isFullyBlocked`` for an evictable pod: under several PDBs, or under one that
        never allows an eviction (``maxUnavailable`` 0 or ``"0%"``, ``minAvailable`` ``"100%"``),
        unless the pod is not Ready and the PDB always lets unhealthy pods go."""
        matching = self.selected(pod) if selected is None else selected
        if len(matching) != 1:
            return len(matching) > 1
        pdb = self._pdbs[matching[0]]
        if not pod.ready and pdb.unhealthy_pod_eviction_policy == "AlwaysAllow":
            return False
        return fully_blocking(pdb)

    def blocking(self, pod: Pod, selected: tuple[int, ...] | None = None) -> str | None:
        """Why ``pod`` cannot be evicted now, or None (``selected``: ``self.selected(pod)`` if known)."""
        matching = self.selected(pod) if selected is None else selected
        if not matching:
            return None
        if len(matching) > 1:
            names = ", ".join(sorted(f"{self._pdbs[i].namespace}/{self._pdbs[i].name}" for i in matching))
            return f"pod {pod.key} is selected by several PDBs ({names})"
        i = matching[0]
        if self._allowed[i] > 0:
            return None
        pdb = self._pdbs[i]
        if not pod.ready and pdb.unhealthy_pod_eviction_policy == "AlwaysAllow":
            return None
        return f"PDB {pdb.namespace}/{pdb.name} allows no disruption of pod {pod.key}"
