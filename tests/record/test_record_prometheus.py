"""``karpy record --from-prometheus``: the trace rebuilt from kube-state-metrics series.

A stand-in Prometheus (stdlib ``http.server`` on 127.0.0.1, in a thread) serves the answers
committed in ``tests/record/prometheus/`` (``generate.py``: the run ``examples/backtest/shop.yaml``
recorded live, scraped as kube-state-metrics would every 60 s): the rebuilt trace has the live
recording's owners, templates, NodePools, pods alive at the start, pod counts per owner minute by
minute, job and bare-pod runs and nodes, each time within one step, and its DaemonSet. Range queries
longer than Prometheus's 11,000 points (the stand-in refuses them, as Prometheus does) are sent in
chunks: the right number, joined into the same series. A Prometheus that is down, too slow,
answers HTTP 400, ``status: error``, not JSON, or has no kube-state-metrics series is exit 2 with
one line; so are bad flags. The pure half is table-driven: pod lives, owners, label names, requests, nodes.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from karpy.api import common
from karpy.cli import app
from karpy.record import model, prom_client, prom_labels, prom_series
from karpy.record.prom_series import Series

HERE = Path(__file__).resolve().parent
ANSWERS = HERE / "prometheus"
EXAMPLE = HERE.parents[1] / "examples" / "backtest"
START, END, STEP = "2026-03-02T07:20:00Z", "2026-03-02T09:00:00Z", 60.0
T0, T1 = common.parse_time(START), common.parse_time(END)
pytestmark = pytest.mark.usefixtures("restore_logging")


# -- a stand-in Prometheus ----------------------------------------------------------------------


class Prometheus:
    """Serves the committed answers: an instant query as stored, a range query's samples within its
    start and end; refuses (as Prometheus does) a range of more than 11,000 points. ``fail`` maps a
    metric to the raw (status, body) to answer instead. Every request is kept in ``requests``."""

    def __init__(self, answers: Path = ANSWERS) -> None:
        self.answers = {p.stem: json.loads(p.read_text())["data"] for p in answers.glob("*.json")}
        self.fail: dict[str, tuple[int, bytes]] = {}
        self.delay = 0.0  # seconds before each answer
        self.requests: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                params = dict(urllib.parse.parse_qsl(url.query))
                owner.requests.append((url.path, params))
                time.sleep(owner.delay)
                status, body = owner.answer(url.path, params)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (the timeout test)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def answer(self, path: str, params: Mapping[str, str]) -> tuple[int, bytes]:
        found = re.search(r"kube_[a-z_]+", params.get("query", ""))
        metric = found.group(0) if found else ""
        if metric in self.fail:
            return self.fail[metric]
        data = self.answers.get(metric)
        if data is None:
            return 400, _error("bad_data", f"unknown metric in {params.get('query')!r}")
        if path == "/api/v1/query":
            return 200, json.dumps({"status": "success", "data": data}).encode()
        start, end, step = (float(params[k]) for k in ("start", "end", "step"))
        if (end - start) / step > 11_000:
            return 400, _error("bad_data", "exceeded maximum resolution of 11,000 points per timeseries")
        result = []
        for item in data["result"]:
            values = [v for v in item["values"] if start <= v[0] <= end]
            if values:
                result.append({"metric": item["metric"], "values": values})
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return 200, json.dumps(body).encode()

    def ranged(self) -> list[dict[str, str]]:
        return [params for path, params in self.requests if path == "/api/v1/query_range"]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(kind: str, message: str) -> bytes:
    return json.dumps({"status": "error", "errorType": kind, "error": message}).encode()


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    server = Prometheus()
    yield server
    server.stop()


def _record(url: str, tmp_path: Path, *extra: str) -> Any:
    args = [
        "record",
        "--from-prometheus",
        url,
        "--start",
        START,
        "--end",
        END,
        "-o",
        str(tmp_path / "p.yaml"),
    ]
    return CliRunner().invoke(app, [*args, *extra])


def _nodepools(tmp_path: Path) -> Path:
    live = yaml.safe_load((EXAMPLE / "shop.yaml").read_text())
    path = tmp_path / "nodepools.yaml"
    path.write_text(yaml.safe_dump_all([*live["nodePools"], *live["nodeClasses"]]))
    return path


# -- the rebuilt trace against the live recording ------------------------------------------------


def _at(curve: int | Mapping[str, Any], t: float) -> int:
    """A replicas curve's value at ``t`` (a step curve of RFC3339 points, or a constant)."""
    if isinstance(curve, int):
        return curve
    value = 0
    for stamp, n in curve["points"]:
        if common.parse_time(stamp) <= t:
            value = n
    return value


def _within_a_step(ours: str | None, theirs: str | None) -> bool:
    """A time the Prometheus path stamps at the step that shows it: at or up to a step after."""
    if ours is None or theirs is None:
        return ours == theirs
    return 0 <= common.parse_time(ours) - common.parse_time(theirs) <= STEP


def _owners(doc: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    for w in doc["workloads"]:
        kind = next(k for k in ("deployment", "statefulSet", "job", "pod") if k in w)
        meta = w[kind]["metadata"]
        out.append((kind, meta["namespace"], meta.get("name") or meta.get("generateName")))
    return out


def test_the_rebuilt_trace_has_the_live_recordings_workload_and_nodes(
    prometheus: Prometheus, tmp_path: Path
) -> None:
    result = _record(prometheus.url, tmp_path, "--nodepools", str(_nodepools(tmp_path)))
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"wrote {tmp_path / 'p.yaml'} (5 workloads, 7 nodes, 1h40m from {START}) from {prometheus.url} "
        f"({len(prom_series.QUERIES)} queries, step 1m)\n"
    )
    warnings = result.stderr.splitlines()
    assert all(line.startswith("warning: ") for line in warnings)
    assert any("kube_pod_annotations: no series" in line for line in warnings)
    assert len(warnings) == 2 + len(prom_series.GAPS)  # (annotations, node selectors: not exported here)
    text = (tmp_path / "p.yaml").read_text()
    assert text.startswith(
        "# Rebuilt from kube-state-metrics series through Prometheus: times are known to 1m"
    )
    ours, live = yaml.safe_load(text), yaml.safe_load((EXAMPLE / "shop.yaml").read_text())
    assert "known to 1m (the step)" in ours["description"]
    assert ours["recorded"]["source"] == "prometheus" and ours["recorded"]["autoscaler"] == "karpenter"
    assert "initialState" not in ours and "cloud" not in ours
    for key in ("start", "duration", "catalog", "nodePools", "nodeClasses"):
        assert ours[key] == live[key], key
    agents = list(yaml.safe_load_all((EXAMPLE / "shop-snapshot" / "daemonsets.yaml").read_text()))
    assert [d["spec"]["template"] for d in ours["daemonSets"]] == [a["spec"]["template"] for a in agents]

    assert _owners(ours) == _owners(live)
    for mine, theirs in zip(ours["workloads"], live["workloads"], strict=True):
        kind = next(iter(theirs))
        assert mine[kind] == theirs[kind], kind  # templates, job spec
        if "replicas" in theirs:
            for t in range(int(T0), int(T1) + 1, int(STEP)):
                seen = {_at(theirs["replicas"], u) for u in (t - STEP, t)}
                assert _at(mine["replicas"], t) in seen, (kind, t)
        assert [
            _within_a_step(a, b)
            for a, b in zip(mine.get("rollouts", []), theirs.get("rollouts", []), strict=True)
        ] == [True for _ in theirs.get("rollouts", [])]
        for run, want in zip(mine.get("runs", []), theirs.get("runs", []), strict=True):
            assert run.get("name") == want.get("name")
            assert _within_a_step(run["at"], want["at"]) and _within_a_step(
                run.get("deleteAt"), want.get("deleteAt")
            )
            ran = [common.parse_duration(r["runFor"]) or 0 for r in (run, want) if "runFor" in r]
            assert len(ran) != 1 and (not ran or abs(ran[0] - ran[1]) <= STEP)

    mine_nodes, live_nodes = ours["recorded"]["nodes"], live["recorded"]["nodes"]
    same = ("name", "instanceType", "zone", "capacityType", "nodePool")
    assert [[n[k] for k in same] for n in mine_nodes] == [[n[k] for k in same] for n in live_nodes]
    for mine_node, live_node in zip(mine_nodes, live_nodes, strict=True):
        assert mine_node["launched"] == mine_node["registered"]  # NodeClaims are not in the metrics
        assert (
            abs(common.parse_time(mine_node["registered"]) - common.parse_time(live_node["registered"])) <= 1
        )
        assert _within_a_step(mine_node["ready"], live_node["ready"])
        assert _within_a_step(mine_node.get("deleted"), live_node.get("deleted"))
    figures, live_figures = ours["recorded"]["figures"], live["recorded"]["figures"]
    for key in ("peakNodes", "nodesLaunched", "podsCreated", "pendingSeconds"):
        assert figures[key] == live_figures[key], key
    assert figures["nodeHours"] == pytest.approx(live_figures["nodeHours"], rel=0.01)


def test_pod_counts_per_owner_follow_the_live_recording_within_a_step(prometheus: Prometheus) -> None:
    answers = prom_client.read(prom_client.Client(prometheus.url), start=T0, end=T1, step=STEP)
    recording = prom_series.rebuild(answers, start=T0, end=T1, step=STEP).recording
    live = yaml.safe_load((EXAMPLE / "shop.yaml").read_text())
    snapshot = yaml.safe_load_all((EXAMPLE / "shop-snapshot" / "pods.yaml").read_text())
    workload = [p for p in recording.pods if not p.daemonset]
    alive = sorted(p["metadata"]["name"] for p in snapshot if p["metadata"]["namespace"] != "kube-system")
    assert sorted(p.name for p in workload if p.created == T0) == alive

    def counted(name: str, t: float) -> int:
        return sum(
            1
            for p in workload
            if p.owner.name == name
            and p.created <= t
            and all(d is None or d > t for d in (p.deleted, p.finished))
        )

    for w in live["workloads"]:
        kind = next(iter(w))
        name = w[kind]["metadata"].get("name") or w[kind]["metadata"]["generateName"]
        if kind in ("deployment", "statefulSet"):
            rollouts = [common.parse_time(r) for r in w.get("rollouts", [])]
            for t in range(int(T0), int(T1) + 1, int(STEP)):
                wanted = {_at(w["replicas"], u) for u in (t - STEP, t)}
                n = counted(name, t)
                surging = any(r <= t <= r + STEP for r in rollouts)  # a rollout's surge: 25% more for a step
                assert n in wanted or (
                    surging and max(wanted) < n <= max(wanted) + math.ceil(max(wanted) / 4)
                ), (
                    name,
                    t,
                )
        else:  # a Job's runs, bare pods: their pods arrive when the runs start
            arrivals = sorted(p.created for p in workload if p.owner.name == name)
            per_run = w[kind]["spec"].get("completions", 1) if kind == "job" else 1
            starts = [common.parse_time(r["at"]) for r in w["runs"] for _ in range(per_run)]
            assert [abs(a - b) <= STEP for a, b in zip(arrivals, starts, strict=True)] == [True] * len(starts)


def test_anonymize_hashes_names_and_keeps_the_workload(prometheus: Prometheus, tmp_path: Path) -> None:
    result = _record(prometheus.url, tmp_path, "--anonymize")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "p.yaml").read_text()
    doc = yaml.safe_load(text)
    names = {(ns, name) for _, ns, name in _owners(doc)}
    assert len(names) == 5 and not names & {
        (ns, name) for _, ns, name in _owners(yaml.safe_load((EXAMPLE / "shop.yaml").read_text()))
    }
    assert all(ns.startswith("a") and len(ns) == 13 for ns, _ in names) and prometheus.url not in text
    assert doc["daemonSets"][0]["metadata"]["namespace"] == "kube-system"  # kept, as in a live recording
    assert doc["recorded"]["nodes"][0]["name"] == "rec-default-00001"  # node names are not hashed
    assert "give --nodepools FILE" in result.stderr and "nodePools" not in doc


# -- chunks and errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "step", "most", "want"),
    [
        (0, 600, 60, 11_000, [(0, 600)]),
        (0, 100, 10, 4, [(0, 30), (40, 70), (80, 100)]),
        (0, 105, 10, 11, [(0, 100)]),  # the grid stops at 100
        (0, 110, 10, 11, [(0, 100), (110, 110)]),
        (0, 86_400, 1, 11_000, [(i * 11_000, min(86_400, i * 11_000 + 10_999)) for i in range(8)]),
    ],
)
def test_chunks_cover_the_grid_within_the_limit(
    start: float, end: float, step: float, most: int, want: list[tuple[float, float]]
) -> None:
    got = prom_client.chunks(start, end, step, most)
    assert got == want
    assert all((b - a) / step < most for a, b in got)


def test_a_long_range_is_sent_in_chunks_and_joined(prometheus: Prometheus) -> None:
    client = prom_client.Client(prometheus.url)
    whole = client.range("kube_pod_created", start=T0, end=T1, step=STEP)
    # one second apart from 07:20 to 10:50 is 12,601 points: two queries, each under the limit
    fine = client.range("kube_pod_created", start=T0, end=T0 + 12_600, step=1)
    assert [len(prometheus.ranged()), client.sent] == [3, 3]
    assert all(
        (float(p["end"]) - float(p["start"])) / float(p["step"]) <= 11_000 for p in prometheus.ranged()
    )
    assert fine == whole
    small = prom_client.Client(prometheus.url, max_points=30)
    assert small.range("kube_pod_created", start=T0, end=T1, step=STEP) == whole
    assert small.sent == 4  # 101 steps, 30 a query


def _one_error(result: Any, starts: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {starts}"), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_prometheus_failures_are_one_line_and_exit_2(prometheus: Prometheus, tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    _one_error(_record(down, tmp_path), f"cannot reach Prometheus at {down}: ")
    prometheus.fail["kube_pod_created"] = (400, _error("bad_data", "invalid parameter 'query'"))
    _one_error(
        _record(prometheus.url, tmp_path),
        f"Prometheus at {prometheus.url} answered HTTP 400 to kube_pod_created: bad_data: invalid parameter",
    )
    prometheus.fail["kube_pod_created"] = (200, _error("execution", "query timed out"))
    _one_error(
        _record(prometheus.url, tmp_path),
        f"Prometheus at {prometheus.url} could not run kube_pod_created: execution: query timed out",
    )
    prometheus.fail["kube_pod_created"] = (200, b"<html>Grafana</html>")
    _one_error(
        _record(prometheus.url, tmp_path), f"{prometheus.url} did not answer kube_pod_created as Prometheus"
    )
    prometheus.delay = 0.5
    _one_error(
        _record(prometheus.url, tmp_path, "--timeout", "0.1"),
        f"Prometheus at {prometheus.url} did not answer kube_pod_created within 0.1 s",
    )
    prometheus.delay = 0.0
    empty = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    prometheus.fail["kube_pod_created"] = (200, json.dumps(empty).encode())
    _one_error(
        _record(prometheus.url, tmp_path), f"Prometheus at {prometheus.url} has no kube_pod_created series"
    )
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize(
    ("args", "starts"),
    [
        (["--start", "yesterday"], '--start: "yesterday" is not an RFC3339 time'),
        (["--end", START], "--end: must be after --start"),
        (["--step", "0s"], "--step: must be 1s or longer"),
        (["--duration", "1h"], "give --from-prometheus URL or --kubeconfig/--context/--duration, not both"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(tmp_path: Path, args: list[str], starts: str) -> None:
    _one_error(_record("http://127.0.0.1:9", tmp_path, *args), starts)


def test_other_bad_input_is_exit_2(tmp_path: Path) -> None:
    cli = CliRunner()
    result = cli.invoke(
        app, ["record", "--from-prometheus", "prom:9090", "--start", START, "--end", END, "-o", "t.yaml"]
    )
    _one_error(result, '--from-prometheus: "prom:9090" is not an http:// or https:// URL')
    _one_error(
        cli.invoke(app, ["record", "--start", START, "-o", "t.yaml"]), "--start: only with --from-prometheus"
    )
    _one_error(cli.invoke(app, ["record", "-o", "t.yaml"]), "--duration: required")
    (tmp_path / "pools.yaml").write_text(
        "kind: NodePool\napiVersion: karpenter.sh/v1\nmetadata: {name: x}\nspec: 3\n"
    )
    result = _record("http://127.0.0.1:9", tmp_path, "--nodepools", str(tmp_path / "pools.yaml"))
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {tmp_path / 'pools.yaml'}: document 0")


# -- the pure half, table-driven -------------------------------------------------------------------


def _series(metric: str, labels: Mapping[str, str], *samples: tuple[float, float]) -> tuple[str, Series]:
    return metric, Series(dict(labels), tuple(samples))


def _grid(first: float, last: float, value: float) -> tuple[tuple[float, float], ...]:
    return tuple((T0 + t, value) for t in range(int(first), int(last) + 1, int(STEP)))


POD = {"namespace": "ns", "pod": "p", "uid": "u1"}
WINDOW = T1 - T0


def _rebuilt(*items: tuple[str, Series], **kwargs: Any) -> prom_series.Rebuilt:
    answers: dict[str, list[Series]] = {}
    for metric, s in items:
        answers.setdefault(metric, []).append(s)
    return prom_series.rebuild(answers, start=T0, end=T1, step=STEP, **kwargs)


@pytest.mark.parametrize(
    ("items", "want"),
    [
        # created before the window, there to its end: alive from the start
        ([_series("kube_pod_created", POD, *_grid(0, WINDOW, T0 - 3600))], {"created": T0, "deleted": None}),
        # created at 07:30:10 (its value), last seen at 07:40: gone at 07:41 (the next step)
        (
            [_series("kube_pod_created", POD, *_grid(660, 1200, T0 + 610))],
            {"created": T0 + 610, "deleted": T0 + 1260},
        ),
        # a deletion asked at 07:35:05 is the deletion, to the second
        (
            [
                _series("kube_pod_created", POD, *_grid(0, 1200, T0 - 60)),
                _series("kube_pod_deletion_timestamp", POD, (T1, T0 + 905)),
            ],
            {"deleted": T0 + 905},
        ),
        # scheduled at 07:21:30 (its value), Running from the 07:23 step, Succeeded from 07:40
        (
            [
                _series("kube_pod_created", POD, *_grid(60, 1500, T0 + 30)),
                _series("kube_pod_status_scheduled_time", POD, (T1, T0 + 90)),
                _series("kube_pod_status_phase", {**POD, "phase": "Running"}, *_grid(180, 1140, 1)),
                _series("kube_pod_status_phase", {**POD, "phase": "Succeeded"}, *_grid(1200, 1500, 1)),
                _series("kube_pod_info", {**POD, "node": "n1"}, (T1, 1)),
                _series("kube_pod_info", {**POD, "node": ""}, (T1, 1)),
            ],
            {"bound": T0 + 90, "running": T0 + 180, "finished": T0 + 1200, "node": "n1"},
        ),
        # another uid under the same name is another pod: its phases are not this one's
        (
            [
                _series("kube_pod_created", POD, *_grid(0, 600, T0 - 60)),
                _series("kube_pod_status_phase", {**POD, "uid": "u2", "phase": "Running"}, *_grid(0, 60, 1)),
            ],
            {"running": None},
        ),
    ],
)
def test_a_pods_life_from_its_series(items: list[tuple[str, Series]], want: dict[str, Any]) -> None:
    (pod,) = _rebuilt(*items).recording.pods
    assert {k: getattr(pod, k) for k in want} == want


def _owned(kind: str, name: str) -> tuple[str, Series]:
    labels = {**POD, "owner_kind": kind, "owner_name": name, "owner_is_controller": "true"}
    return _series("kube_pod_owner", labels, (T1, 1))


@pytest.mark.parametrize(
    ("items", "want"),
    [
        ([_owned("<none>", "<none>")], (model.BARE, "p", False)),
        (
            [
                _owned("ReplicaSet", "web-5d8f"),
                _series(
                    "kube_replicaset_owner",
                    {
                        "namespace": "ns",
                        "replicaset": "web-5d8f",
                        "owner_kind": "Deployment",
                        "owner_name": "web",
                    },
                    (T1, 1),
                ),
            ],
            (model.DEPLOYMENT, "web", False),
        ),
        # a ReplicaSet without its owner series: the Deployment named by its prefix, when there is one
        (
            [
                _owned("ReplicaSet", "web-5d8f"),
                _series(
                    "kube_deployment_spec_replicas",
                    {"namespace": "ns", "deployment": "web"},
                    *_grid(0, 60, 2),
                ),
            ],
            (model.DEPLOYMENT, "web", False),
        ),
        ([_owned("ReplicaSet", "web-5d8f")], ("ReplicaSet", "web-5d8f", False)),
        (
            [
                _owned("Job", "report-1"),
                _series(
                    "kube_job_owner",
                    {
                        "namespace": "ns",
                        "job_name": "report-1",
                        "owner_kind": "CronJob",
                        "owner_name": "report",
                    },
                    (T1, 1),
                ),
            ],
            (model.CRONJOB, "report", False),
        ),
        ([_owned("DaemonSet", "agent")], ("DaemonSet", "agent", True)),
    ],
)
def test_a_pods_top_owner(items: list[tuple[str, Series]], want: tuple[str, str, bool]) -> None:
    (pod,) = _rebuilt(_series("kube_pod_created", POD, *_grid(0, 60, T0)), *items).recording.pods
    assert (pod.owner.kind, pod.owner.name, pod.daemonset) == want


def test_a_pods_template_from_its_series() -> None:
    request = {**POD, "container": "app", "unit": "core"}
    rebuilt = _rebuilt(
        _series("kube_pod_created", POD, *_grid(0, 60, T0)),
        _series("kube_pod_container_resource_requests", {**request, "resource": "cpu"}, (T1, 0.25)),
        _series("kube_pod_container_resource_requests", {**request, "resource": "memory"}, (T1, 3 * 2**29)),
        _series("kube_pod_container_resource_requests", {**request, "resource": "nvidia_com_gpu"}, (T1, 1)),
        _series("kube_pod_container_info", {**POD, "container": "app", "image": "app:2"}, (T1, 1)),
        _series("kube_pod_container_info", {**POD, "container": "side", "image": "side:1"}, (T1, 1)),
        _series("kube_pod_labels", {**POD, "label_app": "web", "label_pod_template_hash": "5d8f"}, (T1, 1)),
        _series("kube_pod_annotations", {**POD, "annotation_karpenter_sh_do_not_disrupt": "true"}, (T1, 1)),
        _series(
            "kube_pod_tolerations",
            {**POD, "key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            (T1, 1),
        ),
        _series(
            "kube_pod_nodeselectors", {**POD, "nodeselector_karpenter_sh_capacity_type": "spot"}, (T1, 1)
        ),
    )
    (pod,) = rebuilt.recording.pods
    assert pod.template == {
        "metadata": {"labels": {"app": "web"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
        "spec": {
            "nodeSelector": {"karpenter.sh/capacity-type": "spot"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "app",
                    "image": "app:2",
                    "resources": {"requests": {"cpu": "250m", "memory": "1536Mi", "nvidia.com/gpu": "1"}},
                },
                {"name": "side", "image": "side:1"},
            ],
        },
    }


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("node_kubernetes_io_instance_type", "node.kubernetes.io/instance-type"),
        ("eks_amazonaws_com_capacity_type", "eks.amazonaws.com/capacityType"),
        ("karpenter_k8s_aws_instance_family", "karpenter.k8s.aws/instance-family"),
        ("app", "app"),
        ("app_kubernetes_io_name", "app_kubernetes_io_name"),  # not known: as kube-state-metrics wrote it
    ],
)
def test_label_names_back_to_keys(name: str, key: str) -> None:
    assert prom_labels.key(name) == key
    if "." in key:
        assert prom_labels.name_of(key) == name


@pytest.mark.parametrize(
    ("resource", "value", "want"),
    [
        ("cpu", 2.0, "2"),
        ("cpu", 0.1, "100m"),
        ("memory", 1e9, "1000000000"),
        ("ephemeral-storage", 2**31, "2Gi"),
    ],
)
def test_requests_as_kubernetes_writes_them(resource: str, value: float, want: str) -> None:
    assert prom_labels.quantity_of(resource, value) == want


def test_nodes_from_their_series() -> None:
    labels = {
        "label_node_kubernetes_io_instance_type": "m6i.large",
        "label_topology_kubernetes_io_zone": "us-east-1b",
        "label_karpenter_sh_capacity_type": "spot",
        "label_karpenter_sh_nodepool": "default",
    }
    rebuilt = _rebuilt(
        _series("kube_node_created", {"node": "a"}, *_grid(600, WINDOW, T0 + 575)),
        _series(
            "kube_node_status_condition",
            {"node": "a", "condition": "Ready", "status": "true"},
            *_grid(660, WINDOW, 1),
        ),
        _series("kube_node_labels", {"node": "a", **labels}, (T1, 1)),
        _series(
            "kube_node_spec_taint",
            {"node": "a", "key": "gpu", "value": "yes", "effect": "NoSchedule"},
            (T1, 1),
        ),
        _series(
            "kube_node_spec_taint",
            {"node": "a", "key": "karpenter.sh/unregistered", "effect": "NoExecute"},
            (T1, 1),
        ),
        _series("kube_node_created", {"node": "b"}, *_grid(0, 1200, T0 - 600)),
        _series("kube_node_deletion_timestamp", {"node": "b"}, (T1, T0 + 1190)),
        _series("kube_node_labels", {"node": "b", **labels}, (T1, 1)),
        _series("kube_node_created", {"node": "c"}, *_grid(0, 60, T0 - 600)),
    )
    a, b = rebuilt.recording.nodes[1], rebuilt.recording.nodes[0]
    assert (a.name, a.launched, a.registered, a.ready, a.deleted) == ("a", T0 + 575, T0 + 575, T0 + 660, None)
    assert (a.instance_type, a.zone, a.capacity_type, a.node_pool) == (
        "m6i.large",
        "us-east-1b",
        "spot",
        "default",
    )
    assert a.taints == ({"effect": "NoSchedule", "key": "gpu", "value": "yes"},)
    assert (b.name, b.launched, b.deleted) == ("b", T0, T0 + 1190)
    assert rebuilt.recording.node_claims == 2  # nodes of a NodePool: Karpenter ran
    assert any("1 nodes without node.kubernetes.io/instance-type" in w for w in rebuilt.warnings)  # c
    assert any("give --nodepools FILE" in w for w in rebuilt.warnings)


def test_replicas_rollouts_and_jobs_from_their_series() -> None:
    deployment = {"namespace": "ns", "deployment": "web"}
    rs = {"namespace": "ns", "owner_kind": "Deployment", "owner_name": "web"}
    job = {"namespace": "ns", "job_name": "report-1"}
    replicas = (*_grid(600, 1140, 2), *_grid(1200, 2400, 3))  # created at 07:30, deleted at 08:01
    rebuilt = _rebuilt(
        _series("kube_pod_created", POD, *_grid(600, 1200, T0 + 600)),
        _owned("ReplicaSet", "web-a"),
        _series("kube_deployment_spec_replicas", deployment, *replicas),
        _series("kube_replicaset_owner", {**rs, "replicaset": "web-a"}, (T1, 1)),
        _series("kube_replicaset_created", {"namespace": "ns", "replicaset": "web-a"}, (T1, T0 + 600)),
        _series("kube_replicaset_owner", {**rs, "replicaset": "web-b"}, (T1, 1)),
        _series("kube_replicaset_created", {"namespace": "ns", "replicaset": "web-b"}, (T1, T0 + 1500)),
        _series("kube_pod_created", {**POD, "pod": "q", "uid": "u3"}, *_grid(60, 120, T0 + 60)),
        _series(
            "kube_pod_owner",
            {**POD, "pod": "q", "uid": "u3", "owner_kind": "Job", "owner_name": "report-1"},
            (T1, 1),
        ),
        _series("kube_job_created", job, (T1, T0 + 55)),
        _series("kube_job_spec_completions", job, (T1, 4)),
    )
    (owner,) = [o for o in rebuilt.recording.owners if o.key.kind == model.DEPLOYMENT]
    assert owner.replicas == ((T0 + 600, 2), (T0 + 1200, 3), (T0 + 2460, 0))
    assert (owner.created, owner.deleted, owner.rollouts) == (T0 + 600, T0 + 2460, (T0 + 1500,))
    (job_life,) = rebuilt.recording.jobs
    assert (job_life.name, job_life.created, job_life.completions, job_life.parallelism) == (
        "report-1",
        T0 + 55,
        4,
        None,
    )


def test_promql_of_the_queries() -> None:
    by_metric = {q.metric: q for q in prom_series.QUERIES}
    assert prom_series.promql(by_metric["kube_pod_created"], window=6060) == "kube_pod_created"
    assert (
        prom_series.promql(by_metric["kube_pod_owner"], window=6060.5)
        == "last_over_time(kube_pod_owner[6061s])"
    )
    ready = prom_series.promql(by_metric["kube_node_status_condition"], window=60)
    assert ready == 'kube_node_status_condition{condition="Ready",status="true"} == 1'
