"""A bubblewrap sandbox over a per-episode overlay: the default execution backend.

Layout of one :class:`Sandbox`:

* a *keeper* process (``unshare --mount`` running ``/bin/sh`` fed from a pipe) owns a private
  mount namespace. The size-capped tmpfs holding the overlay's upper/work dirs and the overlay
  itself are mounted *inside that namespace only*: they never appear in the host's mount
  table, and when the keeper exits (``close()``, or our process dying, which closes its stdin)
  the kernel drops them. Nothing can be left mounted behind us;
* a *spawner* (:mod:`stateflow.envs.bash.spawner`) joined the sandbox's cgroup and entered the keeper's
  namespace once; it forks each command with its rlimits: ``bwrap`` with fresh
  user/pid/ipc/uts/net(/cgroup) namespaces, ``--die-with-parent``, ``--new-session``, a cleared
  environment, and as pid 1 a small shell relay (see ``_RELAY``) running the command. When every
  holder of the command's output has closed it, the relay exits and bwrap tears the pid namespace
  down, so background jobs and daemons die with the step;
* a cgroup (pids + memory) that every command joins, swept after every command.

Host protection (see :class:`Protection` and envs/bash/README.md, "Threat model"): sandbox root
is an unprivileged host uid (as root: :mod:`stateflow.envs.bash.idmap`, the spawner switches to
the mapped uid before ``bwrap``; as non-root: the invoking user), ``/proc`` is remounted
read-only (bubblewrap 0.8 leaves ``/proc/sys`` writable), ``/sys`` is not mounted, and every
command keeps only :data:`KEPT_CAPABILITIES`.

Reset = unmount and remount the tmpfs and overlay, done with mount(2) calls by the spawner
(under a millisecond): the lower layers (base root and task file system) are never written.

Privileges: as root this needs ``unshare``/``nsenter`` (util-linux) and ``bwrap``. As non-root
the keeper is ``unshare --user --map-root-user --mount`` and the overlay uses ``userxattr``
(kernel >= 5.11); this needs unprivileged user namespaces (``sysctl user.max_user_namespaces``
> 0, and ``kernel.unprivileged_userns_clone=1`` / no AppArmor userns restriction where those
exist). Cgroups are then usually not writable, so the process cap is ``RLIMIT_NPROC``, which
counts all of the user's processes.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.cgroups import SandboxCgroup, sweep_stale_cgroups
from stateflow.envs.bash.idmap import MappingChoice, choose_id_mapping
from stateflow.envs.bash.spawner import Spawner

__all__ = [
    "KEPT_CAPABILITIES",
    "MAX_ARG_BYTES",
    "CommandResult",
    "Protection",
    "Sandbox",
    "SandboxLimits",
    "check_sandbox_support",
]

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_HOST_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Runs as pid 1 of the sandbox: the command's merged output goes through `cat`, so the step ends
# when every process holding that output has closed it (as with `docker exec`: `x &` whose job
# still writes keeps the step open), then with the command's exit status. Everything left
# (daemons that closed their output) dies with the pid namespace when this shell exits.
_RELAY = '{ rc=$( { { "$@" 2>&1 3>&- 4>&-; echo $? >&4; } | cat >&3; } 4>&1 ); } 3>&1; exit $rc'
_KILL_GRACE_S = 10.0
_MS_NODEV = 4  # mount(2) flag
_DOCKER_HINT = "Use backend='docker' on a machine with a Docker engine instead."
# Capabilities a sandboxed command keeps: Docker's default set (what upstream's containers had)
# minus CAP_MKNOD and CAP_AUDIT_WRITE. Everything that reaches the host kernel (CAP_SYS_ADMIN,
# CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE, CAP_SYS_BOOT, CAP_SYS_TIME, CAP_NET_ADMIN,
# CAP_SYSLOG, CAP_BPF, CAP_PERFMON, ...) is dropped, from the bounding set too, so no setuid
# binary can get it back. Those kept act only inside the sandbox's user namespace.
KEPT_CAPABILITIES = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_SETFCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SYS_CHROOT",
)
# execve(2) refuses one argument longer than this (MAX_ARG_STRLEN, 32 pages, NUL included).
MAX_ARG_BYTES = 32 * 4096 - 1


@dataclass(frozen=True)
class SandboxLimits:
    """Resource caps of one sandbox.

    Attributes:
        timeout_s: wall-clock limit of one command (upstream: 10 s).
        cpu_seconds: RLIMIT_CPU of every process.
        file_size_bytes: RLIMIT_FSIZE (largest file a process may write).
        open_files: RLIMIT_NOFILE.
        processes: pids cgroup cap (root) or RLIMIT_NPROC (non-root).
        memory_bytes: memory cgroup cap (root; tmpfs pages count too), else RLIMIT_AS per process.
        disk_bytes: size of the tmpfs holding everything the sandbox writes.
        output_bytes: bytes of merged output kept; the rest is read and dropped.
    """

    timeout_s: float = 10.0
    cpu_seconds: int = 10
    file_size_bytes: int = 100 * 2**20
    open_files: int = 1024
    processes: int = 256
    memory_bytes: int = 1 * 2**30
    disk_bytes: int = 512 * 2**20
    output_bytes: int = 4 * 2**20


@dataclass(frozen=True)
class CommandResult:
    """What one command produced: exit code (None if killed on timeout) and merged output."""

    exit_code: int | None
    output: bytes
    timed_out: bool = False
    truncated: bool = False


@dataclass(frozen=True)
class Protection:
    """Which protection against the host is in force for a sandbox's commands.

    Attributes:
        mode: ``"unprivileged-uid"`` when sandbox root is an unprivileged host user (non-root
            runs: the invoking user; root runs: the mapped uid of :mod:`stateflow.envs.bash.idmap`),
            ``"dropped-capabilities"`` when sandbox root is host uid 0 with a reduced capability
            set (root runs where the mapped uid cannot create user namespaces; see
            envs/bash/README.md, "Threat model").
        host_uid: host uid that sandbox uid 0 is.
        host_uid_reason: who that uid is, or why sandbox root is host root (the fallback).
        capabilities: capabilities every sandboxed process keeps (in its own user namespace).
        proc_read_only: ``/proc`` (``/proc/sys``, ``/proc/sysrq-trigger``, ...) is mounted read-only.
        sys_mounted: whether ``/sys`` is mounted at all (never: the directory is empty).
    """

    mode: str
    host_uid: int
    capabilities: tuple[str, ...]
    host_uid_reason: str = ""
    proc_read_only: bool = True
    sys_mounted: bool = False

    def describe(self) -> str:
        """One line for logs and the CLI, e.g. ``unprivileged-uid (sandbox root = host uid 1879048192: ...)``."""
        caps = ", ".join(c.removeprefix("CAP_").lower() for c in self.capabilities)
        proc = "/proc read-only" if self.proc_read_only else "/proc writable"
        sys = "/sys mounted" if self.sys_mounted else "no /sys"
        why = f": {self.host_uid_reason}" if self.host_uid_reason else ""
        return f"{self.mode} (sandbox root = host uid {self.host_uid}{why}; {proc}; {sys}; capabilities: {caps})"


def check_sandbox_support() -> None:
    """Raise EnvironmentError_ naming the missing piece if sandboxes cannot run here."""
    for tool in ("bwrap", "unshare", "nsenter", "dash"):
        if shutil.which(tool, path=_HOST_PATH) is None:
            raise EnvironmentError_(f"`{tool}` is not installed; run scripts/setup_bash.sh. {_DOCKER_HINT}")
    cmd = ["unshare", "--mount", "true"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "true"]
    probe = subprocess.run(cmd, capture_output=True, check=False)
    if probe.returncode != 0:
        what = "mount namespaces" if os.geteuid() == 0 else "unprivileged user namespaces"
        raise EnvironmentError_(
            f"{what} are unavailable ({probe.stderr.decode(errors='replace').strip()}); the bash sandbox needs them "
            "(non-root: sysctl user.max_user_namespaces>0, kernel.unprivileged_userns_clone=1). " + _DOCKER_HINT
        )


def _escape_overlay_path(path: Path) -> str:
    text = str(path)
    if any(c in text for c in ",:\n"):
        raise EnvironmentError_(
            f"overlay layer path {text!r} contains ',' or ':'; move the cache (STATEFLOW_CACHE_DIR)"
        )
    return text


class Sandbox:
    """An isolated root made of read-only ``lowers`` plus a private writable layer.

    Args:
        lowers: layers, topmost first (e.g. ``[task_fs_layer, base_root]``).
        limits: resource caps.
        upper: build mode: write into this on-disk directory instead of a tmpfs (used once to
            build a task file-system layer; :meth:`reset` is then not allowed).
        hostname: the sandbox's host name.
        ids: as root, the host ids sandbox root runs as; default :func:`~stateflow.envs.bash.idmap.choose_id_mapping`
            (``MappingChoice(None, reason)`` = host root with dropped capabilities, the fallback;
            ignored by non-root runs, whose sandbox root is always the invoking user).

    Not thread-safe by design beyond a lock that serialises calls: one sandbox per episode
    owner. Several sandboxes may run concurrently in one process.
    """

    def __init__(
        self,
        lowers: Sequence[Path],
        *,
        limits: SandboxLimits | None = None,
        upper: Path | None = None,
        hostname: str = "sandbox",
        ids: MappingChoice | None = None,
    ) -> None:
        check_sandbox_support()
        self.limits = limits or SandboxLimits()
        self.hostname = hostname
        self._rootless = os.geteuid() != 0
        # As root: the host uid/gid every sandboxed command runs as (None: host root, see Protection)
        self._mapping_choice = choose_id_mapping() if ids is None or self._rootless else ids
        self._mapping = self._mapping_choice.mapping
        if self._mapping is not None:
            _check_lowers_owned(lowers, self._mapping.host_base)
        self._lock = threading.Lock()
        self._lowers = list(lowers)
        self._upper = upper
        self._closed = False
        self._parts: list[Spawner] = []  # shared with the finalizer
        sweep_stale_cgroups()
        _sweep_stale_state_dirs()
        # The pid in every name lets a process (and its tests) tell its own resources from others'.
        self._state = Path(tempfile.mkdtemp(prefix=f"sf-bash-{os.getpid()}-"))
        self._root = self._state / "root"
        self._rw = self._state / "rw"
        self._root.mkdir()
        self._rw.mkdir()
        if self._mapping is not None:
            # bwrap runs as the mapped uid and must reach <state>/root: search permission only (the
            # dirs stay host root's, so that uid can never swap the paths the spawner mounts on;
            # in the host's mount namespace <state>/root is an empty directory anyway)
            self._state.chmod(0o711)
        self._cgroup = (
            None
            if self._rootless
            else SandboxCgroup.create(pids_max=self.limits.processes, memory_bytes=self.limits.memory_bytes)
        )
        # RLIMIT_NPROC counts every process of the real uid, so leave room for the user's own.
        self._nproc = self.limits.processes + (_count_user_processes() if self._cgroup is None else 0)
        unshare = ["unshare", "--mount", "--propagation", "private"]
        if self._rootless:
            unshare[1:1] = ["--user", "--map-root-user"]
        self._keeper = subprocess.Popen(
            [*unshare, "--", "/bin/sh", "-s", f"sf-bash-keeper-{os.getpid()}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={"PATH": _HOST_PATH, "LC_ALL": "C"},
            cwd=self._state,
            start_new_session=True,
        )
        self._spawner: Spawner | None = None
        self._finalizer = weakref.finalize(self, _shutdown, self._keeper, self._cgroup, self._state, self._parts)
        try:
            self._mount()
            self._spawner = self._start_spawner()
            self._parts.append(self._spawner)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ keeper protocol
    def _keeper_run(self, script: str) -> str:
        """Run ``script`` in the keeper's shell; return its output; raise on non-zero status."""
        marker = "@@sf-rc="
        assert self._keeper.stdin is not None and self._keeper.stdout is not None
        try:
            self._keeper.stdin.write(f"{{ {script}\n}} 2>&1; echo {marker}$?\n".encode())
            self._keeper.stdin.flush()
        except OSError as err:
            raise EnvironmentError_(f"the sandbox keeper process died: {err}") from err
        lines: list[str] = []
        while True:
            raw = self._keeper.stdout.readline()
            if not raw:
                raise EnvironmentError_("the sandbox keeper process exited: " + "".join(lines))
            line = raw.decode(errors="replace")
            if line.startswith(marker):
                status = int(line[len(marker) :])
                break
            lines.append(line)
        if status != 0:
            raise EnvironmentError_(f"sandbox mount step failed (status {status}): {''.join(lines).strip()}")
        return "".join(lines)

    def _mount_steps(self) -> list[list]:
        """Mount the writable layer and the overlay (steps for :meth:`Spawner.remount`)."""
        lowers = ":".join(_escape_overlay_path(p) for p in self._lowers)
        extra = ",userxattr" if self._rootless else ""
        steps: list[list] = []
        if self._upper is not None:
            upper_dir, work_dir = self._upper, self._upper.parent / (self._upper.name + ".work")
            work_dir.mkdir(exist_ok=True)
        else:
            upper_dir, work_dir = self._rw / "upper", self._rw / "work"
            tmpfs = f"size={self.limits.disk_bytes},mode=0755"
            steps += [
                ["mount", "sf-bash-rw", str(self._rw), "tmpfs", _MS_NODEV, tmpfs],
                ["mkdir", str(upper_dir)],
                ["mkdir", str(work_dir)],
            ]
            if self._mapping is not None:  # the merged root directory takes the upper dir's owner
                steps.append(["chown", str(upper_dir), self._mapping.host_base, self._mapping.host_base])
            # ... and its mtime. A fresh upper dir would date / at the reset, so `ls -ld /` would
            # differ between the agent's sandbox and the gold's, reset minutes apart (NL2Bash 175
            # scored 0.95 for the gold command itself); / keeps the top layer's time instead.
            steps.append(["utime", str(upper_dir), self._lowers[0].stat().st_mtime_ns])
        opts = (
            f"lowerdir={lowers},upperdir={_escape_overlay_path(upper_dir)},workdir={_escape_overlay_path(work_dir)}"
            f"{extra}"
        )
        steps.append(["mount", "sf-bash", str(self._root), "overlay", 0, opts])
        return steps

    def _unmount_steps(self) -> list[list]:
        return [["umount", str(self._root)]] + ([] if self._upper is not None else [["umount", str(self._rw)]])

    def _mount(self) -> None:
        """First mount, through the keeper's shell (the spawner does not exist yet)."""
        script = []
        for step in self._mount_steps():
            if step[0] == "mkdir":
                script.append(f"mkdir {shlex.quote(step[1])}")
            elif step[0] == "chown":
                script.append(f"chown {step[2]}:{step[3]} {shlex.quote(step[1])}")
            elif step[0] == "utime":
                seconds, nanoseconds = divmod(step[2], 1_000_000_000)
                script.append(f"touch -d @{seconds}.{nanoseconds:09d} {shlex.quote(step[1])}")
            else:
                _, source, target, fstype, flags, data = step
                opts = f"{data},nodev" if flags & _MS_NODEV else data
                script.append(f"mount -t {fstype} -o {shlex.quote(opts)} {source} {shlex.quote(target)}")
        self._keeper_run(" && ".join(script))

    # ------------------------------------------------------------------ public API
    def reset(self, lowers: Sequence[Path] | None = None) -> None:
        """Drop everything written so far (and optionally switch the lower layers)."""
        with self._lock:
            self._check_open()
            if self._upper is not None:
                raise EnvironmentError_("a build-mode sandbox (upper=...) cannot be reset")
            if self._cgroup is not None:
                self._cgroup.kill_all(keep=self._spawner_pids())
            if lowers is not None:
                self._lowers = list(lowers)
            assert self._spawner is not None
            # mount(2) calls made by the spawner: no umount/mount/mkdir processes to start
            self._spawner.remount(self._unmount_steps() + self._mount_steps())

    def run(self, argv: Sequence[str], *, cwd: str = "/", timeout: float | None = None) -> CommandResult:
        """Execute ``argv`` (no shell added) inside the sandbox with working directory ``cwd``.

        Output is stdout and stderr merged in write order; stdin is empty. After ``timeout``
        (default ``limits.timeout_s``) every process of the command is killed.

        Raises:
            ValueError: ``argv`` is empty or contains NUL bytes (the caller reports it).
            EnvironmentError_: the sandbox is closed or broken.
        """
        if not argv:
            raise ValueError("empty command")
        with self._lock:
            self._check_open()
            return self._run_locked(list(argv), cwd, self.limits.timeout_s if timeout is None else timeout)

    @property
    def protection(self) -> Protection:
        """The protection in force for this sandbox's commands (see :class:`Protection`)."""
        unprivileged = self._rootless or self._mapping is not None
        return Protection(
            mode="unprivileged-uid" if unprivileged else "dropped-capabilities",
            host_uid=self._mapping.host_base if self._mapping is not None else os.getuid(),
            capabilities=KEPT_CAPABILITIES,
            host_uid_reason=self._mapping_choice.reason,
        )

    def writable_layer(self) -> Path:
        """The directory holding what commands wrote (overlay upper), as a path the host can open.

        The tmpfs lives in the keeper's private mount namespace, so the path goes through
        ``/proc/<keeper pid>/root``. For inspection and tests (e.g. which host uid owns the files).
        """
        upper = self._upper if self._upper is not None else self._rw / "upper"
        return Path(f"/proc/{self._keeper.pid}/root") / upper.relative_to("/")

    def describe(self) -> str:
        """One line saying which protection is in force (:meth:`Protection.describe`)."""
        return self.protection.describe()

    def _ns_args(self) -> list[str]:
        ns = [f"--mount=/proc/{self._keeper.pid}/ns/mnt"]
        if self._rootless:
            ns[:0] = [f"--user=/proc/{self._keeper.pid}/ns/user", "--preserve-credentials"]
        return ns

    def _start_spawner(self) -> Spawner:
        """Start the helper that forks commands inside the cgroup and the keeper's namespace."""
        join = [f"echo $$ > {shlex.quote(f)}" for f in (self._cgroup.procs_files() if self._cgroup else [])]
        # joined with && : a failed cgroup join never leaves a spawner outside its cgroup
        script = " && ".join([*join, 'exec "$@"'])
        prefix = ["dash", "-c", script, "sf-spawn", "nsenter", *self._ns_args(), "--"]
        return Spawner(prefix, env={"PATH": _HOST_PATH}, tag=f"sf-bash-spawner-{os.getpid()}")

    def _spawner_pids(self) -> set[int]:
        return {self._spawner.proc.pid} if self._spawner is not None else set()

    def _rlimits(self) -> dict[str, int]:
        lim = self.limits
        out = {
            "RLIMIT_CPU": lim.cpu_seconds,
            "RLIMIT_FSIZE": lim.file_size_bytes,
            "RLIMIT_NOFILE": lim.open_files,
        }
        if self._cgroup is None:  # no cgroup (non-root): per-process caps instead
            out.update(RLIMIT_NPROC=self._nproc, RLIMIT_AS=lim.memory_bytes)
        return out

    def _run_locked(self, argv: list[str], cwd: str, timeout: float) -> CommandResult:
        assert self._spawner is not None
        bwrap = [
            "bwrap",
            "--bind", str(self._root), "/",
            "--dev", "/dev",
            # A fresh /proc, then read-only as a whole: bwrap 0.8 leaves /proc/sys writable (in the
            # dropped-capabilities fallback sandbox uid 0 is host uid 0: core_pattern, ... are the host's).
            "--proc", "/proc", "--remount-ro", "/proc",
            "--unshare-user", "--uid", "0", "--gid", "0",
            "--cap-drop", "ALL", *(a for cap in KEPT_CAPABILITIES for a in ("--cap-add", cap)),
            "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
            "--hostname", self.hostname,
            "--die-with-parent", "--new-session", "--as-pid-1",
            "--clearenv",
            "--setenv", "PATH", SANDBOX_PATH,
            "--setenv", "HOME", "/root",
            "--setenv", "HOSTNAME", self.hostname,
            "--chdir", cwd,
            "--",
            "/bin/sh", "-c", _RELAY, "sf-run",
        ]  # fmt: skip
        if any("\0" in a for a in argv) or "\0" in cwd:
            raise ValueError("NUL byte in command")
        _check_exec_size([*bwrap, *argv])
        read_fd, write_fd = os.pipe()
        try:
            try:
                pid = self._spawn([*bwrap, *argv], write_fd)
            finally:
                os.close(write_fd)
            output, truncated, timed_out, code = self._collect(read_fd, pid, timeout)
        finally:
            os.close(read_fd)
            if self._cgroup is not None:
                self._cgroup.kill_all(keep=self._spawner_pids())
        if timed_out:
            return CommandResult(None, output, True, truncated)
        if code < 0:
            code = 128 - code  # killed by a signal: report it the way a shell would
        return CommandResult(code, output, False, truncated)

    def _spawn(self, argv: list[str], output_fd: int) -> int:
        """Start ``argv`` through the spawner, replacing a spawner that died (e.g. OOM-killed) once."""
        assert self._spawner is not None
        ids = None if self._mapping is None else (self._mapping.host_base, self._mapping.host_base)
        request = {"env": {"PATH": _HOST_PATH}, "rlimits": self._rlimits(), "output_fd": output_fd, "ids": ids}
        try:
            return self._spawner.spawn(argv, **request)
        except EnvironmentError_:
            if self._spawner.proc.poll() is None:
                raise
        self._spawner.close()
        self._parts.remove(self._spawner)
        self._spawner = self._start_spawner()
        self._parts.append(self._spawner)
        return self._spawner.spawn(argv, **request)

    def _collect(self, fd: int, pid: int, timeout: float) -> tuple[bytes, bool, bool, int]:
        """Read the merged output until it closes, then the exit status; kill at the deadline."""
        assert self._spawner is not None
        deadline = time.monotonic() + timeout
        chunks: list[bytes] = []
        kept = 0
        truncated = False
        timed_out = False
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            data = os.read(fd, 1 << 16)
            if not data:
                break
            room = self.limits.output_bytes - kept
            if room > 0:
                chunks.append(data[:room])
                kept += min(room, len(data))
            if len(data) > room:
                truncated = True
        code = None if timed_out else self._spawner.wait_exit(max(0.0, deadline - time.monotonic()))
        if code is None:  # the deadline passed: kill the sandbox (its pid namespace goes with it)
            timed_out = True
            _kill_pgid(pid)
            code = self._spawner.wait_exit(_KILL_GRACE_S)
            if code is None:
                raise EnvironmentError_(f"sandbox command {pid} survived SIGKILL for {_KILL_GRACE_S} s")
        return b"".join(chunks), truncated, timed_out, code

    def close(self) -> None:
        """Kill every process, drop the mounts (with the keeper's namespace) and the cgroup. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._finalizer()

    def _check_open(self) -> None:
        if self._closed:
            raise EnvironmentError_("the sandbox is closed")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_exec_size(argv: list[str]) -> None:
    """Refuse an argv that execve(2) would refuse, before any process is started.

    Raises:
        ValueError: an argument is not valid UTF-8 text (a lone surrogate) or longer than
            :data:`MAX_ARG_BYTES`, or all of them exceed the system's ``ARG_MAX``.
    """
    total = 0
    for i, arg in enumerate(argv):
        try:
            size = len(arg.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError as err:
            raise ValueError(f"argument {i} is not valid text: {err.reason}") from err
        if size > MAX_ARG_BYTES:
            raise ValueError(f"argument {i} has {size} bytes; execve allows at most {MAX_ARG_BYTES}")
        total += size + 1 + 8  # the string, its NUL, its pointer
    if total > os.sysconf("SC_ARG_MAX"):
        raise ValueError(f"the command's arguments take {total} bytes; execve allows {os.sysconf('SC_ARG_MAX')}")


def _check_lowers_owned(lowers: Sequence[Path], host_uid: int) -> None:
    """Refuse lower layers not shifted into the mapping: inside they would belong to nobody.

    Raises:
        EnvironmentError_: naming the layer and its owner.
    """
    for lower in lowers:
        owner = os.stat(lower).st_uid
        if owner != host_uid:
            raise EnvironmentError_(
                f"sandbox layer {lower} is owned by host uid {owner}, not by the sandbox's mapped root {host_uid}; "
                "use locate_base_root() and LayerStore, which give layers shifted into the mapping "
                "(stateflow.envs.bash.idmap)"
            )


def _sweep_stale_state_dirs() -> None:
    """Remove the (empty) state dirs of processes that died without closing their sandboxes."""
    for path in Path(tempfile.gettempdir()).glob("sf-bash-*-*"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            for sub in ("root", "rw", ""):
                with contextlib.suppress(OSError):  # only empty dirs go: never recurse
                    (path / sub).rmdir()


def _count_user_processes() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += entry.stat().st_uid == uid
    return count


def _kill_pgid(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _shutdown(keeper: subprocess.Popen[bytes], cgroup: SandboxCgroup | None, state: Path, parts: list[Spawner]) -> None:
    """Release a sandbox's resources (also run by the GC / at interpreter exit)."""
    for spawner in parts:
        spawner.close()
    if cgroup is not None:
        cgroup.kill_all()
    if keeper.poll() is None:
        try:
            assert keeper.stdin is not None
            keeper.stdin.close()  # EOF: the shell exits, the namespace and its mounts go away
            keeper.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            _kill_group(keeper)
            keeper.wait()
    if keeper.stdout is not None:
        keeper.stdout.close()
    if cgroup is not None:
        cgroup.remove()
    # Only empty directories are removed: never recurse into what might still be a mount point.
    for sub in ("root", "rw"):
        with contextlib.suppress(OSError):
            (state / sub).rmdir()
    with contextlib.suppress(OSError):
        state.rmdir()
