"""A long YAML stream parsed in a forked child (karpy.api.parallel) gives exactly what parsing it
in this process gives: the same documents and problems in the same order, whatever the child does."""

from __future__ import annotations

import os
from collections.abc import Iterator
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
