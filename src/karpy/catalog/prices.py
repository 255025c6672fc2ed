"""User price files: exact (region, instance type, capacity type) → USD/h overrides.

A CSV with a header naming at least ``region,instance_type,capacity_type,usd_per_hour`` (other
columns are ignored), one price per row. The result is passed as ``prices_override`` to
:func:`karpy.catalog.aws.instance_types` / :func:`karpy.catalog.load`, where each row replaces
the modelled price of that one offering. Called by the CLI and the simulator; errors are
:class:`~karpy.model.errors.InputError` naming the file and line.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from karpy.model.errors import InputError

__all__ = ["CAPACITY_TYPES", "COLUMNS", "load_prices_csv"]

COLUMNS = ("region", "instance_type", "capacity_type", "usd_per_hour")
CAPACITY_TYPES = frozenset({"on-demand", "spot", "reserved"})


def load_prices_csv(path: Path | str) -> dict[tuple[str, str, str], float]:
    """Read a price file into ``{(region, instance_type, capacity_type): usd_per_hour}``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot read price file: {exc.strerror or exc}") from exc
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise InputError(f"{path}: empty price file (expected a header {','.join(COLUMNS)})")
    names = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError(
            f"{path}:1: header must name {','.join(COLUMNS)}; "
            f"missing {', '.join(missing)} (got {','.join(names)})"
        )
    index = {c: names.index(c) for c in COLUMNS}
    out: dict[tuple[str, str, str], float] = {}
    seen: dict[tuple[str, str, str], int] = {}
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) < len(names):
            raise InputError(f"{path}:{line}: expected {len(names)} columns, got {len(row)}")
        region, instance_type, capacity_type, raw = (row[index[c]].strip() for c in COLUMNS)
        for column, value in (("region", region), ("instance_type", instance_type)):
            if not value:
                raise InputError(f"{path}:{line}: empty {column}")
        if capacity_type not in CAPACITY_TYPES:
            raise InputError(
                f"{path}:{line}: capacity_type {capacity_type!r} "
                f"is not one of {', '.join(sorted(CAPACITY_TYPES))}"
            )
        try:
            price = float(raw)
        except ValueError:
            raise InputError(f"{path}:{line}: usd_per_hour {raw!r} is not a number") from None
        if not math.isfinite(price) or price < 0:
            raise InputError(f"{path}:{line}: usd_per_hour {raw!r} must be a finite number >= 0")
        key = (region, instance_type, capacity_type)
        if key in seen:
            raise InputError(
                f"{path}:{line}: duplicate price for {'/'.join(key)} (first on line {seen[key]})"
            )
        seen[key] = line
        out[key] = price
    return out
