"""``karpy record``'s watching: a live cluster's objects into a :class:`~karpy.record.recorder.Recorder`.

A :class:`LiveRecording` over a started :class:`~karpy.adapters.kube.client.KubeClient`:

1. :meth:`LiveRecording.start` reads the initial snapshot as ``karpy snapshot`` does
   (:func:`karpy.adapters.kube.snapshot.read`), starts one list+watch per kind of
   :data:`karpy.record.recorder.KINDS` (:mod:`karpy.adapters.kube.watch`), waits until each one
   has listed or found its kind not served (a cluster without Karpenter's CRDs: named in
   ``skipped``), hands what was listed to the recorder and opens its window;
2. :meth:`LiveRecording.pump` hands the watch events that arrived to the recorder (waiting up
   to a given time for one), :meth:`LiveRecording.run` does so until the clock reaches a time or
   a stop event is set (the command's SIGINT/SIGTERM handler);
3. :meth:`LiveRecording.finish` gives the recording, and :func:`write` writes it: the snapshot
   folder (``karpy snapshot``'s files) and the trace that names it, both hashed under a
   :class:`~karpy.record.anonymize.Hasher` when given one.

The recorder is stamped by the injected ``clock`` (``time.time`` in the command); tests drive it
on virtual time. Errors: a kind that neither lists nor answers 404 within ``sync_timeout`` raises
:class:`~karpy.model.errors.KubeError`; snapshot errors are those of
:func:`karpy.adapters.kube.snapshot.read`. Used by :mod:`karpy.cli.record_cmd`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from karpy.adapters.kube import snapshot as snapshot_mod
from karpy.adapters.kube import watch as watch_mod
from karpy.adapters.kube.client import KubeClient
from karpy.model import errors
from karpy.record import anonymize, model
from karpy.record.recorder import KINDS, Recorder

__all__ = ["LiveRecording", "catalog_of", "snapshot_folder", "write"]


def snapshot_folder(trace: Path) -> Path:
    """Where the snapshot of a trace goes: ``<trace stem>-snapshot/`` beside it."""
    return trace.parent / f"{trace.stem}-snapshot"


def catalog_of(recording: model.Recording) -> str:
    """``aws:<the region most nodes report>`` (us-east-1 when none does)."""
    counted = Counter(n.region for n in recording.nodes if n.region).most_common()
    return f"aws:{min(counted, key=lambda rc: (-rc[1], rc[0]))[0]}" if counted else "aws:us-east-1"


def write(
    recording: model.Recording,
    snap: snapshot_mod.Snapshot,
    *,
    trace: Path,
    name: str | None = None,
    catalog: str | None = None,
    hasher: anonymize.Hasher | None = None,
) -> dict[str, Any]:
    """Write the snapshot folder (:func:`snapshot_folder`) and the trace naming it; the trace
    document. Raises OSError when a file cannot be written."""
    from karpy.record import writer  # (the simulator's figures: loaded when a trace is written)

    folder = snapshot_folder(trace)
    if hasher is not None:
        recording = anonymize.recording(recording, hasher)
        objects = {kind: anonymize.objects(items, hasher) for kind, items in snap.objects.items()}
        snap = snapshot_mod.Snapshot(server="", version=snap.version, objects=objects, skipped=snap.skipped)
    relative = os.path.relpath(folder, trace.parent)
    doc = writer.trace(
        recording, name=name or trace.stem, catalog=catalog or catalog_of(recording), snapshot=relative
    )
    snapshot_mod.write(snap, folder)
    trace.parent.mkdir(parents=True, exist_ok=True)
    trace.write_text(writer.dump(doc), encoding="utf-8")
    return doc


class LiveRecording:
    """Snapshot, watches and recorder of one ``karpy record`` run (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        clock: Callable[[], float],
        kinds: Sequence[str] = KINDS,
        snapshot_kinds: Sequence[str] = snapshot_mod.KINDS,
        server: str = "",
    ) -> None:
        self.client = client
        self.clock = clock
        self.kinds = tuple(kinds)
        self.snapshot_kinds = tuple(snapshot_kinds)
        self.server = server
        self.recorder = Recorder(clock)
        self.skipped: list[str] = []  # kinds not served (no watch)
        self._watchers: list[watch_mod.Watcher] = []
        self._arrived = threading.Event()
        client.on_event = self._arrived.set
        client.watch(self.recorder.observe)

    def start(self, *, sync_timeout: float = 30.0) -> snapshot_mod.Snapshot:
        """Read the snapshot, start the watches and open the recorder's window (see the module docstring)."""
        snap = snapshot_mod.read(self.client, self.snapshot_kinds, server=self.server)
        self._watchers = watch_mod.start_watches(self.client, self.kinds, read_timeout=60.0)
        deadline = time.monotonic() + sync_timeout
        while not all(w.synced or w.absent for w in self._watchers):
            if time.monotonic() > deadline:
                late = ", ".join(w.kind for w in self._watchers if not (w.synced or w.absent))
                raise errors.KubeError(f"the watches of {late} did not list within {sync_timeout:.0f} s")
            self._arrived.wait(0.05)
            self._arrived.clear()
            self.client.dispatch()
        self.client.dispatch()
        self.skipped = sorted(w.kind for w in self._watchers if w.absent and not w.synced)
        self.recorder.begin()
        return snap

    def pump(self, wait: float = 0.0) -> int:
        """Hand the events that arrived to the recorder, waiting up to ``wait`` seconds for one."""
        if wait > 0:
            self._arrived.wait(wait)
        self._arrived.clear()
        return self.client.dispatch()

    def run(self, until: float, stop: threading.Event, *, poll: float = 0.25) -> bool:
        """Record until the clock reaches ``until`` or ``stop`` is set; True when stopped early."""
        while not stop.is_set():
            left = until - self.clock()
            if left <= 0:
                break
            self.pump(min(poll, left))
        self.pump()
        return stop.is_set()

    def finish(self, *, interrupted: bool = False) -> model.Recording:
        """The recording, once the watches are stopped (the client stays open)."""
        self.stop_watches()
        self.pump()
        return self.recorder.finish(interrupted=interrupted, server=self.server)

    def stop_watches(self) -> None:
        """Cancel the watches (before the client closes, so none of them reports a failure)."""
        if not self._watchers:
            return
        self._watchers = []

        async def cancel() -> None:
            tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("watch-")]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.client.edge.call(cancel(), 5.0)
