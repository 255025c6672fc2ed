"""List+watch per kind → :class:`~karpy.ports.WatchEvent` on the client's queue (thin informers).

A :class:`Watcher` lists a kind, turns the difference from what it delivered before into
ADDED / MODIFIED / DELETED events (so an object deleted while the watch was down still arrives as
DELETED: a tombstone, stamped with the list's resourceVersion; an object is "changed" when its
resourceVersion or its uid is), then watches from the list's resourceVersion with bookmarks. As
upstream's reflector, a stream that ends or goes quiet, and a plain connection failure (no HTTP
answer: refused, reset, timed out) or a 429, are resumed from the last resourceVersion seen; every
other failure (``410 Gone`` at once, any other HTTP status or ``ERROR`` event, e.g. a 504 "too
large resource version", or an answer karpy cannot use) lists again. A list whose resourceVersion
is lower than one already seen (or a watch event older than the version it resumed from) means the
API server's state was reset (etcd restored): warned about, the client forgets the versions it saw
of the kind (the new objects' versions start over) and the kind is listed again, whose diff turns
the objects gone into DELETED events. Failures back off exponentially; the backoff starts over
when a watch request opens (a successful reconnect, whether events follow or not), unless that
watch fails within ``SHORT_WATCH_SECONDS``. Runs on the edge thread; started by
:func:`start_watches` (the operator).

A failure is logged as ONE warning line naming the kind, the request (method and path), the HTTP
status when there was an answer, the cause and the retry delay; the same failure again (any plain
connection failure counts as the same) is logged at debug level (with the traceback of an
unexpected exception) until ``REPEAT_WARNING_SECONDS`` have passed, and a recovery at info
level. A list answering 404 (a CRD that is not installed) is
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

import aiohttp

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
_UNREACHABLE = "the API server is unreachable"  # the repeat key of every plain connection failure
SHORT_WATCH_SECONDS = 1.0  # a watch that fails sooner after it opened does not restart the backoff


def _version_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _stamp(obj: dict[str, Any]) -> tuple[str, str]:
    """What tells two versions of an object apart: (resourceVersion, uid)."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("resourceVersion") or ""), str(meta.get("uid") or ""))


def resumable(exc: BaseException) -> bool:
    """A watch failure after which the watch resumes from its resourceVersion (else: list again):
    a plain connection failure (the request got no HTTP answer: refused, reset, timed out) or a
    429, as upstream's reflector (which relists on everything else)."""
    if isinstance(exc, errors.TooManyRequests):
        return True
    if not isinstance(exc, kerrors.Unavailable):
        return False
    cause = exc.__cause__ or exc.__context__  # the client maps transport errors ``from None``
    return isinstance(cause, aiohttp.ClientConnectionError | OSError | TimeoutError)


class StateReset(Exception):
    """The API server's state went back (its resourceVersions are lower than ones seen)."""


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
        self.highest = 0  # the highest resourceVersion seen (list or event); 0 = none
        self.resets = 0  # API server state resets detected
        self._opened: float | None = None  # when the current watch request opened
        self._failures_at_open = 0  # the backoff's failures when it did
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
        # every plain connection failure is the same cause here (refused, reset, disconnected
        # alternate during one outage): one warning line per outage, not one per wording
        same = _UNREACHABLE if resumable(exc) and not isinstance(exc, errors.TooManyRequests) else cause
        last = self._warned
        if last is not None and last[0] == same and now - last[1] < REPEAT_WARNING_SECONDS:
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
            self._warned = (same, now)
        if not isinstance(exc, errors.KubeError):
            log.debug("watch %s: the traceback of %s", self.kind, type(exc).__name__, exc_info=exc)
        self._set(healthy=False, absent=False)
        return delay

    def _watch_opened(self) -> None:
        """A watch request opened: a successful reconnect, so the backoff starts over and the kind
        is healthy again. The failure streak (and the backoff's count, kept aside) ends only once
        the watch proved itself (:meth:`_watch_worked`): one that fails within
        ``SHORT_WATCH_SECONDS`` (:meth:`_short_watch`) continues it, logged as a repeat."""
        self._opened = self.clock()
        self._failures_at_open = self.backoff.failures
        self.backoff.reset()
        self._set(healthy=True, absent=False)

    def _watch_worked(self) -> None:
        """The open watch delivered something, ended normally or lasted: the streak is over."""
        if self.failures:
            self._worked()

    def _seen_version(self, version: str) -> None:
        if version.isdigit():
            self.highest = max(self.highest, int(version))

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
        version = str((data.get("metadata") or {}).get("resourceVersion") or "")
        if version.isdigit() and int(version) < self.highest:
            self._reset(f"the list's resourceVersion {version} is lower than {self.highest}, seen before")
            self.highest = 0
        fresh: dict[Key, dict[str, Any]] = {}
        for item in items:
            fresh[_key(item)] = item
        for key in sorted(self.known.keys() - fresh.keys()):
            gone = self.known[key]
            if version.isdigit():  # the tombstone: gone as of the list (not as of its last version)
                gone = {**gone, "metadata": {**(gone.get("metadata") or {}), "resourceVersion": version}}
            self._emit("DELETED", gone)
        for key in sorted(fresh):
            old = self.known.get(key)
            new_stamp = _stamp(fresh[key])
            if old is None:
                self._emit("ADDED", fresh[key])
            elif _stamp(old) != new_stamp or not new_stamp[0]:
                self._emit("MODIFIED", fresh[key])
        self.known = fresh
        self.version = version if version.isdigit() else ""
        self._seen_version(version)
        self._set(synced=True)
        self._worked()

    def _reset(self, why: str) -> None:
        """The API server's state was reset: warn, and make the client forget this kind's versions."""
        self.resets += 1
        log.warning(
            "watch %s (%s): the API server's state was reset (%s); listing again, objects gone arrive "
            "as DELETED",
            self.kind,
            self.path,
            why,
        )
        self.kube.forget_versions(self.kind)

    async def watch_once(self) -> None:
        """One watch request from ``self.version``; returns when the stream ends."""
        query: dict[str, Any] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.timeout_seconds),
        }
        start = self.version
        if start:
            query["resourceVersion"] = start
        self.watches += 1
        self._opened = None
        async for line in self.kube.stream(
            self.path, query=query, read_timeout=self.read_timeout, on_open=self._watch_opened
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
            version = _version_of(obj)
            if type_ == "BOOKMARK":
                if version.isdigit() and (not self.version or int(version) > int(self.version)):
                    self.version = version
                    self._seen_version(version)
                self._watch_worked()
                continue
            if type_ not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            if start and start.isdigit() and version.isdigit() and int(version) < int(start):
                raise StateReset(f"a {type_} event's resourceVersion {version} is lower than {start}")
            key = _key(obj)
            if type_ == "DELETED":
                self.known.pop(key, None)
            else:
                self.known[key] = obj
            if version.isdigit() and (not self.version or int(version) > int(self.version)):
                self.version = version
            self._seen_version(version)
            self._emit(str(type_), obj)
            self.backoff.reset()
            self._watch_worked()

    def _short_watch(self) -> None:
        """After a failure: a watch that failed within ``SHORT_WATCH_SECONDS`` of opening (e.g. an
        ``ERROR`` event at once) was no reconnect: its backoff and failure streak continue (no
        relist storm, no recovery line); one that failed later had worked."""
        opened = self._opened
        if opened is None:
            return
        if self.clock() - opened < SHORT_WATCH_SECONDS:
            self.backoff.failures = max(self.backoff.failures, self._failures_at_open)
        else:
            self._watch_worked()

    async def run(self) -> None:
        while True:
            self._opened = None
            try:
                if self.version is None:
                    await self.relist()
                await self.watch_once()
                if self._opened is not None:
                    self._watch_worked()  # it opened and ended normally
                if not self.version:
                    self.version = None  # a server without resourceVersions: list again
            except asyncio.CancelledError:
                raise
            except kerrors.Gone:
                log.info("watch %s: resourceVersion %s expired (410); listing again", self.kind, self.version)
                self.version = None
            except StateReset as exc:
                self._reset(str(exc))
                self.highest = 0  # (the list that follows is not a second reset)
                self.version = None
            except Exception as exc:  # never let one watch kill the edge
                self._short_watch()
                if self.version is not None and not resumable(exc):
                    self.version = None  # anything but a plain connection failure: list again
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
