"""Progress on stderr for a command's long steps, shown only when stderr is a terminal.

:func:`steps` yields ``step(description)``: each call ends the step before it and starts a new
one (a spinner, a pulsing bar and the time elapsed; rich's ``Progress``, transient). When
stderr is not a terminal (a pipe, a file, a test) nothing is drawn and nothing is written, so
piped output and captured stderr are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["steps"]


@contextmanager
def steps(console: Console | None = None) -> Iterator[Callable[[str], None]]:
    """Progress of successive steps on ``console`` (default: stderr), when it is a terminal."""
    from rich.console import Console

    err = console if console is not None else Console(stderr=True)
    if not err.is_terminal:
        yield lambda _description: None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description:<40}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        current: list[TaskID] = []

        def step(description: str) -> None:
            for task in current:
                bar.update(task, total=1.0, completed=1.0)
            current[:] = [bar.add_task(description, total=None)]

        yield step
