"""Topology spread and pod (anti-)affinity domain counting (Karpenter's ``topology*.go``).

A :class:`TopologyGroup` counts the pods a selector matches per domain of one key; the
:class:`Topology` owns every group for one solve: groups owned by the pods being
scheduled (their spreads and affinity terms), and *inverse* anti-affinity groups of pods
that carry required anti-affinity (so a pod they repel is kept out of their domains).
``add_requirements`` narrows a node's requirements to the domains the groups allow;
``record`` counts a placement. Domain universes come from NodePools (requirements,
template labels, instance types; with their taints for ``nodeTaintsPolicy: Honor``) and
existing nodes. The bound pods a group counts come from the index of
:mod:`karpy.core.scheduling.boundpods`; an affinity term counts them in the namespaces
:func:`term_namespaces` gives it. Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from karpy.core.scheduling import topocounts
from karpy.core.scheduling.boundpods import BoundIndex
from karpy.core.scheduling.cache import ObjectMemo
from karpy.core.scheduling.podinfo import signature
from karpy.core.scheduling.topogroups import (
    AFFINITY,
    ANTI_AFFINITY,
    BIG,
    SPREAD,
    DomainGroup,
    NodeFilter,
    TopologyError,
    TopologyGroup,
    build_domain_groups,
)
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.objects import Pod, PodAffinityTerm
from karpy.model.requirements import Requirement, Requirements
from karpy.model.selectors import LabelSelector
from karpy.model.taints import Taint

__all__ = [
    "AFFINITY",
    "ANTI_AFFINITY",
    "NAMESPACE_NAME",
    "SPREAD",
    "DomainGroup",
    "NodeFilter",
    "Topology",
    "TopologyError",
    "TopologyGroup",
    "build_domain_groups",
    "namespace_universe",
    "signature",
    "term_namespaces",
]

_BIG = BIG
# True: every group is counted the plain way (:meth:`Topology._count_plain`), the reference the
# cache tests compare against
PLAIN_COUNTS = False


NAMESPACE_NAME = "kubernetes.io/metadata.name"  # the label the API server puts on every namespace

Universe = Mapping[str, Mapping[str, str]]
_UNIVERSES: ObjectMemo[Universe] = ObjectMemo(8)  # per snapshot object


def namespace_universe(snapshot: Snapshot) -> Universe:
    """Every namespace a ``namespaceSelector`` can select, with its labels: the snapshot's Namespace
    objects and the namespaces its pods are in (a pod's namespace exists on the API server even
    when no Namespace object was read; it then has only the label below). Each carries
    ``kubernetes.io/metadata.name: <name>``, which the API server sets and keeps on every namespace."""
    return _UNIVERSES.of(snapshot, _universe)


def _universe(snapshot: Snapshot) -> Universe:
    out: dict[str, Mapping[str, str]] = {}
    for name, lbls in snapshot.namespaces.items():
        out[name] = {**lbls, NAMESPACE_NAME: name}
    for ns in sorted({p.namespace for p in snapshot.pods} - out.keys()):
        out[ns] = {NAMESPACE_NAME: ns}
    return out


def term_namespaces(pod: Pod, term: PodAffinityTerm, universe: Callable[[], Universe]) -> frozenset[str]:
    """The namespaces a pod (anti-)affinity term looks in (upstream ``buildNamespaceList``): the pod's
    own when the term names none and has no selector; else the listed ones plus every namespace of
    ``universe()`` the selector matches (``{}`` matches them all)."""
    if not term.namespaces and term.namespace_selector is None:
        return frozenset((pod.namespace,))
    selected = set(term.namespaces)
    if term.namespace_selector is not None:
        selected.update(ns for ns, lbls in universe().items() if term.namespace_selector.matches(lbls))
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


class Topology:
    """All topology groups of one solve, indexed by owner, by key and by selected pod labels.

    ``whole``: the solver's existing nodes of the snapshot before the ``without`` nodes were
    taken out (``snapshot`` is then that snapshot without them); group counts then start from
    the whole snapshot's, shared by the solves of a disruption pass."""

    def __init__(
        self,
        *,
        snapshot: Snapshot,
        nodes: Sequence[StateNode],
        domain_groups: dict[str, DomainGroup],
        pods: Sequence[Pod],
        respect_preferences: bool,
        bound: BoundIndex,
        whole: topocounts.Whole | None = None,
        without: frozenset[str] = frozenset(),
    ) -> None:
        self._snapshot = snapshot
        self._nodes = nodes
        self._whole: topocounts.Whole | None = None
        self._without = without
        self._without_active: list[StateNode] = []
        if whole is not None and whole.usable:  # unique names without ":": so are the snapshot's
            self._whole = whole
            self._without_active = [whole.by_name[n] for n in without if n in whole.active_names]
        self._node_by_name: dict[str, StateNode] | topocounts.NamesWithout
        if self._whole is not None:
            self._node_by_name = topocounts.NamesWithout(self._whole.by_name, without)
            self._plain = False
        else:
            self._node_by_name = by_name = {n.name: n for n in nodes}
            repeated = len(by_name) != len(nodes)
            for node in snapshot.nodes:
                by_name.setdefault(node.name, node)
            # Names that could share an entry of the per-solve requirements cache of _count_plain
            # (repeated names, a name "node:<other name>"): only the plain count reproduces that.
            self._plain = repeated or ":" in "".join(by_name)
        self._domain_groups = domain_groups
        self._respect = respect_preferences
        self.groups: dict[object, TopologyGroup] = {}
        self.inverse: dict[object, TopologyGroup] = {}
        self._owned: dict[str, list[TopologyGroup]] = {}  # uid -> groups it owns, in self.groups order
        self._inverse_owned: dict[str, list[TopologyGroup]] = {}
        self._by_key: dict[str, list[TopologyGroup]] = {}  # groups and inverse groups per key
        self._serial: dict[int, int] = {}  # id(group) -> position in self.groups
        self._selecting: dict[object, tuple[int, int, list[TopologyGroup], list[TopologyGroup]]] = {}
        self._spec_groups: dict[tuple[object, ...], tuple[list[TopologyGroup], list[object]]] = {}
        # next_domains per (group, pod object, pod domains, node domains) while no count changes
        self._memo: dict[tuple[int, int, Requirement, Requirement], Requirement] = {}
        self._node_reqs: dict[str, Requirements] = {}
        self._excluded = frozenset(p.uid or p.key for p in pods)
        self._bound = bound
        self._track_existing_anti_affinity()
        for pod in pods:
            self.update(pod)

    @staticmethod
    def uid(pod: Pod) -> str:
        return pod.uid or pod.key

    def _universe(self) -> Universe:
        return namespace_universe(self._snapshot)

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
                        namespaces=term_namespaces(pod, term, self._universe),
                        selector=_term_selector(pod, term),
                    )
                )
        return out

    def _insert(self, table: dict[object, TopologyGroup], key: object, group: TopologyGroup) -> None:
        table[key] = group
        self._serial[id(group)] = len(self._serial)
        self._by_key.setdefault(group.key, []).append(group)

    def update(self, pod: Pod) -> None:
        """(Re)register ``pod`` as the owner of exactly the groups its current spec implies."""
        uid = self.uid(pod)
        self._memo.clear()
        for group in self._owned.pop(uid, ()):
            group.owners.discard(uid)
        spec = signature(pod)
        known = self._spec_groups.get(spec)
        if known is not None:
            # A pod with this spec was registered before: its groups exist already, and so does
            # its list of them (never mutated: _owned entries are replaced, not changed).
            owned, inverse_keys = known
            for key in inverse_keys:
                self._own_inverse(uid, self.inverse[key])
        else:
            inverse_keys = []
            if pod.anti_affinity or (self._respect and pod.anti_affinity_preferred):
                inverse_keys = self._track_inverse(pod, None)
            found: dict[int, TopologyGroup] = {}
            for group in self._groups_for(pod):
                key = self._hash(group)
                existing = self.groups.get(key)
                if existing is None:
                    self._count(group)
                    self._insert(self.groups, key, group)
                    existing = group
                found.setdefault(id(existing), existing)
            owned = sorted(found.values(), key=lambda g: self._serial[id(g)])
            self._spec_groups[spec] = (owned, inverse_keys)
        for group in owned:
            group.owners.add(uid)
        self._owned[uid] = owned

    def _own_inverse(self, uid: str, group: TopologyGroup) -> None:
        if uid not in group.owners:
            group.owners.add(uid)
            self._inverse_owned.setdefault(uid, []).append(group)

    def _track_existing_anti_affinity(self) -> None:
        for pod in self._bound.anti_affinity:
            if self.uid(pod) in self._excluded:
                continue
            node = self._node_by_name.get(pod.node_name)
            self._track_inverse(pod, node.labels if node is not None else None)

    def _track_inverse(self, pod: Pod, node_labels: Mapping[str, str] | None) -> list[object]:
        keys: list[object] = []
        for term in pod.anti_affinity:
            group = self._new_group(
                kind=ANTI_AFFINITY,
                key=term.topology_key,
                pod=pod,
                namespaces=term_namespaces(pod, term, self._universe),
                selector=_term_selector(pod, term),
            )
            key = self._hash(group)
            existing = self.inverse.get(key)
            if existing is None:
                self._insert(self.inverse, key, group)
                existing = group
            if node_labels is not None and term.topology_key in node_labels:
                existing.record(node_labels[term.topology_key])
            self._own_inverse(self.uid(pod), existing)
            keys.append(key)
        return keys

    def _count(self, group: TopologyGroup) -> None:
        """Register the group's node domains and count its bound pods (not those being scheduled).

        The same as :meth:`_count_plain`, from what the solves of a pass share: the matched pods
        per node of the bound index and the per-StateNode domains of a :class:`topocounts.NodeView`."""
        if self._plain or PLAIN_COUNTS:
            self._count_plain(group)
            return
        view = topocounts.node_view(group.key, group.node_filter)
        if self._whole is not None:
            self._count_from_whole(group, view, self._whole)
            return
        group.register(*view.registered(self._nodes))
        if group.selector is None:
            return
        excluded = self._excluded
        by_name = self._node_by_name
        counted = view.counted
        for matched in self._bound.matching(group.namespaces, group.selector):
            per_node = matched.without(excluded) if excluded else matched.per_node
            for name, count in per_node.items():  # a domain is first recorded where it was before
                state = by_name.get(name)
                if state is None:
                    continue
                domain = counted(state)
                if domain is not None:
                    group.record_count(domain, count)

    def _count_from_whole(
        self, group: TopologyGroup, view: topocounts.NodeView, whole: topocounts.Whole
    ) -> None:
        """:meth:`_count` as the whole snapshot's count less the nodes taken out and the pods
        being scheduled (still counted where they are bound in the whole count)."""
        full = whole.count(self._hash(group), group, view, self._bound)
        registered = full.registered
        if self._without_active:
            registered = dict(registered)
            for state in self._without_active:
                for domain in view.registered((state,)):
                    left = registered[domain] - 1
                    if left:
                        registered[domain] = left
                    else:
                        del registered[domain]
        group.register(*registered)
        if group.selector is None:
            return
        counts = full.pods
        copied = False
        without, excluded, by_name, counted = self._without, self._excluded, whole.by_name, view.counted
        for matched in self._bound.matching(group.namespaces, group.selector):
            # the node names of the pods this solve does not count: all on the nodes taken out,
            # and those being scheduled wherever else they are bound
            gone = [name for name in without for _ in matched.positions.get(name, ())]
            for uid in excluded & matched.uids if excluded else ():
                for position in matched.where[uid]:
                    name = matched.pods[position][1]
                    if name not in without:
                        gone.append(name)
            for name in gone:
                node = by_name.get(name)
                where = counted(node) if node is not None else None
                if where is None:
                    continue
                if not copied:
                    counts, copied = dict(counts), True
                counts[where] -= 1
        for domain, count in counts.items():
            if count > 0:
                group.record_count(domain, count)

    def _count_plain(self, group: TopologyGroup) -> None:
        """The count without shared caches (the reference :meth:`_count` must equal)."""
        for node in self._nodes:
            if node.node is None:
                continue
            nf = group.node_filter
            if nf.active and not nf.matches(
                node.node.taints, self._labels_reqs("node:" + node.name, node.node.labels), frozenset()
            ):
                continue
            domain = node.labels.get(group.key)
            if domain is not None:
                group.register(domain)
        if group.selector is None:
            return
        for namespace in sorted(group.namespaces):
            for pod_labels, pods in self._bound_by_labels(namespace):
                if not group.selector.matches(pod_labels):
                    continue
                self._count_pods(group, pods)

    def _bound_by_labels(self, namespace: str) -> list[tuple[Mapping[str, str], list[Pod]]]:
        """The namespace's counted bound pods (in snapshot order) bucketed by identical labels."""
        return self._bound.buckets(namespace)

    def _count_pods(self, group: TopologyGroup, pods: Sequence[Pod]) -> None:
        per_node: dict[str, int] = {}  # node name -> pods counted there, in the order first seen
        excluded = self._excluded
        for pod in pods:
            if excluded and (pod.uid or pod.key) in excluded:
                continue  # being scheduled in this solve: counted where it lands
            per_node[pod.node_name] = per_node.get(pod.node_name, 0) + 1
        for name, count in per_node.items():  # a domain is first recorded where it was before
            domain = self._counted_domain(group, name)
            if domain is not None:
                group.record_count(domain, count)

    def _counted_domain(self, group: TopologyGroup, node_name: str) -> str | None:
        state = self._node_by_name.get(node_name)
        if state is None:
            return None
        return topocounts.counted_domain(state, group.key, group.node_filter, self._labels_reqs)

    def _labels_reqs(self, key: str, node_labels: Mapping[str, str]) -> Requirements:
        reqs = self._node_reqs.get(key)
        if reqs is None:
            reqs = self._node_reqs[key] = topocounts.requirements_of(node_labels)
        return reqs

    # -- use during a solve -------------------------------------------------------------
    def keyed(self, key: str) -> bool:
        """Whether a group (or inverse group) is keyed on ``key``: else :meth:`register` of that
        key only drops memoized domain choices."""
        return bool(self._by_key.get(key))

    def register(self, key: str, domain: str) -> None:
        self._memo.clear()
        for group in self._by_key.get(key, ()):
            group.register(domain)

    def _selecting_groups(self, pod: Pod) -> tuple[list[TopologyGroup], list[TopologyGroup]]:
        """(groups, inverse groups) whose selector and namespaces select ``pod``, in table order."""
        key = (pod.namespace, tuple(sorted(pod.labels.items())))
        cached = self._selecting.get(key)
        if cached is None or cached[0] != len(self.groups) or cached[1] != len(self.inverse):
            groups = [g for g in self.groups.values() if g.selects(pod)]
            inverse = [g for g in self.inverse.values() if g.selects(pod)]
            cached = (len(self.groups), len(self.inverse), groups, inverse)
            self._selecting[key] = cached
        return cached[2], cached[3]

    def _matching(
        self, pod: Pod, taints: Sequence[Taint], node_reqs: Requirements, allow: frozenset[str]
    ) -> list[TopologyGroup]:
        out = list(self._owned.get(self.uid(pod), ()))
        out += [g for g in self._selecting_groups(pod)[1] if g.node_filter.matches(taints, node_reqs, allow)]
        return out

    def constrains(self, pod: Pod, key: str) -> bool:
        """Whether a group the pod owns (or an inverse anti-affinity) is keyed on ``key``."""
        return any(g.key == key for g in self._owned.get(self.uid(pod), ())) or any(
            g.key == key for g in self._selecting_groups(pod)[1]
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
        memo = self._memo
        for group in self._matching(pod, taints, node_reqs, allow):
            pod_domains = pod_reqs.get_or_exists(group.key)
            node_domains = node_reqs.get_or_exists(group.key)
            key = (id(group), id(pod), pod_domains, node_domains)
            domains = memo.get(key)
            if domains is None:
                domains = memo[key] = group.next_domains(pod, pod_domains, node_domains)
            if len(domains) == 0:
                raise TopologyError(group, pod_domains, node_domains)
            out = out.add(domains)
        return out

    def forget(self) -> None:
        """Drop memoized domain choices (call before each pod; counts change clear it too)."""
        self._memo.clear()

    def record(self, pod: Pod, taints: Sequence[Taint], reqs: Requirements, allow: frozenset[str]) -> None:
        self._memo.clear()
        for group in self._selecting_groups(pod)[0]:
            if not group.node_filter.matches(taints, reqs, allow):
                continue
            domains = reqs.get_or_exists(group.key)
            if domains.complement:
                continue
            if group.kind == ANTI_AFFINITY:
                group.record(*sorted(domains.values))
            elif len(domains.values) == 1:
                group.record(next(iter(domains.values)))
        for group in self._inverse_owned.get(self.uid(pod), ()):
            domains = reqs.get_or_exists(group.key)
            if not domains.complement:
                group.record(*sorted(domains.values))
