"""Object names as the API server validates them (apimachinery's ``ValidateObjectMeta``).

A Namespace's name, and every object's ``metadata.namespace``, is an RFC 1123 label (at most 63
characters: lower-case alphanumerics and ``-``, starting and ending with an alphanumeric); every
other kind karpy reads (NodePool, NodeClaim, the NodeClasses, Node, Pod, the workloads, PDBs) is
named by an RFC 1123 subdomain (at most 253 characters: labels joined by ``.``). A
``generateName`` is checked as a prefix (a trailing ``-`` is allowed). :func:`name_problems`
gives ``(field path, message)`` pairs; :mod:`karpy.api.load` turns them into errors for objects
read from files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["LABEL_KINDS", "label_problem", "name_problems", "subdomain_problem"]

LABEL_KINDS = frozenset({"Namespace"})  # kinds named by an RFC 1123 label; the others by a subdomain

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(rf"^{_LABEL}$")
_SUBDOMAIN_RE = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_LABEL_MAX = 63
_SUBDOMAIN_MAX = 253


def _masked(value: str, prefix: bool) -> str:
    """A generateName prefix may end in ``-`` (the random suffix follows it)."""
    return value[:-1] + "a" if prefix and value.endswith("-") else value


def label_problem(value: str, *, prefix: bool = False) -> str | None:
    """Why ``value`` is not an RFC 1123 label, or None."""
    text = _masked(value, prefix)
    if len(text) > _LABEL_MAX:
        return f'"{value}" must be no more than {_LABEL_MAX} characters (an RFC 1123 label)'
    if not _LABEL_RE.match(text):
        return (
            f'"{value}" is not a valid name: a lowercase RFC 1123 label must consist of lower case '
            "alphanumeric characters or '-', and must start and end with an alphanumeric character "
            "(e.g. 'my-name' or '123-abc')"
        )
    return None


def subdomain_problem(value: str, *, prefix: bool = False) -> str | None:
    """Why ``value`` is not an RFC 1123 subdomain, or None."""
    text = _masked(value, prefix)
    if len(text) > _SUBDOMAIN_MAX:
        return f'"{value}" must be no more than {_SUBDOMAIN_MAX} characters (an RFC 1123 subdomain)'
    if not _SUBDOMAIN_RE.match(text):
        return (
            f'"{value}" is not a valid name: a lowercase RFC 1123 subdomain must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'example.com')"
        )
    return None


def name_problems(kind: str, metadata: Any) -> list[tuple[str, str]]:
    """``(field path, message)`` for each of ``metadata.name``, ``metadata.generateName`` and
    ``metadata.namespace`` the API server would reject for an object of ``kind`` (empty values are
    left to the schema's ``required``)."""
    if not isinstance(metadata, Mapping):
        return []
    check = label_problem if kind in LABEL_KINDS else subdomain_problem
    out: list[tuple[str, str]] = []
    for field, prefix in (("name", False), ("generateName", True)):
        value = metadata.get(field)
        if isinstance(value, str) and value:
            problem = check(value, prefix=prefix)
            if problem:
                out.append((f"metadata.{field}", problem))
    namespace = metadata.get("namespace")
    if isinstance(namespace, str) and namespace:
        problem = label_problem(namespace)
        if problem:
            out.append(("metadata.namespace", problem))
    return out
