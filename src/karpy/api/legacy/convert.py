"""Legacy documents → v1 documents, as one set (a pool's kubelet lands on another document's class).

:func:`convert_all` converts each legacy document (:data:`KINDS`), then writes each pool's
kubelet on the EC2NodeClass it references: a v1 EC2NodeClass has one kubelet, so when pools
sharing a node template set different kubelets, the first pool by name keeps the class and
every other kubelet gets a copy of the class, ``<class>-<pool>``, that its pools reference
(a warning each). A kubelet whose class is not among the legacy documents is a warning.
Called by :mod:`karpy.api.load` (``plan -f`` and friends) and ``karpy convert``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

from karpy.api.legacy import base, v1alpha5, v1beta1

__all__ = ["KINDS", "convert_all", "is_legacy"]

KINDS: dict[tuple[str, str], Callable[[Mapping[str, Any], base.Options], base.Result]] = {
    ("karpenter.sh/v1alpha5", "Provisioner"): v1alpha5.provisioner,
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"): v1alpha5.aws_node_template,
    ("karpenter.sh/v1beta1", "NodePool"): v1beta1.node_pool,
    ("karpenter.sh/v1beta1", "NodeClaim"): v1beta1.node_claim,
    ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"): v1beta1.ec2_node_class,
}


def is_legacy(raw: object) -> TypeGuard[Mapping[str, Any]]:
    """A document of one of the legacy kinds (:data:`KINDS`)."""
    return isinstance(raw, Mapping) and (str(raw.get("apiVersion")), str(raw.get("kind"))) in KINDS


def convert_all(raws: Sequence[Mapping[str, Any]], options: base.Options | None = None) -> list[base.Result]:
    """One :class:`~karpy.api.legacy.base.Result` per legacy document, in order."""
    options = options or base.Options()
    results = [KINDS[(str(raw.get("apiVersion")), str(raw.get("kind")))](raw, options) for raw in raws]
    _place_kubelets(results)
    return results


def _classes(results: Sequence[base.Result]) -> dict[str, tuple[base.Result, base.Output]]:
    found: dict[str, tuple[base.Result, base.Output]] = {}
    for result in results:
        for out in result.outputs if result.ok else ():
            if out.raw["kind"] == base.EC2_KIND:
                found.setdefault(str(out.raw["metadata"].get("name", "")), (result, out))
    return found


def _place_kubelets(results: Sequence[base.Result]) -> None:
    classes = _classes(results)
    users: dict[str, list[tuple[base.KubeletUse, base.Result]]] = {}
    for result in results:
        if result.ok and result.kubelet is not None:
            users.setdefault(result.kubelet.node_class, []).append((result.kubelet, result))
    for name in sorted(users):
        group = sorted(users[name], key=lambda pair: pair[0].pool)
        target = classes.get(name)
        if target is None:
            for use, result in group:
                if use.kubelet:
                    result.warn(
                        use.path,
                        f"EC2NodeClass {name!r} is not among the legacy objects converted, and a v1 "
                        "kubelet belongs on the EC2NodeClass; dropped",
                    )
            continue
        _split(name, group, *target)


def _split(
    name: str,
    group: list[tuple[base.KubeletUse, base.Result]],
    owner_result: base.Result,
    owner: base.Output,
) -> None:
    spec = owner.raw["spec"]
    variants: dict[str, tuple[str, str]] = {}  # canonical kubelet -> (class name, who set it first)
    if spec.get("kubelet"):
        variants[base.canonical(spec["kubelet"])] = (name, f"EC2NodeClass {name!r}")
    for use, result in group:
        key = base.canonical(use.kubelet)
        if key in variants:
            _point(use, variants[key][0])
            continue
        if not variants:
            variants[key] = (name, f"NodePool {use.pool!r}")
            if use.kubelet:
                spec["kubelet"] = use.kubelet
            continue
        copy_name = f"{name}-{use.pool}"
        raw = copy.deepcopy(owner.raw)
        raw["metadata"] = {k: v for k, v in raw["metadata"].items() if k in ("labels", "annotations")}
        raw["metadata"] = {"name": copy_name, **raw["metadata"]}
        raw["spec"].pop("kubelet", None)
        if use.kubelet:
            raw["spec"]["kubelet"] = use.kubelet
        owner_result.outputs.insert(
            owner_result.outputs.index(owner) + 1, base.Output(raw, dict(owner.origin))
        )
        first = next(iter(variants.values()))[1]
        result.warn(
            use.path,
            f"differs from the kubelet of {first}, which shares EC2NodeClass {name!r} (a v1 EC2NodeClass "
            f"has one kubelet): written to a copy, EC2NodeClass {copy_name!r}, that this NodePool references",
        )
        variants[key] = (copy_name, f"NodePool {use.pool!r}")
        _point(use, copy_name)


def _point(use: base.KubeletUse, name: str) -> None:
    use.output.raw["spec"]["template"]["spec"]["nodeClassRef"]["name"] = name
