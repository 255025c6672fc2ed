"""``karpy explain node NAME``: why a node is (not) disrupted, from the pass ``karpy disrupt`` runs.

Objects come from ``-f`` files and folders or a live cluster (``--kubeconfig``,
:mod:`karpy.cli.inputs`), are built into a cluster exactly as ``karpy disrupt`` builds them, and
:func:`karpy.core.explain.node.explain_node` answers for the Node (or NodeClaim) named. Output: a
table of the disruption methods in the controller's order, each with its verdict, reason class,
the pass's sentence and the facts behind it (default), or ``-o json``, a stable document
(``apiVersion: karpy.dev/v1alpha1, kind: NodeExplanation``, keys sorted, every key always present).
Exit 0 when the node is explained, disrupted or not; 2 on bad input (a bad ``--now`` or
``--output``, a broken object), a node not found or an unreachable server.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
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
    from karpy.core.explain.node import Action, MethodVerdict, NodeExplanation

__all__ = ["explanation_document", "node"]


def iso(at: float) -> str:
    """RFC 3339 of ``at``, as the core's explanation writes times (the core loads on first use)."""
    from karpy.core.explain import node as explained

    return explained.iso(at)


def span(seconds: float) -> str:
    """A duration as the core's explanation writes it (``29d 18h``, ``4m 30s``)."""
    from karpy.core.explain import node as explained

    return explained.span(seconds)


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _action(action: Action | None) -> dict[str, Any] | None:
    if action is None:
        return None
    removed, launched = action.removed_price, action.launched_price
    return {
        "decision": action.decision,
        "nodes": list(action.nodes),
        "replacements": [
            {
                "nodePool": r.node_pool,
                "instanceType": r.instance_type,
                "zone": r.zone,
                "capacityType": r.capacity_type,
                "pricePerHour": _money(r.price),
                "instanceTypeOptions": list(r.instance_types),
                "pods": r.pods,
            }
            for r in action.replacements
        ],
        "removedPricePerHour": _money(removed),
        "launchedPricePerHour": _money(launched),
        "priceDifferencePerHour": None if removed is None or launched is None else _money(launched - removed),
        "savingsPerHour": _money(action.savings),
    }


def _plain(value: object) -> Any:
    """A detail as plain JSON values (mappings to dicts, sequences to lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def explanation_document(exp: NodeExplanation, catalog: str) -> dict[str, Any]:
    """The stable JSON shape of an explanation (every key always present)."""
    from karpy.api.common import KARPY_API_VERSION

    cmd = exp.command
    return {
        "apiVersion": KARPY_API_VERSION,
        "kind": "NodeExplanation",
        "catalog": catalog,
        "now": iso(exp.now),
        "node": exp.node,
        "nodeClaim": exp.node_claim or None,
        "nodePool": exp.node_pool or None,
        "instanceType": exp.instance_type or None,
        "zone": exp.zone or None,
        "capacityType": exp.capacity_type or None,
        "pricePerHour": _money(exp.price),
        "pods": list(exp.pods),
        "state": dict(exp.state),
        "verdict": exp.verdict,
        "summary": exp.summary,
        "reason": exp.reason,
        "blockers": list(exp.blockers),
        "passReasons": list(exp.pass_reasons),
        "command": None
        if cmd is None
        else {
            "method": cmd.method,
            "reason": cmd.reason,
            "decision": cmd.decision,
            "nodes": list(cmd.candidates),
            "detail": cmd.detail,
        },
        "nextChange": None if exp.next_change is None else iso(exp.next_change),
        "methods": [
            {
                "method": m.method,
                "verdict": m.verdict,
                "reason": m.reason,
                "message": m.message,
                "detail": _plain(m.detail),
                "action": _action(m.action),
            }
            for m in exp.methods
        ],
    }


# -- the table -------------------------------------------------------------------------------------
def _dollars(value: float | None) -> str:
    return "$?" if value is None else f"${value:.4f}/h"


def _action_lines(action: Action, done: bool) -> list[str]:
    nodes = ", ".join(action.nodes)
    verb = ("deletes" if done else "would delete") if not action.replacements else ""
    if not action.replacements:
        return [f"{verb} {nodes}, no replacement: saves {_dollars(action.savings)}"]
    lines = [f"{'replaces' if done else 'would replace'} {nodes} ({_dollars(action.removed_price)}) with:"]
    for r in action.replacements:
        where = f"{r.instance_type} {r.capacity_type} in {r.zone}" if r.instance_type else "no offering"
        lines.append(f"  {where} ({_dollars(r.price)}, {len(r.instance_types)} options, {r.pods} pods)")
    if action.removed_price is not None and action.launched_price is not None:
        diff = action.launched_price - action.removed_price
        lines.append(f"price difference {'+' if diff >= 0 else '-'}${abs(diff):.4f}/h")
    return lines


def _window_line(b: Mapping[str, Any]) -> str:
    text = f"budget[{b['index']}] nodes={b['nodes']} (allows {b['allows']})"
    if b["reasons"]:
        text += f" for {', '.join(b['reasons'])}"
    if b.get("invalid"):
        return text + f": invalid ({b['invalid']}), fails closed"
    if b["schedule"] is None:
        return text + ": always in force"
    state = "in force now" if b["active"] else "not in force; next window"
    return (
        f"{text}, schedule {b['schedule']!r} for {span(b['durationSeconds'])}: "
        f"{state} {b['windowStart']} - {b['windowEnd']}"
    )


def _budget_lines(budget: Mapping[str, Any]) -> list[str]:
    head = f"{budget['reason']} budgets leave {budget['allowedNow']} now"
    head += f" ({budget['nodes']} nodes, {budget['disrupting']} already disrupting):"
    return [head] + ["  " + _window_line(b) for b in budget["budgets"]]


def _window(after: Mapping[str, Any], now: float) -> str:
    if after["seconds"] is None:
        return "consolidateAfter Never"
    text = f"consolidateAfter {span(after['seconds'])}"
    if after["since"] is None:
        return text + ": not initialized yet"
    left = after["remainingSeconds"]
    end = f"ended {after['endsAt']}" if not left else f"ends {after['endsAt']} (in {span(left)})"
    return f"{text}: quiet since {after['since']}, {end}"


def _drift_lines(d: Mapping[str, Any]) -> list[str]:
    kind = d.get("kind")
    if kind == "condition":
        lines = [f"Drifted condition {d['conditionReason'] or '(no reason)'} since {d['since'] or '?'}"]
        if d.get("field"):
            lines[0] += f": {d['field']} differs"
        if d.get("imageID") or d.get("nodeClassAMIs"):
            amis = ", ".join(d.get("nodeClassAMIs") or []) or "?"
            lines.append(f"node image {d.get('imageID') or '?'}; NodeClass resolves {amis}")
        return lines
    if kind == "nodepool-hash":
        return [f"NodePool hash {d['nodePoolHash']}, NodeClaim stamped {d['nodeClaimHash']}"]
    if kind == "requirements":
        return [f"requirement no longer met: {c}" for c in d["conflicts"]]
    return []


def _detail_lines(m: MethodVerdict, exp: NodeExplanation) -> list[str]:
    """The facts worth a line under the method's sentence."""
    d: Mapping[str, Any] = m.detail
    lines: list[str] = []
    if m.method == "expiration" and d.get("expireAfterSeconds") is not None:
        lines.append(
            f"expireAfter {span(d['expireAfterSeconds'])} ({d['expireAfterFrom']}), created {d['createdAt']}"
        )
    if "drift" in d:
        lines += _drift_lines(d["drift"])
    if m.reason == "do-not-disrupt":
        lines += [f"do-not-disrupt pod {p['pod']} ({p['value']})" for p in d.get("doNotDisruptPods", [])]
    if m.reason == "pdb":
        lines += [f"PDB {p['pdb']} blocks {', '.join(p['pods'])}" for p in d.get("pdbs", [])]
    if m.reason in ("consolidate-after", "policy") and "consolidateAfter" in d:
        lines.append(_window(d["consolidateAfter"], exp.now))
        if m.reason == "policy":
            lines.append(f"consolidationPolicy {d.get('consolidationPolicy')}")
    if "budget" in d and (m.reason == "budget" or m.verdict in ("candidate", "disrupted")):
        lines += _budget_lines(d["budget"])
    for dest in d.get("destinationsExcluded", []):
        lines.append(f"no destination: {dest['node']} ({dest['why']})")
    if m.action is not None:
        lines += _action_lines(m.action, m.verdict == "disrupted")
    first = d.get("preemptedBy")
    if first:
        lines.append(
            f"this pass {first['method']} acts first ({first['decision']} {', '.join(first['nodes'])})"
        )
    return lines


_STYLE = {"disrupted": "bold red", "candidate": "yellow", "blocked": "bold magenta", "not-candidate": "dim"}


def _render_table(exp: NodeExplanation, console: Console) -> None:
    title = Text("karpy explain node ", style="bold")
    title.append(f"{exp.node} at {iso(exp.now)}: {exp.verdict}", style="bold")
    console.print(title)
    what = (
        f"{exp.instance_type or '?'} {exp.capacity_type or '?'} in {exp.zone or '?'}, {_dollars(exp.price)}"
    )
    pods = f"{len(exp.pods)} pod" + ("" if len(exp.pods) == 1 else "s")
    owner = f"NodeClaim {exp.node_claim}, NodePool {exp.node_pool}" if exp.node_claim else "no NodeClaim"
    console.print(Text(f"  {owner}: {what}, {pods}"))
    console.print(Text(f"  {exp.summary}"))
    cmd = exp.command
    if cmd is None:
        console.print(Text("  this pass (karpy disrupt): no disruption"))
    else:
        nodes = ", ".join(cmd.candidates)
        console.print(
            Text(f"  this pass (karpy disrupt): {cmd.decision} {nodes} ({cmd.reason}, {cmd.method})")
        )
    if exp.next_change is not None:
        console.print(
            Text(
                f"  this answer holds until {iso(exp.next_change)} (the next time-derived change)",
                style="dim",
            )
        )
    table = Table(title="Methods, in the order the disruption controller tries them", title_justify="left")
    for column in ("Method", "Verdict", "Reason", "Why"):
        table.add_column(column, overflow="fold")
    for m in exp.methods:
        why = Text(m.message)
        for line in _detail_lines(m, exp):
            why.append(("\n    " + line[2:]) if line.startswith("  ") else ("\n→ " + line), style="cyan")
        table.add_row(m.method, Text(m.verdict, style=_STYLE.get(m.verdict, "")), m.reason, why)
    console.print(table)


def node(
    name: str = typer.Argument(..., metavar="NAME", help="A Node name, or a NodeClaim name."),
    files: list[Path] | None = options.LIVE_FILES,
    kubeconfig: Path | None = options.KUBECONFIG,
    context: str | None = options.CONTEXT,
    now: str | None = options.NOW,
    catalog: str = options.CATALOG,
    output: Output = typer.Option(
        Output.table, "--output", "-o", help="A table, or the NodeExplanation document."
    ),
    spot_to_spot: bool = options.SPOT_TO_SPOT,
    strict: bool = typer.Option(
        False, "--strict", help="An unknown field in FILES is an error (exit 2; that object is not used)."
    ),
) -> None:
    """Explain why a node is (not) disrupted, method by method, using the pass karpy disrupt runs."""
    from karpy import planning
    from karpy.core.explain.node import NodeNotFound, explain_node

    at = options.pass_time(now)
    loaded, where = inputs.read(files, kubeconfig, context, strict=strict)
    gates = settings_mod.FeatureGates(spot_to_spot_consolidation=spot_to_spot)
    try:
        cluster, base = planning.build_cluster(
            loaded, catalog_spec=catalog, settings=settings_mod.Settings(features=gates)
        )
        exp = explain_node(
            cluster.snapshot(at),
            name,
            catalog_order=[it.name for it in base.instance_types],
            node_classes=[*loaded.ec2_node_classes, *loaded.kwok_node_classes],
        )
    except NodeNotFound as exc:
        there = ", ".join(exc.nearby) if exc.nearby else "none"
        typer.echo(
            f"error: node {exc.name} not found in {where}; nodes there ({exc.total}): {there}", err=True
        )
        raise typer.Exit(2) from None
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if output is Output.json:
        conventions.print_json(explanation_document(exp, base.name), sort_keys=True)
    elif output is Output.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(explanation_document(exp, base.name), sort_keys=True))
    else:
        _render_table(exp, Console())
    if loaded.problems:
        raise typer.Exit(2)
