"""One-shot tools over files: a provisioning plan and a disruption dry-run.

Builds a :class:`~karpy.state.cluster.Cluster` from what :mod:`karpy.api.load` read
(NodePools, NodeClasses, Nodes, NodeClaims, Pods, DaemonSets, Deployments/ReplicaSets
expanded to pending pods, PDBs, Namespaces, and the storage kinds: PersistentVolumeClaims,
PersistentVolumes, StorageClasses, CSINodes), then either runs
:func:`karpy.core.scheduling.solve` and the launch rule (``karpy plan``) or one pass of
:func:`karpy.core.disruption.compute` (``karpy disrupt``).

As upstream's provisioner launches only from NodePools whose NodeClass is ready, a plan leaves
out each NodePool whose ``nodeClassRef`` names a NodeClass not in the input
(:func:`missing_node_classes`: ``NodeClass EC2NodeClass/foo not found``): it gets no NodeClaims,
:attr:`Plan.skipped_pools` says why and so does each unschedulable pod's reasons
(``nodepool/<name>``). ``assume_node_classes`` (``--assume-nodeclasses``, for NodePools planned
alone) plans them as if their NodeClass were there (the catalog's defaults).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from karpy import catalog as catalog_mod
from karpy import settings as settings_mod
from karpy.api import load as api_load
from karpy.core import scheduling
from karpy.core.snapshot import Snapshot
from karpy.model.catalog import Catalog, InstanceType
from karpy.model.nodeclass import NodeClass
from karpy.model.objects import NodePool
from karpy.state.cluster import Cluster
from karpy.state.events import ObjectEvent

if TYPE_CHECKING:  # imported where used: a plain plan loads neither the LP nor the disruption core
    from karpy.core import disruption
    from karpy.core.optimize import bound as bound_mod
    from karpy.core.optimize import repack

__all__ = [
    "PACKINGS",
    "DryRun",
    "Plan",
    "build_cluster",
    "cost_ratio",
    "disrupt",
    "make_plan",
    "missing_node_classes",
    "plan_snapshot",
    "with_skipped_pools",
]

PACKINGS = ("faithful", "optimized")


@dataclass(frozen=True, slots=True)
class Plan:
    catalog: str
    results: scheduling.Results
    launched: tuple[scheduling.Launched, ...]
    unlaunchable: tuple[scheduling.PlannedClaim, ...]
    pending: int
    packing: str = "faithful"
    faithful_cost: float | None = None  # with packing optimized: what the faithful plan costs
    repacked: repack.Repacked | None = None
    bound: bound_mod.Bound | None = None  # with --bound: the LP lower bound for the placed pods
    skipped_pools: tuple[tuple[str, str], ...] = ()  # (NodePool, why it launches nothing), by name

    @property
    def hourly_cost(self) -> float:
        return sum(node.price for node in self.launched)

    @property
    def cost_ratio(self) -> float | None:
        """Hourly cost over the lower bound (None without a bound; see :func:`cost_ratio`)."""
        return None if self.bound is None else cost_ratio(self.hourly_cost, self.bound.lower_bound)


def cost_ratio(cost: float, lower_bound: float) -> float | None:
    """``cost`` over ``lower_bound``: 1.0 for nothing at no cost, None for a cost over a zero bound."""
    if lower_bound <= 0:
        return 1.0 if cost <= 0 else None
    return cost / lower_bound


class _Types(catalog_mod.PerNodeClass):
    """Instance types per NodePool, resolved through its NodeClass."""

    def __call__(self, pool: NodePool, node_class: NodeClass | None) -> tuple[InstanceType, ...]:
        return self.catalog(node_class).instance_types


def missing_node_classes(loaded: api_load.Loaded) -> dict[str, str]:
    """NodePool name -> why it cannot launch (``NodeClass EC2NodeClass/foo not found``), for each
    NodePool whose ``nodeClassRef`` names a NodeClass ``loaded`` does not hold."""
    classes: list[NodeClass] = [*loaded.ec2_node_classes, *loaded.kwok_node_classes]
    present = {(nc.kind, nc.name) for nc in classes}
    out: dict[str, str] = {}
    for pool in loaded.node_pools:
        ref = pool.node_class_ref
        if ref is None:
            out[pool.name] = "no nodeClassRef"
        elif (ref.kind, ref.name) not in present:
            out[pool.name] = f"NodeClass {ref.kind}/{ref.name} not found"
    return dict(sorted(out.items()))


def build_cluster(
    loaded: api_load.Loaded,
    *,
    catalog_spec: str,
    settings: settings_mod.Settings,
    prices: dict[Any, float] | None = None,
    without_pools: frozenset[str] = frozenset(),
) -> tuple[Cluster, Catalog]:
    """The cluster state of ``loaded`` (less the NodePools named in ``without_pools``)."""
    types = _Types(catalog_spec, pricing=settings.pricing, prices_override=prices)
    base = types.catalog(None)
    cluster = Cluster(types, settings=settings, well_known=base.well_known)
    objects: list[Any] = [
        *(p for p in loaded.node_pools if p.name not in without_pools),
        *loaded.ec2_node_classes,
        *loaded.kwok_node_classes,
        *loaded.nodes,
        *loaded.node_claims,
        *loaded.daemonsets,
        *loaded.pdbs,
        *loaded.claims,
        *loaded.persistent_volumes,
        *loaded.storage_classes,
        *loaded.csi_nodes,
        *loaded.workload_pods(),
    ]
    objects.extend(loaded.namespaces)
    for obj in objects:
        cluster.apply(ObjectEvent.added(obj))
    return cluster, base


def make_plan(
    loaded: api_load.Loaded,
    *,
    catalog_spec: str = "aws:us-east-1",
    settings: settings_mod.Settings | None = None,
    prices: dict[Any, float] | None = None,
    bound: bool = False,
    packing: str | None = None,
    assume_node_classes: bool = False,
) -> Plan:
    """Plan for the pending pods in ``loaded``; ``packing`` defaults to the settings' (faithful).
    A NodePool whose NodeClass is not in ``loaded`` launches nothing unless ``assume_node_classes``."""
    settings = settings or settings_mod.Settings()
    skipped = {} if assume_node_classes else missing_node_classes(loaded)
    cluster, base = build_cluster(
        loaded, catalog_spec=catalog_spec, settings=settings, prices=prices, without_pools=frozenset(skipped)
    )
    plan = plan_snapshot(
        cluster.snapshot(0.0),
        catalog=base.name,
        catalog_order=[it.name for it in base.instance_types],
        well_known=base.well_known,
        bound=bound,
        packing=packing,
    )
    return with_skipped_pools(plan, skipped)


def with_skipped_pools(plan: Plan, skipped: dict[str, str]) -> Plan:
    """``plan`` noting the NodePools left out: in :attr:`Plan.skipped_pools` and in each
    unschedulable pod's reasons (``nodepool/<name>``)."""
    if not skipped:
        return plan
    notes = {f"nodepool/{name}": why for name, why in skipped.items()}
    errors = tuple(
        replace(e, reasons=dict(sorted({**e.reasons, **notes}.items()))) for e in plan.results.errors
    )
    return replace(plan, results=replace(plan.results, errors=errors), skipped_pools=tuple(skipped.items()))


def plan_snapshot(
    snapshot: Snapshot,
    *,
    catalog: str,
    catalog_order: list[str],
    well_known: frozenset[str],
    bound: bool = False,
    packing: str | None = None,
) -> Plan:
    """Solve ``snapshot``, launch its claims, then optionally re-pack and bound the cost.

    The bound covers the pods the faithful plan placed (on existing nodes or on launched
    NodeClaims); the optimized packing moves only those, so one bound serves both.
    """
    packing = packing or snapshot.settings.scheduling.packing
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {', '.join(PACKINGS)}, not {packing!r}")
    results = scheduling.solve(snapshot)
    launched: list[scheduling.Launched] = []
    unlaunchable: list[scheduling.PlannedClaim] = []
    launcher = scheduling.Launcher(catalog_order, well_known=well_known)
    for claim in results.new_claims:
        node = launcher.launch(claim)
        if node is None:
            unlaunchable.append(claim)
        else:
            launched.append(node)
    pending = len(snapshot.pending_pods())
    plan = Plan(catalog, results, tuple(launched), tuple(unlaunchable), pending)
    if packing == "optimized":
        from karpy.core.optimize import repack

        done = repack.repack(snapshot, results, launched, catalog_order=catalog_order, well_known=well_known)
        plan = replace(
            plan,
            results=done.results,
            launched=done.launched,
            packing=packing,
            faithful_cost=done.faithful_cost,
            repacked=done,
        )
    if bound:
        placed = set(results.existing)
        placed.update(p.key for node in launched for p in node.claim.pods)
        pods = [p for p in snapshot.pending_pods() if p.key in placed]
        from karpy.core.optimize import bound as bound_mod

        plan = replace(plan, bound=bound_mod.lower_bound(snapshot, pods))
    return plan


@dataclass(frozen=True, slots=True)
class DryRun:
    catalog: str
    now: float
    decision: disruption.Decision
    replacements: tuple[scheduling.Launched | None, ...]


def disrupt(
    loaded: api_load.Loaded,
    *,
    now: float,
    catalog_spec: str = "aws:us-east-1",
    settings: settings_mod.Settings | None = None,
    prices: dict[Any, float] | None = None,
) -> DryRun:
    """One disruption pass at ``now`` over the objects read from files (nothing is executed)."""
    from karpy.core import disruption

    settings = settings or settings_mod.Settings()
    cluster, base = build_cluster(loaded, catalog_spec=catalog_spec, settings=settings, prices=prices)
    decision = disruption.compute(cluster.snapshot(now), now)
    order = [it.name for it in base.instance_types]
    launched: tuple[scheduling.Launched | None, ...] = ()
    if decision.command is not None:
        launched = tuple(
            scheduling.launch(r, order, well_known=base.well_known) for r in decision.command.replacements
        )
    return DryRun(base.name, now, decision, launched)
