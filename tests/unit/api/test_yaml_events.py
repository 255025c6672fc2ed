"""The event reader builds what PyYAML's loader builds, and hands back what it does not cover.

Compared with ``yaml.load`` under the same loader class: generated documents (hypothesis) written
in block and flow style, hand-written scalars each of YAML 1.1's implicit types, every shipped
and upstream example, and the texts it must leave to the loader (anchors, tags, merge keys,
complex keys, a second document, a loader with constructors of its own).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import documents, yaml_events
from karpy.sim import scenario

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(
    [
        *(ROOT / "examples").rglob("*.yaml"),
        *(ROOT / "tests" / "data" / "upstream-examples").rglob("*.yaml"),
        *(ROOT / "tests" / "conformance").rglob("*.yaml"),
    ]
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and types compared (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _both(text: str, loader: Any = documents.Loader, *, many: bool = False) -> tuple[Any, Any]:
    fast = yaml_events.load(text, loader, many=many)
    slow = list(yaml.load_all(text, Loader=loader)) if many else yaml.load(text, Loader=loader)
    return fast, slow


def test_it_runs_on_libyaml() -> None:
    assert yaml_events.available()


SCALARS = [
    "", "~", "null", "Null", "NULL", "true", "True", "FALSE", "yes", "No", "on", "OFF", "y", "n",
    "0", "-0", "+12", "012", "0o17", "0x1F", "0b101", "1_000", "190:20:30", "1e3", "1.5e3",
    "-1.5E-3", ".5", "6.8523015e+5", "685_230.15", "190:20:30.15", ".inf", "-.Inf", ".NaN",
    "1.0", "100m", "1Gi", "2.5Gi", "v1", "08:30", "12:00:01", "2026-03-02", "2026-03-02T07:00:00Z",
    "a b", "=", "0.", "._", "1__0", "0x_1",
]  # fmt: skip


@pytest.mark.parametrize("value", SCALARS)
def test_each_plain_scalar_resolves_as_the_loader_does(value: str) -> None:
    for loader in (documents.Loader, scenario._Loader):
        try:
            fast, slow = _both(f"k: {value}\n", loader)
        except yaml_events.Unsupported:
            continue  # e.g. '=' (the value tag): the loader's business
        assert _same(fast, slow), (value, fast, slow)
    quoted, slow = _both(f"k: '{value}'\n")
    assert quoted == slow == {"k": value}


_KEYS = st.text(alphabet="abcxyz019-_./", min_size=1, max_size=8)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(SCALARS),
)
_TREES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(tree=_TREES, flow=st.booleans())
def test_generated_documents_read_the_same(tree: Any, flow: bool) -> None:
    text = yaml.safe_dump(tree, default_flow_style=flow, allow_unicode=True)
    fast, slow = _both(text)
    assert _same(fast, slow)


@settings(max_examples=100, deadline=None)
@given(trees=st.lists(_TREES, min_size=0, max_size=4))
def test_streams_of_documents_read_the_same(trees: list[Any]) -> None:
    text = yaml.safe_dump_all(trees)
    fast, slow = _both(text, many=True)
    assert _same(fast, slow)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_reads_the_same(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        fast, slow = _both(text, many=True)
    except yaml_events.Unsupported:
        pytest.fail(f"{path}: the event reader left a shipped example to the loader")
    assert _same(fast, slow)


LEFT_TO_THE_LOADER = [
    "a: *x\nb: &x 1\n",  # an alias before its anchor
    "a: &x 1\nb: &x 2\n",  # a duplicate anchor
    "a: !!str 1\n",  # explicit tag
    "a: !custom x\n",
    "base: &b {x: 1}\nc:\n  <<: *b\n",  # merge key
    "<<: {x: 1}\n",
    "? [1, 2]\n: x\n",  # a sequence as a key
    "? {a: 1}\n: x\n",
    "a: 1\n---\nb: 2\n",  # a second document where one is expected
    "=: 1\n",  # the value tag
]


@pytest.mark.parametrize("text", LEFT_TO_THE_LOADER)
def test_what_it_does_not_cover_goes_back_to_the_loader(text: str) -> None:
    with pytest.raises(yaml_events.Unsupported):
        yaml_events.load(text, documents.Loader)


def test_documents_load_still_reads_what_the_events_do_not_cover() -> None:
    assert documents.load("base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n") == {
        "base": {"x": 1},
        "c": {"x": 1, "y": 2},
    }
    assert documents.load("a: !!str 1\n") == {"a": "1"}
    with pytest.raises(yaml.YAMLError, match="expected a single document"):
        documents.load("a: 1\n---\nb: 2\n")


def test_anchors_and_aliases_are_the_same_objects_as_pyyaml_makes() -> None:
    text = "a: &m {x: [1, 2]}\nb: *m\nc: &s [&v 3, *v]\nd: *s\n"
    fast, slow = _both(text)
    assert _same(fast, slow)
    assert fast["a"] is fast["b"] and fast["c"] is fast["d"]
    looped = yaml_events.load("&r {self: *r}\n", documents.Loader)
    assert looped["self"] is looped


def test_timestamps_are_left_to_a_loader_that_resolves_them() -> None:
    with pytest.raises(yaml_events.Unsupported):
        yaml_events.load("at: 2026-03-02\n", yaml.CSafeLoader)
    assert yaml_events.load("at: 2026-03-02\n", documents.Loader) == {"at": "2026-03-02"}


def test_a_loader_with_constructors_of_its_own_is_not_bypassed() -> None:
    class Upper(documents.Loader):  # type: ignore[misc,valid-type]
        pass

    Upper.add_constructor("tag:yaml.org,2002:str", lambda loader, node: node.value.upper())
    with pytest.raises(yaml_events.Unsupported):
        yaml_events.load("a: b\n", Upper)
    assert documents.load("a: b\n", fast=Upper) == {"A": "B"}


def test_syntax_errors_are_libyaml_s() -> None:
    with pytest.raises(yaml.YAMLError):
        yaml_events.load("a: [1, 2\nb: 3\n", documents.Loader)


def test_empty_text_is_no_document() -> None:
    assert yaml_events.load("", documents.Loader) is None
    assert yaml_events.load("# only a comment\n", documents.Loader, many=True) == []
    assert yaml_events.load("---\n", documents.Loader) is None
