"""``build``: every controller registered on a loop, woken by the feed. The operator and
the simulator call only this, so both run the very same controllers.

Task priorities make one instant deterministic: lifecycle and termination first (they
move objects along), then provisioning, status, expiration, disruption and its queue, and
last the cloud drift check (added last so the others keep their priorities). With
``Settings.features.measured_capacity`` the measured-capacity controller runs right after the
lifecycle (it corrects the claims a launch just hydrated before provisioning packs onto them).
Feed listeners wake the controllers an event concerns: a provisionable pod wakes
provisioning, a Node or NodeClaim change wakes the lifecycle and termination, pod changes
wake termination and status, and the changes upstream's consolidation state counts (see
:mod:`~karpy.controllers.consolidation_state`) change the disruption controller's.

The scheduler consistency check (``Controllers.scheduler_consistency``, a
:class:`~karpy.controllers.scheduler_consistency.SchedulerConsistency`) has no loop task: it
hears the provisioner's nominations (``Provisioner.nomination_listeners``) and every feed
event, after the other controllers.

:func:`build_shadow` (``karpy operator --shadow``) registers only the shadow controller
(:class:`~karpy.controllers.shadow.Shadow`: karpy's decisions computed, not carried out), woken
by the pods it provisions for and told of every feed event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpy.controllers import (
    cloud_drift,
    disruption,
    expiration,
    lifecycle,
    measured_capacity,
    nodeclaim_status,
    nodepool_status,
    orchestration,
    provisioning,
    scheduler_consistency,
    shadow,
    state_metrics,
)
from karpy.controllers import termination as termination_mod
from karpy.controllers.context import Context
from karpy.model.catalog import InstanceType
from karpy.model.objects import Node, NodeClaim, Pod
from karpy.runtime.loop import Loop
from karpy.state.events import ObjectEvent
from karpy.state.feed import Feed

__all__ = ["Controllers", "build", "build_shadow"]


@dataclass
class Controllers:
    provisioner: provisioning.Provisioner
    lifecycle: lifecycle.NodeClaimLifecycle
    status: nodeclaim_status.NodeClaimStatus
    expiration: expiration.Expiration
    disruption: disruption.Disruption
    orchestrator: orchestration.Orchestrator
    termination: termination_mod.Termination
    state_metrics: state_metrics.StateMetrics
    nodepool_status: nodepool_status.NodePoolStatus
    cloud_drift: cloud_drift.CloudDrift
    scheduler_consistency: scheduler_consistency.SchedulerConsistency
    measured_capacity: measured_capacity.MeasuredCapacity | None = None  # Settings.features.measured_capacity

    def all(self) -> list[object]:
        """The controllers with a loop task, in priority order (the event-driven scheduler
        consistency check is not among them)."""
        return [
            self.lifecycle,
            *([self.measured_capacity] if self.measured_capacity is not None else []),
            self.termination,
            self.provisioner,
            self.status,
            self.expiration,
            self.disruption,
            self.orchestrator,
            self.state_metrics,
            self.nodepool_status,
            self.cloud_drift,
        ]


def _register(loop: Loop, controller: object, priority: int) -> None:
    name = controller.name  # type: ignore[attr-defined]

    def run() -> float | None:
        return controller.reconcile().requeue_after  # type: ignore[attr-defined,no-any-return]

    loop.add(name, run, priority=priority)


def build(ctx: Context, loop: Loop, feed: Feed, *, disruption_enabled: bool = True) -> Controllers:
    """Create every controller, register it on ``loop`` and connect it to ``feed``."""
    orchestrator = orchestration.Orchestrator(ctx)
    controllers = Controllers(
        provisioner=provisioning.Provisioner(ctx),
        lifecycle=lifecycle.NodeClaimLifecycle(ctx),
        status=nodeclaim_status.NodeClaimStatus(ctx),
        expiration=expiration.Expiration(ctx),
        disruption=disruption.Disruption(ctx, orchestrator),
        orchestrator=orchestrator,
        termination=termination_mod.Termination(ctx),
        state_metrics=state_metrics.StateMetrics(ctx),
        nodepool_status=nodepool_status.NodePoolStatus(ctx),
        cloud_drift=cloud_drift.CloudDrift(ctx),
        scheduler_consistency=scheduler_consistency.SchedulerConsistency(ctx),
        measured_capacity=(
            measured_capacity.MeasuredCapacity(ctx) if ctx.settings.features.measured_capacity else None
        ),
    )
    controllers.provisioner.nomination_listeners.append(controllers.scheduler_consistency.nominated)
    for priority, controller in enumerate(controllers.all()):
        if controller is controllers.disruption and not disruption_enabled:
            continue
        _register(loop, controller, priority)
    orchestrator.wake = lambda: loop.wake(orchestrator.name)

    def wake(name: str) -> None:
        if name in loop.tasks:
            loop.wake(name)

    def on_event(event: ObjectEvent) -> None:
        obj = event.obj
        if controllers.provisioner.on_event(event):
            wake(controllers.provisioner.name)
        if controllers.status.on_event(event):
            wake(controllers.status.name)
        if controllers.expiration.on_event(event):
            wake(controllers.expiration.name)
        if isinstance(obj, Node | NodeClaim):
            wake(controllers.lifecycle.name)
            wake(controllers.termination.name)
        elif isinstance(obj, Pod) and obj.node_name:
            wake(controllers.termination.name)
        if controllers.disruption.on_event(event):
            controllers.disruption.mark_dirty()
        if controllers.cloud_drift.on_event(event):
            wake(controllers.cloud_drift.name)
        if controllers.measured_capacity is not None and controllers.measured_capacity.on_event(event):
            wake(controllers.measured_capacity.name)
        controllers.scheduler_consistency.on_event(event)

    feed.listeners.append(on_event)
    return controllers


def build_shadow(ctx: Context, loop: Loop, feed: Feed, *, catalog: Sequence[InstanceType]) -> shadow.Shadow:
    """The shadow controller alone, registered on ``loop`` and connected to ``feed`` (``catalog``:
    the instance types it launches from and prices nodes with, in catalog order)."""
    controller = shadow.Shadow(ctx, catalog=catalog)
    _register(loop, controller, 0)

    def on_event(event: ObjectEvent) -> None:
        if controller.on_event(event):
            loop.wake(controller.name)

    feed.listeners.append(on_event)
    return controller
