"""PodDisruptionBudgets as the disruption core sees them: which pods may be evicted now.

A pod is blocked when a PDB selecting it allows no disruption (``status.disruptionsAllowed``
when the status is known, otherwise computed from ``minAvailable``/``maxUnavailable`` and the
ready pods it selects), unless the pod is not Ready and the PDB's
``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``. A pod selected by more than one PDB is
blocked too: the Eviction API rejects it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from karpy.model.objects import Pod, PodDisruptionBudget

__all__ = ["Limits"]


def _scaled(value: str, total: int, *, round_up: bool) -> int:
    if value.endswith("%"):
        fraction = int(value[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(value)


@dataclass(frozen=True, slots=True)
class _Budget:
    pdb: PodDisruptionBudget
    allowed: int


class Limits:
    def __init__(self, pdbs: Sequence[PodDisruptionBudget], pods: Sequence[Pod]) -> None:
        self._budgets: list[_Budget] = []
        for pdb in pdbs:
            self._budgets.append(_Budget(pdb, self._allowed(pdb, pods)))

    @staticmethod
    def _selects(pdb: PodDisruptionBudget, pod: Pod) -> bool:
        return (
            pdb.selector is not None and pod.namespace == pdb.namespace and pdb.selector.matches(pod.labels)
        )

    def _allowed(self, pdb: PodDisruptionBudget, pods: Sequence[Pod]) -> int:
        if pdb.disruptions_allowed is not None:
            return pdb.disruptions_allowed
        selected = [p for p in pods if self._selects(pdb, p) and not p.is_terminal() and not p.deleting]
        expected = len(selected)
        healthy = sum(1 for p in selected if p.ready)
        if pdb.min_available is not None:
            desired = _scaled(pdb.min_available, expected, round_up=True)
        elif pdb.max_unavailable is not None:
            desired = expected - _scaled(pdb.max_unavailable, expected, round_up=True)
        else:
            desired = expected
        return max(0, healthy - desired)

    def blocking(self, pod: Pod) -> str | None:
        """Why ``pod`` cannot be evicted now, or None."""
        matching = [b for b in self._budgets if self._selects(b.pdb, pod)]
        if len(matching) > 1:
            names = ", ".join(sorted(f"{b.pdb.namespace}/{b.pdb.name}" for b in matching))
            return f"pod {pod.key} is selected by several PDBs ({names})"
        for budget in matching:
            if budget.allowed > 0:
                continue
            if not pod.ready and budget.pdb.unhealthy_pod_eviction_policy == "AlwaysAllow":
                continue
            return f"PDB {budget.pdb.namespace}/{budget.pdb.name} allows no disruption of pod {pod.key}"
        return None
