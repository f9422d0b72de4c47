"""Identities that must not drift: every built-in method's, and every archived record's.

A record in ``docs/data/`` is found again (by resume, ``--no-run`` reports, ``compare``) only
while today's code gives its method the identity it was recorded under. These tests fail on
any change that would orphan a record: an edited tool, prompt or rule, a moved function
without its :func:`~stateflow.stable_id.stable_id`, a new prompt file in a benchmark's folder.
A deliberate change is made by re-running the affected records and rewriting the golden file
(``python scripts/golden_identities.py --write``), never by editing these tests.
"""

from __future__ import annotations

import json
import re
import types
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from stateflow.tasks.harness.episode import ORACLE_PROFILE
from stateflow.tasks.harness.identity import (
    EpisodeIdentity,
    callables_without_stable_id,
    flow_fingerprint,
    models_fingerprint,
    prompts_fingerprint,
)
from stateflow.tasks.harness.registry import BUILTIN_BENCHMARKS
from stateflow.tasks.optimize.rewrite import resolve_recorded

from stateflow import Flow, ModelAssignment, ModelProfile, State, Tool, Transition
from stateflow.errors import ConfigError
from stateflow.profiles import load_config
from stateflow.stable_id import has_stable_id, id_of, stable_id
from tests.scripts import load_script

ARCHIVE = Path(__file__).resolve().parents[2] / "docs" / "data"
BENCHMARKS = {b.name: b for b in BUILTIN_BENCHMARKS}

# Records of a method whose definition changed after they were recorded: kept for the history
# they document (docs/results.md cites them), found by their digest, never by today's method.
# (method, flow_sha256) -> why
SUPERSEDED = {
    ("oneshot_direct", "953d13f2a71c33f578a3799e57c321ed06e7afb84704fe7fe67ff9dbf0038f3e"): (
        "recorded before 21533fe bounded the one-shot answer grammar at ']' (re-identified oneshot_direct)"
    ),
}

# The one archive run with a --config file (local-repeat_penalty_1.jsonl), as it was given: the
# profile read from TOML hashes the same as it did then.
_PENALTY_CONFIG = "[profiles.local]\nextra_body = { repeat_penalty = 1.0 }\n"


@cache
def _golden() -> Any:
    return load_script("golden_identities")


def _archived_identities() -> dict[str, tuple[dict[str, Any], str]]:
    """Each distinct archived identity (by digest) with the file it was first found in."""
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for path in sorted(ARCHIVE.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            identity = record.get("identity")
            if identity is not None:  # the vote-candidate dumps are analysis files, not records
                found.setdefault(record["identity_digest"], (identity, str(path.relative_to(ARCHIVE))))
    return found


ARCHIVED = _archived_identities()


def _models_for(label: str, archive_file: str, tmp_path: Path) -> ModelAssignment | ModelProfile:
    if label == "oracle":  # the gold replays (docs/data/gold): the oracle's own profile
        return ORACLE_PROFILE
    by_state = dict(part.split("=", 1) for part in label.split(","))
    if "repeat_penalty_1" not in archive_file:
        return ModelAssignment.of(by_state)
    config = tmp_path / "penalty.toml"
    config.write_text(_PENALTY_CONFIG, encoding="utf-8")
    return load_config(config)


def test_every_builtin_method_has_its_golden_identity() -> None:
    golden = _golden()
    recorded = json.loads(golden.GOLDEN.read_text(encoding="utf-8"))
    found = golden.changes(recorded, golden.current_identities())
    assert not found, (
        "method identities changed, which orphans their archived records in docs/data/ "
        "(re-run them, then `python scripts/golden_identities.py --write`):\n" + "\n".join(found)
    )


def test_golden_file_covers_every_builtin_method_with_and_without_grammar() -> None:
    recorded = json.loads(_golden().GOLDEN.read_text(encoding="utf-8"))
    for bench in BUILTIN_BENCHMARKS:
        assert set(recorded[bench.name]["methods"]) == set(bench.methods)
        for entry in recorded[bench.name]["methods"].values():
            assert {"grammar", "no_grammar", "view"} <= set(entry)


@pytest.mark.parametrize("bench", BUILTIN_BENCHMARKS, ids=lambda b: b.name)
def test_every_callable_in_a_builtin_fingerprint_has_a_stable_id(bench) -> None:
    unnamed = {
        (name, grammar, tuple(missing))
        for name, method in bench.methods.items()
        for grammar in (True, False)
        if (missing := callables_without_stable_id(method.build(grammar)))
    }
    assert not unnamed, f"decorate these with @stable_id(<their current qualified name>): {sorted(unnamed)}"


def test_the_archive_holds_records_to_check() -> None:
    # guards the tests below against an archive that moved or a reader that finds nothing
    assert len(ARCHIVED) >= 60
    assert {i["benchmark"] for i, _ in ARCHIVED.values()} == {"intercode-sql", "intercode-bash"}


def _reproduce(identity: dict[str, Any], digest: str, archive_file: Path, tmp_path: Path) -> None:
    """Assert today's code gives ``identity`` (found in ``archive_file``) again, field by field.

    A method rewritten by ``stateflow optimize`` (``<method>@<State>-<sha12>``) is rebuilt from the
    prompt set archived beside its records (``<archive dir>/prompts/...``), like any reader of
    the archive does (:func:`stateflow.tasks.optimize.rewrite.resolve_recorded`).
    """
    where = str(archive_file)
    bench, method = resolve_recorded(BENCHMARKS[identity["benchmark"]], identity["method"], [archive_file.parent])
    flow = method.build(identity["grammar"])
    assert flow.name == identity["flow"], where
    assert flow_fingerprint(flow) == identity["flow_sha256"], f"{where}: {identity['method']}'s flow changed"
    assert prompts_fingerprint(bench.prompts_dir) == identity["prompts_sha256"], f"{where}: prompts changed"
    models = _models_for(identity["models"], where, tmp_path)
    assert models_fingerprint(models) == identity["models_sha256"], f"{where}: profiles changed"
    # The digest formula itself: today's EpisodeIdentity over the recorded fields gives the
    # recorded digest (the dataset's hash is taken as recorded: it hashes the shared data).
    assert EpisodeIdentity(**identity).digest == digest


@pytest.mark.parametrize("digest", sorted(ARCHIVED))
def test_todays_code_reproduces_each_archived_identity(digest: str, tmp_path: Path) -> None:
    identity, where = ARCHIVED[digest]
    key = (identity["method"], identity["flow_sha256"])
    if key in SUPERSEDED:
        pytest.xfail(f"{where}: superseded definition: {SUPERSEDED[key]}")
    _reproduce(identity, digest, ARCHIVE / where, tmp_path)


def _rewritten_record(archive: Path, text: str) -> tuple[dict[str, Any], str]:
    """An archived record of sf_agent_hint with Solve's instruction rewritten to ``text``, its prompt
    set saved beside the archive as ``stateflow optimize`` leaves it; its identity as the runner
    stamps it."""
    from stateflow.tasks.harness.runner import RunSpec, run_identities
    from stateflow.tasks.optimize.rewrite import RewrittenPrompt, save_prompt_set, with_rewritten

    rewritten = RewrittenPrompt("sf_agent_hint", "Solve", text)
    save_prompt_set(archive.parent, rewritten)
    bench = with_rewritten(BENCHMARKS["intercode-sql"], rewritten)
    spec = RunSpec(
        bench,
        (rewritten.name,),
        models=ModelAssignment.of("local"),
        models_label="default=local",
        out=archive.parent / "run",
        dataset="spider",
        grammar=True,
    )
    identity = run_identities(spec, "0" * 64)[rewritten.name]
    archive.write_text(json.dumps({"identity": identity.to_dict(), "identity_digest": identity.digest}) + "\n")
    return identity.to_dict(), identity.digest


def test_an_archived_rewritten_instruction_is_rebuilt_from_its_saved_prompt_set(tmp_path: Path) -> None:
    archive = tmp_path / "optimize" / "intercode-sql" / "sql-part4.jsonl"
    archive.parent.mkdir(parents=True)
    identity, digest = _rewritten_record(archive, "Write one SELECT that answers the question.\nThen submit.")
    assert identity["method"].startswith("sf_agent_hint@Solve-")
    _reproduce(identity, digest, archive, tmp_path)
    # the flow is the saved text's: another text under the same name is refused, naming the file
    saved = next((archive.parent / "prompts").rglob("Solve.md"))
    saved.write_text("Write any SELECT.")
    sha = identity["method"][-12:]
    with pytest.raises(ConfigError, match=rf"{re.escape(str(saved))}: the saved instruction hashes to .* not {sha}"):
        _reproduce(identity, digest, archive, tmp_path)
    saved.unlink()
    with pytest.raises(ConfigError, match=r"prompt set is missing: looked for .*Solve\.md"):
        _reproduce(identity, digest, archive, tmp_path)


def test_superseded_records_are_still_in_the_archive() -> None:
    # an entry whose records are gone is stale: drop it
    archived = {(i["method"], i["flow_sha256"]) for i, _ in ARCHIVED.values()}
    assert set(SUPERSEDED) <= archived


# -- stable ids --------------------------------------------------------------------------------


def _flow_with(fn) -> Flow:
    work = State("Work", Tool(fn, name="work"))
    done = State("Done", final=True)
    return Flow("moves", initial=work, transitions=[Transition(work, done)])


def _moved(fn: types.FunctionType, module: str) -> types.FunctionType:
    """A copy of ``fn`` as if it were defined in ``module`` (what moving its file does)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__dict__.update(fn.__dict__)
    copy.__module__ = module
    copy.__qualname__ = fn.__qualname__
    return copy


def _tool(ctx):
    return "ok"


def test_a_function_with_a_stable_id_keeps_its_fingerprint_when_it_moves() -> None:
    named = stable_id("tests.work_tool")(_moved(_tool, __name__))
    assert flow_fingerprint(_flow_with(named)) == flow_fingerprint(_flow_with(_moved(named, "elsewhere.module")))


def test_a_function_without_a_stable_id_changes_its_fingerprint_when_it_moves() -> None:
    # why the built-in callables carry ids: a plain function is named by where it lives
    plain = _moved(_tool, __name__)
    assert flow_fingerprint(_flow_with(plain)) != flow_fingerprint(_flow_with(_moved(plain, "elsewhere.module")))
    assert callables_without_stable_id(_flow_with(plain)) == [f"{__name__}._tool"]


def test_an_instance_is_named_by_its_class_id_but_a_subclass_needs_its_own() -> None:
    @stable_id("tests.Executor")
    class Executor:
        def __call__(self, action):
            return action

    class Subclass(Executor):
        pass

    assert id_of(Executor()) == "tests.Executor"
    assert has_stable_id(Executor) and not has_stable_id(Subclass) and not has_stable_id(Subclass())
    assert id_of(Subclass()).endswith("Subclass")


@pytest.mark.parametrize("bad", ["", " padded", "trailing\n"])
def test_a_blank_or_padded_stable_id_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="stable id"):
        stable_id(bad)
