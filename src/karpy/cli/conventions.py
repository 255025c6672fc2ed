"""What every ``karpy`` command shares: the ``-o/--output`` choices, how ``--help`` reads, where
a command's output files may go, and the ``karpy version`` lines.

Light on purpose: :mod:`karpy.cli` imports it at start, before any command runs, so it imports
only typer (and the standard library).

- :class:`Output` (``table|json|yaml``) and :class:`WideOutput` (also ``wide``, where a table
  has more columns) are the ``-o`` choices; help lists them.
- :class:`Command` and :class:`Group` render help without Python types: an option shows its
  metavar (``FILE``, ``DIR``, ``TIME``; a typed default such as ``N`` or ``TEXT`` when the
  option sets none), a flag shows none, and an argument's usage reads ``SCENARIO`` or
  ``PATH...`` (not ``{scenario}``). A usage error (an unknown option, a value not among the
  choices, a missing ``-f``) is one ``error:`` line with exit 2, as every other bad input.
- :class:`BatchCommand`: a command that reads its input, computes and exits (``plan``,
  ``disrupt``, ``explain``, ``simulate``, ...) runs with the cyclic garbage collector's first
  generation collected every :data:`BATCH_GC_THRESHOLD` allocations instead of 700 (as mypy
  does for a build): the objects it loads live until it exits, and each full collection walked
  them all (about 0.15 s of a 2 s ``karpy plan`` of 5,000 pods). Long-lived commands (the
  operator, the daemon, record) keep the default.
- :func:`check_file` and :func:`check_folder` reject an output path that cannot be written
  (a file where a folder must be, a folder where a file must be, no permission) in one
  ``error:`` line with exit 2, before the command does its work.
"""

from __future__ import annotations

import enum
import gc
import sys
import tempfile
from pathlib import Path
from typing import Any

import typer
from typer import _click
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = [
    "Command",
    "Group",
    "Output",
    "WideOutput",
    "check_file",
    "check_folder",
    "fail",
    "print_json",
    "version_document",
    "version_lines",
]


class Output(enum.StrEnum):
    """``-o``: a readable table, or the stable document as JSON or YAML."""

    table = "table"
    json = "json"
    yaml = "yaml"


class WideOutput(enum.StrEnum):
    """``-o`` of a command whose table has more columns with ``wide`` (as kubectl's)."""

    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


_METAVARS = {int: "N", float: "NUMBER", str: "TEXT", Path: "PATH"}


class _Argument(TyperArgument):
    """An argument whose help shows its name only (its metavar, e.g. ``SCENARIO``, ``PATH...``)."""

    def display_type_rich(self, ctx: _click.Context) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if not self.required:
            name = f"[{name}]"
        if self.nargs != 1 and self.metavar is None:
            name += "..."
        return name


def _annotation(param: TyperOption) -> Any:
    annotation = param.type_descriptor.annotation
    args = getattr(annotation, "__args__", None)
    if getattr(annotation, "__origin__", None) is list and args:
        return args[0]
    return annotation


def _tidy(param: _click.Parameter) -> None:
    """Give ``param`` a help display without Python types (idempotent)."""
    if isinstance(param, TyperArgument) and not isinstance(param, _Argument):
        param.__class__ = _Argument
    elif isinstance(param, TyperOption) and param.metavar is None:
        described = param.type_descriptor
        if param.is_flag or param.count:
            param.metavar = ""
        elif described.is_choice and described.is_list:  # (typer would show <list[a|b]>)
            param.metavar = "<" + "|".join(str(getattr(c, "value", c)) for c in described.choices or ()) + ">"
        elif not described.is_choice:
            param.metavar = _METAVARS.get(_annotation(param), "VALUE")


def _one_line(exc: _click.exceptions.UsageError) -> typer.Exit:
    """A usage error as one ``error:`` line on stderr (the exit to raise: 2)."""
    ctx = exc.ctx
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    message = " ".join(exc.format_message().replace("Value error, ", "").split())  # (typer's pydantic)
    typer.echo(f"error: {message}{hint}", err=True)
    return typer.Exit(exc.exit_code)


class _Conventions(_click.Command):
    """Help with metavars, never Python types; usage errors in one line (shared by both below)."""

    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        params = super().get_params(ctx)
        for param in params:
            _tidy(param)
        return params

    def make_context(
        self, info_name: str | None, args: list[str], parent: _click.Context | None = None, **extra: Any
    ) -> _click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _click.exceptions.NoArgsIsHelpError:
            raise
        except _click.exceptions.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _click.exceptions.NoArgsIsHelpError:
            raise
        except _click.exceptions.UsageError as exc:
            raise _one_line(exc) from None


class Command(_Conventions, TyperCommand):
    """A typer command whose help shows metavars, never Python types, and whose usage errors
    are one line."""


BATCH_GC_THRESHOLD = 100_000  # allocations between first-generation collections (default 700)


class BatchCommand(Command):
    """A :class:`Command` that runs once and exits: the garbage collector's first generation is
    collected every :data:`BATCH_GC_THRESHOLD` allocations while it runs (the previous
    thresholds come back after, for a caller that goes on: a test, say)."""

    def invoke(self, ctx: _click.Context) -> Any:
        before = gc.get_threshold()
        gc.set_threshold(max(BATCH_GC_THRESHOLD, before[0]), *before[1:])
        try:
            return super().invoke(ctx)
        finally:
            gc.set_threshold(*before)


class Group(_Conventions, TyperGroup):
    """A typer group whose help shows metavars, never Python types, and whose usage errors
    (an unknown command or option) are one line."""


def fail(*lines: str, code: int = 2) -> typer.Exit:
    """Print each of ``lines`` as one ``error: LINE`` on stderr; the ``Exit(code)`` to raise."""
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    return typer.Exit(code)


def _nearest(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    here = path
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def _probe(folder: Path) -> OSError | None:
    """Whether a file can be created in ``folder`` (a temporary file, removed at once)."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".karpy-check-"):
            return None
    except OSError as exc:
        return exc


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _check_parent(path: Path, option: str) -> None:
    """The folder ``path`` goes into exists and is writable, or can be created."""
    ancestor = _nearest(path.parent)
    if not ancestor.is_dir():
        raise fail(f"{option} {path}: {ancestor} is a file, not a folder")
    problem = _probe(ancestor)
    if problem is not None:
        raise fail(f"{option} {path}: cannot write in {ancestor}: {_why(problem)}")


def print_json(doc: Any, *, sort_keys: bool = False) -> None:
    """``doc`` on stdout as JSON indented by two spaces, and a newline: what every ``-o json``
    prints. orjson writes it (about ten times faster than ``json`` on a 10 MB plan) as UTF-8 bytes,
    whatever the terminal's encoding (non-ASCII text as itself, not ``\\u`` escapes)."""
    import orjson

    option = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
    data = orjson.dumps(doc, option=option | orjson.OPT_SORT_KEYS if sort_keys else option)
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text-only stream (a test's StringIO)
        stream.write(data.decode())
        return
    stream.flush()
    buffer.write(data)
    buffer.flush()


def check_file(path: Path | None, option: str) -> None:
    """Exit 2 with one line unless a file can be written at ``path`` (parents created later)."""
    if path is None:
        return
    if path.is_dir():
        raise fail(f"{option} {path}: is a folder, not a file")
    if path.exists():
        try:
            with path.open("ab"):  # append mode: the content stays as it is
                pass
        except OSError as exc:
            raise fail(f"{option} {path}: cannot write: {_why(exc)}") from None
        return
    _check_parent(path, option)


def check_folder(path: Path | None, option: str) -> None:
    """Exit 2 with one line unless files can be written into the folder ``path`` (created later)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise fail(f"{option} {path}: is a file, not a folder")
    if path.is_dir():
        problem = _probe(path)
        if problem is not None:
            raise fail(f"{option} {path}: cannot write in {path}: {_why(problem)}")
        return
    _check_parent(path, option)


def version_document() -> dict[str, Any]:
    """``karpy version -o json|yaml``: the package, the Python and the core build this process runs."""
    from importlib import metadata

    from karpy import native

    try:
        version = metadata.version("karpy")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        import karpy

        version = karpy.__version__
    status = native.status()
    return {
        "karpy": version,
        "python": f"{sys.version.split()[0]} ({sys.implementation.name})",
        "core": {"build": status.build, "detail": status.describe()},
    }


def version_lines() -> list[str]:
    """What ``karpy version`` and ``karpy --version`` print."""
    doc = version_document()
    return [f"karpy {doc['karpy']}", f"Python {doc['python']}", f"core: {doc['core']['detail']}"]
