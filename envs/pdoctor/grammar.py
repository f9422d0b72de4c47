"""Surface forms of the request grammar and rendering a :class:`Request` to text.

Every terminal has several surface forms, written for this project. Forms are chosen by index
(modulo the list length), so a clause's text is fully determined by its structure: re-rendering
after a mutation never changes the meaning, only the words.

Terminals (≺: the subject runs first, ≻: it runs last, ∅: neutral):

* ``VP_BEFORE`` / ``VP_AFTER``: verb phrases that carry the order ("must precede");
* ``VP_NEUTRAL``: modal verb phrases with no order ("should happen");
* ``P_BEFORE`` / ``P_AFTER``: prepositions ("prior to", "following");
* ``SC_BEFORE`` / ``SC_AFTER``: subordinating conjunctions ("by the time", "once");
* ``DONE``: the tensed neutral verb of a subordinate clause, singular and plural;
* ``CONNECTIVES``: how clauses of a sentence are joined (all mean "and" for the constraints).
"""

from __future__ import annotations

from stateflow.envs.pdoctor.request import Clause, ClauseForm, Group, Relative, Request, Sentence, TimeBound

__all__ = [
    "BOUND_FORMS",
    "CONNECTIVES",
    "DONE",
    "P_AFTER",
    "P_BEFORE",
    "SC_AFTER",
    "SC_BEFORE",
    "VP_AFTER",
    "VP_BEFORE",
    "VP_NEUTRAL",
    "clock",
    "render_clause",
    "render_request",
    "render_sentence",
]

VP_BEFORE = (
    "must be done before",
    "has to come before",
    "should be finished before",
    "needs to happen prior to",
    "must precede",
    "should be completed ahead of",
    "ought to be handled earlier than",
)
VP_AFTER = (
    "must be done after",
    "has to come after",
    "should only start after",
    "needs to follow",
    "must wait until after",
    "should be handled later than",
    "can only be carried out after",
)
VP_NEUTRAL = (
    "should happen",
    "must take place",
    "should be carried out",
    "has to be executed",
    "should occur",
    "must be handled",
    "needs to be done",
)
P_BEFORE = ("before", "prior to", "ahead of", "earlier than", "in advance of", "sooner than", "preceding")
P_AFTER = ("after", "following", "later than", "behind", "subsequent to", "only after", "once we are past")
SC_BEFORE = ("before", "by the time", "ahead of when", "earlier than when", "prior to the moment")
SC_AFTER = ("after", "once", "only once", "as soon as", "only after")
DONE = (
    ("is done", "are done"),
    ("has happened", "have happened"),
    ("is finished", "are finished"),
    ("takes place", "take place"),
    ("is completed", "are completed"),
    ("has been carried out", "have been carried out"),
    ("is over", "are over"),
)
CONNECTIVES = ("; ", ", and ", ", but ", ", yet ", ", while ", ", whereas ")
BOUND_FORMS = {
    "start_after": (
        "{a} must not start before {t}",
        "{a} can begin at {t} at the earliest",
        "do not start {a} earlier than {t}",
        "{a} has to start at or after {t}",
    ),
    "finish_before": (
        "{a} must be finished by {t}",
        "{a} has to end no later than {t}",
        "make sure {a} is over by {t}",
        "{a} needs to be complete at {t} at the latest",
    ),
}


def _pick(forms: tuple, i: int):
    return forms[i % len(forms)]


def clock(minute: int) -> str:
    """``570 -> '09:30'``."""
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _names(actions: tuple[int, ...], phrases: tuple[str, ...]) -> str:
    items = [phrases[a] for a in actions]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def _relative(rel: Relative, phrases: tuple[str, ...]) -> str:
    obj = _names(rel.obj, phrases)
    if rel.prepositional:
        prep = _pick(P_BEFORE if rel.precedes else P_AFTER, rel.words[1])
        return f"which {_pick(VP_NEUTRAL, rel.words[0])} {prep} {obj}"
    return f"which {_pick(VP_BEFORE if rel.precedes else VP_AFTER, rel.words[0])} {obj}"


def _group(g: Group, phrases: tuple[str, ...]) -> str:
    text = _names(g.actions, phrases)
    return text if g.relative is None else f"{text}, {_relative(g.relative, phrases)},"


def render_clause(c: Clause, phrases: tuple[str, ...]) -> str:
    """The text of one clause (no final punctuation; a trailing comma is removed by the caller)."""
    subj, obj = _group(c.subj, phrases), _group(c.obj, phrases)
    w = c.words
    if c.form is ClauseForm.VERB:
        return f"{subj} {_pick(VP_BEFORE if c.precedes else VP_AFTER, w[0])} {obj}"
    if c.form is ClauseForm.PREP:
        return f"{subj} {_pick(VP_NEUTRAL, w[0])} {_pick(P_BEFORE if c.precedes else P_AFTER, w[1])} {obj}"
    if c.form is ClauseForm.FRONTED_PREP:
        return f"{_pick(P_BEFORE if c.precedes else P_AFTER, w[1])} {obj}, {subj} {_pick(VP_NEUTRAL, w[0])}"
    done = _pick(DONE, w[2])[len(c.obj.actions) > 1]
    sc = _pick(SC_BEFORE if c.precedes else SC_AFTER, w[1])
    if c.form is ClauseForm.SUBORD:
        return f"{subj} {_pick(VP_NEUTRAL, w[0])} {sc} {obj} {done}"
    return f"{sc} {obj} {done}, {subj} {_pick(VP_NEUTRAL, w[0])}"


def _tidy(text: str) -> str:
    while ",," in text or ", ," in text:
        text = text.replace(", ,", ",").replace(",,", ",")
    text = text.replace(",;", ";")
    return text.rstrip(", ")


def render_sentence(s: Sentence, phrases: tuple[str, ...]) -> str:
    """One sentence, capitalised, ending with a full stop."""
    parts = [render_clause(c, phrases) for c in s.clauses]
    parts += [_pick(BOUND_FORMS[b.kind], b.form).format(a=phrases[b.action], t=clock(b.minute)) for b in s.bounds]
    text = parts[0]
    for i, p in enumerate(parts[1:]):
        sep = _pick(CONNECTIVES, s.connectives[i]) if i < len(s.connectives) else ", and "
        text = _tidy(text) + sep + p
    text = _tidy(text)
    return text[0].upper() + text[1:] + "."


def render_request(r: Request) -> str:
    """The whole request: an opening that names the profession and every task, then the sentences."""
    article = "an" if r.profession[0] in "aeiou" else "a"
    everything = _names(tuple(range(len(r.actions))), r.actions)
    intro = f"I work as {article} {r.profession}. Today I have to take care of {everything}."
    if r.extended:
        intro += f" My day starts at {clock(r.day_start)} and I can only do one thing at a time."
    return " ".join([intro, *(render_sentence(s, r.actions) for s in r.sentences)])


def bound_sentence(bounds: tuple[TimeBound, ...]) -> Sentence:
    """A sentence made of time bounds only (joined by ", and")."""
    return Sentence(bounds=bounds, connectives=())
