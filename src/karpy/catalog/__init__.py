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

__all__ = ["PerNodeClass", "aws", "conformance", "load", "prices"]

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


class PerNodeClass:
    """One catalog per EC2NodeClass (its kubelet and disk settings change allocatable).

    Other node classes (KWOKNodeClass, none) share the catalog loaded without a NodeClass.
    Used by ``karpy plan``/``disrupt`` and the simulator to give each NodePool its types.
    """

    def __init__(
        self,
        spec: str,
        *,
        pricing: settings_mod.PricingSettings = settings_mod.PricingSettings(),
        prices_override: Mapping[aws.PriceKey, float] | None = None,
    ) -> None:
        self.spec = spec
        self.pricing = pricing
        self.prices_override = prices_override
        self._cache: dict[str | None, Catalog] = {}

    def load(self, nodeclass: EC2NodeClass | None) -> Catalog:
        """Load the catalog for ``nodeclass`` (a subclass may share it more widely)."""
        return load(
            self.spec, nodeclass=nodeclass, pricing=self.pricing, prices_override=self.prices_override
        )

    def catalog(self, node_class: object | None) -> Catalog:
        ec2 = node_class if isinstance(node_class, EC2NodeClass) else None
        key = None if ec2 is None else ec2.name
        if key not in self._cache:
            self._cache[key] = self.load(ec2)
        return self._cache[key]
