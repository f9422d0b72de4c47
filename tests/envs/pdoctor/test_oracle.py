"""The oracle on hand-written traces, the mock tools and the error classes."""

from __future__ import annotations

import itertools

import pytest
from stateflow.envs.pdoctor import (
    ErrorClass,
    MockToolkit,
    PDoctorEnv,
    SynthesisConfig,
    TimeBound,
    Verdict,
    classify,
    judge,
    parse_call,
    synthesize,
)
from stateflow.envs.pdoctor.oracle import Call
from stateflow.envs.pdoctor.request import Sentence

from .helpers import before, hand_request, one, order_ok

# tools: 0 feeding_lions, 1 cleaning_aviary, 2 weighing_penguins, 3 repairing_gate
REQ = hand_request(one(before(0, 2)), one(before(2, 1), before(3, 1)))  # 0<2, 2<1, 3<1


def run_calls(request, *calls: str):
    kit = MockToolkit(request)
    for c in calls:
        kit.call(c)
    return judge(request, kit.calls)


def test_a_valid_order_succeeds():
    v = run_calls(REQ, "feeding_lions", "repairing_gate", "weighing_penguins", "cleaning_aviary")
    assert v.success and v.error is None and v.violated == ()
    assert v.n_actions == 4 and v.n_sentences == 2 and v.n_constraints == 3


def test_one_violated_constraint_is_named():
    v = run_calls(REQ, "weighing_penguins", "feeding_lions", "repairing_gate", "cleaning_aviary")
    assert not v.success and v.error is ErrorClass.ORDER
    assert v.violated == ("s0:0<2",)


def test_every_violated_constraint_is_named():
    v = run_calls(REQ, "cleaning_aviary", "weighing_penguins", "repairing_gate", "feeding_lions")
    assert v.violated == ("s0:0<2", "s1:2<1", "s1:3<1")


def test_the_oracle_agrees_with_direct_evaluation_on_every_permutation():
    for perm in itertools.permutations(range(4)):
        v = run_calls(REQ, *(REQ.tools[a] for a in perm))
        pos = {a: i for i, a in enumerate(perm)}
        expected = sorted(o.name for o in REQ.orders if pos[o.first] > pos[o.then])
        assert list(v.violated) == expected
        assert v.success == order_ok(perm, REQ.orders)


def test_a_missing_action_is_action_lost_and_its_constraints_are_not_judged():
    v = run_calls(REQ, "feeding_lions", "weighing_penguins", "cleaning_aviary")
    assert v.error is ErrorClass.LOST and v.lost == ("repairing_gate",)
    assert v.violated == ()


def test_a_nonexistent_tool_is_an_act_error_but_a_recovered_one_is_not_a_failure():
    kit = MockToolkit(REQ)
    text, ok = kit.call("feed_lions")
    assert not ok and "no tool named 'feed_lions'" in text and "feeding_lions" in text
    for t in ("feeding_lions", "repairing_gate", "weighing_penguins", "cleaning_aviary"):
        kit.call(t)
    v = judge(REQ, kit.calls)
    assert v.success and v.act_errors == ("feed_lions",)
    v = run_calls(REQ, "feed_lions", "repairing_gate", "weighing_penguins", "cleaning_aviary")
    assert v.error is ErrorClass.ACT and v.lost == ("feeding_lions",)


def test_malformed_calls_are_logged_as_act_errors():
    kit = MockToolkit(REQ)
    text, ok = kit.call("please feed the lions")
    assert not ok and "malformed call" in text
    assert kit.calls == [Call("please feed the lions", None)]


def test_a_repeated_action_is_an_order_error():
    v = run_calls(REQ, "feeding_lions", "repairing_gate", "weighing_penguins", "cleaning_aviary", "feeding_lions")
    assert v.error is ErrorClass.ORDER and v.repeated == ("feeding_lions",)
    assert "repeat:feeding_lions" in v.violated


EXT = hand_request(
    one(before(0, 1)),
    Sentence(bounds=(TimeBound(2, "start_after", 10 * 60, 1), TimeBound(1, "finish_before", 12 * 60, 1))),
    durations=(60, 90, 30, 30),
)


def test_extended_a_valid_schedule_succeeds_and_tools_report_durations():
    kit = MockToolkit(EXT)
    text, _ = kit.call("feeding_lions(start=08:00)")
    assert "from 08:00 to 09:00 (took 1h)" in text
    kit.call("cleaning_aviary(start=09:00)")  # ends 10:30 <= 12:00
    kit.call("weighing_penguins at 10:30")
    kit.call("repairing_gate 11:00")
    assert judge(EXT, kit.calls).success


def test_extended_overlapping_starts_and_bounds_are_parameter_errors():
    kit = MockToolkit(EXT)
    kit.call("weighing_penguins(start=09:00)")  # violates start >= 10:00
    kit.call("feeding_lions(start=09:00)")  # starts before the previous task ended (09:30)
    kit.call("cleaning_aviary(start=11:00)")  # ends 12:30 > 12:00
    kit.call("repairing_gate(start=12:30)")
    v = judge(EXT, kit.calls)
    assert v.error is ErrorClass.PARAMETER
    assert set(v.violated) == {"s1:start(2)>=10:00", "s1:end(1)<=12:00"}
    assert any("before the previous task ended (09:30)" in p for p in v.parameter_errors)


def test_extended_a_call_without_start_time_is_a_parameter_error_and_runs_after_the_previous():
    kit = MockToolkit(EXT)
    kit.call("feeding_lions(start=08:00)")
    text, ok = kit.call("cleaning_aviary")
    assert ok and "from 09:00 to 10:30" in text and "no start time given" in text
    kit.call("weighing_penguins(start=10:30)")
    kit.call("repairing_gate(start=11:00)")
    v = judge(EXT, kit.calls)
    assert v.error is ErrorClass.PARAMETER and v.parameter_errors == ("cleaning_aviary: no valid start time given",)


@pytest.mark.parametrize(
    ("text", "extended", "expected"),
    [
        ("feeding_lions", False, ("feeding_lions", None)),
        ("feeding_lions()", False, ("feeding_lions", None)),
        ("`feeding_lions`", False, ("feeding_lions", None)),
        ("feeding_lions(start=9:05)", True, ("feeding_lions", 545)),
        ("feeding_lions(start=25:00)", True, (None, None)),
        ("feeding_lions(start=09:00)", False, (None, None)),
        ("feeding lions", True, (None, None)),
    ],
)
def test_parse_call(text, extended, expected):
    assert parse_call(text, extended) == expected


def test_classify_timeout_first_then_the_verdicts_class():
    ok = run_calls(REQ, "feeding_lions", "repairing_gate", "weighing_penguins", "cleaning_aviary")
    bad = run_calls(REQ, "feeding_lions")
    assert classify(ok, finished=False) is None  # a correct log passes even if the agent did not submit
    assert classify(bad, finished=False) is ErrorClass.TIMEOUT
    assert classify(None, finished=True) is ErrorClass.TIMEOUT
    assert classify(bad, finished=True) is ErrorClass.LOST
    assert classify(bad, finished=True, invalid_replies=1) is ErrorClass.ACT


def test_verdict_round_trips_through_a_record():
    v = run_calls(REQ, "cleaning_aviary", "feed")
    assert Verdict.from_dict(v.to_dict()) == v


def test_environment_submit_runs_the_oracle_and_gold_is_a_valid_order():
    env = PDoctorEnv(SynthesisConfig(n=4, actions=(3, 5), seed=4))
    for i in range(4):
        task = env.task(i)
        listing, _ = env.reset(i)
        assert all(t in listing for t in env.current.tools)
        for name in task.gold.split(" -> "):
            _, _, done, info = env.step(name)
            assert info["action_executed"] and not done
        _, reward, done, info = env.step("submit")
        assert done and reward == 1.0 and info["verdict"]["success"], (task.query, task.gold)
    env.reset(0)
    _, reward, _, info = env.step("submit")
    assert reward == 0.0 and info["verdict"]["error"] == "Action Lost"


def test_environment_requires_reset():
    env = PDoctorEnv(SynthesisConfig(n=1))
    with pytest.raises(RuntimeError, match="reset"):
        env.step("x")
    assert synthesize(env.config, 0).text == env.task(0).query
