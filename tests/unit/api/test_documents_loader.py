"""The YAML loader: libyaml's parser where PyYAML has it, PyYAML's own verdict and messages on
a document libyaml rejects, and the same documents from both on every shipped and upstream file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from karpy.api import documents
from karpy.api.problems import Problem

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(
    [*(ROOT / "examples").rglob("*.yaml"), *(ROOT / "tests" / "data" / "upstream-examples").rglob("*.yaml")]
)


def test_the_fast_loader_is_libyaml_where_pyyaml_has_it() -> None:
    assert yaml.__with_libyaml__, "PyYAML without libyaml: karpy reads YAML about ten times slower"
    assert issubclass(documents.Loader, yaml.CSafeLoader)
    assert not issubclass(documents.PureLoader, yaml.CSafeLoader)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_both_parsers_read_the_same_documents(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast = documents.load(text, many=True)
    assert fast == list(yaml.load_all(text, Loader=documents.PureLoader))


def test_timestamps_stay_strings() -> None:
    doc = documents.load("at: 2026-03-02T07:00:00Z\nday: 2026-03-02\n")
    assert doc == {"at": "2026-03-02T07:00:00Z", "day": "2026-03-02"}


def test_a_rejected_document_keeps_pyyaml_s_message_and_mark() -> None:
    found = documents.read_text("a: 1\n---\nkey: \tvalue: [x\n---\nb: 2\n", file="f.yaml")
    assert [doc for _, _, doc in found if not isinstance(doc, Problem)] == [{"a": 1}, {"b": 2}]
    (problem,) = [doc for _, _, doc in found if isinstance(doc, Problem)]
    assert problem.index == 1
    text = str(problem)
    assert "YAML syntax error at line 3" in text
    assert "libyaml" not in text and "did not find expected" not in text


def test_pure_verdict_stands_where_the_parsers_disagree() -> None:
    text = "a: [1, 2\nb: 3\n"
    with pytest.raises(yaml.YAMLError) as pure:
        yaml.load(text, Loader=documents.PureLoader)
    with pytest.raises(yaml.YAMLError) as caught:
        documents.load(text)
    assert str(caught.value) == str(pure.value)
