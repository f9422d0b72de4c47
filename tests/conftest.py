"""Test-suite wide fixtures and hooks.

``STATEFLOW_NO_SKIPS=1`` (set by ``.ci/run``) turns every unexpected skip into a failed session:
CI has every dependency installed, so a test that skips there is a test that silently stopped
running. Skips of tests carrying a marker in :data:`ALLOWED_SKIP_MARKERS`, or whose node id
starts with a key of :data:`ALLOWED_SKIP_TESTS`, are expected and only listed. Expected failures
(``xfail``) are not skips.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests check values, never speed: Hypothesis' default 200 ms deadline and its too-slow
# health check fail at random on a loaded machine (speed lives in scripts/bench_*.py).
settings.register_profile("stateflow", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("stateflow")


@pytest.fixture(scope="session")
def local_small_model() -> Path:
    """The cached file of the embedded 0.5B model; skips, naming the set-up script, when
    llama-cpp-python, its runtime or the model is absent."""
    from stateflow.backends.local import CATALOG, ModelStore, runtime_available

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed; run scripts/setup_local_llm.sh")
    missing = runtime_available()
    if missing:
        pytest.skip(f"llama-cpp-python runtime absent ({missing}); run scripts/setup_local_llm.sh")
    status = ModelStore().status(CATALOG["local-small"])
    if not status.present:
        pytest.skip("local-small model not in the cache; run scripts/setup_local_llm.sh")
    return Path(status.path)


# marker -> why a skip of such a test is expected in CI.
# Empty on purpose: scripts/setup.sh starts a Docker engine, so CI runs the docker tests too.
ALLOWED_SKIP_MARKERS: dict[str, str] = {}

# node id (or its prefix) -> why it cannot run in CI. Keep this short: every entry is a test
# that CI never runs.
ALLOWED_SKIP_TESTS = {
    "tests/envs/bash/test_upstream_scripts.py::test_script_built_fs_matches_tarball": (
        "needs upstream's set-up scripts from GitHub, which CI machines cannot reach"
    ),
    "tests/envs/bash/test_hardening.py::test_writing_a_host_tunable_fails_and_leaves_the_host_value"
    "[/proc/sys/kernel/sysrq-None]": ("/proc/sys/kernel/sysrq is absent on kernels built without CONFIG_MAGIC_SYSRQ"),
    "tests/envs/bash/test_docker.py::test_no_engine_is_a_clear_error": (
        "runs only where no Docker engine is reachable (where one is, the docker tests run)"
    ),
}


class _SkipGuard:
    """Collects every skip of the session; fails the session on unexpected ones."""

    def __init__(self) -> None:
        self.skips: list[tuple[str, str, str | None]] = []  # (node id, reason, allow-list key)

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        # A module skipped while being collected has no markers to consult: never allow-listed.
        keywords = getattr(report, "keywords", {})
        allowed = next((m for m in ALLOWED_SKIP_MARKERS if m in keywords), None) or next(
            (t for t in ALLOWED_SKIP_TESTS if report.nodeid.startswith(t)), None
        )
        self.skips.append((report.nodeid, str(reason), allowed))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)

    @property
    def unexpected(self) -> list[tuple[str, str, str | None]]:
        return [s for s in self.skips if s[2] is None]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.unexpected and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for nodeid, reason, key in self.skips:
            if key is not None:
                why = ALLOWED_SKIP_MARKERS.get(key) or ALLOWED_SKIP_TESTS[key]
                terminalreporter.write_line(f"allowed skip [{why}] {nodeid}: {reason}")
        if self.unexpected:
            terminalreporter.write_line(
                f"STATEFLOW_NO_SKIPS=1: {len(self.unexpected)} unexpected skip(s) fail the session:",
                red=True,
                bold=True,
            )
            for nodeid, reason, _ in self.unexpected:
                terminalreporter.write_line(f"  {nodeid}: {reason}", red=True)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("STATEFLOW_NO_SKIPS") == "1":
        config.pluginmanager.register(_SkipGuard(), "stateflow-skip-guard")
