"""``Dedupe``: report a key again only after a window (the controllers' event rate limit).

The provisioner keeps one for ``FailedScheduling`` and ``Nominated``, the disruption controller
one for ``Unconsolidatable``. Times are the caller's clock (virtual in the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Dedupe"]


@dataclass
class Dedupe:
    """Remembers when a key was last reported; ``allow`` says whether to report it again."""

    window: float
    seen: dict[tuple[str, ...], float]

    def allow(self, key: tuple[str, ...], now: float) -> bool:
        last = self.seen.get(key)
        if last is not None and now - last < self.window:
            return False
        self.seen[key] = now
        return True

    def prune(self, now: float) -> None:
        for key in [k for k, t in self.seen.items() if now - t >= self.window]:
            del self.seen[key]
