"""The README's "best-flow" section, written from the one place that names the best SQL preset.

:data:`~stateflow.tasks.sql.benchmark.BEST_SQL_SUFFIX` says which preset is best and why; the
demo runs it, and this module writes the README sentence about it between the ``best-flow``
markers, so the two cannot disagree (tests/tasks/test_best_flow.py). After changing the best
preset, rewrite the section with ``python -m stateflow.tasks.reports.best_flow README.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from stateflow.tasks.reports.doc_sections import SectionMarkers, write_section
from stateflow.tasks.sql.benchmark import BEST_SQL_SUFFIX

__all__ = ["BEST_FLOW_MARKERS", "best_flow_section", "main"]

BEST_FLOW_MARKERS = SectionMarkers("best-flow")


def best_flow_section(suffix: str = BEST_SQL_SUFFIX) -> str:
    """The README's sentence on the demo's SQL flow, for the best preset ``suffix``."""
    return (
        f"With a local model the demo runs the best SQL preset, `stateflow{suffix}` / `sf_agent{suffix}`\n"
        "(chosen by measured quality and time per task in `tasks/sql/benchmark.py`, `BEST_SQL_SUFFIX`;\n"
        "`stateflow demo --flow paper` or `--flow schema` to compare)."
    )


def main(argv: list[str] | None = None) -> int:
    """Rewrite the section in each document named on the command line (default: README.md)."""
    for name in (argv if argv is not None else sys.argv[1:]) or ["README.md"]:
        write_section(Path(name), BEST_FLOW_MARKERS, best_flow_section())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
