"""The AWS provider assembled: every part built once and the loop tasks that keep it current.

:func:`build` makes, from the boto3 clients and the settings, the unavailable-offerings cache,
pricing, the discovered instance types, launch templates, the :class:`AWSCloudProvider`, the
EC2NodeClass status controller, the tagging controller and (with ``INTERRUPTION_QUEUE``) the
interruption controller. :meth:`AWSStack.tasks` lists the loop tasks the operator registers:

==================  =====================================================================
``aws.cluster``      re-discover the cluster (endpoint, CA, CIDR, version) every 5 minutes
``aws.nodeclass``    EC2NodeClass status and hash, on change and every 5 minutes
``aws.pricing``      on-demand and spot prices every 12 hours (last good kept on errors)
``aws.instancetypes`` DescribeInstanceTypes/Offerings every 12 hours
``aws.launchtemplates`` delete the launch templates unused for a minute (every 10 s)
``aws.tagging``      Name and NodeClaim tags once a node registered
``aws.interruption`` act on the SQS queue's messages (the long poll runs on its own thread)
==================  =====================================================================

Called by :mod:`karpy.operator` (``--provider aws``), the end-to-end tests and the benchmark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.model.nodeclass import EC2NodeClass
from karpy.ports import Clock
from karpy.providers.aws import cluster as cluster_mod
from karpy.providers.aws import sdk
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.instancetypes import InstanceTypeProvider, ShippedCatalog
from karpy.providers.aws.interruption import InterruptionController
from karpy.providers.aws.launchtemplates import LaunchTemplates
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.nodeclass_status import NodeClassStatusController
from karpy.providers.aws.pricing import PricingProvider
from karpy.providers.aws.provider import AWSCloudProvider
from karpy.providers.aws.tagging import Tagging
from karpy.providers.aws.unavailable import UnavailableOfferings
from karpy.settings import PricingSettings
from karpy.state.cluster import Cluster

__all__ = ["CLUSTER_REFRESH", "SWEEP_INTERVAL", "AWSStack", "Task", "build"]

CLUSTER_REFRESH = 300.0
SWEEP_INTERVAL = 10.0

log = logging.getLogger("karpy.aws")

Task = tuple[str, Callable[[], float | None]]


@dataclass
class AWSStack:
    clients: sdk.Clients
    settings: AWSSettings
    metrics: AWSMetrics
    unavailable: UnavailableOfferings
    pricing: PricingProvider
    instance_types: InstanceTypeProvider
    launch_templates: LaunchTemplates
    provider: AWSCloudProvider
    info: cluster_mod.ClusterInfo
    server_version: str = ""
    dns_ip: str = ""
    nodeclass: NodeClassStatusController | None = None
    tagging: Tagging | None = None
    interruption: InterruptionController | None = None
    _wakes: dict[str, Callable[[], None]] = field(default_factory=dict)

    def cluster_info(self) -> cluster_mod.ClusterInfo:
        return self.info

    def attach(
        self,
        ctx: Context,
        *,
        wake: Callable[[str], None] = lambda _name: None,
        active: Callable[[], bool] = lambda: True,
    ) -> None:
        """Build the controllers that need the operator's context (its kube client and events);
        ``active`` says whether this replica leads (only the leader takes interruption messages)."""
        self.nodeclass = NodeClassStatusController(
            ctx,
            self.clients,
            cluster=self.cluster_info,
            metrics=self.metrics,
            on_deleted=self._node_class_deleted,
        )
        self.tagging = Tagging(ctx, self.clients.ec2, cluster=self.settings.cluster_name)
        if self.settings.interruption_queue:
            self.interruption = InterruptionController(
                ctx,
                self.clients,
                queue=self.settings.interruption_queue,
                unavailable=self.unavailable,
                metrics=self.metrics,
                wake=lambda: wake("aws.interruption"),
                active=active,
            )

    def _node_class_deleted(self, nc: EC2NodeClass) -> None:
        gone = self.launch_templates.delete_for_node_class(nc.name)
        log.info("EC2NodeClass %s deleted: %d launch templates removed", nc.name, gone)

    def _refresh_cluster(self) -> float | None:
        fresh = cluster_mod.discover(
            self.clients, self.settings, server_version=self.server_version, dns_ip=self.dns_ip
        )
        for problem in fresh.problems:
            log.warning("cluster discovery: %s", problem)
        if fresh.problems and self.info.endpoint:
            return CLUSTER_REFRESH  # keep what was found before
        self.info = fresh
        return CLUSTER_REFRESH

    def _sweep(self) -> float | None:
        self.launch_templates.sweep()
        self.metrics.launch_templates.set(len(self.launch_templates))
        return SWEEP_INTERVAL

    def tasks(self) -> list[Task]:
        """(name, run) pairs for the loop; ``run`` returns the seconds until it wants to run again."""

        def of(reconcile: Callable[[], Result]) -> Callable[[], float | None]:
            return lambda: reconcile().requeue_after

        out: list[Task] = [
            ("aws.cluster", self._refresh_cluster),
            ("aws.pricing", of(self.pricing.reconcile)),
            ("aws.instancetypes", of(self.instance_types.reconcile)),
            ("aws.launchtemplates", self._sweep),
        ]
        if self.nodeclass is not None:
            out.append(("aws.nodeclass", of(self.nodeclass.reconcile)))
        if self.tagging is not None:
            out.append(("aws.tagging", of(self.tagging.reconcile)))
        if self.interruption is not None:
            out.append(("aws.interruption", of(self.interruption.reconcile)))
        return out

    def start(self) -> None:
        """Adopt launch templates from before a restart and start the interruption long poll."""
        try:
            adopted = self.launch_templates.hydrate()
        except Exception as exc:  # an AWS error at start is logged, never fatal
            log.warning("listing this cluster's launch templates failed: %s", exc)
        else:
            if adopted:
                log.info("adopted %d launch templates from before the restart", adopted)
        if self.interruption is not None:
            try:
                self.interruption.start()
            except Exception as exc:
                log.error(
                    "interruption handling is off: %s (check INTERRUPTION_QUEUE=%s)",
                    exc,
                    self.settings.interruption_queue,
                )
                self.interruption = None

    def stop(self) -> None:
        if self.interruption is not None:
            self.interruption.stop()


def build(
    clients: sdk.Clients,
    settings: AWSSettings,
    *,
    cluster: Cluster,
    clock: Clock,
    metrics: AWSMetrics,
    shipped: ShippedCatalog,
    pricing_settings: PricingSettings = PricingSettings(),
    server_version: str = "",
    dns_ip: str = "",
) -> AWSStack:
    """Every part of the AWS provider for one cluster (see the module docstring). ``shipped`` is
    :mod:`karpy.catalog.aws` (the offline data, used until discovery succeeds); the operator passes
    it because this layer may not import the catalog's."""
    unavailable = UnavailableOfferings(clock)
    pricing = PricingProvider(
        clients,
        region=clients.region,
        clock=clock,
        metrics=metrics,
        shipped=shipped,
        isolated_vpc=settings.isolated_vpc,
    )
    types = InstanceTypeProvider(
        clients,
        region=clients.region,
        pricing=pricing,
        unavailable=unavailable,
        settings=settings,
        clock=clock,
        metrics=metrics,
        shipped=shipped,
        pricing_settings=pricing_settings,
    )
    templates = LaunchTemplates(clients.ec2, cluster=settings.cluster_name, clock=clock)
    info = cluster_mod.discover(clients, settings, server_version=server_version, dns_ip=dns_ip)
    for problem in info.problems:
        log.warning("cluster discovery: %s", problem)
    holder: list[AWSStack] = []
    provider = AWSCloudProvider(
        clients.ec2,
        cluster=cluster,
        settings=settings,
        cluster_info=lambda: holder[0].info,
        instance_types=types,
        unavailable=unavailable,
        launch_templates=templates,
        metrics=metrics,
        clock=clock,
    )
    stack = AWSStack(
        clients=clients,
        settings=settings,
        metrics=metrics,
        unavailable=unavailable,
        pricing=pricing,
        instance_types=types,
        launch_templates=templates,
        provider=provider,
        info=info,
        server_version=server_version,
        dns_ip=dns_ip,
    )
    holder.append(stack)
    return stack
