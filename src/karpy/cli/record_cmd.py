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
other API failure 1; a kind the API server does not serve is one ``skipped:`` line.

``karpy record --from-prometheus URL --start T --end T [--step 60s] [--nodepools FILE] -o TRACE.yaml``
rebuilds the same trace from kube-state-metrics series instead (:mod:`karpy.record.prom_client`
reads them, :mod:`karpy.record.prom_series` turns them into the recording): no snapshot, times
known to the step, one ``warning:`` line per thing the metrics cannot say; ``--nodepools`` gives the
NodePools and NodeClasses the trace cannot get from metrics. A Prometheus that cannot be read (down,
an HTTP error, ``status: error``, no kube-state-metrics series) is one ``error:`` line and exit 2.
See ``docs/backtest.md``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from karpy.cli import conventions, options
from karpy.model.errors import InputError, KarpyError

__all__ = ["record"]


def record(
    kubeconfig: Path | None = typer.Option(
        None,
        "--kubeconfig",
        metavar="FILE",
        help="Kubeconfig file (default: in-cluster, then ~/.kube/config).",
    ),
    context: str | None = options.CONTEXT,
    duration: str | None = typer.Option(
        None, "--duration", metavar="DURATION", help="How long to record a live cluster, e.g. 24h."
    ),
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
    prometheus: str | None = typer.Option(
        None,
        "--from-prometheus",
        metavar="URL",
        help="Rebuild the trace from kube-state-metrics series in this Prometheus instead.",
    ),
    start: str | None = typer.Option(
        None, "--start", metavar="TIME", help="--from-prometheus: from (RFC 3339)."
    ),
    end: str | None = typer.Option(
        None, "--end", metavar="TIME", help="--from-prometheus: until (RFC 3339)."
    ),
    step: str = typer.Option(
        "60s", "--step", metavar="DURATION", help="--from-prometheus: the resolution of the trace's times."
    ),
    nodepools: list[Path] | None = typer.Option(
        None,
        "--nodepools",
        metavar="PATH",
        help="--from-prometheus: the NodePools and NodeClasses (YAML files or folders, repeatable).",
    ),
) -> None:
    """Record a cluster's workload and nodes as a trace for karpy simulate and karpy backtest."""
    from karpy.api import common

    if prometheus is not None:
        if kubeconfig is not None or context is not None or duration is not None:
            raise conventions.fail(
                "give --from-prometheus URL or --kubeconfig/--context/--duration, not both"
            )
        window = _window(start, end, step)
        _from_prometheus(
            prometheus,
            window=window,
            output=output,
            nodepools=nodepools or [],
            name=name,
            catalog=catalog,
            anonymize=anonymize,
            timeout=timeout,
        )
        return
    for flag, value in (("--start", start), ("--end", end), ("--nodepools", nodepools)):
        if value:
            raise conventions.fail(f"{flag}: only with --from-prometheus URL")
    if duration is None:
        raise conventions.fail("--duration: required (or --from-prometheus URL --start TIME --end TIME)")
    try:
        seconds = common.parse_duration(duration)
    except ValueError as exc:
        raise conventions.fail(f"--duration: {exc}") from None
    if not seconds:
        raise conventions.fail("--duration: must be longer than 0s")
    from karpy.record import live

    folder = live.snapshot_folder(output)
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
        client = snapshot_mod.connect(str(kubeconfig) if kubeconfig else None, context, None, timeout)
    except InputError as exc:
        raise conventions.fail(str(exc)) from None
    try:
        server = client.server
        recording = live.LiveRecording(client, clock=time.time, server=server)
        try:
            snap = recording.start()
        except (snapshot_mod.Unreachable, InputError) as exc:
            raise conventions.fail(str(exc)) from None
        except KarpyError as exc:
            raise conventions.fail(str(exc), code=1) from None
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
        raise conventions.fail(f"cannot write {output}: {exc}") from None
    workloads = len(doc["workloads"])
    nodes = len(doc["recorded"]["nodes"])
    typer.echo(
        f"wrote {output} ({workloads} workloads, {nodes} nodes, {doc['duration']} from {doc['start']}) "
        f"and its snapshot {folder}"
    )


# -- --from-prometheus ------------------------------------------------------------------------


def _window(start: str | None, end: str | None, step: str) -> tuple[float, float, float]:
    """(start, end, step) in seconds; exit 2 in one line when one is missing or wrong."""
    from karpy.api import common

    times = []
    for flag, value in (("--start", start), ("--end", end)):
        if value is None:
            raise conventions.fail(f"{flag}: required with --from-prometheus")
        try:
            times.append(common.parse_time(value))
        except ValueError as exc:
            raise conventions.fail(f"{flag}: {exc}") from None
    try:
        seconds = common.parse_duration(step)
    except ValueError as exc:
        raise conventions.fail(f"--step: {exc}") from None
    if not seconds or seconds < 1:
        raise conventions.fail("--step: must be 1s or longer")
    if times[1] <= times[0]:
        raise conventions.fail("--end: must be after --start")
    return times[0], times[1], seconds


_CONFIGURATION = {
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"),
    ("karpenter.kwok.sh/v1alpha1", "KWOKNodeClass"),
}


def _configuration(paths: list[Path]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The NodePools and NodeClasses of ``--nodepools`` (checked as karpy plan checks its files)."""
    from karpy.api import load as api_load
    from karpy.cli import inputs

    documents = [doc for _, docs in api_load.read_paths(paths) for doc in docs]
    loaded = api_load.load_documents(documents)
    inputs.echo(loaded)
    if loaded.problems:
        raise typer.Exit(2)
    raws = [
        raw
        for _, _, raw in documents
        if isinstance(raw, Mapping) and (raw.get("apiVersion"), raw.get("kind")) in _CONFIGURATION
    ]
    pools = [raw for raw in raws if raw["kind"] == "NodePool"]
    if not pools:
        raise conventions.fail(f"--nodepools: no karpenter.sh/v1 NodePool in {', '.join(map(str, paths))}")
    return pools, [raw for raw in raws if raw["kind"] != "NodePool"]


def _from_prometheus(
    url: str,
    *,
    window: tuple[float, float, float],
    output: Path,
    nodepools: list[Path],
    name: str | None,
    catalog: str | None,
    anonymize: bool,
    timeout: float,
) -> None:
    """Read the series, rebuild the recording, write the trace (no snapshot)."""
    from karpy.record import anonymize as anonymize_mod
    from karpy.record import live, prom_client, prom_series

    if not url.startswith(("http://", "https://")):
        raise conventions.fail(f'--from-prometheus: "{url}" is not an http:// or https:// URL')
    start, end, step = window
    conventions.check_file(output, "-o")
    pools, classes = _configuration(nodepools) if nodepools else ([], [])
    client = prom_client.Client(url, timeout=timeout)
    try:
        answers = prom_client.read(client, start=start, end=end, step=step)
    except prom_client.PrometheusError as exc:
        raise conventions.fail(str(exc)) from None
    rebuilt = prom_series.rebuild(
        answers, start=start, end=end, step=step, server=client.url, node_pools=pools, node_classes=classes
    )
    for warning in rebuilt.warnings:
        typer.echo(f"warning: {warning}", err=True)
    hasher = anonymize_mod.Hasher(os.urandom(32)) if anonymize else None
    doc = prom_series.trace(
        rebuilt,
        name=name or output.stem,
        catalog=catalog or live.catalog_of(rebuilt.recording),
        hasher=hasher,
    )
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(prom_series.dump(doc, step=step), encoding="utf-8")
    except OSError as exc:
        raise conventions.fail(f"cannot write {output}: {exc}") from None
    workloads, nodes = len(doc["workloads"]), len(doc["recorded"]["nodes"])
    typer.echo(
        f"wrote {output} ({workloads} workloads, {nodes} nodes, {doc['duration']} from {doc['start']}) "
        f"from {client.url} ({client.sent} queries, step {_span(step)})"
    )
