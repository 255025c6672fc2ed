"""The options several ``karpy`` commands take, declared once so they read the same everywhere.

Each constant is a typer option default (``def cmd(catalog: str = CATALOG)``); :func:`pass_time`
turns ``--now`` into the pass's time. Light on purpose: imported at start (typer and the
standard library only).
"""

from __future__ import annotations

from datetime import UTC, datetime

import typer

__all__ = [
    "CATALOG",
    "CONTEXT",
    "KUBECONFIG",
    "LIVE_FILES",
    "NOW",
    "SPOT_TO_SPOT",
    "pass_time",
]

CATALOG = typer.Option(
    "aws:us-east-1", "--catalog", metavar="CATALOG", help="aws:<region> or a catalog file."
)
NOW = typer.Option(None, "--now", metavar="TIME", help="RFC 3339 time of the pass (default: now).")
SPOT_TO_SPOT = typer.Option(False, "--spot-to-spot", help="Enable SpotToSpotConsolidation.")
# -f for the commands that read files or a live cluster (explain): optional, as --kubeconfig is the other way
LIVE_FILES = typer.Option(
    None, "-f", "--filename", metavar="PATH", help="YAML files or folders to read (repeatable)."
)
KUBECONFIG = typer.Option(None, "--kubeconfig", metavar="FILE", help="Read a live cluster instead.")
CONTEXT = typer.Option(None, "--context", metavar="NAME", help="The kubeconfig context.")


def pass_time(now: str | None) -> float:
    """``--now`` as epoch seconds (the current time when not given); exit 2 in one line when it is
    not an RFC 3339 time."""
    from karpy.api import common as api_common

    try:
        return api_common.parse_time(now) if now else datetime.now(UTC).timestamp()
    except ValueError as exc:
        typer.echo(f"error: --now: {exc}", err=True)
        raise typer.Exit(2) from None
