"""The kube-scheduler filters that the binder and the Cluster Autoscaler model both apply.

Node-local filters: :func:`node_affinity_ok` (``nodeSelector`` and the required
nodeSelectorTerms) and :func:`taints_ok` (NoSchedule and NoExecute taints tolerated). A node's
topology value is :func:`label`, where a node without a ``kubernetes.io/hostname`` label
counts as its own name. Inter-pod terms: :func:`resolve_term` turns a pod's (anti-)affinity
term into a :class:`Term` (namespaces, ``matchLabelKeys``, ``mismatchLabelKeys``);
:func:`term_domains`, :func:`forbidden_domains` and :func:`spread_constraint` count the pods
that match a term per topology domain, from per-node counts the caller keeps; and
:class:`InterPodPlan` says whether a node satisfies the result. :func:`volume_verdict` is
kube-scheduler's VolumeBinding, VolumeZone and NodeVolumeLimits filters over a pod's volumes as
:mod:`karpy.core.scheduling.volumes` resolves them (the rules Karpenter's scheduling applies
too): a bound volume's node affinity or an unbound ``WaitForFirstConsumer`` class's allowed
topology against the node's labels, then the claims per CSI driver against the node's CSINode
limit (else its instance type's). :func:`pdb_allowed` is a PodDisruptionBudget's allowed
disruptions. Pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.core.scheduling import volumes
from karpy.model import labels as wk
from karpy.model import requirements as reqs_mod
from karpy.model.objects import Node, Pod, PodAffinityTerm, PodDisruptionBudget, TopologySpreadConstraint
from karpy.model.selectors import LabelSelector, SelectorRequirement
from karpy.model.taints import PREFER_NO_SCHEDULE, first_untolerated

__all__ = [
    "VOLUME",
    "VOLUME_LIMIT",
    "VOLUME_TOPOLOGY",
    "CounterKey",
    "InterPodPlan",
    "Spread",
    "Term",
    "forbidden_domains",
    "hard_spread",
    "label",
    "node_affinity_ok",
    "pdb_allowed",
    "requirement_ok",
    "resolve_term",
    "spread_constraint",
    "spread_term",
    "taints_ok",
    "term_domains",
    "volume_verdict",
]

CounterKey = tuple[frozenset[str] | None, LabelSelector]  # (namespaces or all, selector)
VOLUME = "volume"  # a claim, its volume or its class is missing, or an Immediate claim is unbound
VOLUME_TOPOLOGY = "volume-topology"  # the volumes' topology rules the node out
VOLUME_LIMIT = "volume-limit"  # the node would attach more volumes of a driver than it allows


def label(node: Node, key: str) -> str | None:
    """The node's value for a topology key; the hostname defaults to the node's name."""
    value = node.labels.get(key)
    if value is None and key == wk.HOSTNAME:
        return node.name
    return value


def requirement_ok(req: reqs_mod.Requirement, node: Node) -> bool:
    value = label(node, req.key)
    if value is None:
        return (
            req.operator in (reqs_mod.NOT_IN, reqs_mod.DOES_NOT_EXIST) and req.gte is None and req.lte is None
        )
    return req.has(value)


def node_affinity_ok(pod: Pod, node: Node) -> bool:
    """nodeSelector AND (any required nodeSelectorTerm)."""
    for key, value in pod.node_selector.items():
        if label(node, key) != value:
            return False
    if not pod.required_terms:
        return True
    return any(all(requirement_ok(r, node) for r in term.requirements) for term in pod.required_terms)


def taints_ok(pod: Pod, node: Node) -> bool:
    """NoSchedule and NoExecute taints must be tolerated; PreferNoSchedule only scores."""
    hard = [t for t in node.taints if t.effect != PREFER_NO_SCHEDULE]
    return not hard or first_untolerated(pod.tolerations, hard) is None


def volume_verdict(found: volumes.PodVolumes | None, node: Node, used: Callable[[], volumes.Attached]) -> str:
    """Why the pod's volumes (``found``, resolved through a
    :class:`~karpy.core.scheduling.volumes.VolumeContext`) rule ``node`` out: :data:`VOLUME`,
    :data:`VOLUME_TOPOLOGY` or :data:`VOLUME_LIMIT`; "" when they do not. ``used`` gives the claims
    the node's pods attach already (asked only when the pod attaches some)."""
    if found is None:
        return ""
    if found.problem:
        return VOLUME
    if found.requirements is not None and not all(
        requirement_ok(r, node) for r in found.requirements.values()
    ):
        return VOLUME_TOPOLOGY
    context = found.context
    if found.attach and context is not None:
        limits = context.limits(node.name, node.labels)
        if limits and volumes.over_limit(used(), found.attach, limits) is not None:
            return VOLUME_LIMIT
    return ""


# -- inter-pod terms -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    """A pod (anti-)affinity term resolved against the pod that carries it."""

    key: str
    namespaces: frozenset[str] | None  # None = all namespaces
    selector: LabelSelector | None  # None matches nothing

    @property
    def counter(self) -> CounterKey | None:
        return None if self.selector is None else (self.namespaces, self.selector)

    def matches(self, pod: Pod) -> bool:
        return (
            self.selector is not None
            and (self.namespaces is None or pod.namespace in self.namespaces)
            and self.selector.matches(pod.labels)
        )


def _namespaces(
    term: PodAffinityTerm, owner_namespace: str, namespaces: Mapping[str, Mapping[str, str]]
) -> frozenset[str] | None:
    chosen = set(term.namespaces)
    if term.namespace_selector is not None:
        if term.namespace_selector.is_empty():
            return None
        chosen |= {name for name, labels in namespaces.items() if term.namespace_selector.matches(labels)}
    elif not chosen:
        chosen.add(owner_namespace)
    return frozenset(chosen)


def resolve_term(
    term: PodAffinityTerm,
    owner: Pod,
    namespaces: Mapping[str, Mapping[str, str]],
    *,
    mismatch_label_keys: bool = True,
) -> Term:
    """``term`` of ``owner`` with its namespaces (``namespaces``: name -> labels) and label keys
    resolved; ``mismatch_label_keys=False`` ignores ``mismatchLabelKeys``."""
    selector = term.selector
    if selector is not None:
        same = {k: owner.labels[k] for k in term.match_label_keys if k in owner.labels}
        if same:
            selector = selector.with_labels(same)
        different = tuple(
            SelectorRequirement(k, "NotIn", (owner.labels[k],))
            for k in (term.mismatch_label_keys if mismatch_label_keys else ())
            if k in owner.labels
        )
        if different:
            selector = LabelSelector(selector.match_labels, selector.match_expressions + different)
    return Term(term.topology_key, _namespaces(term, owner.namespace, namespaces), selector)


def term_domains(term: Term, counts: Mapping[str, int], node_of: Callable[[str], Node | None]) -> set[str]:
    """Topology values of the nodes holding a pod that matches ``term`` (``counts``: per node)."""
    out: set[str] = set()
    for name, n in counts.items():
        node = node_of(name)
        if n > 0 and node is not None:
            value = label(node, term.key)
            if value is not None:
                out.add(value)
    return out


def forbidden_domains(pod: Pod, holders: Iterable[tuple[Node, Sequence[Term]]]) -> set[tuple[str, str]]:
    """The (key, value) domains that placed pods' required anti-affinity (``holders``: each
    placed pod's node and resolved terms) closes to ``pod``."""
    out: set[tuple[str, str]] = set()
    for node, terms in holders:
        for t in terms:
            value = label(node, t.key)
            if value is not None and t.matches(pod):
                out.add((t.key, value))
    return out


@dataclass(slots=True)
class Spread:
    key: str
    domains: dict[str, int]
    minimum: int
    self_match: int
    max_skew: int


def hard_spread(pod: Pod) -> list[TopologySpreadConstraint]:
    """The pod's ``DoNotSchedule`` topology spread constraints."""
    return [c for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"]


def spread_term(pod: Pod, c: TopologySpreadConstraint) -> Term:
    """The pods a spread constraint counts: its selector (with ``matchLabelKeys``) in the pod's namespace."""
    selector = c.selector
    if selector is not None:
        same = {k: pod.labels[k] for k in c.match_label_keys if k in pod.labels}
        if same:
            selector = selector.with_labels(same)
    return Term(c.topology_key, frozenset({pod.namespace}), selector)


def spread_constraint(
    pod: Pod,
    c: TopologySpreadConstraint,
    term: Term,
    *,
    keys: Sequence[str],
    nodes: Iterable[Node],
    counts: Mapping[str, int],
) -> Spread:
    """PodTopologySpread for one constraint: matching pods per domain over the eligible nodes
    (every key in ``keys`` set, node affinity and taints as the policies say), and the global
    minimum (0 while fewer than ``minDomains`` domains exist). ``counts``: matching pods per node."""
    domains: dict[str, int] = {}
    for node in nodes:
        if any(label(node, k) is None for k in keys):
            continue
        if c.node_affinity_policy == "Honor" and not node_affinity_ok(pod, node):
            continue
        if c.node_taints_policy == "Honor" and not taints_ok(pod, node):
            continue
        value = label(node, c.topology_key) or ""
        domains[value] = domains.get(value, 0) + counts.get(node.name, 0)
    minimum = min(domains.values()) if domains else 0
    if c.min_domains is not None and len(domains) < c.min_domains:
        minimum = 0
    return Spread(c.topology_key, domains, minimum, int(term.matches(pod)), c.max_skew)


@dataclass(slots=True)
class InterPodPlan:
    """What one pod needs of a node beyond the node-local filters."""

    affinity: list[tuple[str, set[str]]] = field(default_factory=list)
    affinity_free: bool = False  # no pod matches any term and the pod matches its own: allowed
    anti: list[tuple[str, set[str]]] = field(default_factory=list)
    forbidden: set[tuple[str, str]] = field(default_factory=set)  # existing pods' anti-affinity
    spread: list[Spread] = field(default_factory=list)

    def node_local(self) -> bool:
        """No term of the pod's own (existing pods' anti-affinity is in ``forbidden``)."""
        return not self.affinity and not self.affinity_free and not self.anti and not self.spread

    def set_affinity(self, pod: Pod, own: Sequence[Term], domains: Callable[[Term], set[str]]) -> None:
        """The pod's required affinity terms: a node must be in a domain of every term, unless no
        pod matches any term and the pod matches its own (the first pod of a group)."""
        self.affinity = [(t.key, domains(t)) for t in own]
        self.affinity_free = not any(values for _, values in self.affinity) and all(
            t.matches(pod) for t in own
        )

    def allows(self, node: Node) -> bool:
        if not self.affinity_free:
            for key, values in self.affinity:
                if label(node, key) not in values:
                    return False
        for key, values in self.anti:
            value = label(node, key)
            if value is not None and value in values:
                return False
        for key, value in self.forbidden:
            if label(node, key) == value:
                return False
        for s in self.spread:
            value = label(node, s.key)
            if value is None or s.domains.get(value, 0) + s.self_match - s.minimum > s.max_skew:
                return False
        return True


# -- disruption budgets --------------------------------------------------------------------


def _scaled(value: str, total: int) -> int:
    return -(-int(value[:-1]) * total // 100) if value.endswith("%") else int(value)


def pdb_allowed(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> int:
    """How many more of the PDB's pods may be disrupted now (percentages round up)."""
    selector = pdb.selector
    if selector is None:
        return 0
    chosen = [
        p
        for p in pods
        if p.namespace == pdb.namespace
        and not p.deleting
        and not p.is_terminal()
        and selector.matches(p.labels)
    ]
    healthy = sum(1 for p in chosen if p.ready)
    if pdb.min_available is not None:
        desired = _scaled(str(pdb.min_available), len(chosen))
    elif pdb.max_unavailable is not None:
        desired = len(chosen) - _scaled(str(pdb.max_unavailable), len(chosen))
    else:
        desired = len(chosen)
    return max(0, healthy - desired)
