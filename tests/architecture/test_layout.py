"""Every module under src/karpy opens with a docstring saying what it does (habit 11)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "karpy"


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_there_are_modules() -> None:
    assert (SRC / "__init__.py") in _modules()


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(SRC).as_posix())
def test_module_opens_with_docstring(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docstring = ast.get_docstring(tree)
    assert docstring is not None and docstring.strip(), f"{path.relative_to(SRC)} has no module docstring"
