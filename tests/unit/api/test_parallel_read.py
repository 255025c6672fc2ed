"""A long YAML stream parsed in a forked child (karpy.api.parallel) gives exactly what parsing it
in this process gives: the same documents and problems in the same order, whatever the child does."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from karpy.api import documents, parallel
from karpy.api import load as api_load
from processes import children

pytestmark = pytest.mark.skipif(not parallel.available(), reason="forks on Linux only")


def _pod(i: int) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: p{i}
  namespace: default
  labels: &labels {{app: a{i % 7}}}
spec:
  containers:
    - name: app
      image: nginx
      resources: {{requests: {{cpu: {100 + i}m, memory: 64Mi}}}}
  nodeSelector: *labels
"""


def _stream(n: int) -> str:
    parts = []
    for i in range(n):
        if i % 97 == 5:
            parts.append("---\nkind: [unclosed\n")  # a syntax error: a Problem of its own
        elif i % 89 == 7:
            parts.append("---\n# an empty document\n")
        else:
            parts.append(_pod(i))
    return "".join(parts)


@pytest.mark.parametrize("n", [1, parallel.BATCH, parallel.BATCH + 1, 1234])
def test_the_child_parses_what_this_process_parses(n: int) -> None:
    text = _stream(n)
    here = documents.read_text(text, file="pods.yaml")
    forked = list(documents.iter_text(text, file="pods.yaml", parallel=True))
    assert forked == here
    assert any(isinstance(doc, documents.Problem) for _, _, doc in here) or n < 6
    first = next(doc for _, _, doc in forked if isinstance(doc, dict))
    assert first["spec"]["nodeSelector"] is first["metadata"]["labels"]  # an alias stays one object


def _parse_from(texts: list[str], parent: int, die_after: int | None) -> object:
    def parse(start: int) -> Iterator[tuple[str, int, object]]:
        for index in range(start, len(texts)):
            if die_after is not None and os.getpid() != parent and index == die_after:
                os._exit(3)  # the child dies mid-stream
            yield ("f", index, texts[index])

    return parse


@pytest.mark.parametrize("die_after", [0, 1, parallel.BATCH - 1, parallel.BATCH, 450, None])
def test_a_child_that_dies_costs_nothing_but_time(die_after: int | None) -> None:
    texts = [f"doc {i}" for i in range(500)]
    parse = _parse_from(texts, os.getpid(), die_after)
    got = list(parallel.parsed_in_a_child(parse))  # type: ignore[arg-type]
    assert got == [("f", i, t) for i, t in enumerate(texts)]  # each once, in order


def _children() -> set[int]:
    return set(children(os.getpid(), zombies=True))  # a child not reaped counts


def test_a_caller_that_stops_early_ends_and_reaps_the_child() -> None:
    before = _children()
    stream = documents.iter_text(_stream(3000), file="pods.yaml", parallel=True)
    assert next(stream)[1] == 0
    assert _children() - before  # the child is parsing
    stream.close()
    assert _children() - before == set()  # killed and reaped: not even a zombie


def test_load_paths_gives_the_same_loaded_with_and_without_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pods.yaml").write_text(_stream(1500))
    (tmp_path / "pool.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p, bogus: 1}\n"
        "spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x},"
        " requirements: []}}}\n"
    )
    monkeypatch.setattr(documents, "PARALLEL_DOCUMENTS", 1000)
    forked = api_load.load_paths([tmp_path])
    monkeypatch.setattr(documents, "PARALLEL_DOCUMENTS", 10**9)
    here = api_load.load_paths([tmp_path])
    assert len(forked.pods) == len(here.pods) > 1000
    assert [p.name for p in forked.pods] == [p.name for p in here.pods]
    assert forked.pods == here.pods
    assert forked.problems == here.problems and len(here.problems) >= 15  # the syntax errors
    assert forked.warnings == here.warnings and forked.skipped == here.skipped
    assert [p.name for p in forked.node_pools] == ["p"]


def _wait_until(done: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.02)
    return False


def test_a_started_child_sends_the_whole_stream_before_the_caller_reads() -> None:
    # far more than a pipe holds: the child finishes (a zombie, not reaped) while nothing is read
    texts = [f"document {i} " + "x" * 2000 for i in range(1500)]
    parse = _parse_from(texts, os.getpid(), None)
    before = _children()
    with parallel.Started(parse) as started:  # type: ignore[arg-type]
        (child,) = _children() - before
        assert _wait_until(lambda: child not in children(os.getpid())), "the child never finished"
        assert child in _children()  # ended, not yet reaped
        assert list(started) == [("f", i, t) for i, t in enumerate(texts)]
    assert _children() - before == set()


def test_a_started_child_that_is_never_read_is_ended_and_reaped() -> None:
    before = _children()

    def slow(start: int) -> Iterator[tuple[str, int, object]]:
        yield ("f", start, "first")
        time.sleep(60)  # (a child still parsing when the caller gives up)
        yield ("f", start + 1, "second")

    started = parallel.Started(slow)
    assert _children() - before  # forked at once, before anything is asked for
    started.close()
    started.close()  # (again: nothing left to do)
    assert _children() - before == set()


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "pods.yaml").write_text(_stream(1500))
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "few.yaml").write_text(_stream(3))
    (tmp_path / "empty").mkdir()
    return tmp_path


def test_a_started_reading_loads_as_the_paths_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path)
    paths = [folder, folder / "empty", folder / "missing.yaml"]
    monkeypatch.setattr(documents, "PARALLEL_DOCUMENTS", 10**9)
    here = api_load.load_paths(paths)
    monkeypatch.setattr(documents, "PARALLEL_DOCUMENTS", 1000)
    before = _children()
    with documents.Reading(paths) as reading:
        assert len(_children() - before) == 1  # the long stream's child, started with the reading
        read = api_load.load_paths(reading)
    assert _children() - before == set()
    assert len(read.pods) == len(here.pods) > 1000
    assert read.pods == here.pods
    assert read.problems == here.problems and any("missing.yaml" in p.file for p in read.problems)
    assert read.warnings == here.warnings
    assert read.skipped == here.skipped and any("no objects found" in p.message for p in read.skipped)


def test_a_reading_left_unread_ends_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "PARALLEL_DOCUMENTS", 1000)
    before = _children()
    with pytest.raises(RuntimeError), documents.Reading([_folder(tmp_path)]):
        assert _children() - before
        raise RuntimeError("the caller fails before it reads")
    assert _children() - before == set()
