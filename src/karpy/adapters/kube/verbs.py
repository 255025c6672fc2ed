"""The API resources karpy knows, and the requests each :class:`~karpy.ports.KubeAPI` verb makes.

:data:`RESOURCES` maps a kind to its group, version, plural, scope and whether it has a
``/status`` subresource (:meth:`Resource.path` builds the URL). The coroutines below are the
request sequences of the port's verbs, raw JSON in and out, over a ``send(method, path, ...)``
coroutine (the kube client's rate-limited request, which answers the JSON object or raises a
:mod:`karpy.model.errors` error): ``create`` names an object with only ``generateName`` itself and
retries a taken name, then sets the status of a kind whose POST drops it; ``update`` and ``patch``
write the status through ``/status``. :class:`~karpy.adapters.kube.client.KubeClient` runs one of
them per synchronous call, or many at once for ``batch``, and echoes the answers
(:func:`echo_type`) to its watch callbacks on the caller's thread.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple, Protocol

from karpy.api import encode
from karpy.model import errors
from karpy.ports import RawObject

__all__ = ["RESOURCES", "Resource", "Send", "echo_type", "resource"]


class Resource(NamedTuple):
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    status: bool  # has a /status subresource (status ignored on the main resource)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str = "", sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        Resource("Pod", "", "v1", "pods", True, True),
        Resource("Node", "", "v1", "nodes", False, True),
        Resource("Namespace", "", "v1", "namespaces", False, False),
        Resource("Service", "", "v1", "services", True, True),
        Resource("ConfigMap", "", "v1", "configmaps", True, False),
        Resource("NodeClaim", "karpenter.sh", "v1", "nodeclaims", False, True),
        Resource("NodePool", "karpenter.sh", "v1", "nodepools", False, True),
        Resource("EC2NodeClass", "karpenter.k8s.aws", "v1", "ec2nodeclasses", False, True),
        Resource("KWOKNodeClass", "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", False, True),
        Resource("DaemonSet", "apps", "v1", "daemonsets", True, True),
        Resource("Deployment", "apps", "v1", "deployments", True, True),
        Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True, True),
        Resource("Lease", "coordination.k8s.io", "v1", "leases", True, False),
        Resource("Event", "events.k8s.io", "v1", "events", True, False),
        Resource("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, True),
        Resource("PersistentVolume", "", "v1", "persistentvolumes", False, True),
        Resource("StorageClass", "storage.k8s.io", "v1", "storageclasses", False, False),
        Resource("ReplicaSet", "apps", "v1", "replicasets", True, True),
        Resource("StatefulSet", "apps", "v1", "statefulsets", True, True),
        Resource("Job", "batch", "v1", "jobs", True, True),
        Resource("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers", True, True),
        Resource("CSINode", "storage.k8s.io", "v1", "csinodes", False, False),
    )
}
_CREATE_DROPS_STATUS = frozenset({"NodeClaim", "NodePool", "EC2NodeClass", "KWOKNodeClass"})
_NAME_ATTEMPTS = 3
_MERGE = "application/merge-patch+json"


def resource(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise errors.Invalid(f"karpy does not know the API resource of kind {kind!r}") from None


class Send(Protocol):
    def __call__(
        self, method: str, path: str, *, body: Any = None, content_type: str = "application/json"
    ) -> Awaitable[Any]: ...


def _namespace(res: Resource, namespace: str | None) -> str | None:
    return namespace or ("default" if res.namespaced else None)


async def get(send: Send, kind: str, name: str, namespace: str = "") -> RawObject:
    out: RawObject = await send("GET", resource(kind).path(namespace or "default", name))
    return out


async def list_(send: Send, kind: str, namespace: str | None = None) -> list[RawObject]:
    res = resource(kind)
    data = await send("GET", res.path(namespace))
    items: list[RawObject] = list(data.get("items") or [])
    for item in items:
        item.setdefault("kind", kind)
        item.setdefault("apiVersion", res.api_version)
    return items


def first_name(obj: Mapping[str, Any], name_for: Callable[[str], str]) -> str:
    """The name ``create`` first tries: ``metadata.name``, or one made from ``generateName``."""
    meta = obj.get("metadata") or {}
    if meta.get("name"):
        return str(meta["name"])
    return name_for(str(meta.get("generateName") or ""))


async def create(send: Send, obj: RawObject, *, name_for: Callable[[str], str], first: str = "") -> RawObject:
    """POST ``obj``; one with only ``generateName`` gets ``first`` (else a fresh name), and a new
    suffix if that name is taken. A real API server sets ``creationTimestamp`` itself (ignoring this
    one); one that does not (kmock's stock emulator) would leave it empty, and a NodeClaim "created
    at 0" is at once past its launch deadline (lifecycle liveness)."""
    kind = obj["kind"]
    res = resource(kind)
    meta = obj.get("metadata") or {}
    prefix = "" if meta.get("name") else str(meta.get("generateName") or "")
    namespace = _namespace(res, meta.get("namespace"))
    stamp = meta.get("creationTimestamp") or encode.time(time.time())
    for attempt in range(1, _NAME_ATTEMPTS + 1):
        body = dict(obj)
        body.setdefault("apiVersion", res.api_version)
        body["metadata"] = {**meta, "creationTimestamp": stamp}
        if prefix:
            body["metadata"]["name"] = first if attempt == 1 and first else name_for(prefix)
        try:
            out: RawObject = await send("POST", res.path(namespace), body=body)
        except (errors.AlreadyExists, errors.Conflict):
            if not prefix or attempt == _NAME_ATTEMPTS:
                raise
            continue  # a generated name that is taken: another suffix
        break
    if kind in _CREATE_DROPS_STATUS and obj.get("status"):
        name = out["metadata"]["name"]
        out = await send(
            "PATCH", res.path(namespace, name, "status"), body={"status": obj["status"]}, content_type=_MERGE
        )
    return out


async def update(send: Send, obj: RawObject) -> RawObject:
    res = resource(obj["kind"])
    meta = obj["metadata"]
    namespace = _namespace(res, meta.get("namespace"))
    body = dict(obj)
    body.setdefault("apiVersion", res.api_version)
    out: RawObject = await send("PUT", res.path(namespace, meta["name"]), body=body)
    if res.status and "status" in obj and out.get("status") != obj["status"]:
        status_body = {**out, "status": obj["status"]}
        out = await send("PUT", res.path(namespace, meta["name"], "status"), body=status_body)
    return out


async def patch(send: Send, kind: str, name: str, patch: Mapping[str, Any], namespace: str = "") -> RawObject:
    """A merge patch; a ``status`` key goes to ``/status`` (after the rest, if any)."""
    res = resource(kind)
    ns = _namespace(res, namespace)
    main = {k: v for k, v in patch.items() if not (res.status and k == "status")}
    out: RawObject = {}
    if main or not (res.status and "status" in patch):
        out = await send("PATCH", res.path(ns, name), body=main, content_type=_MERGE)
    if res.status and "status" in patch:
        body = {"status": patch["status"]}
        out = await send("PATCH", res.path(ns, name, "status"), body=body, content_type=_MERGE)
    return out


async def delete(send: Send, kind: str, name: str, namespace: str = "") -> Any:
    """DELETE (background propagation); the answer (the object while finalizers hold it)."""
    res = resource(kind)
    path = res.path(_namespace(res, namespace), name)
    return await send("DELETE", path, body={"propagationPolicy": "Background"})


async def evict(send: Send, name: str, namespace: str, uid: str = "") -> None:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:  # only the pod meant: a re-created pod of the same name answers 409
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    await send("POST", RESOURCES["Pod"].path(namespace, name, "eviction"), body=body)


async def bind(send: Send, name: str, namespace: str, node_name: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }
    await send("POST", RESOURCES["Pod"].path(namespace, name, "binding"), body=body)


def echo_type(verb: str, out: Any) -> str:
    """The watch event a write's answer stands for (``get`` answers are not echoed: "")."""
    if verb == "get" or not isinstance(out, dict):
        return ""
    meta = out.get("metadata") or {}
    if verb == "create":
        return "ADDED"
    if verb == "delete":
        return "MODIFIED" if meta.get("finalizers") else "DELETED"
    gone = meta.get("deletionTimestamp") and not meta.get("finalizers")
    return "DELETED" if gone else "MODIFIED"
