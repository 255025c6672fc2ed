"""Bad replica traces and curves: one line per bad row or point (never a traceback), a UTF-8
byte-order mark read, another encoding or a binary file named with its byte offset; a curve above
the pod cap refused before any pod exists; a file of Kubernetes manifests named for what it holds."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.sim import scenario, trace

DEPLOYMENT = {
    "metadata": {"name": "web"},
    "spec": {
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "w", "resources": {"requests": {"cpu": "1"}}}]},
        }
    },
}


def simulation(*workloads: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Simulation",
        "name": "t",
        "duration": "1h",
        "nodePools": [
            {
                "metadata": {"name": "default"},
                "spec": {
                    "template": {
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.kwok.sh",
                                "kind": "KWOKNodeClass",
                                "name": "k",
                            }
                        }
                    }
                },
            }
        ],
        "nodeClasses": [{"kind": "KWOKNodeClass", "metadata": {"name": "k"}}],
        "workloads": list(workloads),
    }


def deployment(name: str, replicas: Any) -> dict[str, Any]:
    d = copy.deepcopy(DEPLOYMENT)
    d["metadata"]["name"] = name
    return {"deployment": d, "replicas": replicas}


def write(folder: Path, doc: Any, name: str = "sim.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


def errors_of(path: Path, **kwargs: Any) -> list[str]:
    with pytest.raises(scenario.ScenarioError) as caught:
        scenario.load(path, **kwargs)
    return [str(p) for p in caught.value.problems]


def test_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_bytes(b"\xef\xbb\xbftime,replicas\n00:00,2\n12:00,4\n")
    curve = trace.load_csv(tmp_path / "trace.csv")
    assert curve.points == ((0.0, 2), (43200.0, 4))
    sc = scenario.load(write(tmp_path, simulation(deployment("web", "trace.csv"))))
    assert sc.deployments[0].replicas.points == curve.points


def test_latin_1_is_one_line_naming_the_file_and_the_byte_offset(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_bytes("time,replicas\n00:00,2\n# café\n".encode("latin-1"))
    lines = errors_of(write(tmp_path, simulation(deployment("web", "trace.csv"))))
    assert lines == [
        f'{tmp_path / "sim.yaml"}: document 0 (Simulation "t"): workloads[0].replicas: '
        f"{tmp_path / 'trace.csv'}: not UTF-8 text (byte 0xe9 at offset 27); save the trace as UTF-8 CSV"
    ]


def test_a_binary_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe")
    with pytest.raises(trace.TraceError) as caught:
        trace.load_csv(tmp_path / "trace.csv")
    assert caught.value.lines == [f"{tmp_path / 'trace.csv'}: a binary file, not a time,replicas CSV"]


def test_every_bad_row_is_reported(tmp_path: Path) -> None:
    rows = (
        "time,replicas\n00:00,1\n01:00,x\n02:00,-4\n03:00,3\nnoon\n02:30,5\n04:00,2\n2026-03-02T05:00:00Z,1\n"
    )
    (tmp_path / "trace.csv").write_text(rows)
    with pytest.raises(trace.TraceError) as caught:
        trace.load_csv(tmp_path / "trace.csv")
    where = tmp_path / "trace.csv"
    assert caught.value.lines == [
        f'{where}:3: replicas "x" is not an integer',
        f"{where}:4: replicas must not be negative",
        f"{where}:6: expected time,replicas",
        f"{where}:7: time 02:30 is not after the time on line 5",
        f"{where}:9: mixes times of day and timestamps",
    ]
    assert str(caught.value) == f'{where}:3: replicas "x" is not an integer (and 4 more)'
    lines = errors_of(write(tmp_path, simulation(deployment("web", {"csv": "trace.csv"}))))
    assert len(lines) == 5 and all("workloads[0].replicas.csv: " in line for line in lines)


def test_every_bad_point_of_a_curve_is_reported(tmp_path: Path) -> None:
    points = [["00:00", 1], ["01:00", -2], ["noon", 3], ["03:00", "many"]]
    lines = errors_of(write(tmp_path, simulation(deployment("web", {"points": points}))))
    paths = [line.split(": ")[2] for line in lines]
    assert paths == [
        "workloads[0].replicas.points[1][1]",
        "workloads[0].replicas.points[2][0]",
        "workloads[0].replicas.points[3][1]",
    ]
    unordered = [["00:00", 1], ["02:00", 2], ["01:00", 3], ["03:00", 4], ["02:30", 5]]
    lines = errors_of(write(tmp_path, simulation(deployment("web", {"points": unordered}))))
    assert [line.split(": ")[2:] for line in lines] == [
        ["workloads[0].replicas.points[2][0]", "times must increase within a day"],
        ["workloads[0].replicas.points[4][0]", "times must increase within a day"],
    ]


def test_a_curve_above_the_cap_is_an_error_before_any_pod_exists(tmp_path: Path) -> None:
    huge = write(
        tmp_path, simulation(deployment("web", {"points": [["00:00", 1], ["01:00", 1_000_000_000]]}))
    )
    assert errors_of(huge) == [
        f'{huge}: document 0 (Simulation "t"): workloads[0].replicas: 1,000,000,000 pods at the peak; '
        "the cap is 100,000 pods (--max-pods N raises it)"
    ]
    assert scenario.MAX_PODS == 100_000
    raised = scenario.load(huge, max_pods=1_000_000_000)
    assert max(v for _, v in raised.deployments[0].replicas.points) == 1_000_000_000


def test_the_cap_counts_the_workloads_together(tmp_path: Path) -> None:
    doc = simulation(deployment("web", 60_000), deployment("api", {"points": [["00:00", 50_000]]}))
    path = write(tmp_path, doc)
    (line,) = errors_of(path)
    assert line.endswith(
        "workloads: the workloads' peaks add up to 110,000 pods; "
        "the cap is 100,000 pods (--max-pods N raises it)"
    )
    assert len(scenario.load(path, max_pods=110_000).deployments) == 2
    (tmp_path / "big.csv").write_text("time,replicas\n00:00,5\n01:00,200001\n")
    (line,) = errors_of(write(tmp_path, simulation(deployment("web", "big.csv"))), max_pods=200_000)
    assert "workloads[0].replicas: 200,001 pods at the peak; the cap is 200,000 pods" in line


def test_a_file_of_kubernetes_manifests_is_named_for_what_it_holds(tmp_path: Path) -> None:
    manifests = "---\n".join(
        [
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\n",
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: a}\n",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n",
        ]
    )
    path = write(tmp_path, manifests, "cluster.yaml")
    assert errors_of(path) == [
        f"{path}: a Simulation file holds one kind: Simulation document, found 3 documents: NodePool, "
        "EC2NodeClass, Deployment; Kubernetes manifests are read by karpy plan -f"
    ]
    two = write(tmp_path, yaml.safe_dump(simulation()) + "---\n" + yaml.safe_dump(simulation()), "two.yaml")
    (line,) = errors_of(two)
    assert "found 2 documents: Simulation, Simulation" in line and "karpy plan" not in line
    empty = write(tmp_path, "# nothing yet\n", "empty.yaml")
    assert errors_of(empty) == [f"{empty}: empty: a Simulation file holds one kind: Simulation document"]


def test_an_unknown_field_of_an_embedded_object_warns_and_strict_refuses_it(tmp_path: Path) -> None:
    doc = simulation(deployment("web", 2))
    doc["nodePools"][0]["spec"]["disruption"] = {"consolidateAfer": "1m"}
    path = write(tmp_path, doc)
    sc = scenario.load(path)
    assert [str(w) for w in sc.warnings] == [
        f'{path}: document 0 (Simulation "t"): nodePools[0].spec.disruption.consolidateAfer: unknown field; '
        "did you mean consolidateAfter?"
    ]
    (line,) = errors_of(path, strict=True)
    assert line.endswith(
        "nodePools[0].spec.disruption.consolidateAfer: unknown field; did you mean consolidateAfter?"
    )
    doc["cloud"] = {"launchLatncy": {"p50": "30s"}}  # the simulator's own block: an error, strict or not
    (line,) = errors_of(write(tmp_path, doc))
    assert "cloud.launchLatncy" in line
