"""Sandbox root is an unprivileged host uid, checked from the host (issue 13).

As root, sandbox uid 0 used to be host uid 0 (only capabilities were dropped), so a kernel or
sandbox escape would have landed as host root. Now every sandboxed process runs as the mapped
uid of :mod:`stateflow.envs.bash.idmap` (non-root runs: the invoking user). These tests look
at the sandboxed processes and files from outside: ``/proc/<pid>/status`` of a running command,
and the owner of files in the writable layer.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.idmap import IdMapping, MappingChoice, check_range_free, sandbox_id_mapping, shift_ownership
from stateflow.envs.bash.rootfs import locate_base_root
from stateflow.envs.bash.sandbox import Sandbox

from .conftest import FAST, needs_sandbox

pytestmark = needs_sandbox


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox([locate_base_root().path], limits=FAST) as sandbox:
        yield sandbox


def _host_ids_of(marker: str) -> list[dict[str, list[int]]]:
    """Uid/Gid lines of ``/proc/<pid>/status`` for every host process whose argv holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue  # exited meanwhile
        if marker.encode() in argv:
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            found.append({key: [int(v) for v in fields[key].split()] for key in ("Uid", "Gid")})
    return found


def test_the_sandboxed_process_is_not_host_root_seen_from_the_host(box: Sandbox) -> None:
    marker = "4.3217"  # a unique sleep length names the process in the host's /proc
    runner = threading.Thread(target=box.run, args=(["sleep", marker],), kwargs={"timeout": 3.0})
    runner.start()
    try:
        deadline = time.monotonic() + 3.0
        seen: list[dict[str, list[int]]] = []
        while not seen and time.monotonic() < deadline:
            seen = _host_ids_of(marker)
            time.sleep(0.02)
    finally:
        runner.join()
    assert seen, "the sandboxed sleep never appeared in the host's /proc"
    expected = box.protection.host_uid
    for ids in seen:
        # real, effective, saved and filesystem ids alike: nothing of host root is left
        assert ids["Uid"] == [expected] * 4 and ids["Gid"] == [expected] * 4, ids
    assert f"sandbox root = host uid {expected}:" in box.describe()  # what --protection prints
    if os.geteuid() == 0 and sandbox_id_mapping() is not None:
        assert expected != 0 and box.protection.mode == "unprivileged-uid"
        assert "mapped ids 1879048192..1879113727" in box.describe()


def test_files_the_agent_writes_belong_to_the_unprivileged_uid_on_the_host(box: Sandbox) -> None:
    box.reset()
    result = box.run(["/bin/sh", "-c", "echo new > /etc/sf-new && echo x >> /etc/hostname && mkdir /srv/d && id -u"])
    assert result.exit_code == 0 and result.output == b"0\n", result.output  # root inside
    upper = box.writable_layer()
    expected = box.protection.host_uid
    for rel in ("etc/sf-new", "etc/hostname", "srv/d", "etc", "."):  # created, copied up, and dirs
        st = (upper / rel).lstat()
        assert (st.st_uid, st.st_gid) == (expected, expected), (rel, st.st_uid, st.st_gid)
    assert (upper / "etc/sf-new").read_text() == "new\n"
    if os.geteuid() == 0 and sandbox_id_mapping() is not None:
        assert expected != 0


def test_root_only_work_still_works_inside(box: Sandbox) -> None:
    """What a task may do as root: write /etc, chown/chmod to root, setuid bits, package tools."""
    box.reset()
    script = (
        "echo 'sf:x:0:0::/root:/bin/sh' >> /etc/passwd && tail -1 /etc/passwd"
        " && touch /usr/local/bin/t && chown root:root /usr/local/bin/t && chmod 4755 /usr/local/bin/t"
        " && stat -c '%U %G %a' /usr/local/bin/t /etc/shadow"
        " && cat /etc/shadow >/dev/null && echo shadow-readable"
        " && dpkg -s coreutils | head -1 && ls -ld /root | cut -c1-10"
    )
    result = box.run(["/bin/sh", "-c", script])
    assert result.exit_code == 0, result.output
    assert result.output.decode().splitlines() == [
        "sf:x:0:0::/root:/bin/sh",
        "root root 4755",
        # bwrap's namespace maps one id (0), in every mode: gid 42 (shadow) shows as nogroup
        "root nogroup 640",
        "shadow-readable",
        "Package: coreutils",
        "drwx------",
    ]


def test_base_root_and_layers_are_owned_by_the_mapping() -> None:
    mapping = sandbox_id_mapping()
    if mapping is None:
        pytest.skip("no id mapping here (non-root run, or user namespaces unavailable to the mapped uid)")
    root = locate_base_root().path
    for rel in ("", "etc/passwd", "usr/bin/passwd", "etc/shadow"):
        st = (root / rel).lstat()
        assert mapping.host_base <= st.st_uid < mapping.host_base + mapping.count, rel
    assert (root / "usr/bin/passwd").stat().st_mode & stat.S_ISUID  # chown cleared it; shifting restores it
    assert (root / "etc/shadow").stat().st_gid == mapping.host_id(42)


def test_an_unshifted_layer_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    if sandbox_id_mapping() is None:
        pytest.skip("no id mapping here: any layer the user owns is fine")
    (tmp_path / "bin").mkdir()
    with pytest.raises(EnvironmentError_, match="not by the sandbox's mapped root"):
        Sandbox([tmp_path, locate_base_root().path])


def test_shift_ownership_shifts_once_keeps_setid_bits_and_refuses_foreign_ids(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to other ids needs root")
    mapping = IdMapping(3_000_000, 1000)
    tree = tmp_path / "t"
    (tree / "d").mkdir(parents=True)
    (tree / "f").write_text("x")
    os.link(tree / "f", tree / "d" / "hard")  # one inode reached twice: shifted once
    os.chown(tree / "f", 5, 7)
    os.chmod(tree / "f", 0o6755)
    os.symlink("f", tree / "l")
    assert shift_ownership(tree, mapping) == 4  # t, d, f (= d/hard), l
    st = (tree / "d" / "hard").lstat()
    assert (st.st_uid, st.st_gid) == (3_000_005, 3_000_007)
    assert stat.S_IMODE(st.st_mode) == 0o6755
    assert (tree / "l").lstat().st_uid == 3_000_000
    assert (tree / "d").stat().st_uid == 3_000_000
    with pytest.raises(EnvironmentError_, match="outside the sandbox's id range"):
        shift_ownership(tree, mapping)  # already shifted: ids are now foreign


def test_a_mapping_overlapping_an_account_or_subordinate_range_is_refused(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (tmp_path / "subuid").write_text("alice:100000:65536\n")
    check_range_free(IdMapping(200_000, 65_536), tmp_path)  # free: no error
    with pytest.raises(EnvironmentError_, match=r"'alice' owns ids 100000\.\.165535"):
        check_range_free(IdMapping(150_000, 65_536), tmp_path)
    (tmp_path / "passwd").write_text("svc:x:250000:250000::/:/bin/sh\n")
    with pytest.raises(EnvironmentError_, match=r"'svc' owns ids 250000\.\.250000"):
        check_range_free(IdMapping(200_000, 65_536), tmp_path)


def test_without_a_mapping_root_runs_fall_back_to_dropped_capabilities_and_say_why() -> None:
    """The fallback (the mapped uid cannot create user namespaces): host uid 0, reduced capabilities."""
    if os.geteuid() != 0:
        pytest.skip("the fallback exists for root runs only")
    from stateflow.envs.bash.rootfs import build_base_root

    reason = "host root: uid 1879048192 cannot create a user namespace (simulated)"
    # build_base_root() returns the cached, unshifted original (what the fallback runs on)
    with Sandbox([build_base_root(quiet=True).path], limits=FAST, ids=MappingChoice(None, reason)) as fallback:
        assert fallback.protection.mode == "dropped-capabilities" and fallback.protection.host_uid == 0
        assert reason in fallback.describe()
        out = fallback.run(["/bin/sh", "-c", "cat /proc/self/uid_map; stat -c %U /etc/passwd"]).output.split()
        assert out[:3] == [b"0", b"0", b"1"] and out[3] == b"root"
