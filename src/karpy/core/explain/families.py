"""Instance-type options in a line a reader takes in: grouped by family, cheapest first.

``m5.large, m5.xlarge, c5.large, m5.2xlarge`` reads ``m5: large..2xlarge (3)``, ``c5: large (1)``:
a family (the name before the first dot) appears where its cheapest member is, its sizes run from
its cheapest to its dearest. A name without a dot is a family of its own, shown as itself.
Used by :mod:`karpy.core.explain.pod`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["family_of", "group_families"]


def family_of(name: str) -> tuple[str, str]:
    """(family, size) of an instance-type name; a name without a dot is (name, "")."""
    family, dot, size = name.partition(".")
    return (family, size) if dot else (name, "")


def group_families(names: Sequence[str]) -> tuple[str, ...]:
    """One line per family of ``names`` (given cheapest first), in the order of their cheapest."""
    groups: dict[str, list[str]] = {}
    for name in names:
        family, size = family_of(name)
        groups.setdefault(family, []).append(size)
    lines: list[str] = []
    for family, sizes in groups.items():
        shown = [s for s in sizes if s]
        if not shown:
            lines.append(family if len(sizes) == 1 else f"{family} ({len(sizes)})")
        elif len(shown) == 1:
            lines.append(f"{family}: {shown[0]} (1)")
        else:
            lines.append(f"{family}: {shown[0]}..{shown[-1]} ({len(shown)})")
    return tuple(lines)
