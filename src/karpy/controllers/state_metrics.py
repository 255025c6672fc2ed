"""Cluster-level gauges and pod startup durations, refreshed from the cluster state.

``karpy_cluster_state_node_count``, ``karpy_nodes{nodepool,instance_type,capacity_type}``,
``karpy_cluster_cost_per_hour{nodepool}`` (the price of every launched NodeClaim's offering,
from its instance type, zone and capacity-type labels), ``karpy_pods_pending`` and
``karpy_pods_pending_oldest_age_seconds`` (unbound pods, DaemonSet pods excluded), and
``karpy_pods_startup_duration_seconds`` (pod creation -> Running, observed once per pod).

Each NodePool's instance types are asked for once per pass (not once per NodeClaim), a
claim's price is looked up again only when the claim or its instance type object changed,
the cost is summed again only when the NodeClaims, NodePools or NodeClasses changed or a
NodePool's instance types came back as other objects, the node counts only when the Nodes
changed (``Cluster.store_version``), and the pod gauges and startup observations only when
the cluster's pods changed (``Cluster.pods_version``).
"""

from __future__ import annotations

from collections.abc import Iterable

from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodeClaim, Pod
from karpy.state.cluster import Cluster

__all__ = ["StateMetrics"]


class StateMetrics:
    name = "metrics.state"

    def __init__(self, ctx: Context, *, interval: float = 10.0) -> None:
        self.ctx = ctx
        self.interval = interval
        self._started: set[str] = set()
        self._pods_version = -1  # Cluster.pods_version when ``_waiting`` was computed
        self._waiting: list[Pod] = []
        # NodePool name -> (its instance types, by name), reused while the source returns the same tuple
        self._types: dict[str, tuple[tuple[InstanceType, ...], dict[str, InstanceType]]] = {}
        # NodeClaim name -> (claim, its instance type, its offering's price), while both are the same objects
        self._prices: dict[str, tuple[NodeClaim, InstanceType, float | None]] = {}
        # the (claims, NodePools, NodeClasses) store versions of the cost last set, and the
        # instance type tuple each NodePool was priced with then
        self._cost_versions: tuple[int, int, int] | None = None
        self._priced_with: dict[str, tuple[InstanceType, ...]] = {}
        self._nodes_version = -1  # the Nodes store version of the node counts last set

    def reconcile(self) -> Result:
        cluster = self.ctx.cluster
        metrics = self.ctx.metrics
        metrics.cluster_state_nodes.set(len(cluster.nodes))
        self._cost(cluster)
        nodes_version = cluster.store_version("nodes")
        if nodes_version != self._nodes_version:  # else the gauges hold the same counts already
            self._nodes_version = nodes_version
            self._node_counts(cluster)
        now = self.ctx.now()
        since = self._pods_version  # (-1 before the first pass)
        changed = cluster.pods_version != since
        if changed:
            self._pods_version = cluster.pods_version
            self._waiting = [
                p for p in cluster.unbound_pods() if not p.is_terminal() and not p.is_daemonset_pod()
            ]
        waiting = self._waiting
        metrics.pending_pods.set(len(waiting))
        metrics.pending_oldest_age.set(max((now - p.created for p in waiting), default=0.0))
        if changed:  # else every Running pod was observed already
            self._observe_started(cluster, since)
        return Result(requeue_after=self.interval)

    def _observe_started(self, cluster: Cluster, since: int) -> None:
        """Observe the startup of each pod Running for the first time (in key order), and forget
        the pods gone: over the pods changed since ``since`` (the pods version the last look was
        at) when the cluster's journal still holds them, else over every pod."""
        started = self._started
        pods = cluster.pods
        changed = cluster.changed_since("pods", since) if since >= 0 else None
        keys: Iterable[str] = pods.keys() - started if changed is None else set(changed)
        running = []
        for key in keys:
            pod = pods.get(key)
            if pod is None:
                started.discard(key)
            elif key not in started and pod.phase == "Running" and pod.started is not None:
                running.append((key, pod.started, pod.created))
        for key, at, created in sorted(running, key=lambda r: r[0]):  # observed in key order
            started.add(key)
            self.ctx.metrics.pods_startup_duration.observe(max(0.0, at - created))
        if changed is None:
            started.intersection_update(pods)

    def _cost(self, cluster: Cluster) -> None:
        """``karpy_cluster_cost_per_hour``: set again unless the claims, NodePools, NodeClasses and
        the instance type tuples their NodePools were priced with are all the same as last pass."""
        versions = (
            cluster.store_version("claims"),
            cluster.store_version("node_pools"),
            cluster.store_version("node_classes"),
        )
        if versions == self._cost_versions and all(
            (pool := cluster.node_pools.get(name)) is not None
            and cluster.instance_types(pool, cluster.node_class_for(pool)) is types
            for name, types in self._priced_with.items()
        ):
            return
        costs: dict[str, float] = {name: 0.0 for name in cluster.node_pools}
        types_now: dict[str, dict[str, InstanceType]] = {}  # asked once per NodePool per pass
        priced_with: dict[str, tuple[InstanceType, ...]] = {}
        for claim in cluster.claims.values():
            pool = cluster.node_pools.get(claim.node_pool)
            if pool is None or not claim.provider_id:
                continue
            by_name = types_now.get(pool.name)
            if by_name is None:
                types = cluster.instance_types(pool, cluster.node_class_for(pool))
                priced_with[pool.name] = types
                cached = self._types.get(pool.name)
                if cached is not None and cached[0] is types:
                    by_name = cached[1]
                else:
                    by_name = {it.name: it for it in types}
                    self._types[pool.name] = (types, by_name)
                types_now[pool.name] = by_name
            it = by_name.get(claim.labels.get(labels.INSTANCE_TYPE, ""))
            if it is None:
                continue
            known = self._prices.get(claim.name)
            if known is not None and known[0] is claim and known[1] is it:
                price = known[2]
            else:
                prices = [
                    o.price
                    for o in it.offerings
                    if o.zone == claim.labels.get(labels.ZONE)
                    and o.capacity_type == claim.labels.get(labels.CAPACITY_TYPE)
                ]
                price = min(prices) if prices else None
                self._prices[claim.name] = (claim, it, price)
            if price is not None:
                costs[pool.name] = costs.get(pool.name, 0.0) + price
        for name in [n for n in self._prices if n not in cluster.claims]:
            del self._prices[name]
        for pool_name, cost in sorted(costs.items()):
            self.ctx.metrics.cluster_cost.labels(nodepool=pool_name).set(cost)
        self._cost_versions = versions
        self._priced_with = priced_with

    def _node_counts(self, cluster: Cluster) -> None:
        """``karpy_nodes{nodepool,instance_type,capacity_type}`` from the Nodes' labels."""
        metrics = self.ctx.metrics
        counts: dict[tuple[str, str, str], int] = {}
        for node in cluster.nodes.values():
            owner = node.labels.get(labels.NODEPOOL)
            if owner is None:
                continue
            group = (
                owner,
                node.labels.get(labels.INSTANCE_TYPE, ""),
                node.labels.get(labels.CAPACITY_TYPE, ""),
            )
            counts[group] = counts.get(group, 0) + 1
        metrics.nodes.clear()
        for (owner, instance_type, capacity_type), count in sorted(counts.items()):
            metrics.nodes.labels(
                nodepool=owner, instance_type=instance_type, capacity_type=capacity_type
            ).set(count)
