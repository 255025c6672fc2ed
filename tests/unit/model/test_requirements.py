"""Label requirement algebra (karpy.model.requirements), after Karpenter's requirement(s)_test.go."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpy.model import labels as wk
from karpy.model.requirements import (
    DOES_NOT_EXIST,
    EXISTS,
    IN,
    NOT_IN,
    OPERATORS,
    Requirement,
    Requirements,
)

K = "example.com/key"


def req(op: str, *values: str, key: str = K, min_values: int | None = None) -> Requirement:
    return Requirement.of(key, op, values, min_values)


def reqs(*items: Requirement) -> Requirements:
    return Requirements(items)


# -- Requirement.of and has ------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "values", "allowed", "denied"),
    [
        (IN, ("a", "b"), ["a", "b"], ["c", ""]),
        (NOT_IN, ("a", "b"), ["c", "", "1"], ["a", "b"]),
        (EXISTS, (), ["a", "", "1"], []),
        (DOES_NOT_EXIST, (), [], ["a", "", "1"]),
        ("Gt", ("5",), ["6", "100", "+7"], ["5", "4", "-1", "abc", "6.5", ""]),
        ("Gte", ("5",), ["5", "6"], ["4", "x"]),
        ("Lt", ("5",), ["4", "0", "-3"], ["5", "6", "abc", "4.0"]),
        ("Lte", ("5",), ["5", "-5"], ["6", "five"]),
        ("Gt", ("-2",), ["-1", "0"], ["-2", "-3"]),
        (IN, (), [], ["a"]),
    ],
)
def test_has(op: str, values: tuple[str, ...], allowed: list[str], denied: list[str]) -> None:
    requirement = req(op, *values)
    for value in allowed:
        assert requirement.has(value), (op, values, value)
    for value in denied:
        assert not requirement.has(value), (op, values, value)


@pytest.mark.parametrize(
    ("op", "values"),
    [("Gt", ()), ("Gt", ("1", "2")), ("Lt", ("abc",)), ("Gte", ("1.5",)), ("Lte", ("",)), ("Gt", ("1e3",))],
)
def test_bound_operators_take_one_integer(op: str, values: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="exactly one integer"):
        req(op, *values)


def test_unknown_operator() -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        req("Like", "a")


def test_operators_constant() -> None:
    assert {IN, NOT_IN, EXISTS, DOES_NOT_EXIST, "Gt", "Lt", "Gte", "Lte"} == OPERATORS


@pytest.mark.parametrize(
    ("requirement", "operator"),
    [
        (req(IN, "a"), IN),
        (req(NOT_IN, "a"), NOT_IN),
        (req(EXISTS), EXISTS),
        (req(DOES_NOT_EXIST), DOES_NOT_EXIST),
        (req(IN), DOES_NOT_EXIST),
        (req(NOT_IN), EXISTS),
        (req("Gt", "3"), EXISTS),  # bounds are "Exists with bounds", as upstream
        (req("Lt", "3"), EXISTS),
    ],
)
def test_operator(requirement: Requirement, operator: str) -> None:
    assert requirement.operator == operator


def test_len() -> None:
    assert len(req(IN, "a", "b")) == 2
    assert len(req(DOES_NOT_EXIST)) == 0
    assert len(req(EXISTS)) > 10**15
    assert len(req(NOT_IN, "a", "b")) == len(req(EXISTS)) - 2
    assert len(req("Gt", "1")) > 10**15


def test_is_empty() -> None:
    assert req(DOES_NOT_EXIST).is_empty()
    assert req(IN).is_empty()
    assert not req(IN, "a").is_empty()
    assert not req(NOT_IN, "a").is_empty()


def test_constructors() -> None:
    assert Requirement.exists(K) == req(EXISTS)
    assert Requirement.does_not_exist(K) == req(DOES_NOT_EXIST)
    assert Requirement.in_(K, "a", "b") == req(IN, "b", "a")


def test_min_values_carried() -> None:
    assert req(IN, "a", min_values=2).min_values == 2
    assert req(IN, "a").with_min_values(3).min_values == 3


# -- intersection ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # In x ...
        (req(IN, "a", "b"), req(IN, "b", "c"), req(IN, "b")),
        (req(IN, "a"), req(IN, "b"), req(DOES_NOT_EXIST)),
        (req(IN, "a", "b"), req(NOT_IN, "a"), req(IN, "b")),
        (req(IN, "a"), req(EXISTS), req(IN, "a")),
        (req(IN, "a"), req(DOES_NOT_EXIST), req(DOES_NOT_EXIST)),
        # NotIn x ...
        (req(NOT_IN, "a"), req(NOT_IN, "b"), req(NOT_IN, "a", "b")),
        (req(NOT_IN, "a"), req(EXISTS), req(NOT_IN, "a")),
        (req(NOT_IN, "a"), req(DOES_NOT_EXIST), req(DOES_NOT_EXIST)),
        (req(NOT_IN, "a"), req(IN, "a"), req(DOES_NOT_EXIST)),
        # complement x complement
        (req(EXISTS), req(EXISTS), req(EXISTS)),
        (req(EXISTS), req(DOES_NOT_EXIST), req(DOES_NOT_EXIST)),
        (req(DOES_NOT_EXIST), req(DOES_NOT_EXIST), req(DOES_NOT_EXIST)),
        # bounds
        (req("Gt", "1"), req(IN, "1", "2", "3", "x"), req(IN, "2", "3")),
        (req("Lt", "3"), req(IN, "1", "2", "3"), req(IN, "1", "2")),
        (req("Gt", "1"), req("Lt", "3"), Requirement(K, True, frozenset(), 2, 2)),
        (req("Gt", "1"), req("Gt", "5"), req("Gt", "5")),
        (req("Lt", "9"), req("Lt", "5"), req("Lt", "5")),
        (req("Gte", "2"), req("Lte", "2"), Requirement(K, True, frozenset(), 2, 2)),
        (req("Gt", "1"), req(NOT_IN, "5"), Requirement(K, True, frozenset({"5"}), 2, None)),
        (req("Gt", "1"), req(EXISTS), req("Gt", "1")),
        (req("Gt", "1"), req(DOES_NOT_EXIST), req(DOES_NOT_EXIST)),
        # bounds that leave no integer collapse to DoesNotExist
        (req("Gt", "5"), req("Lt", "5"), req(DOES_NOT_EXIST)),
        (req("Gt", "5"), req("Lt", "6"), req(DOES_NOT_EXIST)),
        (req("Gte", "6"), req("Lte", "5"), req(DOES_NOT_EXIST)),
        (req("Gt", "10"), req("Lt", "1"), req(DOES_NOT_EXIST)),
    ],
)
def test_intersection(a: Requirement, b: Requirement, expected: Requirement) -> None:
    assert a.intersection(b) == expected
    assert b.intersection(a) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (req(IN, "a", min_values=1), req(IN, "a", min_values=3), 3),
        (req(IN, "a", min_values=2), req(IN, "a"), 2),
        (req(IN, "a"), req(IN, "a"), None),
        (req(IN, "a", min_values=2), req(NOT_IN, "a", min_values=1), 2),
        (req("Gt", "5", min_values=2), req("Lt", "6", min_values=4), 4),  # kept when collapsing
    ],
)
def test_intersection_min_values_is_max(a: Requirement, b: Requirement, expected: int | None) -> None:
    assert a.intersection(b).min_values == expected
    assert b.intersection(a).min_values == expected


def test_intersection_of_bounds_drops_bounds_for_finite_sets() -> None:
    out = req("Gt", "1").intersection(req(IN, "2"))
    assert (out.gte, out.lte, out.complement) == (None, None, False)


def test_any_value() -> None:
    assert req(IN, "b", "a").any_value() == "a"
    assert req(EXISTS).any_value() is None
    assert req(DOES_NOT_EXIST).any_value() is None
    assert req("Gt", "5").any_value() == "6"
    assert req("Gt", "5").intersection(req(NOT_IN, "6", "7")).any_value() == "8"


def test_str() -> None:
    assert str(req(IN, "b", "a")) == f"{K} In [a, b]"
    assert str(req(EXISTS)) == f"{K} Exists"
    assert str(req("Gt", "4", min_values=2)) == f"{K} Exists >=5 minValues 2"


# -- normalization ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("beta", "stable"),
    [
        ("failure-domain.beta.kubernetes.io/zone", wk.ZONE),
        ("failure-domain.beta.kubernetes.io/region", wk.REGION),
        ("beta.kubernetes.io/arch", wk.ARCH),
        ("beta.kubernetes.io/os", wk.OS),
        ("beta.kubernetes.io/instance-type", wk.INSTANCE_TYPE),
        (K, K),
    ],
)
def test_normalization_of_beta_keys(beta: str, stable: str) -> None:
    assert Requirement.of(beta, IN, ["x"]).key == stable
    assert list(Requirements.from_labels({beta: "x"})) == [stable]


def test_normalized_keys_merge() -> None:
    merged = Requirements(
        [
            Requirement.of("beta.kubernetes.io/arch", IN, ["amd64", "arm64"]),
            Requirement.of(wk.ARCH, IN, ["arm64"]),
        ]
    )
    assert merged[wk.ARCH] == Requirement.in_(wk.ARCH, "arm64")


# -- Requirements ---------------------------------------------------------------------------


def test_requirements_merge_same_key_by_intersection() -> None:
    merged = reqs(req(IN, "a", "b"), req(IN, "b", "c"))
    assert len(merged) == 1
    assert merged[K] == req(IN, "b")


def test_add_returns_new_set() -> None:
    base = reqs(req(IN, "a", "b"))
    added = base.add(req(NOT_IN, "a"), Requirement.in_("other", "x"))
    assert base[K] == req(IN, "a", "b")
    assert added[K] == req(IN, "b")
    assert added["other"] == Requirement.in_("other", "x")
    assert base.union_with(reqs(req(IN, "a"))) == reqs(req(IN, "a"))


def test_add_keeps_an_equal_unbounded_requirement() -> None:
    """A pod repeating a claim's requirement leaves the claim's object in place (no new copy)."""
    mine, same = req(IN, "a", "b", min_values=1), req(IN, "a", "b", min_values=1)
    base = reqs(mine)
    assert base.add(mine)[K] is mine
    assert base.add(same)[K] is mine
    assert base.add(req(IN, "a", "b"))[K] == req(IN, "a", "b", min_values=1)  # min_values kept


def test_add_intersects_a_bounded_requirement_with_itself() -> None:
    """With bounds, ``r ∩ r`` may differ from ``r``: values outside the bounds are dropped and a
    finite set loses its bounds, so ``add`` must not keep the object."""
    bounded = Requirement(K, True, frozenset({"1", "x", "9"}), 5, None)
    assert reqs(bounded).add(bounded)[K] == bounded.intersection(bounded)
    assert reqs(bounded).add(bounded)[K].values == frozenset({"9"})
    finite = Requirement(K, False, frozenset({"7"}), 5, None)
    assert reqs(finite).add(finite)[K] == Requirement(K, False, frozenset({"7"}))


_values = st.frozensets(st.sampled_from(["1", "4", "7", "a", "b"]), max_size=3)
_bound = st.none() | st.integers(0, 8)
_reqs = st.builds(
    Requirement, st.just(K), st.booleans(), _values, _bound, _bound, st.none() | st.integers(1, 3)
)


@given(_reqs, _reqs)
def test_add_is_the_intersection(existing: Requirement, incoming: Requirement) -> None:
    assert reqs(existing).add(incoming)[K] == incoming.intersection(existing)
    assert reqs(incoming).add(incoming)[K] == incoming.intersection(incoming)
    copy = dataclasses.replace(incoming)  # equal, not identical
    assert reqs(incoming).add(copy)[K] == copy.intersection(incoming)


def test_without_and_get_or_exists() -> None:
    base = reqs(req(IN, "a"), Requirement.in_("other", "x"))
    assert list(base.without(K)) == ["other"]
    assert base.get_or_exists("missing") == Requirement.exists("missing")
    assert base.get_or_exists(K) == req(IN, "a")


def test_requirements_equality_and_hash() -> None:
    a = reqs(req(IN, "a"), Requirement.in_("x", "1"))
    b = reqs(Requirement.in_("x", "1"), req(IN, "a"))
    assert a == b
    assert hash(a) == hash(b)
    assert a != reqs(req(IN, "a"))


def test_has_min_values() -> None:
    assert reqs(req(IN, "a", min_values=1)).has_min_values()
    assert not reqs(req(IN, "a")).has_min_values()


CUSTOM = "example.com/team"


@pytest.mark.parametrize(
    ("node", "pod", "allow_undefined", "ok"),
    [
        # a custom key the node side does not define is an error ...
        (reqs(), reqs(Requirement.of(CUSTOM, IN, ["a"])), frozenset(), False),
        (reqs(), reqs(Requirement.of(CUSTOM, EXISTS)), frozenset(), False),
        (reqs(), reqs(Requirement.of(CUSTOM, "Gt", ["1"])), frozenset(), False),
        # ... unless it is negative
        (reqs(), reqs(Requirement.of(CUSTOM, NOT_IN, ["a"])), frozenset(), True),
        (reqs(), reqs(Requirement.of(CUSTOM, DOES_NOT_EXIST)), frozenset(), True),
        # well-known keys may stay undefined when allowed
        (reqs(), reqs(Requirement.of(wk.ZONE, IN, ["z1"])), wk.CORE_WELL_KNOWN, True),
        (reqs(), reqs(Requirement.of(wk.ZONE, IN, ["z1"])), frozenset(), False),
        (reqs(), reqs(Requirement.of(CUSTOM, IN, ["a"])), frozenset({CUSTOM}), True),
        # defined keys must intersect
        (
            reqs(Requirement.of(CUSTOM, IN, ["a", "b"])),
            reqs(Requirement.of(CUSTOM, IN, ["b"])),
            frozenset(),
            True,
        ),
        (
            reqs(Requirement.of(CUSTOM, IN, ["a"])),
            reqs(Requirement.of(CUSTOM, IN, ["b"])),
            frozenset(),
            False,
        ),
        (
            reqs(Requirement.of(wk.ZONE, IN, ["z1"])),
            reqs(Requirement.of(wk.ZONE, IN, ["z2"])),
            wk.CORE_WELL_KNOWN,
            False,
        ),
        (
            reqs(Requirement.of(CUSTOM, IN, ["a"])),
            reqs(Requirement.of(CUSTOM, NOT_IN, ["a"])),
            frozenset(),
            False,
        ),
        (
            reqs(Requirement.of(CUSTOM, IN, ["a"])),
            reqs(Requirement.of(CUSTOM, DOES_NOT_EXIST)),
            frozenset(),
            False,
        ),
        (
            reqs(Requirement.of(CUSTOM, DOES_NOT_EXIST)),
            reqs(Requirement.of(CUSTOM, IN, ["a"])),
            frozenset(),
            False,
        ),
        (
            reqs(Requirement.of(CUSTOM, IN, ["5"])),
            reqs(Requirement.of(CUSTOM, "Gt", ["4"])),
            frozenset(),
            True,
        ),
        (
            reqs(Requirement.of(CUSTOM, IN, ["4"])),
            reqs(Requirement.of(CUSTOM, "Gt", ["4"])),
            frozenset(),
            False,
        ),
        # both negative is not a conflict even though nothing intersects
        (
            reqs(Requirement.of(CUSTOM, NOT_IN, ["a"])),
            reqs(Requirement.of(CUSTOM, DOES_NOT_EXIST)),
            frozenset(),
            True,
        ),
        (
            reqs(Requirement.of(CUSTOM, DOES_NOT_EXIST)),
            reqs(Requirement.of(CUSTOM, NOT_IN, ["a"])),
            frozenset(),
            True,
        ),
        (
            reqs(Requirement.of(CUSTOM, DOES_NOT_EXIST)),
            reqs(Requirement.of(CUSTOM, DOES_NOT_EXIST)),
            frozenset(),
            True,
        ),
        # the node side's undefined keys never matter
        (reqs(Requirement.of(CUSTOM, IN, ["a"])), reqs(), frozenset(), True),
    ],
)
def test_compatible(node: Requirements, pod: Requirements, allow_undefined: frozenset[str], ok: bool) -> None:
    errors = node.compatible(pod, allow_undefined)
    assert (errors == []) is ok, errors
    assert node.is_compatible(pod, allow_undefined) is ok


def test_compatible_messages() -> None:
    errors = reqs().compatible(reqs(Requirement.of(CUSTOM, IN, ["a"])))
    assert errors == [f'label "{CUSTOM}" does not have known values']
    errors = reqs(Requirement.of(CUSTOM, IN, ["a"])).compatible(reqs(Requirement.of(CUSTOM, IN, ["b"])))
    assert errors == [f"key {CUSTOM}, {CUSTOM} In [b] not in {CUSTOM} In [a]"]


@pytest.mark.parametrize(
    ("a", "b", "conflicts"),
    [
        (reqs(req(IN, "a")), reqs(req(IN, "a", "b")), []),
        (reqs(req(IN, "a")), reqs(req(IN, "b")), [K]),
        (reqs(req(IN, "a")), reqs(Requirement.in_("other", "b")), []),  # disjoint keys never conflict
        (reqs(req(NOT_IN, "a")), reqs(req(DOES_NOT_EXIST)), []),
        (reqs(req(EXISTS)), reqs(req(DOES_NOT_EXIST)), [K]),
        (
            reqs(req(IN, "a"), Requirement.in_("o", "1")),
            reqs(req(IN, "b"), Requirement.in_("o", "2")),
            [K, "o"],
        ),
    ],
)
def test_intersects(a: Requirements, b: Requirements, conflicts: list[str]) -> None:
    errors = a.intersects(b)
    assert [e.split(",")[0].removeprefix("key ") for e in errors] == sorted(conflicts)
    assert a.overlaps(b) is (not conflicts)
    assert (b.intersects(a) == []) is (not conflicts)


@pytest.mark.parametrize(
    ("requirements", "expected"),
    [
        ([Requirement.of(CUSTOM, IN, ["a"])], {CUSTOM: "a"}),
        ([Requirement.of(CUSTOM, IN, ["a", "b"])], {}),
        ([Requirement.of(CUSTOM, NOT_IN, ["a"])], {}),
        ([Requirement.of(CUSTOM, EXISTS)], {}),
        ([Requirement.of(CUSTOM, DOES_NOT_EXIST)], {}),
        ([Requirement.of(wk.HOSTNAME, IN, ["n1"])], {}),
        ([Requirement.of("karpenter.sh/foo", IN, ["x"])], {}),
        ([Requirement.of("kubernetes.io/foo", IN, ["x"])], {}),
        ([Requirement.of(wk.CAPACITY_TYPE, IN, ["spot"])], {wk.CAPACITY_TYPE: "spot"}),
        ([Requirement.of(wk.ZONE, IN, ["z1"])], {wk.ZONE: "z1"}),
        ([Requirement.of(wk.NODEPOOL, IN, ["default"])], {wk.NODEPOOL: "default"}),
        ([Requirement.of("node.kubernetes.io/lifecycle", IN, ["x"])], {"node.kubernetes.io/lifecycle": "x"}),
    ],
)
def test_labels(requirements: list[Requirement], expected: dict[str, str]) -> None:
    assert Requirements(requirements).labels() == expected


def test_labels_extra_well_known_keys() -> None:
    key = "karpenter.sh/custom-well-known"
    requirements = reqs(Requirement.in_(key, "v"))
    assert requirements.labels() == {}
    assert requirements.labels(wk.CORE_WELL_KNOWN | {key}) == {key: "v"}


def test_from_labels() -> None:
    out = Requirements.from_labels({"a": "1", "b": "2"})
    assert out["a"] == Requirement.in_("a", "1")
    assert out.labels() == {"a": "1", "b": "2"}


def test_str_sorted() -> None:
    assert str(reqs(Requirement.in_("b", "1"), Requirement.in_("a", "2"))) == "a In [2], b In [1]"
