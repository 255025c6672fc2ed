"""NodePool disruption budgets (``spec.disruption.budgets``) evaluated at ``now``.

A budget's ``nodes`` is a count or a percentage of the pool's nodes (rounded up, as
upstream); a budget with a ``schedule`` (5-field cron or ``@daily``…, always UTC) is
active while ``now`` lies in ``[fire, fire + duration)`` for some fire time; a budget
without reasons applies to every reason. The smallest active applicable budget wins, less
the pool's nodes already being disrupted (or NotReady). A bad cron fails closed (0).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from croniter import croniter

from karpy.core.snapshot import StateNode
from karpy.model.objects import Budget, NodePool

__all__ = [
    "INSTANCE_TERMINATING",
    "BudgetError",
    "active",
    "active_until",
    "allowed",
    "budget_nodes",
    "counts",
    "validate",
    "window",
]

INSTANCE_TERMINATING = "InstanceTerminating"  # the NodeClaim condition set once its instance is being deleted
_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class BudgetError(ValueError):
    """A budget that cannot be evaluated (bad ``nodes`` or ``schedule``)."""


def validate(budget: Budget) -> None:
    problem = _problem(budget)
    if problem is not None:
        raise BudgetError(problem)


@functools.lru_cache(maxsize=256)
def _problem(budget: Budget) -> str | None:
    """What :func:`validate` rejects in ``budget`` (a pure function of the value, so cached)."""
    if not _NODES.match(budget.nodes):
        return f"nodes {budget.nodes!r} must be a count or a percentage from 0% to 100%"
    if (budget.schedule is None) != (budget.duration is None):
        return "schedule and duration must be set together"
    if budget.schedule is not None:
        expr = _MACROS.get(budget.schedule.strip(), budget.schedule)
        if len(expr.split()) != 5 or not croniter.is_valid(expr):
            return f"schedule {budget.schedule!r} is not a 5-field cron expression"
    return None


def budget_nodes(budget: Budget, total: int) -> int:
    """The node count a budget allows for a pool of ``total`` nodes (percent rounds up)."""
    text = budget.nodes
    if text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(text)


def active(budget: Budget, now: float) -> bool:
    """Whether the budget is in force at ``now`` (UTC)."""
    if budget.schedule is None or budget.duration is None:
        return True
    return _window(budget.schedule, budget.duration, now)[0]


def active_until(budget: Budget, now: float) -> float:
    """The first moment after ``now`` at which :func:`active` may answer otherwise (inf: never)."""
    if budget.schedule is None or budget.duration is None:
        return math.inf
    return _window(budget.schedule, budget.duration, now)[2]


# per (schedule, duration): the last answer and the span [from, until) of times it holds for
_WINDOWS: dict[tuple[str, float], tuple[bool, float, float]] = {}


def _window(schedule: str, duration: float, now: float) -> tuple[bool, float, float]:
    """(active, from, until): ``active`` holds for every time in [from, until), ``now`` among them.

    Active iff the first fire strictly after ``now - duration`` (upstream's cron Next) is not
    after ``now``. For a later time t that fire stays the first one after ``t - duration`` while
    ``t - duration`` is before it: so an active answer holds until that fire + duration, an
    inactive one until that fire.
    """
    key = (schedule, duration)
    known = _WINDOWS.get(key)
    if known is not None and known[1] <= now < known[2]:
        return known
    expr = _MACROS.get(schedule.strip(), schedule)
    start = datetime.fromtimestamp(now, UTC) - timedelta(seconds=duration)
    fire = croniter(expr, start).get_next(datetime).timestamp()
    is_active = bool(fire <= now)
    found = (is_active, now, fire + duration if is_active else fire)
    if len(_WINDOWS) >= 256:
        _WINDOWS.clear()
    _WINDOWS[key] = found
    return found


def window(budget: Budget, now: float) -> tuple[bool, float, float] | None:
    """A scheduled budget's window as seen at ``now``: (active, start, end) of the window in
    force, else of the next one (None: no schedule, the budget is always in force)."""
    if budget.schedule is None or budget.duration is None:
        return None
    is_active, _, until = _window(budget.schedule, budget.duration, now)
    if is_active:
        return True, until - budget.duration, until
    return False, until, until + budget.duration


def counts(pool: NodePool, nodes: Sequence[StateNode]) -> tuple[int, int]:
    """(the pool's nodes a percentage counts, those of them already disrupting), as upstream's
    ``BuildDisruptionBudgetMapping``: managed, initialized nodes whose claim is not
    ``InstanceTerminating`` count; of those, the NotReady and the marked for deletion (a
    deletion timestamp on the node or the claim included) are disrupting."""
    total = disrupting = 0
    for n in nodes:
        if n.node_pool != pool.name or n.claim is None or n.node is None or not n.initialized:
            continue
        if n.claim.is_true(INSTANCE_TERMINATING):
            continue
        total += 1
        if n.marked_for_deletion or n.node.deleting or not n.node.ready or n.claim.deleting:
            disrupting += 1
    return total, disrupting


def allowed(pool: NodePool, nodes: Sequence[StateNode], reason: str, now: float) -> tuple[int, str]:
    """Disruptions the pool allows for ``reason`` now, and which budget decided (for records)."""
    total, disrupting = counts(pool, nodes)
    best: int | None = None
    which = ""
    for index, budget in enumerate(pool.disruption.budgets):
        if budget.reasons and reason not in budget.reasons:
            continue
        try:
            validate(budget)
            in_force = active(budget, now)
            count = budget_nodes(budget, total)
        except (BudgetError, ValueError) as exc:
            in_force, count = True, 0
            which = f"budget[{index}] is invalid ({exc}): fails closed"
        if not in_force:
            continue
        if best is None or count < best:
            best = count
            if not which.startswith(f"budget[{index}]"):
                which = f"budget[{index}] nodes={budget.nodes}" + (
                    f" schedule={budget.schedule!r}" if budget.schedule else ""
                )
    if best is None:
        return max(0, total - disrupting), "no active budget"
    return max(best - disrupting, 0), f"{which} of {total} nodes, {disrupting} already disrupting"
