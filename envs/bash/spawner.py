"""A per-sandbox helper process that starts the sandbox's commands from inside its cgroup.

Moving a process into a cgroup v1 hierarchy waits for an RCU grace period (the kernel's
threadgroup lock), which cost ~10 ms per command here. The spawner joins the sandbox's cgroup and
enters the keeper's mount namespace *once*; every command it forks inherits both for free. It
is a tiny stdlib-only Python loop (single-threaded, so ``preexec_fn`` is safe there) talking to
us over a ``SOCK_SEQPACKET`` socket: we send the write end of the output pipe and a memfd
holding ``{argv, env, rlimits, ids}`` as JSON (SCM_RIGHTS; a memfd, not the datagram itself, because
one datagram is capped by the socket buffer, ~208 KiB, and argv may be larger), it answers
``{"pid": N}`` and later ``{"code": C}``. The rlimits (and, when ``ids`` is given, the switch
to that unprivileged uid/gid with no supplementary groups, after the rlimits so that the hard
limits are set while still privileged) apply to the command's process only, never to the
spawner. When our end of the socket closes, the spawner exits.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence

from stateflow.envs.base import EnvironmentError_

__all__ = ["Spawner"]

_SCRIPT = r"""
import ctypes, json, os, resource, socket, subprocess, sys
sock = socket.socket(fileno=int(sys.argv[1]))
try:  # the cgroup's OOM killer should pick a sandbox process, never the spawner (root only)
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")
except OSError:
    pass
libc = ctypes.CDLL(None, use_errno=True)
def remount(steps):
    for step in steps:
        if step[0] == "mkdir":
            os.mkdir(step[1])
            continue
        if step[0] == "chown":
            os.chown(step[1], step[2], step[3])
            continue
        if step[0] == "utime":
            os.utime(step[1], ns=(step[2], step[2]))
            continue
        if step[0] == "umount":
            what, rc = step[1], libc.umount2(step[1].encode(), 0)
        else:
            _, source, target, fstype, flags, data = step
            what, rc = target, libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode())
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{step[0]} {what}: {os.strerror(err)}")
while True:
    try:
        msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 2)
    except OSError:
        break
    if not msg:
        break
    if len(fds) == 2:  # a command: the request itself is in the memfd
        with os.fdopen(fds.pop(), "rb") as body:
            req = json.loads(body.read())
    else:
        req = json.loads(msg)
    if req.get("op") == "remount":
        try:
            remount(req["steps"])
            sock.send(b'{"ok": true}')
        except OSError as err:
            sock.send(json.dumps({"error": str(err)}).encode())
        continue
    limits = [(getattr(resource, name), value) for name, value in req["rlimits"]]
    ids = req.get("ids")
    def apply_limits():
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("0")  # not inherited from the spawner: sandbox processes stay killable
        for res, value in limits:
            resource.setrlimit(res, (value, value))
        if ids is not None:  # the unprivileged host ids sandbox root maps to (root runs)
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
    try:
        child = subprocess.Popen(req["argv"], stdin=subprocess.DEVNULL, stdout=fds[0], stderr=fds[0],
                                 env=req["env"], preexec_fn=apply_limits, start_new_session=True)
    except Exception as err:
        os.close(fds[0])
        sock.send(json.dumps({"error": repr(err)}).encode())
        continue
    os.close(fds[0])
    sock.send(json.dumps({"pid": child.pid}).encode())
    sock.send(json.dumps({"code": child.wait()}).encode())
"""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Spawner:
    """Client side of the spawner (see module docstring). One command at a time.

    Args:
        prefix: argv that places the spawner (e.g. ``dash -c 'join cgroup' nsenter --mount=...``);
            the Python interpreter and the script are appended.
        env: environment of the spawner process itself.
        tag: an identifying word put on the spawner's command line.
    """

    def __init__(self, prefix: Sequence[str], *, env: dict[str, str], tag: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        try:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-I", "-S", "-c", _SCRIPT, str(theirs.fileno()), tag],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        finally:
            theirs.close()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        rlimits: dict[str, int],
        output_fd: int,
        ids: tuple[int, int] | None = None,
    ) -> int:
        """Start ``argv`` writing stdout+stderr to ``output_fd``; return its pid (a process group leader).

        ``ids``: ``(uid, gid)`` the command runs as (set after its rlimits); None keeps the spawner's.
        """
        request = {"argv": list(argv), "env": env, "rlimits": sorted(rlimits.items()), "ids": ids}
        request = json.dumps(request).encode()
        body = os.memfd_create("sf-bash-request", os.MFD_CLOEXEC)
        try:
            _write_all(body, request)
            os.lseek(body, 0, os.SEEK_SET)
            socket.send_fds(self._sock, [b"run"], [output_fd, body])
        except OSError as err:
            raise EnvironmentError_(f"the sandbox spawner is gone: {err}") from err
        finally:
            os.close(body)
        reply = self._receive(None)
        if reply is None or "pid" not in reply:
            raise EnvironmentError_(f"the sandbox spawner could not start the command: {reply}")
        return int(reply["pid"])

    def remount(self, steps: list[list]) -> None:
        """Run mount steps in the spawner's mount namespace, without starting any process.

        Steps: ``["umount", target]``, ``["mount", source, target, fstype, flags, data]``,
        ``["mkdir", path]``, ``["chown", path, uid, gid]``, ``["utime", path, mtime_ns]``.

        Raises:
            EnvironmentError_: a step failed (the message names it and the errno text).
        """
        try:
            self._sock.send(json.dumps({"op": "remount", "steps": steps}).encode())
        except OSError as err:
            raise EnvironmentError_(f"the sandbox spawner is gone: {err}") from err
        reply = self._receive(None)
        if reply is None or "error" in reply:
            raise EnvironmentError_(f"sandbox reset failed: {reply and reply['error']}")

    def wait_exit(self, timeout: float | None) -> int | None:
        """Exit status of the last command (negative = signal), or None if ``timeout`` passed first."""
        reply = self._receive(timeout)
        if reply is None:
            return None
        return int(reply["code"])

    def _receive(self, timeout: float | None) -> dict | None:
        self._sock.settimeout(timeout)
        try:
            data = self._sock.recv(1 << 16)
        except TimeoutError:
            return None
        except OSError as err:
            raise EnvironmentError_(f"the sandbox spawner is gone: {err}") from err
        finally:
            self._sock.settimeout(None)
        if not data:
            raise EnvironmentError_("the sandbox spawner exited unexpectedly")
        return json.loads(data)

    def close(self) -> None:
        """Close our end: the spawner sees EOF and exits. Idempotent."""
        self._sock.close()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
