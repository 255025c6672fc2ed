"""Deployment and StatefulSet watch objects -> :class:`~karpy.model.objects.Rollout`.

The rollout guard reads only a workload's replica counts, revisions and ``Progressing``
condition, never its pod template, so these kinds skip the schema validation of
:mod:`karpy.api` (which would parse the template on every status update): the fields are read
leniently, a missing or malformed one taking its Kubernetes default (``spec.replicas`` 1,
``progressDeadlineSeconds`` 600, counts 0, no condition). Used by :class:`~karpy.state.feed.Feed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.api import common
from karpy.api.convert import DEFAULT_NAMESPACE
from karpy.model.objects import Rollout

__all__ = ["KINDS", "key", "parse"]

KINDS = frozenset({"Deployment", "StatefulSet"})


def key(kind: str, namespace: str, name: str) -> str:
    """The cluster state's key of a workload's rollout: ``Kind/namespace/name``."""
    return f"{kind}/{namespace}/{name}"


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _time(value: object) -> float | None:
    if value is None:
        return None
    try:
        return common.parse_time(value)
    except (TypeError, ValueError):
        return None


def parse(raw: Mapping[str, Any]) -> Rollout | None:
    """The rollout status of a raw Deployment or StatefulSet; None without a name or a known kind."""
    kind = raw.get("kind")
    meta, spec, status = _map(raw.get("metadata")), _map(raw.get("spec")), _map(raw.get("status"))
    name = meta.get("name")
    if kind not in KINDS or not isinstance(name, str) or not name:
        return None
    namespace = meta.get("namespace")
    progressing: Mapping[str, Any] = {}
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Progressing":
            progressing = cond
    available = status.get("availableReplicas")
    if kind == "StatefulSet" and available is None:
        available = status.get("readyReplicas")
    deadline = _int(spec.get("progressDeadlineSeconds"), 600)
    return Rollout(
        kind=str(kind),
        namespace=namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE,
        name=name,
        replicas=_int(spec.get("replicas"), 1),
        generation=_int(meta.get("generation"), 0),
        observed_generation=_int(status.get("observedGeneration"), 0),
        status_replicas=_int(status.get("replicas"), 0),
        updated=_int(status.get("updatedReplicas"), 0),
        available=_int(available, 0),
        paused=spec.get("paused") is True,
        progress_deadline=float(deadline),
        progress_status=str(progressing.get("status") or ""),
        progress_reason=str(progressing.get("reason") or ""),
        progress_updated=_time(progressing.get("lastUpdateTime")),
        current_revision=str(status.get("currentRevision") or ""),
        update_revision=str(status.get("updateRevision") or ""),
    )
