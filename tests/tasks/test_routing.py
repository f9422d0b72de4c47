"""Each episode's model calls are routed by its task's context (issue 49 part 4): the runner wraps
the episode in ``route_requests(task.context)``, which a replica set of the embedded model reads."""

from __future__ import annotations

from stateflow.tasks.harness.episode import EpisodeSpec, run_episode
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ANY, Context, Flow, ModelAssignment, State, Tool, ToolResult, Transition, meta_is
from stateflow.backends.local.replicas import current_route


def _record_route(ctx: Context) -> ToolResult:
    route = current_route()
    return ToolResult(f"route={route.key if route else None}", {"done": True})


def route_flow() -> Flow:
    end = State("End", final=True)
    note = State("Note", Tool(_record_route, "note_route"))
    return Flow("routing", initial=note, transitions=[Transition(ANY, end, when=meta_is("done", True))])


def test_an_episode_runs_inside_a_route_named_by_its_database(sql_env):
    spec = EpisodeSpec(
        benchmark=INTERCODE_SQL,
        dataset="demo",
        method="tests.tasks.test_routing:route_flow",
        models=ModelAssignment.of("local"),
        models_label="default=local",
    )
    seen = []
    for index in (0, 10):  # demo: task 0 is on `library`, task 10 on `weather`
        record = run_episode(sql_env, index, spec)
        assert record.status == "ok", record.error
        seen += [m["content"] for m in record.history if m["content"].startswith("route=")]
    assert seen == [f"route={sql_env.task(0).context}", f"route={sql_env.task(10).context}"]
    assert seen == ["route=library", "route=weather"]
    assert current_route() is None  # the route ends with the episode
