"""Raw watch events -> typed :class:`~karpy.state.events.ObjectEvent` -> ``Cluster.apply``.

The one path by which the cluster state learns about the API server, for the in-memory API
server (tests, simulator) and the real watch alike. Raw objects are validated and converted
by :mod:`karpy.api`; Deployments and StatefulSets, of which only the rollout status is kept, by
:mod:`karpy.state.rollouts`. An ADDED or MODIFIED object that does not validate (say, a NodePool with a
bad requirement) is reported through ``on_problem`` and dropped from the state: the previous good
version of that (kind, namespace, name) is removed too, so nothing is scheduled against a
NodePool that is now invalid. A DELETED event (a relist's tombstone arrives as one too) removes
its key from the state whatever the object's content: one that no longer parses (a NodePool made
invalid, then deleted) is removed by key (:meth:`~karpy.state.cluster.Cluster.remove`), silently.
Listeners are called after each applied event (controllers use them to wake up); a removal by
key reaches them as a DELETED ``ObjectEvent`` of the last copy the state held.

With ``strict`` (``karpy operator --strict``) a NodePool or NodeClass with a field karpy's schema
does not know (:mod:`karpy.api.fields`) does not validate either: it is reported and dropped the
same way (the operator then writes ``ValidationSucceeded=False``). Other kinds, and every kind
without ``strict``, are read as the API server served them (an API server whose CRD prunes unknown
fields has dropped a typo already; karpy's own ``deploy/crds/`` keep some parts open).
"""

from __future__ import annotations

from collections.abc import Callable

from karpy.api import load as api_load
from karpy.api.convert import DEFAULT_NAMESPACE
from karpy.model import volumes
from karpy.ports import WatchEvent
from karpy.state import rollouts
from karpy.state.cluster import Cluster
from karpy.state.events import ADDED, DELETED, MODIFIED, ObjectEvent

__all__ = ["KINDS", "STRICT_KINDS", "Feed"]

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
        *rollouts.KINDS,
        *volumes.STORAGE_KINDS,
    }
)
_NAMESPACED = frozenset({"Pod", "DaemonSet", "PodDisruptionBudget", "PersistentVolumeClaim", *rollouts.KINDS})
STRICT_KINDS = frozenset({"NodePool", "EC2NodeClass", "KWOKNodeClass"})  # checked for unknown fields
_STRICT = api_load.Checks(fields=api_load.STRICT.fields)  # (names: the API server checked them)

Listener = Callable[[ObjectEvent], None]


class Feed:
    def __init__(
        self,
        cluster: Cluster,
        *,
        on_problem: Callable[[str, WatchEvent], None] | None = None,
        strict: bool = False,
    ) -> None:
        self.cluster = cluster
        self.strict = strict
        self.listeners: list[Listener] = []
        self._on_problem = on_problem
        # (kind, namespace, name) -> (resourceVersion, uid) of the version applied last
        self._versions: dict[tuple[str, str, str], tuple[str, str]] = {}

    def __call__(self, event: WatchEvent) -> None:
        if event.kind not in KINDS or event.type not in (ADDED, MODIFIED, DELETED):
            return
        meta = event.obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        if not namespace and event.kind in _NAMESPACED:
            namespace = DEFAULT_NAMESPACE
        key = (event.kind, namespace, str(meta.get("name") or ""))
        # (the uid too: after an API server's state was reset, another object may carry the version)
        stamp = (str(meta.get("resourceVersion", "")), str(meta.get("uid") or ""))
        if event.type == DELETED:
            self._versions.pop(key, None)
        elif stamp[0] and self._versions.get(key) == stamp:
            return  # a re-delivered event (e.g. a re-list): nothing changed
        obj: object | None
        problems: list[api_load.Problem] = []
        if event.kind in rollouts.KINDS:
            obj = rollouts.parse(event.obj)
        else:
            checks = _STRICT if self.strict and event.kind in STRICT_KINDS else api_load.API
            obj, problems = api_load.parse_object(
                event.obj, file=f"watch:{event.kind}", index=0, checks=checks
            )
        if obj is None:
            if event.type != DELETED:
                self._versions.pop(key, None)
                for problem in problems:
                    if self._on_problem is not None:
                        self._on_problem(str(problem), event)
            removed = self.cluster.remove(*key)
            if removed is not None:
                self._notify(ObjectEvent(DELETED, removed))
            return
        if event.type != DELETED:
            self._versions[key] = stamp
        typed = ObjectEvent(event.type, obj)  # type: ignore[arg-type]
        self.cluster.apply(typed)
        self._notify(typed)

    def _notify(self, typed: ObjectEvent) -> None:
        for listener in list(self.listeners):
            listener(typed)
