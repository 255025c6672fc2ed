"""``karpy record`` against the Kubernetes emulator over real HTTP.

A workload scripted on the emulator (kubectl writes on a virtual clock: a Deployment scaled up and
down, a Parallel StatefulSet, a Job, a bare pod) is recorded by the command's own watching
(:class:`karpy.record.live.LiveRecording`) and the trace replayed by the simulator: the pods
arrive per owner as they did (and the Deployment's and StatefulSet's live pods follow). The same
recording written with ``--anonymize``'s hasher names no pod, owner or namespace, and replays the
same arrivals under the hashed names. ``karpy record`` run as a process and sent SIGTERM writes
what it recorded and says so; an unreachable server and a bad ``--duration`` are exit 2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from emulator import EmulatorThread
from operator_harness import NODE_CLASS, kubeconfig_file, node_pool
from typer.testing import CliRunner

from karpy.adapters.kube.client import KubeClient
from karpy.api import common
from karpy.cli import app
from karpy.record import anonymize, live, model, recorder
from karpy.sim import runner
from karpy.sim import scenario as scenario_mod

T0 = common.parse_time("2026-03-02T10:00:00Z")
END = T0 + 1200
NS = "shop"
pytestmark = pytest.mark.usefixtures("restore_logging")


def _template(app: str, cpu: str = "500m") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": app, "image": f"{app}:1", "resources": {"requests": {"cpu": cpu}}}]},
    }


def _pod(name: str, app: str, owner: tuple[str, str] | None, namespace: str = NS) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": app}}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": owner[0], "name": owner[1], "uid": "u", "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": _template(app)["spec"]}


def _deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": _template("web"),
        },
    }


class Script:
    """kubectl on the emulator, each step at a virtual time the recorder is stamped with."""

    def __init__(self, emu: EmulatorThread, kubectl: KubeClient) -> None:
        self.emu, self.kubectl = emu, kubectl
        self.now = T0
        self.written: dict[str, int] = {}

    def write(self, verb: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if verb == "create":
            self.kubectl.create(obj)
        elif verb == "update":
            current = self.kubectl.get(obj["kind"], meta["name"], meta.get("namespace", ""))
            self.kubectl.update({**obj, "metadata": {**current["metadata"], **meta}})
        else:
            self.kubectl.delete(obj["kind"], meta["name"], meta.get("namespace", ""))
        self.written[obj["kind"]] = self.emu.run(lambda: self.emu.emulator._last_rv)

    def at(self, seconds: float, recording: live.LiveRecording) -> None:
        """Let the recorder take what was written, then move the clock to ``T0 + seconds``."""
        deadline = time.monotonic() + 10
        while any(
            recording.recorder.versions.get(k, 0) < v for k, v in self.written.items() if k in recorder.KINDS
        ):
            assert time.monotonic() < deadline, "the recorder did not see the writes"
            recording.pump(0.05)
        self.now = T0 + seconds


def _running(pod: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    return {**pod, "status": {"phase": phase}}


def _scripted(emu: EmulatorThread, kubectl: KubeClient) -> tuple[model.Recording, Any]:
    s = Script(emu, kubectl)
    for obj in (NODE_CLASS, node_pool(), _deployment(2)):
        s.write("create", obj)
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "web-h",
            "namespace": NS,
            "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "u", "controller": True}],
        },
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": _template("web")},
    }
    s.write("create", rs)
    web = [_pod(f"web-h-{i}", "web", ("ReplicaSet", "web-h")) for i in range(4)]
    for pod in web[:2]:
        s.write("create", pod)
    client = KubeClient(host=emu.url, identity="karpy-record", timeout=5.0).start()
    try:
        recording = live.LiveRecording(client, clock=lambda: s.now, server="kmock")
        snap = recording.start(sync_timeout=10.0)
        s.at(60, recording)
        sts = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": NS},
            "spec": {
                "replicas": 2,
                "podManagementPolicy": "Parallel",
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": _template("db"),
            },
        }
        s.write("create", sts)
        for i in range(2):
            s.write("create", _pod(f"db-{i}", "db", ("StatefulSet", "db")))
        s.at(120, recording)
        s.write("update", _deployment(4))
        for pod in web[2:]:
            s.write("create", pod)
        s.at(180, recording)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "batch-1", "namespace": NS},
            "spec": {"completions": 2, "parallelism": 2, "template": _template("batch")},
        }
        s.write("create", job)
        batch = [_pod(f"batch-1-{i}", "batch", ("Job", "batch-1")) for i in range(2)]
        for pod in batch:
            s.write("create", pod)
        s.at(190, recording)
        for pod in batch:
            s.write("update", _running(pod))
        s.at(300, recording)
        debug = _pod("debug", "debug", None, namespace="ops")
        s.write("create", debug)
        s.at(600, recording)
        s.write("update", _deployment(1))
        for pod in web[1:]:
            s.write("delete", pod)
        s.at(790, recording)
        for pod in batch:
            s.write("update", _running(pod, "Succeeded"))
        s.at(900, recording)
        s.write("delete", debug)
        s.at(1200, recording)
        return recording.finish(), snap
    finally:
        client.close()


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[model.Recording, Any]]:
    emu = EmulatorThread()
    kubectl = KubeClient(host=emu.url, identity="kubectl", timeout=5.0).start()
    try:
        yield _scripted(emu, kubectl)
    finally:
        kubectl.close()
        emu.stop()


def _replayed(trace: Path) -> model.Recording:
    """The trace run through the simulator, recorded by the same recorder on the virtual clock."""
    sc = scenario_mod.load(trace)
    now = [sc.start]
    rec = recorder.Recorder(lambda: now[0])
    rec.begin()

    def observe(at: float, event: Any) -> None:
        now[0] = at
        rec.observe(event)

    runner.run(sc, seed=1, observe=[observe])
    now[0] = sc.end
    return rec.finish()


def _arrivals(recording: model.Recording) -> dict[model.OwnerKey, list[int]]:
    """Per owner, the pods created by each minute of the window."""
    out: dict[model.OwnerKey, list[int]] = {}
    for pod in recording.pods:
        if not pod.daemonset:
            out.setdefault(pod.owner, [0] * 21)
            for minute in range(21):
                out[pod.owner][minute] += pod.created <= recording.start + 60 * minute
    return out


def _live(recording: model.Recording, kind: str) -> dict[model.OwnerKey, list[int]]:
    """Per owner of ``kind``, its pods not deleted at each minute."""
    out: dict[model.OwnerKey, list[int]] = {}
    for pod in recording.pods:
        if pod.owner.kind == kind:
            t = [recording.start + 60 * m + 30 for m in range(20)]
            counts = out.setdefault(pod.owner, [0] * 20)
            for i, when in enumerate(t):
                counts[i] += pod.created <= when and (pod.deleted is None or pod.deleted > when)
    return out


def test_a_scripted_workload_recorded_and_replayed_gives_the_same_arrivals(
    scripted: tuple[model.Recording, Any], tmp_path: Path
) -> None:
    recording, snap = scripted
    assert (recording.start, recording.end) == (T0, END)
    doc = live.write(recording, snap, trace=tmp_path / "day.yaml", catalog="aws:us-east-1")
    assert doc["initialState"] == {"snapshot": "day-snapshot", "pods": False}
    assert (tmp_path / "day-snapshot" / "pods.yaml").is_file()
    kinds = [next(k for k in ("deployment", "statefulSet", "job", "pod") if k in w) for w in doc["workloads"]]
    assert kinds == ["pod", "deployment", "job", "statefulSet"]
    replayed = _replayed(tmp_path / "day.yaml")
    want = _arrivals(recording)
    assert want == _arrivals(replayed)
    assert want[model.OwnerKey(NS, "Deployment", "web")][-1] == 4
    assert want[model.OwnerKey(NS, "Job", "batch-1")][2:5] == [0, 2, 2]
    for kind in ("Deployment", "StatefulSet", ""):
        assert _live(recording, kind) == _live(replayed, kind), kind


def test_anonymize_maps_names_consistently(scripted: tuple[model.Recording, Any], tmp_path: Path) -> None:
    recording, snap = scripted
    hasher = anonymize.Hasher(b"a key")
    trace = tmp_path / "shared.yaml"
    live.write(recording, snap, trace=trace, catalog="aws:us-east-1", hasher=hasher)
    doc = yaml.safe_load(trace.read_text())
    names = {
        (w[k]["metadata"].get("namespace"), w[k]["metadata"].get("name"))
        for w in doc["workloads"]
        for k in ("deployment", "statefulSet", "job", "pod")
        if k in w
    }
    assert names == {(hasher("shop"), hasher(n)) for n in ("web", "db", "batch-1")} | {
        (hasher("ops"), hasher("debug"))
    }
    job = next(w for w in doc["workloads"] if "job" in w)
    assert job["runs"][0]["name"] == hasher("batch-1")
    assert "server" not in doc["description"] and doc["recorded"]["server"] == ""
    written = (
        "".join(p.read_text() for p in (tmp_path / "shared-snapshot").glob("*.yaml")) + trace.read_text()
    )
    for secret in ("shop", "ops", "web-h", "batch-1", "name: debug", "kmock", "db-0"):
        assert secret not in written, secret
    assert "app: web" in written and "app: debug" in written  # labels are kept (selectors keep matching)
    pods = list(yaml.safe_load_all((tmp_path / "shared-snapshot" / "pods.yaml").read_text()))
    assert {(p["metadata"]["namespace"], p["metadata"]["ownerReferences"][0]["name"]) for p in pods} == {
        (hasher("shop"), hasher("web-h"))
    }
    hashed = {
        model.OwnerKey(hasher.namespace(k.namespace), k.kind, hasher(k.name)): v
        for k, v in _arrivals(recording).items()
    }
    assert _arrivals(_replayed(trace)) == hashed


def test_sigterm_mid_record_writes_a_partial_trace(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path
) -> None:
    config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
    trace = tmp_path / "cut.yaml"
    command = [
        sys.executable,
        "-m",
        "karpy",
        "record",
        "--kubeconfig",
        str(config),
        "--context",
        "emu",
        "--duration",
        "1h",
        "-o",
        str(trace),
    ]
    process = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "KARPY_PURE": "1"},
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    while line and not line.startswith("recording "):
        line = process.stderr.readline()
    assert line.startswith("recording http://127.0.0.1:"), line
    kubectl.create(_pod("late", "late", None))
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert err.startswith("interrupted: SIGTERM after "), err
    assert f"wrote the partial recording to {trace}" in err
    assert out.startswith(f"wrote {trace} (1 workloads, 0 nodes, ")
    sc = scenario_mod.load(trace)
    assert sc.recorded is not None and sc.recorded.interrupted
    assert sc.duration < 60 and [p.name for p in sc.pods] == ["late"]
    assert "partial recording" in yaml.safe_load(trace.read_text())["description"]


def test_record_input_errors_are_exit_2(tmp_path: Path) -> None:
    cli = CliRunner()
    result = cli.invoke(app, ["record", "--duration", "1 day", "-o", str(tmp_path / "t.yaml")])
    assert result.exit_code == 2 and result.stderr.startswith('error: --duration: "1 day" is not a duration')
    config = kubeconfig_file(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    result = cli.invoke(
        app,
        [
            "record",
            "--kubeconfig",
            str(config),
            "--context",
            "emu",
            "--duration",
            "1m",
            "-o",
            str(tmp_path / "t.yaml"),
            "--timeout",
            "1",
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        line for line in result.stderr.splitlines() if line.startswith("error: cannot reach the API server")
    ]
    assert not (tmp_path / "t.yaml").exists()
