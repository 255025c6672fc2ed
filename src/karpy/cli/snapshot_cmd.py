"""``karpy snapshot --kubeconfig PATH -o DIR``: dump what karpy reads from a cluster as YAML files.

Mounted by :mod:`karpy.cli` as ``app.command("snapshot")(snapshot_cmd.snapshot)``; the reading
and writing are :mod:`karpy.adapters.kube.snapshot`'s (see ``docs/snapshot.md``). The folder
written is input for ``karpy plan -f DIR`` and ``karpy disrupt -f DIR``. A kind the API server
does not serve is skipped with one ``skipped:`` line on stderr; an unreachable API server or a
kubeconfig that cannot be loaded exits 2 with one ``error:`` line; any other API failure exits 1.
An ``-o`` that cannot be written (a file there, no permission) exits 2 before the cluster is read.
"""

from __future__ import annotations

from pathlib import Path

import typer

from karpy.cli import conventions, inputs

__all__ = ["snapshot"]


def snapshot(
    kubeconfig: Path | None = typer.Option(
        None,
        "--kubeconfig",
        metavar="FILE",
        help="Kubeconfig file (default: in-cluster, then ~/.kube/config).",
    ),
    context: str | None = typer.Option(
        None,
        "--context",
        metavar="NAME",
        help="The kubeconfig context to use (default: its current-context).",
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", metavar="DIR", help="Folder to write the YAML files into."
    ),
    timeout: float = typer.Option(
        30.0, "--timeout", min=0.1, metavar="SECONDS", help="Seconds per API request."
    ),
) -> None:
    """Write what karpy reads from a cluster (NodePools, Nodes, Pods, ...) into DIR, a YAML file per kind."""
    from karpy.adapters.kube import snapshot as snapshot_mod  # the Kubernetes client: only here

    conventions.check_folder(output, "-o")
    snap = inputs.live(kubeconfig, context, timeout)
    try:
        written = snapshot_mod.write(snap, output)
    except OSError as exc:
        typer.echo(f"error: cannot write {output}: {exc}", err=True)
        raise typer.Exit(2) from None
    count = sum(len(items) for items in snap.objects.values())
    version = f" ({snap.version})" if snap.version else ""
    typer.echo(f"wrote {count} objects in {len(written)} files to {output} from {snap.server}{version}")
