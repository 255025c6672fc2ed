"""Instance-type catalogs: where the scheduler's instance types come from.

:func:`load` turns a catalog spec into a :class:`~karpy.model.catalog.Catalog`:
``aws:<region>`` builds the AWS catalog from karpy's package data (:mod:`karpy.catalog.aws`),
anything else is the path of a conformance-format YAML catalog
(:mod:`karpy.catalog.conformance`). User price files are read by :mod:`karpy.catalog.prices`.
Called by the CLI, the simulator and the conformance runner (layer L4).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from karpy import settings as settings_mod
from karpy.catalog import aws, conformance, prices
from karpy.model.catalog import Catalog
from karpy.model.errors import InputError
from karpy.model.nodeclass import EC2NodeClass

__all__ = ["aws", "conformance", "load", "prices"]

_AWS = "aws:"


def load(
    spec: str,
    *,
    nodeclass: EC2NodeClass | None = None,
    pricing: settings_mod.PricingSettings = settings_mod.PricingSettings(),
    prices_override: Mapping[aws.PriceKey, float] | None = None,
) -> Catalog:
    """Load ``aws:<region>`` or a conformance catalog file.

    ``nodeclass``, ``pricing`` and ``prices_override`` apply to AWS catalogs only; a conformance
    catalog states its allocatable and prices itself.
    """
    if spec.startswith(_AWS):
        region = spec[len(_AWS) :].strip()
        if not region:
            raise InputError(f"catalog {spec!r}: missing region (expected aws:<region>, e.g. aws:us-east-1)")
        return aws.catalog(region, nodeclass, pricing=pricing, prices_override=prices_override)
    path = Path(spec)
    if not path.is_file():
        raise InputError(
            f"catalog {spec!r}: no such file (expected aws:<region> or the path of a catalog YAML file)"
        )
    return conformance.load(path)
