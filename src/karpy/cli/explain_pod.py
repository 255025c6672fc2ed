"""``karpy explain pod NAMESPACE/NAME``: why a pod is (not) placed, from the solve ``karpy plan`` runs.

Objects come from ``-f`` files and folders or a live cluster (``--kubeconfig``,
:mod:`karpy.cli.inputs`), are built into a cluster exactly as ``karpy plan`` builds them, and
:func:`karpy.core.explain.pod.explain_pod` answers. Output: a short table (default; existing
nodes grouped by identical reason, at most :data:`NODE_GROUPS` groups) or ``-o json``, a stable
document (``apiVersion: karpy.dev/v1alpha1, kind: PodExplanation``, keys sorted; NodePools and
nodes in the solve's order, every node listed). Exit 0 when the pod is explained, even if
unschedulable; 2 on bad input, a pod not found or an unreachable server.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from karpy import settings as settings_mod
from karpy.cli import conventions, inputs, options
from karpy.cli.conventions import Output
from karpy.model.errors import InputError

if TYPE_CHECKING:
    from karpy.core.explain.pod import NodeVerdict, PodExplanation

__all__ = ["NODE_GROUPS", "explanation_document", "pod"]

NODE_GROUPS = 10  # the table shows at most this many groups of nodes; JSON lists every node


def explanation_document(
    exp: PodExplanation, catalog: str, events: Sequence[Mapping[str, str]] = ()
) -> dict[str, Any]:
    """The stable JSON shape of an explanation (every key always present; ``events``: the live
    cluster's Events about the pod, [] from files)."""
    from karpy.api.common import KARPY_API_VERSION

    claim = exp.claim
    return {
        "apiVersion": KARPY_API_VERSION,
        "kind": "PodExplanation",
        "pod": exp.pod,
        "catalog": catalog,
        "status": exp.status,
        "summary": exp.summary,
        "node": exp.node or None,
        "reason": exp.reason or None,
        "message": exp.message or None,
        "suggestion": exp.suggestion or None,
        "relaxations": list(exp.relaxations),
        "reasons": dict(exp.reasons),
        "nodeClaim": None
        if claim is None
        else {
            "name": claim.name,
            "nodePool": claim.node_pool,
            "instanceTypeOptions": list(claim.instance_types),
            "families": list(claim.families),
            "instanceType": claim.instance_type,
            "zone": claim.zone,
            "capacityType": claim.capacity_type,
            "pricePerHour": None if claim.price is None else round(claim.price, 6),
        },
        "nodePools": [
            {
                "name": v.name,
                "weight": v.weight,
                "verdict": v.verdict,
                "reason": v.reason or None,
                "message": v.message or None,
                "detail": _plain(v.detail),
                "suggestion": v.suggestion or None,
            }
            for v in exp.node_pools
        ],
        "nodes": [
            {
                "name": n.name,
                "kind": n.kind,
                "verdict": n.verdict,
                "reason": n.reason or None,
                "message": n.message or None,
                "detail": _plain(n.detail),
                "suggestion": n.suggestion or None,
            }
            for n in exp.nodes
        ],
        "events": [dict(e) for e in events],
    }


def _plain(value: object) -> Any:
    """A detail as plain JSON values (mappings to dicts, sequences to lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _groups(nodes: Sequence[NodeVerdict]) -> list[list[NodeVerdict]]:
    """Nodes with the same verdict, reason and message, in the order of their first member."""
    groups: dict[tuple[str, str, str], list[NodeVerdict]] = {}
    for node in nodes:
        groups.setdefault((node.verdict, node.reason, node.message), []).append(node)
    return list(groups.values())


def _names(group: Sequence[NodeVerdict], shown: int = 3) -> str:
    names = [n.name for n in group[:shown]]
    return ", ".join(names) + (f" +{len(group) - shown}" if len(group) > shown else "")


def _print(console: Console, text: str, style: str = "") -> None:
    console.print(Text(text, style=style))


def _render_claim(exp: PodExplanation, console: Console) -> None:
    claim = exp.claim
    if claim is None:
        return
    if claim.instance_type is None:
        _print(console, "  no instance-type option has an available offering (or no catalog order)")
    _print(console, f"  options ({len(claim.instance_types)}, cheapest first): " + "; ".join(claim.families))


def _render_pools(exp: PodExplanation, console: Console) -> None:
    if not exp.node_pools:
        return
    if all(v.verdict == "not-tried" for v in exp.node_pools):
        names = ", ".join(v.name for v in exp.node_pools)
        _print(console, f"NodePools not tried (the pod was placed before their turn): {names}")
        return
    table = Table(title="NodePools (in the solve's order)", title_justify="left")
    for column in ("NodePool", "Weight", "Verdict", "Reason", "Why / what to do"):
        table.add_column(column, justify="right" if column == "Weight" else "left")
    for v in exp.node_pools:
        why = Text(v.message)
        if v.suggestion:
            why.append("\n→ " + v.suggestion, style="cyan")
        table.add_row(Text(v.name), str(v.weight), v.verdict, v.reason or "-", why)
    console.print(table)


def _render_nodes(exp: PodExplanation, console: Console) -> None:
    if not exp.nodes:
        return
    groups = _groups(exp.nodes)
    _print(console, f"Existing nodes ({len(exp.nodes)}):", "bold")
    for group in groups[:NODE_GROUPS]:
        first = group[0]
        count = f"{len(group)} node" + ("s" if len(group) > 1 else "")
        what = first.message if first.verdict == "rejected" else first.verdict
        _print(console, f"  {count}: {what} ({_names(group)})")
        if first.suggestion:
            _print(console, f"    → {first.suggestion}", "cyan")
    if len(groups) > NODE_GROUPS:
        _print(console, f"  ... {len(groups) - NODE_GROUPS} more groups (-o json lists every node)")


def _render_events(events: Sequence[Mapping[str, str]], console: Console) -> None:
    if not events:
        return
    _print(console, f"Events (the newest {len(events)}, oldest first):", "bold")
    for e in events:
        by = f" ({e['controller']})" if e["controller"] else ""
        line = f"  {e['time']}  {e['type']}  {e['reason']}{by}: {e['note']}"
        console.print(Text(line), soft_wrap=True)  # one line per Event, as kubectl shows them


def _render_table(exp: PodExplanation, console: Console) -> None:
    title = Text("karpy explain pod ", style="bold")
    title.append(f"{exp.pod}: {exp.status}", style="bold")
    console.print(title)
    _print(console, f"  {exp.summary}")
    if exp.status in ("unschedulable", "invalid") and exp.suggestion:
        _print(console, f"  → {exp.suggestion}", "cyan")
    _render_claim(exp, console)
    if exp.relaxations:
        _print(console, "  relaxed: " + "; ".join(exp.relaxations))
    _render_pools(exp, console)
    _render_nodes(exp, console)


def pod(
    name: str = typer.Argument(..., metavar="NAMESPACE/NAME", help="The pod (a bare NAME is default/NAME)."),
    files: list[Path] | None = options.LIVE_FILES,
    kubeconfig: Path | None = options.KUBECONFIG,
    context: str | None = options.CONTEXT,
    catalog: str = options.CATALOG,
    output: Output = typer.Option(
        Output.table, "--output", "-o", help="A table, or the PodExplanation document."
    ),
    strict: bool = typer.Option(
        False, "--strict", help="An unknown field in FILES is an error (exit 2; that object is not used)."
    ),
    assume_node_classes: bool = typer.Option(
        False,
        "--assume-nodeclasses",
        help="Use a NodePool whose NodeClass is not in the input as if it were (default: none of it).",
    ),
) -> None:
    """Explain why a pod is (not) placed, using exactly the solve karpy plan runs."""
    from karpy import planning
    from karpy.core.explain.pod import PodNotFound, explain_pod, pod_key

    loaded, where = inputs.read(files, kubeconfig, context, strict=strict)
    key = pod_key(name)
    skipped = {} if assume_node_classes else planning.missing_node_classes(loaded)
    inputs.echo_skipped_pools(skipped.items())
    try:
        cluster, base = planning.build_cluster(
            loaded, catalog_spec=catalog, settings=settings_mod.Settings(), without_pools=frozenset(skipped)
        )
        order = [it.name for it in base.instance_types]
        exp = explain_pod(cluster.snapshot(0.0), key, catalog_order=order)
    except PodNotFound as exc:
        there = ", ".join(exc.nearby) if exc.nearby else "none"
        typer.echo(f"error: pod {exc.key} not found in {where}; pods there: {there}", err=True)
        raise typer.Exit(2) from None
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    namespace, _, pod_name = key.partition("/")
    events = inputs.events(kubeconfig, context, "Pod", namespace, pod_name)
    if output is Output.json:
        document = explanation_document(exp, base.name, events)
        conventions.print_json(document, sort_keys=True)
    elif output is Output.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(explanation_document(exp, base.name, events), sort_keys=True))
    else:
        console = Console()
        _render_table(exp, console)
        _render_events(events, console)
    if loaded.problems:
        raise typer.Exit(2)
