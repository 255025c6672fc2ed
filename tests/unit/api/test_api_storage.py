"""PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and pod volumes from YAML:
the fields the volume rules read, no unknown-field warning on an upstream manifest, one line per
bad object naming its field, and the objects reaching the snapshot."""

from __future__ import annotations

import pytest

from karpy.api import load as api_load
from karpy.model import labels as wk
from karpy.model.volumes import CSINode, PersistentVolume, PersistentVolumeClaim, PodVolume, StorageClass
from karpy.planning import build_cluster
from karpy.settings import Settings

GOOD = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-db-0
  namespace: shop
  annotations: {pv.kubernetes.io/bind-completed: "yes"}
spec:
  storageClassName: gp3
  volumeName: pvc-1
  accessModes: [ReadWriteOnce]
  volumeMode: Filesystem
  resources: {requests: {storage: 10Gi}}
status: {phase: Bound, accessModes: [ReadWriteOnce], capacity: {storage: 10Gi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pvc-1}
spec:
  storageClassName: gp3
  accessModes: [ReadWriteOnce]
  capacity: {storage: 10Gi}
  persistentVolumeReclaimPolicy: Delete
  claimRef: {namespace: shop, name: data-db-0}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0abc, fsType: ext4}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
status: {phase: Bound}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: gp3
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: ebs.csi.aws.com
parameters: {type: gp3}
reclaimPolicy: Delete
allowVolumeExpansion: true
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [us-east-1a, us-east-1b]}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: ip-10-0-1-21}
spec:
  drivers:
  - name: ebs.csi.aws.com
    nodeID: i-0123
    topologyKeys: [topology.ebs.csi.aws.com/zone]
    allocatable: {count: 25}
  - {name: efs.csi.aws.com, nodeID: i-0123}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: shop}
spec:
  containers: [{name: c, image: x}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data-db-0}}
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  - {name: config, configMap: {name: db-config}}
  - {name: tmp, emptyDir: {}}
"""


def test_the_storage_kinds_load_with_the_fields_the_rules_read() -> None:
    loaded = api_load.load_text(GOOD, file="storage.yaml")
    assert loaded.problems == [] and loaded.warnings == [] and loaded.skipped == []
    (claim,) = loaded.claims
    assert claim == PersistentVolumeClaim("shop", "data-db-0", "gp3", "pvc-1", True, "Bound")
    (volume,) = loaded.persistent_volumes
    assert isinstance(volume, PersistentVolume) and volume.driver == "ebs.csi.aws.com"
    assert volume.storage_class == "gp3" and not volume.local
    assert [[str(r) for r in term] for term in volume.node_affinity] == [[f"{wk.ZONE} In [us-east-1a]"]]
    (sc,) = loaded.storage_classes
    assert isinstance(sc, StorageClass) and sc.default and sc.binding_mode == "WaitForFirstConsumer"
    assert [r.sorted_values() for r in sc.allowed_topologies[0]] == [["us-east-1a", "us-east-1b"]]
    assert loaded.csi_nodes == [CSINode("ip-10-0-1-21", {"ebs.csi.aws.com": 25})]
    (pod,) = loaded.pods
    assert pod.volumes == (
        PodVolume("data", claim="data-db-0"),
        PodVolume("scratch", ephemeral=True, storage_class="gp3"),
    )


def test_storage_class_unset_and_empty_differ() -> None:
    text = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: a}
spec: {accessModes: [ReadWriteOnce]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: b}
spec: {storageClassName: ""}
"""
    a, b = api_load.load_text(text).claims
    assert (a.storage_class, b.storage_class) == (None, "")
    assert (a.namespace, a.bind_completed) == ("default", False)


def test_in_tree_and_local_volume_sources() -> None:
    text = """
apiVersion: v1
kind: PersistentVolume
metadata: {name: old}
spec: {awsElasticBlockStore: {volumeID: vol-1, fsType: ext4}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: disk}
spec: {local: {path: /mnt/disks/1}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: share}
spec: {nfs: {server: fs, path: /}}
"""
    old, disk, share = api_load.load_text(text).persistent_volumes
    assert (old.driver, disk.local, share.driver, share.local) == ("ebs.csi.aws.com", True, "", False)


POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
SC = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: s}\n"
BAD = [
    (
        POD + "spec: {volumes: [{name: d, persistentVolumeClaim: {}}]}",
        "spec.volumes[0].persistentVolumeClaim.claimName",
        "required",
    ),
    (
        POD + "spec: {volumes: [{ephemeral: {volumeClaimTemplate: {spec: {}}}}]}",
        "spec.volumes[0].name",
        "required",
    ),
    (
        SC + "provisioner: x\nvolumeBindingMode: Later",
        "volumeBindingMode",
        "Immediate",
    ),
    (SC, "provisioner", "required"),
    (
        "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n}\n"
        "spec: {drivers: [{name: d, allocatable: {count: -1}}]}",
        "spec.drivers[0].allocatable.count",
        "",
    ),
    (
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: v}\nspec: {csi: {volumeHandle: h}}",
        "spec.csi.driver",
        "required",
    ),
]


@pytest.mark.parametrize(("text", "path", "words"), BAD, ids=[p for _, p, _ in BAD])
def test_a_bad_object_is_one_problem_naming_its_field_and_the_others_load(
    text: str, path: str, words: str
) -> None:
    good = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: fine}\n"
    loaded = api_load.load_text(text + "\n---\n" + good, file="in.yaml")
    (problem,) = loaded.problems
    assert problem.file == "in.yaml" and problem.index == 0 and problem.path == path
    assert words in problem.message
    assert [c.name for c in loaded.claims] == ["fine"]


def test_an_unknown_field_is_named_a_volume_source_is_not() -> None:
    text = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c}
spec: {storageClasName: gp3}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c}], volumes: [{name: v, hostPath: {path: /x}}]}
"""
    loaded = api_load.load_text(text)
    assert [(w.kind, w.path) for w in loaded.warnings] == [("PersistentVolumeClaim", "spec.storageClasName")]
    assert "storageClassName" in loaded.warnings[0].message


def test_the_storage_objects_reach_the_snapshot() -> None:
    cluster, _ = build_cluster(api_load.load_text(GOOD), catalog_spec="aws:us-east-1", settings=Settings())
    storage = cluster.snapshot(0.0).storage
    assert set(storage.claims) == {"shop/data-db-0"} and set(storage.volumes) == {"pvc-1"}
    assert set(storage.classes) == {"gp3"}
    assert storage.csi_nodes["ip-10-0-1-21"].limits == {"ebs.csi.aws.com": 25}
    assert storage.default_class() == "gp3" and not storage.complete
    assert cluster.snapshot(1.0).storage is storage  # one view while nothing changed
