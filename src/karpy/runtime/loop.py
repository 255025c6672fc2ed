"""The loop: a heap of ``(due, priority, seq, task)`` that owns ``now`` (simpy-style).

:class:`Loop` is the virtual loop used by tests and the simulator: ``step()`` pops the
next task, moves ``now`` to its due time and runs it. :class:`~karpy.runtime.realtime.RealtimeLoop`
overrides only ``step()`` to wait for the wall clock. Tasks never sleep: a task returns the
delay after which it wants to run again (``None`` = not again), and anyone can ``wake`` a
registered task to run it now (watch events do).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Loop", "LoopClock", "Task", "VirtualLoop"]

TaskFn = Callable[[], float | None]
INFINITY = float("inf")


@dataclass(eq=False)
class Task:
    """A named callable on the loop; ``due`` is when it runs next (None = idle)."""

    name: str
    fn: TaskFn
    priority: int = 0
    due: float | None = None
    runs: int = 0
    _entry: int = field(default=-1, repr=False)


class Loop:
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, int, Task]] = []
        self._seq = itertools.count()
        self.tasks: dict[str, Task] = {}

    @property
    def now(self) -> float:
        return self._now

    def add(self, name: str, fn: TaskFn, *, priority: int = 0, at: float | None = None) -> Task:
        """Register a task (run first at ``at``, default now)."""
        if name in self.tasks:
            raise ValueError(f"task {name!r} already registered")
        task = Task(name, fn, priority)
        self.tasks[name] = task
        self._push(task, self._now if at is None else at)
        return task

    def call_at(
        self, when: float, fn: Callable[[], object], *, name: str = "call", priority: int = 0
    ) -> Task:
        """Run ``fn`` once at ``when`` (one-shot; not registered by name)."""

        def once() -> None:
            fn()
            return None

        task = Task(name, once, priority)
        self._push(task, max(when, self._now))
        return task

    def call_later(
        self, delay: float, fn: Callable[[], object], *, name: str = "call", priority: int = 0
    ) -> Task:
        return self.call_at(self._now + delay, fn, name=name, priority=priority)

    def wake(self, name: str, *, after: float = 0.0) -> None:
        """Run the named task at ``now + after`` unless it is already due sooner."""
        task = self.tasks[name]
        when = self._now + after
        if task.due is None or when < task.due:
            self._push(task, when)

    def _push(self, task: Task, when: float) -> None:
        entry = next(self._seq)
        task.due = when
        task._entry = entry
        heapq.heappush(self._heap, (when, task.priority, entry, task))

    def peek(self) -> float:
        """When the next live task is due (``inf`` when none)."""
        while self._heap and self._heap[0][3]._entry != self._heap[0][2]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else INFINITY

    def step(self) -> bool:
        """Run the next due task; False when nothing is scheduled."""
        if self.peek() == INFINITY:
            return False
        when, _, _, task = heapq.heappop(self._heap)
        self._now = max(self._now, when)
        task.due = None
        task.runs += 1
        again = task.fn()
        if again is not None and task.due is None:
            self._push(task, self._now + max(0.0, again))
        return True

    def run(self, until: float) -> None:
        """Run every task due before ``until``, then set ``now`` to ``until``."""
        while self.peek() <= until:
            self.step()
        self._now = max(self._now, until)

    def run_for(self, seconds: float) -> None:
        self.run(self._now + seconds)


VirtualLoop = Loop


class LoopClock:
    """The :class:`~karpy.ports.Clock` of a loop."""

    def __init__(self, loop: Loop) -> None:
        self._loop = loop

    def now(self) -> float:
        return self._loop.now
