"""The pure layers stay pure: an AST scan of every module under karpy/model and karpy/core.

No clock (``time``, ``datetime.now``/``utcnow``, ``date.today``, ``time.time``), no
randomness, no asyncio, and no Kubernetes/AWS/pydantic/YAML imports (architecture.md,
habits 1, 2 and 9). Import-linter checks the package layers; this checks the stdlib.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "karpy"
PURE_PACKAGES = ("model", "core")

FORBIDDEN_MODULES = frozenset(
    {"time", "random", "asyncio", "kubernetes", "kubernetes_asyncio", "boto3", "botocore", "pydantic", "yaml"}
)
FORBIDDEN_CALLS = frozenset(
    {("datetime", "now"), ("datetime", "utcnow"), ("date", "today"), ("time", "time")}
)


def _root(module: str) -> str:
    return module.split(".", 1)[0]


def _dotted(node: ast.expr) -> list[str]:
    """``a.b.c`` as ["a", "b", "c"]; empty when the chain does not start at a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return []
    parts.append(node.id)
    return parts[::-1]


def violations(source: str, filename: str = "<snippet>") -> list[str]:
    """Every forbidden import or clock call in ``source``, as ``file:line: what``."""
    tree = ast.parse(source, filename)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _root(alias.name) in FORBIDDEN_MODULES:
                    found.append(f"{filename}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and _root(node.module) in FORBIDDEN_MODULES:
                found.append(f"{filename}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            chain = _dotted(node.func)
            if len(chain) >= 2 and (chain[-2], chain[-1]) in FORBIDDEN_CALLS:
                found.append(f"{filename}:{node.lineno}: call {'.'.join(chain)}()")
    return found


def _modules() -> list[Path]:
    return sorted(p for package in PURE_PACKAGES for p in (SRC / package).rglob("*.py"))


def test_there_are_modules_to_scan() -> None:
    names = {p.relative_to(SRC).as_posix() for p in _modules()}
    assert "model/requirements.py" in names
    assert "core/scheduling/scheduler.py" in names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(SRC).as_posix())
def test_module_is_pure(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8"), str(path.relative_to(SRC))) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "import time",
        "import random",
        "import asyncio",
        "import kubernetes",
        "import kubernetes_asyncio.client",
        "import boto3",
        "import botocore.exceptions",
        "import pydantic",
        "import yaml",
        "import os, time",
        "from time import monotonic",
        "from random import Random",
        "from asyncio import sleep",
        "from kubernetes_asyncio import client",
        "from botocore.exceptions import ClientError",
        "from pydantic import BaseModel",
        "from yaml import safe_load",
        "import datetime\nx = datetime.datetime.now()",
        "from datetime import datetime\nx = datetime.now()",
        "from datetime import datetime\nx = datetime.utcnow()",
        "from datetime import date\nx = date.today()",
        "import datetime\nx = datetime.date.today()",
        "def f():\n    import time\n    return time.time()",
        "t = clock.time.time()",
    ],
)
def test_scanner_flags_bad_snippet(snippet: str) -> None:
    assert violations(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "import math",
        "from datetime import datetime, timezone\nx = datetime.fromtimestamp(0, timezone.utc)",
        "from karpy.model import quantity",
        "from . import time",  # a relative sibling module is not the stdlib
        "x = loop.now",
        "import timeit",
        "import randomness_helpers",
    ],
)
def test_scanner_allows_pure_snippet(snippet: str) -> None:
    assert violations(snippet) == []
