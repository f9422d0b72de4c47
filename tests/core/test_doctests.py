"""The docstring examples of the flow model and the blackboard run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "stateflow.flow",
    "stateflow.blackboard",
    "stateflow.conditions",
    "stateflow.checkpoint.record",
    "stateflow.checkpoint.memory",
    "stateflow.checkpoint.sqlite",
    "stateflow.checkpoint.delta",
    "stateflow.checkpoint.payload_text",
    "stateflow.errors",
    "stateflow.subflow",
    "stateflow.parallel",
    "stateflow.structured",
    "stateflow.episode.pool",
    "stateflow.live",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
