"""``--provider aws`` in the operator: the AWS stack built beside the kube adapter and registered.

:func:`build` connects boto3 through its standard chain (region and credentials from the
environment, IRSA's web identity token, EKS Pod Identity or the instance; karpy passes no key and
touches no credentials file), reads the API server's version (``/version``) and the kube-dns
Service's ClusterIP, and builds :class:`~karpy.providers.aws.stack.AWSStack` with the shipped
catalog as the offline default. :func:`register` puts the stack's tasks on the loop, wakes the
EC2NodeClass controller on EC2NodeClass events and builds the controllers that need the
operator's context (the interruption long poll only receives while this replica leads).
Called by :class:`karpy.operator.runner.Operator`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from karpy.adapters.kube import client as kube_client
from karpy.catalog import aws as catalog_aws
from karpy.controllers.context import Context
from karpy.metrics import Metrics
from karpy.model import errors
from karpy.model.objects import NodeClaim
from karpy.ports import Clock
from karpy.providers.aws import sdk
from karpy.providers.aws import stack as stack_mod
from karpy.providers.aws.config import AWSSettings
from karpy.providers.aws.metrics import AWSMetrics
from karpy.runtime.loop import Loop
from karpy.settings import PricingSettings
from karpy.state.cluster import Cluster
from karpy.state.events import ObjectEvent
from karpy.state.feed import Feed

__all__ = ["PRIORITY", "build", "register"]

PRIORITY = 100  # after the core controllers (runtime/wiring.py numbers them from 0)

log = logging.getLogger("karpy.operator")


def _server_version(kube: kube_client.KubeClient) -> str:
    try:
        return kube.server_version()
    except errors.KubeError as exc:
        log.warning("reading the API server's /version failed (%s); EKS DescribeCluster's is used", exc)
        return ""


def _dns_ip(kube: kube_client.KubeClient) -> str:
    try:
        service = kube.get("Service", "kube-dns", "kube-system")
    except errors.KubeError as exc:
        log.info("no kube-dns Service read (%s): nodes take clusterDNS from the NodeClass or nodeadm", exc)
        return ""
    return str((service.get("spec") or {}).get("clusterIP") or "")


def build(
    settings: AWSSettings,
    *,
    kube: kube_client.KubeClient,
    cluster: Cluster,
    clock: Clock,
    metrics: Metrics,
    pricing: PricingSettings,
    clients: sdk.Clients | None = None,
) -> stack_mod.AWSStack:
    """The AWS stack for this operator (``clients``: tests pass their own, else boto3's chain)."""
    if not settings.cluster_name:
        raise errors.InputError("--provider aws needs --cluster-name (or CLUSTER_NAME)")
    try:
        connected = clients if clients is not None else sdk.connect()
    except errors.CloudError as exc:
        raise errors.InputError(f"--provider aws: {exc}") from None
    stack = stack_mod.build(
        connected,
        settings,
        cluster=cluster,
        clock=clock,
        metrics=AWSMetrics(metrics.registry),
        shipped=catalog_aws,
        pricing_settings=pricing,
        server_version=_server_version(kube),
        dns_ip=_dns_ip(kube),
    )
    log.info(
        "AWS provider: cluster %s in %s, endpoint %s, Kubernetes %s, interruption queue %s",
        settings.cluster_name,
        connected.region,
        stack.info.endpoint or "(unknown)",
        stack.info.kubernetes_version or "(unknown)",
        settings.interruption_queue or "(none)",
    )
    return stack


def register(
    stack: stack_mod.AWSStack,
    *,
    ctx: Context,
    loop: Loop,
    feed: Feed,
    leading: Callable[[], bool],
    guard: Callable[[str, Callable[[], float | None]], Callable[[], float | None]],
) -> None:
    """Build the context-bound controllers, add the stack's tasks to ``loop`` and wire the wake-ups."""
    stack.attach(ctx, wake=lambda name: loop.wake(name) if name in loop.tasks else None, active=leading)
    for offset, (name, run) in enumerate(stack.tasks()):
        loop.add(name, guard(name, run), priority=PRIORITY + offset)

    nodeclass = stack.nodeclass

    def on_event(event: ObjectEvent) -> None:
        if nodeclass is not None and nodeclass.on_event(event) and nodeclass.name in loop.tasks:
            loop.wake(nodeclass.name)
        if stack.tagging is not None and stack.tagging.name in loop.tasks and _registered(event):
            loop.wake(stack.tagging.name)

    feed.listeners.append(on_event)


def _registered(event: ObjectEvent) -> bool:
    """A NodeClaim of this provider that is registered (the tagging controller's work)."""
    obj = event.obj
    return isinstance(obj, NodeClaim) and obj.provider_id.startswith("aws:///") and obj.is_true("Registered")
