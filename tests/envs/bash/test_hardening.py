"""The sandbox cannot reach the host kernel: /proc and /sys read-only or absent, capabilities dropped.

Regression tests for issue 13: with bubblewrap 0.8, ``/proc/sys`` stayed writable and sandbox uid 0
is host uid 0 (root runs), so ``echo 11 > /proc/sys/kernel/printk_ratelimit_burst`` changed the
host's value. Every write here targets a real host tunable; the test process reads the host value
before and after (and puts it back if containment ever fails, so a failing run does not leave the
host changed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from stateflow.envs.bash import BashEnv, open_bash_env
from stateflow.envs.bash.idmap import sandbox_id_mapping
from stateflow.envs.bash.rootfs import locate_base_root
from stateflow.envs.bash.sandbox import KEPT_CAPABILITIES, Sandbox

from .conftest import FAST, needs_sandbox

pytestmark = needs_sandbox

# Linux capability numbers (include/uapi/linux/capability.h).
CAP_BITS = {
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_FSETID": 4,
    "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_LINUX_IMMUTABLE": 9,
    "CAP_NET_BIND_SERVICE": 10, "CAP_NET_BROADCAST": 11, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13,
    "CAP_IPC_LOCK": 14, "CAP_IPC_OWNER": 15, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_CHROOT": 18,
    "CAP_SYS_PTRACE": 19, "CAP_SYS_PACCT": 20, "CAP_SYS_ADMIN": 21, "CAP_SYS_BOOT": 22, "CAP_SYS_NICE": 23,
    "CAP_SYS_RESOURCE": 24, "CAP_SYS_TIME": 25, "CAP_SYS_TTY_CONFIG": 26, "CAP_MKNOD": 27, "CAP_LEASE": 28,
    "CAP_AUDIT_WRITE": 29, "CAP_AUDIT_CONTROL": 30, "CAP_SETFCAP": 31, "CAP_MAC_OVERRIDE": 32,
    "CAP_MAC_ADMIN": 33, "CAP_SYSLOG": 34, "CAP_WAKE_ALARM": 35, "CAP_BLOCK_SUSPEND": 36, "CAP_AUDIT_READ": 37,
    "CAP_PERFMON": 38, "CAP_BPF": 39, "CAP_CHECKPOINT_RESTORE": 40,
}  # fmt: skip
MUST_BE_DROPPED = (
    "CAP_SYS_ADMIN", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_PTRACE", "CAP_SYS_BOOT", "CAP_SYS_TIME",
    "CAP_NET_ADMIN", "CAP_MKNOD", "CAP_SYSLOG", "CAP_BPF", "CAP_PERFMON", "CAP_SYS_RESOURCE", "CAP_DAC_READ_SEARCH",
)  # fmt: skip

# (host path, value the action writes): all global (not namespaced) kernel settings.
TUNABLES = [
    ("/proc/sys/kernel/printk_ratelimit_burst", None),  # None: the host value + 1
    ("/proc/sys/kernel/core_pattern", "|/bin/sh -c 'touch /sf-owned'"),
    ("/proc/sys/kernel/sysrq", None),
    ("/proc/sys/vm/swappiness", None),
    ("/proc/sys/fs/file-max", None),
    ("/proc/sys/kernel/printk", "7 4 1 7"),
]

# Walks /proc and /sys inside the sandbox; prints the files it could open for writing (open(2)
# with O_WRONLY, never writing, so nothing changes even if a file is writable) and those
# access(2) calls writable. Entries of the sandbox's own processes are skipped: its pid namespace
# is private, so every /proc/<pid> there is a process of the task.
_WALK = r"""
import json, os, re
own = re.compile(r"^/proc/(\d+|self|thread-self)(/|$)")
opened, access = [], []
for top in ("/proc", "/sys"):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if not own.match(os.path.join(dirpath, d))]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if own.match(path) or os.path.islink(path):
                continue
            if os.access(path, os.W_OK):
                access.append(path)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                continue
            os.close(fd)
            opened.append(path)
print(json.dumps({"opened": opened, "access": access, "sys": sorted(os.listdir("/sys"))}))
"""


@pytest.fixture(scope="module")
def env() -> Iterator[BashEnv]:
    with open_bash_env("demo", limits=FAST) as bash_env:
        bash_env.reset(0)
        yield bash_env


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox([locate_base_root().path]) as sandbox:
        yield sandbox


def _host(path: str) -> str:
    return Path(path).read_text()


@pytest.mark.parametrize(("path", "value"), TUNABLES)
def test_writing_a_host_tunable_fails_and_leaves_the_host_value(env: BashEnv, path: str, value: str | None) -> None:
    if not Path(path).exists():
        pytest.skip(f"{path} does not exist on this kernel")
    before = _host(path)
    new = value if value is not None else str(int(before.split()[0]) + 1)
    env.reset(0)
    try:
        obs, _, _, info = env.step(f"echo '{new}' > {path}")
        after = _host(path)
    finally:
        if _host(path) != before:  # containment failed: restore the host before reporting
            Path(path).write_text(before)
    assert after == before, f"the sandbox changed the host's {path}: {before!r} -> {after!r}"
    assert not info["action_executed"] and "Read-only file system" in obs, obs


def test_sysrq_trigger_is_not_writable(env: BashEnv) -> None:
    if not Path("/proc/sysrq-trigger").exists():
        obs = env.step("ls /proc/sysrq-trigger")[0]
        assert "No such file" in obs  # not built into this kernel: absent inside as well
        return
    # 'h' only prints help to the kernel log, should containment ever fail
    obs, _, _, info = env.step("echo h > /proc/sysrq-trigger")
    assert not info["action_executed"] and "Read-only file system" in obs


def test_proc_cannot_be_remounted_or_unmounted(box: Sandbox) -> None:
    # mount(2)/umount(2) straight from python3 (the base root has no mount(8)); also from a
    # nested user namespace, where a process would hold every capability again.
    script = (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(what, rc): print(what, rc, os.strerror(ctypes.get_errno()) if rc else 'ok')\n"
        "call('remount', libc.mount(None, b'/proc', None, 32 | 4096, None))\n"  # MS_REMOUNT|MS_BIND
        "call('umount', libc.umount2(b'/proc/irq', 2))\n"  # MNT_DETACH
        "call('sysfs', libc.mount(b'sysfs', b'/sys', b'sysfs', 0, None))\n"
        "call('userns', libc.unshare(0x10000000 | 0x00020000))\n"  # CLONE_NEWUSER|CLONE_NEWNS
        "call('remount2', libc.mount(None, b'/proc', None, 32 | 4096, None))\n"
        "call('write', os.system('echo 12 > /proc/sys/kernel/printk_ratelimit_burst 2>/dev/null'))\n"
    )
    burst_file = "/proc/sys/kernel/printk_ratelimit_burst"
    burst = _host(burst_file)
    try:
        obs = box.run(["python3", "-c", script]).output.decode()
    finally:
        changed = _host(burst_file)
        if changed != burst:  # containment failed: restore the host before reporting
            Path(burst_file).write_text(burst)
    assert changed == burst
    lines = dict(line.split(" ", 1) for line in obs.splitlines())
    for what in ("remount", "umount", "sysfs", "remount2", "write"):
        assert what in lines and not lines[what].endswith("ok"), (what, obs)


def test_no_writable_proc_or_sys_file_outside_the_tasks_own_processes(box: Sandbox) -> None:
    result = box.run(["python3", "-c", _WALK], timeout=120)
    assert result.exit_code == 0, result.output[-2000:]
    found = json.loads(result.output)
    assert found["opened"] == [], f"writable from inside the sandbox: {found['opened'][:20]}"
    assert found["access"] == [], f"access(W_OK) says writable: {found['access'][:20]}"
    assert found["sys"] == []  # /sys is not mounted: an empty directory


def _capability_mask(names: tuple[str, ...]) -> int:
    return sum(1 << CAP_BITS[name] for name in names)


def test_capabilities_and_uid_map_match_the_promised_protection(box: Sandbox) -> None:
    status = box.run(["cat", "/proc/self/status", "/proc/self/uid_map"]).output.decode()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    uid_map = status.splitlines()[-1].split()
    caps = {name: int(fields[name].strip(), 16) for name in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb")}
    protection = box.protection
    expected = _capability_mask(protection.capabilities)
    assert protection.capabilities == KEPT_CAPABILITIES
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapBnd"] == expected, {k: hex(v) for k, v in caps.items()}
    for name in MUST_BE_DROPPED:
        assert not caps["CapBnd"] & (1 << CAP_BITS[name]), name
    assert fields["NoNewPrivs"].strip() == "1"
    mapping = sandbox_id_mapping()
    if os.geteuid() != 0:  # bwrap's namespace sits in the keeper's, where the user is root
        assert protection.mode == "unprivileged-uid" and protection.host_uid == os.getuid() != 0
        assert uid_map[:3] == ["0", "0", "1"]
    elif mapping is not None:  # bwrap started as the mapped uid: its parent namespace is the host's
        assert protection.mode == "unprivileged-uid" and protection.host_uid == mapping.host_base != 0
        assert uid_map[:3] == ["0", str(mapping.host_base), "1"]
    else:
        assert protection.mode == "dropped-capabilities" and protection.host_uid == 0
        assert uid_map[:3] == ["0", "0", "1"]
    assert protection.proc_read_only and not protection.sys_mounted
    text = box.describe()
    assert text.startswith(protection.mode) and "read-only" in text and "sys_admin" not in text


def test_the_kept_capabilities_still_work(env: BashEnv) -> None:
    """What golds and agents rely on (Docker's defaults) survives the drop: chown, chmod, read-only files."""
    env.reset(0)
    obs, _, _, info = env.step(
        "mkdir -p /w && echo x > /w/f && chmod 444 /w/f && echo y >> /w/f && chown 0:0 /w/f && cat /w/f && ls /root"
    )
    assert info["action_executed"] and obs == "x\ny\n", obs


def test_the_cli_prints_the_protection_in_force(box: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    from stateflow.envs.bash.__main__ import main

    assert main(["--protection"]) == 0
    assert capsys.readouterr().out.strip() == box.describe()
