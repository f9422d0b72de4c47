"""Task file-system layers: the read-only tree each task's sandbox sees on top of the base root.

A layer holds the task files (unpacked from ``nl2bash_fs_N.tar.gz``, copied from our demo tree,
or produced by running one of upstream's public set-up scripts), upstream's ``/.gitignore``,
and a git repository at ``/`` committed over the whole root exactly as upstream's image does
(``git init; git add -A; git commit``), then ``git clean -fd`` as upstream's per-task reset does
(see ``_GIT_INIT``), so ``git status --short`` in a sandbox reports the same
kind of paths as upstream's containers. The commit runs *inside* a build-mode sandbox whose
writable layer is the new layer directory, so git sees the real merged root.

Layers are cached on disk under ``~/.cache/stateflow/bash-fs/<root key>/<fs>-<content hash>``,
built in a staging directory and renamed into place (safe with concurrent builders). As root,
the unpacked files are shifted into the sandbox's id mapping before the build sandbox runs
(:mod:`stateflow.envs.bash.idmap`; the root key of a shifted base root names the mapping, so
shifted and unshifted layers never share a directory).
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.idmap import sandbox_id_mapping, shift_ownership
from stateflow.envs.bash.rootfs import BaseRoot, cache_home
from stateflow.envs.bash.sandbox import Sandbox, SandboxLimits

__all__ = ["GITIGNORE", "FsSource", "LayerStore"]

# Upstream's docker.gitignore: system directories are neither tracked nor reset by git.
GITIGNORE = (
    "# Folders\nbin\nboot\ndev\netc\nhome\nlib\nmedia\nopt\nproc\nroot\nrun\nsbin\nsrv\nsys\nusr\nvar\n\n"
    "# Files\n.dockerenv"
)
_GIT_INIT = (
    "cd / && git config --global user.email intercode@pnlp.org && git config --global user.name intercode"
    " && git init -q && git add -A && git commit -q -m 'initial commit'"
    # Upstream resets every task with `git reset --hard; git clean -fd`, which also deletes what
    # git cannot track: empty directories outside the ignored ones (/mnt, /tmp, empty task
    # dirs). Doing it once here makes the pristine layer equal to that result, so our reset
    # (drop the writable layer) leaves exactly the tree upstream's reset leaves.
    " && git clean -fdq"
)


class FsSource:
    """Where a task file system comes from: a tarball, a directory tree, a script, or nothing.

    Args:
        fs_id: identifier (``fs_1`` .. ``fs_4``, ``demo``).
        tarball: ``.tar.gz`` whose members are paths relative to ``/``.
        tree: directory copied to ``mount_at`` inside the root.
        mount_at: absolute target of ``tree`` (e.g. ``/demo``).
        script: shell script run as root inside the build sandbox (upstream's set-up scripts).
    """

    def __init__(
        self,
        fs_id: str,
        *,
        tarball: Path | None = None,
        tree: Path | None = None,
        mount_at: str | None = None,
        script: str | None = None,
    ) -> None:
        self.fs_id = fs_id
        self.tarball = tarball
        self.tree = tree
        self.mount_at = mount_at
        self.script = script

    def content_hash(self) -> str:
        """Hash of everything that determines the layer's content."""
        digest = hashlib.sha256(self.fs_id.encode())
        if self.tarball is not None:
            digest.update(self.tarball.read_bytes())
        if self.tree is not None:
            digest.update((self.mount_at or "").encode())
            for path in sorted(self.tree.rglob("*")):
                rel = path.relative_to(self.tree).as_posix()
                digest.update(f"\0{rel}\0{path.stat().st_mode:o}\0".encode())
                if path.is_file():
                    digest.update(path.read_bytes())
        if self.script is not None:
            digest.update(self.script.encode())
        digest.update(GITIGNORE.encode() + _GIT_INIT.encode())
        return digest.hexdigest()[:16]


def _check_member(member: tarfile.TarInfo) -> None:
    """Refuse members that could write outside the layer (absolute, ``..``, escaping links, devices).

    Written out rather than ``tarfile.data_filter`` because that filter also strips group/other
    write bits (fs_3 has a mode-777 file the tasks look for) and needs Python >= 3.11.4.
    """
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts:
        raise EnvironmentError_(f"unsafe path in task archive: {member.name!r}")
    if member.isdev() or member.isfifo():
        raise EnvironmentError_(f"device or fifo in task archive: {member.name!r}")
    if member.issym() or member.islnk():
        target = PurePosixPath(member.linkname)
        base = name.parent if member.issym() else PurePosixPath()
        depth = 0
        for part in (base / target).parts:
            depth += -1 if part == ".." else 0 if part in (".", "") else 1
            if depth < 0:
                break
        if target.is_absolute() or depth < 0:
            raise EnvironmentError_(f"link leaving the file system in task archive: {member.name!r} -> {target}")


class LayerStore:
    """Builds and caches task file-system layers for one base root. Safe to share between threads."""

    def __init__(self, base: BaseRoot, cache_dir: Path | None = None) -> None:
        self.base = base
        self.dir = (cache_dir or cache_home() / "bash-fs") / base.key

    def layer(self, source: FsSource) -> Path:
        """Return the layer directory for ``source``, building it on first use."""
        final = self.dir / f"{source.fs_id}-{source.content_hash()}"
        if (final / "ready").exists():
            return final / "layer"
        self.dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{source.fs_id}-", dir=self.dir))
        try:
            layer = staging / "layer"
            layer.mkdir()
            self._populate(layer, source)
            (layer / ".gitignore").write_text(GITIGNORE)
            mapping = sandbox_id_mapping()
            if mapping is not None:  # sandbox root is an unprivileged host uid: the layer must be its
                shift_ownership(layer, mapping)
            build = Sandbox([self.base.path], upper=layer, limits=SandboxLimits(timeout_s=120))
            try:
                if source.script is not None:
                    self._run(build, ["/bin/bash", "-c", source.script], source, "set-up script", strict=False)
                self._run(build, ["/bin/sh", "-c", _GIT_INIT], source, "git commit", strict=True)
            finally:
                build.close()
            shutil.rmtree(staging / "layer.work", ignore_errors=True)
            (staging / "ready").write_text(source.fs_id + "\n")
            try:
                staging.rename(final)
            except OSError:  # a concurrent builder won: use theirs
                shutil.rmtree(staging, ignore_errors=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return final / "layer"

    @staticmethod
    def _run(box: Sandbox, argv: list[str], source: FsSource, what: str, *, strict: bool) -> None:
        result = box.run(argv)
        # Upstream's scripts have lines that fail silently; only our own git step must succeed.
        if strict and result.exit_code != 0:
            raise EnvironmentError_(
                f"building file system {source.fs_id}: {what} failed (exit {result.exit_code}): "
                + result.output.decode(errors="replace")[-1000:]
            )

    @staticmethod
    def _populate(layer: Path, source: FsSource) -> None:
        if source.tarball is not None:
            try:
                with tarfile.open(source.tarball, "r:gz") as tar:
                    members = tar.getmembers()
                    for member in members:
                        _check_member(member)
                    # Modes and mtimes are kept as stored; checked above, so no filter is needed.
                    if hasattr(tarfile, "fully_trusted_filter"):
                        tar.extractall(layer, members, numeric_owner=True, filter="fully_trusted")
                    else:
                        tar.extractall(layer, members, numeric_owner=True)
            except (tarfile.TarError, OSError) as err:
                raise EnvironmentError_(f"cannot unpack {source.tarball}: {err}") from err
        if source.tree is not None:
            if not source.mount_at or not source.mount_at.startswith("/"):
                raise EnvironmentError_(f"file system {source.fs_id}: mount_at must be an absolute path")
            target = layer / source.mount_at.lstrip("/")
            shutil.copytree(source.tree, target, symlinks=True)
