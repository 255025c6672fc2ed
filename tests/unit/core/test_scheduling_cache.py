"""The identity caches the scheduler keeps across solves (``karpy.core.scheduling.cache``)."""

from __future__ import annotations

from karpy.core.scheduling.cache import IdentityCache, ObjectMemo, by_identity


def test_object_memo_hits_only_the_same_object() -> None:
    memo: ObjectMemo[int] = ObjectMemo(8)
    builds: list[int] = []

    def build(value: int) -> int:
        builds.append(value)
        return value

    a, equal_to_a = {"k": "v"}, {"k": "v"}
    assert memo.get(a, lambda: build(1)) == 1
    assert memo.get(a, lambda: build(2)) == 1  # same object: no rebuild
    assert memo.get(equal_to_a, lambda: build(3)) == 3  # equal is not enough
    assert memo.get(a, lambda: build(4), check=lambda v: v == 2) == 4  # the check refuses the stored value
    assert builds == [1, 3, 4]


def test_object_memo_of_builds_from_the_object_once_per_object() -> None:
    memo: ObjectMemo[int] = ObjectMemo(8)
    seen: list[object] = []

    def size(obj: dict[str, str]) -> int:
        seen.append(obj)
        return len(obj)

    a, equal_to_a = {"k": "v"}, {"k": "v"}
    assert memo.of(a, size) == 1
    assert memo.of(a, size) == 1
    assert memo.of(equal_to_a, size) == 1
    assert seen == [a, equal_to_a] and seen[1] is equal_to_a  # built again for an equal object
    assert memo.get(a, lambda: 7) == 1  # one table with get


def test_object_memo_is_bounded() -> None:
    memo: ObjectMemo[int] = ObjectMemo(2)
    keys = [object() for _ in range(3)]
    for i, key in enumerate(keys):
        memo.get(key, lambda i=i: i)  # type: ignore[misc]
    assert memo.get(keys[0], lambda: 99) == 99  # cleared when full
    assert memo.get(keys[2], lambda: 98) == 2


def test_identity_cache_matches_by_identity_parts() -> None:
    cache: IdentityCache[str] = IdentityCache(2)
    big = tuple(range(10))
    assert cache.get((by_identity(big),), lambda: "first") == "first"
    assert cache.get((by_identity(big),), lambda: "again") == "first"
    assert cache.get((by_identity(tuple(range(10))),), lambda: "other") == "other"


def test_identity_cache_latest_is_the_value_found_or_built_last() -> None:
    cache: IdentityCache[str] = IdentityCache(2)
    assert cache.latest() is None
    cache.get(("a",), lambda: "A")
    cache.get(("b",), lambda: "B")
    assert cache.latest() == "B"
    cache.get(("a",), lambda: "again")  # found: now the latest
    assert cache.latest() == "A"
    cache.clear()
    assert cache.latest() is None
