"""No module under src/karpy over 600 lines and no function graded E or F by radon (cyclomatic
complexity 31 or more): the limits docs/architecture.md keeps the code to."""

from __future__ import annotations

from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit

SRC = Path(__file__).resolve().parents[2] / "src" / "karpy"
MAX_LINES = 600


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(SRC).as_posix())
def test_module_is_at_most_600_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines (at most {MAX_LINES})"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(SRC).as_posix())
def test_no_function_is_graded_e_or_f(path: Path) -> None:
    graded = [
        f"{block.fullname} ({cc_rank(block.complexity)} {block.complexity})"
        for block in cc_visit(path.read_text(encoding="utf-8"))
        if cc_rank(block.complexity) in ("E", "F")
    ]
    assert not graded, f"{path.relative_to(SRC)}: {', '.join(graded)}"


def test_the_grading_finds_a_complex_function() -> None:
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(40))
    (block,) = cc_visit(f"def f(x):\n{branches}\n    return -1\n")
    assert cc_rank(block.complexity) == "F"
