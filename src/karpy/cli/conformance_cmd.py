"""``karpy conformance DIR... [--disputed FILE]``: run scheduling scenarios, print PASS/FAIL lines.

``-o table`` (default) prints one line per scenario as it runs and the summary line; ``-o
json|yaml`` prints one document at the end (``kind: ConformanceResult``: the summary counts and
every scenario's name, status, reason and file). Exit 1 when a scenario fails, 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from karpy.cli import conventions
from karpy.cli.conventions import Output
from karpy.model.errors import InputError

if TYPE_CHECKING:
    from karpy import conformance as runner

__all__ = ["DEFAULT_DISPUTED", "conformance", "result_document"]

DEFAULT_DISPUTED = Path("tests/conformance/disputed.yaml")


def result_document(summary: runner.Summary) -> dict[str, Any]:
    """The ``-o json|yaml`` document of a run."""
    from karpy import conformance as runner
    from karpy.api.common import KARPY_API_VERSION

    return {
        "apiVersion": KARPY_API_VERSION,
        "kind": "ConformanceResult",
        "summary": {
            "passed": summary.count(runner.PASS),
            "failed": summary.count(runner.FAIL),
            "skipped": summary.count(runner.SKIP),
            "disputed": summary.count(runner.DISPUTED),
        },
        "scenarios": [
            {"name": o.name, "status": o.status, "reason": o.reason or None, "path": o.path}
            for o in summary.outcomes
        ],
    }


def conformance(
    paths: list[Path] = typer.Argument(
        ..., metavar="PATH...", help="Scenario files or folders (FORMAT.md v1)."
    ),
    disputed: Path = typer.Option(
        DEFAULT_DISPUTED, "--disputed", metavar="FILE", help="Disputed scenarios (reported, never passed)."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print the file of each scenario."),
    output: Output = typer.Option(
        Output.table, "--output", "-o", help="A line per scenario, or the ConformanceResult document."
    ),
) -> None:
    """Run conformance scenarios through karpy's scheduling engine."""
    from karpy import conformance as runner

    summary = runner.Summary()
    lines = output is Output.table
    try:
        for outcome in runner.iter_run(paths, disputed):
            summary.outcomes.append(outcome)
            if lines:
                typer.echo(outcome.line() + (f"  ({outcome.path})" if verbose else ""))
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if lines:
        typer.echo(summary.line())
    elif output is Output.json:
        conventions.print_json(result_document(summary))
    else:
        import yaml

        typer.echo(yaml.safe_dump(result_document(summary), sort_keys=False), nl=False)
    if summary.count(runner.FAIL):
        raise typer.Exit(1)
