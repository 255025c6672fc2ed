"""kmock's ``KubernetesEmulator``, extended with what karpy's edge needs and kmock lacks.

kmock 0.8 stores objects and streams watches, but has no resourceVersions, no ``generateName``,
no PUT, no ``pods/eviction`` or ``pods/binding`` and never answers 410. :class:`KarpyEmulator`
adds, each switchable so a test can show what it catches:

- ``cas``: global resourceVersions on every write and compare-and-swap: a PUT (or a merge patch
  carrying ``metadata.resourceVersion``) with a stale version answers 409 Conflict;
- evictions (:meth:`KarpyEmulator.install_evictions`): a reaction on ``pods/{name}/eviction``
  that answers 429 while a PodDisruptionBudget selecting the pod allows no disruption, and
  deletes the pod otherwise (every answer is logged in ``evictions``);
- watch history: a watch with ``resourceVersion`` replays the events after it (no initial ADDED
  burst), and after :meth:`KarpyEmulator.compact` an older version answers a 410 ``ERROR``
  event (``Expired``), as a real API server does once etcd compacted (``expire_next`` forces
  it for the next resumed watches);
  :meth:`KarpyEmulator.close_watches` ends the open streams (a server restart or timeout); a
  watch resuming from a resourceVersion newer than the server's answers a 504 ``ERROR`` event
  ("Too large resource version", cause ``ResourceVersionTooLarge``), as a real API server does;
- :meth:`KarpyEmulator.restart_empty`: the server comes back with its state reset, as after an
  etcd restore: no objects, resourceVersions starting over from 1, history forgotten, every open
  watch closed (lists then answer a resourceVersion lower than the one a client holds);
- :meth:`KarpyEmulator.fail`: list and watch requests of one kind answer an HTTP error (its open
  watches are closed) until :meth:`KarpyEmulator.heal` (a kind whose storage or conversion fails);
- ``GET /api/v1/namespaces`` (kmock cannot route it): an empty list and a quiet watch;
- ``generateName``, uid/creationTimestamp/generation, ``pods/binding``, PUT, JSON merge
  patches with ``status`` only through the ``/status`` subresource (as for CRDs);
- ``writes``: every request that is not a read (method, path, User-Agent), whatever it was
  answered, counted as it arrives (shadow mode's tests assert who wrote what).

:class:`EmulatorThread` runs it with kmock's ``Server`` on 127.0.0.1 in its own thread, so the
synchronous operator and the tests can talk to it over real HTTP; ``EmulatorThread(stock=True)``
serves kmock's own ``KubernetesEmulator`` instead, with karpy's resources declared (:func:`declare`)
and nothing else: ``GET /api/v1/namespaces`` answers 500, ``generateName`` is ignored, there are no
resourceVersions (``"..."``), no PUT, no eviction or binding.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp.web
import attrs
import kmock
from kmock._internal import enums, k8s, rendering

from karpy.adapters import memory
from karpy.adapters.kube.client import RESOURCES

T = TypeVar("T")
# The server thread's access log lines reached handlers that in-process CLI runs had installed on
# streams closed since ("--- Logging error ---" tracebacks in the test output): no access log.
logging.getLogger("aiohttp.access").disabled = True
_CLOSE = {"type": "__CLOSE__"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _error(status: int, reason: str, message: str) -> k8s.KubernetesError:
    return k8s.KubernetesError(status=status, reason=reason, message=message, details={})


def declare(emulator: kmock.KubernetesEmulator, *kinds: str) -> None:
    """Declare karpy's resources (all of them by default) for discovery and listing."""
    for kind in kinds or tuple(RESOURCES):
        res = RESOURCES[kind]
        key = f"{res.group}/{res.version}/{res.plural}" if res.group else f"v1/{res.plural}"
        emulator.resources[key] = {
            "kind": kind,
            "namespaced": res.namespaced,
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }


@attrs.define(kw_only=True)
class KarpyEmulator(kmock.KubernetesEmulator):
    cas: bool = True
    evictions: list[tuple[str, str, int]] = attrs.field(factory=list)  # (namespace, name, status)
    _rv: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    _last_rv: int = attrs.field(default=0, init=False)
    _names: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    _history: dict[Any, list[tuple[int, dict[str, Any]]]] = attrs.field(factory=dict, init=False)
    _compacted: dict[Any, int] = attrs.field(factory=dict, init=False)
    _namespace_bus: Any = attrs.field(factory=kmock.Bus, init=False)
    expire_next: int = 0  # the next N watches that resume from a resourceVersion answer 410
    failing: dict[str, int] = attrs.field(factory=dict)  # list/watch path -> the HTTP status answered
    writes: list[tuple[str, str, str]] = attrs.field(factory=list)  # (method, path, User-Agent)

    def declare(self, *kinds: str) -> None:
        """Declare karpy's resources (all of them by default) for discovery and listing."""
        declare(self, *kinds)

    # -- versions and events -------------------------------------------------------------------
    def _stamp(self, obj: dict[str, Any]) -> int:
        version = next(self._rv)
        self._last_rv = version
        obj["metadata"]["resourceVersion"] = str(version)
        return version

    async def _emit(self, resource: Any, type_: str, obj: dict[str, Any]) -> None:
        event = {"type": type_, "object": copy.deepcopy(obj)}
        version = int(obj["metadata"]["resourceVersion"])
        self._history.setdefault(resource, []).append((version, event))
        await self._buses[resource].put(event)

    def compact(self) -> int:
        """Forget the watch history: resuming from any older resourceVersion answers 410."""
        for resource in list(self._history):
            self._history[resource] = []
        for resource in set(self._history) | set(self._buses):
            self._compacted[resource] = self._last_rv
        self._compacted[None] = self._last_rv
        return self._last_rv

    async def close_watches(self) -> None:
        await self._namespace_bus.put(_CLOSE)
        for bus in list(self._buses.values()):
            await bus.put(_CLOSE)

    async def restart_empty(self) -> None:
        """Come back with the state reset (an etcd restore): no objects, resourceVersions from 1,
        no history; the open watches end."""
        async with self._lock:
            for key in list(self._objects):
                del self._objects[key]
            self._history.clear()
            self._compacted.clear()
            self._rv = itertools.count(1)
            self._last_rv = 0
        await self.close_watches()

    async def fail(self, kind: str, status: int = 500) -> None:
        """List and watch requests of ``kind`` answer ``status`` (its open watches end) until :meth:`heal`."""
        self.failing[RESOURCES[kind].path(None)] = status
        await self.close_watches()

    def heal(self, kind: str | None = None) -> None:
        """``kind`` (every kind by default) lists and watches again."""
        if kind is None:
            self.failing.clear()
        else:
            self.failing.pop(RESOURCES[kind].path(None), None)

    # -- request routing -----------------------------------------------------------------------
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if raw_request.method not in ("GET", "HEAD", "OPTIONS"):
            agent = raw_request.headers.get("User-Agent", "")
            self.writes.append((raw_request.method, raw_request.path, agent))
        status = self.failing.get(raw_request.path.rstrip("/")) if raw_request.method == "GET" else None
        if status is not None:
            message = f"the storage of {raw_request.path} is failing (injected)"
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status}
            return aiohttp.web.json_response(
                {**body, "reason": "InternalError", "message": message}, status=status
            )
        if raw_request.path.rstrip("/") == "/api/v1/namespaces":  # kmock cannot parse this path
            return await self._serve_namespaces(raw_request)
        return await super().__call__(raw_request)

    async def _serve_namespaces(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """Namespaces: always an empty list, and a watch that stays quiet until closed."""
        if raw_request.query.get("watch") != "true":
            return aiohttp.web.json_response(
                {
                    "kind": "NamespaceList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self._last_rv)},
                    "items": [],
                }
            )
        response = aiohttp.web.StreamResponse()
        await response.prepare(raw_request)
        marker = await self._namespace_bus.mark()
        try:
            async for event in self._namespace_bus.stream(since=marker):
                if event is _CLOSE:
                    break
        finally:
            await self._namespace_bus.unmark(marker)
        await response.write_eof()
        return response

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        mutation = (
            request.resource is not None
            and request.subresource in (None, "status")
            and (
                request.action in (enums.action.CREATE, enums.action.UPDATE, enums.action.DELETE)
                or (request.method == enums.method.PUT and request.name)
            )
        )
        if not mutation:
            return await super()._handle(request)
        async with self._lock:
            obj = await self._mutate(request)
        return aiohttp.web.json_response(obj, status=201 if request.action == enums.action.CREATE else 200)

    def _find(self, resource: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
        key = (resource, namespace, name)
        if key in self._objects and not self._objects[key].deleted:
            return copy.deepcopy(self._objects[key].raw)
        return None

    async def _store(self, resource: Any, namespace: str | None, obj: dict[str, Any], type_: str) -> None:
        meta = obj["metadata"]
        self._stamp(obj)
        key = (resource, namespace, meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            type_ = "DELETED"
        if type_ == "DELETED":
            if key in self._objects:
                self._objects[key].delete()
        else:
            self._objects[key] = copy.deepcopy(obj)
        await self._emit(resource, type_, obj)

    async def _mutate(self, request: rendering.Request) -> dict[str, Any]:
        resource, namespace, name = request.resource, request.namespace, request.name
        data = copy.deepcopy(request.data) if isinstance(request.data, dict) else {}
        if request.action == enums.action.CREATE:
            meta = data.setdefault("metadata", {})
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise _error(422, "Invalid", "metadata.name or metadata.generateName is required")
                meta["name"] = f"{meta['generateName']}{next(self._names):05d}"
            namespace = namespace or meta.get("namespace")
            if namespace:
                meta["namespace"] = namespace
            if self._find(resource, namespace, meta["name"]) is not None:
                raise _error(409, "AlreadyExists", f"{resource.plural} {meta['name']!r} already exists")
            meta["uid"] = f"uid-{next(self._names):08d}"
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
            meta.pop("resourceVersion", None)
            await self._store(resource, namespace, data, "ADDED")
            return data
        current = self._find(resource, namespace, name or "")
        if current is None:
            raise _error(404, "NotFound", f"{resource.plural} {name!r} not found")
        cmeta = current["metadata"]
        if request.action == enums.action.DELETE:
            if cmeta.get("finalizers"):
                if not cmeta.get("deletionTimestamp"):
                    cmeta["deletionTimestamp"] = _now()
                    await self._store(resource, namespace, current, "MODIFIED")
                return current
            await self._store(resource, namespace, current, "DELETED")
            return current
        wanted = str((data.get("metadata") or {}).get("resourceVersion") or "")
        if self.cas and wanted and wanted != cmeta.get("resourceVersion"):
            raise _error(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {resource.plural} {name!r}: the object has been modified; "
                "please apply your changes to the latest version and try again",
            )
        if request.method == enums.method.PUT:
            new = data
            if request.subresource == "status":
                new = {**current, "status": data.get("status")}
            elif "status" in current:
                new["status"] = current["status"]
        else:
            if "json-patch" in str(request.headers.get("Content-Type", "")):
                raise _error(415, "UnsupportedMediaType", "only merge patches are emulated")
            if request.subresource == "status":
                data = {"status": data.get("status")}
            else:
                data.pop("status", None)
            new = memory.merge_patch(current, data)
        meta = new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "name", "namespace"):
            if field in cmeta:
                meta[field] = cmeta[field]
        meta["generation"] = int(cmeta.get("generation") or 1) + (
            1 if new.get("spec") != current.get("spec") else 0
        )
        await self._store(resource, namespace, new, "MODIFIED")
        return new

    # -- list and watch ------------------------------------------------------------------------
    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_list(request)
        assert isinstance(payload, dict)
        payload["metadata"] = {"resourceVersion": str(self._last_rv)}
        return payload

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""
        resource = request.resource
        since = str(request.params.get("resourceVersion") or "")
        async with self._lock:
            bus = self._buses[resource]
            marker = await bus.mark()
            gone = too_large = False
            if since and since != "0":
                floor = self._compacted.get(resource, self._compacted.get(None, 0))
                gone = int(since) < floor or self.expire_next > 0
                if gone and self.expire_next > 0:
                    self.expire_next -= 1
                too_large = not gone and int(since) > self._last_rv
                replay = [e for v, e in self._history.get(resource, []) if v > int(since)]
            else:
                replay = [
                    {"type": "ADDED", "object": copy.deepcopy(obj.raw)}
                    for (res, _ns, _name), obj in self._objects.items()
                    if res == resource and not obj.deleted
                ]
        try:
            if gone:
                yield {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "code": 410,
                        "reason": "Expired",
                        "message": f"too old resource version: {since} ({self._last_rv})",
                    },
                }
                return
            if too_large:  # (the API server's watch cache answers this after waiting for a while)
                yield {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "code": 504,
                        "reason": "Timeout",
                        "message": f"Too large resource version: {since}, current: {self._last_rv}",
                        "details": {
                            "causes": [
                                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                            ],
                            "retryAfterSeconds": 1,
                        },
                    },
                }
                return
            for event in replay:
                if self._visible(request, event):
                    yield event
            if request.params.get("allowWatchBookmarks") == "true":
                yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self._last_rv)}}}
            async for event in bus.stream(since=marker):
                if event is _CLOSE or event == _CLOSE:
                    return
                if self._visible(request, event):
                    yield event
        finally:
            await bus.unmark(marker)

    @staticmethod
    def _visible(request: rendering.Request, event: dict[str, Any]) -> bool:
        namespace = ((event.get("object") or {}).get("metadata") or {}).get("namespace")
        return request.namespace is None or namespace == request.namespace

    # -- pods/eviction and pods/binding --------------------------------------------------------
    def install_evictions(self) -> None:
        """The eviction reaction: 429 while a PDB forbids, else delete the pod."""
        self["post", re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/eviction$")] << self._serve_eviction

    def install_bindings(self) -> None:
        self["post", re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/binding$")] << self._serve_binding

    def _objects_of(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        res = RESOURCES[kind]
        out = []
        for (resource, ns, _name), obj in self._objects.items():
            same = resource.plural == res.plural and resource.group == res.group
            if same and not obj.deleted and (namespace is None or ns == namespace):
                out.append(copy.deepcopy(obj.raw))
        return out

    def _pdb_allows(self, pdb: dict[str, Any], namespace: str) -> int:
        spec = pdb.get("spec") or {}
        pods = [
            p
            for p in self._objects_of("Pod", namespace)
            if not p["metadata"].get("deletionTimestamp")
            and memory._matches(spec.get("selector"), p["metadata"].get("labels") or {})
        ]
        healthy = sum(1 for p in pods if memory._ready(p))
        if "minAvailable" in spec:
            desired = memory._scaled(spec["minAvailable"], len(pods), round_up=True)
        elif "maxUnavailable" in spec:
            desired = len(pods) - memory._scaled(spec["maxUnavailable"], len(pods), round_up=True)
        else:
            desired = len(pods)
        return max(0, healthy - desired)

    async def _serve_eviction(self, request: rendering.Request) -> rendering.Payload:
        namespace, name = request.namespace or "default", request.name or ""
        pod_resource = kmock.resource(group="", version="v1", plural="pods")
        async with self._lock:
            pod = self._find(pod_resource, namespace, name)
            if pod is None:
                self.evictions.append((namespace, name, 404))
                raise _error(404, "NotFound", f'pods "{name}" not found')
            wanted = (((request.data or {}).get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
            if wanted and pod["metadata"].get("uid") != wanted:
                self.evictions.append((namespace, name, 409))
                raise _error(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {wanted}, "
                    f"UID in object meta: {pod['metadata'].get('uid')}",
                )
            labels = pod["metadata"].get("labels") or {}
            for pdb in self._objects_of("PodDisruptionBudget", namespace):
                selector = (pdb.get("spec") or {}).get("selector")
                if memory._matches(selector, labels) and self._pdb_allows(pdb, namespace) <= 0:
                    self.evictions.append((namespace, name, 429))
                    raise _error(
                        429,
                        "TooManyRequests",
                        f"Cannot evict pod as it would violate the pod's disruption budget "
                        f"{pdb['metadata']['name']}.",
                    )
            self.evictions.append((namespace, name, 201))
            if pod["metadata"].get("finalizers"):
                pod["metadata"]["deletionTimestamp"] = _now()
                await self._store(pod_resource, namespace, pod, "MODIFIED")
            else:
                await self._store(pod_resource, namespace, pod, "DELETED")
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    async def _serve_binding(self, request: rendering.Request) -> rendering.Payload:
        namespace, name = request.namespace or "default", request.name or ""
        pod_resource = kmock.resource(group="", version="v1", plural="pods")
        target = ((request.data or {}).get("target") or {}).get("name")
        async with self._lock:
            pod = self._find(pod_resource, namespace, name)
            if pod is None:
                raise _error(404, "NotFound", f'pods "{name}" not found')
            if (pod.get("spec") or {}).get("nodeName"):
                raise _error(409, "Conflict", f"pod {name} is already assigned")
            pod.setdefault("spec", {})["nodeName"] = target
            status = pod.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            status["conditions"] = [*conds, {"type": "PodScheduled", "status": "True"}]
            await self._store(pod_resource, namespace, pod, "MODIFIED")
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}


class EmulatorThread:
    """A :class:`KarpyEmulator` (``stock``: kmock's own ``KubernetesEmulator``) served on 127.0.0.1
    from its own thread and event loop. ``emulator`` is the extended one (not set when ``stock``);
    ``server`` is whichever is served."""

    def __init__(
        self, *, cas: bool = True, evictions: bool = True, kinds: tuple[str, ...] = (), stock: bool = False
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping: asyncio.Future[None] | None = None
        self._options = (cas, evictions, kinds)
        self.stock = stock
        self.emulator: KarpyEmulator
        self.server: kmock.KubernetesEmulator
        self.url = ""
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("kmock did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stopping = self.loop.create_future()
        if self.stock:
            await self._serve_stock()
            return
        cas, evictions, kinds = self._options
        async with KarpyEmulator(cas=cas) as emulator, kmock.Server(emulator) as server:
            emulator.declare(*kinds)
            if evictions:
                emulator.install_evictions()
            emulator.install_bindings()
            self.emulator = emulator
            self.server = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stopping
            await emulator.close_watches()
            await asyncio.sleep(0.05)

    async def _serve_stock(self) -> None:
        assert self._stopping is not None
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
            declare(emulator, *self._options[2])
            self.server = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stopping

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 5.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn: Callable[[], T], timeout: float = 5.0) -> T:
        async def wrapped() -> T:
            return fn()

        return self.call(wrapped(), timeout)

    def requests(self) -> list[rendering.Request]:
        return self.run(lambda: list(self.server._requests))

    def stop(self) -> None:
        if self._stopping is not None:
            self.loop.call_soon_threadsafe(lambda: self._stopping.done() or self._stopping.set_result(None))  # type: ignore[union-attr]
        self._thread.join(10)
