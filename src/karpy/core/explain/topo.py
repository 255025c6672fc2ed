"""The topology messages of a solve read back: key, maxSkew, the allowed domains and the counts.

The solver words a topology rejection as ``<kind> <key>: [maxSkew N leaves ]no allowed domain
among <domains> (counts {d: n, ...})`` (:class:`~karpy.core.scheduling.topogroups.TopologyError`,
at most eight counts, then ``...``). :func:`parse` reads it into a :class:`TopologyReason`;
:func:`suggest` words what would let the pod in, naming the pod's own term (its selector and
namespaces) when it has one on that key. Used by :mod:`karpy.core.explain.suggest`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from karpy.model.objects import Pod, PodAffinityTerm

__all__ = ["TopologyReason", "parse", "suggest"]

_MESSAGE = re.compile(
    r"^(topology spread|pod affinity|pod anti-affinity) (\S+): (?:maxSkew (\d+) leaves )?"
    r"no allowed domain among (.*) \(counts \{(.*)\}\)$"
)


@dataclass(frozen=True, slots=True)
class TopologyReason:
    """One topology rejection as the solver worded it."""

    kind: str  # topology spread | pod affinity | pod anti-affinity
    key: str
    max_skew: int | None
    among: tuple[str, ...]  # the domains the place could offer ("any domain": empty, ``anywhere``)
    anywhere: bool
    other_than: bool  # ``among`` are the domains excluded ("domains other than [...]")
    counts: tuple[tuple[str, int], ...]  # matching pods per domain, as the message lists them
    truncated: bool  # the message listed only the first counts

    def detail(self) -> dict[str, object]:
        out: dict[str, object] = {
            "key": self.key,
            "domains": "any" if self.anywhere else list(self.among),
            "counts": dict(self.counts),
        }
        if self.other_than:
            out["domains"] = {"otherThan": list(self.among)}
        if self.max_skew is not None:
            out["maxSkew"] = self.max_skew
        if self.truncated:
            out["countsTruncated"] = True
        return out

    def among_text(self) -> str:
        if self.anywhere:
            return "any domain"
        listed = "[" + ", ".join(self.among) + "]"
        return f"domains other than {listed}" if self.other_than else listed


def _names(text: str) -> tuple[str, ...]:
    inner = text.strip().removeprefix("[").removesuffix("]")
    return tuple(part.strip().strip("'\"") for part in inner.split(",") if part.strip())


def parse(message: str) -> TopologyReason | None:
    """The parts of a topology message; None for any other message."""
    match = _MESSAGE.match(message)
    if match is None:
        return None
    kind, key, skew, among, counts = match.groups()
    truncated = counts.endswith(" ...")
    pairs = []
    for part in counts.removesuffix(" ...").split(", "):
        domain, sep, count = part.rpartition(": ")
        if sep and count.strip().isdigit():
            pairs.append((domain, int(count)))
    other_than = among.startswith("domains other than ")
    return TopologyReason(
        kind=kind,
        key=key,
        max_skew=int(skew) if skew is not None else None,
        among=_names(among.removeprefix("domains other than ")) if among != "any domain" else (),
        anywhere=among == "any domain",
        other_than=other_than,
        counts=tuple(pairs),
        truncated=truncated,
    )


def _term(terms: tuple[PodAffinityTerm, ...], key: str) -> PodAffinityTerm | None:
    return next((t for t in terms if t.topology_key == key), None)


def _selector(term: PodAffinityTerm, pod: Pod) -> str:
    """The term's label selector and the namespaces it looks in: its listed ``namespaces`` and
    those its ``namespaceSelector`` selects (the union; an empty selector is every namespace),
    the pod's own namespace when it gives neither."""
    text = str(term.selector) if term.selector is not None else "<none>"
    where: list[str] = []
    if term.namespaces:
        where.append(f"namespace {', '.join(term.namespaces)}")
    if term.namespace_selector is not None:
        selected = str(term.namespace_selector)
        where.append("every namespace" if selected == "<all>" else f"namespaces selected by {selected}")
    return f"{text} ({' and '.join(where) or f'namespace {pod.namespace}'})"


def _spread(read: TopologyReason, pod: Pod) -> str:
    if not read.counts and read.anywhere:
        return (
            f"no node or instance type carries topology key {read.key}: the pod's topologySpreadConstraint "
            f"has no domain to spread over (use a key the nodes have, e.g. topology.kubernetes.io/zone)"
        )
    return (
        f"spreading on {read.key} with maxSkew {read.max_skew} allows none of {read.among_text()} "
        f"(counts {_counts(read)}): let the pod use more domains or raise maxSkew"
    )


def _counts(read: TopologyReason) -> str:
    text = ", ".join(f"{d}: {c}" for d, c in read.counts)
    return "{" + text + (" ..." if read.truncated else "") + "}"


def _affinity(read: TopologyReason, pod: Pod) -> str:
    term = _term(pod.affinity, read.key)
    selector = _selector(term, pod) if term is not None else "of the pod's affinity term"
    occupied = [d for d, c in read.counts if c > 0]
    if not occupied:
        return (
            f"no pod matches the affinity term's selector {selector} in any {read.key} domain {_counts(read)}"
        )
    return (
        f"pods matching the affinity term's selector {selector} run in {read.key} "
        f"[{', '.join(occupied)}] only; the pod may use {read.among_text()}"
    )


def _anti_affinity(read: TopologyReason, pod: Pod) -> str:
    term = _term(pod.anti_affinity, read.key)
    if term is None:
        return (
            f"pods in every {read.key} domain among {read.among_text()} have a required anti-affinity "
            f"term selecting this pod's labels: change its labels or their anti-affinity"
        )
    return (
        f"every {read.key} domain among {read.among_text()} already runs a pod matching the anti-affinity "
        f"selector {_selector(term, pod)}: allow the pod more domains or relax the term"
    )


def suggest(read: TopologyReason, pod: Pod) -> str:
    """One sentence on what would let ``pod`` past the topology rejection ``read``."""
    if read.kind == "topology spread":
        return _spread(read, pod)
    if read.kind == "pod affinity":
        return _affinity(read, pod)
    return _anti_affinity(read, pod)
