"""A real daemon (``karpy daemon start --foreground`` in a subprocess) and real ``karpy`` clients.

Each check compares a command run through the daemon with the same command run alone
(``KARPY_NO_DAEMON=1``) and reads the daemon's own count of commands, so a client that quietly
ran the command itself would fail it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from karpy.daemon import client, wire
from processes import children

ROOT = Path(__file__).resolve().parents[3]
PLAN = ROOT / "examples" / "plan"


def _karpy() -> list[str]:
    script = Path(sys.executable).with_name("karpy")
    return [str(script)] if script.exists() else [sys.executable, "-m", "karpy"]


@dataclass
class Daemon:
    socket: str
    process: subprocess.Popen[bytes]
    log: Path  # its stderr

    def env(self, **extra: str) -> dict[str, str]:
        return _served_by(self.socket, **extra)

    def status(self) -> dict[str, object] | None:
        return client.ask(self.socket, {"op": "status"})

    def commands(self) -> int:
        found = self.status()
        assert found is not None, f"the daemon does not answer: {self.log.read_text()}"
        return int(found["commands"])  # type: ignore[call-overload]


def _served_by(socket_path: str | Path, **extra: str) -> dict[str, str]:
    """This environment, handing commands to the daemon on ``socket_path`` (not KARPY_NO_DAEMON)."""
    env = {k: v for k, v in os.environ.items() if k != client.NO_DAEMON}
    return {**env, "KARPY_DAEMON_SOCKET": str(socket_path), **extra}


def _start(folder: Path) -> Daemon:
    path = str(folder / "d.sock")
    log = folder / "stderr.log"
    with open(log, "wb") as err:
        process = subprocess.Popen(
            [*_karpy(), "daemon", "start", "--foreground"],
            env=_served_by(path),
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    daemon = Daemon(path, process, log)
    deadline = time.monotonic() + 120
    while daemon.status() is None:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the daemon did not start: {log.read_text()}")
        time.sleep(0.05)
    return daemon


def _stop(daemon: Daemon) -> None:
    if daemon.process.poll() is None:
        daemon.process.terminate()
        daemon.process.wait(timeout=30)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    found = _start(tmp_path_factory.mktemp("kd"))
    yield found
    _stop(found)


@pytest.fixture
def own_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    found = _start(tmp_path_factory.mktemp("kd"))
    yield found
    _stop(found)


def _run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_karpy(), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def _alone(**extra: str) -> dict[str, str]:
    return {**os.environ, client.NO_DAEMON: "1", **extra}


def _wait_for(check: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {check}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "-f", str(PLAN), "-o", "json"],
        ["plan", "-f", str(PLAN), "-o", "wide"],
        ["plan", "-f", "missing.yaml"],
        ["plan", "--bogus"],
        ["version"],
        ["--help"],
        ["catalog", "list", "--filter", "karpenter.k8s.aws/instance-family=m5", "-o", "yaml"],
    ],
    ids=["plan-json", "plan-wide", "missing-file", "usage-error", "version", "help", "catalog-list"],
)
def test_a_command_prints_and_exits_as_it_does_alone(daemon: Daemon, args: list[str]) -> None:
    before = daemon.commands()
    served = _run(args, daemon.env())
    assert daemon.commands() == before + 1  # the daemon ran it
    alone = _run(args, _alone())
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)


def test_python_dash_m_karpy_keeps_its_program_name(daemon: Daemon) -> None:
    command = [sys.executable, "-m", "karpy", "plan", "--help"]
    before = daemon.commands()
    served = subprocess.run(command, env=daemon.env(), cwd=ROOT, capture_output=True, text=True, check=False)
    assert daemon.commands() == before + 1
    alone = subprocess.run(command, env=_alone(), cwd=ROOT, capture_output=True, text=True, check=False)
    assert served.stdout == alone.stdout and "Usage: python -m karpy plan" in served.stdout


def test_the_worker_has_the_clients_folder_and_environment(daemon: Daemon) -> None:
    for columns in ("60", "200"):  # rich reads COLUMNS: the help is laid out for each width
        served = _run(["plan", "--help"], daemon.env(COLUMNS=columns))
        alone = _run(["plan", "--help"], _alone(COLUMNS=columns))
        assert served.stdout == alone.stdout
        assert max(len(line) for line in served.stdout.splitlines()) <= int(columns)
    before = daemon.commands()
    relative = _run(["plan", "-f", "plan", "-o", "json"], daemon.env(), cwd=PLAN.parent)
    assert daemon.commands() == before + 1
    assert relative.returncode == 0
    assert relative.stdout == _run(["plan", "-f", str(PLAN), "-o", "json"], _alone()).stdout


def test_other_interpreter_options_run_in_the_client(daemon: Daemon) -> None:
    before = daemon.commands()
    pure = _run(["version", "-o", "json"], daemon.env(KARPY_PURE="1"))
    assert daemon.commands() == before  # refused: KARPY_PURE is decided at import
    assert pure.returncode == 0
    assert "not run by the daemon" in pure.stderr and "KARPY_PURE" in pure.stderr
    assert json.loads(pure.stdout)["core"]["build"] == "pure"
    assert daemon.status() is not None  # it goes on serving clients like itself


def test_a_daemon_with_other_code_refuses_and_stops(own_daemon: Daemon) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock, open(os.devnull, "w") as null:
        sock.connect(own_daemon.socket)
        request = client.request(["karpy", "version"], own_daemon.env())
        request["fingerprint"] = {**request["fingerprint"], "code": "0" * 64}  # as after an upgrade
        wire.send(sock, request, [null.fileno()] * 3)
        reply, _ = wire.recv(sock)
    assert reply is not None and reply["stopping"] is True and "older or other code" in reply["refused"]
    assert own_daemon.process.wait(timeout=30) == 0
    assert not os.path.exists(own_daemon.socket)
    assert "stopping: the daemon runs older or other code" in own_daemon.log.read_text()


_OPEN_CALLS = {"x86_64": {"2", "257"}, "aarch64": {"56"}}.get(os.uname().machine, set())


def _in_open(pid: int) -> bool:
    """Whether ``pid`` waits in open(2) (``/proc/PID/syscall``: the number of the call it is in)."""
    try:
        call = Path("/proc", str(pid), "syscall").read_text().split()[0]
    except (OSError, IndexError):
        return False
    return call in _OPEN_CALLS


_CLIENTS: list[subprocess.Popen[str]] = []  # blocked commands, killed after each test


@pytest.fixture(autouse=True)
def _no_client_left() -> Iterator[None]:
    """A test that fails leaves no blocked client (nor, through it, its worker) behind."""
    yield
    while _CLIENTS:
        proc = _CLIENTS.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def _blocked(args: list[str], env: dict[str, str], fifo: Path) -> subprocess.Popen[str]:
    """``karpy plan -f FIFO``: it waits for a writer until stopped."""
    if not fifo.exists():
        os.mkfifo(fifo)
    proc = subprocess.Popen(
        [*_karpy(), "plan", "-f", str(fifo), *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _CLIENTS.append(proc)
    return proc


def _blocked_worker(daemon: Daemon, fifo: Path) -> tuple[subprocess.Popen[str], int]:
    """A command blocked in its worker, and the worker's pid."""
    workers = set(children(daemon.process.pid))
    run = _blocked([], daemon.env(), fifo)
    new: list[int] = []

    def started() -> bool:
        new[:] = [p for p in children(daemon.process.pid) if p not in workers]
        return bool(new) and _in_open(new[0])

    _wait_for(started)
    return run, new[0]


def test_ctrl_c_reaches_the_worker(own_daemon: Daemon, tmp_path: Path) -> None:
    run, worker = _blocked_worker(own_daemon, tmp_path / "fifo")
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    _wait_for(lambda: worker not in children(own_daemon.process.pid))
    alone = _blocked([], _alone(), tmp_path / "fifo")
    _wait_for(lambda: _in_open(alone.pid))
    alone.send_signal(signal.SIGINT)
    alone_out, alone_err = alone.communicate(timeout=60)
    assert (run.returncode, out, err) == (alone.returncode, alone_out, alone_err)
    assert run.returncode == 130  # as a command stopped by Ctrl-C (128 + SIGINT)
    assert own_daemon.status() is not None


def test_a_killed_client_stops_its_worker(own_daemon: Daemon, tmp_path: Path) -> None:
    run, worker = _blocked_worker(own_daemon, tmp_path / "fifo")
    run.kill()
    run.communicate(timeout=60)
    _wait_for(lambda: worker not in children(own_daemon.process.pid))
    assert own_daemon.status() is not None


def test_a_client_that_sends_nothing_holds_the_daemon_only_until_the_request_timeout(
    own_daemon: Daemon,
) -> None:
    from karpy.daemon import server

    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with silent:
        silent.connect(own_daemon.socket)
        began = time.monotonic()
        assert own_daemon.status() is not None  # answered once the silent one timed out
        waited = time.monotonic() - began
    assert server.REQUEST_SECONDS - 1 <= waited < server.REQUEST_SECONDS + 30
    assert "connection lost: timed out" in own_daemon.log.read_text()


def test_start_status_and_stop_in_the_background(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("kd")
    env = _served_by(folder / "d.sock")
    assert _run(["daemon", "status"], env).returncode == 3
    started = _run(["daemon", "start"], env)
    try:
        assert started.returncode == 0, started.stderr
        assert "karpy daemon started: pid" in started.stdout
        status = _run(["daemon", "status", "-o", "json"], env)
        doc = json.loads(status.stdout)
        assert doc["current"] is True and doc["socket"] == env["KARPY_DAEMON_SOCKET"]
        assert doc["log"] == str(folder / "d.log") and "ready" in (folder / "d.log").read_text()
        again = _run(["daemon", "start"], env)
        assert again.returncode == 0 and f"already runs: pid {doc['pid']}" in again.stdout
    finally:
        stopped = _run(["daemon", "stop"], env)
    assert stopped.returncode == 0 and "karpy daemon stopped" in stopped.stdout
    assert not (folder / "d.sock").exists()
    assert _run(["daemon", "status"], env).returncode == 3
    assert "no karpy daemon runs" in _run(["daemon", "stop"], env).stdout


def test_start_replaces_a_daemon_that_runs_other_code(tmp_path: Path) -> None:
    path = tmp_path / "d.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    asked: list[str] = []

    def old_daemon() -> None:  # answers as a daemon started before an upgrade
        while True:
            conn, _ = listener.accept()
            with conn:
                message, _ = wire.recv(conn)
                assert message is not None
                asked.append(message["op"])
                if message["op"] == "status":
                    stale = {"code": "0" * 64, "options": wire.fingerprint()["options"]}
                    wire.send(conn, {"pid": 1, "started": 0, "commands": 0, "fingerprint": stale})
                else:
                    wire.send(conn, {"stopping": 1})
                    listener.close()
                    path.unlink()
                    return

    thread = threading.Thread(target=old_daemon, daemon=True)
    thread.start()
    env = _served_by(path)
    started = _run(["daemon", "start"], env)
    try:
        thread.join(timeout=30)
        assert asked == ["status", "stop"]
        assert started.returncode == 0, started.stderr
        assert "stopped an out-of-date karpy daemon (pid 1)" in started.stdout
        assert "karpy daemon started" in started.stdout
        assert json.loads(_run(["daemon", "status", "-o", "json"], env).stdout)["current"] is True
    finally:
        _run(["daemon", "stop"], env)


def test_an_unknown_catalog_is_bad_input_in_both_modes(tmp_path: Path) -> None:
    env = _served_by(tmp_path / "d.sock")
    for mode in (["--foreground"], []):
        done = _run(["daemon", "start", *mode, "--catalog", "aws:nowhere-1"], env)
        assert done.returncode == 2, done.stderr
        assert "error: --catalog: unknown AWS region 'nowhere-1'" in done.stderr
    assert not (tmp_path / "d.sock").exists()


def test_a_stale_socket_is_ignored_by_clients_and_replaced_by_a_new_daemon(tmp_path: Path) -> None:
    path = tmp_path / "d.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # a socket file nobody listens on: a daemon that was killed
    env = _served_by(path)
    done = _run(["version"], env)
    assert done.returncode == 0 and done.stderr == ""  # ran in the client, quietly
    daemon = _start(tmp_path)
    try:
        assert daemon.commands() == 0
    finally:
        _stop(daemon)


def test_the_client_loads_nothing_heavy() -> None:
    probe = (
        "import sys, karpy.launch, karpy.daemon.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('typer', 'click', 'rich', 'pydantic', 'numpy', 'yaml') or m.startswith('karpy.cli')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
