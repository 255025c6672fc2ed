"""Prometheus metrics, prefixed ``karpy_`` so they never collide with an installed Karpenter.

Names otherwise mirror Karpenter's (``karpenter_nodeclaims_created_total`` ->
``karpy_nodeclaims_created_total``). One :class:`Metrics` object per runtime, on its own
registry (served by the operator; read by the simulator's report and by tests).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]

_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60)
_POD_BUCKETS = (1, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.nodeclaims_created = Counter(
            "karpy_nodeclaims_created", "NodeClaims created", ["reason", "nodepool"], registry=r
        )
        self.nodeclaims_terminated = Counter(
            "karpy_nodeclaims_terminated", "NodeClaims terminated", ["nodepool"], registry=r
        )
        self.nodeclaims_disrupted = Counter(
            "karpy_nodeclaims_disrupted",
            "NodeClaims disrupted",
            ["reason", "nodepool", "capacity_type"],
            registry=r,
        )
        self.nodes_created = Counter("karpy_nodes_created", "Nodes registered", ["nodepool"], registry=r)
        self.nodes_terminated = Counter(
            "karpy_nodes_terminated", "Nodes terminated", ["nodepool"], registry=r
        )
        self.pods_startup_duration = Histogram(
            "karpy_pods_startup_duration_seconds",
            "Time from pod creation to the pod running",
            buckets=_POD_BUCKETS,
            registry=r,
        )
        self.pods_evicted = Counter("karpy_pods_eviction_requests", "Eviction requests", ["code"], registry=r)
        self.scheduling_duration = Histogram(
            "karpy_scheduler_scheduling_duration_seconds",
            "Duration of one scheduling simulation",
            ["controller"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "karpy_scheduler_unschedulable_pods_count", "Pods the last solve could not place", registry=r
        )
        self.pods_unschedulable = Gauge(
            "karpy_pods_unschedulable",
            "Pods the last provisioning solve could not place, by reason class (0 once a class clears)",
            ["reason"],
            registry=r,
        )
        self.nominations_bound = Counter(
            "karpy_scheduler_nominations_bound",
            "Pods kube-scheduler bound where karpy nominated them",
            registry=r,
        )
        self.nomination_divergence = Counter(
            "karpy_scheduler_nomination_divergence",
            "Pods kube-scheduler bound elsewhere than karpy nominated: scoring | not-ready | gone",
            ["reason"],
            registry=r,
        )
        self.disruption_decisions = Counter(
            "karpy_voluntary_disruption_decisions",
            "Disruption commands started",
            ["decision", "reason", "consolidation_type"],
            registry=r,
        )
        self.disruption_failed_validations = Counter(
            "karpy_voluntary_disruption_failed_validations",
            "Commands dropped at validation",
            ["reason"],
            registry=r,
        )
        self.disruption_queue_failures = Counter(
            "karpy_voluntary_disruption_queue_failures",
            "Disruption commands that failed while waiting for replacements",
            ["reason"],
            registry=r,
        )
        self.cluster_cost = Gauge(
            "karpy_cluster_cost_per_hour", "Hourly price of the launched NodeClaims", ["nodepool"], registry=r
        )
        self.cluster_state_nodes = Gauge(
            "karpy_cluster_state_node_count", "Nodes in the cluster state", registry=r
        )
        self.nodes = Gauge(
            "karpy_nodes",
            "Managed nodes by NodePool, instance type and capacity type",
            ["nodepool", "instance_type", "capacity_type"],
            registry=r,
        )
        self.pending_pods = Gauge("karpy_pods_pending", "Pods waiting for a node", registry=r)
        self.pending_oldest_age = Gauge(
            "karpy_pods_pending_oldest_age_seconds", "Age of the oldest pod waiting for a node", registry=r
        )
        self.cache_synced = Gauge(
            "karpy_cache_synced",
            "1 while a watched kind is listed and its list/watch works, else 0",
            ["kind"],
            registry=r,
        )
        self.nodepool_headroom = Gauge(
            "karpy_nodepool_headroom",
            "Headroom a NodePool keeps (karpy.sh/headroom): kind=asked, and kind=free (allocatable its "
            "initialized nodes have free); cpu in cores, others in units",
            ["nodepool", "resource", "zone", "kind"],
            registry=r,
        )

        # shadow mode (``karpy operator --shadow``, :mod:`karpy.controllers.shadow`): karpy's
        # decisions beside those of the installed autoscaler, which acts
        self.shadow_launches = Counter(
            "karpy_shadow_launches",
            "NodeClaims karpy would have launched in shadow mode (disruption replacements included)",
            ["nodepool", "instance_type"],
            registry=r,
        )
        self.shadow_installed_launches = Counter(
            "karpy_shadow_installed_launches",
            "Nodes the installed autoscaler launched while karpy watched (NodeClaims, else Nodes)",
            ["instance_type"],
            registry=r,
        )
        self.shadow_disruptions = Counter(
            "karpy_shadow_disruptions",
            "Nodes karpy would have disrupted in shadow mode, by disruption reason",
            ["reason"],
            registry=r,
        )
        self.shadow_installed_disruptions = Counter(
            "karpy_shadow_installed_disruptions",
            "Nodes the installed autoscaler removed while karpy watched, by the reason it left visible",
            ["reason"],
            registry=r,
        )
        self.shadow_disruptions_agreed = Counter(
            "karpy_shadow_disruptions_agreed",
            "Nodes the installed autoscaler removed that karpy had decided to disrupt too (karpy's reason)",
            ["reason"],
            registry=r,
        )
        self.shadow_pods_matched = Counter(
            "karpy_shadow_pods_matched",
            "Pods of karpy's would-launch decisions, by where they ran: same_type | other_type (a node "
            "the installed autoscaler launched, of the type karpy chose or another) | existing_node",
            ["result"],
            registry=r,
        )
        self.shadow_launch_agreement = Gauge(
            "karpy_shadow_launch_agreement_ratio",
            "same_type / (same_type + other_type) of karpy_shadow_pods_matched",
            registry=r,
        )
        self.shadow_fleet_cost = Gauge(
            "karpy_shadow_fleet_cost_per_hour",
            "Hourly price of the installed fleet (fleet=installed) and of the fleet karpy would run for "
            "the same pods (fleet=karpy), at catalog prices",
            ["fleet"],
            registry=r,
        )
        self.shadow_fleet_nodes = Gauge(
            "karpy_shadow_fleet_nodes", "Nodes of the installed fleet and of karpy's", ["fleet"], registry=r
        )
        self.shadow_fleet_unpriced = Gauge(
            "karpy_shadow_fleet_unpriced_nodes",
            "Installed Nodes the catalog has no price for (left out of fleet=installed)",
            registry=r,
        )
        self.shadow_fleet_unplaced = Gauge(
            "karpy_shadow_fleet_unplaced_pods",
            "Pods karpy's fleet could not place (left out of fleet=karpy)",
            registry=r,
        )

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (0 when absent); for tests and reports."""
        sample = self.registry.get_sample_value(name, labels or {})
        return 0.0 if sample is None else float(sample)
