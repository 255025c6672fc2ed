"""The ``karpy`` command line: simulate, plan, disrupt, explain, conformance, catalog, operator and snapshot.

The only place that prints. Bad input exits 2 with one line per problem (file, object,
field); everything valid is still used.
"""

from __future__ import annotations

import typer

from karpy.cli import (
    catalog_cmd,
    conformance_cmd,
    convert_cmd,
    disrupt_cmd,
    explain_node,
    explain_pod,
    operator_cmd,
    plan_cmd,
    simulate_cmd,
    snapshot_cmd,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="karpy",
    help="A Karpenter-compatible node autoscaler and what-if simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("simulate")(simulate_cmd.simulate)
app.command("plan")(plan_cmd.plan)
app.command("disrupt")(disrupt_cmd.disrupt)
app.command("conformance")(conformance_cmd.conformance)
app.command("operator")(operator_cmd.operator)
app.command("snapshot")(snapshot_cmd.snapshot)
app.command("convert")(convert_cmd.convert)
app.add_typer(catalog_cmd.app, name="catalog", help="Instance-type catalogs.")
explain = typer.Typer(help="Why a pod is (not) placed, why a node is (not) disrupted.", no_args_is_help=True)
explain.command("pod")(explain_pod.pod)
explain.command("node")(explain_node.node)
app.add_typer(explain, name="explain")


def main() -> None:
    app()
