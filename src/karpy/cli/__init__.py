"""The ``karpy`` command line: simulate, plan, disrupt, explain, conformance, catalog, operator,
snapshot, record, backtest, convert, version and daemon.

The only place that prints. Bad input exits 2 with one line per problem (file, object,
field); everything valid is still used. Starting is fast: each command's module imports only
typer at load and imports what it runs on (the simulator, the planner, pydantic schemas,
matplotlib, scipy, the operator and its Kubernetes and AWS clients) in the command's body, so
``karpy --help`` lists every command without loading any of them (``docs/performance.md``).
Conventions shared by every command (``-o``, ``-f``, help text, output paths) are in
:mod:`karpy.cli.conventions`.
"""

from __future__ import annotations

import typer

from karpy.cli import (
    backtest_cmd,
    catalog_cmd,
    conformance_cmd,
    conventions,
    convert_cmd,
    daemon_cmd,
    disrupt_cmd,
    explain_node,
    explain_pod,
    operator_cmd,
    plan_cmd,
    record_cmd,
    simulate_cmd,
    snapshot_cmd,
    sweep_cmd,
    version_cmd,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="karpy",
    help="A Karpenter-compatible node autoscaler and what-if simulator.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    cls=conventions.Group,
)


def _print_version(value: bool) -> None:
    if value:
        for line in conventions.version_lines():
            typer.echo(line)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print karpy's version and exit."
    ),
) -> None:
    """A Karpenter-compatible node autoscaler and what-if simulator."""


_COMMAND = conventions.Command
_BATCH = conventions.BatchCommand  # runs once and exits (see conventions)
app.command("simulate", cls=_BATCH)(simulate_cmd.simulate)
app.command("sweep", cls=_BATCH)(sweep_cmd.sweep)
app.command("plan", cls=_BATCH)(plan_cmd.plan)
app.command("disrupt", cls=_BATCH)(disrupt_cmd.disrupt)
app.command("conformance", cls=_BATCH)(conformance_cmd.conformance)
app.command("operator", cls=_COMMAND)(operator_cmd.operator)
app.command("snapshot", cls=_COMMAND)(snapshot_cmd.snapshot)
app.command("record", cls=_COMMAND)(record_cmd.record)
app.command("backtest", cls=_BATCH)(backtest_cmd.backtest)
app.command("convert", cls=_BATCH)(convert_cmd.convert)
app.command("version", cls=_COMMAND)(version_cmd.version)
app.add_typer(catalog_cmd.app, name="catalog", help="Instance-type catalogs.")
app.add_typer(
    daemon_cmd.app, name="daemon", help="A warm process that runs karpy commands without start-up time."
)
explain = typer.Typer(
    help="Why a pod is (not) placed, why a node is (not) disrupted.",
    no_args_is_help=True,
    cls=conventions.Group,
)
explain.command("pod", cls=_BATCH)(explain_pod.pod)
explain.command("node", cls=_BATCH)(explain_node.node)
app.add_typer(explain, name="explain")


def main() -> None:
    app()
