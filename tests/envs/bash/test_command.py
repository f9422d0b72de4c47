"""Upstream's command construction: shlex quirk, exact quoting, cd emulation, decoding."""

from __future__ import annotations

import pytest
from stateflow.envs.bash.command import action_argv, cd_target, decode_output, hash_argv, simplify_path


def test_compat_quoting_resplits_inner_double_quotes() -> None:
    # upstream: shlex.split('/bin/bash -c "echo "a  b""') -> bash runs `echo a` with $0 = b
    assert action_argv('echo "a  b"') == ["/bin/bash", "-c", "echo a", "b"]


def test_compat_quoting_keeps_single_quotes_inside() -> None:
    assert action_argv("  awk '{print $1}' f  ") == ["/bin/bash", "-c", "awk '{print $1}' f"]


def test_exact_quoting_passes_action_verbatim() -> None:
    assert action_argv("echo \"a  b\" 'c'", exact_quoting=True) == ["/bin/bash", "-c", "echo \"a  b\" 'c'"]


@pytest.mark.parametrize("action", ['echo "unbalanced', 'echo "x" "y'])
def test_unbalanced_quotes_are_malformed_in_compat_mode(action: str) -> None:
    with pytest.raises(ValueError):
        action_argv(action)


def test_lone_single_quote_reaches_bash_in_compat_mode() -> None:
    # inside the wrapper's double quotes a single quote is literal: bash, not shlex, rejects it
    assert action_argv("echo 'x") == ["/bin/bash", "-c", "echo 'x"]


def test_nul_byte_is_rejected_in_both_modes() -> None:
    for exact in (False, True):
        with pytest.raises(ValueError):
            action_argv("echo a\0b", exact_quoting=exact)


def test_hash_argv_md5sum_for_dotted_names_md5deep_otherwise() -> None:
    assert hash_argv("testbed/a.txt") == ["md5sum", "testbed/a.txt"]
    assert hash_argv("testbed/dir/") == ["md5deep", "-r", "testbed/dir/"]
    with pytest.raises(ValueError):
        hash_argv('"system/folder2/special')


@pytest.mark.parametrize(
    ("current", "arg", "expected"),
    [
        ("/", "testbed", "/testbed"),
        ("/testbed", "dir1/../dir2/./sub", "/testbed/dir2/sub"),
        ("/testbed", "/workspace", "/workspace"),
        ("/a/b", "../../..", "/"),
        ("/a", "", "/a"),
        ("/a", "b//c/", "/a/b/c"),
    ],
)
def test_simplify_path_is_lexical(current: str, arg: str, expected: str) -> None:
    assert simplify_path(current, arg) == expected


def test_cd_target_takes_text_after_first_cd_space() -> None:
    assert cd_target("cd /testbed/dir1 ") == "/testbed/dir1"
    assert cd_target("cd dir && ls") == "dir && ls"
    assert cd_target("ls; cd x") is None  # not starting with cd: runs normally
    assert cd_target("cd") is None  # upstream crashes here; we run it as a plain command
    assert cd_target("cdx; cd y") == "y"


def test_decode_output() -> None:
    assert decode_output("é\n".encode()) == "é\n"
    assert decode_output(b"\xff\xfe") is None
    cut = "aé".encode()[:-1]  # a character cut by truncation is dropped, not malformed
    assert decode_output(cut, truncated=True) == "a"
    assert decode_output(cut) is None
