"""``karpy backtest TRACE.yaml [--json OUT] [--report OUT.html] [-o table|json|yaml]``: replay and compare.

Loads a trace ``karpy record`` wrote (a ``kind: Simulation`` with a ``recorded`` block), replays it
through the autoscaler that ran (:func:`karpy.record.backtest.run`) and prints one row per figure:
simulated, recorded, the difference and its percent of recorded (node-hours, cost, peak nodes,
pending p95 when recorded, launches per hour). ``--json`` writes the ``BacktestResult`` document
(identical for the same trace and seed), ``--report`` the HTML page of :mod:`karpy.sim.report`
(both written as ``karpy simulate`` writes its own)
(the simulated and recorded node count and cost on one axis each); ``-o json|yaml`` prints the
document instead of the table. A malformed trace prints one line per problem (file, field) and
exits 2, as does a scenario without ``recorded``; output paths are checked before the run.
See ``docs/backtest.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from karpy.cli import conventions, progress, simulate_cmd
from karpy.cli.conventions import Output
from karpy.model.errors import InputError

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["backtest"]


def _table(doc: dict[str, Any]) -> Table:
    from rich.table import Table

    table = Table(
        title=f"karpy backtest — {doc['scenario']} ({doc['autoscaler']}, seed {doc['seed']})",
        title_justify="left",
    )
    for header in ("", "simulated", "recorded", "difference", "percent"):
        table.add_column(header, justify="left" if not header else "right")
    for row in doc["comparison"]:
        digits = row["digits"]
        cells = ["-" if row[key] is None else f"{row[key]:,.{digits}f}" for key in ("simulated", "recorded")]
        delta = "-" if row["delta"] is None else f"{row['delta']:+,.{digits}f}"
        percent = "-" if row["percent"] is None else f"{row['percent']:+.1f}%"
        table.add_row(row["label"], *cells, delta, percent)
    return table


def backtest(
    trace: Path = typer.Argument(..., metavar="TRACE", help="A trace written by karpy record."),
    seed: int = typer.Option(1, "--seed", metavar="N", help="Seed of the replay's randomness."),
    json_out: Path | None = typer.Option(
        None, "--json", metavar="FILE", help="Write the comparison as JSON."
    ),
    report: Path | None = typer.Option(
        None, "--report", metavar="FILE", help="Write an HTML report with plots."
    ),
    output: Output = typer.Option(
        Output.table, "--output", "-o", help="The table, or the BacktestResult document on stdout."
    ),
    strict: bool = typer.Option(
        False, "--strict", help="An unknown field of an embedded Kubernetes object is an error (exit 2)."
    ),
) -> None:
    """Replay a recorded trace through the autoscaler that ran and compare with the recording."""
    from rich.console import Console

    from karpy.record import backtest as backtest_mod
    from karpy.sim import scenario as scenario_mod

    conventions.check_file(json_out, "--json")
    conventions.check_file(report, "--report")
    try:
        loaded = scenario_mod.load(trace, strict=strict)
    except scenario_mod.ScenarioError as exc:
        raise conventions.fail(*(str(p) for p in exc.problems)) from None
    for warning in loaded.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if loaded.recorded is None:
        raise conventions.fail(
            f"{trace}: recorded: required (a trace written by karpy record; karpy simulate runs others)"
        )
    err = Console(stderr=True)
    with progress.steps(err) as step:
        step(f"replaying {trace.name}")
        try:
            result = backtest_mod.run(loaded, seed=seed)
        except InputError as exc:
            raise conventions.fail(str(exc)) from None
    for line in result.warnings:
        err.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
    doc = backtest_mod.document(result)
    if output is Output.json:
        conventions.print_json(doc)
    elif output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
    else:
        Console(width=160).print(_table(doc))
    simulate_cmd._write(doc, json_out=json_out, report=report, err=err)
