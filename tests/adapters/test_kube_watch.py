"""List+watch against the emulator: resume after a closed stream, re-list on 410 with DELETED."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from emulator import EmulatorThread

from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube import watch
from karpy.adapters.kube.client import KubeClient
from karpy.ports import WatchEvent


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


class Seen:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.events: list[tuple[str, str]] = []
        client.watch(lambda e: self.events.append((e.type, e.obj["metadata"]["name"])))

    def until(self, check: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.client.dispatch()
            if check():
                return
            time.sleep(0.01)
        raise AssertionError(f"timed out; seen {self.events}")


@pytest.fixture
def operator_client(emu: EmulatorThread) -> Any:
    client = KubeClient(host=emu.url, identity="op", timeout=5.0).start()
    yield client
    client.close()


def test_list_then_watch_then_resume_after_the_stream_closes(
    emu: EmulatorThread, kubectl: KubeClient, operator_client: KubeClient
) -> None:
    kubectl.create(node("a"))
    seen = Seen(operator_client)
    (watcher,) = watch.start_watches(operator_client, ["Node"], read_timeout=30)
    seen.until(lambda: ("ADDED", "a") in seen.events)
    kubectl.create(node("b"))
    seen.until(lambda: ("ADDED", "b") in seen.events)
    emu.call(emu.emulator.close_watches())
    kubectl.create(node("c"))
    kubectl.delete("Node", "a")
    seen.until(lambda: ("DELETED", "a") in seen.events)
    assert seen.events == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("DELETED", "a")]
    assert watcher.lists == 1 and watcher.watches >= 2  # resumed from its resourceVersion, no re-list


def test_410_relists_and_turns_vanished_objects_into_deleted(
    emu: EmulatorThread, kubectl: KubeClient, operator_client: KubeClient
) -> None:
    kubectl.create(node("a"))
    kubectl.create(node("b"))
    seen = Seen(operator_client)
    watcher = watch.Watcher(operator_client, "Node")
    operator_client.edge.call(watcher.relist())
    seen.until(lambda: len(seen.events) == 2)
    kubectl.delete("Node", "a")  # while "the watch is down"
    kubectl.create(node("c"))
    emu.run(emu.emulator.compact)
    with pytest.raises(kerrors.Gone):
        operator_client.edge.call(watcher.watch_once(), 5)
    operator_client.edge.call(watcher.relist())
    seen.until(lambda: len(seen.events) == 4)
    assert seen.events[2:] == [("DELETED", "a"), ("ADDED", "c")]


def test_the_run_loop_recovers_from_410_by_itself(
    emu: EmulatorThread, kubectl: KubeClient, operator_client: KubeClient
) -> None:
    kubectl.create(node("a"))
    seen = Seen(operator_client)
    (watcher,) = watch.start_watches(operator_client, ["Node"], read_timeout=30)
    seen.until(lambda: ("ADDED", "a") in seen.events)

    # The stream closes and its resume answers 410: the loop lists again.
    emu.run(lambda: setattr(emu.emulator, "expire_next", 1))
    emu.call(emu.emulator.close_watches())
    seen.until(lambda: watcher.lists == 2)
    kubectl.delete("Node", "a")
    kubectl.create(node("c"))
    seen.until(lambda: ("ADDED", "c") in seen.events)
    assert seen.events == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "c")]


def test_a_watcher_that_ignores_410_misses_deletions(
    emu: EmulatorThread, kubectl: KubeClient, operator_client: KubeClient
) -> None:
    """The 410 extension's reason to exist: starting over without a diffing re-list loses DELETED."""
    kubectl.create(node("a"))
    kubectl.create(node("b"))
    seen = Seen(operator_client)
    watcher = watch.Watcher(operator_client, "Node", read_timeout=0.5)
    operator_client.edge.call(watcher.relist())
    kubectl.delete("Node", "a")
    emu.run(emu.emulator.compact)
    with pytest.raises(kerrors.Gone):
        operator_client.edge.call(watcher.watch_once(), 5)
    watcher.version = ""  # the bug: on 410, watch again from "now" instead of re-listing
    operator_client.edge.call(watcher.watch_once(), 5)
    seen.until(lambda: len(seen.events) >= 2)
    operator_client.dispatch()
    assert ("DELETED", "a") not in seen.events  # the naive client still believes "a" exists
    watcher.version = None  # what Watcher.run does on Gone
    operator_client.edge.call(watcher.relist())
    seen.until(lambda: ("DELETED", "a") in seen.events)


def test_bookmarks_move_the_resume_point(emu: EmulatorThread, operator_client: KubeClient) -> None:
    watcher = watch.Watcher(operator_client, "Node", read_timeout=0.5)
    operator_client.edge.call(watcher.relist())
    before = int(watcher.version or 0)
    emu.run(lambda: emu.emulator._stamp({"metadata": {}}))  # the cluster moved on (another kind)
    operator_client.edge.call(watcher.watch_once(), 5)  # ends after 0.5 s of quiet
    assert int(watcher.version or 0) == before + 1


def test_duplicate_and_stale_events_are_dropped(operator_client: KubeClient) -> None:
    seen = Seen(operator_client)
    obj = {"kind": "Node", "metadata": {"name": "n", "resourceVersion": "5"}}
    older = {"kind": "Node", "metadata": {"name": "n", "resourceVersion": "4"}}
    for event in (
        WatchEvent("ADDED", "Node", obj),
        WatchEvent("MODIFIED", "Node", obj),
        WatchEvent("MODIFIED", "Node", older),
        WatchEvent("DELETED", "Node", obj),
        WatchEvent("DELETED", "Node", obj),
    ):
        operator_client.enqueue(event)
    operator_client.dispatch()
    assert seen.events == [("ADDED", "n"), ("DELETED", "n")]


def test_backoff_doubles_up_to_the_cap() -> None:
    backoff = watch.Backoff(first=1, cap=5)
    assert [backoff.next() for _ in range(5)] == [1, 2, 4, 5, 5]
    backoff.reset()
    assert backoff.next() == 1
