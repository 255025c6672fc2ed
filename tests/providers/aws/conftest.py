"""Fixtures for the AWS provider tests: one moto server per session, emptied before each test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import moto_world

from karpy.providers.aws import sdk


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    server, url = moto_world.start_server()
    yield url
    server.stop()


@pytest.fixture
def aws(moto_url: str) -> sdk.Clients:
    """Clients of an empty moto account."""
    moto_world.reset(moto_url)
    return moto_world.clients(moto_url)


@pytest.fixture
def world(moto_url: str) -> moto_world.World:
    """A moto account seeded as an EKS cluster's (see :func:`moto_world.seed`)."""
    moto_world.reset(moto_url)
    return moto_world.seed(moto_url)
