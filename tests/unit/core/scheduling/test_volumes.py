"""The volume rules: what a pod's claims ask of a place, and the solver applying them.

Table-driven over :func:`karpy.core.scheduling.volumes.resolve` (problems, topology, drivers),
then the attach-limit counting, then whole solves: an existing node's CSINode limit, a new
NodeClaim's instance-type limit, a volume zone against a node's labels, the reference solver
agreeing with the production one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

import builders as b
from karpy.core.scheduling import reference, scheduler, volumes
from karpy.model import labels as wk
from karpy.model.requirements import Requirement
from karpy.model.volumes import (
    IMMEDIATE,
    WAIT_FOR_FIRST_CONSUMER,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    PodVolume,
    Storage,
    StorageClass,
)

ZONE3 = (Requirement.in_(wk.ZONE, "test-zone-3"),)
EBS = "ebs.csi.aws.com"


def claim(name: str, **kw: object) -> PersistentVolumeClaim:
    return PersistentVolumeClaim("default", name, **kw)  # type: ignore[arg-type]


def bound(name: str, volume: str, **kw: object) -> PersistentVolumeClaim:
    return claim(name, volume_name=volume, bind_completed=True, **kw)


CLASSES = {
    "wffc": StorageClass("wffc", EBS, WAIT_FOR_FIRST_CONSUMER, (ZONE3,)),
    "now": StorageClass("now", EBS, IMMEDIATE),
    "intree": StorageClass("intree", "kubernetes.io/aws-ebs", WAIT_FOR_FIRST_CONSUMER),
    "old-default": StorageClass("old-default", "a.csi", WAIT_FOR_FIRST_CONSUMER, default=True, created=1.0),
    "new-default": StorageClass("new-default", "b.csi", WAIT_FOR_FIRST_CONSUMER, default=True, created=2.0),
}
VOLUMES = {
    "pv-z3": PersistentVolume("pv-z3", EBS, (ZONE3,)),
    "pv-host": PersistentVolume("pv-host", "x.csi", ((Requirement.in_(wk.HOSTNAME, "n1"),),)),
    "pv-local": PersistentVolume("pv-local", "", ((Requirement.in_(wk.HOSTNAME, "n1"), *ZONE3),), local=True),
    "pv-nfs": PersistentVolume("pv-nfs"),
    "pv-gone": PersistentVolume("pv-gone", EBS, deleting=True),
}


@dataclass(frozen=True)
class Case:
    name: str
    claims: tuple[PersistentVolumeClaim, ...]
    volumes: tuple[PodVolume, ...]
    problem: str = ""  # a substring of the problem ("" = none)
    zones: tuple[str, ...] | None = None  # the zone requirement's values (None = no requirement)
    attach: dict[str, frozenset[str]] = field(default_factory=dict)
    node_name: str = ""


D = "default/"
CASES = [
    Case("no claim", (), (PodVolume("v", claim="c"),), problem="PersistentVolumeClaim default/c not found"),
    Case(
        "deleting",
        (claim("c", storage_class="wffc", deleting=True),),
        (PodVolume("v", claim="c"),),
        "is being deleted",
    ),
    Case("lost", (claim("c", storage_class="wffc", phase="Lost"),), (PodVolume("v", claim="c"),), "is Lost"),
    Case(
        "unbound, no class",
        (claim("c", storage_class=""),),
        (PodVolume("v", claim="c"),),
        "names no StorageClass",
    ),
    Case(
        "unbound, class missing",
        (claim("c", storage_class="nope"),),
        (PodVolume("v", claim="c"),),
        "StorageClass nope",
    ),
    Case(
        "unbound, Immediate",
        (claim("c", storage_class="now"),),
        (PodVolume("v", claim="c"),),
        "binds Immediately",
    ),
    Case(
        "unbound, WaitForFirstConsumer",
        (claim("c", storage_class="wffc"),),
        (PodVolume("v", claim="c"),),
        zones=("test-zone-3",),
        attach={EBS: frozenset({D + "c"})},
    ),
    Case(
        "in-tree provisioner migrates",
        (claim("c", storage_class="intree"),),
        (PodVolume("v", claim="c"),),
        attach={EBS: frozenset({D + "c"})},
    ),
    Case(
        "no class: the newest default",
        (claim("c"),),
        (PodVolume("v", claim="c"),),
        attach={"b.csi": frozenset({D + "c"})},
    ),
    Case(
        "bound to a zonal volume",
        (bound("c", "pv-z3", storage_class="gone"),),
        (PodVolume("v", claim="c"),),
        zones=("test-zone-3",),
        attach={EBS: frozenset({D + "c"})},
    ),
    Case(
        "bound, not annotated",
        (claim("c", volume_name="pv-z3"),),
        (PodVolume("v", claim="c"),),
        "not bound yet",
    ),
    Case(
        "bound, volume missing", (bound("c", "pv-x"),), (PodVolume("v", claim="c"),), "PersistentVolume pv-x"
    ),
    Case(
        "bound, volume deleting", (bound("c", "pv-gone"),), (PodVolume("v", claim="c"),), "is being deleted"
    ),
    Case("bound, no CSI driver", (bound("c", "pv-nfs", storage_class=""),), (PodVolume("v", claim="c"),)),
    Case(
        "local volume: hostname dropped, zone kept",
        (bound("c", "pv-local"),),
        (PodVolume("v", claim="c"),),
        zones=("test-zone-3",),
    ),
    Case(
        "ephemeral: claim from the template",
        (),
        (PodVolume("tmp", ephemeral=True, storage_class="wffc"),),
        zones=("test-zone-3",),
        attach={EBS: frozenset({D + "p-tmp"})},
    ),
    Case(
        "ephemeral: the created claim wins",
        (bound("p-tmp", "pv-z3"),),
        (PodVolume("tmp", ephemeral=True, storage_class="nope"),),
        zones=("test-zone-3",),
        attach={EBS: frozenset({D + "p-tmp"})},
    ),
    Case(
        "ephemeral of a bound pod: no zone (it gets a new claim)",
        (bound("p-tmp", "pv-z3"),),
        (PodVolume("tmp", ephemeral=True),),
        attach={EBS: frozenset({D + "p-tmp"})},
        node_name="n1",
    ),
    Case("bound pod: problems skipped", (), (PodVolume("v", claim="c"),), node_name="n1"),
    Case(
        "one claim twice counts once",
        (claim("c", storage_class="wffc"),),
        (PodVolume("a", claim="c"), PodVolume("b", claim="c")),
        zones=("test-zone-3",),
        attach={EBS: frozenset({D + "c"})},
    ),
]


def storage(claims: tuple[PersistentVolumeClaim, ...] = (), **kw: object) -> Storage:
    return Storage(
        claims={c.key: c for c in claims},
        volumes=VOLUMES,
        classes=CLASSES,
        complete=True,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_resolve(case: Case) -> None:
    pod = b.pod("p", volumes=case.volumes, node_name=case.node_name)
    found = volumes.resolve(pod, storage(case.claims))
    assert found is not None
    if case.problem:
        assert case.problem in found.problem and found.problem.startswith('volume "')
        return
    assert found.problem == ""
    zone = found.requirements.get(wk.ZONE) if found.requirements is not None else None
    assert (zone.sorted_values() if zone is not None else None) == (list(case.zones) if case.zones else None)
    if found.requirements is not None:
        assert wk.HOSTNAME not in found.requirements or case.name.startswith("bound to")
    assert dict(found.attach) == case.attach


def test_no_volumes_or_no_claims_read_resolve_to_none() -> None:
    assert volumes.resolve(b.pod("p"), storage()) is None
    # nothing of the kind was read (not watched): the pod schedules as without volumes
    assert volumes.resolve(b.pod("p", volumes=(PodVolume("v", claim="c"),)), Storage()) is None


def test_a_missing_class_is_no_problem_when_no_class_was_read() -> None:
    pvcs = {"default/c": claim("c", storage_class="gp3")}
    found = volumes.resolve(b.pod("p", volumes=(PodVolume("v", claim="c"),)), Storage(claims=pvcs))
    assert found is not None and found.problem == "" and not found.attach


def test_a_non_local_volume_keeps_its_hostname() -> None:
    pod = b.pod("p", volumes=(PodVolume("v", claim="c"),))
    found = volumes.resolve(pod, storage((bound("c", "pv-host"),)))
    assert found is not None and found.requirements is not None
    assert found.requirements[wk.HOSTNAME].sorted_values() == ["n1"]


@pytest.mark.parametrize(
    ("used", "adding", "limits", "over"),
    [
        ({}, {EBS: frozenset({"a"})}, {EBS: 1}, None),
        ({EBS: frozenset({"a"})}, {EBS: frozenset({"a"})}, {EBS: 1}, None),  # shared: counted once
        ({EBS: frozenset({"a"})}, {EBS: frozenset({"b"})}, {EBS: 1}, (EBS, 2, 1)),
        ({EBS: frozenset({"a"})}, {"x.csi": frozenset({"b", "c"})}, {EBS: 1}, None),  # no limit for x.csi
        ({}, {EBS: frozenset({"a", "b", "c"})}, {EBS: 2, "x": 0}, (EBS, 3, 2)),
    ],
)
def test_over_limit(
    used: dict[str, frozenset[str]], adding: dict[str, frozenset[str]], limits: dict[str, int], over: object
) -> None:
    assert volumes.over_limit(used, adding, limits) == over


def test_a_node_counts_the_claims_of_its_running_pods_once() -> None:
    pvcs = (claim("a", storage_class="wffc"), claim("b", storage_class="wffc"))
    vols = (PodVolume("v", claim="a"),)
    pods = [
        b.pod("p1", node_name="n1", volumes=vols),
        b.pod("p2", node_name="n1", volumes=vols),
        b.pod("p3", node_name="n1", volumes=(PodVolume("v", claim="b"),), phase="Succeeded"),
    ]
    assert volumes.attached(pods, storage(pvcs)) == {EBS: frozenset({"default/a"})}


# -- whole solves --------------------------------------------------------------------------------


def _claims(n: int, prefix: str = "c") -> tuple[PersistentVolumeClaim, ...]:
    return tuple(claim(f"{prefix}{i}", storage_class="ebs") for i in range(n))


EBS_CLASS = {"ebs": StorageClass("ebs", EBS, WAIT_FOR_FIRST_CONSUMER)}


def _snapshot(pods: list[object], pvcs: tuple[PersistentVolumeClaim, ...], **kw: object) -> object:
    types = kw.pop("types", [b.instance_type("big", cpu="64", memory="64Gi", pods="100")])
    store = Storage(
        claims={c.key: c for c in pvcs},
        classes=EBS_CLASS,
        csi_nodes=kw.pop("csi_nodes", {}),  # type: ignore[arg-type]
        complete=True,
    )
    return b.snapshot(pools=[b.node_pool()], types=types, pods=pods, storage=store, **kw)  # type: ignore[arg-type]


def test_an_existing_node_takes_pods_up_to_its_csinode_limit() -> None:
    pvcs = _claims(4)
    node = b.node(
        "n1", labels={wk.ZONE: "test-zone-1"}, allocatable={"cpu": "8", "memory": "8Gi", "pods": "20"}
    )
    running = b.pod("running", node_name="n1", volumes=(PodVolume("v", claim="c0"),))
    pending = [b.pod(f"p{i}", volumes=(PodVolume("v", claim=f"c{i}"),)) for i in range(1, 4)]
    snap = _snapshot([running, *pending], pvcs, nodes=[node], csi_nodes={"n1": CSINode("n1", {EBS: 2})})
    results = scheduler.solve(snap)  # type: ignore[arg-type]
    assert results.existing == {"default/p1": "n1"}  # c0 + c1 = 2: full
    assert sorted(p.key for c in results.new_claims for p in c.pods) == ["default/p2", "default/p3"]


def test_a_new_nodeclaim_keeps_to_its_instance_types_attach_limits() -> None:
    small = b.replace(
        b.instance_type("small", cpu="64", memory="64Gi", pods="100", price=1.0), volume_limits={EBS: 2}
    )
    large = b.replace(
        b.instance_type("large", cpu="64", memory="64Gi", pods="100", price=2.0), volume_limits={EBS: 3}
    )
    pvcs = _claims(5)
    pods = [b.pod(f"p{i}", volumes=(PodVolume("v", claim=f"c{i}"),)) for i in range(5)]
    results = scheduler.solve(_snapshot(pods, pvcs, types=[small, large]))  # type: ignore[arg-type]
    sizes = sorted(len(c.pods) for c in results.new_claims)
    assert sizes == [2, 3]  # the first claim grows to the large type's 3, the rest open another
    third = next(c for c in results.new_claims if len(c.pods) == 3)
    assert [it.name for it in third.instance_types] == ["large"]
    assert not results.errors


def test_pods_sharing_a_claim_fill_one_nodeclaim() -> None:
    tiny = b.replace(b.instance_type("tiny", cpu="64", memory="64Gi", pods="100"), volume_limits={EBS: 1})
    pods = [b.pod(f"p{i}", volumes=(PodVolume("v", claim="shared"),)) for i in range(10)]
    results = scheduler.solve(_snapshot(pods, (claim("shared", storage_class="ebs"),), types=[tiny]))  # type: ignore[arg-type]
    assert [len(c.pods) for c in results.new_claims] == [10]


def test_a_volume_zone_rules_out_an_existing_node_in_another_zone() -> None:
    pvcs = (bound("c", "pv-z3"),)
    node = b.node("n1", labels={wk.ZONE: "test-zone-1"})
    pod = b.pod("p", volumes=(PodVolume("v", claim="c"),))
    store = Storage(claims={c.key: c for c in pvcs}, volumes=VOLUMES, complete=True)
    snap = b.snapshot(
        pools=[b.node_pool()], types=[b.instance_type("t")], nodes=[node], pods=[pod], storage=store
    )
    solver = scheduler.Solver(snap, [pod])
    results = solver.solve([pod])
    assert not results.existing
    (new,) = results.new_claims
    assert new.requirements[wk.ZONE].sorted_values() == ["test-zone-3"]
    why = solver.why_not_existing(pod)["n1"]
    assert why.startswith("volume topology (PersistentVolume pv-z3) conflicts")


def test_a_pod_whose_volumes_cannot_be_used_is_refused_with_the_reason() -> None:
    pod = b.pod("p", volumes=(PodVolume("data", claim="missing"),))
    results = scheduler.solve(_snapshot([pod], ()))  # type: ignore[arg-type]
    (error,) = results.errors
    assert error.reasons == {"validation": 'volume "data": PersistentVolumeClaim default/missing not found'}
    assert not results.new_claims


def test_the_reference_solver_agrees_on_volumes() -> None:
    limited = b.replace(b.instance_type("a", cpu="8", memory="8Gi", pods="20"), volume_limits={EBS: 3})
    pvcs = (*_claims(6), bound("z", "pv-z3"))
    node = b.node(
        "n1", labels={wk.ZONE: "test-zone-3"}, allocatable={"cpu": "8", "memory": "8Gi", "pods": "20"}
    )
    pods = [b.pod(f"p{i}", cpu="1", volumes=(PodVolume("v", claim=f"c{i % 6}"),)) for i in range(12)]
    pods += [b.pod(f"z{i}", cpu="1", volumes=(PodVolume("v", claim="z"),)) for i in range(3)]
    store = Storage(
        claims={c.key: c for c in pvcs},
        volumes=VOLUMES,
        classes=EBS_CLASS,
        csi_nodes={"n1": CSINode("n1", {EBS: 2})},
        complete=True,
    )
    snap = b.snapshot(pools=[b.node_pool()], types=[limited], nodes=[node], pods=pods, storage=store)
    fast, slow = scheduler.solve(snap), reference.solve(snap)
    assert fast.existing == slow.existing
    assert sorted(sorted(p.key for p in c.pods) for c in fast.new_claims) == sorted(
        sorted(p.key for p in c.pods) for c in slow.new_claims
    )
    assert len(fast.existing) >= 3 and all(len(c.pods) > 0 for c in fast.new_claims)


def test_a_pod_with_more_volumes_than_any_type_attaches_is_refused_by_the_pool() -> None:
    from karpy.core.explain.reasons import reason_class

    small = b.replace(b.instance_type("small", cpu="8", memory="8Gi", pods="20"), volume_limits={EBS: 2})
    pvcs = _claims(3)
    pod = b.pod("p", volumes=tuple(PodVolume(f"v{i}", claim=f"c{i}") for i in range(3)))
    results = scheduler.solve(_snapshot([pod], pvcs, types=[small]))  # type: ignore[arg-type]
    (error,) = results.errors
    message = error.reasons["nodepool/default"]
    assert message == (
        "volume attach limit: 3 volumes of ebs.csi.aws.com would be attached; "
        "the largest instance type left allows 2"
    )
    assert reason_class(message) == "volume-limit"


def test_a_node_without_csinode_takes_its_instance_types_limit() -> None:
    typed = b.replace(b.instance_type("typed", cpu="8", memory="8Gi", pods="20"), volume_limits={EBS: 1})
    node = b.node(
        "n1", labels={wk.INSTANCE_TYPE: "typed"}, allocatable={"cpu": "8", "memory": "8Gi", "pods": "20"}
    )
    running = b.pod("running", node_name="n1", volumes=(PodVolume("v", claim="c0"),))
    pending = b.pod("p1", volumes=(PodVolume("v", claim="c1"),))
    results = scheduler.solve(_snapshot([running, pending], _claims(2), types=[typed], nodes=[node]))  # type: ignore[arg-type]
    assert not results.existing and [len(c.pods) for c in results.new_claims] == [1]
