"""Compile karpy's pure core (``karpy.model``, ``karpy.core``) with mypyc, in place.

    python scripts/build_native.py           # build (about 1.5 minutes on 2 cores), write the manifest
    python scripts/build_native.py --clean   # remove the extension modules and the manifest

An extension module lands beside each source file under ``src/karpy/model`` and
``src/karpy/core``; ``src/karpy/native.json`` records the SHA-256 of every source compiled.
:mod:`karpy.native` runs the compiled modules only while every source still matches
(otherwise the Python source, with a warning), so an edit never runs stale code. Needs mypy
(which carries mypyc) and a C compiler. ``make native`` runs this when a source changed;
``make test`` and ``make bench`` depend on it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
KARPY = SRC / "karpy"
BUILD = ROOT / "build" / "native"

# Only what mypyc's type analysis needs: the project's mypy settings (strict overrides for
# other packages, the pydantic plugin) are for checking, not for compiling these two packages.
_CONFIG = (
    "[mypy]\npython_version = 3.11\nwarn_unused_configs = False\n"
    "[mypy-scipy.*,croniter.*]\nignore_missing_imports = True\n"
)


def _native() -> object:
    """karpy.native loaded by path: importing the karpy package would import the core itself."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_karpy_native_build", KARPY / "native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def clean(native: object) -> int:
    removed = 0
    for path in native.extensions(KARPY):  # type: ignore[attr-defined]
        path.unlink()
        removed += 1
    if (KARPY / "native.json").exists():
        (KARPY / "native.json").unlink()
    print(f"removed {removed} extension modules")
    return 0


# mypyc (up to 2.4 at least, for Python < 3.12) gives a class with a Python base (Mapping,
# Generic, Exception, closures) a __dict__ and a __weakref__ slot after its struct, then treats
# the weak-reference list as an owned reference: tp_traverse visits it and tp_clear decrefs it.
# A weakref to such an object (hypothesis takes one of every value it draws) is then freed while
# still listed, and the garbage collector crashes (mypyc/mypyc#1102). CPython's rule: the list is
# not visited, and dealloc clears it with PyObject_ClearWeakRefs. The generated C is rewritten so;
# tests/unit/test_native.py checks weakrefs on the compiled classes.
_WEAKLIST = r"\*\(\(PyObject \*\*\)\(\(char \*\)self \+ sizeof\(PyObject \*\) \+ sizeof\((\w+)\)\)\)"
_VISIT = re.compile(rf"Py_VISIT\({_WEAKLIST}\);")
_CLEAR = re.compile(rf"Py_CLEAR\(({_WEAKLIST})\);")


def fix_weakref_slots(c_dir: Path) -> int:
    """Rewrite mypyc's C under ``c_dir`` so the weak-reference slot is borrowed: never visited,
    and cleared with ``PyObject_ClearWeakRefs`` when the object dies. Returns how many classes'
    traverse functions were fixed; raises when a traverse and its clear do not pair up."""
    visits = 0
    for path in sorted(c_dir.glob("*.c")):
        text = path.read_text()
        text, n_visit = _VISIT.subn("/* karpy: the weak-reference list is borrowed, not visited */", text)
        text, n_clear = _CLEAR.subn(
            r"if (Py_REFCNT(self) == 0 && \1 != NULL) PyObject_ClearWeakRefs((PyObject *)self);", text
        )
        if n_visit and not n_clear:
            raise SystemExit(f"{path.name}: {n_visit} weakref slots visited but none cleared; mypyc changed")
        if n_visit or n_clear:
            path.write_text(text)
        visits += n_visit
    return visits


def _compile_sources_in_parallel() -> None:
    """Compile the C files of one extension on every core. ``build_ext --parallel`` builds
    extensions side by side, but mypyc puts every module's C file into one shared extension, whose
    sources distutils compiles one after the other (one core busy for most of the build). This is
    ``CCompiler.compile`` with its loop over the objects run by a thread pool (each ``_compile``
    waits on its own gcc)."""
    from concurrent.futures import ThreadPoolExecutor

    from setuptools._distutils import ccompiler

    def compile_parallel(
        self: Any,
        sources: Sequence[str],
        output_dir: str | None = None,
        macros: Any = None,
        include_dirs: Any = None,
        debug: bool = False,
        extra_preargs: list[str] | None = None,
        extra_postargs: list[str] | None = None,
        depends: Any = None,
    ) -> list[str]:
        macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj: str) -> None:
            src, ext = build[obj]
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(one, [obj for obj in objects if obj in build]))  # raises the first error
        return list(objects)

    ccompiler.CCompiler.compile = compile_parallel  # type: ignore[method-assign]


def build(native: object) -> int:
    from mypyc.build import mypycify
    from setuptools import Distribution

    clean(native)  # a half-built tree must not look built
    paths = [p.relative_to(SRC).as_posix() for p in native.sources(KARPY)]  # type: ignore[attr-defined]
    # the digests of what is compiled, taken before: an edit during the build leaves it stale
    manifest = {"sources": native.digests(KARPY)}  # type: ignore[attr-defined]
    BUILD.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    previous = Path.cwd()
    os.chdir(SRC)  # module names follow the paths given
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as config:
            config.write(_CONFIG)
        extensions = mypycify(
            ["--config-file", config.name, *paths],
            opt_level="3",
            multi_file=True,  # a C file per module, so that the compiler runs on every core
            target_dir=str(BUILD / "c"),
            group_name=native.GROUP,  # type: ignore[attr-defined]
        )
        fixed = fix_weakref_slots(BUILD / "c")
        print(f"weak-reference lists handled as borrowed in {fixed} classes")
        _compile_sources_in_parallel()
        dist = Distribution({"name": "karpy-native", "ext_modules": extensions})
        command = dist.get_command_obj("build_ext")
        command.inplace = True  # type: ignore[attr-defined]
        command.parallel = os.cpu_count() or 1  # type: ignore[attr-defined]
        command.build_temp = str(BUILD / "temp")  # type: ignore[attr-defined]
        command.build_lib = str(BUILD / "lib")  # type: ignore[attr-defined]
        dist.run_command("build_ext")
    finally:
        os.chdir(previous)
        Path(config.name).unlink(missing_ok=True)
    (KARPY / "native.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    count = len(native.extensions(KARPY))  # type: ignore[attr-defined]
    took = time.perf_counter() - began
    print(f"compiled {len(paths)} modules into {count} extension modules in {took:.0f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules and the manifest")
    args = parser.parse_args(argv)
    native = _native()
    return clean(native) if args.clean else build(native)


if __name__ == "__main__":
    raise SystemExit(main())
