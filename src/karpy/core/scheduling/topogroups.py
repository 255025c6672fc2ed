"""Topology groups: the domain counts behind spreads and pod (anti-)affinity.

A :class:`TopologyGroup` counts the pods a selector matches per domain of one key and picks
the domains a pod may use next (``next_domains``); :class:`DomainGroup` is the universe of
domains of one key from the NodePools. Owned by :class:`~karpy.core.scheduling.topology.Topology`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.selectors import LabelSelector
from karpy.model.taints import Taint, Toleration, first_untolerated

__all__ = [
    "AFFINITY",
    "ANTI_AFFINITY",
    "BIG",
    "SPREAD",
    "DomainGroup",
    "NodeFilter",
    "TopologyError",
    "TopologyGroup",
    "build_domain_groups",
]

SPREAD = "topology spread"
AFFINITY = "pod affinity"
ANTI_AFFINITY = "pod anti-affinity"
BIG = 1 << 31
_BIG = BIG


class TopologyError(Exception):
    """A topology constraint leaves no domain for the pod on this node."""

    def __init__(self, group: TopologyGroup, pod_domains: Requirement, node_domains: Requirement) -> None:
        self.group = group
        self.pod_domains = pod_domains
        self.node_domains = node_domains
        super().__init__()

    def __str__(self) -> str:
        return self.describe()

    @property
    def monotone(self) -> bool:
        """True when the same pod will fail here again: counts only grow and node domains only
        narrow during a solve, and only hostname domains are registered after the start."""
        group, node = self.group, self.node_domains
        single = not node.complement and len(node.values) <= 1
        if group.kind == ANTI_AFFINITY:
            return single or group.key != labels.HOSTNAME
        return group.kind == SPREAD and group.key == labels.HOSTNAME and single

    def describe(self) -> str:
        group = self.group
        counts = ", ".join(f"{d}: {c}" for d, c in sorted(group.domains.items())[:8])
        more = " ..." if len(group.domains) > 8 else ""
        if group.kind == SPREAD:
            return (
                f"topology spread {group.key}: maxSkew {group.max_skew} leaves no allowed domain "
                f"among {_domains_text(self.node_domains)} (counts {{{counts}{more}}})"
            )
        among = _domains_text(self.node_domains)
        return f"{group.kind} {group.key}: no allowed domain among {among} (counts {{{counts}{more}}})"


def _domains_text(req: Requirement) -> str:
    if req.complement:
        return "any domain" if not req.values else f"domains other than {sorted(req.values)}"
    return str(sorted(req.values))


@dataclass(frozen=True, slots=True)
class NodeFilter:
    """Which nodes count for a spread (``nodeAffinityPolicy`` / ``nodeTaintsPolicy``)."""

    terms: tuple[Requirements, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    honor_taints: bool = False
    honor_affinity: bool = True
    active: bool = False

    @classmethod
    def for_pod(cls, pod: Pod, *, taints_policy: str, affinity_policy: str) -> NodeFilter:
        selector = Requirements.from_labels(pod.node_selector)
        if pod.required_terms:
            terms = tuple(selector.add(*term.requirements) for term in pod.required_terms)
        else:
            terms = (selector,)
        return cls(
            terms=terms,
            tolerations=pod.tolerations,
            honor_taints=taints_policy == "Honor",
            honor_affinity=affinity_policy != "Ignore",
            active=True,
        )

    def matches(self, taints: Sequence[Taint], reqs: Requirements, allow_undefined: frozenset[str]) -> bool:
        if not self.active:
            return True
        if self.honor_taints and first_untolerated(self.tolerations, taints) is not None:
            return False
        if not self.honor_affinity:
            return True
        return any(reqs.is_compatible(term, allow_undefined) for term in self.terms)


@dataclass(eq=False, slots=True)
class TopologyGroup:
    kind: str
    key: str
    namespaces: frozenset[str]
    selector: LabelSelector | None
    max_skew: int = _BIG
    min_domains: int | None = None
    node_filter: NodeFilter = field(default_factory=NodeFilter)
    domains: dict[str, int] = field(default_factory=dict)
    empty: set[str] = field(default_factory=set)
    owners: set[str] = field(default_factory=set)

    def selects(self, pod: Pod) -> bool:
        return (
            self.selector is not None
            and pod.namespace in self.namespaces
            and self.selector.matches(pod.labels)
        )

    def counts(
        self, pod: Pod, taints: Sequence[Taint], reqs: Requirements, allow_undefined: frozenset[str]
    ) -> bool:
        return self.selects(pod) and self.node_filter.matches(taints, reqs, allow_undefined)

    def record(self, *domains: str) -> None:
        for domain in domains:
            self.domains[domain] = self.domains.get(domain, 0) + 1
            self.empty.discard(domain)

    def record_count(self, domain: str, count: int) -> None:
        """``record(domain)`` ``count`` times."""
        self.domains[domain] = self.domains.get(domain, 0) + count
        self.empty.discard(domain)

    def register(self, *domains: str) -> None:
        for domain in domains:
            if domain not in self.domains:
                self.domains[domain] = 0
                self.empty.add(domain)

    def next_domains(self, pod: Pod, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        if self.kind == SPREAD:
            return self._next_spread(pod, pod_domains, node_domains)
        if self.kind == AFFINITY:
            return self._next_affinity(pod, pod_domains, node_domains)
        return self._next_anti_affinity(pod_domains, node_domains)

    def _min_count(self, pod_domains: Requirement) -> int:
        if self.key == labels.HOSTNAME:
            return 0
        low = _BIG
        supported = 0
        for domain, count in self.domains.items():
            if pod_domains.has(domain):
                supported += 1
                low = min(low, count)
        if self.min_domains is not None and supported < self.min_domains:
            return 0
        return low

    def _next_spread(self, pod: Pod, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        self_match = 1 if self.selects(pod) else 0
        if self.key == labels.HOSTNAME and not node_domains.complement and len(node_domains.values) == 1:
            host = next(iter(node_domains.values))
            if self.domains.get(host, 0) + self_match <= self.max_skew:
                return Requirement.in_(self.key, host)
            return Requirement.does_not_exist(self.key)
        low = self._min_count(pod_domains)
        best: str | None = None
        best_count = _BIG
        candidates: Iterable[str]
        if not node_domains.complement:
            candidates = sorted(d for d in node_domains.values if d in self.domains)
        else:
            candidates = sorted(d for d in self.domains if node_domains.has(d))
        for domain in candidates:
            count = self.domains[domain] + self_match
            if count - low <= self.max_skew and count < best_count:
                best, best_count = domain, count
        if best is None:
            return Requirement.does_not_exist(self.key)
        return Requirement.in_(self.key, best)

    def _any_compatible(self, pod_domains: Requirement) -> bool:
        return any(pod_domains.has(d) and c > 0 for d, c in self.domains.items())

    def _next_affinity(self, pod: Pod, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        bootstrap = self.selects(pod) and (
            len(self.domains) == len(self.empty) or not self._any_compatible(pod_domains)
        )
        if self.key == labels.HOSTNAME and not node_domains.complement and len(node_domains.values) == 1:
            host = next(iter(node_domains.values))
            if not pod_domains.has(host):
                return Requirement.does_not_exist(self.key)
            if self.domains.get(host, 0) > 0 or bootstrap:
                return Requirement.in_(self.key, host)
            return Requirement.does_not_exist(self.key)
        options = sorted(
            d for d, c in self.domains.items() if c > 0 and pod_domains.has(d) and node_domains.has(d)
        )
        if options:
            return Requirement(self.key, False, frozenset(options))
        if bootstrap:
            ordered = sorted(self.domains)
            picked: set[str] = set()
            both = pod_domains.intersection(node_domains)
            for domain in ordered:
                if both.has(domain):
                    picked.add(domain)
                    break
            for domain in ordered:
                if pod_domains.has(domain):
                    picked.add(domain)
                    break
            return Requirement(self.key, False, frozenset(picked))
        return Requirement.does_not_exist(self.key)

    def _next_anti_affinity(self, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        if self.key == labels.HOSTNAME and not node_domains.complement and len(node_domains.values) == 1:
            host = next(iter(node_domains.values))
            if self.domains.get(host, 0) == 0:
                return Requirement.in_(self.key, host)
            return Requirement.does_not_exist(self.key)
        if not self.empty:
            return Requirement.does_not_exist(self.key)
        options = frozenset(d for d in self.empty if node_domains.has(d) and pod_domains.has(d))
        return Requirement(self.key, False, options)


class DomainGroup:
    """The domains of one key, each with the taint sets of the NodePools that offer it."""

    def __init__(self) -> None:
        self.taints: dict[str, list[tuple[Taint, ...]]] = {}

    def insert(self, domain: str, taints: tuple[Taint, ...]) -> None:
        known = self.taints.setdefault(domain, [])
        if taints not in known:
            known.append(taints)

    def domains_for(self, pod: Pod, honor_taints: bool) -> list[str]:
        if not honor_taints:
            return list(self.taints)
        return [
            d
            for d, sets in self.taints.items()
            if any(first_untolerated(pod.tolerations, taints) is None for taints in sets)
        ]


def build_domain_groups(
    node_pools: Sequence[NodePool], instance_types: Mapping[str, Sequence[InstanceType]]
) -> dict[str, DomainGroup]:
    """The universe of domains per key, from every NodePool and its instance types."""
    groups: dict[str, DomainGroup] = {}
    for pool in node_pools:
        base = pool.requirement_set()
        for it in instance_types.get(pool.name, ()):
            if not base.overlaps(it.requirements):
                # karpy: a type the pool can never launch adds no domain (upstream adds its zones anyway,
                # which strands zonal spreads on zones no compatible type is offered in).
                continue
            reqs = base.union_with(it.requirements)
            for key, req in reqs.items():
                if req.complement:
                    continue
                group = groups.setdefault(key, DomainGroup())
                for value in req.values:
                    group.insert(value, pool.taints)
        for key, req in base.items():
            if req.operator == "In":
                group = groups.setdefault(key, DomainGroup())
                for value in req.values:
                    group.insert(value, pool.taints)
    return groups
