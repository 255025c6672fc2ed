"""``KubeClient``: the :class:`karpy.ports.KubeAPI` over ``kubernetes_asyncio``, raw JSON in and out.

"Sync core, async edge": an :class:`Edge` thread runs an asyncio loop with the
``kubernetes_asyncio`` ``ApiClient``; the synchronous port methods submit coroutines to it and
wait. Requests go through ``ApiClient.call_api`` with JSON bodies and ``_preload_content=False``
(no generated model classes); statuses are mapped to :mod:`karpy.model.errors` by
:mod:`karpy.adapters.kube.errors`.

Every 2xx answer must be a JSON object (or empty); anything else raises an error naming the request
and the HTTP status, as every non-2xx answer does. ``create`` names an object with only
``generateName`` itself (``<generateName>`` + 5 random characters, the API server's own scheme,
retried with a fresh suffix on a collision), so NodeClaims get their names even from an API server
that ignores ``generateName`` (kmock's stock emulator stores them nameless); it also sends
``creationTimestamp`` (a real API server ignores it and sets its own; the stock emulator keeps it).

Watch events (from :mod:`karpy.adapters.kube.watch`, on the edge thread) go onto a thread-safe
queue; the operator's thread calls :meth:`KubeClient.dispatch` to hand them to the ``watch``
callbacks (the :class:`~karpy.state.feed.Feed`). A successful write is echoed to the callbacks at
once, as the in-memory API server does, so the next reconcile sees it; the later watch echo of
the same (or an older) resourceVersion is dropped. Writes are refused with
:class:`~karpy.adapters.kube.errors.NotLeader` while ``write_guard`` says this replica is not the
leader. Built by :mod:`karpy.operator`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import json
import logging
import queue
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from karpy.adapters.kube import errors as kerrors
from karpy.model import errors
from karpy.ports import KubeAPI, RawObject, WatchEvent

__all__ = ["RESOURCES", "Edge", "KubeClient", "Resource", "load_configuration"]

log = logging.getLogger("karpy.kube")
T = TypeVar("T")
INTERRUPT_POLL = 0.1  # how often a waiting call looks at its interrupt event (seconds)


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
        Resource("NodeClaim", "karpenter.sh", "v1", "nodeclaims", False, True),
        Resource("NodePool", "karpenter.sh", "v1", "nodepools", False, True),
        Resource("EC2NodeClass", "karpenter.k8s.aws", "v1", "ec2nodeclasses", False, True),
        Resource("KWOKNodeClass", "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", False, True),
        Resource("DaemonSet", "apps", "v1", "daemonsets", True, True),
        Resource("Deployment", "apps", "v1", "deployments", True, True),
        Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True, True),
        Resource("Lease", "coordination.k8s.io", "v1", "leases", True, False),
        Resource("Event", "events.k8s.io", "v1", "events", True, False),
    )
}
_CREATE_DROPS_STATUS = frozenset({"NodeClaim", "NodePool", "EC2NodeClass", "KWOKNodeClass"})
# The API server's generateName suffix: 5 characters of k8s.io/apimachinery utilrand's alphabet.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_NAME_SUFFIX = 5
_NAME_ATTEMPTS = 3


def resource(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise errors.Invalid(f"karpy does not know the API resource of kind {kind!r}") from None


async def load_configuration(
    *, kubeconfig: str | None = None, host: str | None = None, context: str | None = None
) -> k8s_client.Configuration:
    """A client configuration: ``host`` (tests), a kubeconfig file, in-cluster, or the default kubeconfig."""
    cfg = k8s_client.Configuration()
    if host is not None:
        cfg.host = host.rstrip("/")
        return cfg
    if kubeconfig is None:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            return cfg
        except k8s_config.ConfigException:
            pass
    await k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    return cfg


class Edge:
    """The asyncio loop of the Kubernetes edge, on its own daemon thread."""

    def __init__(self, name: str = "karpy-kube") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(
        self,
        coro: Coroutine[Any, Any, T],
        timeout: float | None = None,
        *,
        interrupt: threading.Event | None = None,
    ) -> T:
        """Run ``coro`` on the edge loop and wait for it (from any other thread). With
        ``interrupt``, the wait ends (the request cancelled, :class:`~.errors.Interrupted` raised)
        within :data:`INTERRUPT_POLL` s of the event being set, or at once if it already is."""
        if interrupt is not None and interrupt.is_set():
            coro.close()
            raise kerrors.Interrupted("stopping: the call was not made")
        future = self.submit(coro)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            slice_ = INTERRUPT_POLL if interrupt is not None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                slice_ = left if slice_ is None else min(slice_, left)
            try:
                return future.result(None if slice_ is None else max(slice_, 0.0))
            except concurrent.futures.TimeoutError:
                if interrupt is not None and interrupt.is_set():
                    future.cancel()
                    raise kerrors.Interrupted("stopping: the call's answer is not waited for") from None
                if deadline is not None and time.monotonic() >= deadline:
                    future.cancel()
                    raise kerrors.Unavailable(f"Kubernetes call did not answer within {timeout} s") from None

    def stop(self, timeout: float = 2.0) -> None:
        """Cancel every task on the edge loop, stop it and join the thread."""
        if not self._started or not self.loop.is_running():
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.submit(shutdown()).result(timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


def answer_error(method: str, path: str, status: int, body: Any) -> errors.KubeError:
    """The karpy error for a non-2xx answer; its text names the request and the HTTP status."""
    error = kerrors.from_status(status, body, what=f"{method} {path}: HTTP {status}")
    if type(error) is errors.KubeError:  # an unmapped status: from_status puts "HTTP <status>" first
        error = kerrors.from_status(status, body, what=f"{method} {path}")
    return error


def decode_answer(method: str, path: str, status: int, raw: bytes) -> Any:
    """The JSON of an answer: a 2xx one must be an object (empty: ``{}``); a non-2xx one becomes
    the error it maps to (its body may be text)."""
    try:
        data: Any = json.loads(raw) if raw.strip() else {}
    except ValueError:
        if not 200 <= status <= 299:
            raise answer_error(method, path, status, raw.decode("utf-8", "replace")) from None
        text = raw[:200].decode("utf-8", "replace")
        raise kerrors.Unavailable(
            f"{method} {path}: HTTP {status}: the answer is not JSON: {text!r}"
        ) from None
    if not 200 <= status <= 299:
        raise answer_error(method, path, status, data)
    if not isinstance(data, dict):
        shown = json.dumps(data)[:200]
        raise kerrors.Unavailable(
            f"{method} {path}: HTTP {status}: the answer is JSON but not an object: {shown}"
        )
    return data


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(kind: str, obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _version(obj: Mapping[str, Any]) -> int | None:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


class KubeClient:
    """The real :class:`~karpy.ports.KubeAPI`. ``start()`` before use, ``close()`` after."""

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        host: str | None = None,
        timeout: float = 30.0,
        edge: Edge | None = None,
        on_event: Callable[[], None] | None = None,
        identity: str = "karpy",
        rng: random.Random | None = None,
    ) -> None:
        self.edge = edge or Edge()
        self._rng = rng or random.SystemRandom()  # generateName suffixes
        self.timeout = timeout
        self._kubeconfig = kubeconfig
        self._host = host
        self._api: k8s_client.ApiClient | None = None
        self._callbacks: list[Callable[[WatchEvent], None]] = []
        self._queue: queue.SimpleQueue[WatchEvent] = queue.SimpleQueue()
        self._seen: dict[tuple[str, str, str], tuple[int, bool]] = {}
        self._seen_lock = threading.Lock()
        self.on_event = on_event  # e.g. RealtimeLoop.notify: called (any thread) when events are queued
        self.write_guard: Callable[[], bool] | None = None  # None = always allowed
        # set by the operator's stop(): every synchronous call made (or waited for) after it raises
        # Interrupted, so a long pass ends at its next API call instead of finishing
        self.stopping = threading.Event()
        self.identity = identity

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> KubeClient:
        self.edge.start()

        async def make() -> k8s_client.ApiClient:
            cfg = await load_configuration(kubeconfig=self._kubeconfig, host=self._host)
            api = k8s_client.ApiClient(configuration=cfg)
            api.user_agent = f"karpy/{self.identity}"
            return api

        self._api = self.edge.call(make(), self.timeout)
        return self

    def close(self) -> None:
        api = self._api
        self._api = None
        if api is not None and self.edge.loop.is_running():
            with contextlib.suppress(Exception):
                self.edge.call(api.close(), 2.0)
        self.edge.stop()

    # -- async primitives (edge thread) --------------------------------------------------------
    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> aiohttp.ClientResponse:
        if self._api is None:
            raise kerrors.Unavailable("Kubernetes client is not started")
        try:
            response: aiohttp.ClientResponse = await self._api.call_api(
                path,
                method,
                query_params=[(k, v) for k, v in (query or {}).items()],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout if timeout is not None else self.timeout,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise kerrors.from_response(exc, what=f"{method} {path}") from None
        except k8s_client.ApiException as exc:
            raise kerrors.from_response(exc, what=f"{method} {path}") from None
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> Any:
        """One API call: the answer's JSON object, or a :mod:`karpy.model.errors` error that
        names the request and the HTTP status (also for a 2xx answer that is not a JSON object)."""
        response = await self._open(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        try:
            raw = await response.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise kerrors.from_response(exc, what=f"{method} {path}") from None
        finally:
            response.release()
        return decode_answer(method, path, response.status, raw)

    async def stream(
        self,
        path: str,
        *,
        query: Mapping[str, Any],
        read_timeout: float,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The JSON object lines of a watch response (ends when the server closes or goes quiet);
        ``on_open`` is called once the server answered 2xx."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=read_timeout)
        response = await self._open("GET", path, query=query, timeout=timeout)
        try:
            if not 200 <= response.status <= 299:
                try:
                    raw = await response.read()
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    raise kerrors.from_response(exc, what=f"WATCH {path}") from None
                decode_answer("WATCH", path, response.status, raw)  # raises the error it maps to
            if on_open is not None:
                on_open()
            buffer = b""
            while True:
                try:
                    chunk = await response.content.readline()
                except (TimeoutError, aiohttp.ClientError, OSError):
                    return  # quiet or broken stream: the caller resumes it
                if not chunk:
                    return
                buffer += chunk
                if not buffer.endswith(b"\n"):
                    continue
                line, buffer = buffer.strip(), b""
                if line:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        log.warning("watch %s: undecodable line dropped: %r", path, line[:200])
                        continue
                    if isinstance(event, dict):
                        yield event
                    else:
                        log.warning(
                            "watch %s: a line that is not a JSON object dropped: %r", path, line[:200]
                        )
        finally:
            response.release()

    # -- events --------------------------------------------------------------------------------
    def watch(self, callback: Callable[[WatchEvent], None]) -> None:
        """Subscribe; events are delivered by :meth:`dispatch` on the caller's thread."""
        self._callbacks.append(callback)

    def enqueue(self, event: WatchEvent) -> None:
        """Queue a watch event (any thread) and wake the loop."""
        self._queue.put(event)
        if self.on_event is not None:
            self.on_event()

    def dispatch(self, limit: int | None = None) -> int:
        """Deliver queued watch events to the callbacks; returns how many were taken."""
        taken = 0
        while limit is None or taken < limit:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            taken += 1
            self._deliver(event)
        return taken

    def _fresh(self, event: WatchEvent) -> bool:
        """False for an event older than (or the same as) what the callbacks already saw."""
        key = _key(event.kind, event.obj)
        version = _version(event.obj)
        with self._seen_lock:
            seen = self._seen.get(key)
            if event.type == "DELETED":
                if seen is not None and seen[1] and (version is None or version <= seen[0]):
                    return False
                self._seen[key] = (max(version or 0, seen[0] if seen else 0), True)
                return True
            if version is None:
                return True
            if seen is not None and version <= seen[0]:
                return False
            self._seen[key] = (version, False)
            return True

    def _deliver(self, event: WatchEvent) -> None:
        if not self._fresh(event):
            return
        for callback in list(self._callbacks):
            try:
                callback(event)
            except Exception:  # one bad object never stops the operator
                log.exception("watch callback failed for %s %s", event.kind, _key(event.kind, event.obj))

    def _echo(self, type_: str, kind: str, obj: Any) -> None:
        if isinstance(obj, dict) and obj.get("kind") not in (None, "Status") and obj.get("metadata"):
            obj.setdefault("kind", kind)
            self._deliver(WatchEvent(type_, kind, copy.deepcopy(obj)))

    # -- KubeAPI (any thread but the edge's) ---------------------------------------------------
    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.edge.call(coro, self.timeout + 5, interrupt=self.stopping)

    def _guard(self, verb: str, kind: str, name: str) -> None:
        if self.write_guard is not None and not self.write_guard():
            raise kerrors.NotLeader(f"{verb} {kind} {name}: {self.identity} is not the leader")

    def server_version(self) -> str:
        """The API server's ``gitVersion`` (``GET /version``), e.g. ``v1.31.4-eks-1234``."""
        answer = self._call(self.request("GET", "/version"))
        return str(answer.get("gitVersion") or "")

    def get(self, kind: str, name: str, namespace: str = "") -> RawObject:
        res = resource(kind)
        out: RawObject = self._call(self.request("GET", res.path(namespace or "default", name)))
        return out

    def list(self, kind: str, namespace: str | None = None, *, read_only: bool = False) -> list[RawObject]:
        """The objects of a kind (in a namespace); fresh from the response, ``read_only`` or not."""
        res = resource(kind)
        data = self._call(self.request("GET", res.path(namespace)))
        items: list[RawObject] = list(data.get("items") or [])
        for item in items:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", res.api_version)
        return items

    def generated_name(self, prefix: str) -> str:
        """``prefix`` + 5 random characters, as the API server completes a ``generateName``."""
        return prefix + "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(_NAME_SUFFIX))

    def create(self, obj: RawObject) -> RawObject:
        """POST ``obj``; one with only ``generateName`` is named here (see the module docstring)."""
        kind = obj["kind"]
        res = resource(kind)
        meta = obj.get("metadata") or {}
        prefix = "" if meta.get("name") else str(meta.get("generateName") or "")
        self._guard("create", kind, meta.get("name") or prefix)
        namespace = meta.get("namespace") or ("default" if res.namespaced else None)
        # A real API server sets creationTimestamp itself (ignoring this one); one that does not
        # (kmock's stock emulator) would leave it empty, and a NodeClaim "created at 0" is at once
        # past its launch deadline (lifecycle liveness).
        stamp = meta.get("creationTimestamp") or _rfc3339(time.time())
        for attempt in range(1, _NAME_ATTEMPTS + 1):
            body = dict(obj)
            body.setdefault("apiVersion", res.api_version)
            body["metadata"] = {**meta, "creationTimestamp": stamp}
            if prefix:
                body["metadata"]["name"] = self.generated_name(prefix)
            try:
                out: RawObject = self._call(self.request("POST", res.path(namespace), body=body))
            except (errors.AlreadyExists, errors.Conflict):
                if not prefix or attempt == _NAME_ATTEMPTS:
                    raise
                continue  # a generated name that is taken: another suffix
            break
        if kind in _CREATE_DROPS_STATUS and obj.get("status"):
            name = out["metadata"]["name"]
            out = self._call(
                self.request(
                    "PATCH",
                    res.path(namespace, name, "status"),
                    body={"status": obj["status"]},
                    content_type="application/merge-patch+json",
                )
            )
        self._echo("ADDED", kind, out)
        return out

    def update(self, obj: RawObject) -> RawObject:
        kind = obj["kind"]
        res = resource(kind)
        meta = obj["metadata"]
        self._guard("update", kind, meta["name"])
        namespace = meta.get("namespace") or ("default" if res.namespaced else None)
        body = dict(obj)
        body.setdefault("apiVersion", res.api_version)
        out: RawObject = self._call(self.request("PUT", res.path(namespace, meta["name"]), body=body))
        if res.status and "status" in obj and out.get("status") != obj["status"]:
            status_body = {**out, "status": obj["status"]}
            out = self._call(
                self.request("PUT", res.path(namespace, meta["name"], "status"), body=status_body)
            )
        self._echo(self._type_after_write(out), kind, out)
        return out

    def patch(self, kind: str, name: str, patch: Mapping[str, Any], namespace: str = "") -> RawObject:
        res = resource(kind)
        self._guard("patch", kind, name)
        ns = namespace or ("default" if res.namespaced else None)
        main = {k: v for k, v in patch.items() if not (res.status and k == "status")}
        out: RawObject = {}
        merge = "application/merge-patch+json"
        if main or not (res.status and "status" in patch):
            out = self._call(self.request("PATCH", res.path(ns, name), body=main, content_type=merge))
        if res.status and "status" in patch:
            out = self._call(
                self.request(
                    "PATCH",
                    res.path(ns, name, "status"),
                    body={"status": patch["status"]},
                    content_type=merge,
                )
            )
        self._echo(self._type_after_write(out), kind, out)
        return out

    @staticmethod
    def _type_after_write(obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        gone = meta.get("deletionTimestamp") and not meta.get("finalizers")
        return "DELETED" if gone else "MODIFIED"

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        res = resource(kind)
        self._guard("delete", kind, name)
        ns = namespace or ("default" if res.namespaced else None)
        out = self._call(self.request("DELETE", res.path(ns, name), body={"propagationPolicy": "Background"}))
        if isinstance(out, dict) and out.get("metadata", {}).get("finalizers"):
            self._echo("MODIFIED", kind, out)
        else:
            self._echo("DELETED", kind, out)

    def evict(self, name: str, namespace: str, uid: str = "") -> None:
        self._guard("evict", "Pod", name)
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if uid:  # only the pod meant: a re-created pod of the same name answers 409
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        self._call(self.request("POST", RESOURCES["Pod"].path(namespace, name, "eviction"), body=body))

    def bind(self, name: str, namespace: str, node_name: str) -> None:
        self._guard("bind", "Pod", name)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        self._call(self.request("POST", RESOURCES["Pod"].path(namespace, name, "binding"), body=body))


def _conforms(client: KubeClient) -> KubeAPI:
    """mypy checks here that the client satisfies the port."""
    return client
