"""Print a visible notice when ../shared differs from the copies vendored under tests/.

``make test`` runs this before pytest. It never fails the build: the suite runs on the
vendored copies, and re-vendoring (``python scripts/vendor.py``) comes with the issue that
changes ../shared. Without ../shared (a plain clone) it says so and exits 0.
"""

from __future__ import annotations

import filecmp
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

# (vendored copy, source in ../shared, file pattern)
PAIRS = [
    (ROOT / "tests/conformance", SHARED / "conformance", "*.yaml"),
    (ROOT / "tests/conformance/catalogs", SHARED / "conformance/catalogs", "*.yaml"),
    (ROOT / "tests/data/upstream-examples/nodepools", SHARED / "data/upstream-examples/nodepools", "*.yaml"),
    (ROOT / "tests/data/upstream-examples/workloads", SHARED / "data/upstream-examples/workloads", "*.yaml"),
]


def drift() -> list[str]:
    notes: list[str] = []
    for vendored, source, pattern in PAIRS:
        ours = {p.name for p in vendored.glob(pattern) if p.name != "disputed.yaml"}
        theirs = {p.name for p in source.glob(pattern)}
        for name in sorted(theirs - ours):
            notes.append(f"new in {source.relative_to(SHARED.parent)}: {name}")
        for name in sorted(ours - theirs):
            notes.append(f"gone from {source.relative_to(SHARED.parent)}: {name}")
        for name in sorted(ours & theirs):
            if not filecmp.cmp(vendored / name, source / name, shallow=False):
                notes.append(f"changed in {source.relative_to(SHARED.parent)}: {name}")
    return notes


def main() -> int:
    if not SHARED.is_dir():
        print("vendored data: ../shared not present; using the copies under tests/")
        return 0
    notes = drift()
    if not notes:
        print("vendored data: tests/ matches ../shared")
        return 0
    print("=" * 78)
    print(f"NOTICE: ../shared differs from the vendored copies under tests/ ({len(notes)} files):")
    for note in notes[:40]:
        print(f"  - {note}")
    if len(notes) > 40:
        print(f"  ... and {len(notes) - 40} more")
    print("The suite ran on the vendored copies; re-vendor with: python scripts/vendor.py")
    print("=" * 78)
    return 0


if __name__ == "__main__":
    sys.exit(main())
