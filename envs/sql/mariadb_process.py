"""A private MariaDB server as a child process, and the cached, pre-loaded data templates.

Lifecycle guarantees (the server must never outlive its owner):

* the child is started from a dedicated thread through ``setpriv --pdeathsig KILL``: Linux
  delivers the parent-death signal when the *thread* that forked the child exits, so a worker
  thread must not be the parent; the owner thread lives exactly as long as the server;
* the child runs in its own session (``setsid``), so terminal signals aimed at the owner's
  process group do not reach it and it is only stopped by its owner;
* each instance directory holds ``owner.lock``, ``flock``-ed by the owning process for the
  server's lifetime; :func:`sweep_stale_instances` kills servers whose lock is free (their
  owner died) and removes their directories.

Start-up speed comes from templates: a data directory initialised once with
``mariadb-install-db`` and loaded with the dataset's dumps, keyed by server version and dump
hashes, then copied (~40 MB) for every new server.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import mysql.connector
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.sql.dump import load_dump, read_dump
from stateflow.envs.sql.server import Endpoint, open_connection

from stateflow.paths import cache_dir

__all__ = [
    "MariadbBinaries",
    "MariadbProcess",
    "TemplateCache",
    "default_cache_root",
    "default_run_root",
    "find_binaries",
    "sweep_stale_instances",
]

TEMPLATE_FORMAT = 1  # bump when the template layout or server options change
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; keep a margin
_INNODB_OPTIONS = (
    # small log and increments keep the template (and every copy of it) ~40 MB instead of ~120 MB
    "--innodb-log-file-size=4M",
    "--innodb-autoextend-increment=1",
    "--innodb-buffer-pool-size=32M",
    "--innodb-flush-log-at-trx-commit=2",
    "--innodb-doublewrite=0",
)
_SETUP_HINT = (
    "install MariaDB with `bash scripts/setup_sql.sh` (apt-get install mariadb-server), "
    "or use backend='docker' (a Docker engine) or backend='dsn' with dsn='mysql://user:pass@host:port'"
)


class MariadbBinaries:
    """Paths of ``mariadbd`` and ``mariadb-install-db`` and the server's version string."""

    def __init__(self, server: Path, install_db: Path) -> None:
        self.server = server
        self.install_db = install_db
        out = subprocess.run([str(server), "--version"], capture_output=True, text=True, check=False)
        self.version = out.stdout.strip() or out.stderr.strip()


def find_binaries() -> MariadbBinaries:
    """Locate the server binaries (PATH, then /usr/sbin and /usr/bin).

    Raises:
        EnvironmentError_: MariaDB is not installed; the message names the set-up script and
            the Docker and DSN alternatives.
    """
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/usr/local/bin"])
    server = shutil.which("mariadbd", path=search) or shutil.which("mysqld", path=search)
    install = shutil.which("mariadb-install-db", path=search) or shutil.which("mysql_install_db", path=search)
    if not server or not install:
        raise EnvironmentError_(f"MariaDB server binaries (mariadbd, mariadb-install-db) not found: {_SETUP_HINT}")
    return MariadbBinaries(Path(server), Path(install))


def default_cache_root() -> Path:
    """Where templates are cached: ``mariadb-templates`` in :func:`stateflow.paths.cache_dir`."""
    return cache_dir() / "mariadb-templates"


def default_run_root() -> Path:
    """Where running instances live: ``/dev/shm`` when writable (the data copy and temporary
    tables then live in RAM: start 0.37 s instead of 0.67 s), else the temp dir; the path is
    kept short because a Unix socket path must fit in 107 bytes."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        base = shm
    else:
        base = Path(tempfile.gettempdir())
        if len(str(base)) > 40:
            base = Path("/tmp")
    return base / f"stateflow-mariadb-{os.getuid()}"


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _pid_is_server_of(pid: int, directory: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(directory).encode() in cmdline


def sweep_stale_instances(run_root: Path | None = None, *, min_age: float = 60.0) -> list[Path]:
    """Kill and remove instances whose owner process is gone; returns the removed directories.

    An instance is stale when nobody holds its ``owner.lock``. Directories without a lock file
    younger than ``min_age`` seconds are being created right now and are left alone.
    """
    root = run_root or default_run_root()
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for directory in root.iterdir():
        if not directory.is_dir():
            continue
        lock_path = directory / "owner.lock"
        try:
            if not lock_path.exists():
                if time.time() - directory.stat().st_mtime < min_age:
                    continue
                shutil.rmtree(directory, ignore_errors=True)
                removed.append(directory)
                continue
            with open(lock_path, "a+") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its owner is alive
                pid_file = directory / "mysqld.pid"
                if pid_file.exists():
                    with contextlib.suppress(ValueError, OSError):
                        pid = int(pid_file.read_text().strip())
                        if _pid_is_server_of(pid, directory):
                            os.kill(pid, signal.SIGKILL)
                shutil.rmtree(directory, ignore_errors=True)
                removed.append(directory)
        except OSError:
            continue
    return removed


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MariadbProcess:
    """One ``mariadbd`` child on a data directory inside a private instance directory.

    Args:
        binaries: the server binaries.
        datadir: an initialised data directory (owned by this instance from now on).
        instance_dir: private directory for socket, pid file, logs and temp files; must hold
            ``owner.lock`` already locked by ``lock_handle``.
        lock_handle: the open, ``flock``-ed ``owner.lock``; closed when the server stops.
        tcp: also listen on a free loopback port (for DSN-style access).
    """

    def __init__(
        self,
        binaries: MariadbBinaries,
        datadir: Path,
        instance_dir: Path,
        lock_handle: object,
        *,
        tcp: bool = False,
    ) -> None:
        self.binaries = binaries
        self.datadir = datadir
        self.instance_dir = instance_dir
        self.socket_path = instance_dir / "mysqld.sock"
        if len(str(self.socket_path)) > _SOCKET_PATH_MAX:
            raise EnvironmentError_(f"socket path too long for a Unix socket: {self.socket_path}")
        self.port = _free_port() if tcp else None
        self._lock_handle = lock_handle
        self._proc: subprocess.Popen[bytes] | None = None
        self._spawn_error: BaseException | None = None
        self._spawned = threading.Event()
        self._release = threading.Event()
        self._owner: threading.Thread | None = None

    @classmethod
    def create_instance_dir(cls, run_root: Path | None = None) -> tuple[Path, object]:
        """A fresh private instance directory and its held ``owner.lock`` handle."""
        root = _private_dir(run_root or default_run_root())
        directory = Path(tempfile.mkdtemp(prefix="i-", dir=root))
        handle = open(directory / "owner.lock", "w")  # noqa: SIM115 - held for the server's life
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return directory, handle

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(unix_socket=str(self.socket_path))

    @property
    def tcp_endpoint(self) -> Endpoint | None:
        return Endpoint(host="127.0.0.1", port=self.port) if self.port else None

    def command(self) -> list[str]:
        d = self.instance_dir
        files_dir = _private_dir(d / "files")  # secure_file_priv: nothing readable or writable
        cmd = [
            str(self.binaries.server),
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--socket={self.socket_path}",
            f"--pid-file={d / 'mysqld.pid'}",
            f"--log-error={d / 'error.log'}",
            f"--tmpdir={_private_dir(d / 'tmp')}",
            f"--secure-file-priv={files_dir}",
            "--skip-name-resolve",
            "--skip-log-bin",
            "--local-infile=0",
            "--performance-schema=OFF",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--lower-case-table-names=1",
            "--max-connections=500",
            # defaults that bound what one statement can consume before the timeout hits
            "--max-recursive-iterations=1000000",
            "--tmp-disk-table-size=1G",
            *_INNODB_OPTIONS,
        ]
        if self.port:
            cmd += [f"--port={self.port}", "--bind-address=127.0.0.1"]
        else:
            cmd += ["--skip-networking"]
        if os.geteuid() == 0:
            cmd.append("--user=root")  # mariadbd refuses to run as root without it
        setpriv = shutil.which("setpriv")
        if setpriv:
            cmd = [setpriv, "--pdeathsig", "KILL", "--", *cmd]
        return cmd

    def _own(self, cmd: list[str]) -> None:
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as err:
            self._spawn_error = err
        finally:
            self._spawned.set()
        self._release.wait()

    def start(self, *, timeout: float = 60.0) -> None:
        """Launch the server and wait until it accepts connections.

        Raises:
            EnvironmentError_: it could not start; the message quotes the error log's tail.
        """
        cmd = self.command()
        self._owner = threading.Thread(target=self._own, args=(cmd,), name="mariadbd-owner", daemon=True)
        self._owner.start()
        self._spawned.wait()
        if self._spawn_error is not None or self._proc is None:
            self.stop()
            raise EnvironmentError_(f"cannot launch {cmd[0]}: {self._spawn_error}; {_SETUP_HINT}")
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                log = self.error_log_tail()
                self.stop()
                raise EnvironmentError_(f"mariadbd exited with code {self._proc.returncode} while starting:\n{log}")
            if self.socket_path.exists():
                try:
                    open_connection(self.endpoint, "root", "", timeout=2).close()
                    return
                except mysql.connector.Error:
                    pass
            if time.monotonic() > deadline:
                log = self.error_log_tail()
                self.stop()
                raise EnvironmentError_(f"mariadbd did not accept connections within {timeout:g} s:\n{log}")
            time.sleep(0.01)

    def error_log_tail(self, lines: int = 15) -> str:
        try:
            text = (self.instance_dir / "error.log").read_text(errors="replace")
        except OSError:
            return "(no error log)"
        return "\n".join(text.splitlines()[-lines:])

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, *, remove: bool = True, timeout: float = 10.0) -> None:
        """SIGTERM (clean shutdown), SIGKILL after ``timeout``; then remove the instance dir."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._release.set()
        if self._owner is not None:
            self._owner.join(timeout=5)
        if remove:
            shutil.rmtree(self.instance_dir, ignore_errors=True)
        handle, self._lock_handle = self._lock_handle, None
        if handle is not None:
            handle.close()  # type: ignore[attr-defined]


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class TemplateCache:
    """Initialised data directories with dumps loaded, one per (server version, dumps).

    Args:
        binaries: the server binaries (their version is part of the key).
        root: cache directory (default :func:`default_cache_root`).
        run_root: where the temporary build server runs.
    """

    def __init__(self, binaries: MariadbBinaries, root: Path | None = None, run_root: Path | None = None):
        self.binaries = binaries
        self.root = root or default_cache_root()
        self.run_root = run_root

    def key(self, dumps: Sequence[Path]) -> str:
        h = hashlib.sha256(f"{TEMPLATE_FORMAT}|{self.binaries.version}|{_INNODB_OPTIONS}".encode())
        for dump in dumps:
            h.update(_hash_file(dump).encode())
        return h.hexdigest()[:20]

    def ensure(self, dumps: Sequence[Path]) -> Path:
        """The template data directory for ``dumps``, building it (under a file lock) if missing."""
        key = self.key(dumps)
        final = self.root / key
        if (final / "READY").exists():
            return final / "data"
        _private_dir(self.root)
        with open(self.root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (final / "READY").exists():
                return final / "data"
            self._build(dumps, final)
        return final / "data"

    def _build(self, dumps: Sequence[Path], final: Path) -> None:
        staging = Path(tempfile.mkdtemp(prefix=f"{final.name}.build-", dir=self.root))
        try:
            datadir = staging / "data"
            init = subprocess.run(
                [
                    str(self.binaries.install_db),
                    "--no-defaults",
                    f"--datadir={datadir}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                    *(["--user=root"] if os.geteuid() == 0 else []),
                    *_INNODB_OPTIONS,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if init.returncode != 0:
                raise EnvironmentError_(
                    f"mariadb-install-db failed ({init.returncode}): {(init.stderr or init.stdout)[-800:]}"
                )
            instance_dir, handle = MariadbProcess.create_instance_dir(self.run_root)
            proc = MariadbProcess(self.binaries, datadir, instance_dir, handle)
            proc.start()
            try:
                conn = open_connection(proc.endpoint, "root", "")
                try:
                    cur = conn.cursor()
                    # anonymous accounts would shadow '%' accounts for local logins
                    cur.execute("SELECT user, host FROM mysql.user WHERE user = ''")
                    for user, host in cur.fetchall():
                        cur.execute(f"DROP USER '{user}'@'{host}'")
                    cur.close()
                    for dump in dumps:
                        load_dump(conn, read_dump(dump))
                finally:
                    conn.close()
            finally:
                proc.stop()
            meta = {"server": self.binaries.version, "dumps": [str(d) for d in dumps], "built": time.time()}
            (staging / "READY").write_text(json.dumps(meta, indent=1))
            if final.exists():
                shutil.rmtree(final)
            os.rename(staging, final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
