"""The processes a process started, read from ``/proc`` (Linux): what the daemon and parallel-read
tests use to see workers and children come and go."""

from __future__ import annotations

import os
from pathlib import Path


def children(pid: int, *, zombies: bool = False) -> list[int]:
    """The processes whose parent is ``pid``; ``zombies``: also those that ended and are not reaped."""
    out: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == pid and (zombies or state != "Z"):
            out.append(int(entry))
    return out
