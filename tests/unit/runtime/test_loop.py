"""The loop: due order, priorities, requeues, wake-ups, one-shot calls; the real-time step."""

from __future__ import annotations

import time

from karpy.runtime.loop import Loop, LoopClock
from karpy.runtime.realtime import RealtimeLoop


def test_tasks_run_in_due_then_priority_then_registration_order() -> None:
    loop = Loop(start=100.0)
    seen: list[tuple[float, str]] = []
    loop.add("b", lambda: seen.append((loop.now, "b")) or None, priority=1)
    loop.add("a", lambda: seen.append((loop.now, "a")) or None, priority=0)
    loop.add("c", lambda: seen.append((loop.now, "c")) or None, at=105.0)
    loop.run(until=200.0)
    assert seen == [(100.0, "a"), (100.0, "b"), (105.0, "c")]
    assert loop.now == 200.0


def test_requeue_and_wake() -> None:
    loop = Loop()
    runs: list[float] = []

    def task() -> float:
        runs.append(loop.now)
        return 10.0

    loop.add("t", task)
    loop.run(until=25.0)
    assert runs == [0.0, 10.0, 20.0]
    loop.wake("t", after=2.0)  # sooner than the pending 30.0
    loop.run(until=28.0)
    assert runs[-1] == 27.0
    loop.run(until=40.0)
    assert runs[-1] == 37.0  # the superseded entry at 30.0 did not run twice


def test_one_shot_calls_and_clock() -> None:
    loop = Loop(start=5.0)
    clock = LoopClock(loop)
    hits: list[float] = []
    loop.call_later(3.0, lambda: hits.append(clock.now()))
    loop.call_at(1.0, lambda: hits.append(clock.now()))  # in the past: runs now
    loop.run(until=10.0)
    assert hits == [5.0, 8.0]
    assert not loop.step()


def test_realtime_loop_runs_due_tasks_at_wall_time() -> None:
    loop = RealtimeLoop(max_wait=0.05)
    start = loop.now
    ran: list[float] = []
    loop.call_later(0.02, lambda: ran.append(time.time()))
    deadline = time.time() + 1.0
    while not ran and time.time() < deadline:
        loop.step()
    assert ran and ran[0] - start >= 0.02
