"""What every controller is built with: the state, the ports, the settings and metrics.

Controllers get a :class:`Context` and nothing global. ``now()`` reads the injected clock
(the loop's time); controllers never read the wall clock and never sleep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from karpy import settings as settings_mod
from karpy.metrics import Metrics
from karpy.ports import Clock, CloudProvider, Event, EventSink, KubeAPI
from karpy.state.cluster import Cluster

__all__ = ["Context", "RecordingEvents"]


class RecordingEvents:
    """An :class:`~karpy.ports.EventSink` that keeps every event (tests, the simulator's log)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, event: Event) -> None:
        self.events.append(event)

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]


@dataclass
class Context:
    cluster: Cluster
    kube: KubeAPI
    cloud: CloudProvider
    clock: Clock
    events: EventSink
    settings: settings_mod.Settings = field(default_factory=settings_mod.Settings)
    metrics: Metrics = field(default_factory=Metrics)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("karpy"))

    def now(self) -> float:
        return self.clock.now()

    def event(
        self, kind: str, name: str, reason: str, message: str, *, namespace: str = "", warning: bool = False
    ) -> None:
        self.events.record(
            Event(self.now(), kind, name, namespace, reason, message, "Warning" if warning else "Normal")
        )
