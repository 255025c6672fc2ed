"""Copy what the tests use from ../shared into tests/ (conformance scenarios, catalogs, examples).

Run by hand when ../shared changes; ``scripts/check_vendored.py`` reports drift.
"""

from __future__ import annotations

import shutil
import sys

from check_vendored import PAIRS, SHARED


def main() -> int:
    if not SHARED.is_dir():
        print("../shared is not present", file=sys.stderr)
        return 2
    for vendored, source, pattern in PAIRS:
        vendored.mkdir(parents=True, exist_ok=True)
        for stale in vendored.glob(pattern):
            if stale.name != "disputed.yaml" and not (source / stale.name).exists():
                stale.unlink()
        for path in sorted(source.glob(pattern)):
            shutil.copyfile(path, vendored / path.name)
        print(f"vendored {source} -> {vendored}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
