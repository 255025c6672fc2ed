"""Shared pytest set-up: makes ``tests/`` importable so test modules can ``import builders``,
and reports errors raised inside the compiled core (``karpy.native``) as failures."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


class CompiledCoreError(Exception):
    """An error whose traceback passes through a frame of the compiled core without a line number."""


def _lineless(tb: TracebackType | None) -> bool:
    while tb is not None:
        if tb.tb_lineno is None:
            return True
        tb = tb.tb_next
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Iterator[None]:
    """pytest's failure report reads the line of the deepest frame and stops the whole session
    (INTERNALERROR) when a compiled frame has none: such an error is re-raised as one whose
    message holds Python's own rendering of the original traceback."""
    outcome: Any = yield
    exc = outcome.exception
    if exc is not None and _lineless(exc.__traceback__):
        text = "".join(traceback.format_exception(exc))
        outcome.force_exception(CompiledCoreError(f"raised in the compiled core:\n{text}"))
