"""Process 1 of a bash task container: runs the host's commands and reaps orphans.

Started as the container's command; standard library only (it runs on the image's python3).
It listens on a Unix socket in a directory the host bind-mounts (the container has no network),
so a command costs a fork here instead of a ``docker exec`` (which starts a runc process on the
host: ~50-150 ms). One connection per command:

* request: one JSON line ``{"argv": [...], "cwd": "/", "timeout": 10.0, "relay": "..."}``;
* reply: frames ``b"o" + length + bytes`` of merged output, then ``b"x" + length + exit status``
  (``"timeout"`` when the deadline passed).

The command runs as ``/bin/sh -c RELAY sf-run ARGV...`` in its own session. When its output
closes, or at the deadline, every process but this one is killed (``kill(-1)`` from process 1
spares only itself) and collected, so nothing outlives a step and no zombie is left. Being
process 1, it is immune to the agent's ``kill -9 -1``.
"""

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time


def reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def kill_all_and_reap() -> None:
    """Kill every process but this one, then collect them all (nothing outlives a step)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    try:
        while True:
            os.waitpid(-1, 0)
    except ChildProcessError:
        pass


def frame(conn: socket.socket, kind: bytes, payload: bytes) -> None:
    conn.sendall(kind + struct.pack("!I", len(payload)) + payload)


def serve(conn: socket.socket) -> None:
    conn.settimeout(5)  # a client that never sends its request must not block the host's commands
    request = b""
    while not request.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return
        request += chunk
    job = json.loads(request)
    conn.settimeout(None)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.dup2(write_fd, 1)
            os.dup2(write_fd, 2)
            os.closerange(3, 1 << 16)
            # Python ignores SIGPIPE and SIGXFSZ; the command must see the defaults (`yes | head`
            # ends by SIGPIPE, a write past RLIMIT_FSIZE by SIGXFSZ)
            for number in (signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(number, signal.SIG_DFL)
            os.chdir(job["cwd"])
            os.execv("/bin/sh", ["/bin/sh", "-c", job["relay"], "sf-run", *job["argv"]])
        except OSError as err:
            os.write(2, f"sf-run: cannot start /bin/sh in {job['cwd']}: {err.strerror}\n".encode())
            os._exit(127 if isinstance(err, FileNotFoundError) else 126)
    os.close(write_fd)
    deadline = time.monotonic() + float(job["timeout"])
    status = "timeout"
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break  # the finally clause kills everything
            ready, _, _ = select.select([read_fd], [], [], left)
            if not ready:
                continue
            data = os.read(read_fd, 65536)
            if not data:
                _, code = os.waitpid(pid, 0)
                status = str(os.waitstatus_to_exitcode(code) if code & 0x7F == 0 else 128 + (code & 0x7F))
                break
            frame(conn, b"o", data)
    except OSError:  # the host went away: stop the command like a timeout
        pass
    finally:
        os.close(read_fd)
        kill_all_and_reap()
    with contextlib.suppress(OSError):  # the host went away
        frame(conn, b"x", status.encode())


def date_root_as_built() -> None:
    """Give / the time the image last changed it (its git step: /.git's time), not the container's.

    Docker's writable layer dates / when the container is created, so the agent's container and
    the gold's, started minutes apart, would list / differently (``ls -ld /``).
    """
    with contextlib.suppress(OSError):  # not owner of /: leave it (the listing then differs)
        built = os.stat("/.git").st_mtime_ns
        os.utime("/", ns=(built, built))


def main() -> None:
    path = sys.argv[1]
    date_root_as_built()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wake select() so orphans are reaped promptly
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        if os.path.exists(path):
            os.unlink(path)
        server.bind(path)
        os.chmod(path, 0o600)
        server.listen(8)
        while True:
            reap()
            try:
                ready, _, _ = select.select([server], [], [], 5)
            except InterruptedError:
                continue
            if not ready:
                continue
            conn, _ = server.accept()
            with conn, contextlib.suppress(OSError, ValueError, KeyError):  # a broken request: drop it
                serve(conn)
            reap()


if __name__ == "__main__":
    main()
