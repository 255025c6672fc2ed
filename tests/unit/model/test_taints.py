"""Taints and tolerations (karpy.model.taints), Kubernetes' ToleratesTaint rules."""

from __future__ import annotations

import pytest

from karpy.model.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    first_untolerated,
    tolerates,
)

TAINT = Taint("dedicated", NO_SCHEDULE, "gpu")


@pytest.mark.parametrize(
    ("toleration", "taint", "ok"),
    [
        # Equal: key and value must match
        (Toleration("dedicated", "Equal", "gpu"), TAINT, True),
        (Toleration("dedicated", "Equal", "cpu"), TAINT, False),
        (Toleration("dedicated", "Equal", ""), TAINT, False),
        (Toleration("other", "Equal", "gpu"), TAINT, False),
        (Toleration("dedicated", "", "gpu"), TAINT, True),  # empty operator means Equal
        (Toleration("dedicated", "Equal", ""), Taint("dedicated", NO_SCHEDULE), True),
        # Exists: any value of the key
        (Toleration("dedicated", "Exists"), TAINT, True),
        (Toleration("other", "Exists"), TAINT, False),
        # empty key with Exists matches every taint
        (Toleration("", "Exists"), TAINT, True),
        (Toleration("", "Exists"), Taint("x", NO_EXECUTE, "y"), True),
        # empty key with Equal matches nothing
        (Toleration("", "Equal", "gpu"), TAINT, False),
        # effect: empty matches all effects, otherwise must be equal
        (Toleration("dedicated", "Exists", effect=NO_SCHEDULE), TAINT, True),
        (Toleration("dedicated", "Exists", effect=NO_EXECUTE), TAINT, False),
        (Toleration("dedicated", "Exists", effect=PREFER_NO_SCHEDULE), TAINT, False),
        (Toleration("dedicated", "Exists", effect=""), Taint("dedicated", NO_EXECUTE), True),
        (Toleration("", "Exists", effect=PREFER_NO_SCHEDULE), Taint("a", PREFER_NO_SCHEDULE), True),
        (Toleration("", "Exists", effect=PREFER_NO_SCHEDULE), Taint("a", NO_SCHEDULE), False),
        (Toleration("dedicated", "Equal", "gpu", NO_SCHEDULE), TAINT, True),
        # unknown operator tolerates nothing
        (Toleration("dedicated", "Like", "gpu"), TAINT, False),
    ],
)
def test_tolerates(toleration: Toleration, taint: Taint, ok: bool) -> None:
    assert tolerates(toleration, taint) is ok


def test_first_untolerated_none_when_all_tolerated() -> None:
    taints = [TAINT, Taint("b", NO_EXECUTE)]
    assert first_untolerated([Toleration("", "Exists")], taints) is None
    assert first_untolerated([], []) is None


def test_first_untolerated_returns_first_in_order() -> None:
    a, b = Taint("a", NO_SCHEDULE), Taint("b", NO_SCHEDULE)
    assert first_untolerated([], [a, b]) == a
    assert first_untolerated([Toleration("a", "Exists")], [a, b]) == b


def test_first_untolerated_counts_prefer_no_schedule() -> None:
    soft = Taint("soft", PREFER_NO_SCHEDULE)
    assert first_untolerated([], [soft]) == soft
    assert first_untolerated([Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)], [soft]) is None


@pytest.mark.parametrize(
    ("taint", "text"),
    [(TAINT, "dedicated=gpu:NoSchedule"), (Taint("a", NO_EXECUTE), "a:NoExecute")],
)
def test_taint_str(taint: Taint, text: str) -> None:
    assert str(taint) == text
