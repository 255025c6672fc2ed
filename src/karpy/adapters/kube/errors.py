"""Kubernetes API failures → :mod:`karpy.model.errors` (httpx's ``map_*`` pattern).

Every HTTP status the API server answers is mapped here, at the edge, so nothing above the
adapters sees ``kubernetes_asyncio.client.ApiException`` or an aiohttp error. Used by
:mod:`karpy.adapters.kube.client`, :mod:`~karpy.adapters.kube.watch` and
:mod:`~karpy.adapters.kube.leader`.
"""

from __future__ import annotations

import json
from typing import Any

from karpy.model import errors

__all__ = ["TRANSIENT", "Gone", "Interrupted", "NotLeader", "Unavailable", "from_response", "from_status"]


class Gone(errors.KubeError):
    """410: the resourceVersion a watch asked for is too old; list again."""

    status = 410


class Unavailable(errors.KubeError):
    """5xx, a timeout or a broken connection: worth retrying with backoff."""

    status = 503


class Interrupted(BaseException):
    """The operator is stopping: the call was not made, or its answer is no longer waited for.

    A ``BaseException`` so that no controller's ``except Exception`` (or ``except KubeError``)
    swallows it: it unwinds the pass to :meth:`karpy.operator.runner.Operator.run`, which shuts
    down (the Lease released) instead of finishing a long pass call by call."""


class NotLeader(errors.KubeError):
    """A write was refused locally because this replica does not hold the leader Lease."""

    status = 503


# Failures of an API server that is down, overloaded or unreachable, worth retrying with backoff:
# a 5xx, a broken connection or a timed-out request (Unavailable), a 429, a bare timeout.
TRANSIENT: tuple[type[BaseException], ...] = (
    Unavailable,
    errors.TooManyRequests,
    TimeoutError,
    ConnectionError,
)


def _message(body: Any) -> str:
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return str(body[:300])
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or body)[:300]
    return str(body)[:300]


def from_status(status: int, body: Any = None, *, what: str = "") -> errors.KubeError:
    """The karpy error for an HTTP ``status`` (``body``: the Status object or its text)."""
    reason = ""
    if isinstance(body, dict):
        reason = str(body.get("reason") or "")
    text = f"{what}: {_message(body)}" if what else _message(body)
    if status == 404:
        return errors.NotFound(text)
    if status == 409:
        if reason == "AlreadyExists":
            return errors.AlreadyExists(text)
        return errors.Conflict(text)
    if status == 410:
        return Gone(text)
    if status == 429:
        return errors.TooManyRequests(text)
    if status in (400, 422):
        return errors.Invalid(text)
    if status >= 500 or status == 0:
        return Unavailable(text)
    error = errors.KubeError(f"HTTP {status}: {text}")
    error.status = status
    return error


def from_response(exc: BaseException, *, what: str = "") -> errors.KubeError:
    """Map a foreign exception (``ApiException``, aiohttp/asyncio errors) to a karpy error."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        return from_status(status, getattr(exc, "body", None), what=what)
    return Unavailable(f"{what}: {type(exc).__name__}: {exc}" if what else f"{type(exc).__name__}: {exc}")
