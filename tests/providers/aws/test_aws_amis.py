"""AMI resolution: custom terms against the moto server, aliases with a Stubber on SSM.

moto holds no EKS-optimized AMIs and refuses parameters under ``/aws/service/`` (reserved), so
alias tests stub ``ssm.GetParameter`` (botocore ``Stubber`` on ``clients.ssm``: each expected
path, in order) and let ``DescribeImages`` of the ids they return go to moto. moto's images have
no ``DeprecationTime`` and one creation second, so the tests of "newest non-deprecated per
requirement set" stub ``ec2.DescribeImages`` instead.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import moto_world
import pytest
from botocore.stub import Stubber

from karpy.model import labels
from karpy.model.nodeclass import AMI, AMISelectorTerm, EC2NodeClass
from karpy.model.requirements import Requirement, Requirements
from karpy.providers.aws import amis, sdk

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
AMD64 = Requirement.in_(labels.ARCH, "amd64")
ARM64 = Requirement.in_(labels.ARCH, "arm64")
NO_GPU = Requirement.does_not_exist(amis.GPU_COUNT)
NO_ACCEL = Requirement.does_not_exist(amis.ACCELERATOR_COUNT)
GPU = Requirement.exists(amis.GPU_COUNT)
ACCEL = Requirement.exists(amis.ACCELERATOR_COUNT)


@dataclass
class Clock:
    t: float = START

    def now(self) -> float:
        return self.t


def _nc(*terms: AMISelectorTerm) -> EC2NodeClass:
    return EC2NodeClass(name="default", ami_selector_terms=terms, uid="uid-default")


def _record(client: Any, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        calls.append(copy.deepcopy(params))

    client.meta.events.register(
        f"before-parameter-build.{client.meta.service_model.service_name}.{operation}", hook
    )
    return calls


def _reqs(ami: AMI) -> set[Requirement]:
    return set(ami.requirements)


# -- custom terms over moto ------------------------------------------------------------------


def test_tagged_golden_amis(world: moto_world.World) -> None:
    found = amis.resolve_amis(
        world.clients,
        _nc(AMISelectorTerm(tags={"golden": "true"})),
        kubernetes_version="1.31",
        cache=amis.AMICache(Clock()),
    )
    by_id = {a.id: a for a in found}
    assert set(by_id) == {world.ami_x86, world.ami_arm}
    assert _reqs(by_id[world.ami_x86]) == {AMD64}
    assert _reqs(by_id[world.ami_arm]) == {ARM64}
    assert by_id[world.ami_x86].name == "golden-al2023-x86_64-v1"
    assert not by_id[world.ami_x86].deprecated


def test_ssm_parameter_term(world: moto_world.World) -> None:
    world.clients.ssm.put_parameter(Name="/golden/ami", Value=world.ami_arm, Type="String")
    found = amis.resolve_amis(
        world.clients,
        _nc(AMISelectorTerm(ssm_parameter="/golden/ami")),
        kubernetes_version="1.31",
        cache=amis.AMICache(Clock()),
    )
    assert [(a.id, _reqs(a)) for a in found] == [(world.ami_arm, {ARM64})]


def test_ssm_parameter_cached_five_minutes(world: moto_world.World) -> None:
    """The payments team's golden-image rollout: a changed parameter is seen within 5 min, not before."""
    ssm = world.clients.ssm
    ssm.put_parameter(Name="/golden/ami", Value=world.ami_x86, Type="String")
    clock = Clock()
    cache = amis.AMICache(clock)
    nc = _nc(AMISelectorTerm(ssm_parameter="/golden/ami"))

    def ids() -> list[str]:
        return [a.id for a in amis.resolve_amis(world.clients, nc, kubernetes_version="1.31", cache=cache)]

    assert ids() == [world.ami_x86]
    ssm.put_parameter(Name="/golden/ami", Value=world.ami_arm, Type="String", Overwrite=True)
    clock.t = START + 299
    assert ids() == [world.ami_x86]
    clock.t = START + 300
    assert ids() == [world.ami_arm]


def test_missing_ssm_parameter_names_the_field(world: moto_world.World) -> None:
    nc = _nc(AMISelectorTerm(tags={"golden": "true"}), AMISelectorTerm(ssm_parameter="/golden/ami"))
    with pytest.raises(amis.AMIError) as caught:
        amis.resolve_amis(world.clients, nc, kubernetes_version="1.31", cache=amis.AMICache(Clock()))
    assert caught.value.field == "spec.amiSelectorTerms[1].ssmParameter"
    assert caught.value.reason == "SSMParameterNotFound"
    assert str(caught.value) == "spec.amiSelectorTerms[1].ssmParameter: parameter /golden/ami not found"


def test_ssm_parameter_must_hold_an_ami_id(world: moto_world.World) -> None:
    world.clients.ssm.put_parameter(Name="/golden/ami", Value="golden-v3", Type="String")
    cache = amis.AMICache(Clock())
    with pytest.raises(amis.AMIError) as caught:
        amis.resolve_amis(
            world.clients,
            _nc(AMISelectorTerm(ssm_parameter="/golden/ami")),
            kubernetes_version="1.31",
            cache=cache,
        )
    assert caught.value.reason == "SSMParameterInvalid"
    assert cache.parameter("/golden/ami") is None  # a bad value is not kept


def test_ids_and_ssm_parameters_are_one_image_id_query(world: moto_world.World) -> None:
    world.clients.ssm.put_parameter(Name="/golden/ami", Value=world.ami_arm, Type="String")
    calls = _record(world.clients.ec2, "DescribeImages")
    nc = _nc(AMISelectorTerm(id=world.ami_x86), AMISelectorTerm(ssm_parameter="/golden/ami"))
    found = amis.resolve_amis(world.clients, nc, kubernetes_version="1.31", cache=amis.AMICache(Clock()))
    assert {a.id for a in found} == {world.ami_x86, world.ami_arm}
    assert calls == [
        {
            "Filters": [
                {"Name": "image-id", "Values": sorted([world.ami_x86, world.ami_arm])},
                {"Name": "state", "Values": ["available"]},
            ],
            "IncludeDeprecated": True,
            "MaxResults": 1000,
        }
    ]


def test_name_term_owners_default_to_self_and_amazon(world: moto_world.World) -> None:
    calls = _record(world.clients.ec2, "DescribeImages")
    nc = _nc(
        AMISelectorTerm(name="golden-al2023-*"),
        AMISelectorTerm(name="golden-al2023-arm64-*", owner=moto_world.ACCOUNT, tags={"golden": "*"}),
    )
    found = amis.resolve_amis(world.clients, nc, kubernetes_version="1.31", cache=amis.AMICache(Clock()))
    assert {a.id for a in found} == {world.ami_x86, world.ami_arm}
    assert [c.get("Owners") for c in calls] == [["self", "amazon"], [moto_world.ACCOUNT]]
    assert calls[1]["Filters"] == [
        {"Name": "name", "Values": ["golden-al2023-arm64-*"]},
        {"Name": "tag-key", "Values": ["golden"]},
        {"Name": "state", "Values": ["available"]},
    ]


def test_missing_architecture_means_x86_64(world: moto_world.World) -> None:
    image = world.clients.ec2.register_image(Name="registered", RootDeviceName="/dev/xvda")["ImageId"]
    found = amis.resolve_amis(
        world.clients, _nc(AMISelectorTerm(id=image)), kubernetes_version="1.31", cache=amis.AMICache(Clock())
    )
    assert [(a.id, _reqs(a)) for a in found] == [(image, {AMD64})]


def test_describe_images_cached_one_minute(world: moto_world.World) -> None:
    calls = _record(world.clients.ec2, "DescribeImages")
    clock = Clock()
    cache = amis.AMICache(clock)
    nc = _nc(AMISelectorTerm(tags={"golden": "true"}))
    for t in (0, 59):
        clock.t = START + t
        amis.resolve_amis(world.clients, nc, kubernetes_version="1.31", cache=cache)
    assert len(calls) == 1
    clock.t = START + 60
    amis.resolve_amis(world.clients, nc, kubernetes_version="1.31", cache=cache)
    assert len(calls) == 2


def test_nothing_matched_is_empty(world: moto_world.World) -> None:
    found = amis.resolve_amis(
        world.clients,
        _nc(AMISelectorTerm(tags={"golden": "never"})),
        kubernetes_version="1.31",
        cache=amis.AMICache(Clock()),
    )
    assert found == []


# -- choosing per requirement set (DescribeImages stubbed) -----------------------------------


def _image(
    image_id: str, name: str, created: str, arch: str = "x86_64", deprecated: str = ""
) -> dict[str, Any]:
    out: dict[str, Any] = {"ImageId": image_id, "Name": name, "CreationDate": created, "Architecture": arch}
    if deprecated:
        out["DeprecationTime"] = deprecated
    return out


def _stub_images(clients: sdk.Clients, images: list[dict[str, Any]]) -> Stubber:
    stub = Stubber(clients.ec2)
    stub.add_response("describe_images", {"Images": images})
    stub.activate()
    return stub


def test_newest_non_deprecated_per_requirement_set(aws: sdk.Clients) -> None:
    """Stubs ``ec2.DescribeImages``: moto sets neither ``DeprecationTime`` nor distinct creation times."""
    stub = _stub_images(
        aws,
        [
            _image("ami-a", "golden-a", "2026-01-01T00:00:00.000Z"),
            _image("ami-b", "golden-b", "2026-02-01T00:00:00.000Z", deprecated="2026-02-15T00:00:00.000Z"),
            _image("ami-c", "golden-c", "2025-12-01T00:00:00.000Z"),
            _image("ami-d", "arm-b", "2026-01-10T00:00:00.000Z", arch="arm64"),
            _image("ami-e", "arm-a", "2026-01-10T00:00:00.000Z", arch="arm64"),
            _image("ami-f", "old-32bit", "2026-02-20T00:00:00.000Z", arch="i386"),
        ],
    )
    clock = Clock(t=1_772_323_200.0)  # 2026-03-01
    found = amis.resolve_amis(
        aws, _nc(AMISelectorTerm(tags={"golden": "*"})), kubernetes_version="1.31", cache=amis.AMICache(clock)
    )
    stub.assert_no_pending_responses()
    # arm: same creation second, the name decides; x86: ami-b is newer but deprecated
    assert [(a.id, _reqs(a), a.deprecated) for a in found] == [
        ("ami-e", {ARM64}, False),
        ("ami-a", {AMD64}, False),
    ]


def test_a_deprecated_ami_is_kept_when_nothing_else_serves(aws: sdk.Clients) -> None:
    """Stubs ``ec2.DescribeImages`` (moto reports no ``DeprecationTime``)."""
    _stub_images(
        aws, [_image("ami-old", "golden-old", "2025-01-01T00:00:00Z", deprecated="2025-06-01T00:00:00Z")]
    )
    found = amis.resolve_amis(
        aws, _nc(AMISelectorTerm(id="ami-old")), kubernetes_version="1.31", cache=amis.AMICache(Clock())
    )
    assert [(a.id, a.deprecated) for a in found] == [("ami-old", True)]


def test_deprecation_in_the_future_is_not_deprecated(aws: sdk.Clients) -> None:
    """Stubs ``ec2.DescribeImages`` (moto reports no ``DeprecationTime``)."""
    _stub_images(
        aws, [_image("ami-new", "golden-new", "2025-12-01T00:00:00Z", deprecated="2027-01-01T00:00:00Z")]
    )
    found = amis.resolve_amis(
        aws, _nc(AMISelectorTerm(id="ami-new")), kubernetes_version="1.31", cache=amis.AMICache(Clock())
    )
    assert [(a.id, a.deprecated) for a in found] == [("ami-new", False)]


# -- aliases (SSM stubbed) -----------------------------------------------------------------

EKS = "/aws/service/eks/optimized-ami/1.31"
AL2023_LATEST = [
    f"{EKS}/amazon-linux-2023/x86_64/standard/recommended/image_id",
    f"{EKS}/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
    f"{EKS}/amazon-linux-2023/x86_64/neuron/recommended/image_id",
    f"{EKS}/amazon-linux-2023/arm64/standard/recommended/image_id",
    f"{EKS}/amazon-linux-2023/arm64/nvidia/recommended/image_id",
]
AL2023_PINNED = [
    f"{EKS}/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20250117/image_id",
    f"{EKS}/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.31-v20250117/image_id",
    f"{EKS}/amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.31-v20250117/image_id",
    f"{EKS}/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.31-v20250117/image_id",
    f"{EKS}/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.31-v20250117/image_id",
]
BOTTLEROCKET_LATEST = [
    "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id",
    "/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id",
    "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id",
    "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/latest/image_id",
]
AL2_LATEST = [
    f"{EKS}/amazon-linux-2/recommended/image_id",
    f"{EKS}/amazon-linux-2-arm64/recommended/image_id",
    f"{EKS}/amazon-linux-2-gpu/recommended/image_id",
]
WINDOWS2022_LATEST = [
    "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id"
]


def _stub_parameters(clients: sdk.Clients, answers: list[tuple[str, str | None]]) -> Stubber:
    """``ssm.GetParameter`` answers in order: an AMI id, or None for ParameterNotFound."""
    stub = Stubber(clients.ssm)
    for path, value in answers:
        if value is None:
            stub.add_client_error(
                "get_parameter",
                service_error_code="ParameterNotFound",
                http_status_code=400,
                expected_params={"Name": path},
            )
        else:
            parameter = {"Name": path, "Type": "String", "Value": value, "Version": 1}
            stub.add_response("get_parameter", {"Parameter": parameter}, expected_params={"Name": path})
    stub.activate()
    return stub


def _gpu_image(world: moto_world.World) -> str:
    stock = world.clients.ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}]
    )
    source = stock["Images"][1]["ImageId"]
    return str(
        world.clients.ec2.copy_image(Name="eks-gpu", SourceImageId=source, SourceRegion=moto_world.REGION)[
            "ImageId"
        ]
    )


@pytest.mark.parametrize(
    ("alias", "paths"),
    [
        ("al2023@latest", AL2023_LATEST),
        ("al2023@v20250117", AL2023_PINNED),
        ("bottlerocket@latest", BOTTLEROCKET_LATEST),
        ("al2@latest", AL2_LATEST),
        ("windows2022@latest", WINDOWS2022_LATEST),
    ],
)
def test_alias_reads_these_parameters(world: moto_world.World, alias: str, paths: list[str]) -> None:
    """Stubs ``ssm.GetParameter`` for each path: moto cannot hold ``/aws/service/...`` parameters.
    x86 paths answer the golden x86 image (GPU ones a second image), arm paths the arm image;
    the last path of the list is missing and skipped (except for Windows, which has one)."""
    gpu = _gpu_image(world)
    answers: list[tuple[str, str | None]] = []
    for index, path in enumerate(paths):
        if index == len(paths) - 1 and len(paths) > 1:
            answers.append((path, None))
        elif "arm64" in path:
            answers.append((path, world.ami_arm))
        elif "gpu" in path or "nvidia" in path or "neuron" in path:
            answers.append((path, gpu))
        else:
            answers.append((path, world.ami_x86))
    stub = _stub_parameters(world.clients, answers)
    found = amis.resolve_amis(
        world.clients,
        _nc(AMISelectorTerm(alias=alias)),
        kubernetes_version="1.31",
        cache=amis.AMICache(Clock()),
    )
    stub.assert_no_pending_responses()
    assert {a.id for a in found} == {v for _, v in answers if v is not None}
    if alias.startswith("windows"):
        assert [_reqs(a) for a in found] == [
            {
                AMD64,
                Requirement.in_(labels.OS, "windows"),
                Requirement.in_(labels.WINDOWS_BUILD, "10.0.20348"),
            }
        ]
    else:
        standard_x86 = next(a for a in found if a.id == world.ami_x86)
        assert _reqs(standard_x86) == {AMD64, NO_GPU, NO_ACCEL}


def test_al2023_variants_and_skipped_parameters(world: moto_world.World) -> None:
    """Stubs ``ssm.GetParameter`` (moto has no EKS-optimized parameters)."""
    gpu = _gpu_image(world)
    paths = AL2023_LATEST
    stub = _stub_parameters(
        world.clients,
        [
            (paths[0], world.ami_x86),
            (paths[1], gpu),
            (paths[2], gpu),
            (paths[3], world.ami_arm),
            (paths[4], None),
        ],
    )
    cache = amis.AMICache(Clock())
    found = amis.resolve_amis(
        world.clients, _nc(AMISelectorTerm(alias="al2023@latest")), kubernetes_version="1.31", cache=cache
    )
    stub.assert_no_pending_responses()
    got = {(a.id, frozenset(a.requirements)) for a in found}
    assert got == {
        (world.ami_x86, frozenset({AMD64, NO_GPU, NO_ACCEL})),
        (gpu, frozenset({AMD64, GPU})),
        (gpu, frozenset({AMD64, ACCEL})),
        (world.ami_arm, frozenset({ARM64, NO_GPU, NO_ACCEL})),
    }
    # public parameters are cached for a day: a second resolution reads none (the stub has no more answers)
    again = amis.resolve_amis(
        world.clients, _nc(AMISelectorTerm(alias="al2023@latest")), kubernetes_version="1.31", cache=cache
    )
    assert {(a.id, frozenset(a.requirements)) for a in again} == got


def test_al2_gpu_image_serves_nvidia_and_neuron(world: moto_world.World) -> None:
    """Stubs ``ssm.GetParameter`` (moto has no EKS-optimized parameters)."""
    gpu = _gpu_image(world)
    _stub_parameters(world.clients, [(AL2_LATEST[0], None), (AL2_LATEST[1], None), (AL2_LATEST[2], gpu)])
    found = amis.resolve_amis(
        world.clients,
        _nc(AMISelectorTerm(alias="al2@latest")),
        kubernetes_version="1.31",
        cache=amis.AMICache(Clock()),
    )
    assert {frozenset(a.requirements) for a in found} == {frozenset({AMD64, GPU}), frozenset({AMD64, ACCEL})}


def test_alias_with_no_parameter_found(aws: sdk.Clients) -> None:
    """Stubs ``ssm.GetParameter``: every Bottlerocket parameter answers ParameterNotFound."""
    _stub_parameters(aws, [(p, None) for p in BOTTLEROCKET_LATEST])
    with pytest.raises(amis.AMIError) as caught:
        amis.resolve_amis(
            aws,
            _nc(AMISelectorTerm(alias="bottlerocket@latest")),
            kubernetes_version="1.31",
            cache=amis.AMICache(Clock()),
        )
    assert caught.value.reason == "AMINotFound"
    assert caught.value.field == "spec.amiSelectorTerms[0].alias"


def test_al2_refused_from_1_33(aws: sdk.Clients) -> None:
    """Stubs ``ssm`` with no answers: the refusal must come before any GetParameter."""
    stub = Stubber(aws.ssm)
    stub.activate()
    with pytest.raises(amis.AMIError) as caught:
        amis.resolve_amis(
            aws,
            _nc(AMISelectorTerm(alias="al2@latest")),
            kubernetes_version="1.33",
            cache=amis.AMICache(Clock()),
        )
    assert caught.value.reason == "UnsupportedAlias"
    assert caught.value.field == "spec.amiSelectorTerms[0].alias"
    assert amis.alias_parameters("al2@latest", kubernetes_version="1.32")  # 1.32 still has AL2


def test_alias_parameters_pinned_bottlerocket_and_unknown_version() -> None:
    paths = [p.path for p in amis.alias_parameters("bottlerocket@v1.20.0", kubernetes_version="1.30")]
    assert paths[0] == "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/1.20.0/image_id"
    with pytest.raises(amis.AMIError) as caught:
        amis.alias_parameters("al2023@latest", kubernetes_version="")
    assert caught.value.reason == "KubernetesVersionUnknown"


def test_deprecated_latest_image_is_read_again_after_30_minutes(aws: sdk.Clients) -> None:
    """Stubs ``ssm.GetParameter`` and ``ec2.DescribeImages`` (moto has neither EKS parameters nor
    deprecation times): a "latest" value whose image turned deprecated is dropped from the cache."""
    path = WINDOWS2022_LATEST[0]
    ssm = _stub_parameters(aws, [(path, "ami-old"), (path, "ami-new")])
    ec2 = Stubber(aws.ec2)
    old = _image("ami-old", "win-old", "2025-01-01T00:00:00Z", deprecated="2025-12-01T00:00:00Z")
    ec2.add_response("describe_images", {"Images": [old]})
    ec2.add_response("describe_images", {"Images": [old]})
    ec2.add_response("describe_images", {"Images": [_image("ami-new", "win-new", "2025-12-20T00:00:00Z")]})
    ec2.activate()
    clock = Clock()
    cache = amis.AMICache(clock)
    nc = _nc(AMISelectorTerm(alias="windows2022@latest"))

    def ids() -> list[str]:
        return [a.id for a in amis.resolve_amis(aws, nc, kubernetes_version="1.31", cache=cache)]

    assert ids() == ["ami-old"]  # deprecated, but just read: kept
    clock.t = START + 31 * 60
    assert ids() == ["ami-old"]  # still the cached value; now dropped
    assert ids() == ["ami-new"]
    ssm.assert_no_pending_responses()
    ec2.assert_no_pending_responses()


# -- amis_for --------------------------------------------------------------------------------


def test_amis_for_an_instance_type() -> None:
    arm = AMI("ami-arm", requirements=(ARM64, NO_ACCEL, NO_GPU))
    standard = AMI("ami-std", requirements=(AMD64, NO_ACCEL, NO_GPU))
    nvidia = AMI("ami-gpu", requirements=(AMD64, GPU))
    neuron = AMI("ami-inf", requirements=(AMD64, ACCEL))
    custom = AMI("ami-any", requirements=(AMD64,))
    status = [arm, standard, nvidia, neuron, custom]
    plain = Requirements([AMD64, NO_GPU, NO_ACCEL, Requirement.in_(labels.OS, "linux")])
    gpu_type = Requirements([AMD64, Requirement.in_(amis.GPU_COUNT, "1"), NO_ACCEL])
    inf_type = Requirements([AMD64, NO_GPU, Requirement.in_(amis.ACCELERATOR_COUNT, "1")])
    graviton = Requirements([ARM64, NO_GPU, NO_ACCEL])
    assert amis.amis_for(status, plain) == [standard, custom]
    assert amis.amis_for(status, gpu_type) == [nvidia, custom]
    assert amis.amis_for(status, inf_type) == [neuron, custom]
    assert amis.amis_for(status, graviton) == [arm]
    # a type that does not define the GPU keys: "no GPU" holds, "a GPU" does not
    assert amis.amis_for(status, Requirements([AMD64])) == [standard, custom]
    windows = AMI("ami-win", requirements=(AMD64, Requirement.in_(labels.OS, "windows")))
    assert amis.amis_for([windows], plain) == []
