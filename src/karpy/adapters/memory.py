"""An in-memory Kubernetes API server: the tests' fake and the simulator's API server.

Objects are raw JSON dicts keyed by (kind, namespace, name). It keeps what controllers rely
on: ``resourceVersion`` (a global counter; a stale update raises ``Conflict``), ``uid`` and
``creationTimestamp`` (from the injected clock), ``generateName``, JSON merge patches,
finalizers (delete sets ``deletionTimestamp``; removing the last finalizer deletes), pod
binding, the Eviction API with PodDisruptionBudgets (429 ``TooManyRequests`` when a budget
allows no disruption), and synchronous watch callbacks (deterministic, no threads). Every
call is recorded, and ``fail_next`` injects one error for the next matching call. ``batch``
makes its calls one after the other, exactly as the caller making them in order would.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from karpy.api import encode
from karpy.model import errors
from karpy.model.objects import TERMINAL_PHASES
from karpy.ports import Clock, KubeOp, RawObject, WatchEvent

__all__ = ["CLUSTER_SCOPED", "MemoryKube"]

CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "NodeClaim",
        "NodePool",
        "EC2NodeClass",
        "KWOKNodeClass",
        "Namespace",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
    }
)
_API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "Event": "events.k8s.io/v1",
    "NodeClaim": "karpenter.sh/v1",
    "NodePool": "karpenter.sh/v1",
    "EC2NodeClass": "karpenter.k8s.aws/v1",
    "KWOKNodeClass": "karpenter.kwok.sh/v1alpha1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "PodDisruptionBudget": "policy/v1",
    "Lease": "coordination.k8s.io/v1",
    "PersistentVolumeClaim": "v1",
    "PersistentVolume": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
}

Key = tuple[str, str, str]
_T = TypeVar("_T")


_ATOMS = frozenset((str, int, float, bool, type(None)))  # exact JSON scalar types: shared, not copied


def _copy(value: _T) -> _T:
    """A deep copy of a JSON tree (dicts, lists, scalars): what ``copy.deepcopy`` does, several times faster.

    Stored objects are copied on every write, watch event and read; other values (never produced
    by JSON or YAML) fall back to ``copy.deepcopy``. Scalars of the exact JSON types are taken
    in place without a call (most of a tree's values); subclasses go the long way.
    """
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else _copy(v) for k, v in value.items()}  # type: ignore[attr-defined,return-value]
    if kind is list:
        return [v if type(v) in _ATOMS else _copy(v) for v in value]  # type: ignore[attr-defined,return-value]
    if kind in _ATOMS:
        return value
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [_copy(v) for v in value]  # type: ignore[return-value]
    if isinstance(value, str | int | float | bool):
        return value
    return copy.deepcopy(value)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return _copy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return bool((pod.get("status") or {}).get("phase") == "Running")


def _scaled(value: Any, total: int, *, round_up: bool) -> int:
    text = str(value)
    if text.endswith("%"):
        fraction = int(text[:-1]) * total / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(text)


def _counted(pod: RawObject) -> tuple[int, int]:
    """What a pod adds to a PDB's (expected, healthy) pods: (0, 0) when it is terminating or
    terminal, else (1, 1 if it is ready)."""
    if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return 0, 0
    return 1, int(_ready(pod))


class _Selected:
    """The pods a PDB's selector picks (by key, as stored) and how many of them count as
    expected and as healthy, kept as they are stored and dropped (stored objects are replaced
    on every write, never changed in place)."""

    __slots__ = ("expected", "healthy", "pods", "selector")

    def __init__(self, selector: Any) -> None:
        self.selector = selector
        self.pods: dict[Key, tuple[int, int]] = {}  # key -> what it adds to the counts
        self.expected = 0
        self.healthy = 0

    def put(self, key: Key, pod: RawObject) -> None:
        self.pop(key)
        added = self.pods[key] = _counted(pod)
        self.expected += added[0]
        self.healthy += added[1]

    def pop(self, key: Key) -> None:
        held = self.pods.pop(key, None)
        if held is not None:
            self.expected -= held[0]
            self.healthy -= held[1]


class MemoryKube:
    """The in-memory API server. Satisfies :class:`karpy.ports.KubeAPI`."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._objects: dict[Key, RawObject] = {}
        # the same objects per kind, in the same order: lists and selections read one kind only
        self._kinds: dict[str, dict[Key, RawObject]] = {}
        # namespace -> PDB key -> the pods of the namespace it selects, with their counts: kept
        # as pods and PDBs are stored and dropped, so an eviction reads no pod at all
        self._pdb_pods: dict[str, dict[Key, _Selected]] = {}
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        self._names = itertools.count(1)
        self._watchers: list[Callable[[WatchEvent], None]] = []
        self.calls: list[tuple[str, str, str]] = []
        self._next_errors: list[tuple[str, str, errors.KubeError]] = []

    # -- test hooks ------------------------------------------------------------------------
    def fail_next(self, verb: str, kind: str, error: errors.KubeError) -> None:
        """Make the next ``verb`` on ``kind`` raise ``error`` (once)."""
        self._next_errors.append((verb, kind, error))

    def _call(self, verb: str, kind: str, name: str) -> None:
        self.calls.append((verb, kind, name))
        for index, (v, k, error) in enumerate(self._next_errors):
            if v == verb and k == kind:
                del self._next_errors[index]
                raise error

    # -- helpers ---------------------------------------------------------------------------
    def _key(self, kind: str, name: str, namespace: str) -> Key:
        return (kind, "" if kind in CLUSTER_SCOPED else (namespace or "default"), name)

    def _emit(self, type_: str, kind: str, obj: RawObject) -> None:
        event = WatchEvent(type_, kind, _copy(obj))
        for callback in list(self._watchers):
            callback(event)

    def _stamp(self, obj: RawObject) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))

    # -- KubeAPI ---------------------------------------------------------------------------
    def watch(self, callback: Callable[[WatchEvent], None]) -> None:
        """Subscribe; existing objects arrive first as ADDED (like a list + watch)."""
        self._watchers.append(callback)
        for (kind, _, _), obj in sorted(self._objects.items()):
            callback(WatchEvent("ADDED", kind, _copy(obj)))

    def get(self, kind: str, name: str, namespace: str = "") -> RawObject:
        self._call("get", kind, name)
        obj = self._objects.get(self._key(kind, name, namespace))
        if obj is None:
            raise errors.NotFound(f"{kind} {namespace + '/' if namespace else ''}{name} not found")
        return _copy(obj)

    def list(self, kind: str, namespace: str | None = None, *, read_only: bool = False) -> list[RawObject]:
        """The objects of a kind (in a namespace), by key: copies, or with ``read_only`` the stored
        objects themselves (valid until the next write: a caller must not keep or change them)."""
        self._call("list", kind, "")
        found = [
            obj
            for (_, ns, _), obj in sorted(self._kinds.get(kind, {}).items())
            if namespace is None or ns == namespace
        ]
        return found if read_only else [_copy(obj) for obj in found]

    def create(self, obj: RawObject) -> RawObject:
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.Invalid(f"{kind}: metadata.name or generateName is required")
            meta["name"] = f"{meta['generateName']}{next(self._names):05d}"
        self._call("create", kind, meta["name"])
        key = self._key(kind, meta["name"], meta.get("namespace", ""))
        if key in self._objects:
            raise errors.AlreadyExists(f"{kind} {meta['name']} already exists")
        stored = _copy(obj)
        stored.setdefault("apiVersion", _API_VERSIONS.get(kind, "v1"))
        smeta = stored["metadata"]
        if kind not in CLUSTER_SCOPED:
            smeta["namespace"] = key[1]
        smeta["uid"] = smeta.get("uid") or f"uid-{next(self._uid):08d}"
        smeta.setdefault("creationTimestamp", encode.time(self._clock.now()))
        self._stamp(stored)
        self._store(key, stored)
        self._emit("ADDED", kind, stored)
        return _copy(stored)

    def _replace(self, key: Key, stored: RawObject) -> RawObject:
        meta = stored["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._drop(key)
            self._stamp(stored)
            self._emit("DELETED", key[0], stored)
            return _copy(stored)
        self._stamp(stored)
        self._store(key, stored)
        self._emit("MODIFIED", key[0], stored)
        return _copy(stored)

    def _store(self, key: Key, obj: RawObject) -> None:
        self._objects[key] = obj
        self._kinds.setdefault(key[0], {})[key] = obj
        if key[0] == "Pod":
            budgets = self._pdb_pods.get(key[1])
            if budgets:
                labels = obj["metadata"].get("labels") or {}
                for selected in budgets.values():
                    if _matches(selected.selector, labels):
                        selected.put(key, obj)
                    else:
                        selected.pop(key)
        elif key[0] == "PodDisruptionBudget":
            selector = (obj.get("spec") or {}).get("selector")
            self._pdb_pods.setdefault(key[1], {})[key] = self._selected(key[1], selector)

    def _selected(self, namespace: str, selector: Any) -> _Selected:
        """The stored pods of ``namespace`` that ``selector`` (a PDB's) picks."""
        selected = _Selected(selector)
        for k, pod in self._kinds.get("Pod", {}).items():
            if k[1] == namespace and _matches(selector, pod["metadata"].get("labels") or {}):
                selected.put(k, pod)
        return selected

    def _drop(self, key: Key) -> None:
        del self._objects[key]
        del self._kinds[key[0]][key]
        if key[0] == "Pod":
            for selected in self._pdb_pods.get(key[1], {}).values():
                selected.pop(key)
        elif key[0] == "PodDisruptionBudget":
            del self._pdb_pods[key[1]][key]

    def update(self, obj: RawObject) -> RawObject:
        kind = obj["kind"]
        meta = obj["metadata"]
        self._call("update", kind, meta["name"])
        key = self._key(kind, meta["name"], meta.get("namespace", ""))
        current = self._objects.get(key)
        if current is None:
            raise errors.NotFound(f"{kind} {meta['name']} not found")
        version = meta.get("resourceVersion")
        if version and version != current["metadata"]["resourceVersion"]:
            raise errors.Conflict(f"{kind} {meta['name']}: resourceVersion {version} is stale")
        stored = _copy(obj)
        for field_name in ("uid", "creationTimestamp", "deletionTimestamp"):
            if field_name in current["metadata"]:
                stored["metadata"][field_name] = current["metadata"][field_name]
        return self._replace(key, stored)

    def patch(self, kind: str, name: str, patch: Mapping[str, Any], namespace: str = "") -> RawObject:
        self._call("patch", kind, name)
        key = self._key(kind, name, namespace)
        current = self._objects.get(key)
        if current is None:
            raise errors.NotFound(f"{kind} {name} not found")
        stored = merge_patch(current, patch)
        for field_name in ("uid", "creationTimestamp", "resourceVersion", "name", "namespace"):
            if field_name in current["metadata"]:
                stored["metadata"][field_name] = current["metadata"][field_name]
        return self._replace(key, stored)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        self._call("delete", kind, name)
        key = self._key(kind, name, namespace)
        current = self._objects.get(key)
        if current is None:
            raise errors.NotFound(f"{kind} {name} not found")
        if current["metadata"].get("finalizers"):
            if not current["metadata"].get("deletionTimestamp"):
                stored = _copy(current)
                stored["metadata"]["deletionTimestamp"] = encode.time(self._clock.now())
                self._replace(key, stored)
            return
        self._drop(key)
        self._stamp(current)
        self._emit("DELETED", kind, current)

    def bind(self, name: str, namespace: str, node_name: str) -> None:
        self._call("bind", "Pod", name)
        key = self._key("Pod", name, namespace)
        current = self._objects.get(key)
        if current is None:
            raise errors.NotFound(f"Pod {namespace}/{name} not found")
        if (current.get("spec") or {}).get("nodeName"):
            raise errors.Conflict(f"Pod {namespace}/{name} is already bound")
        if ("Node", "", node_name) not in self._objects:
            raise errors.NotFound(f"Node {node_name} not found")
        stored = _copy(current)
        stored.setdefault("spec", {})["nodeName"] = node_name
        status = stored.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True"})
        status["conditions"] = conditions
        self._replace(key, stored)

    def pdb_allowed(self, pdb: Mapping[str, Any]) -> int:
        """Disruptions a PDB allows now, computed from the pods it selects (as its controller would)."""
        namespace = pdb["metadata"].get("namespace", "default")
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        key = self._key("PodDisruptionBudget", pdb["metadata"].get("name", ""), namespace)
        held = self._pdb_pods.get(namespace, {}).get(key)
        if held is None or held.selector != selector:  # not a stored PDB (or not as stored): select anew
            held = self._selected(namespace, selector)
        expected, healthy = held.expected, held.healthy
        if "minAvailable" in spec:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        elif "maxUnavailable" in spec:
            desired = expected - _scaled(spec["maxUnavailable"], expected, round_up=True)
        else:
            desired = expected
        return max(0, healthy - desired)

    def evict(self, name: str, namespace: str, uid: str = "") -> None:
        """The Eviction API: 429 while a PDB selecting the pod allows no disruption; with ``uid``,
        409 when the pod of that name has another UID (the precondition of ``deleteOptions``)."""
        self._call("evict", "Pod", name)
        key = self._key("Pod", name, namespace)
        pod = self._objects.get(key)
        if pod is None:
            raise errors.NotFound(f"Pod {namespace}/{name} not found")
        if uid and pod["metadata"].get("uid") not in (None, "", uid):
            found = pod["metadata"]["uid"]
            raise errors.Conflict(
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {found}"
            )
        labels = pod["metadata"].get("labels") or {}
        budgets = [
            obj
            for (_, ns, _), obj in self._kinds.get("PodDisruptionBudget", {}).items()
            if ns == key[1] and _matches((obj.get("spec") or {}).get("selector"), labels)
        ]
        if len(budgets) > 1:
            raise errors.TooManyRequests(
                f"Pod {namespace}/{name} is selected by more than one PodDisruptionBudget"
            )
        for pdb in budgets:
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
            if self.pdb_allowed(pdb) <= 0 and not (policy == "AlwaysAllow" and not _ready(pod)):
                budget = pdb["metadata"]["name"]
                raise errors.TooManyRequests(f"Cannot evict pod: it would violate disruption budget {budget}")
        self.delete("Pod", name, namespace)

    def batch(self, ops: Sequence[KubeOp]) -> builtins.list[RawObject | errors.KubeError]:
        """The calls in order, each as made alone: its result ({} for a delete) or its KubeError."""
        out: builtins.list[RawObject | errors.KubeError] = []
        for op in ops:
            try:
                out.append(self._op(op))
            except errors.KubeError as exc:
                out.append(exc)
        return out

    def _op(self, op: KubeOp) -> RawObject:
        body: Any = op.body if op.body is None or isinstance(op.body, dict) else dict(op.body)
        if op.verb == "get":
            return self.get(op.kind, op.name, op.namespace)
        if op.verb == "create":
            return self.create(body)
        if op.verb == "update":
            return self.update(body)
        if op.verb == "patch":
            return self.patch(op.kind, op.name, body or {}, op.namespace)
        if op.verb == "delete":
            self.delete(op.kind, op.name, op.namespace)
            return {}
        raise ValueError(f"batch: unknown verb {op.verb!r}")

    # -- conveniences for tests and the simulator ---------------------------------------
    def objects(self, kind: str) -> builtins.list[RawObject]:
        """Objects of a kind without recording a call (for assertions)."""
        return [_copy(o) for _, o in sorted(self._kinds.get(kind, {}).items())]

    def exists(self, kind: str, name: str, namespace: str = "") -> bool:
        return self._key(kind, name, namespace) in self._objects
