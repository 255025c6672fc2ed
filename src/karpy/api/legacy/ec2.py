"""Node-class pieces both legacy AWS APIs need: AMI family → v1 AMI terms, metadata options, identity.

Called by :mod:`karpy.api.legacy.v1alpha5` (AWSNodeTemplate, inline ``provider``) and
:mod:`karpy.api.legacy.v1beta1` (EC2NodeClass).
"""

from __future__ import annotations

from typing import Any

from karpy.api import nodeclasses
from karpy.api.legacy import base

__all__ = ["ami", "identity", "metadata_options"]

_ALIAS = {
    "AL2": "al2",
    "AL2023": "al2023",
    "Bottlerocket": "bottlerocket",
    "Windows2019": "windows2019",
    "Windows2022": "windows2022",
    "Windows2025": "windows2025",
}
# Both legacy APIs defaulted the hop limit to 2 (v1 defaults it to 1): written out to keep it.
_LEGACY_METADATA = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 2,
    "httpTokens": "required",
}


def ami(family: object, *, selected: bool, path: str, result: base.Result) -> tuple[str | None, list[Any]]:
    """(v1 ``amiFamily`` or None, alias terms or []) for a legacy family; ``selected``: AMIs are
    chosen by a selector, so the family stays and no alias is written."""
    name = str(family)
    if name == "Ubuntu":
        if selected:
            result.warn(
                path,
                "Ubuntu has no v1 AMI family: written as AL2 (Ubuntu's AMIs boot with the same EKS "
                "bootstrap script); check the root device name (/dev/sda1 on Ubuntu)",
            )
            return "AL2", []
        result.fail(path, "Ubuntu has no v1 AMI family or alias; select the AMIs to convert it")
        return None, []
    if name not in nodeclasses.AMI_FAMILIES:
        result.fail(
            path, f"unknown AMI family {name!r} (one of {', '.join(nodeclasses.AMI_FAMILIES)}, Ubuntu)"
        )
        return None, []
    if selected:
        return name, []
    if name == "Custom":
        result.fail(path, "amiFamily Custom needs its AMIs selected (amiSelector / amiSelectorTerms)")
        return None, []
    return None, [{"alias": f"{_ALIAS[name]}@latest"}]


def metadata_options(reader: base.Reader) -> dict[str, Any]:
    """The legacy defaults (hop limit 2) overlaid with what the user set."""
    out = dict(_LEGACY_METADATA)
    for key in _LEGACY_METADATA:
        if reader.has(key):
            out[key] = reader.get(key)
    reader.done()
    return out


def identity(reader: base.Reader, spec: dict[str, Any], options: base.Options) -> None:
    """``role`` / ``instanceProfile`` as given; without either, the converter's options, else the
    upstream placeholder ``$KARPENTER_NODE_ROLE`` and a warning."""
    given = {key: reader.get(key) for key in ("role", "instanceProfile") if reader.has(key)}
    if given:
        spec.update(given)
    elif options.role:
        spec["role"] = options.role
    elif options.instance_profile:
        spec["instanceProfile"] = options.instance_profile
    else:
        spec["role"] = base.ROLE_PLACEHOLDER
        reader.result.warn(
            reader.at("instanceProfile"),
            "not set (v1alpha5 took the aws.defaultInstanceProfile setting) and a v1 EC2NodeClass "
            f"needs role or instanceProfile: wrote role {base.ROLE_PLACEHOLDER} to substitute "
            "(or convert with --role / --instance-profile)",
        )
