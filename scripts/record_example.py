"""Regenerate the recorded example of ``karpy backtest``: ``examples/backtest/shop.yaml`` and its snapshot.

    python scripts/record_example.py [--check]

Runs ``examples/backtest/source.yaml`` through karpy's simulator (seed 1), mirrors its API
server's objects into the project's Kubernetes emulator (``tests/adapters/emulator.py``, real
HTTP) in virtual-time order while ``karpy record``'s own watching records them on the virtual
clock from 07:20 to 09:00 (``tests/record/mirror.py``), and writes the trace and its snapshot into
``examples/backtest/`` (the old snapshot folder replaced). ``--check`` records into a temporary
folder instead and exits 1 when the committed files differ (``tests/record/test_backtest_example.py``
checks the same). Deterministic: the same code gives the same files.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "adapters"), str(ROOT / "tests" / "record")]

import mirror  # noqa: E402

FILES = ("shop.yaml", "shop-snapshot")


def _same(a: Path, b: Path) -> list[str]:
    """The files that differ between two example folders."""
    differ = [] if filecmp.cmp(a / FILES[0], b / FILES[0], shallow=False) else [FILES[0]]
    compared = filecmp.dircmp(a / FILES[1], b / FILES[1])
    differ += [
        f"{FILES[1]}/{name}" for name in compared.diff_files + compared.left_only + compared.right_only
    ]
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files, write nothing"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        recorded = mirror.record_example(out)
        if args.check:
            differ = _same(out, mirror.EXAMPLE)
            for name in differ:
                print(f"differs: examples/backtest/{name}")
            return 1 if differ else 0
        shutil.rmtree(mirror.EXAMPLE / FILES[1], ignore_errors=True)
        shutil.copytree(out / FILES[1], mirror.EXAMPLE / FILES[1])
        shutil.copyfile(out / FILES[0], mirror.EXAMPLE / FILES[0])
    print(f"wrote examples/backtest/{FILES[0]} and {FILES[1]}/ ({recorded.events} events mirrored)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
