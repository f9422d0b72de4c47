"""Task archives are unpacked only when every member stays inside the layer."""

from __future__ import annotations

import tarfile

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.layers import _check_member


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(
    "member",
    [_member("./testbed/a.txt"), _member("a/l", tarfile.SYMTYPE, "../b"), _member("x/h", tarfile.LNKTYPE, "x/a")],
)
def test_safe_members_pass(member: tarfile.TarInfo) -> None:
    _check_member(member)


@pytest.mark.parametrize(
    ("member", "match"),
    [
        (_member("a/../../x"), "unsafe path"),
        (_member("/etc/passwd"), "unsafe path"),
        (_member("a/l", tarfile.SYMTYPE, "../../b"), "link leaving"),
        (_member("l", tarfile.SYMTYPE, "/etc"), "link leaving"),
        (_member("h", tarfile.LNKTYPE, "../x"), "link leaving"),
        (_member("dev", tarfile.CHRTYPE), "device"),
    ],
)
def test_unsafe_members_are_refused(member: tarfile.TarInfo, match: str) -> None:
    with pytest.raises(EnvironmentError_, match=match):
        _check_member(member)
