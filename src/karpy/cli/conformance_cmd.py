"""``karpy conformance DIR... [--disputed FILE]``: run scheduling scenarios, print PASS/FAIL lines."""

from __future__ import annotations

from pathlib import Path

import typer

from karpy import conformance as runner
from karpy.model.errors import InputError

__all__ = ["DEFAULT_DISPUTED", "conformance"]

DEFAULT_DISPUTED = Path("tests/conformance/disputed.yaml")


def conformance(
    paths: list[Path] = typer.Argument(..., help="Scenario files or folders (FORMAT.md v1)."),
    disputed: Path = typer.Option(
        DEFAULT_DISPUTED, "--disputed", help="Disputed scenarios (reported, never passed)."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print the file of each scenario."),
) -> None:
    """Run conformance scenarios through karpy's scheduling engine."""
    summary = runner.Summary()
    try:
        for outcome in runner.iter_run(paths, disputed):
            summary.outcomes.append(outcome)
            typer.echo(outcome.line() + (f"  ({outcome.path})" if verbose else ""))
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(summary.line())
    if summary.count(runner.FAIL):
        raise typer.Exit(1)
