"""Shared pytest set-up: makes ``tests/`` and ``tests/adapters/`` importable so test modules can
``import builders`` or ``from emulator import EmulatorThread``; the Kubernetes emulator fixtures
(``emu``: a kmock emulator on 127.0.0.1, ``kubectl``: a plain client to it) and
``restore_logging``; sets ``KARPY_NO_DAEMON=1`` for every command the tests start; and
reports errors raised inside the compiled core (``karpy.native``) as
failures."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

_TESTS = str(Path(__file__).resolve().parent)
for _path in (_TESTS, str(Path(_TESTS) / "adapters")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# A karpy daemon the developer started must not run the commands the tests start in
# subprocesses (it would run the code it started with): tests/unit/daemon starts its own.
os.environ["KARPY_NO_DAEMON"] = "1"

from emulator import EmulatorThread  # noqa: E402

from karpy.adapters.kube.client import KubeClient  # noqa: E402


@pytest.fixture
def emu() -> Iterator[EmulatorThread]:
    thread = EmulatorThread()
    yield thread
    thread.stop()


@pytest.fixture
def kubectl(emu: EmulatorThread) -> Iterator[KubeClient]:
    """A client standing in for kubectl and the test's kube-scheduler (identity ``kubectl``)."""
    client = KubeClient(host=emu.url, identity="kubectl", timeout=5.0).start()
    yield client
    client.close()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """The root logger's handlers and level as they were (a command run in-process sets them)."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield
    root.handlers[:], level = saved
    root.setLevel(level)


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
