"""``karpy snapshot --kubeconfig PATH -o DIR``: dump what karpy reads from a cluster as YAML files.

Mounted by :mod:`karpy.cli` as ``app.command("snapshot")(snapshot_cmd.snapshot)``; the reading
and writing are :mod:`karpy.adapters.kube.snapshot`'s (see ``docs/snapshot.md``). The folder
written is input for ``karpy plan -f DIR`` and ``karpy disrupt -f DIR``. A kind the API server
does not serve is skipped with one ``skipped:`` line on stderr; an unreachable API server or a
kubeconfig that cannot be loaded exits 2 with one ``error:`` line; any other API failure exits 1.
"""

from __future__ import annotations

from pathlib import Path

import typer

from karpy.adapters.kube import snapshot as snapshot_mod
from karpy.model.errors import InputError, KarpyError

__all__ = ["snapshot"]


def snapshot(
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="Kubeconfig file (default: in-cluster, then ~/.kube/config)."
    ),
    context: str | None = typer.Option(
        None, "--context", help="The kubeconfig context to use (default: its current-context)."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Folder to write the YAML files into."),
    timeout: float = typer.Option(30.0, "--timeout", min=0.1, help="Seconds per API request."),
) -> None:
    """Write what karpy reads from a cluster (NodePools, Nodes, Pods, ...) into DIR, a YAML file per kind."""
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
    try:
        written = snapshot_mod.write(snap, output)
    except OSError as exc:
        typer.echo(f"error: cannot write {output}: {exc}", err=True)
        raise typer.Exit(2) from None
    count = sum(len(items) for items in snap.objects.values())
    version = f" ({snap.version})" if snap.version else ""
    typer.echo(f"wrote {count} objects in {len(written)} files to {output} from {snap.server}{version}")
