"""The daemon's wire: framing with descriptors, the socket's place, the fingerprint."""

from __future__ import annotations

import os
import socket
import struct
import threading
from pathlib import Path

import pytest

from karpy.daemon import wire


def _pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_a_message_and_its_descriptors_arrive_together(tmp_path: Path) -> None:
    a, b = _pair()
    target = tmp_path / "out.txt"
    with a, b, open(target, "w") as out:
        wire.send(a, {"op": "run", "argv": ["karpy", "plan", "é"]}, [out.fileno()])
        message, fds = wire.recv(b, max_fds=wire.MAX_FDS)
        assert message == {"op": "run", "argv": ["karpy", "plan", "é"]}
        assert len(fds) == 1 and fds[0] != out.fileno()
        os.write(fds[0], b"through the passed descriptor\n")  # the same open file
        os.close(fds[0])
    assert target.read_text() == "through the passed descriptor\n"


def test_a_large_message_is_read_whole() -> None:
    a, b = _pair()
    env = {f"VAR{i}": "x" * 100 for i in range(5000)}  # about 600 kB: many reads
    with a, b:
        a.setblocking(True)
        sender = threading.Thread(target=wire.send, args=(a, {"env": env}))
        sender.start()
        message, fds = wire.recv(b)
        sender.join()
    assert message == {"env": env} and fds == []


def test_a_peer_that_closed_first_gives_none() -> None:
    a, b = _pair()
    a.close()
    with b:
        assert wire.recv(b, max_fds=3) == (None, [])


def test_a_cut_message_is_an_error() -> None:
    a, b = _pair()
    with b:
        a.sendall(struct.pack(">I", 100) + b'{"op": ')
        a.close()
        with pytest.raises(wire.WireError, match="closed in the middle"):
            wire.recv(b)


def test_an_oversized_or_non_object_message_is_refused() -> None:
    a, b = _pair()
    with a, b:
        a.sendall(struct.pack(">I", wire.MAX_MESSAGE + 1))
        with pytest.raises(wire.WireError, match="at most"):
            wire.recv(b)
    a, b = _pair()
    with a, b:
        data = b"[1, 2]"
        a.sendall(struct.pack(">I", len(data)) + data)
        with pytest.raises(wire.WireError, match="not a JSON object"):
            wire.recv(b)


def test_too_many_descriptors_are_closed_and_refused(tmp_path: Path) -> None:
    a, b = _pair()
    files = [open(tmp_path / f"f{i}", "w") for i in range(4)]  # noqa: SIM115
    try:
        with a, b:
            wire.send(a, {"op": "run"}, [f.fileno() for f in files])
            with pytest.raises(wire.WireError, match="more than 3"):
                wire.recv(b, max_fds=3)
    finally:
        for f in files:
            f.close()


def test_the_socket_is_per_user_and_per_installation() -> None:
    path = wire.socket_path({"XDG_RUNTIME_DIR": "/run/user/1000"})
    folder, name = os.path.split(path)
    assert folder == f"/run/user/1000/karpy-{os.getuid()}"
    assert name.startswith("daemon-") and name.endswith(".sock")
    assert wire.socket_path({}) == os.path.join(f"/tmp/karpy-{os.getuid()}", name)  # same installation
    assert wire.socket_path({"KARPY_DAEMON_SOCKET": "rel/d.sock"}) == os.path.abspath("rel/d.sock")
    with pytest.raises(wire.WireError, match="longer than 107 bytes"):
        wire.socket_path({"KARPY_DAEMON_SOCKET": "/tmp/" + "x" * 120})


def test_the_socket_folder_must_be_private(tmp_path: Path) -> None:
    wire.private_folder(str(tmp_path / "new" / "d.sock"))
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(wire.WireError, match="can be written by others"):
        wire.private_folder(str(shared / "d.sock"))


def test_the_fingerprint_follows_the_code_and_the_options(tmp_path: Path) -> None:
    package = tmp_path / "karpy"
    (package / "core").mkdir(parents=True)
    module = package / "core" / "m.py"
    module.write_text("x = 1\n")
    (package / "__pycache__").mkdir()
    first = wire.fingerprint({}, package=str(package))
    assert wire.mismatch(first, wire.fingerprint({}, package=str(package))) is None
    (package / "__pycache__" / "m.pyc").write_bytes(b"cache")  # bytecode is not code
    assert wire.fingerprint({}, package=str(package)) == first
    os.utime(module, ns=(1, 1))  # edited
    edited = wire.fingerprint({}, package=str(package))
    why, stale = wire.mismatch(first, edited) or ("", False)
    assert stale and "older or other code" in why
    pure = wire.fingerprint({"KARPY_PURE": "1"}, package=str(package))
    assert pure["code"] == edited["code"]
    why, stale = wire.mismatch(edited, pure) or ("", True)
    assert not stale and "KARPY_PURE=0" in why
    assert wire.fingerprint({"KARPY_PURE": "0"}, package=str(package)) == edited
    assert wire.mismatch(first, None) == (wire.mismatch(first, {})) and wire.mismatch(first, None) is not None
