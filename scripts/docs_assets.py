"""Third-party files the documentation site serves itself instead of loading them from a CDN.

Material's offline plugin makes search work from ``file://`` with ``iframe-worker``'s shim (MIT,
by Material's author), which it would load from unpkg.com at every page view. The site must
need no network, so ``scripts/setup_docs.sh`` fetches the pinned npm package once from the npm
registry (checking its sha512), keeps the shim in StateFlow's cache, and the site's build
(``scripts/docs_hooks.py``) ships that copy with the site. Nothing is fetched at build time.

``python scripts/docs_assets.py`` fetches it (idempotent); ``--check`` only reports.
"""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["IFRAME_WORKER", "NpmFile", "fetch"]


@dataclass(frozen=True)
class NpmFile:
    """One file of a pinned npm package.

    Attributes:
        package: the npm package name.
        version: its exact version.
        integrity: the registry's ``dist.integrity`` of the tarball (``sha512-<base64>``).
        member: the file inside the tarball.
        registry: the npm registry's base URL.
    """

    package: str
    version: str
    integrity: str
    member: str
    registry: str = "https://registry.npmjs.org"

    @property
    def url(self) -> str:
        return f"{self.registry}/{self.package}/-/{self.package}-{self.version}.tgz"

    def path(self) -> Path:
        """Where the file is kept (StateFlow's cache directory)."""
        from stateflow.paths import cache_dir

        name = self.member.rsplit("/", 1)[-1]
        return cache_dir() / "docs" / f"{self.package}-{self.version}" / name


IFRAME_WORKER = NpmFile(
    "iframe-worker",
    "1.0.4",
    "sha512-roeaaI+Lg1LJNfgpCjoRe/+WzEjy9+Z08LoEvu85MCPbBjwm+qXz8Ag5U05lHa6V1CysZyGzE0SOkAtSUA5q7Q==",
    "package/shim/index.js",
)


def fetch(item: NpmFile = IFRAME_WORKER, *, timeout: float = 60.0) -> Path:
    """Download ``item``'s tarball, check its integrity, keep ``item.member``; returns its path.

    Raises:
        ValueError: the tarball's sha512 is not the pinned one, or it lacks the member.
    """
    target = item.path()
    if target.is_file():
        return target
    with urllib.request.urlopen(item.url, timeout=timeout) as response:
        data = response.read()
    algorithm, _, expected = item.integrity.partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if actual != expected:
        raise ValueError(f"{item.url}: {algorithm} {actual} is not the pinned {expected}; nothing was kept")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = tar.extractfile(item.member)
        if member is None:
            raise ValueError(f"{item.url}: no {item.member} in the tarball")
        content = member.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(content)
    tmp.replace(target)
    return target


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        present = IFRAME_WORKER.path().is_file()
        print(f"{IFRAME_WORKER.path()}: {'present' if present else 'absent'}")
        raise SystemExit(0 if present else 1)
    print(fetch())
