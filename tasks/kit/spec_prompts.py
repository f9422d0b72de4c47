"""Prompts of the spec agents on InterCode: what each step means and one worked example.

The system message of a spec agent lists the spec's steps (label, who writes it, what it holds)
and shows one complete example episode written in that spec's own format, so the example is
valid under the automaton (tests check that with :func:`stateflow.spec.check_example`).
"""

from __future__ import annotations

from dataclasses import dataclass

from stateflow.spec import AgentSpec

__all__ = ["BASH_SPEC_DOMAIN", "SQL_SPEC_DOMAIN", "DomainExample", "SpecDomain", "example_transcript", "system_message"]


@dataclass(frozen=True)
class DomainExample:
    """One solved task: the question, exploration commands with their outputs, the answer."""

    question: str
    steps: tuple[tuple[str, str, str], ...]  # (thought/plan, command, output)
    answer: str
    answer_output: str


SQL_EXAMPLE = DomainExample(
    question=(
        "How many singers are from France?\n"
        "Tables: singer(singer_id int, name varchar, country varchar, age int), "
        "concert(concert_id int, concert_name varchar, year int)"
    ),
    steps=(
        (
            "I need to see how countries are written.",
            "SELECT DISTINCT country FROM singer",
            "[('France',), ('Netherlands',)]",
        ),
        ("I can count the French singers.", "SELECT count(*) FROM singer WHERE country = 'France'", "[(4,)]"),
    ),
    answer="SELECT count(*) FROM singer WHERE country = 'France'",
    answer_output="[(4,)]",
)
BASH_EXAMPLE = DomainExample(
    question="Count the .txt files anywhere under /testbed.",
    steps=(
        ("I should look at the folder first.", "ls /testbed", "dir1\nnotes.txt\nrun.sh"),
        (
            "Files may be nested: find them all.",
            "find /testbed -type f -name '*.txt'",
            "/testbed/notes.txt\n/testbed/dir1/a.txt",
        ),
    ),
    answer="find /testbed -type f -name '*.txt' | wc -l",
    answer_output="2",
)


@dataclass(frozen=True)
class SpecDomain:
    """What a spec agent is told about a benchmark (a field of its :class:`~stateflow.tasks.kit.benchmark.Benchmark`).

    Attributes:
        what: what the agent solves, completing "You solve ...".
        tool: the one tool's description.
        answer: what the ``Answer`` step holds.
        example: the worked example every library spec's prompt shows in its own format.
        describe_schema: the task text is followed by every table's columns (SQL), read from the
            environment before the agent starts (one turn, as in the schema variant of the flow).
    """

    what: str
    tool: str
    answer: str
    example: DomainExample
    describe_schema: bool = False


SQL_SPEC_DOMAIN = SpecDomain(
    what="questions about a MySQL database",
    tool="execute: runs one MySQL statement (SELECT, SHOW, DESC) and shows the rows",
    answer="the final SQL query; it is run and its rows are your answer",
    example=SQL_EXAMPLE,
    describe_schema=True,
)
BASH_SPEC_DOMAIN = SpecDomain(
    what="tasks in a Linux shell",
    tool="execute: runs one bash command in a fresh shell and shows its output",
    answer="the final bash command; it is run and its output is your answer",
    example=BASH_EXAMPLE,
)


def _meaning(domain: SpecDomain, name: str) -> str:
    return {
        "Question": "the task",
        "Thought": "your reasoning, one line",
        "Plan": "what to find out next, one line",
        "Action": "the tool name: execute",
        "Action-Input": "the command to run, one line",
        "Action-Label": "a label for the action's result, e.g. #E1",
        "Observation": "the command's output",
        "Summary": "the results of the listed actions (all run at once)",
        "Final-Thought": "why you are ready to answer, one line",
        "Proposed-Answer": domain.answer.replace("final", "proposed"),
        "Evaluation": "the output of your proposed answer",
        "Reflection": "what to do differently, one line",
        "Answer": domain.answer,
    }.get(name, "its content, one line")


def example_transcript(spec: AgentSpec, domain: SpecDomain) -> str:
    """The domain's worked example written in ``spec``'s format (library specs only).

    Raises:
        KeyError: a spec whose shape has no example (not one of the library agents).
    """
    ex = domain.example
    t = {n: d.text for n, d in spec.spec.states.items()}
    lines = [f"{t['Question']} {ex.question}"]

    def react_loop() -> None:
        for thought, cmd, out in ex.steps:
            lines.extend(
                [f"{t['Thought']} {thought}", f"{t['Action']} execute", f"{t['Action-Input']} {cmd}"],
            )
            lines.append(f"{t['Observation']} {out}")

    name = spec.name
    if name == "direct":
        lines.append(f"{t['Answer']} {ex.answer}")
    elif name == "chain-of-thought":
        lines += [f"{t['Thought']} {ex.steps[-1][0]}", f"{t['Answer']} {ex.answer}"]
    elif name == "react":
        react_loop()
        lines += [f"{t['Final-Thought']} The last result answers the question.", f"{t['Answer']} {ex.answer}"]
    elif name == "reflexion":
        react_loop()
        lines += [
            f"{t['Final-Thought']} The last result answers the question.",
            f"{t['Proposed-Answer']} {ex.answer}",
            f"{t['Evaluation']} {ex.answer_output}",
            f"{t['Answer']} {ex.answer}",
        ]
    elif name == "rewoo":
        for i, (plan, cmd, _out) in enumerate(ex.steps, 1):
            lines += [f"{t['Plan']} {plan}", f"{t['Action-Label']} #E{i}", f"{t['Action']} execute"]
            lines.append(f"{t['Action-Input']} {cmd}")
        lines.append(f"{t['Answer']} {ex.answer} -> {ex.answer_output}")
    elif name == "pass":
        lines.append(f"{t['Plan']} {ex.steps[0][0]}")
        for _thought, cmd, _out in ex.steps:
            lines += [f"{t['Action']} execute", f"{t['Action-Input']} {cmd}"]
        raw = "\n".join(f"{i}. execute[{cmd}] -> {out}" for i, (_, cmd, out) in enumerate(ex.steps, 1))
        lines.append(f"{t['Summary']} {raw}")
        lines += [f"{t['Final-Thought']} The second result answers the question.", f"{t['Answer']} {ex.answer}"]
    else:
        raise KeyError(f"no worked example for spec {name!r}")
    return "\n".join(lines)


def system_message(spec: AgentSpec, domain: SpecDomain) -> str:
    """The spec agent's system message for a benchmark described by ``domain``."""
    what = domain.what
    out = [
        f"You solve {what}. Work in the '{spec.name}' format: every step is one line that starts "
        "with its label. Never write a label marked 'given to you': stop there and wait for it.",
        f"Tool: {domain.tool}.",
        "Steps:",
    ]
    for d in spec.spec.states.values():
        who = "given to you" if d.env_input else "written by you"
        out.append(f"- {d.text} ({who}) {_meaning(domain, d.name)}")
    if spec.name == "pass":
        out.append("You may list several Action / Action Input pairs after a Plan; they all run at once.")
    if spec.name == "rewoo":
        out.append("Plan every action first; all of them then run at once and a solver writes the answer.")
    out += ["", "Example:", example_transcript(spec, domain)]
    return "\n".join(out)
