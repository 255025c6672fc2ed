"""Fixtures for the Kubernetes edge tests: a kmock emulator on 127.0.0.1 and a plain client."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from emulator import EmulatorThread

from karpy.adapters.kube.client import KubeClient


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
