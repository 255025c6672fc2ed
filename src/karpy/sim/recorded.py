"""A recorded trace's ``recorded`` block: the nodes that really ran, and the run's figures from them.

``karpy record`` writes, beside the workload, what the cluster really did over the window: every
node with its launch (its NodeClaim's creation, else its Node's), registration (the Node object),
Ready and deletion times, instance type, zone, capacity type and NodePool or node group, plus the
figures measured from the pods (pending latency, pods created). :func:`validate` checks the block
(:class:`Block`) and turns it into frozen values (:class:`Recorded`); :func:`figures` gives
the recorded run the shape of a simulated run's figures (:func:`karpy.sim.metrics.summary`:
``cost_usd``, ``node_hours``, ``peak_nodes``, ``nodes_created``, ``churn_per_hour``,
``pending_seconds``, a ``series`` of ``t``, ``nodes`` and ``cost``), so the report draws both on
one axis. Node-hours count each node from launch to deletion (or the end), clipped to the window;
peak nodes count Node objects (registration to deletion), as a simulated run counts them; cost is
node time at the price ``price`` gives each offering (the simulator's catalog prices, so both runs
are priced alike). Used by :mod:`karpy.sim.scenario` and ``karpy backtest``; pure.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import pydantic
from pydantic import Field, model_validator

from karpy.api import common
from karpy.api import load as api_load
from karpy.api import simulation as schema

__all__ = ["KARPENTER", "Price", "Recorded", "RecordedNode", "figures", "node_figures", "validate"]

KARPENTER = "karpenter"
Price = Callable[[str, str, str], float | None]  # (instance type, zone, capacity type) -> USD/h
_DIGITS = 6


@dataclass(frozen=True, slots=True)
class RecordedNode:
    name: str
    launched: float
    instance_type: str
    zone: str = ""
    capacity_type: str = "on-demand"
    registered: float | None = None
    ready: float | None = None
    deleted: float | None = None
    node_pool: str = ""
    node_group: str = ""


@dataclass(frozen=True, slots=True)
class Recorded:
    autoscaler: str  # karpenter | cluster-autoscaler
    nodes: tuple[RecordedNode, ...] = ()
    source: str = "live"
    server: str = ""
    interrupted: bool = False
    figures: Mapping[str, Any] = field(default_factory=dict)  # as written (snake_case keys), None dropped


# -- the block's schema ---------------------------------------------------------------------


class _Node(schema.StrictModel):
    """A node that really ran: launched (its NodeClaim, else its Node, created), registered (the
    Node object created), Ready, deleted (None: still there at the end of the recording)."""

    name: Annotated[str, Field(min_length=1)]
    launched: common.Time
    registered: common.Time | None = None
    ready: common.Time | None = None
    deleted: common.Time | None = None
    instance_type: Annotated[str, Field(min_length=1)]
    zone: str = ""
    capacity_type: Annotated[str, common.one_of("on-demand", "spot")] = "on-demand"
    node_pool: str = ""
    node_group: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> _Node:
        for name in ("registered", "ready", "deleted"):
            value = getattr(self, name)
            if value is not None and value < self.launched:
                raise common.FieldError((name,), "must not be before launched")
        return self


class _Percentiles(schema.StrictModel):
    p50: schema.NonNegative | None = None
    p95: schema.NonNegative | None = None
    p99: schema.NonNegative | None = None
    max: schema.NonNegative | None = None


class _Figures(schema.StrictModel):
    node_hours: schema.NonNegative | None = None
    peak_nodes: Annotated[int, common.at_least(0)] | None = None
    nodes_launched: Annotated[int, common.at_least(0)] | None = None
    launches_per_hour: schema.NonNegative | None = None
    pods_created: Annotated[int, common.at_least(0)] | None = None
    pending_seconds: _Percentiles | None = None  # pod creation -> bound; None: not recorded


class Block(schema.StrictModel):
    """The ``recorded`` block of a trace."""

    source: Annotated[str, common.one_of("live", "prometheus")] = "live"
    server: str = ""
    autoscaler: Annotated[str, common.one_of(KARPENTER, "cluster-autoscaler")]
    interrupted: bool = False
    nodes: list[_Node] = Field(default_factory=list)
    figures: _Figures = _Figures()


def validate(raw: Any, *, file: str, name: str) -> tuple[Recorded | None, list[api_load.Problem]]:
    """The ``recorded`` block of the Simulation ``name`` in ``file``, or its problems (paths
    ``recorded.nodes[0].launched``)."""
    try:
        block = Block.model_validate(raw)
    except pydantic.ValidationError as exc:
        base = api_load.Problem(file, 0, "Simulation", name, "", "")
        return None, api_load._validation_problems(exc, Block, base, "recorded")
    return _from_block(block), []


def _from_block(block: Block) -> Recorded:
    nodes = tuple(
        RecordedNode(
            name=n.name,
            launched=n.launched,
            instance_type=n.instance_type,
            zone=n.zone,
            capacity_type=n.capacity_type,
            registered=n.registered,
            ready=n.ready,
            deleted=n.deleted,
            node_pool=n.node_pool,
            node_group=n.node_group,
        )
        for n in block.nodes
    )
    given = block.figures.model_dump(exclude_none=True)
    return Recorded(block.autoscaler, nodes, block.source, block.server, block.interrupted, given)


def _span(start: float, stop: float | None, *, begin: float, end: float) -> float:
    """Seconds of ``[start, stop)`` (``stop`` None: open) within ``[begin, end]``."""
    return max(0.0, min(end, end if stop is None else stop) - max(start, begin))


def node_figures(nodes: Sequence[RecordedNode], *, start: float, end: float) -> dict[str, Any]:
    """Node-hours, peak nodes, launches and launches per hour of the window ``[start, end]``."""
    hours = (end - start) / 3600.0
    launched = sum(1 for n in nodes if start < n.launched <= end)
    changes: list[tuple[float, int]] = []
    for n in nodes:
        if n.registered is None or n.registered > end or (n.deleted is not None and n.deleted <= start):
            continue
        changes.append((max(n.registered, start), 1))
        if n.deleted is not None and n.deleted <= end:
            changes.append((n.deleted, -1))
    peak = count = 0
    for _, step in sorted(changes):  # at one instant deletions (-1) come before registrations
        count += step
        peak = max(peak, count)
    node_hours = sum(_span(n.launched, n.deleted, begin=start, end=end) for n in nodes) / 3600.0
    return {
        "node_hours": round(node_hours, 4),
        "peak_nodes": peak,
        "nodes_launched": launched,
        "launches_per_hour": round(launched / hours, 3) if hours else 0.0,
    }


def _price(node: RecordedNode, price: Price) -> float:
    return price(node.instance_type, node.zone, node.capacity_type) or 0.0


def figures(
    recorded: Recorded, *, start: float, end: float, price: Price, every: float = 60.0
) -> dict[str, Any]:
    """The recorded run's figures, shaped as a simulated run's (see the module docstring); the
    ``figures`` the recording wrote win over those computed from its nodes."""
    nodes = recorded.nodes
    priced = [(_price(n, price), n) for n in nodes]  # (looked up once, not at every sample)
    computed = node_figures(nodes, start=start, end=end)
    given = {**computed, **recorded.figures}
    by_capacity: dict[str, float] = {}
    for n in nodes:
        hours = _span(n.launched, n.deleted, begin=start, end=end) / 3600.0
        by_capacity[n.capacity_type] = by_capacity.get(n.capacity_type, 0.0) + hours
    return {
        "cost_usd": round(_cost(priced, start=start, until=end), _DIGITS),
        "pending_seconds": given.get("pending_seconds"),
        "pods_created": given.get("pods_created"),
        "nodes_created": given["nodes_launched"],
        "churn_per_hour": {"created": given["launches_per_hour"]},
        "peak_nodes": given["peak_nodes"],
        "node_hours": given["node_hours"],
        "node_hours_by_capacity_type": {k: round(v, 4) for k, v in sorted(by_capacity.items())},
        "series": _series(priced, start=start, end=end, every=every),
    }


def _cost(priced: Sequence[tuple[float, RecordedNode]], *, start: float, until: float) -> float:
    """USD of ``priced`` ((USD/h, node) pairs) over ``[start, until]``."""
    return sum(p * _span(n.launched, n.deleted, begin=start, end=until) for p, n in priced) / 3600.0


def _series(
    priced: Sequence[tuple[float, RecordedNode]], *, start: float, end: float, every: float
) -> dict[str, list[Any]]:
    """Every ``every`` seconds and at the end: Node objects and the cost accumulated (as a
    simulated run samples them)."""
    times = [start + k * every for k in range(int((end - start) // every) + 1)]
    if times[-1] < end:
        times.append(end)
    registered = sorted(n.registered for _, n in priced if n.registered is not None)
    deleted = sorted(n.deleted for _, n in priced if n.registered is not None and n.deleted is not None)
    series: dict[str, list[Any]] = {"t": [], "nodes": [], "cost": []}
    for t in times:
        up = bisect.bisect_right(registered, t) - bisect.bisect_right(deleted, t)
        series["t"].append(round(t - start, 3))
        series["nodes"].append(up)
        series["cost"].append(round(_cost(priced, start=start, until=t), 4))
    return series
