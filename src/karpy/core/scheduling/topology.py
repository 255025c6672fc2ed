"""Topology spread and pod (anti-)affinity domain counting (Karpenter's ``topology*.go``).

A :class:`TopologyGroup` counts the pods a selector matches per domain of one key; the
:class:`Topology` owns every group for one solve: groups owned by the pods being
scheduled (their spreads and affinity terms), and *inverse* anti-affinity groups of pods
that carry required anti-affinity (so a pod they repel is kept out of their domains).
``add_requirements`` narrows a node's requirements to the domains the groups allow;
``record`` counts a placement. Domain universes come from NodePools (requirements,
template labels, instance types; with their taints for ``nodeTaintsPolicy: Honor``) and
existing nodes. Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod, PodAffinityTerm
from karpy.model.requirements import Requirement, Requirements
from karpy.model.selectors import LabelSelector
from karpy.model.taints import Taint, Toleration, first_untolerated

__all__ = ["AFFINITY", "ANTI_AFFINITY", "SPREAD", "NodeFilter", "Topology", "TopologyError", "TopologyGroup"]

SPREAD = "topology spread"
AFFINITY = "pod affinity"
ANTI_AFFINITY = "pod anti-affinity"
_BIG = 1 << 31


class TopologyError(Exception):
    """A topology constraint leaves no domain for the pod on this node."""

    def __init__(self, group: TopologyGroup, pod_domains: Requirement, node_domains: Requirement) -> None:
        self.group = group
        self.pod_domains = pod_domains
        self.node_domains = node_domains
        super().__init__(self.describe())

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


def _namespaces(
    pod: Pod, term: PodAffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]
) -> frozenset[str]:
    if not term.namespaces and term.namespace_selector is None:
        return frozenset((pod.namespace,))
    selected = set(term.namespaces)
    if term.namespace_selector is not None:
        selected.update(ns for ns, lbls in namespace_labels.items() if term.namespace_selector.matches(lbls))
    return frozenset(selected)


def _term_selector(pod: Pod, term: PodAffinityTerm) -> LabelSelector | None:
    """The term's selector with matchLabelKeys (In) and mismatchLabelKeys (NotIn) folded in."""
    selector = term.selector
    if selector is None:
        return None
    extra = {k: pod.labels[k] for k in term.match_label_keys if k in pod.labels}
    if extra:
        selector = selector.with_labels(extra)
    if term.mismatch_label_keys:
        from karpy.model.selectors import SelectorRequirement

        exprs = tuple(
            SelectorRequirement(k, "NotIn", (pod.labels[k],))
            for k in term.mismatch_label_keys
            if k in pod.labels
        )
        selector = LabelSelector(selector.match_labels, selector.match_expressions + exprs)
    return selector


def _ignored(pod: Pod) -> bool:
    return not pod.node_name or pod.is_terminal() or pod.deleting


class Topology:
    """All topology groups of one solve."""

    def __init__(
        self,
        *,
        snapshot: Snapshot,
        nodes: Sequence[StateNode],
        domain_groups: dict[str, DomainGroup],
        pods: Sequence[Pod],
        respect_preferences: bool,
    ) -> None:
        self._snapshot = snapshot
        self._nodes = nodes
        self._node_by_name = {n.name: n for n in nodes}
        for node in snapshot.nodes:
            self._node_by_name.setdefault(node.name, node)
        self._domain_groups = domain_groups
        self._respect = respect_preferences
        self.groups: dict[object, TopologyGroup] = {}
        self.inverse: dict[object, TopologyGroup] = {}
        self._excluded = frozenset(p.uid or p.key for p in pods)
        self._bound_by_namespace: dict[str, list[Pod]] = {}
        for pod in snapshot.pods:
            if pod.node_name:
                self._bound_by_namespace.setdefault(pod.namespace, []).append(pod)
        self._track_existing_anti_affinity()
        for pod in pods:
            self.update(pod)

    @staticmethod
    def uid(pod: Pod) -> str:
        return pod.uid or pod.key

    # -- group construction -------------------------------------------------------------
    def _new_group(
        self,
        *,
        kind: str,
        key: str,
        pod: Pod,
        namespaces: frozenset[str],
        selector: LabelSelector | None,
        max_skew: int = _BIG,
        min_domains: int | None = None,
        node_filter: NodeFilter | None = None,
    ) -> TopologyGroup:
        nf = node_filter or NodeFilter()
        group = TopologyGroup(kind, key, namespaces, selector, max_skew, min_domains, nf)
        domain_group = self._domain_groups.get(key)
        if domain_group is not None:
            group.register(*domain_group.domains_for(pod, nf.honor_taints))
        return group

    @staticmethod
    def _hash(group: TopologyGroup) -> object:
        return (
            group.kind,
            group.key,
            group.namespaces,
            group.selector,
            group.max_skew,
            group.min_domains,
            group.node_filter,
        )

    def _groups_for(self, pod: Pod) -> list[TopologyGroup]:
        out: list[TopologyGroup] = []
        for tsc in pod.spread:
            if not self._respect and tsc.when_unsatisfiable != "DoNotSchedule":
                continue
            selector = tsc.selector
            if selector is not None and tsc.match_label_keys:
                extra = {k: pod.labels[k] for k in tsc.match_label_keys if k in pod.labels}
                selector = selector.with_labels(extra)
            out.append(
                self._new_group(
                    kind=SPREAD,
                    key=tsc.topology_key,
                    pod=pod,
                    namespaces=frozenset((pod.namespace,)),
                    selector=selector,
                    max_skew=tsc.max_skew,
                    min_domains=tsc.min_domains,
                    node_filter=NodeFilter.for_pod(
                        pod, taints_policy=tsc.node_taints_policy, affinity_policy=tsc.node_affinity_policy
                    ),
                )
            )
        affinity = list(pod.affinity)
        anti = list(pod.anti_affinity)
        if self._respect:
            affinity += [w.term for w in pod.affinity_preferred]
            anti += [w.term for w in pod.anti_affinity_preferred]
        for kind, terms in ((AFFINITY, affinity), (ANTI_AFFINITY, anti)):
            for term in terms:
                out.append(
                    self._new_group(
                        kind=kind,
                        key=term.topology_key,
                        pod=pod,
                        namespaces=_namespaces(pod, term, self._snapshot.namespaces),
                        selector=_term_selector(pod, term),
                    )
                )
        return out

    def update(self, pod: Pod) -> None:
        """(Re)register ``pod`` as the owner of exactly the groups its current spec implies."""
        uid = self.uid(pod)
        for group in self.groups.values():
            group.owners.discard(uid)
        if pod.anti_affinity or (self._respect and pod.anti_affinity_preferred):
            self._track_inverse(pod, None)
        for group in self._groups_for(pod):
            key = self._hash(group)
            existing = self.groups.get(key)
            if existing is None:
                self._count(group)
                self.groups[key] = group
                existing = group
            existing.owners.add(uid)

    def _track_existing_anti_affinity(self) -> None:
        for pod in self._snapshot.pods:
            if not pod.anti_affinity or not pod.node_name or pod.is_terminal() or pod.deleting:
                continue
            if self.uid(pod) in self._excluded:
                continue
            node = self._node_by_name.get(pod.node_name)
            self._track_inverse(pod, node.labels if node is not None else None)

    def _track_inverse(self, pod: Pod, node_labels: Mapping[str, str] | None) -> None:
        for term in pod.anti_affinity:
            group = self._new_group(
                kind=ANTI_AFFINITY,
                key=term.topology_key,
                pod=pod,
                namespaces=_namespaces(pod, term, self._snapshot.namespaces),
                selector=_term_selector(pod, term),
            )
            key = self._hash(group)
            existing = self.inverse.setdefault(key, group)
            if node_labels is not None and term.topology_key in node_labels:
                existing.record(node_labels[term.topology_key])
            existing.owners.add(self.uid(pod))

    def _count(self, group: TopologyGroup) -> None:
        for node in self._nodes:
            if node.node is None:
                continue
            node_reqs = Requirements.from_labels(node.node.labels)
            if not group.node_filter.matches(node.node.taints, node_reqs, frozenset()):
                continue
            domain = node.labels.get(group.key)
            if domain is not None:
                group.register(domain)
        for namespace in sorted(group.namespaces):
            for pod in self._bound_by_namespace.get(namespace, ()):
                if _ignored(pod) or self.uid(pod) in self._excluded:
                    continue
                if group.selector is None or not group.selector.matches(pod.labels):
                    continue
                state = self._node_by_name.get(pod.node_name)
                if state is None:
                    continue
                node_labels = state.labels
                domain = node_labels.get(group.key)
                if domain is None and group.key == labels.HOSTNAME:
                    domain = state.name
                if domain is None:
                    continue
                taints = state.node.taints if state.node is not None else state.taints
                if not group.node_filter.matches(taints, Requirements.from_labels(node_labels), frozenset()):
                    continue
                group.record(domain)

    # -- use during a solve -------------------------------------------------------------
    def register(self, key: str, domain: str) -> None:
        for group in self.groups.values():
            if group.key == key:
                group.register(domain)
        for group in self.inverse.values():
            if group.key == key:
                group.register(domain)

    def _matching(
        self, pod: Pod, taints: Sequence[Taint], node_reqs: Requirements, allow: frozenset[str]
    ) -> list[TopologyGroup]:
        uid = self.uid(pod)
        out = [g for g in self.groups.values() if uid in g.owners]
        out += [g for g in self.inverse.values() if g.counts(pod, taints, node_reqs, allow)]
        return out

    def constrains(self, pod: Pod, key: str) -> bool:
        """Whether a group the pod owns (or an inverse anti-affinity) is keyed on ``key``."""
        uid = self.uid(pod)
        return any(g.key == key and uid in g.owners for g in self.groups.values()) or any(
            g.key == key and g.selects(pod) for g in self.inverse.values()
        )

    def add_requirements(
        self,
        pod: Pod,
        taints: Sequence[Taint],
        pod_reqs: Requirements,
        node_reqs: Requirements,
        allow: frozenset[str],
    ) -> Requirements:
        """``node_reqs`` narrowed to the domains every matching group allows; raises TopologyError."""
        out = node_reqs
        for group in self._matching(pod, taints, node_reqs, allow):
            pod_domains = pod_reqs.get_or_exists(group.key)
            node_domains = node_reqs.get_or_exists(group.key)
            domains = group.next_domains(pod, pod_domains, node_domains)
            if len(domains) == 0:
                raise TopologyError(group, pod_domains, node_domains)
            out = out.add(domains)
        return out

    def record(self, pod: Pod, taints: Sequence[Taint], reqs: Requirements, allow: frozenset[str]) -> None:
        for group in self.groups.values():
            if not group.counts(pod, taints, reqs, allow):
                continue
            domains = reqs.get_or_exists(group.key)
            if domains.complement:
                continue
            if group.kind == ANTI_AFFINITY:
                group.record(*sorted(domains.values))
            elif len(domains.values) == 1:
                group.record(next(iter(domains.values)))
        uid = self.uid(pod)
        for group in self.inverse.values():
            if uid in group.owners:
                domains = reqs.get_or_exists(group.key)
                if not domains.complement:
                    group.record(*sorted(domains.values))
