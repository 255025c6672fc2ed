"""The ``karpy`` entry point: hand the command to a running daemon, else run it here.

``karpy daemon start`` (:mod:`karpy.daemon`) keeps a warm process; when one answers for this
installation and runs the same code, :func:`karpy.daemon.client.forward` runs the command there
and this process exits with its status. Otherwise (no daemon, ``KARPY_NO_DAEMON=1``, a daemon
that refused) the command runs in this process, as it always did. ``karpy operator`` (a
long-lived controller with its own signal handling) and ``karpy daemon ...`` always run here.
"""

from __future__ import annotations

import os
import sys

__all__ = ["LOCAL_COMMANDS", "main"]

LOCAL_COMMANDS = frozenset({"daemon", "operator"})


def _command(args: list[str]) -> str | None:
    """The subcommand's name: the first argument that is not an option (the root takes no values)."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def main() -> None:
    if _command(sys.argv[1:]) not in LOCAL_COMMANDS:
        from karpy.daemon import client

        status = client.forward(sys.argv, os.environ)
        if status is not None:
            sys.exit(status)
    from karpy.cli import main as run

    run()
