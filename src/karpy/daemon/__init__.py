"""``karpy daemon``: a warm process that runs ``karpy`` commands without paying start-up each time.

A fresh ``karpy plan`` spends most of a small run starting: importing typer, pydantic, numpy
and karpy's schemas, then building the AWS catalog (``docs/performance.md``). The daemon pays
that once. ``karpy daemon start`` starts it in the background: it imports the commands and
builds the catalog's shared parts, then listens on a Unix socket that only its user can reach
(:mod:`karpy.daemon.wire`). The ``karpy`` entry point (:mod:`karpy.launch`) looks for that
socket first: when a daemon answers, it hands over its arguments, working folder, environment
and its own stdin, stdout and stderr (the file descriptors themselves, so a terminal stays a
terminal), and the daemon forks a worker that runs the command as a fresh process would and
reports its exit status (:mod:`karpy.daemon.server`, :mod:`karpy.daemon.client`). Each
command runs in its own fork of the warm process: nothing one command does is seen by the
next.

Opt-in, as ``dmypy``: no daemon, no change. A daemon started from other code than the
client's (an upgrade, an edited checkout, another ``KARPY_PURE``) refuses the command, which
then runs in the client's own process; one whose code is out of date also stops.
``KARPY_NO_DAEMON=1`` makes the client never use it. ``karpy operator`` and ``karpy daemon``
itself always run in the client's process.
"""

__all__ = ["client", "server", "wire"]
