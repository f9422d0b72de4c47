"""What a report needs of each method's flow, stored in the run directory (``OUT/flows.json``).

The runner writes one :class:`FlowCard` per method it runs: the flow's name, fingerprint,
description and its graph (DOT and Mermaid text). ``stateflow report`` draws graphs from these
cards, so it never imports a user's module again: a report made from another directory, after
the user edited or deleted ``myflow.py``, still draws the flow that produced the records.

Cards are keyed by benchmark, method and flow fingerprint, so a directory holding records of an
older definition of a method (``--mix-settings``) keeps that definition's graph too. A file that
is not a cards file is an error naming it; nothing is rewritten then.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from stateflow.tasks.harness.identity import flow_fingerprint

from stateflow import Flow
from stateflow.errors import ConfigError
from stateflow.graph import to_dot, to_mermaid

__all__ = ["FLOW_CARDS_NAME", "FlowCard", "card_for", "load_cards", "save_cards"]

FLOW_CARDS_NAME = "flows.json"
_VERSION = 1


@dataclass(frozen=True)
class FlowCard:
    """One method's flow as a report shows it.

    Attributes:
        benchmark: the benchmark's name.
        method: the method name as run (a preset, a recipe or ``module:attribute``).
        flow: the flow's name.
        flow_sha256: its fingerprint (as in the records' identity).
        description: the flow's description.
        dot: the graph in Graphviz DOT.
        mermaid: the graph in Mermaid.
    """

    benchmark: str
    method: str
    flow: str
    flow_sha256: str
    description: str
    dot: str
    mermaid: str


def card_for(benchmark: str, method: str, flow: Flow) -> FlowCard:
    """The card of ``flow`` run as ``method`` on ``benchmark``."""
    return FlowCard(
        benchmark, method, flow.name, flow_fingerprint(flow), flow.description or "", to_dot(flow), to_mermaid(flow)
    )


def load_cards(out: Path) -> list[FlowCard]:
    """The cards stored in the run directory ``out`` (none when it has no cards file).

    Raises:
        ConfigError: the file is not a cards file (names the file and what is wrong).
    """
    path = out / FLOW_CARDS_NAME
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("cards"), list):
            raise ValueError(f"expected {{'version': {_VERSION}, 'cards': [...]}}")
        return [FlowCard(**card) for card in data["cards"]]
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{path}: not a flow cards file ({err}); move it away to write new cards") from err


def save_cards(out: Path, cards: Iterable[FlowCard]) -> Path:
    """Add ``cards`` to ``out``'s cards file (a card with the same benchmark, method and
    fingerprint is replaced), written atomically.

    Raises:
        ConfigError: the existing file is not a cards file (it is left as it is).
    """
    kept = {(c.benchmark, c.method, c.flow_sha256): c for c in load_cards(out)}
    kept.update({(c.benchmark, c.method, c.flow_sha256): c for c in cards})
    path = out / FLOW_CARDS_NAME
    body = json.dumps({"version": _VERSION, "cards": [asdict(c) for c in kept.values()]}, indent=1)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".flows-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(body)
    os.replace(tmp, path)
    return path
