"""``karpy record --kubeconfig PATH --duration 24h -o TRACE.yaml [--anonymize]``: record a cluster.

Reads the cluster's state as ``karpy snapshot`` does into ``<TRACE>-snapshot/`` beside the trace,
watches Pods, Nodes, NodeClaims, NodePools, NodeClasses, Deployments, ReplicaSets, StatefulSets and
Jobs for ``--duration`` (:mod:`karpy.record.live`, on the real clock), and writes the trace
(:mod:`karpy.record.writer`), which names the snapshot as its ``initialState``. SIGINT or SIGTERM
stops the recording early: what was recorded is written (``recorded.interrupted: true``) and one
``interrupted:`` line on stderr says so; the exit code is 0. ``--anonymize`` hashes pod, owner and
namespace names in the trace and the snapshot (:mod:`karpy.record.anonymize`, under a random key
per recording). ``-o`` and the snapshot folder are checked before the cluster is read; an
unreachable API server or a kubeconfig that cannot be loaded exits 2 with one ``error:`` line, any
other API failure 1; a kind the API server does not serve is one ``skipped:`` line. See
``docs/backtest.md``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from karpy.cli import conventions, options
from karpy.model.errors import InputError, KarpyError

__all__ = ["record"]


def _fail(line: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {line}", err=True)
    return typer.Exit(code)


def record(
    kubeconfig: Path | None = typer.Option(
        None,
        "--kubeconfig",
        metavar="FILE",
        help="Kubeconfig file (default: in-cluster, then ~/.kube/config).",
    ),
    context: str | None = options.CONTEXT,
    duration: str = typer.Option(..., "--duration", metavar="DURATION", help="How long to record, e.g. 24h."),
    output: Path = typer.Option(..., "-o", "--output", metavar="FILE", help="The trace to write (YAML)."),
    anonymize: bool = typer.Option(False, "--anonymize", help="Hash pod, owner and namespace names."),
    name: str | None = typer.Option(
        None, "--name", metavar="TEXT", help="The trace's name (default: the file's)."
    ),
    catalog: str | None = typer.Option(
        None, "--catalog", metavar="TEXT", help="The trace's catalog (default: aws:<the nodes' region>)."
    ),
    timeout: float = typer.Option(
        30.0, "--timeout", min=0.1, metavar="SECONDS", help="Seconds per API request."
    ),
) -> None:
    """Record a cluster's workload and nodes as a trace for karpy simulate and karpy backtest."""
    from karpy.api import common

    try:
        seconds = common.parse_duration(duration)
    except ValueError as exc:
        raise _fail(f"--duration: {exc}") from None
    if not seconds:
        raise _fail("--duration: must be longer than 0s")
    folder = output.parent / f"{output.stem}-snapshot"  # (karpy.record.live.snapshot_folder)
    conventions.check_file(output, "-o")
    conventions.check_folder(folder, "the snapshot folder")
    stop = threading.Event()
    caught: list[str] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        caught.append(signal.Signals(signum).name)
        stop.set()

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        recording, snap, began = _record(
            kubeconfig, context=context, timeout=timeout, seconds=seconds, stop=stop
        )
    finally:
        for sig, previous in before.items():
            signal.signal(sig, previous)
    _write(recording, snap, output=output, folder=folder, name=name, catalog=catalog, anonymize=anonymize)
    if caught:
        spent = _span(max(0.0, recording.end - began))
        typer.echo(
            f"interrupted: {caught[0]} after {spent}: wrote the partial recording to {output}", err=True
        )


def _span(seconds: float) -> str:
    from karpy.api import encode

    return encode.duration(seconds)


def _record(
    kubeconfig: Path | None, *, context: str | None, timeout: float, seconds: float, stop: threading.Event
) -> tuple[Any, Any, float]:
    """Connect, take the snapshot, watch until the end or ``stop``: (recording, snapshot, its start)."""
    from karpy.adapters.kube import snapshot as snapshot_mod  # the Kubernetes client: only here
    from karpy.record import live

    try:
        client = snapshot_mod._connect(str(kubeconfig) if kubeconfig else None, context, None, timeout)
    except InputError as exc:
        raise _fail(str(exc)) from None
    try:
        server = snapshot_mod._server(client)
        recording = live.LiveRecording(client, clock=time.time, server=server)
        try:
            snap = recording.start()
        except (snapshot_mod.Unreachable, InputError) as exc:
            raise _fail(str(exc)) from None
        except KarpyError as exc:
            raise _fail(str(exc), 1) from None
        for kind, why in snap.skipped.items():
            typer.echo(f"skipped: {kind}: not served by the API server ({why})", err=True)
        for kind in recording.skipped:
            if kind not in snap.skipped:
                typer.echo(f"skipped: {kind}: not served by the API server (not watched)", err=True)
        began = recording.recorder.start or time.time()
        typer.echo(
            f"recording {server or 'the cluster'} for {_span(seconds)}: SIGINT or SIGTERM stops it and "
            "writes what was recorded",
            err=True,
        )
        stopped = recording.run(began + seconds, stop)
        return recording.finish(interrupted=stopped), snap, began
    finally:
        client.close()


def _write(
    recording: Any,
    snap: Any,
    *,
    output: Path,
    folder: Path,
    name: str | None,
    catalog: str | None,
    anonymize: bool,
) -> None:
    """The snapshot folder and the trace (anonymized under a random key when asked)."""
    from karpy.record import anonymize as anonymize_mod
    from karpy.record import live

    hasher = anonymize_mod.Hasher(os.urandom(32)) if anonymize else None
    try:
        doc = live.write(recording, snap, trace=output, name=name, catalog=catalog, hasher=hasher)
    except OSError as exc:
        raise _fail(f"cannot write {output}: {exc}") from None
    workloads = len(doc["workloads"])
    nodes = len(doc["recorded"]["nodes"])
    typer.echo(
        f"wrote {output} ({workloads} workloads, {nodes} nodes, {doc['duration']} from {doc['start']}) "
        f"and its snapshot {folder}"
    )
