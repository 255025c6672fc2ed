"""List+watch per kind → :class:`~karpy.ports.WatchEvent` on the client's queue (thin informers).

A :class:`Watcher` lists a kind, turns the difference from what it delivered before into
ADDED / MODIFIED / DELETED events (so an object deleted while the watch was down still
arrives as DELETED), then watches from the list's resourceVersion with bookmarks. A stream that
ends or goes quiet is resumed from the last resourceVersion seen; ``410 Gone`` (as an HTTP status
or an ``ERROR`` event) means that version is too old: list again. Other failures back off
exponentially. Runs on the edge thread; started by :func:`start_watches` (the operator).

A failure is logged as ONE warning line naming the kind, the request (method and path), the HTTP
status when there was an answer, the cause and the retry delay; the same failure again is logged
at debug level (with the traceback of an unexpected exception) until ``REPEAT_WARNING_SECONDS``
have passed, and a recovery at info level. A list answering 404 (a CRD that is not installed) is
noted once at info level and retried quietly. The watcher's state, read by the operator's caches
gate (``/readyz``, ``karpy_cache_synced``): ``synced`` (listed at least once; stays true),
``healthy`` (synced, and no list or watch request has failed since the last one that worked) and
``absent`` (the last list answered 404); ``on_change`` is called when one of them changes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from karpy.adapters.kube import client as client_mod
from karpy.adapters.kube import errors as kerrors
from karpy.model import errors
from karpy.ports import WatchEvent

__all__ = ["Backoff", "Watcher", "start_watches"]

log = logging.getLogger("karpy.kube.watch")

Key = tuple[str, str]  # (namespace, name)


@dataclass
class Backoff:
    """Exponential backoff: ``first`` doubled per failure up to ``cap`` seconds."""

    first: float = 0.2
    cap: float = 30.0
    failures: int = 0

    def next(self) -> float:
        delay = float(min(self.cap, self.first * (2**self.failures)))
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


REPEAT_WARNING_SECONDS = 300.0  # the same failure is warned about again after this long


def _cause(exc: BaseException) -> str:
    """A failure's text: a karpy error names its request and HTTP status; others their type."""
    if isinstance(exc, errors.KubeError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class Watcher:
    """One kind's list+watch loop (run :meth:`run` as a task on the edge loop)."""

    def __init__(
        self,
        kube: client_mod.KubeClient,
        kind: str,
        *,
        on_change: Callable[[Watcher], None] | None = None,
        read_timeout: float = 60.0,
        timeout_seconds: int = 300,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.kind = kind
        self.resource = client_mod.resource(kind)
        self.path = self.resource.path(None)
        self.on_change = on_change
        self.read_timeout = read_timeout
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.version: str | None = None  # resume point; None = list first
        self.known: dict[Key, dict[str, Any]] = {}
        self.lists = 0
        self.watches = 0
        self.synced = False  # listed at least once
        self.healthy = False  # synced, and no request failed since the last one that worked
        self.absent = False  # the last list answered 404: the resource is not served
        self.failure: str | None = None  # the cause of the current failure streak
        self.failures = 0  # failed requests in the current streak
        self._warned: tuple[str, float] | None = None  # (cause, when) of the last warning

    def _set(
        self, *, synced: bool | None = None, healthy: bool | None = None, absent: bool | None = None
    ) -> None:
        before = (self.synced, self.healthy, self.absent)
        if synced is not None:
            self.synced = synced
        if healthy is not None:
            self.healthy = healthy and self.synced
        if absent is not None:
            self.absent = absent
        if (self.synced, self.healthy, self.absent) != before and self.on_change is not None:
            self.on_change(self)

    def _worked(self) -> None:
        """A list or watch request worked: the end of a failure streak."""
        if self.failures:
            log.info(
                "watch %s (%s) works again after %d failed requests", self.kind, self.path, self.failures
            )
            self.failures, self.failure, self._warned = 0, None, None
        self._set(healthy=True, absent=False)

    def failed(self, exc: BaseException) -> float:
        """Record a failed request, log it (see the module docstring); the delay before the retry."""
        delay = self.backoff.next()
        cause = _cause(exc)
        self.failures += 1
        self.failure = cause
        now = self.clock()
        if isinstance(exc, errors.NotFound):
            if not self.absent:
                log.info(
                    "watch %s (%s): %s; the resource is not served (CRD not installed?); checking again "
                    "every %.0f s at most",
                    self.kind,
                    self.path,
                    cause,
                    self.backoff.cap,
                )
            else:
                log.debug("watch %s: still not served (%s); retrying in %.1f s", self.kind, cause, delay)
            self._warned = (cause, now)
            self._set(healthy=False, absent=True)
            return delay
        last = self._warned
        if last is not None and last[0] == cause and now - last[1] < REPEAT_WARNING_SECONDS:
            log.debug(
                "watch %s failed again (%d in a row): %s; retrying in %.1f s",
                self.kind,
                self.failures,
                cause,
                delay,
            )
        else:
            log.warning(
                "watch %s failed%s: %s; retrying in %.1f s",
                self.kind,
                f" ({self.failures} in a row)" if self.failures > 1 else "",
                cause,
                delay,
            )
            self._warned = (cause, now)
        if not isinstance(exc, errors.KubeError):
            log.debug("watch %s: the traceback of %s", self.kind, type(exc).__name__, exc_info=exc)
        self._set(healthy=False, absent=False)
        return delay

    def _emit(self, type_: str, obj: dict[str, Any]) -> None:
        obj.setdefault("kind", self.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        self.kube.enqueue(WatchEvent(type_, self.kind, obj))

    async def relist(self) -> None:
        """List everything; emit the difference from what was delivered (incl. DELETED)."""
        data = await self.kube.request("GET", self.path)
        items = data.get("items")
        if items is None:
            items = []
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise kerrors.Unavailable(f"GET {self.path}: the list answer's items are not a list of objects")
        self.lists += 1
        fresh: dict[Key, dict[str, Any]] = {}
        for item in items:
            fresh[_key(item)] = item
        for key in sorted(self.known.keys() - fresh.keys()):
            self._emit("DELETED", self.known[key])
        for key in sorted(fresh):
            old = self.known.get(key)
            new_version = (fresh[key].get("metadata") or {}).get("resourceVersion")
            if old is None:
                self._emit("ADDED", fresh[key])
            elif (old.get("metadata") or {}).get("resourceVersion") != new_version or not new_version:
                self._emit("MODIFIED", fresh[key])
        self.known = fresh
        version = str((data.get("metadata") or {}).get("resourceVersion") or "")
        self.version = version if version.isdigit() else ""
        self._set(synced=True)
        self._worked()

    async def watch_once(self) -> None:
        """One watch request from ``self.version``; returns when the stream ends."""
        query: dict[str, Any] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.timeout_seconds),
        }
        if self.version:
            query["resourceVersion"] = self.version
        self.watches += 1
        async for line in self.kube.stream(
            self.path, query=query, read_timeout=self.read_timeout, on_open=self._worked
        ):
            type_ = line.get("type")
            obj = line.get("object") or {}
            if not isinstance(obj, dict):
                log.warning(
                    "watch %s (%s): a %s event without an object dropped", self.kind, self.path, type_
                )
                continue
            if type_ == "ERROR":
                code = int(obj.get("code") or 500)
                raise kerrors.from_status(code, obj, what=f"WATCH {self.path}: ERROR event {code}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if type_ == "BOOKMARK":
                if version.isdigit():
                    self.version = version
                continue
            if type_ not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            key = _key(obj)
            if type_ == "DELETED":
                self.known.pop(key, None)
            else:
                self.known[key] = obj
            if version.isdigit() and (not self.version or int(version) > int(self.version)):
                self.version = version
            self._emit(str(type_), obj)
            self.backoff.reset()

    async def run(self) -> None:
        while True:
            try:
                if self.version is None:
                    await self.relist()
                await self.watch_once()
                if not self.version:
                    self.version = None  # a server without resourceVersions: list again
            except asyncio.CancelledError:
                raise
            except kerrors.Gone:
                log.info("watch %s: resourceVersion %s expired (410); listing again", self.kind, self.version)
                self.version = None
            except errors.KubeError as exc:
                await asyncio.sleep(self.failed(exc))
            except Exception as exc:  # never let one watch kill the edge
                self.version = None
                await asyncio.sleep(self.failed(exc))


def start_watches(
    kube: client_mod.KubeClient,
    kinds: Iterable[str],
    *,
    on_change: Callable[[Watcher], None] | None = None,
    read_timeout: float = 60.0,
) -> list[Watcher]:
    """Start one :class:`Watcher` per kind on the client's edge loop."""
    watchers = [Watcher(kube, kind, on_change=on_change, read_timeout=read_timeout) for kind in sorted(kinds)]

    async def spawn() -> None:
        for watcher in watchers:
            asyncio.get_running_loop().create_task(watcher.run(), name=f"watch-{watcher.kind}")

    kube.edge.call(spawn(), 5.0)
    return watchers
