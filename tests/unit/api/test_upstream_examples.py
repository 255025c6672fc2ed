"""Every upstream Karpenter example (tests/data/upstream-examples, copied unchanged) loads cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy import api
from karpy.model import objects, resources
from karpy.model.nodeclass import SelectorTerm

DATA = Path(__file__).resolve().parents[2] / "data" / "upstream-examples"
FILES = sorted(DATA.rglob("*.yaml"))


def _load(rel: str) -> api.Loaded:
    loaded = api.load_paths([DATA / rel])
    assert loaded.problems == [] and loaded.skipped == []
    return loaded


def test_the_examples_are_there() -> None:
    assert len(FILES) == 33


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(DATA)) for p in FILES])
def test_every_file_loads_without_problems(path: Path) -> None:
    loaded = api.load_paths([path])
    assert [str(p) for p in loaded.problems] == []
    assert [str(p) for p in loaded.skipped] == []
    assert loaded.node_pools or loaded.deployments


def test_general_purpose_node_pool() -> None:
    loaded = _load("nodepools/general-purpose.yaml")
    (pool,) = loaded.node_pools
    assert pool.name == "general-purpose"
    reqs = {r.key: r for r in pool.requirements}
    assert set(reqs) == {
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "karpenter.sh/capacity-type",
        "karpenter.k8s.aws/instance-category",
        "karpenter.k8s.aws/instance-generation",
    }
    assert reqs["kubernetes.io/arch"].values == frozenset({"amd64"})
    assert reqs["karpenter.sh/capacity-type"].values == frozenset({"on-demand"})
    assert reqs["karpenter.k8s.aws/instance-category"].values == frozenset({"c", "m", "r"})
    generation = reqs["karpenter.k8s.aws/instance-generation"]
    assert generation.gte == 3 and not generation.has("2") and generation.has("3")
    assert pool.node_class_ref == objects.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")
    assert pool.expire_after == 720 * 3600.0 and pool.disruption.budgets == (objects.Budget("10%"),)
    (nc,) = loaded.ec2_node_classes
    assert (nc.name, nc.ami_family, nc.ami_aliases) == ("default", "AL2023", ("al2023@latest",))
    assert nc.role == "KarpenterNodeRole-${CLUSTER_NAME}"
    assert nc.subnet_selector_terms == (SelectorTerm(tags={"karpenter.sh/discovery": "${CLUSTER_NAME}"}),)


def test_node_class_families() -> None:
    families = {
        "nodepools/bottlerocket.yaml": ("Bottlerocket", ("bottlerocket@latest",)),
        "nodepools/al2-custom-ami.yaml": ("AL2", ()),
        "nodepools/custom-family-with-alias.yaml": ("Custom", ("bottlerocket@latest",)),
        "nodepools/windows-2022.yaml": ("Windows2022", ("windows2022@latest",)),
        "nodepools/min-values-family.yaml": ("AL2023", ("al2023@v20240625",)),
    }
    for rel, (family, aliases) in families.items():
        (nc,) = _load(rel).ec2_node_classes
        assert (nc.ami_family, nc.ami_aliases) == (family, aliases), rel


def test_block_devices_and_instance_store() -> None:
    (nc,) = _load("nodepools/multiple-ebs.yaml").ec2_node_classes
    assert [(b.device_name, b.volume_size) for b in nc.block_device_mappings] == [
        ("/dev/xvda", "20Gi"),
        ("/dev/xvdb", "100Gi"),
        ("/dev/xvdc", "2000Gi"),
    ]
    (nc,) = _load("nodepools/instance-store-ephemeral-storage.yaml").ec2_node_classes
    assert nc.instance_store_policy == "RAID0"


def test_min_values_limits_and_lifetimes() -> None:
    (pool,) = _load("nodepools/min-values-multiple-keys.yaml").node_pools
    assert {r.key: r.min_values for r in pool.requirements if r.min_values} == {
        "karpenter.k8s.aws/instance-category": 2,
        "karpenter.k8s.aws/instance-family": 5,
        "node.kubernetes.io/instance-type": 2,
    }
    (pool,) = _load("nodepools/100-cpu-limit.yaml").node_pools
    assert pool.limits == {"cpu": 100_000}
    (pool,) = _load("nodepools/max-node-lifetime.yaml").node_pools
    assert (pool.expire_after, pool.termination_grace_period) == (168 * 3600.0, 24 * 3600.0)
    assert (pool.disruption.consolidation_policy, pool.disruption.consolidate_after) == ("WhenEmpty", 60.0)


def test_windows_custom_user_data_reference_uses_the_group() -> None:
    (pool,) = _load("nodepools/windows-custom-userdata.yaml").node_pools
    assert pool.node_class_ref == objects.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "windows2022")


def test_workload_requests_and_replicas() -> None:
    loaded = _load("workloads/disruption-budget.yaml")
    (deployment,) = loaded.deployments
    assert (deployment.name, deployment.namespace, deployment.replicas) == ("pdb", "default", 10)
    pods = api.expand(deployment)
    assert len(pods) == 10
    assert pods[0].requests == resources.Resources({"cpu": 1000, "memory": 256_000_000})
    assert pods[0].node_selector == {"kubernetes.io/arch": "amd64"}
    (pdb,) = loaded.pdbs
    assert pdb.min_available == "80%" and pdb.selector is not None and pdb.selector.matches({"app": "pdb"})


def test_gpu_limit_becomes_a_request() -> None:
    (deployment,) = _load("workloads/gpu-nvidia.yaml").deployments
    assert deployment.replicas == 0
    assert deployment.template.requests == resources.Resources(
        {"cpu": 1000, "memory": 256_000_000, "nvidia.com/gpu": 1}
    )


def test_inflate_defaults_to_one_replica_and_spreads() -> None:
    (inflate,) = _load("workloads/inflate.yaml").deployments
    assert inflate.replicas == 1 and len(api.expand(inflate)) == 1
    (spread,) = _load("workloads/spread-hostname-zone.yaml").deployments
    assert spread.replicas == 50
    host, zone = spread.template.spread
    assert (host.topology_key, host.max_skew, zone.topology_key, zone.max_skew) == (
        "kubernetes.io/hostname",
        2,
        "topology.kubernetes.io/zone",
        5,
    )
    (prefer,) = _load("workloads/prefer-arm.yaml").deployments
    assert [t.weight for t in prefer.template.preferred_terms] == [1, 50]


def test_whole_directory_replaces_same_named_objects_with_warnings() -> None:
    loaded = api.load_paths([DATA])
    assert loaded.problems == []
    assert all(p.severity == "warning" and "replaces" in p.message for p in loaded.skipped)
    assert len({p.name for p in loaded.node_pools}) == len(loaded.node_pools)
    assert len(loaded.deployments) == 11
