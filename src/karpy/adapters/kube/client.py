"""``KubeClient``: the :class:`karpy.ports.KubeAPI` over ``kubernetes_asyncio``, raw JSON in and out.

"Sync core, async edge": an :class:`~karpy.adapters.kube.edge.Edge` thread runs an asyncio loop
with the ``kubernetes_asyncio`` ``ApiClient``; the synchronous port methods submit coroutines to
it and wait. Requests go through ``ApiClient.call_api`` with JSON bodies and ``_preload_content=False``
(no generated model classes); statuses are mapped to :mod:`karpy.model.errors` by
:mod:`karpy.adapters.kube.errors`.

Every 2xx answer must be a JSON object (or empty); anything else raises an error naming the request
and the HTTP status, as every non-2xx answer does. ``create`` names an object with only
``generateName`` itself (``<generateName>`` + 5 random characters, the API server's own scheme,
retried with a fresh suffix on a collision), so NodeClaims get their names even from an API server
that ignores ``generateName`` (kmock's stock emulator stores them nameless); it also sends
``creationTimestamp`` (a real API server ignores it and sets its own; the stock emulator keeps it).
The request sequences of the verbs are in :mod:`karpy.adapters.kube.verbs`.

Concurrency and rate limit: ``batch`` runs independent calls concurrently on the edge loop, at most
``max_in_flight`` requests at a time, and answers them in order; every request of the port's calls
(batched or not) first takes a token of the client-side rate limit
(:mod:`karpy.adapters.kube.ratelimit`: ``qps`` and ``burst`` as client-go's). The edge's own
requests (:meth:`KubeClient.request` and :meth:`KubeClient.stream`: Lease renewals, list+watch,
event posts) are counted but never wait for the limit or for a slot, so no burst of writes can
delay a renewal.

Watch events (from :mod:`karpy.adapters.kube.watch`, on the edge thread) go onto a thread-safe
queue; the operator's thread calls :meth:`KubeClient.dispatch` to hand them to the ``watch``
callbacks (the :class:`~karpy.state.feed.Feed`). A successful write is echoed to the callbacks at
once, as the in-memory API server does, so the next reconcile sees it; the later watch echo of
the same (or an older) resourceVersion is dropped. Writes are refused with
:class:`~karpy.adapters.kube.errors.NotLeader` while ``write_guard`` says this replica is not the
leader. A client built with ``writable`` (``karpy operator --shadow``: Events and Leases) refuses
every other write before it is sent, whoever asks (a port call, the edge's own requests), with
:class:`ReadOnly` naming the verb and the kind. Built by :mod:`karpy.operator`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import json
import logging
import math
import queue
import random
import threading
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube import ratelimit, verbs
from karpy.adapters.kube.edge import INTERRUPT_POLL, Edge
from karpy.adapters.kube.verbs import RESOURCES, Resource, resource
from karpy.model import errors
from karpy.ports import KubeAPI, KubeOp, RawObject, WatchEvent

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_QPS",
    "INTERRUPT_POLL",
    "RESOURCES",
    "Edge",
    "KubeClient",
    "ReadOnly",
    "Resource",
    "load_configuration",
    "resource",
]

log = logging.getLogger("karpy.kube")
T = TypeVar("T")


# The API server's generateName suffix: 5 characters of k8s.io/apimachinery utilrand's alphabet.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_NAME_SUFFIX = 5
DEFAULT_MAX_IN_FLIGHT = 16  # requests of the port's calls at a time (a batch's concurrency)
DEFAULT_QPS = ratelimit.DEFAULT_QPS  # the client-side rate limit (upstream's KUBE_CLIENT_QPS)
DEFAULT_BURST = ratelimit.DEFAULT_BURST  # (KUBE_CLIENT_BURST)
_EDGE_CONNECTIONS = 64  # connections beyond those: the watches, the Lease, event posts


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


_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class ReadOnly(errors.KubeError):
    """A write of a kind this client may not write (see ``writable``): refused, never sent."""

    status = 403


def path_kind(path: str) -> str:
    """The kind a request path names (``/apis/karpenter.sh/v1/nodeclaims/x`` -> ``NodeClaim``; a
    subresource is kept: ``Pod/eviction``); the path's resource name for a kind karpy does not know."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    else:
        group, rest = (parts[1] if len(parts) > 1 else ""), parts[3:]
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return path
    plural, sub = rest[0], (rest[2] if len(rest) > 2 else "")
    kind = next((r.kind for r in RESOURCES.values() if r.group == group and r.plural == plural), plural)
    return f"{kind}/{sub}" if sub else kind


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
        context: str | None = None,
        host: str | None = None,
        timeout: float = 30.0,
        edge: Edge | None = None,
        on_event: Callable[[], None] | None = None,
        identity: str = "karpy",
        rng: random.Random | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        on_answer: Callable[[], None] | None = None,
        writable: Collection[str] | None = None,
    ) -> None:
        self.edge = edge or Edge()
        # the only kinds this client writes (None: any); checked before every request is sent
        self.writable = frozenset(writable) if writable is not None else None
        self.limiter = ratelimit.TokenBucket(qps, burst)  # used on the edge loop only
        self.max_in_flight = max(1, int(max_in_flight))
        self._slots: asyncio.Semaphore | None = None  # made on the edge loop by start()
        self.in_flight = 0  # requests of the port's calls under way (edge loop)
        self.peak_in_flight = 0
        # called on the edge thread whenever a request of a port call ends with an answer or an
        # error (not when cancelled): progress of the caller's pass (the operator's liveness)
        self.on_answer = on_answer
        self._rng = rng or random.SystemRandom()  # generateName suffixes
        self.timeout = timeout
        self._kubeconfig = kubeconfig
        self._context = context  # the kubeconfig context (None: its current-context)
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
            cfg = await load_configuration(
                kubeconfig=self._kubeconfig, host=self._host, context=self._context
            )
            if cfg.connection_pool_maxsize is not None:  # None: no limit
                wanted = self.max_in_flight + _EDGE_CONNECTIONS
                cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize, wanted)
            self._slots = asyncio.Semaphore(self.max_in_flight)
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
        if self.writable is not None and method in _WRITE_VERBS and path_kind(path) not in self.writable:
            raise ReadOnly(
                f"refused {_WRITE_VERBS[method]} {path_kind(path)} ({method} {path}): this client is "
                f"read-only but for {', '.join(sorted(self.writable)) or 'nothing'} (karpy operator --shadow)"
            )
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
        """One API call of the edge itself (Lease, list, event): the answer's JSON object, or a
        :mod:`karpy.model.errors` error that names the request and the HTTP status (also for a 2xx
        answer that is not a JSON object). Counted by the rate limit; it never waits for it."""
        self.limiter.charge()
        return await self._send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )

    async def _req(
        self, method: str, path: str, *, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """One request of a port call: waits for a slot (``max_in_flight``) and a token of the rate
        limit; a write is refused (NotLeader) if this replica stopped leading in the meantime."""
        if self._slots is None:
            raise kerrors.Unavailable("Kubernetes client is not started")
        async with self._slots:
            await self.limiter.acquire()
            if method != "GET" and self.write_guard is not None and not self.write_guard():
                raise kerrors.NotLeader(f"{method} {path}: {self.identity} is not the leader")
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                out = await self._send(method, path, body=body, content_type=content_type)
            except asyncio.CancelledError:
                raise  # no answer: the caller stopped waiting
            except Exception:
                if self.on_answer is not None:
                    self.on_answer()
                raise
            finally:
                self.in_flight -= 1
            if self.on_answer is not None:
                self.on_answer()
            return out

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> Any:
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
        self.limiter.charge()
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

    def forget_versions(self, kind: str) -> None:
        """Forget the resourceVersions delivered of ``kind`` (any thread): after the API server's
        state was reset its versions start over, and events older than ones seen would be dropped."""
        with self._seen_lock:
            for key in [k for k in self._seen if k[0] == kind]:
                del self._seen[key]

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
    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        wait = self.timeout + 5 if timeout is None else timeout
        return self.edge.call(coro, wait, interrupt=self.stopping)

    def _guard(self, verb: str, kind: str, name: str) -> None:
        if self.write_guard is not None and not self.write_guard():
            raise kerrors.NotLeader(f"{verb} {kind} {name}: {self.identity} is not the leader")

    @property
    def server(self) -> str:
        """The API server's address this client was started with ("" before :meth:`start`)."""
        api = self._api
        return str(api.configuration.host) if api is not None else ""

    def server_version(self) -> str:
        """The API server's ``gitVersion`` (``GET /version``), e.g. ``v1.31.4-eks-1234``."""
        answer = self._call(self._req("GET", "/version"))
        return str(answer.get("gitVersion") or "")

    def get(self, kind: str, name: str, namespace: str = "") -> RawObject:
        return self._call(verbs.get(self._req, kind, name, namespace))

    def list(self, kind: str, namespace: str | None = None, *, read_only: bool = False) -> list[RawObject]:
        """The objects of a kind (in a namespace); fresh from the response, ``read_only`` or not."""
        return self._call(verbs.list_(self._req, kind, namespace))

    def generated_name(self, prefix: str) -> str:
        """``prefix`` + 5 random characters, as the API server completes a ``generateName``."""
        return prefix + "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(_NAME_SUFFIX))

    def create(self, obj: RawObject) -> RawObject:
        """POST ``obj``; one with only ``generateName`` is named here (see the module docstring)."""
        out: RawObject = self._call(self._prepare(KubeOp("create", obj["kind"], body=obj))())
        self._echo("ADDED", obj["kind"], out)
        return out

    def update(self, obj: RawObject) -> RawObject:
        op = KubeOp("update", obj["kind"], obj["metadata"]["name"], body=obj)
        out: RawObject = self._call(self._prepare(op)())
        self._echo(verbs.echo_type("update", out), obj["kind"], out)
        return out

    def patch(self, kind: str, name: str, patch: Mapping[str, Any], namespace: str = "") -> RawObject:
        out: RawObject = self._call(self._prepare(KubeOp("patch", kind, name, namespace, patch))())
        self._echo(verbs.echo_type("patch", out), kind, out)
        return out

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        out = self._call(self._prepare(KubeOp("delete", kind, name, namespace))())
        self._echo(verbs.echo_type("delete", out), kind, out)

    def evict(self, name: str, namespace: str, uid: str = "") -> None:
        self._guard("evict", "Pod", name)
        self._call(verbs.evict(self._req, name, namespace, uid))

    def bind(self, name: str, namespace: str, node_name: str) -> None:
        self._guard("bind", "Pod", name)
        self._call(verbs.bind(self._req, name, namespace, node_name))

    # -- batch ---------------------------------------------------------------------------------
    def _prepare(self, op: KubeOp) -> Callable[[], Coroutine[Any, Any, Any]]:
        """The coroutine (made when called) of one op, after the checks the synchronous call makes
        first: a known kind, and (for a write) the leader. A generated name is drawn here, on the
        caller's thread, so a batch's names follow the order of its ops."""
        resource(op.kind)
        body: Any = op.body if op.body is None or isinstance(op.body, dict) else dict(op.body)
        if op.verb == "get":
            return lambda: verbs.get(self._req, op.kind, op.name, op.namespace)
        if op.verb == "create":
            meta = body.get("metadata") or {}
            self._guard("create", op.kind, meta.get("name") or str(meta.get("generateName") or ""))
            first = verbs.first_name(body, self.generated_name)
            return lambda: verbs.create(self._req, body, name_for=self.generated_name, first=first)
        self._guard(op.verb, op.kind, op.name)
        if op.verb == "update":
            return lambda: verbs.update(self._req, body)
        if op.verb == "patch":
            return lambda: verbs.patch(self._req, op.kind, op.name, body or {}, op.namespace)
        if op.verb == "delete":
            return lambda: verbs.delete(self._req, op.kind, op.name, op.namespace)
        raise ValueError(f"batch: unknown verb {op.verb!r}")

    def batch(self, ops: Sequence[KubeOp]) -> builtins.list[RawObject | errors.KubeError]:
        """The ops run concurrently on the edge loop (at most ``max_in_flight`` requests at a time,
        each after its token of the rate limit); their answers are echoed to the watch callbacks and
        returned in the order of ``ops``, each result ({} for a delete) or its KubeError apart."""
        results: builtins.list[RawObject | errors.KubeError] = [{} for _ in ops]
        pending: builtins.list[tuple[int, Callable[[], Coroutine[Any, Any, Any]]]] = []
        for index, op in enumerate(ops):
            try:
                pending.append((index, self._prepare(op)))
            except errors.KubeError as exc:
                results[index] = exc
        if not pending:
            return results
        # the wait's backstop: every request has its own timeout; an op makes at most 4 in series
        rounds = math.ceil(len(pending) / self.max_in_flight)
        wait = (self.timeout + 5) * 4 * rounds
        if self.limiter.enabled:
            wait += 4 * len(pending) / self.limiter.qps
        answers = self._call(self._gather([make for _, make in pending]), wait)
        for (index, _), answer in zip(pending, answers, strict=True):
            if isinstance(answer, errors.KubeError):
                results[index] = answer
            elif isinstance(answer, Exception):
                raise answer
            else:
                op = ops[index]
                if echo := verbs.echo_type(op.verb, answer):
                    self._echo(echo, op.kind, answer)
                results[index] = {} if op.verb == "delete" else answer
        return results

    async def _gather(self, makers: Sequence[Callable[[], Coroutine[Any, Any, Any]]]) -> builtins.list[Any]:
        """Run the coroutines ``max_in_flight`` at a time, started in order; each one's answer or
        the exception it raised (handed back to the caller's thread)."""
        answers: builtins.list[Any] = [None] * len(makers)
        order = iter(range(len(makers)))

        async def worker() -> None:
            for index in order:
                try:
                    answers[index] = await makers[index]()
                except Exception as exc:
                    answers[index] = exc

        await asyncio.gather(*(worker() for _ in range(min(self.max_in_flight, len(makers)))))
        return answers


def _conforms(client: KubeClient) -> KubeAPI:
    """mypy checks here that the client satisfies the port."""
    return client
