"""Shared pytest set-up: makes ``tests/`` importable so test modules can ``import builders``."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
