"""Where a read-only command's objects come from: ``-f`` files and folders, or a live cluster.

``karpy explain`` takes either; a live cluster is read as ``karpy snapshot`` reads it
(:mod:`karpy.adapters.kube.snapshot`: never Secrets; a kind not served is skipped with one line)
and loaded exactly as the same objects written to files would be. Problems end in one
``error:`` line and exit 2: an unreachable API server, a kubeconfig that cannot be loaded,
neither or both of ``-f`` and ``--kubeconfig``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from karpy.model.errors import InputError, KarpyError

if TYPE_CHECKING:
    from karpy.adapters.kube.snapshot import Snapshot
    from karpy.api import load as api_load

__all__ = ["EVENTS_SHOWN", "echo", "echo_skipped_pools", "events", "live", "read", "read_files"]

EVENTS_SHOWN = 10  # the newest Events shown about an object


def read(
    files: list[Path] | None,
    kubeconfig: Path | None,
    context: str | None,
    timeout: float = 30.0,
    *,
    strict: bool = False,
) -> tuple[api_load.Loaded, str]:
    """(the objects, where they were read: the paths or the API server), warnings on stderr.
    Files are checked as kubectl would (names, unknown fields: ``strict`` makes those errors);
    a live cluster's objects are not (its API server checked them)."""
    if bool(files) == (kubeconfig is not None):
        typer.echo("error: give -f FILE|DIR or --kubeconfig PATH (one of them)", err=True)
        raise typer.Exit(2)
    if files:
        loaded = read_files(files, strict=strict)
        where = ", ".join(str(f) for f in files)
    else:
        from karpy.api import load as api_load

        snap = live(kubeconfig, context, timeout)
        where = snap.server or str(kubeconfig)
        loaded = api_load.Loaded()
        for items in snap.objects.values():
            loaded.extend(api_load.load_objects(items, file=where))
    echo(loaded)
    return loaded, where


def read_files(files: list[Path], *, strict: bool = False) -> api_load.Loaded:
    """``load_paths`` of ``files``, a long stream's parse forked before the schemas are imported
    (:class:`karpy.api.documents.Reading`): the child parses while this process imports them."""
    from karpy.api import documents

    with documents.Reading(files) as reading:
        from karpy.api import load as api_load

        return api_load.load_paths(reading, strict=strict)


def echo(loaded: api_load.Loaded) -> None:
    """What loading said, on stderr: ``error:`` per problem, ``warning:`` per skipped object and
    per warning (a legacy field without a v1 equivalent, ...)."""
    for problem in loaded.problems:
        typer.echo(f"error: {problem}", err=True)
    for skipped in loaded.skipped:
        typer.echo(f"warning: {skipped}", err=True)
    for warning in loaded.warnings:
        typer.echo(f"warning: {warning}", err=True)


def echo_skipped_pools(skipped: Iterable[tuple[str, str]]) -> None:
    """One ``warning:`` line per NodePool a plan leaves out (its NodeClass is not in the input)."""
    for name, why in skipped:
        typer.echo(f'warning: NodePool "{name}" launches nothing: {why} (see --assume-nodeclasses)', err=True)


def live(kubeconfig: Path | None, context: str | None, timeout: float) -> Snapshot:
    """What ``karpy snapshot`` reads from the cluster; exit 2 (one line) when the server is
    unreachable or the kubeconfig cannot be loaded, 1 on another API failure; each kind not
    served is one ``skipped:`` line."""
    from karpy.adapters.kube import snapshot as snapshot_mod  # the Kubernetes client: only here

    try:
        snap = snapshot_mod.take(
            kubeconfig=str(kubeconfig) if kubeconfig is not None else None, context=context, timeout=timeout
        )
    except (snapshot_mod.Unreachable, InputError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except KarpyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for kind, why in snap.skipped.items():
        typer.echo(f"skipped: {kind}: not served by the API server ({why})", err=True)
    return snap


def events(
    kubeconfig: Path | None,
    context: str | None,
    kind: str,
    namespace: str,
    name: str,
    timeout: float = 30.0,
) -> list[dict[str, Any]]:
    """The newest :data:`EVENTS_SHOWN` Events about an object in the live cluster, oldest first,
    as ``{time, type, reason, controller, note}``; [] without ``--kubeconfig``. Events that
    cannot be read are one ``warning:`` line: the answer does not depend on them."""
    if kubeconfig is None:
        return []
    from karpy.adapters.kube import snapshot as snapshot_mod  # the Kubernetes client: only here

    try:
        raws = snapshot_mod.events_about(
            kind, namespace, name, kubeconfig=str(kubeconfig), context=context, timeout=timeout
        )
    except KarpyError as exc:
        typer.echo(f"warning: Events about {kind} {namespace}/{name} not read: {exc}", err=True)
        return []
    return [
        {
            "time": str(e.get("eventTime") or e.get("deprecatedLastTimestamp") or ""),
            "type": str(e.get("type") or ""),
            "reason": str(e.get("reason") or ""),
            "controller": str(e.get("reportingController") or ""),
            "note": str(e.get("note") or ""),
        }
        for e in raws[-EVENTS_SHOWN:]
    ]
