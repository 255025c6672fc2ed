"""The pods that differ between two tuples of pods (:func:`changes`).

Used where a value computed from one snapshot's pod tuple is carried to the next one: the PDB
limits of a disruption pass (:mod:`karpy.core.disruption.memo`) and the bound-pod index of the
topology counts (:mod:`karpy.core.scheduling.boundindex`).
"""

from __future__ import annotations

from karpy.model.objects import Pod

__all__ = ["changes"]


def changes(old: tuple[Pod, ...], new: tuple[Pod, ...]) -> tuple[list[Pod], list[Pod]]:
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
