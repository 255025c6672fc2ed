"""What a reconcile returns and the errors that carry retry meaning (kopf-style)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PermanentError", "Result", "TemporaryError"]


@dataclass(frozen=True, slots=True)
class Result:
    """``requeue_after`` seconds until the controller wants to run again (None = on events only)."""

    requeue_after: float | None = None


class TemporaryError(Exception):
    """Retry after ``delay`` seconds."""

    def __init__(self, message: str, delay: float = 1.0) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Do not retry until something changes."""
