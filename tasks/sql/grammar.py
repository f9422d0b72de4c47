"""A decoding grammar whose SQL may only name the task's real tables and columns.

Why: on the development sample (docs/results.md, issue 15) a third of the best flow's failed
answers stopped at ``Unknown column``, often on a name that exists nowhere in the database
(``Record_Format`` where the table has ``Major_Record_Format``, ``section_count``). A grammar
built from the schema the flow has already listed (:func:`~stateflow.tasks.kit.tools.describe_schema`
stores it in :class:`~stateflow.tasks.kit.blackboard.EpisodeVars`) makes such names impossible to
write: where the model would invent one, it has to pick a real name, a keyword or a literal.
Measured on that sample it was neutral (docs/results.md, "A grammar bound to the schema"): most
``Unknown column`` errors there name a real column through the wrong table, which this grammar
does not rule out, so flows take it only when asked (``build_sql_flow(schema_grammar=True)``).

What a statement is, here: *words* separated by *gaps*. A word is a listed table or column name
(as listed, or lower-cased), a SQL keyword or function name (any case), a short alias (``T1``,
``o``, ``cnt``: up to three characters), any name after ``AS`` (column and table aliases), a
number, or a quoted string. A gap is one or more spaces and punctuation marks (``(``, ``.``,
``,``, operators). Two words must have a gap between them, so a name cannot be assembled from
pieces. What this gives up: a column alias longer than three characters cannot be referred to
again (``ORDER BY CountryCount``); the model then writes the expression (``ORDER BY COUNT(*)``).
It does not check that a column belongs to the table it is read through (a context-free grammar
cannot follow aliases): the column hint of the Error state still covers those.

The three grammars mirror :mod:`stateflow.tasks.kit.grammar`'s reply forms. Each is a function of the
run's context (a grammar is recomputed per request) and falls back to the free form before a
schema was listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stateflow.tasks.kit.blackboard import EpisodeVars
from stateflow.tasks.kit.grammar import ACTION_GBNF, ACTION_ONLY_GBNF, THOUGHT_ACTION_GBNF

from stateflow import Context
from stateflow.stable_id import stable_id

__all__ = [
    "SQL_WORDS",
    "schema_action_grammar",
    "schema_action_only_grammar",
    "schema_statement_rules",
    "schema_thought_action_grammar",
]

# keywords and function names a statement may use (any case): MySQL's SELECT vocabulary and the
# common functions; DESC/SHOW so a state that may inspect a table still can.
_WORDS = """
    SELECT FROM WHERE JOIN INNER LEFT RIGHT OUTER CROSS NATURAL ON USING GROUP BY ORDER HAVING LIMIT
    OFFSET DISTINCT ALL AND OR NOT IN LIKE BETWEEN IS NULL ASC DESC UNION INTERSECT EXCEPT EXISTS
    CASE WHEN THEN ELSE END WITH ANY SOME TRUE FALSE DIV MOD XOR REGEXP INTERVAL ESCAPE SHOW TABLES
    COLUMNS DESCRIBE OVER PARTITION
    COUNT SUM AVG MIN MAX ROUND ABS LENGTH CHAR_LENGTH UPPER LOWER UCASE LCASE CONCAT CONCAT_WS
    SUBSTR SUBSTRING TRIM REPLACE INSTR LOCATE IFNULL COALESCE NULLIF IF CAST CONVERT YEAR MONTH DAY
    DATE TIME NOW CURDATE DATEDIFF TIMESTAMPDIFF DATE_FORMAT STR_TO_DATE FLOOR CEIL CEILING POWER SQRT
    GROUP_CONCAT SEPARATOR ROW_NUMBER RANK DENSE_RANK SIGNED UNSIGNED INTEGER DECIMAL CHAR FLOAT DOUBLE
"""
SQL_WORDS = tuple(_WORDS.split())

# Bounds: a statement of at most 150 words (no Spider gold has more than ~80) and gaps of at most
# 8 characters, so a reply cannot run until max_tokens inside the grammar.
_MAX_WORDS = 150
_MAX_GAP = 8
_MAX_LITERAL = 120


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _any_case(word: str) -> str:
    return " ".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else _literal(c) for c in word)


def schema_statement_rules(tables: Iterable[str], columns: Mapping[str, Iterable[str]]) -> str:
    """The GBNF rules of ``stmt``: a statement naming only these tables and columns.

    Names are offered as listed and lower-cased (MySQL compares both case-insensitively here;
    the model mostly copies the listing, sometimes lower-cases it). Names with characters other
    than letters, digits and ``_`` are offered in backticks only.

    Raises:
        ValueError: no table is given (there would be nothing to select from).
    """
    tables = list(tables)
    if not tables:
        raise ValueError("schema_statement_rules: no tables (list the schema before building its grammar)")
    names: dict[str, None] = {}  # ordered set: the grammar text is the same on every run
    for name in [*tables, *(c for t in tables for c in columns.get(t, ()))]:
        for form in (name, name.lower()):
            names[form] = None
    plain = [n for n in names if n.replace("_", "").isalnum() and n.isascii()]
    quoted = list(names)
    return "\n".join(
        [
            f"stmt ::= gap? word (gap word){{0,{_MAX_WORDS - 1}}} gap?",
            f"gap ::= [ (),*=<>!+\\-/%;.]{{1,{_MAX_GAP}}}",
            "word ::= name | tick | kw | alias | asname | num | str",
            "name ::= " + " | ".join(_literal(n) for n in plain) if plain else "name ::= tick",
            'tick ::= "`" (' + " | ".join(_literal(n) for n in quoted) + ') "`"',
            "kw ::= " + " | ".join(f"({_any_case(w)})" for w in SQL_WORDS),
            "alias ::= [a-zA-Z] [a-zA-Z0-9_]{0,2}",
            'asname ::= [aA] [sS] " " [a-zA-Z_] [a-zA-Z0-9_]{0,30}',
            "num ::= [0-9]{1,12}",
            f'str ::= "\'" [^\'\\n\\]]{{0,{_MAX_LITERAL}}} "\'" | "\\"" [^"\\n\\]]{{0,{_MAX_LITERAL}}} "\\""',
            "",
        ]
    )


def _schema(ctx: Context) -> str | None:
    ep = EpisodeVars.of(ctx)
    return schema_statement_rules(ep.tables, ep.columns) if ep.tables else None


def schema_action_only_grammar(ctx: Context) -> str:
    """``Action: execute[<statement>]`` with a schema-bound statement (:data:`ACTION_ONLY_GBNF`
    before the schema was listed)."""
    rules = _schema(ctx)
    return ACTION_ONLY_GBNF if rules is None else 'root ::= "Action: execute[" stmt "]"\n' + rules


@stable_id("stateflow.tasks.sql_grammar.schema_action_grammar")
def schema_action_grammar(ctx: Context) -> str:
    """``Action: execute[<statement>]`` or ``Action: submit`` (:data:`ACTION_GBNF` before the
    schema was listed)."""
    rules = _schema(ctx)
    return ACTION_GBNF if rules is None else 'root ::= "Action: " ("submit" | "execute[" stmt "]")\n' + rules


@stable_id("stateflow.tasks.sql_grammar.schema_thought_action_grammar")
def schema_thought_action_grammar(ctx: Context) -> str:
    """A Thought line, then the action of :func:`schema_action_grammar` (:data:`THOUGHT_ACTION_GBNF`
    before the schema was listed)."""
    rules = _schema(ctx)
    if rules is None:
        return THOUGHT_ACTION_GBNF
    return (
        'root ::= "Thought: " thought "\\nAction: " ("submit" | "execute[" stmt "]")\n'
        "thought ::= [^\\n]{1,200}\n" + rules
    )
