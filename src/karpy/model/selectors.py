"""Label selectors (``metav1.LabelSelector``) and their matching."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["LabelSelector", "SelectorRequirement"]


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """``matchLabels`` AND ``matchExpressions``; the empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = field(default=())

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> LabelSelector:
        return cls(tuple(sorted(labels.items())))

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(expr.matches(labels) for expr in self.match_expressions)

    def with_labels(self, extra: Mapping[str, str]) -> LabelSelector:
        """This selector with ``extra`` ANDed in as equality terms (matchLabelKeys)."""
        merged = dict(self.match_labels)
        exprs = list(self.match_expressions)
        for key, value in sorted(extra.items()):
            if key in merged and merged[key] != value:
                exprs.append(SelectorRequirement(key, "In", (value,)))
            else:
                merged[key] = value
        return LabelSelector(tuple(sorted(merged.items())), tuple(exprs))

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.match_labels]
        parts += [f"{e.key} {e.operator} {list(e.values)}" for e in self.match_expressions]
        return ",".join(parts) or "<all>"
