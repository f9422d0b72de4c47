"""Hostile actions: afterwards the host and the base are intact and the next task is unaffected."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from stateflow.envs.bash import BashEnv, open_bash_env

from .conftest import FAST, leftovers, needs_sandbox

pytestmark = needs_sandbox


def _tree_digest(root: Path, limit: int = 4000) -> str:
    """Names, sizes and mtimes of the first ``limit`` entries under ``root`` (sorted walk)."""
    digest = hashlib.sha256()
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            st = os.lstat(os.path.join(dirpath, name))
            digest.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
            count += 1
            if count >= limit:
                return digest.hexdigest()
    return digest.hexdigest()


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[BashEnv, dict[str, str]]]:
    from stateflow.envs.bash.rootfs import locate_base_root

    base = locate_base_root().path
    env = open_bash_env("demo", limits=FAST)
    env.reset(0)  # builds the demo layer
    layer = env._agent._box._lowers[0]  # the demo file-system layer the sandbox sees
    marker = Path(f"/tmp/sf-host-marker-{os.getpid()}")
    marker.write_text("host\n")
    before = {"base": _tree_digest(base), "layer": _tree_digest(layer), "marker": marker.read_text()}
    yield env, before
    try:
        assert _tree_digest(base) == before["base"], "the base root changed"
        assert _tree_digest(layer) == before["layer"], "the task layer changed"
        assert marker.read_text() == before["marker"], "a host file changed"
    finally:
        marker.unlink()
        env.close()


def _next_task_is_clean(env: BashEnv) -> None:
    """A fresh episode sees the pristine tree and still scores a gold answer 1."""
    env.reset(13)  # "find /demo -type d | wc -l"
    env.step(env.task(13).gold)
    assert env.step("submit")[1] == 1.0
    env.reset(0)


def _run(env: BashEnv, action: str) -> tuple[str, dict]:
    env.reset(0)
    obs, _, _, info = env.step(action)
    return obs, info


def test_rm_rf_root(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    _run(env, "rm -rf --no-preserve-root / 2>/dev/null; ls /")
    obs, _, _, info = env.step("ls /demo")  # inside the episode even the shell is gone...
    assert not info["action_executed"] and "No such file" in obs
    _next_task_is_clean(env)  # ...and back for the next one


def test_fork_bomb_is_capped_and_cleaned_up(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    _, info = _run(env, ":(){ :|:& };:")
    assert not info["action_executed"]
    assert env.step("echo still here")[0] == "still here\n"
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork
    # keepers and spawners belong to the open environments; nothing else may run
    running = [p for p in leftovers()["processes"] if "sf-bash-keeper" not in p and "sf-bash-spawner" not in p]
    assert not running
    box = env._agent._box
    if box._cgroup is not None:  # root: between steps the sandbox's cgroup holds only its spawner
        for group in box._cgroup.groups:
            assert (group / "cgroup.procs").read_text().split() == [str(box._spawner.proc.pid)]
    _next_task_is_clean(env)


def test_yes_into_a_file_stops_at_the_file_size_limit(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    obs, info = _run(env, "yes > /root/yes.txt; stat -c %s /root/yes.txt")
    assert not info["action_executed"] or "File size limit" in obs
    assert int(env.step("stat -c %s /root/yes.txt")[0]) <= FAST.file_size_bytes
    _next_task_is_clean(env)


def test_writing_a_gigabyte_hits_the_disk_cap(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    obs, _ = _run(
        env, "mkdir /fill; for i in $(seq 11); do head -c 95M /dev/zero > /fill/f$i || break; done; du -sm /fill"
    )
    used_mb = int(obs.split()[-2])
    assert "No space left on device" in obs and used_mb <= FAST.disk_bytes // 2**20
    _next_task_is_clean(env)


def test_memory_hog_is_stopped(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    obs, info = _run(env, "python3 -c 'x = bytearray(3 * 1024**3); print(len(x))'")
    assert not info["action_executed"] and "3221225472" not in obs
    _next_task_is_clean(env)


@pytest.mark.parametrize(
    "action",
    [
        "curl -sS -m 3 http://example.com",
        "curl -sS -m 3 http://1.1.1.1",
        "ping -c 1 -W 1 8.8.8.8",
        "getent hosts deb.debian.org",
        "dig +time=1 +tries=1 example.com",
    ],
)
def test_no_network(hostile: tuple[BashEnv, dict], action: str) -> None:
    env, _ = hostile
    obs, info = _run(env, action)
    assert not info["action_executed"], obs


def test_only_loopback_interface(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    obs, _ = _run(env, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert obs == "lo\n"


def test_host_files_are_not_visible(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    here = Path(__file__).resolve()
    for path in (str(here), f"/tmp/sf-host-marker-{os.getpid()}", "/work", str(Path.home() / ".cache")):
        obs, info = _run(env, f"ls {path}")
        assert not info["action_executed"] and "No such file" in obs, (path, obs)
    assert _run(env, "cat /etc/hostname")[0] == "sandbox\n"
    assert _run(env, "id -u; ls /home")[0] == "0\n"


def test_background_daemons_do_not_outlive_the_step(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    obs, info = _run(
        env, "nohup sleep 4711 >/dev/null 2>&1 & setsid sleep 4712 >/dev/null 2>&1 < /dev/null & echo started"
    )
    assert obs == "started\n" and info["action_executed"]
    host_ps = subprocess.run(["pgrep", "-f", "sleep 471[12]"], capture_output=True, text=True).stdout
    assert host_ps == ""
    assert "sleep" not in env.step("ps -eo comm")[0]
    # a job that keeps the output open is killed at the timeout
    assert env.step("sleep 4713 & echo bg")[0] == "Command timed out"
    assert subprocess.run(["pgrep", "-f", "sleep 4713"], capture_output=True).stdout == b""


def test_binary_output(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    obs, info = _run(env, "head -c 4096 /dev/urandom")
    assert obs == "Malformed command" and not info["action_executed"]
    assert _run(env, "printf 'a\\0b'")[0] == "a\x00b"  # NUL is valid UTF-8


def test_ten_megabytes_of_output_are_capped(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    obs, info = _run(env, "head -c 10000000 /dev/zero | tr '\\0' a")
    assert info["action_executed"] and obs == "a" * FAST.output_bytes


def test_kill_everything(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    _run(env, "kill -9 -1")
    assert env.step("echo ok")[0] == "ok\n"
    _next_task_is_clean(env)
