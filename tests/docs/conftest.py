"""Docs tests that run a page against the database use the runner tests' environment check."""

from tests.tasks.conftest import sql_available

__all__ = ["sql_available"]
