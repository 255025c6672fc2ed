"""List+watch per kind → :class:`~karpy.ports.WatchEvent` on the client's queue (thin informers).

A :class:`Watcher` lists a kind, turns the difference from what it delivered before into
ADDED / MODIFIED / DELETED events (so an object deleted while the watch was down still
arrives as DELETED), then watches from the list's resourceVersion with bookmarks. A stream that
ends or goes quiet is resumed from the last resourceVersion seen; ``410 Gone`` (as an HTTP status
or an ``ERROR`` event) means that version is too old: list again. Other failures back off
exponentially. Runs on the edge thread; started by :func:`start_watches` (the operator).
"""

from __future__ import annotations

import asyncio
import logging
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


class Watcher:
    """One kind's list+watch loop (run :meth:`run` as a task on the edge loop)."""

    def __init__(
        self,
        kube: client_mod.KubeClient,
        kind: str,
        *,
        on_synced: Callable[[str], None] | None = None,
        read_timeout: float = 60.0,
        timeout_seconds: int = 300,
        backoff: Backoff | None = None,
    ) -> None:
        self.kube = kube
        self.kind = kind
        self.resource = client_mod.resource(kind)
        self.on_synced = on_synced
        self.read_timeout = read_timeout
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff or Backoff()
        self.version: str | None = None  # resume point; None = list first
        self.known: dict[Key, dict[str, Any]] = {}
        self.lists = 0
        self.watches = 0
        self.synced = False

    def _emit(self, type_: str, obj: dict[str, Any]) -> None:
        obj.setdefault("kind", self.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        self.kube.enqueue(WatchEvent(type_, self.kind, obj))

    async def relist(self) -> None:
        """List everything; emit the difference from what was delivered (incl. DELETED)."""
        data = await self.kube.request("GET", self.resource.path(None))
        self.lists += 1
        fresh: dict[Key, dict[str, Any]] = {}
        for item in data.get("items") or []:
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
        if not self.synced:
            self.synced = True
            if self.on_synced is not None:
                self.on_synced(self.kind)

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
            self.resource.path(None), query=query, read_timeout=self.read_timeout
        ):
            type_ = line.get("type")
            obj = line.get("object") or {}
            if type_ == "ERROR":
                code = int(obj.get("code") or 500)
                raise kerrors.from_status(code, obj, what=f"watch {self.kind}")
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
                delay = self.backoff.next()
                log.warning("watch %s failed (%s); retrying in %.1f s", self.kind, exc, delay)
                await asyncio.sleep(delay)
            except Exception as exc:  # never let one watch kill the edge
                delay = self.backoff.next()
                log.exception("watch %s crashed (%s); retrying in %.1f s", self.kind, exc, delay)
                self.version = None
                await asyncio.sleep(delay)


def start_watches(
    kube: client_mod.KubeClient,
    kinds: Iterable[str],
    *,
    on_synced: Callable[[str], None] | None = None,
    read_timeout: float = 60.0,
) -> list[Watcher]:
    """Start one :class:`Watcher` per kind on the client's edge loop."""
    watchers = [Watcher(kube, kind, on_synced=on_synced, read_timeout=read_timeout) for kind in sorted(kinds)]

    async def spawn() -> None:
        for watcher in watchers:
            asyncio.get_running_loop().create_task(watcher.run(), name=f"watch-{watcher.kind}")

    kube.edge.call(spawn(), 5.0)
    return watchers
