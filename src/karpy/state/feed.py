"""Raw watch events -> typed :class:`~karpy.state.events.ObjectEvent` -> ``Cluster.apply``.

The one path by which the cluster state learns about the API server, for the in-memory API
server (tests, simulator) and the real watch alike. Raw objects are validated and converted
by :mod:`karpy.api`; an object that does not validate (say, a NodePool with a bad
requirement) is reported through ``on_problem`` and dropped from the state (a previous good
version is removed too, so nothing is scheduled against a NodePool that is now invalid).
Listeners are called after each applied event (controllers use them to wake up).
"""

from __future__ import annotations

from collections.abc import Callable

from karpy.api import load as api_load
from karpy.ports import WatchEvent
from karpy.state.cluster import Cluster
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["KINDS", "Feed"]

KINDS = frozenset(
    {
        "Pod",
        "Node",
        "NodeClaim",
        "NodePool",
        "EC2NodeClass",
        "KWOKNodeClass",
        "DaemonSet",
        "PodDisruptionBudget",
        "Namespace",
    }
)

Listener = Callable[[ObjectEvent], None]


class Feed:
    def __init__(
        self, cluster: Cluster, *, on_problem: Callable[[str, WatchEvent], None] | None = None
    ) -> None:
        self.cluster = cluster
        self.listeners: list[Listener] = []
        self._on_problem = on_problem
        self._versions: dict[tuple[str, str, str], str] = {}

    def __call__(self, event: WatchEvent) -> None:
        if event.kind not in KINDS:
            return
        meta = event.obj.get("metadata") or {}
        key = (event.kind, meta.get("namespace", ""), meta.get("name", ""))
        version = str(meta.get("resourceVersion", ""))
        if event.type != DELETED and version and self._versions.get(key) == version:
            return  # a re-delivered event (e.g. a re-list): nothing changed
        obj, problems = api_load.parse_object(event.obj, file=f"watch:{event.kind}", index=0)
        if obj is None:
            for problem in problems:
                if self._on_problem is not None:
                    self._on_problem(str(problem), event)
            return
        if event.type == DELETED:
            self._versions.pop(key, None)
        else:
            self._versions[key] = version
        typed = ObjectEvent(event.type, obj)  # type: ignore[arg-type]
        self.cluster.apply(typed)
        for listener in list(self.listeners):
            listener(typed)
