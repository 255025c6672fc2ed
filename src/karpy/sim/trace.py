"""Workload traces: replica curves, rollout times, cron-scheduled and recorded jobs, recorded bare
pods, as timed loop events.

A :class:`Curve` is a list of ``(time, replicas)`` points interpolated ``linear``ly (rounded to
whole pods) or as a ``step`` function. Points given as ``"HH:MM"`` are UTC times of day and
repeat daily (the curve wraps from the last point of a day to the first of the next); points
given as RFC3339 times (a recording's, inline or in a CSV file of ``time,replicas`` rows) are
absolute: the first value holds before them and the last after. A CSV file is read as UTF-8 (a
spreadsheet's byte-order mark is dropped; another encoding or a binary file is one line naming the
byte offset) and every bad row is reported (:class:`TraceError`). :func:`scale_events` turns a
curve into the replica changes over a run (sampled every minute and at every breakpoint),
:func:`daily_times` expands times of day, :func:`cron_times` a cron expression. :func:`schedule`
puts all of it on a :class:`~karpy.runtime.loop.Loop` against
:class:`~karpy.sim.workloads.Workloads`: Deployments (scales, rollouts at times of day or
absolute times), StatefulSets (scales), Jobs (cron firings, or recorded :class:`JobRun` starts)
and bare pods (recorded :class:`PodRun` creations and deletions); a recorded run that starts
before the run or at its end or later is left out.
Used by :mod:`karpy.sim.scenario` (parsing) and :mod:`karpy.sim.runner` (driving).
"""

from __future__ import annotations

import bisect
import copy
import csv
import datetime as dt
import functools
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from croniter import croniter

from karpy.api.simulation import parse_clock
from karpy.model.errors import InputError
from karpy.runtime.loop import Loop
from karpy.sim import statefulsets
from karpy.sim.workloads import Workloads

__all__ = [
    "DAY",
    "LINEAR",
    "ROLLOUT_ANNOTATION",
    "STEP",
    "Curve",
    "DeploymentTrace",
    "JobRun",
    "JobTrace",
    "PodRun",
    "PodTrace",
    "StatefulSetTrace",
    "TraceError",
    "cron_times",
    "daily_times",
    "load_csv",
    "parse_clock",
    "scale_events",
    "schedule",
]

DAY = 86_400.0
LINEAR = "linear"
STEP = "step"
ROLLOUT_ANNOTATION = "karpy.dev/rollout"  # changed on the pod template at each rollout
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


@dataclass(frozen=True, slots=True)
class Curve:
    """Replicas over time. ``daily``: times are seconds of the UTC day; else POSIX seconds."""

    points: tuple[tuple[float, int], ...]
    interpolate: str = LINEAR
    daily: bool = True

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("a replica curve needs at least one point")
        if self.interpolate not in (LINEAR, STEP):
            raise ValueError(f"interpolate must be linear or step, not {self.interpolate!r}")
        times = [t for t, _ in self.points]
        if any(b <= a for a, b in itertools.pairwise(times)):
            raise ValueError("the points' times must increase")

    @classmethod
    def constant(cls, replicas: int) -> Curve:
        return cls(((0.0, replicas),), STEP, True)

    def _bracket(self, x: float) -> tuple[float, int, float, int]:
        """(t0, v0, t1, v1) around ``x`` in the curve's own time axis."""
        times = [t for t, _ in self.points]
        i = bisect.bisect_right(times, x) - 1
        n = len(self.points)
        if self.daily:
            if i < 0:  # before the first point: from yesterday's last
                (t0, v0), (t1, v1) = self.points[-1], self.points[0]
                return t0 - DAY, v0, t1, v1
            t0, v0 = self.points[i]
            t1, v1 = self.points[i + 1] if i + 1 < n else (self.points[0][0] + DAY, self.points[0][1])
            return t0, v0, t1, v1
        if i < 0:
            t, v = self.points[0]
            return t, v, t, v
        t0, v0 = self.points[i]
        t1, v1 = self.points[i + 1] if i + 1 < n else (t0, v0)
        return t0, v0, t1, v1

    def at(self, when: float) -> int:
        """Replicas at POSIX time ``when``."""
        x = when % DAY if self.daily else when
        t0, v0, t1, v1 = self._bracket(x)
        if self.interpolate == STEP or t1 <= t0 or v0 == v1:
            return v0
        return math.floor(v0 + (v1 - v0) * (x - t0) / (t1 - t0) + 0.5)

    def breakpoints(self, start: float, end: float) -> list[float]:
        """POSIX times of the curve's points within ``[start, end]``."""
        if not self.daily:
            return [t for t, _ in self.points if start <= t <= end]
        out: list[float] = []
        day = math.floor(start / DAY) * DAY
        while day <= end:
            out.extend(day + t for t, _ in self.points if start <= day + t <= end)
            day += DAY
        return out


def scale_events(curve: Curve, start: float, end: float, *, every: float = 60.0) -> list[tuple[float, int]]:
    """``(time, replicas)`` at ``start`` and whenever the count changes up to ``end``.

    The curve is evaluated every ``every`` seconds from ``start`` and at each breakpoint (a step
    curve only at breakpoints).
    """
    times = set(curve.breakpoints(start, end))
    if curve.interpolate == LINEAR:
        n = int((end - start) // every)
        times.update(start + k * every for k in range(n + 1))
    times.add(start)
    out: list[tuple[float, int]] = []
    for t in sorted(times):
        value = curve.at(t)
        if not out or out[-1][1] != value:
            out.append((t, value))
    return out


def daily_times(times_of_day: Sequence[float], start: float, end: float) -> list[float]:
    """Every occurrence of the given seconds-of-day in ``[start, end)``, sorted."""
    out: list[float] = []
    day = math.floor(start / DAY) * DAY
    while day < end:
        out.extend(day + t for t in times_of_day if start <= day + t < end)
        day += DAY
    return sorted(out)


def cron_times(expression: str, start: float, end: float) -> list[float]:
    """Times a cron expression fires in ``[start, end)`` (UTC)."""
    if not croniter.is_valid(expression):
        raise ValueError(f'"{expression}" is not a cron expression (e.g. "0 3 * * *")')
    origin = dt.datetime.fromtimestamp(start, dt.UTC) - dt.timedelta(seconds=1)
    it = croniter(expression, origin)
    out: list[float] = []
    while True:
        t = float(it.get_next(float))
        if t >= end:
            return out
        if t >= start:
            out.append(t)


class TraceError(InputError):
    """A replica trace that cannot be read; ``lines`` has one line per problem (every bad row)."""

    def __init__(self, lines: Sequence[str]) -> None:
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        super().__init__(f"{lines[0]}{more}")
        self.lines = list(lines)


def _csv_text(path: Path) -> str:
    """The trace's text: UTF-8 (a byte-order mark, as spreadsheets write it, is dropped)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    if b"\x00" in data[:8192]:
        raise TraceError([f"{path}: a binary file, not a time,replicas CSV"])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        byte = data[exc.start]
        raise TraceError(
            [f"{path}: not UTF-8 text (byte 0x{byte:02x} at offset {exc.start}); save the trace as UTF-8 CSV"]
        ) from None


def load_csv(path: Path, *, interpolate: str = LINEAR) -> Curve:
    """A curve from ``time,replicas`` rows (a header row is optional); raises :class:`TraceError`
    naming every bad row (``trace.csv:7: replicas "x" is not an integer``)."""
    text = _csv_text(path)
    points: list[tuple[float, int]] = []
    bad: list[str] = []
    daily: bool | None = None
    previous: tuple[int, float] | None = None  # (line, time) of the last good row
    for lineno, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 2:
            bad.append(f"{path}:{lineno}: expected time,replicas")
            continue
        stamp, count = row[0].strip(), row[1].strip()
        if lineno == 1 and not count.lstrip("-").isdigit():
            continue  # header
        try:
            replicas = int(count)
        except ValueError:
            bad.append(f'{path}:{lineno}: replicas "{count}" is not an integer')
            continue
        if replicas < 0:
            bad.append(f"{path}:{lineno}: replicas must not be negative")
            continue
        is_clock = _CLOCK.match(stamp) is not None
        if daily is not None and daily != is_clock:
            bad.append(f"{path}:{lineno}: mixes times of day and timestamps")
            continue
        try:
            when = parse_clock(stamp) if is_clock else _timestamp(stamp)
        except ValueError as exc:
            bad.append(f"{path}:{lineno}: {exc}")
            continue
        daily = is_clock
        if previous is not None and when <= previous[1]:
            bad.append(f"{path}:{lineno}: time {stamp} is not after the time on line {previous[0]}")
            continue
        previous = (lineno, when)
        points.append((when, replicas))
    if bad:
        raise TraceError(bad)
    if not points:
        raise TraceError([f"{path}: no time,replicas rows"])
    try:
        return Curve(tuple(points), interpolate, bool(daily))
    except ValueError as exc:
        raise TraceError([f"{path}: {exc}"]) from None


def _timestamp(text: str) -> float:
    try:
        stamp = dt.datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(f'"{text}" is neither HH:MM nor an RFC3339 time') from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


# -- driving Workloads ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeploymentTrace:
    name: str
    namespace: str
    template: Mapping[str, Any]
    strategy: Mapping[str, Any] | None
    replicas: Curve
    rollouts: tuple[float, ...] = ()  # seconds of the UTC day
    rollout_times: tuple[float, ...] = ()  # POSIX seconds (a recording's)


@dataclass(frozen=True, slots=True)
class StatefulSetTrace:
    name: str
    namespace: str
    template: Mapping[str, Any]
    replicas: Curve
    parallel: bool = False  # podManagementPolicy Parallel (else OrderedReady)
    claims: statefulsets.ClaimTemplates | None = None  # volumeClaimTemplates


@dataclass(frozen=True, slots=True)
class JobRun:
    """A recorded Job: it starts ``at`` (POSIX seconds), named ``name``, each pod running ``run_for``."""

    at: float
    run_for: float
    name: str


@dataclass(frozen=True, slots=True)
class JobTrace:
    name: str
    namespace: str
    template: Mapping[str, Any]
    schedule: str  # cron, UTC ("" with runs)
    run_for: float
    completions: int = 1
    parallelism: int = 1
    runs: tuple[JobRun, ...] = ()  # recorded starts instead of the cron schedule


@dataclass(frozen=True, slots=True)
class PodRun:
    """A recorded bare pod: created ``at``; succeeds ``run_for`` after it started running (None:
    runs on) or is deleted at ``delete_at`` (None: not)."""

    at: float
    run_for: float | None = None
    delete_at: float | None = None


@dataclass(frozen=True, slots=True)
class PodTrace:
    """Bare pods of one template: named ``name``, or ``<generate_name><n>`` per run when ``name`` is ""."""

    name: str
    generate_name: str
    namespace: str
    template: Mapping[str, Any]
    runs: tuple[PodRun, ...]

    def pod_name(self, index: int) -> str:
        return self.name or f"{self.generate_name}{index:05d}"


def _rolled(template: Mapping[str, Any], n: int) -> dict[str, Any]:
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ROLLOUT_ANNOTATION: str(n)}
    return out


def schedule(
    loop: Loop,
    workloads: Workloads,
    *,
    deployments: Sequence[DeploymentTrace],
    jobs: Sequence[JobTrace],
    start: float,
    end: float,
    statefulsets: Sequence[StatefulSetTrace] = (),
    pods: Sequence[PodTrace] = (),
) -> int:
    """Create the Deployments and StatefulSets now and put every later scale, rollout, job and
    bare pod on ``loop``.

    Returns the number of events scheduled.
    """
    count = 0
    for d in deployments:
        events = scale_events(d.replicas, start, end)
        workloads.set_deployment(
            d.name, d.namespace, template=d.template, replicas=events[0][1], strategy=d.strategy
        )
        count += _scales(
            loop, workloads, events=events, name=d.name, namespace=d.namespace, kind="Deployment", end=end
        )
        absolute = [t for t in d.rollout_times if start <= t < end]
        for n, when in enumerate(sorted(daily_times(d.rollouts, start, end) + absolute), start=1):
            rollout = functools.partial(
                workloads.rollout, d.name, d.namespace, template=_rolled(d.template, n)
            )
            loop.call_at(when, rollout, name=f"trace:rollout:{d.name}")
            count += 1
    for j in jobs:
        if j.runs:
            firings = [(r.at, r.name, r.run_for) for r in j.runs if start <= r.at < end]
        else:  # named as the CronJob controller names its Jobs
            firings = [(t, f"{j.name}-{int(t // 60)}", j.run_for) for t in cron_times(j.schedule, start, end)]
        for when, name, run_for in firings:
            run = functools.partial(
                workloads.run_job,
                name,
                j.namespace,
                template=j.template,
                run_for=run_for,
                completions=j.completions,
                parallelism=j.parallelism,
            )
            loop.call_at(when, run, name=f"trace:job:{j.name}")
            count += 1
    return count + _schedule_recorded(
        loop, workloads, statefulsets=statefulsets, pods=pods, start=start, end=end
    )


def _scales(
    loop: Loop,
    workloads: Workloads,
    *,
    events: Sequence[tuple[float, int]],
    name: str,
    namespace: str,
    kind: str,
    end: float,
) -> int:
    """Put a workload's scale events after the first (its initial size) on ``loop``; how many."""
    count = 0
    for when, replicas in events[1:]:
        if when >= end:
            break
        scale = functools.partial(workloads.scale, name, namespace, replicas=replicas, kind=kind)
        loop.call_at(when, scale, name=f"trace:scale:{name}")
        count += 1
    return count


def _schedule_recorded(
    loop: Loop,
    workloads: Workloads,
    *,
    statefulsets: Sequence[StatefulSetTrace],
    pods: Sequence[PodTrace],
    start: float,
    end: float,
) -> int:
    """Create the StatefulSets now; put their scales and the bare pods' runs on ``loop``."""
    count = 0
    for s in statefulsets:
        events = scale_events(s.replicas, start, end)
        workloads.set_statefulset(
            s.name,
            s.namespace,
            template=s.template,
            replicas=events[0][1],
            parallel=s.parallel,
            claims=s.claims,
        )
        count += _scales(
            loop, workloads, events=events, name=s.name, namespace=s.namespace, kind="StatefulSet", end=end
        )
    for p in pods:
        for index, r in enumerate(p.runs):
            if not start <= r.at < end:
                continue
            name = p.pod_name(index)
            create = functools.partial(
                workloads.run_pod, name, p.namespace, template=p.template, run_for=r.run_for
            )
            loop.call_at(r.at, create, name=f"trace:pod:{name}")
            count += 1
            if r.delete_at is not None and r.delete_at < end:
                delete = functools.partial(workloads.delete_pod, name, p.namespace)
                loop.call_at(r.delete_at, delete, name=f"trace:pod:{name}")
                count += 1
    return count
