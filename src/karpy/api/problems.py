"""Problems with the input: one located line each (file, document, object, field path, message).

:class:`Problem` is what every reader in :mod:`karpy.api` (and the simulator's scenario reader)
reports; :class:`ObjectError` raises them. Re-exported by :mod:`karpy.api.load`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpy.model import errors

__all__ = ["ERROR", "FILE", "WARNING", "ObjectError", "Problem"]

ERROR = "error"
WARNING = "warning"
FILE = -1  # Problem.index of a problem of the file itself (missing, unreadable, empty)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input, located as precisely as known."""

    file: str
    index: int  # document, 0-based within the file; FILE (-1): the file itself
    kind: str
    name: str
    path: str  # dotted field path, e.g. spec.template.spec.requirements[0].operator
    message: str
    severity: str = ERROR  # "error" | "warning"
    line: int | None = None  # 1-based, for YAML syntax errors

    def __str__(self) -> str:
        where = f"{self.file}: document {self.index}" if self.file and self.index >= 0 else self.file
        what = (f'{self.kind} "{self.name}"' if self.name else self.kind) if self.kind else ""
        head = f"{where} ({what})" if where and what else where or what
        return ": ".join(part for part in (head, self.path, self.message) if part)


class ObjectError(errors.InputError):
    """An object that failed validation; ``problems`` lists every finding."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")
        self.problems = list(problems)
