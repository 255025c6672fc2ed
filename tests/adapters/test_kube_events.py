"""KubeEvents over real HTTP: the emulator behind the fault proxy (posted, retried, bounded, closed)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from emulator import EmulatorThread
from operator_harness import wait_for
from proxy import FaultProxy

from karpy.adapters.kube.client import KubeClient
from karpy.adapters.kube.events import KubeEvents
from karpy.ports import Event


@pytest.fixture
def proxy(emu: EmulatorThread) -> Iterator[FaultProxy]:
    front = FaultProxy(emu.url)
    yield front
    front.stop()


@pytest.fixture
def kube(proxy: FaultProxy) -> Iterator[KubeClient]:
    """The operator's client, through the proxy."""
    client = KubeClient(host=proxy.url, identity="karpy-0", timeout=2.0).start()
    yield client
    client.close()


def event(note: str, *, name: str = "default-abcde") -> Event:
    return Event(time.time(), "NodeClaim", name, "", "Launched", note)


def notes(kubectl: KubeClient) -> list[str]:
    return sorted(e["note"] for e in kubectl.list("Event", "default"))


def test_events_recorded_during_a_cut_are_posted_soon_after_the_restore(
    proxy: FaultProxy, kube: KubeClient, kubectl: KubeClient
) -> None:
    sink = KubeEvents(kube, backoff_first=0.1, backoff_cap=0.4)
    sink.record(event("before"))
    wait_for(lambda: sink.posted == 1, what="the first event posted")
    proxy.cut()
    cut_at = time.monotonic()
    for i in range(3):
        sink.record(event(f"cut-{i}"))
    # 4 s: uncapped, the attempts would be 0.1, 0.3, 0.7, 1.5, 3.1 and 6.3 s in (2.3 s after the restore)
    time.sleep(max(0.0, cut_at + 4.0 - time.monotonic()))
    assert sink.posted == 1
    assert sink.failed >= 8  # capped at 0.4 s: an attempt at least every 0.4 s
    assert notes(kubectl) == ["before"]
    proxy.restore()
    restored = time.monotonic()
    wait_for(lambda: sink.posted == 4, timeout=5.0, what="the events of the cut posted")
    assert time.monotonic() - restored < 1.5
    assert notes(kubectl) == ["before", "cut-0", "cut-1", "cut-2"]
    assert (sink.dropped, sink.rejected, sink.queued) == (0, 0, 0)


def test_the_queue_keeps_the_newest_events_and_logs_the_overflow_once(
    proxy: FaultProxy, kube: KubeClient, kubectl: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.kube.events")
    sink = KubeEvents(kube, max_queued=3, in_flight=1, backoff_first=1.0, backoff_cap=1.0)
    proxy.cut()
    sink.record(event("e0"))
    wait_for(lambda: sink.failed == 1, what="the first attempt failed")  # the worker sleeps 1 s now
    for i in range(1, 8):
        sink.record(event(f"e{i}"))
    most = 0
    deadline = time.monotonic() + 2.5  # the records, then two more failed attempts
    while time.monotonic() < deadline:
        most = max(most, sink.queued)
        time.sleep(0.01)
    assert most == 3  # the bound holds while nothing is posted, not only after an attempt
    assert (sink.dropped, sink.queued, sink.posted) == (5, 3, 0)
    assert sink.failed >= 2
    proxy.restore()
    wait_for(lambda: sink.posted == 3, what="the queued events posted")
    assert notes(kubectl) == ["e5", "e6", "e7"]
    full = [r for r in caplog.records if "the queue is full" in r.getMessage()]
    assert len(full) == 1 and full[0].levelno == logging.WARNING
    failing = [r for r in caplog.records if "posting failed:" in r.getMessage()]
    assert len(failing) == 1 and failing[0].levelno == logging.WARNING  # one line per outage
    wait_for(
        lambda: any("5 dropped while the queue was full" in r.getMessage() for r in caplog.records),
        what="the burst summed up once drained",
    )
    assert any("works again" in r.getMessage() for r in caplog.records)


def test_recording_never_waits_for_the_api_server_and_repeats_are_deduplicated(
    proxy: FaultProxy, kube: KubeClient, kubectl: KubeClient
) -> None:
    sink = KubeEvents(kube)
    proxy.latency = 1.0  # every request answers a second late
    started = time.monotonic()
    for _ in range(5):
        sink.record(event("same"))
    sink.record(event("other"))
    assert time.monotonic() - started < 0.2
    wait_for(lambda: sink.posted == 2, what="the two distinct events posted")
    assert notes(kubectl) == ["other", "same"]


def test_closing_the_client_ends_the_worker_and_says_what_was_not_posted(
    proxy: FaultProxy, kubectl: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="karpy.kube.events")
    kube = KubeClient(host=proxy.url, identity="karpy-0", timeout=2.0).start()
    sink = KubeEvents(kube, backoff_first=0.1, backoff_cap=0.2)
    proxy.cut()
    sink.record(event("a"))
    sink.record(event("b"))
    wait_for(lambda: sink.failed >= 2, what="posts failing")
    started = time.monotonic()
    kube.close()
    assert time.monotonic() - started < 3.0
    assert sink._worker is not None and sink._worker.done()
    assert any("2 not posted (the client closed)" in r.getMessage() for r in caplog.records)
    proxy.restore()
    time.sleep(0.3)
    assert sink.posted == 0 and notes(kubectl) == []
    sink.record(event("after close"))  # a late record neither raises nor posts
    assert sink.posted == 0
