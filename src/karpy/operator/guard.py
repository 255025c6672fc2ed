"""A loop task's failures, logged and retried: the operator's wrapper of every controller run.

:func:`guarded` wraps a task of the loop (``fn() -> requeue delay``). It beats the liveness
heartbeat (:mod:`karpy.operator.liveness`) at the start and end of every run, and maps failures
to a retry delay:

- :class:`~karpy.adapters.kube.errors.NotLeader` (a write refused on a follower): 1 s, quietly;
- :class:`~karpy.controllers.result.TemporaryError`: its delay, a warning;
  :class:`~karpy.controllers.result.PermanentError`: not again until woken, an error line;
- a connection-type failure (:data:`karpy.adapters.kube.errors.TRANSIENT`: the API server
  unreachable, a timeout, a 5xx or a 429): exponential backoff and ONE warning line per
  controller naming the request, the cause and the retry delay, without a traceback; its
  repeats are logged at debug level until :data:`REPEAT_WARNING_SECONDS` have passed, and the
  first run that works again at info level. So an outage is one line per controller, not a
  traceback per retry;
- any other exception (a bug): the same backoff, logged with its traceback every time.

:class:`~karpy.adapters.kube.errors.Interrupted` (the operator stopping) is a ``BaseException``
and passes through to :meth:`karpy.operator.runner.Operator.run`. Used by the runner and the
AWS wiring (:func:`karpy.operator.aws.register`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from karpy.adapters.kube import errors as kube_errors
from karpy.controllers.result import PermanentError, TemporaryError
from karpy.model import errors

__all__ = ["REPEAT_WARNING_SECONDS", "backoff", "guarded"]

log = logging.getLogger("karpy.operator")

REPEAT_WARNING_SECONDS = 300.0  # a controller's connection trouble is warned about again after this

Task = Callable[[], float | None]


def backoff(failures: int) -> float:
    """The retry delay after ``failures`` failed runs in a row: 1, 2, 4 ... 60 s."""
    return float(min(60.0, 0.5 * 2.0 ** min(failures, 7)))


def cause(exc: BaseException) -> str:
    """A failure's text: a karpy error names its request and HTTP status; others their type."""
    if isinstance(exc, errors.KubeError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def guarded(
    name: str,
    fn: Task,
    *,
    beat: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
) -> Task:
    """``fn`` with its failures logged and retried (see the module docstring)."""
    failures = 0
    warned: float | None = None  # when this controller's connection trouble was last warned about

    def run() -> float | None:
        nonlocal failures, warned
        beat()
        try:
            again = fn()
        except kube_errors.NotLeader:
            return 1.0
        except TemporaryError as exc:
            log.warning("controller %s: %s (retry in %.1f s)", name, exc, exc.delay)
            return exc.delay
        except PermanentError as exc:
            log.error("controller %s: %s", name, exc)
            return None
        except kube_errors.TRANSIENT as exc:
            failures += 1
            delay = backoff(failures)
            now = clock()
            if warned is not None and now - warned < REPEAT_WARNING_SECONDS:
                log.debug(
                    "controller %s failed again (%d in a row): %s; retrying in %.1f s",
                    name,
                    failures,
                    cause(exc),
                    delay,
                )
            else:
                log.warning("controller %s: %s; retrying in %.1f s", name, cause(exc), delay)
                warned = now
            return delay
        except Exception:
            failures += 1
            delay = backoff(failures)
            log.exception("controller %s failed; retrying in %.1f s", name, delay)
            return delay
        finally:
            beat()
        if failures:
            log.info("controller %s works again after %d failed runs", name, failures)
        failures, warned = 0, None
        return again

    return run
