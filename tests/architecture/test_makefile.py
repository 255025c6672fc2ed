"""``make unit`` runs every test folder: each one holding tests is in the Makefile's parallel list
or its serial list, and in only one of them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _list(name: str) -> set[str]:
    match = re.search(rf"^{name} := (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile: no {name}"
    return set(match[1].split())


def test_every_test_folder_is_run_once() -> None:
    parallel, serial = _list("PARALLEL_TESTS"), _list("SERIAL_TESTS")
    folders = {
        f"tests/{p.name}" for p in (ROOT / "tests").iterdir() if p.is_dir() and any(p.rglob("test_*.py"))
    }
    assert not parallel & serial
    assert parallel | serial == folders
