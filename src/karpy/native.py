"""Which build of the pure core runs: the mypyc-compiled modules or the Python source.

``scripts/build_native.py`` (``make native``; ``make test`` and ``make bench`` run it) compiles
:mod:`karpy.model` and :mod:`karpy.core` (but :data:`INTERPRETED`) with mypyc, in place: an
extension module beside each source file, which Python's importer prefers to the ``.py``. It
also writes ``native.json`` beside this file: the SHA-256 of every source file it compiled.
The two builds give the same results (a test runs the small scenario both ways and compares
the JSON); with the compiled core a simulation takes about a fifth less CPU
(``docs/performance.md``).

:func:`install`, called first by ``karpy/__init__.py``, decides before either package is
imported. The compiled modules run only when every source file still has the digest it was
compiled from. Otherwise (a file edited since the build, a file added or removed, no
manifest, or ``KARPY_PURE=1`` in the environment) a finder placed first on ``sys.meta_path``
loads both packages from their ``.py`` files, so stale compiled code never runs, and never
beside fresh source (compiled modules call each other directly, so the two cannot mix).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

__all__ = [
    "COMPILED",
    "GROUP",
    "INTERPRETED",
    "MANIFEST",
    "PACKAGES",
    "PURE",
    "Status",
    "decide",
    "digests",
    "evaluate",
    "extensions",
    "install",
    "sources",
    "status",
]

PACKAGES = ("karpy.model", "karpy.core")
# Left as Python: the error classes the edges raise and catch, whose class-level HTTP status an
# instance may override (mypyc gives exceptions no class-level defaults); they are not hot.
INTERPRETED = frozenset({"model/errors.py"})
# mypyc's shared library of the compiled modules, beside the karpy package (src/ of a checkout):
# mypyc places a compiled package's __path__ relative to it
GROUP = "karpy_native_core"
ROOT = Path(__file__).resolve().parent  # src/karpy (or site-packages/karpy)
MANIFEST = ROOT / "native.json"
COMPILED = "compiled"
PURE = "pure"
_log = logging.getLogger("karpy.native")


@dataclass(frozen=True, slots=True)
class Status:
    build: str  # COMPILED or PURE
    reason: str  # why pure ("" when compiled)

    def describe(self) -> str:
        return "compiled (mypyc)" if self.build == COMPILED else f"pure Python ({self.reason})"


_OFF = Status(PURE, "KARPY_PURE is set")


def _package_dir(root: Path, package: str) -> Path:
    return root.joinpath(*package.split(".")[1:])  # (root is the karpy package's directory)


def sources(root: Path = ROOT) -> list[Path]:
    """The source files compiled (those of both packages but :data:`INTERPRETED`), sorted."""
    out: list[Path] = []
    for package in PACKAGES:
        found = sorted(_package_dir(root, package).rglob("*.py"))
        out.extend(p for p in found if p.relative_to(root).as_posix() not in INTERPRETED)
    return out


def digests(root: Path = ROOT) -> dict[str, str]:
    """``{path relative to root: sha256}`` of every source file compiled (:func:`sources`)."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sources(root)
    }


def extensions(root: Path = ROOT) -> list[Path]:
    """The extension modules built in place: one beside each source, and the group's shared library."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    out = [p for p in sorted(root.parent.glob(GROUP + "__mypyc.*")) if p.name.endswith(suffixes)]
    for package in PACKAGES:
        out.extend(p for p in sorted(_package_dir(root, package).rglob("*")) if p.name.endswith(suffixes))
    return out


def decide(
    *,
    built: bool,
    manifest: Mapping[str, str] | None,
    current: Mapping[str, str],
    environ: Mapping[str, str],
) -> Status:
    """Compiled only when not turned off, built, and every source still has its compiled digest."""
    if environ.get("KARPY_PURE", "") not in ("", "0"):
        return _OFF
    if not built:
        return Status(PURE, "not compiled: run `make native`")
    if manifest is None:
        return Status(PURE, f"no readable {MANIFEST.name}: run `make native`")
    changed = sorted(name for name in set(manifest) | set(current) if manifest.get(name) != current.get(name))
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return Status(PURE, f"compiled core out of date ({changed[0]}{more} changed): run `make native`")
    return Status(COMPILED, "")


def _read_manifest(path: Path) -> dict[str, str] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    files = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return None
    return {str(k): v for k, v in files.items()}


def evaluate(environ: Mapping[str, str]) -> Status:
    """The build a process started now with ``environ`` would run (this tree, its manifest)."""
    return _evaluate(environ, built=bool(extensions()))


def _evaluate(environ: Mapping[str, str], *, built: bool) -> Status:
    return decide(
        built=built,
        manifest=_read_manifest(MANIFEST) if built else None,
        current=digests() if built else {},
        environ=environ,
    )


class _SourceFirst:
    """Loads the compiled packages from their ``.py`` files even where an extension module lies beside
    (a meta path finder: ``importlib.abc.MetaPathFinder``'s one method, without importing that
    module, which loads ``importlib.resources`` at every start)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in PACKAGES):
            return None
        name = fullname.rpartition(".")[2]
        for entry in path or ():
            package = Path(entry, name, "__init__.py")
            if package.is_file():
                return importlib.util.spec_from_file_location(
                    fullname, package, submodule_search_locations=[str(package.parent)]
                )
            module = Path(entry, name + ".py")
            if module.is_file():
                return importlib.util.spec_from_file_location(fullname, module)
        return None


_STATUS: list[Status] = []


def install(environ: Mapping[str, str] = os.environ) -> Status:
    """Decide the build once per process (before the packages load) and keep stale code out."""
    if _STATUS:
        return _STATUS[0]
    built = bool(extensions())
    found = _evaluate(environ, built=built)
    if found.build == PURE and built:
        if not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
            sys.meta_path.insert(0, _SourceFirst())
        if found != _OFF:  # (asked for: no warning)
            _log.warning("karpy runs its core as pure Python: %s", found.reason)
    _STATUS.append(found)
    return found


def status() -> Status:
    """The build this process runs (decided by :func:`install`)."""
    return _STATUS[0] if _STATUS else install()
