"""List+watch against the emulator: resume after a closed stream, re-list on 410 with DELETED;
how failures are logged and reported (``synced``/``healthy``/``absent``), and bad answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from emulator import EmulatorThread
from proxy import FaultProxy

from karpy.adapters.kube import client as client_mod
from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube import watch
from karpy.adapters.kube.client import KubeClient
from karpy.model import errors
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


# -- failures: one warning line naming the request, the HTTP status and the cause ---------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _watcher(kind: str = "Namespace", **kwargs: Any) -> watch.Watcher:
    return watch.Watcher(None, kind, **kwargs)  # type: ignore[arg-type]  # failed() never calls the client


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, bool]]:
    out = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    caplog.clear()
    return out


def test_a_failure_is_one_warning_line_then_debug_until_the_repeat_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy.kube.watch")
    clock = Clock()
    watcher = _watcher(clock=clock)
    cause = kerrors.Unavailable("GET /api/v1/namespaces: HTTP 500: ValueError('not enough values to unpack')")
    assert watcher.failed(cause) == 0.2
    assert _records(caplog) == [
        (
            "WARNING",
            "watch Namespace failed: GET /api/v1/namespaces: HTTP 500: "
            "ValueError('not enough values to unpack'); retrying in 0.2 s",
            False,
        )
    ]
    clock.now = 10.0
    watcher.failed(cause)
    assert [(level, "failed again (2 in a row)" in msg) for level, msg, _ in _records(caplog)] == [
        ("DEBUG", True)
    ]
    clock.now = watch.REPEAT_WARNING_SECONDS + 1
    watcher.failed(cause)
    [(level, msg, _tb)] = _records(caplog)
    assert level == "WARNING" and msg.startswith(
        "watch Namespace failed (3 in a row): GET /api/v1/namespaces"
    )
    watcher.failed(kerrors.Unavailable("GET /api/v1/namespaces: HTTP 503: overloaded"))  # a new cause: warned
    assert [level for level, _, _ in _records(caplog)] == ["WARNING"]
    assert watcher.failure == "GET /api/v1/namespaces: HTTP 503: overloaded" and watcher.failures == 4


def test_an_unexpected_exception_is_one_warning_line_and_its_traceback_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy.kube.watch")
    watcher = _watcher("Node")
    try:
        raise ValueError("not enough values to unpack")
    except ValueError as exc:
        watcher.failed(exc)
    (warning, debug) = _records(caplog)
    assert warning == (
        "WARNING",
        "watch Node failed: ValueError: not enough values to unpack; retrying in 0.2 s",
        False,
    )
    assert debug[0] == "DEBUG" and debug[2]  # the traceback, at debug level only


def test_a_resource_not_served_is_noted_once_at_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy.kube.watch")
    changes: list[tuple[bool, bool, bool]] = []
    watcher = _watcher("EC2NodeClass", on_change=lambda w: changes.append((w.synced, w.healthy, w.absent)))
    missing = errors.NotFound(
        "GET /apis/karpenter.k8s.aws/v1/ec2nodeclasses: HTTP 404: the resource is not declared"
    )
    watcher.failed(missing)
    watcher.failed(missing)
    records = _records(caplog)
    assert [level for level, _, _ in records] == ["INFO", "DEBUG"]
    assert "watch EC2NodeClass (/apis/karpenter.k8s.aws/v1/ec2nodeclasses): GET" in records[0][1]
    assert "HTTP 404" in records[0][1] and "not served" in records[0][1]
    assert watcher.absent and changes == [(False, False, True)]


class FlakyKube:
    """A KubeClient stand-in for Watcher.run: lists answer (or fail) as scripted, watches end soon."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.events: list[WatchEvent] = []

    async def request(self, method: str, path: str) -> Any:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def stream(self, path: str, **kwargs: Any) -> Any:
        kwargs["on_open"]()
        await asyncio.sleep(0.001)  # a real stream suspends; this one then ends (no resourceVersions)
        if False:
            yield {}

    def enqueue(self, event: WatchEvent) -> None:
        self.events.append(event)


def test_synced_stays_true_but_healthy_drops_while_a_list_fails_and_returns_after(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.kube.watch")
    listed = {"metadata": {}, "items": [node("a")]}
    down = kerrors.Unavailable("GET /api/v1/nodes: HTTP 503: etcd leader changed")
    kube = FlakyKube([listed, down, down, listed])
    states: list[tuple[bool, bool]] = []
    watcher = watch.Watcher(
        kube,  # type: ignore[arg-type]
        "Node",
        on_change=lambda w: states.append((w.synced, w.healthy)),
        backoff=watch.Backoff(first=0.001, cap=0.001),
    )

    async def run_until_recovered() -> None:
        task = asyncio.get_running_loop().create_task(watcher.run())
        while watcher.lists < 2:
            await asyncio.sleep(0.001)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(run_until_recovered(), 5))
    assert states[:3] == [(True, False), (True, True), (True, False)]  # listed, working, failing
    assert states[-1] == (True, True) and watcher.failures == 0
    messages = [r.getMessage() for r in caplog.records]
    assert (
        messages[0]
        == "watch Node failed: GET /api/v1/nodes: HTTP 503: etcd leader changed; retrying in 0.0 s"
    )
    assert messages[1] == "watch Node (/api/v1/nodes) works again after 2 failed requests"


def test_bad_answers_become_errors_naming_the_request_and_status() -> None:
    with pytest.raises(
        kerrors.Unavailable, match=r"^GET /api/v1/nodes: HTTP 200: the answer is not JSON: '<html>"
    ):
        client_mod.decode_answer("GET", "/api/v1/nodes", 200, b"<html>oops</html>")
    with pytest.raises(
        kerrors.Unavailable, match=r"^GET /api/v1/nodes: HTTP 200: the answer is JSON but not an"
    ):
        client_mod.decode_answer("GET", "/api/v1/nodes", 200, b"[1, 2]")
    with pytest.raises(kerrors.Unavailable, match=r"^GET /api/v1/nodes: HTTP 502: <html>bad gateway"):
        client_mod.decode_answer("GET", "/api/v1/nodes", 502, b"<html>bad gateway</html>")
    with pytest.raises(errors.KubeError, match=r"^HTTP 403: GET /api/v1/nodes: nodes is forbidden$"):
        client_mod.decode_answer(
            "GET", "/api/v1/nodes", 403, b'{"kind": "Status", "message": "nodes is forbidden"}'
        )
    assert client_mod.decode_answer("DELETE", "/api/v1/nodes/a", 200, b"") == {}


def test_a_watcher_over_http_reports_bodies_it_cannot_use() -> None:
    """Over stock kmock: reactions answering text, a JSON list, or items that are not a list."""
    stock = EmulatorThread(stock=True)
    client = KubeClient(host=stock.url, timeout=5.0).start()
    try:
        stock.run(lambda: stock.server["get /api/v1/nodes"] << b"<html>oops</html>")
        stock.run(lambda: stock.server["get /apis/apps/v1/daemonsets"] << [1, 2])
        stock.run(lambda: stock.server["get /apis/policy/v1/poddisruptionbudgets"] << {"items": {"a": 1}})
        expected = {
            "Node": "GET /api/v1/nodes: HTTP 200: the answer is not JSON: '<html>oops</html>'",
            "DaemonSet": "GET /apis/apps/v1/daemonsets: HTTP 200: the answer is JSON but not an object: [1,",
            "PodDisruptionBudget": "GET /apis/policy/v1/poddisruptionbudgets: the list answer's items",
            "Namespace": "GET /api/v1/namespaces: HTTP 500: ValueError('not enough values to unpack",
        }
        for kind, text in expected.items():
            with pytest.raises(kerrors.Unavailable) as caught:
                client.edge.call(watch.Watcher(client, kind).relist(), 5)
            assert str(caught.value).startswith(text), str(caught.value)
        pods = watch.Watcher(client, "Pod")
        client.edge.call(pods.relist(), 5)
        assert pods.synced and pods.healthy
    finally:
        client.close()
        stock.stop()


# -- relist on every failure but a plain connection failure; a server state reset -----


def _start(client: KubeClient, watcher: watch.Watcher) -> None:
    async def spawn() -> None:
        asyncio.get_running_loop().create_task(watcher.run(), name=f"watch-{watcher.kind}")

    client.edge.call(spawn(), 5.0)


def test_a_watch_answering_500_lists_again_instead_of_resuming(
    emu: EmulatorThread, kubectl: KubeClient, operator_client: KubeClient
) -> None:
    kubectl.create(node("a"))
    seen = Seen(operator_client)
    watcher = watch.Watcher(operator_client, "Node", read_timeout=30, backoff=watch.Backoff(0.05, 0.2))
    _start(operator_client, watcher)
    seen.until(lambda: ("ADDED", "a") in seen.events)
    emu.call(emu.emulator.fail("Node", 500))  # its open watch ends; list and watch answer 500
    seen.until(lambda: not watcher.healthy and watcher.failures >= 2)
    kubectl.delete("Node", "a")
    kubectl.create(node("c"))
    emu.run(lambda: emu.emulator.heal("Node"))
    seen.until(lambda: ("ADDED", "c") in seen.events)
    assert seen.events == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "c")]
    assert watcher.lists == 2 and watcher.healthy  # listed again (a resume would not have)


def test_an_api_server_restarted_empty_is_detected_and_listed_again(
    emu: EmulatorThread,
    kubectl: KubeClient,
    operator_client: KubeClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server comes back with its state reset (an etcd restore): the resumed watch answers
    "too large resource version", the list a version lower than the one held. The watcher lists
    again; an object gone arrives as DELETED, and objects re-created under the same names (with
    lower resourceVersions, one with the very version of its predecessor, and other uids) are
    delivered, not dropped as stale; so is one re-created after the relist."""
    caplog.set_level(logging.INFO, logger="karpy.kube.watch")
    for name in ("a", "b", "c"):  # resourceVersions 1, 2, 3
        kubectl.create(node(name))
    for i in range(3):
        kubectl.patch("Node", "a", {"metadata": {"labels": {"step": str(i)}}})
    seen = Seen(operator_client)
    # (a 1 s backoff: the objects below are re-created before the watcher lists again)
    watcher = watch.Watcher(operator_client, "Node", read_timeout=30, backoff=watch.Backoff(1.0, 1.0))
    _start(operator_client, watcher)
    seen.until(lambda: len(seen.events) == 3)
    held = int(watcher.version or 0)
    assert held == 6
    emu.call(emu.emulator.restart_empty())
    kubectl.create(node("a"))  # resourceVersion 1 again
    kubectl.create(node("b"))  # 2: b's own version before the reset
    seen.until(lambda: ("MODIFIED", "b") in seen.events)
    assert seen.events[3:] == [("DELETED", "c"), ("MODIFIED", "a"), ("MODIFIED", "b")]
    assert watcher.resets == 1 and watcher.lists == 2
    assert int(watcher.version or 0) < held
    kubectl.create(node("c"))  # 3: c's own version before the reset
    seen.until(lambda: len(seen.events) == 7)
    assert seen.events[-1] == ("ADDED", "c")
    messages = [r.getMessage() for r in caplog.records]
    assert any("Too large resource version: 6, current: " in m for m in messages)
    assert any("the API server's state was reset" in m and f"lower than {held}" in m for m in messages)


def test_a_connection_failure_resumes_and_a_reconnect_restarts_the_backoff(
    emu: EmulatorThread, kubectl: KubeClient
) -> None:
    proxy = FaultProxy(emu.url)
    client = KubeClient(host=proxy.url, identity="op", timeout=2.0).start()
    try:
        kubectl.create(node("a"))
        seen = Seen(client)
        watcher = watch.Watcher(client, "Node", read_timeout=30, backoff=watch.Backoff(0.05, 0.2))
        _start(client, watcher)
        seen.until(lambda: ("ADDED", "a") in seen.events)

        proxy.cut()
        seen.until(lambda: watcher.backoff.failures >= 3 and not watcher.healthy)
        proxy.restore()
        seen.until(lambda: watcher.healthy)
        assert watcher.backoff.failures == 0  # the watch opened: no event came, nothing changed
        assert seen.events == [("ADDED", "a")]

        proxy.cut()
        seen.until(lambda: watcher.failures >= 2)
        kubectl.delete("Node", "a")  # while the watcher cannot connect
        kubectl.create(node("c"))
        proxy.restore()
        seen.until(lambda: ("ADDED", "c") in seen.events)
        assert seen.events == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "c")]
        assert watcher.lists == 1  # resumed from its resourceVersion both times, never listed again
    finally:
        client.close()
        proxy.stop()


def test_which_failures_resume_and_which_list_again() -> None:
    try:
        raise ConnectionRefusedError(111, "refused")
    except OSError:
        try:
            raise kerrors.Unavailable("WATCH /api/v1/nodes: ConnectionRefusedError") from None
        except kerrors.Unavailable as exc:
            refused = exc
    assert watch.resumable(refused)
    assert watch.resumable(errors.TooManyRequests("WATCH /api/v1/nodes: slow down"))
    for status in (500, 503, 504, 403, 400):
        assert not watch.resumable(kerrors.from_status(status, {"message": "x"}, what="WATCH /api/v1/nodes"))
    assert not watch.resumable(kerrors.Gone("too old"))
    assert not watch.resumable(ValueError("a bad answer"))


class StreamKube:
    """A KubeClient stand-in whose watch streams the given lines."""

    def __init__(self, lines: list[dict[str, Any]]) -> None:
        self.lines = lines
        self.events: list[WatchEvent] = []

    async def stream(self, path: str, **kwargs: Any) -> Any:
        kwargs["on_open"]()
        for line in self.lines:
            yield line

    def enqueue(self, event: WatchEvent) -> None:
        self.events.append(event)


def test_an_event_older_than_the_resume_point_means_a_reset() -> None:
    kube = StreamKube(
        [
            {"type": "ADDED", "object": {"metadata": {"name": "x", "resourceVersion": "51"}}},
            {"type": "ADDED", "object": {"metadata": {"name": "y", "resourceVersion": "3"}}},
        ]
    )
    watcher = watch.Watcher(kube, "Node")  # type: ignore[arg-type]
    watcher.version = "50"
    with pytest.raises(watch.StateReset, match="resourceVersion 3 is lower than 50"):
        asyncio.run(watcher.watch_once())
    assert [e.obj["metadata"]["name"] for e in kube.events] == ["x"]


def test_a_watch_failing_at_once_after_opening_keeps_backing_off() -> None:
    """A watch that opens, then fails within SHORT_WATCH_SECONDS (an ERROR event at once) is no
    reconnect: the backoff keeps growing, so a server doing that is not listed in a tight loop;
    one that fails later was a reconnect: the backoff starts over."""
    error = {"type": "ERROR", "object": {"code": 500, "message": "etcd is sad"}}
    for lasted, failures in ((0.0, 3), (watch.SHORT_WATCH_SECONDS, 0)):
        clock = Clock()
        watcher = watch.Watcher(StreamKube([error]), "Node", clock=clock)  # type: ignore[arg-type]
        watcher.backoff.failures = 3
        with pytest.raises(kerrors.Unavailable, match="etcd is sad"):
            asyncio.run(watcher.watch_once())
        assert watcher.backoff.failures == 0  # it opened
        clock.now = lasted
        watcher._short_watch()
        assert watcher.backoff.failures == failures


def test_connection_failures_of_any_wording_are_one_warning_per_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """During one outage the transport's words alternate (disconnected, reset, refused): one line."""
    caplog.set_level(logging.DEBUG, logger="karpy.kube.watch")
    watcher = _watcher("Node")

    def unreachable(error: OSError) -> kerrors.Unavailable:
        try:
            raise error
        except OSError:
            try:
                raise kerrors.Unavailable(f"GET /api/v1/nodes: {type(error).__name__}: {error}") from None
            except kerrors.Unavailable as exc:
                return exc

    for error in (ConnectionResetError(104, "reset"), ConnectionRefusedError(111, "refused")) * 2:
        watcher.failed(unreachable(error))
    assert [level for level, _, _ in _records(caplog)] == ["WARNING", "DEBUG", "DEBUG", "DEBUG"]
    watcher.failed(kerrors.Unavailable("GET /api/v1/nodes: HTTP 503: overloaded"))  # an answer: warned
    assert [level for level, _, _ in _records(caplog)] == ["WARNING"]
