"""A private, throwaway PostgreSQL server for the tests: initdb into a temp dir, a Unix socket there
and no TCP, run as the ``postgres`` system user when the tests run as root (PostgreSQL refuses
root). It dies with the test process (parent-death signal) and is stopped at session end.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

PORT = 5432  # only names the socket file (.s.PGSQL.5432) inside the private directory: no TCP
USER = "stateflow"


PREFIX = "sf-pg-"


def sweep_stale() -> None:
    """Remove the directories of servers whose test process died without cleaning up (its server
    died with it through the parent-death signal; only the files are left)."""
    for directory in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            pid = int((directory / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
        except PermissionError:
            pass  # alive, someone else's


class ServerUnavailable(RuntimeError):
    """The server could not be set up here; the message says why and what to install."""


def bindir() -> Path:
    """Where initdb and postgres live (Debian keeps them out of PATH, per major version)."""
    if os.environ.get("STATEFLOW_PG_BINDIR"):
        candidates = [Path(os.environ["STATEFLOW_PG_BINDIR"])]
    else:
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name or 0))
        candidates = versions[::-1]
        if shutil.which("initdb"):
            candidates.append(Path(shutil.which("initdb") or "").parent)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "postgres").exists():
            return directory
    raise ServerUnavailable("PostgreSQL server binaries not found: run scripts/setup_postgres.sh")


class PgServer:
    """One server process over one data directory; can be stopped and started again."""

    def __init__(self) -> None:
        self.bin = bindir()
        sweep_stale()
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX))
        (self.root / "owner.pid").write_text(str(os.getpid()))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._as: list[str] = ["setpriv", "--pdeathsig", "KILL"]
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerUnavailable("running as root and there is no `postgres` user to run the server") from None
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as += ["--reuid", "postgres", "--regid", "postgres", "--init-groups"]
        options = ["-U", USER, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]
        init = subprocess.run(
            [*self._as, str(self.bin / "initdb"), "-D", str(self.data), *options],
            capture_output=True,
            text=True,
        )
        if init.returncode != 0:
            raise ServerUnavailable(f"initdb failed: {init.stderr.strip()[-800:]}")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.root} port={PORT} user={USER} dbname={dbname}"

    def start(self, timeout: float = 30.0) -> None:
        import psycopg

        log = open(self.log, "ab")  # noqa: SIM115 - the server writes to it for its whole life
        # No TCP at all; fsync off: a test server holds nothing worth a disk flush (a stopped or
        # crashed server still restarts from the OS cache, which is what the restart test needs).
        settings = ["listen_addresses=", "fsync=off", "full_page_writes=off", "max_connections=100"]
        self.process = subprocess.Popen(
            [*self._as, str(self.bin / "postgres"), "-D", str(self.data), "-k", str(self.root), "-p", str(PORT)]
            + [arg for setting in settings for arg in ("-c", setting)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal goes to pytest, which stops it in order
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise ServerUnavailable(f"postgres exited with {self.process.returncode}: {self.tail()}")
            try:
                psycopg.connect(self.dsn(), connect_timeout=2).close()
                return
            except psycopg.OperationalError as err:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerUnavailable(
                        f"postgres did not accept connections in {timeout} s: {self.tail()}"
                    ) from err
                time.sleep(0.05)

    def stop(self, *, immediate: bool = False) -> None:
        """Fast shutdown (SIGINT), or immediate (SIGQUIT: no shutdown checkpoint, like a crash)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT if immediate else signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-800:]
        except OSError:
            return "(no log)"

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
