"""A small world for controller tests: virtual loop, in-memory API server, cluster state, fakes.

``World.make()`` wires a :class:`~karpy.runtime.loop.Loop`, :class:`~karpy.adapters.memory.MemoryKube`
(its watch feeding a :class:`~karpy.state.cluster.Cluster` through :class:`~karpy.state.feed.Feed`),
a :class:`~karpy.providers.fake.FakeCloudProvider` and a :class:`~karpy.controllers.context.Context`.
Tests register the controllers they exercise with ``world.add(controller)`` and drive time with
``world.loop.step()`` / ``world.loop.run(until=...)``. Nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from karpy import settings as settings_mod
from karpy.adapters.memory import MemoryKube
from karpy.controllers.context import Context, RecordingEvents
from karpy.controllers.result import Result
from karpy.metrics import Metrics
from karpy.model.catalog import InstanceType
from karpy.providers.fake import FakeCloudProvider
from karpy.runtime.loop import Loop, LoopClock
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

__all__ = ["World"]


class Reconciler(Protocol):
    name: str

    def reconcile(self) -> Result: ...


@dataclass
class World:
    loop: Loop
    kube: MemoryKube
    cluster: Cluster
    feed: Feed
    cloud: Any
    ctx: Context
    events: RecordingEvents
    problems: list[str] = field(default_factory=list)

    @classmethod
    def make(
        cls,
        types: Sequence[InstanceType],
        *,
        settings: settings_mod.Settings | None = None,
        cloud: Any = None,
        cloud_factory: Any = None,
        start: float = 1_767_225_600.0,  # 2026-01-01T00:00:00Z
        well_known: frozenset[str] | None = None,
    ) -> World:
        loop = Loop(start=start)
        clock = LoopClock(loop)
        kube = MemoryKube(clock)  # ``cloud_factory(kube, clock, loop)`` builds a provider that needs them
        if cloud_factory is not None:
            provider = cloud_factory(kube, clock, loop)
        else:
            provider = cloud if cloud is not None else FakeCloudProvider(types)
        settings = settings or settings_mod.Settings()
        cluster = Cluster(lambda pool, _nc: provider.instance_types(pool), settings=settings)
        if well_known is not None:
            cluster.well_known = well_known
        problems: list[str] = []
        feed = Feed(cluster, on_problem=lambda text, _event: problems.append(text))
        kube.watch(feed)
        events = RecordingEvents()
        ctx = Context(cluster, kube, provider, clock, events, settings, Metrics())
        return cls(loop, kube, cluster, feed, provider, ctx, events, problems)

    def add(self, controller: Reconciler, *, priority: int = 0) -> None:
        """Run ``controller.reconcile`` on the loop, requeued as it asks."""

        def run() -> float | None:
            return controller.reconcile().requeue_after

        self.loop.add(controller.name, run, priority=priority)

    def apply(self, *objects: dict[str, Any]) -> None:
        """Create raw objects through the API server (as kubectl apply would)."""
        for obj in objects:
            self.kube.create(obj)
