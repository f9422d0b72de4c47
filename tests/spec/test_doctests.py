"""The docstring examples of the spec package run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "stateflow.spec.automaton",
    "stateflow.spec.concurrent",
    "stateflow.spec.grammar",
    "stateflow.spec.monitor",
    "stateflow.spec.parser",
    "stateflow.spec.render",
    "stateflow.spec.segment",
    "stateflow.spec.unenforced",
    "stateflow.spec.verify",
    "stateflow.spec.replay",
    "stateflow.spec.records",
    "stateflow.spec.observer",
    "stateflow.cli.verify",
    "stateflow.scoring",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
