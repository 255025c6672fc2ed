"""Prometheus's HTTP API, read for ``karpy record --from-prometheus``: range and instant queries.

A :class:`Client` sends GETs to ``URL/api/v1/query_range`` and ``URL/api/v1/query`` with the
standard library's ``urllib`` (no Prometheus client library for a few GETs), each with a timeout,
and returns each answer's series as :class:`~karpy.record.prom_series.Series`. A range query longer
than Prometheus's limit of 11,000 points per series (``(end - start) / step``) is sent in chunks of
the grid that each stay under it, and their series are joined. :func:`read` asks every query of
:data:`karpy.record.prom_series.QUERIES` for a window. Every failure is one
:class:`PrometheusError` line naming the server: unreachable, timed out, an HTTP error (with the
``error`` Prometheus gave), an answer with ``status: error``, an answer that is not Prometheus's
JSON, or no series at all for a metric the recording needs. Used by :mod:`karpy.cli.record_cmd`.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from karpy.api import encode
from karpy.model import errors
from karpy.record import prom_series
from karpy.record.prom_series import Series

__all__ = ["MAX_POINTS", "Client", "PrometheusError", "chunks", "read"]

MAX_POINTS = 11_000  # Prometheus refuses a range query of more points per series


class PrometheusError(errors.InputError):
    """Prometheus could not be read (one line: what, and where)."""


def chunks(start: float, end: float, step: float, max_points: int = MAX_POINTS) -> list[tuple[float, float]]:
    """(start, end) of each range query covering the grid ``start, start + step, ... <= end``, each
    of at most ``max_points`` points."""
    points = math.floor((end - start) / step) + 1
    out = []
    for first in range(0, points, max_points):
        last = min(points, first + max_points) - 1
        out.append((start + first * step, min(end, start + last * step)))
    return out


def _number(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


class Client:
    """GETs to one Prometheus server (``url``: its address, with any path prefix)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        max_points: int = MAX_POINTS,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.max_points = max_points
        self.sent = 0  # requests sent

    def range(self, query: str, *, start: float, end: float, step: float) -> list[Series]:
        """The series of ``query`` at every step of the window (chunked; the chunks' samples joined)."""
        joined: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for first, last in chunks(start, end, step, self.max_points):
            params = {"query": query, "start": _number(first), "end": _number(last), "step": _number(step)}
            for labels, samples in self._series(self._get("query_range", params, query), "matrix", query):
                joined.setdefault(labels, []).extend(samples)
        return [Series(dict(labels), tuple(sorted(samples))) for labels, samples in sorted(joined.items())]

    def instant(self, query: str, *, at: float) -> list[Series]:
        """The series of ``query`` evaluated at ``at``."""
        answer = self._get("query", {"query": query, "time": _number(at)}, query)
        return [
            Series(dict(labels), tuple(samples)) for labels, samples in self._series(answer, "vector", query)
        ]

    def _series(
        self, data: Mapping[str, Any], kind: str, query: str
    ) -> list[tuple[tuple[tuple[str, str], ...], list[tuple[float, float]]]]:
        if data.get("resultType") != kind or not isinstance(data.get("result"), list):
            raise PrometheusError(
                f"Prometheus at {self.url} answered {query} with a {data.get('resultType')!r} result, "
                f"not a {kind}"
            )
        out = []
        try:
            for item in data["result"]:
                labels = tuple(sorted((str(k), str(v)) for k, v in item["metric"].items() if k != "__name__"))
                pairs = item["values"] if kind == "matrix" else [item["value"]]
                out.append((labels, [(float(t), float(v)) for t, v in pairs]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PrometheusError(
                f"Prometheus at {self.url} answered {query} with a malformed series ({exc})"
            ) from None
        return out

    def _get(self, endpoint: str, params: Mapping[str, str], query: str) -> Mapping[str, Any]:
        """The ``data`` of one answer; :class:`PrometheusError` for anything else."""
        url = f"{self.url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
        request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "karpy"})
        self.sent += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            why = _reason(exc.read(), exc.reason)
            raise PrometheusError(
                f"Prometheus at {self.url} answered HTTP {exc.code} to {query}: {why}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(reason, TimeoutError):
                raise PrometheusError(
                    f"Prometheus at {self.url} did not answer {query} within {self.timeout:g} s"
                ) from None
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {reason}") from None
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "status" not in answer:
            raise PrometheusError(
                f"{self.url} did not answer {query} as Prometheus's HTTP API does (no JSON status): "
                "is it the Prometheus server's address?"
            )
        if answer["status"] != "success":
            raise PrometheusError(f"Prometheus at {self.url} could not run {query}: {_reason(body, 'error')}")
        data = answer.get("data")
        return data if isinstance(data, dict) else {}


def _reason(body: bytes, default: object) -> str:
    """Prometheus's ``errorType: error`` from an error answer's body, else ``default``."""
    try:
        answer = json.loads(body)
    except ValueError:
        return str(default)
    if not isinstance(answer, dict) or not answer.get("error"):
        return str(default)
    kind = answer.get("errorType")
    return f"{kind}: {answer['error']}" if kind else str(answer["error"])


def read(client: Client, *, start: float, end: float, step: float) -> dict[str, list[Series]]:
    """The answers to :data:`~karpy.record.prom_series.QUERIES` over the window, by metric; a needed
    metric without series is a :class:`PrometheusError`."""
    window = end - start + step
    answers: dict[str, list[Series]] = {}
    for query in prom_series.QUERIES:
        text = prom_series.promql(query, window=window)
        if query.ranged:
            answers[query.metric] = client.range(text, start=start, end=end, step=step)
        else:
            answers[query.metric] = client.instant(text, at=end)
        if query.needed and not answers[query.metric]:
            raise PrometheusError(
                f"Prometheus at {client.url} has no {query.metric} series from {encode.time(start)} to "
                f"{encode.time(end)}: does it scrape kube-state-metrics?"
            )
    return answers
