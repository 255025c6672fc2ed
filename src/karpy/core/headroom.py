"""Headroom: free capacity a NodePool keeps ready on its nodes, always or by cron window.

A NodePool opts in with an annotation on its own ``metadata`` (not the template's)::

    karpy.sh/headroom: '{"cpu": "8", "memory": "16Gi", "perZone": true,
                         "schedule": "0 7 * * 1-5", "duration": "3h"}'

- every key other than ``perZone``, ``schedule`` and ``duration`` is a resource name with a
  Kubernetes quantity (``cpu``, ``memory``, ``nvidia.com/gpu``, ...); at least one is above zero;
- ``perZone`` (default false): keep that much in each zone the pool can launch in (the zones of
  the offerings of its instance types that its requirements allow), else in the pool as a whole;
- ``schedule`` and ``duration`` (both or neither): a 5-field cron expression (or ``@daily``...,
  UTC) and a duration (``3h``, ``90m``, ``1h30m``), read exactly as the disruption budgets'
  schedules (:mod:`karpy.core.disruption.budgets`): the headroom is kept while ``now`` lies in
  ``[fire, fire + duration)``; without them it is kept at all times.

While the window is open the headroom is **virtual pending demand**: :func:`needs` turns it into
equal pieces, each at most ``1 / PIECE_SHARE`` of the pool's largest instance type (allocatable,
per resource; and no more pieces than ``1 / PIECE_SHARE`` of its pod slots). Small pieces pack
onto the pool's types like ordinary pods, the room left on partly used nodes counts, and room a
pod fits in mostly fits a piece too, so pods moved by consolidation do not strand the pieces.
:func:`virtual_pods` makes them :class:`~karpy.model.objects.Pod`
values that exist in no API server (namespace :data:`NAMESPACE`, which no real namespace can be
named). They select the pool (``karpenter.sh/nodepool``) and the zone, tolerate the pool's
taints, and the scheduler places them like any pod: on room the pool's nodes already have, else
on new NodeClaims sized by the normal rules. :func:`held` counts the pieces a set of nodes holds
(identical pieces: the count per node does not depend on the order the nodes are tried in).

Pure: the annotation and ``now`` in, values out; no clock, no I/O. Used by the provisioning
controller, by the disruption pass (:mod:`karpy.core.disruption.headroom_guard`) and by its
consolidation simulations.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpy.core.disruption import budgets
from karpy.core.scheduling.cache import IdentityCache, by_identity
from karpy.core.snapshot import StateNode
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import Budget, NodePool, Pod
from karpy.model.resources import EPHEMERAL_STORAGE, MEMORY, PODS, Resources, amount
from karpy.model.taints import NO_EXECUTE, NO_SCHEDULE, Toleration, first_untolerated

__all__ = [
    "ANNOTATION",
    "MAX_PIECES",
    "NAMESPACE",
    "PIECE_SHARE",
    "POD_LABEL",
    "HeadroomError",
    "Need",
    "Spec",
    "count",
    "free",
    "held",
    "is_open",
    "is_virtual",
    "members",
    "needs",
    "next_edge",
    "open_pools",
    "parse",
    "problem",
    "room",
    "spec_of",
    "virtual_pods",
]

ANNOTATION = "karpy.sh/headroom"
NAMESPACE = "karpy:headroom"  # the virtual pods' namespace: a colon is not allowed in a real one
POD_LABEL = "karpy.sh/headroom"  # on every virtual pod, valued with its NodePool's name
PIECE_SHARE = 16  # a piece is at most a sixteenth of the pool's largest type, per resource
MAX_PIECES = 256  # per pool and zone; larger pieces beyond that
_MIB = 2**20
_OPTIONS = ("perZone", "schedule", "duration")
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


class HeadroomError(ValueError):
    """An annotation value karpy cannot read (the pool then keeps no headroom)."""


@dataclass(frozen=True, slots=True)
class Spec:
    """A parsed ``karpy.sh/headroom`` value."""

    resources: Resources
    per_zone: bool = False
    schedule: str | None = None
    duration: float | None = None  # seconds

    @property
    def window(self) -> Budget | None:
        """The schedule as a budget (whose window functions it shares); None: always on."""
        if self.schedule is None or self.duration is None:
            return None
        return Budget(nodes="0", schedule=self.schedule, duration=self.duration)


def _duration(text: object) -> float:
    if not isinstance(text, str):
        raise HeadroomError(f"duration must be a string such as '3h' or '90m', not {text!r}")
    found = _DURATION.match(text.strip())
    if not text.strip() or found is None:
        raise HeadroomError(f"duration {text!r} is not a duration such as '3h', '90m' or '1h30m'")
    hours, minutes, seconds = (float(part) if part else 0.0 for part in found.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise HeadroomError(f"duration {text!r} must be above zero")
    return total


def _quantity(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise HeadroomError(f"{name}: {value!r} is not a quantity")
    try:
        found = amount(name, value)
    except (ValueError, ArithmeticError) as exc:
        raise HeadroomError(f"{name}: {value!r} is not a quantity") from exc
    if found < 0:
        raise HeadroomError(f"{name}: {value!r} is negative")
    return found


def parse(text: str) -> Spec:
    """The annotation's value as a :class:`Spec`; :class:`HeadroomError` says what is wrong."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise HeadroomError(f"not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise HeadroomError('must be a JSON object such as {"cpu": "8", "memory": "16Gi"}')
    per_zone = raw.get("perZone", False)
    if not isinstance(per_zone, bool):
        raise HeadroomError(f"perZone must be true or false, not {per_zone!r}")
    schedule, duration = raw.get("schedule"), raw.get("duration")
    if (schedule is None) != (duration is None):
        raise HeadroomError("schedule and duration must be set together")
    seconds = None
    if schedule is not None:
        if not isinstance(schedule, str):
            raise HeadroomError(f"schedule must be a cron string, not {schedule!r}")
        seconds = _duration(duration)
        try:
            budgets.validate(Budget(nodes="0", schedule=schedule, duration=seconds))
        except budgets.BudgetError as exc:
            raise HeadroomError(str(exc)) from exc
    resources = Resources(
        {name: _quantity(name, value) for name, value in sorted(raw.items()) if name not in _OPTIONS}
    )
    if not resources:
        raise HeadroomError("asks for no resource (give e.g. cpu and memory above zero)")
    return Spec(resources, per_zone, schedule, seconds)


_PARSED: dict[str, Spec | str] = {}  # annotation text -> its Spec, or why it is invalid


def _parsed(text: str) -> Spec | str:
    found = _PARSED.get(text)
    if found is None:
        try:
            found = parse(text)
        except HeadroomError as exc:
            found = str(exc)
        if len(_PARSED) >= 1024:
            _PARSED.clear()
        _PARSED[text] = found
    return found


def spec_of(pool: NodePool) -> Spec | None:
    """The pool's headroom, or None (no annotation, an invalid one, or a static pool)."""
    text = pool.meta_annotations.get(ANNOTATION)
    if text is None or pool.replicas is not None:
        return None
    found = _parsed(text)
    return found if isinstance(found, Spec) else None


def problem(pool: NodePool) -> str | None:
    """Why the pool's annotation cannot be read (None: absent or valid)."""
    text = pool.meta_annotations.get(ANNOTATION)
    if text is None:
        return None
    found = _parsed(text)
    return found if isinstance(found, str) else None


def is_open(spec: Spec, now: float) -> bool:
    """Whether the headroom is kept at ``now``."""
    window = spec.window
    return window is None or budgets.active(window, now)


def open_pools(pools: Iterable[NodePool], now: float) -> tuple[str, ...]:
    """The names of the pools whose headroom is kept at ``now``, sorted."""
    out = []
    for pool in pools:
        spec = spec_of(pool)
        if spec is not None and is_open(spec, now):
            out.append(pool.name)
    return tuple(sorted(out))


def next_edge(pools: Iterable[NodePool], now: float) -> float:
    """The first moment after ``now`` at which some pool's window opens or closes (inf: none)."""
    soonest = math.inf
    for pool in pools:
        spec = spec_of(pool)
        window = spec.window if spec is not None else None
        if window is not None:
            soonest = min(soonest, budgets.active_until(window, now))
    return soonest


# -- the virtual demand -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Need:
    """The headroom one pool keeps in one zone (``zone`` "": the pool as a whole) at ``now``."""

    pool: str
    zone: str
    asked: Resources
    piece: Resources  # each virtual pod's requests (``len(pods)`` identical pieces)
    pods: tuple[Pod, ...]
    tolerations: tuple[Toleration, ...]

    @property
    def where(self) -> str:
        """``NodePool web`` or ``NodePool web in zone z`` (for messages)."""
        return f"NodePool {self.pool}" + (f" in zone {self.zone}" if self.zone else "")


def _types(
    pool: NodePool, types: Collection[InstanceType] | Mapping[str, InstanceType]
) -> list[InstanceType]:
    """The pool's instance types that its requirements allow."""
    its = list(types.values()) if isinstance(types, Mapping) else list(types)
    reqs = pool.requirement_set()
    return [it for it in its if it.requirements.overlaps(reqs)]


def _zones(pool: NodePool, types: Sequence[InstanceType]) -> tuple[str, ...]:
    reqs = pool.requirement_set()
    return tuple(sorted({o.zone for it in types for o in it.offerings if o.zone and o.compatible(reqs)}))


def _pieces(asked: Resources, types: Sequence[InstanceType]) -> tuple[Resources, int]:
    """(one piece, how many): the fewest equal pieces, each at most ``1 / PIECE_SHARE`` of the
    largest allocatable of the pool's types for every resource asked, and no more of them than
    ``1 / PIECE_SHARE`` of its pod slots (rounded up, memory to whole MiB, so the pieces add up
    to at least ``asked``)."""
    count = 1
    for name, value in asked.items():
        largest = max((it.allocatable.get(name) for it in types), default=0)
        cap = largest // PIECE_SHARE
        if cap > 0:
            count = max(count, math.ceil(value / cap))
    slots = max((it.allocatable.get(PODS) for it in types), default=0)
    if slots:  # and no more pieces than a sixteenth of its pod slots (each piece takes one)
        count = min(count, max(1, slots // PIECE_SHARE))
    count = min(count, MAX_PIECES)
    piece = {name: math.ceil(value / count) for name, value in asked.items()}
    for name in (MEMORY, EPHEMERAL_STORAGE):  # bytes: up to whole MiB, for readable messages
        if piece.get(name, 0) > _MIB:
            piece[name] = math.ceil(piece[name] / _MIB) * _MIB
    return Resources(piece), count


def _build(pool: NodePool, spec: Spec, types: Sequence[InstanceType]) -> tuple[Need, ...]:
    piece, count = _pieces(spec.resources, types)
    tolerations = tuple(Toleration(key=t.key, operator="Exists", effect=t.effect) for t in pool.taints)
    out = []
    for zone in _zones(pool, types) if spec.per_zone else ("",):
        selector = {labels.NODEPOOL: pool.name, **({labels.ZONE: zone} if zone else {})}
        pods = tuple(
            Pod(
                namespace=NAMESPACE,
                name=f"{pool.name}-{zone or 'pool'}-{i:03d}",
                labels={POD_LABEL: pool.name},
                requests=piece,
                node_selector=selector,
                tolerations=tolerations,
            )
            for i in range(count)
        )
        out.append(Need(pool.name, zone, spec.resources, piece, pods, tolerations))
    return tuple(out)


# (pool, its instance types) -> its needs while open: the same Pod objects from pass to pass
_NEEDS: IdentityCache[tuple[Need, ...]] = IdentityCache(64)


def needs(
    pools: Iterable[NodePool],
    instance_types: Mapping[str, Collection[InstanceType] | Mapping[str, InstanceType]],
    now: float,
) -> tuple[Need, ...]:
    """The headroom kept at ``now``, per pool (by name) and zone (by name)."""
    out: list[Need] = []
    for pool in sorted(pools, key=lambda p: p.name):
        spec = spec_of(pool)
        if spec is None or not is_open(spec, now):
            continue
        out.extend(_pool_needs(pool, spec, instance_types.get(pool.name, ())))
    return tuple(out)


def _pool_needs(
    pool: NodePool, spec: Spec, types: Collection[InstanceType] | Mapping[str, InstanceType]
) -> tuple[Need, ...]:
    return _NEEDS.get((pool, by_identity(types)), lambda: _build(pool, spec, _types(pool, types)))


def virtual_pods(found: Iterable[Need]) -> list[Pod]:
    """Every need's virtual pods, in order."""
    return [pod for need in found for pod in need.pods]


def is_virtual(pod: Pod) -> bool:
    """Whether ``pod`` is a headroom piece (it exists in no API server)."""
    return pod.namespace == NAMESPACE


# -- what the pool's nodes hold -----------------------------------------------------------------


def members(nodes: Iterable[StateNode], need: Need) -> list[StateNode]:
    """The pool's nodes in the need's zone that count for it: registered, initialized, not
    being deleted (a launched NodeClaim that has not initialized holds nothing yet)."""
    out = []
    for n in nodes:
        if n.node_pool != need.pool or n.node is None or not n.initialized:
            continue
        if n.marked_for_deletion or n.node.deleting or (n.claim is not None and n.claim.deleting):
            continue
        if need.zone and n.labels.get(labels.ZONE) != need.zone:
            continue
        out.append(n)
    return out


def room(node: StateNode) -> Resources:
    """Allocatable minus the requests (and pod slots) of the node's live pods, kept per StateNode."""
    found = node._derived.get("headroom_room")
    if found is None:
        used: dict[str, int] = {}
        for pod in node.pods:
            if pod.is_terminal():
                continue
            used[PODS] = used.get(PODS, 0) + 1
            for name, value in pod.requests.items():
                used[name] = used.get(name, 0) + value
        found = node.allocatable - Resources(used)
        node._derived["headroom_room"] = found
    return found


def _schedulable(node: StateNode, need: Need) -> bool:
    if node.node is not None and node.node.unschedulable:
        return False
    hard = [t for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)]
    return first_untolerated(need.tolerations, hard) is None


def count(room: Resources, allocatable: Resources, need: Need) -> int:
    """How many of the need's pieces fit in ``room`` (free resources of a node of ``allocatable``)."""
    found = room.get(PODS) if PODS in allocatable else len(need.pods)
    for name, value in need.piece.items():
        found = min(found, max(0, room.get(name)) // value)
    return max(0, found)


def held(node: StateNode, need: Need) -> int:
    """How many of the need's pieces the node's free room holds (0 when its taints refuse them)."""
    if not _schedulable(node, need):
        return 0
    return count(room(node), node.allocatable, need)


def free(nodes: Iterable[StateNode], need: Need) -> Resources:
    """The free allocatable of the need's resources on its members (each node's room, at least 0)."""
    out: dict[str, int] = {}
    for n in members(nodes, need):
        left = room(n)
        for name in need.asked:
            out[name] = out.get(name, 0) + max(0, left.get(name))
    return Resources(out)
