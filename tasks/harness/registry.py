"""The benchmark registry: every benchmark ``stateflow run`` knows, by name.

The built-in benchmarks (:data:`BUILTIN_BENCHMARKS`: one record in each benchmark package) come
first, then any declared by installed packages under the ``stateflow.benchmarks`` entry-point
group (each entry point names a :class:`~stateflow.tasks.kit.benchmark.Benchmark`), so a
benchmark can live in its own package. A registry is immutable: a program or a test adds a
benchmark with :meth:`BenchmarkRegistry.with_benchmark` (or passes the :class:`Benchmark` object
itself to the runner), with no global state to reset.

Example:
    >>> registry = default_registry()
    >>> registry.get("intercode-sql").domain
    'sql'
    >>> "intercode-bash" in registry.names()
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points

from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.kit.benchmark import Benchmark
from stateflow.tasks.pdoctor.benchmark import PDOCTOR
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow.errors import ConfigError

__all__ = ["BUILTIN_BENCHMARKS", "ENTRY_POINT_GROUP", "BenchmarkRegistry", "default_registry"]

ENTRY_POINT_GROUP = "stateflow.benchmarks"

#: the benchmarks that ship with StateFlow, in listing order
BUILTIN_BENCHMARKS: tuple[Benchmark, ...] = (INTERCODE_SQL, INTERCODE_BASH, PDOCTOR)


@dataclass(frozen=True)
class BenchmarkRegistry:
    """Benchmarks by name, in registration order.

    Raises:
        ConfigError: (at construction) two benchmarks share a name.
    """

    benchmarks: tuple[Benchmark, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for b in self.benchmarks:
            if b.name in seen:
                raise ConfigError(f"benchmark {b.name!r} is registered twice; names must be unique")
            seen.add(b.name)

    def __iter__(self) -> Iterator[Benchmark]:
        return iter(self.benchmarks)

    def __contains__(self, name: object) -> bool:
        return any(b.name == name for b in self.benchmarks)

    def names(self) -> tuple[str, ...]:
        """Every benchmark name, in order."""
        return tuple(b.name for b in self.benchmarks)

    def get(self, name: str) -> Benchmark:
        """The benchmark called ``name``.

        Raises:
            ValueError: no such benchmark; the message lists the registered ones.
        """
        for b in self.benchmarks:
            if b.name == name:
                return b
        raise ValueError(f"unknown benchmark {name!r}; choose {', '.join(self.names())}")

    def with_benchmark(self, benchmark: Benchmark) -> BenchmarkRegistry:
        """A new registry with ``benchmark`` added at the end (``self`` is unchanged)."""
        return BenchmarkRegistry((*self.benchmarks, benchmark))


def default_registry() -> BenchmarkRegistry:
    """The built-in benchmarks followed by those of installed ``stateflow.benchmarks`` entry points.

    Raises:
        ConfigError: an entry point that does not name a :class:`Benchmark`, or a duplicate name.
    """
    extra: list[Benchmark] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        obj = ep.load()
        if not isinstance(obj, Benchmark):
            raise ConfigError(
                f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) names a "
                f"{type(obj).__name__}, not a stateflow.tasks.kit.benchmark.Benchmark"
            )
        extra.append(obj)
    return BenchmarkRegistry((*BUILTIN_BENCHMARKS, *extra))
