"""One managed llama.cpp server process: start, health-check, crash detection, restart, stop.

The server runs :mod:`stateflow.backends.local.server_app` in a child process (a native crash
there cannot take the caller down). The parent binds the listening socket itself and hands it
over, so choosing a free port and binding it cannot race with another program, and a restart
after a crash binds the same port again when it is still free (clients that kept the URL keep
working). The child exits when the parent dies (lifeline pipe), when :meth:`ManagedServer.stop`
is called, and at interpreter exit through the owning pool's ``atexit`` hook.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stateflow.backends.local.errors import (
    SETUP_HINT,
    RuntimeMissingError,
    ServerCrashedError,
    ServerStartError,
)
from stateflow.backends.local.store import cache_root

__all__ = ["ManagedServer", "ServerConfig", "cpu_cores", "runtime_available"]

_SERVER_APP = Path(__file__).with_name("server_app.py")


def cpu_cores() -> int:
    """Cores this process may run on (llama.cpp's default of 1 thread halves the speed)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def runtime_available() -> str | None:
    """``None`` when llama-cpp-python with its server extra is importable, else the reason."""
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"python module {module!r} is missing (llama-cpp-python[server]); {SETUP_HINT}"
    return None


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one server (see platform.md, "Embedded local LLM").

    Attributes:
        model_path: the GGUF file.
        alias: the model name the server answers to (``ModelProfile.model``).
        host: listen address (loopback only by default).
        port: fixed port, or 0 for a free one.
        n_ctx: context window in tokens (flows re-send their history: at least 8192).
        n_batch: prompt tokens evaluated per llama.cpp batch.
        n_threads: CPU threads for prompt evaluation and decoding (= cores).
        cache_bytes: capacity of the prompt-state RAM cache (0 disables it; then only the live KV
            prefix of the previous request is reused).
        start_timeout: seconds to wait for the server to become healthy.
        verbose: let llama.cpp log to the server log.
        degenerate_run_chars: a reply whose tail is one unit of 1-4 characters repeated over this
            many characters stops there (``LIMIT 1000000...``), instead of decoding to
            ``max_tokens``; 0 turns the rule off (see ``server_app``).
        stop_when_client_gone: a generation whose client disconnected (an HTTP timeout) stops at
            the next token instead of holding the model until it ends (off only to measure it).
        cpus: the cores the server process may run on (``os.sched_setaffinity`` in the child
            before the model loads); empty: wherever the OS puts it. A replica of
            :class:`~stateflow.backends.local.replicas.ReplicaSet` gets one core of its own.
    """

    model_path: Path
    alias: str
    host: str = "127.0.0.1"
    port: int = 0
    n_ctx: int = 8192
    n_batch: int = 512
    n_threads: int = field(default_factory=cpu_cores)
    cache_bytes: int = 1 << 30
    start_timeout: float = 120.0
    verbose: bool = False
    degenerate_run_chars: int = 48
    stop_when_client_gone: bool = True
    cpus: tuple[int, ...] = ()

    def child_config(self, port: int) -> dict[str, Any]:
        """The JSON object passed to the child process."""
        body = asdict(self)
        body.update(model_path=str(self.model_path), port=port, cpus=list(self.cpus))
        del body["start_timeout"]
        return body


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class ManagedServer:
    """A llama.cpp server child process for one model.

    Thread-safe: all state changes happen under one lock, so concurrent callers of
    :meth:`ensure_running` wait for a single start.
    """

    def __init__(self, config: ServerConfig, *, log_dir: Path | None = None, label: str = ""):
        self.config = config
        #: names this server in logs and errors when several serve one model (``replica 1 of 2, core 1``)
        self.label = label
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None
        self._port: int | None = config.port or None
        suffix = f"-cpu{'_'.join(map(str, config.cpus))}" if config.cpus else ""
        self._log_path = (log_dir or cache_root() / "logs") / f"llm-server-{config.alias}{suffix}.{os.getpid()}.log"
        self._crash: str | None = None
        self._owner_pid = os.getpid()
        self.starts = 0

    # -- properties ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (valid once started)."""
        if self._port is None:
            raise ServerStartError(f"server for {self.config.alias!r} has not been started")
        return f"http://{self.config.host}:{self._port}/v1"

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def log_path(self) -> Path:
        """The file receiving the child's output."""
        return self._log_path

    @property
    def crash_report(self) -> str | None:
        """Description of the last crash (exit status and log tail), or ``None``."""
        return self._crash

    def alive(self) -> bool:
        """Whether the child process is running."""
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle -------------------------------------------------------------------------------

    def ensure_running(self) -> str:
        """Start the server if needed (also after a crash) and return its base URL.

        Raises:
            RuntimeMissingError: llama-cpp-python[server] is not installed.
            ServerStartError: the server did not become healthy (message has the log tail).
        """
        with self._lock:
            if self.alive():
                return self.base_url
            if self._proc is not None:
                self._record_crash()
            self._start()
            return self.base_url

    def check(self) -> None:
        """Raise :class:`ServerCrashedError` if the server died since it was started.

        The core calls this after a failed request to turn a bare connection error into a clear
        one; the next :meth:`ensure_running` restarts the server.
        """
        with self._lock:
            if self._proc is not None and not self.alive():
                self._record_crash()
                self._proc = None
            if self._crash and not self.alive():
                raise ServerCrashedError(self._crash)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the child (SIGTERM, then SIGKILL after ``timeout`` seconds); idempotent."""
        with self._lock:
            proc, self._proc = self._proc, None
            if os.getpid() != self._owner_pid:
                # A forked copy of the owner (e.g. exiting through an inherited atexit hook): the
                # server belongs to the parent, leave it alone.
                return
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                # A clean stop leaves nothing worth keeping (a crashed server's log was kept
                # under another name by _record_crash).
                self._log_path.unlink(missing_ok=True)
            if self._lifeline is not None:
                os.close(self._lifeline)
                self._lifeline = None

    def stats(self) -> dict[str, Any]:
        """The server's running totals (``GET /stateflow/stats``)."""
        return self._get_json("/stateflow/stats", timeout=10.0)

    # -- internals -------------------------------------------------------------------------------

    def _record_crash(self) -> None:
        assert self._proc is not None
        code = self._proc.wait()
        tail = self._log_tail()
        kept = self._log_path.with_suffix(f".{self._proc.pid}.crash.log")
        try:
            self._log_path.rename(kept)  # the restarted server writes a new log
        except OSError:
            kept = self._log_path
        self._crash = (
            f"local LLM server for {self.config.alias!r}{self._label()} (pid {self._proc.pid}) {_describe_exit(code)}; "
            f"the request in flight failed. It is restarted on next use. Log tail ({kept}):\n{tail}"
        )
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    def _label(self) -> str:
        return f" ({self.label})" if self.label else ""

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this. Without it every response on a kept-alive connection
        # waited ~40 ms: the server writes headers and body separately, Nagle holds the body until
        # the client's delayed ACK of the headers arrives.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wanted = self._port or 0
        try:
            sock.bind((self.config.host, wanted))
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                sock.close()
                raise ServerStartError(f"cannot bind {self.config.host}:{wanted}: {err}") from err
            if self.config.port:
                sock.close()
                raise ServerStartError(
                    f"port {self.config.port} on {self.config.host} is already in use; choose another "
                    "port (or 0 for a free one)"
                ) from err
            # Our previous port was taken while we were down: any free port will do.
            sock.bind((self.config.host, 0))
        sock.listen(64)
        return sock

    def _start(self) -> None:
        missing = runtime_available()
        if missing:
            raise RuntimeMissingError(missing)
        if not Path(self.config.model_path).is_file():
            raise ServerStartError(f"model file {self.config.model_path} does not exist")
        sock = self._bind()
        port = sock.getsockname()[1]
        read_end, write_end = os.pipe()
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            # Run the file, not `-m stateflow...`: importing the stateflow package would import the
            # whole runtime (AutoGen: ~2.5 s) into a process that needs none of it. -P keeps this
            # package's directory off sys.path so its module names cannot shadow anything.
            "-P",
            str(_SERVER_APP),
            "--config",
            json.dumps(self.config.child_config(port)),
            "--fd",
            str(sock.fileno()),
            "--lifeline",
            str(read_end),
        ]
        try:
            with self._log_path.open("wb") as log:
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(sock.fileno(), read_end),
                    # Own session: a Ctrl-C meant for the parent must not kill a shared server
                    # mid-request; the lifeline and the pool's atexit hook end it instead.
                    start_new_session=True,
                )
        finally:
            sock.close()
            os.close(read_end)
        self._lifeline = write_end
        self._port = port
        self.starts += 1
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.config.start_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise ServerStartError(
                    f"local LLM server for {self.config.alias!r}{self._label()} {_describe_exit(code)} while starting. "
                    f"Log tail ({self._log_path}):\n{self._log_tail()}"
                )
            try:
                if self._get_json("/health", timeout=1.0).get("status") == "ok":
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.03)
        self.stop()
        raise ServerStartError(
            f"local LLM server for {self.config.alias!r} not healthy after {self.config.start_timeout:.0f} s. "
            f"Log tail ({self._log_path}):\n{self._log_tail()}"
        )

    def _get_json(self, path: str, timeout: float) -> dict[str, Any]:
        # No proxies: the server is on loopback and a configured HTTP proxy must not see it.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        url = f"http://{self.config.host}:{self._port}{path}"
        with opener.open(url, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"
