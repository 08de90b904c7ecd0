"""Reading state from SQL: ``producer_state('topic')``, ``last_sequence_id('topic', producer)`` and
``dup_status('topic', producer, sequence_id[, highest_sequence_id])`` become subqueries over the recovered state.

The user's arguments stay where they were written, in the user's query: each call becomes a scalar subquery over
the state whose columns (and alias) are renamed to names that appear nowhere in the user's statement, so an argument
``producer`` or ``sequence_id`` can only mean the user's column, never the state's (a correlated subquery over
columns named ``producer`` would bind it to the state itself: every row would get the highest mark of all producers).
"""
from __future__ import annotations

from typing import Callable, Iterable

from sqlglot import exp

from seqdedup.errors import InvalidEntryError, RewriteError, at

from .rewrite import calls

StateFor = Callable[[str], exp.Query]             # topic name -> query of (producer, sequence_id, last_publish_time)
ClaimsFor = Callable[[str], "dict[str, int]"]     # topic name -> producer -> highest id claimed, uncommitted (R6)

IDS = "an integer (sequence ids are signed 64-bit, 0 to 9223372036854775807)"


def _topic_argument(call: exp.Anonymous, name: str, arity: tuple[int, ...]) -> str:
    if len(call.expressions) not in arity:
        raise RewriteError(f"{name} takes {' or '.join(map(str, arity))} arguments, got {len(call.expressions)}{at(call)}")
    topic = call.expressions[0]
    if not (isinstance(topic, exp.Literal) and topic.is_string):
        raise RewriteError(f"{name}'s first argument must be the topic's name as a string literal{at(topic)}")
    return topic.name


class _Names:
    """Fresh names: none appears among the identifiers of the user's statement, so none can capture an argument."""

    def __init__(self, tree: exp.Expression):
        self._taken = {i.name.lower() for i in tree.find_all(exp.Identifier)}
        self._count = 0

    def __call__(self, stem: str) -> str:
        while True:
            name = f"__sd_{stem}{self._count or ''}"
            self._count += 1
            if name not in self._taken:
                self._taken.add(name)
                return name


def _lookup(relation: exp.Query, key: str, value: str, producer: exp.Expression, names: _Names) -> exp.Subquery:
    """``(SELECT max(value) FROM relation WHERE key = producer)``, with relation's ``key`` and ``value`` columns
    renamed to fresh names first: ``producer`` can only be read in the user's scope."""
    alias, fresh_key, fresh_value = names("s"), names("producer"), names("mark")
    renamed = exp.select(exp.alias_(exp.column(key), fresh_key), exp.alias_(exp.column(value), fresh_value)).from_(
        relation.subquery(names("r")))
    return (exp.select(exp.Max(this=exp.column(fresh_value, table=alias))).from_(renamed.subquery(alias))
            .where(exp.column(fresh_key, table=alias).eq(producer.copy())).subquery())


def _claims(claims: dict[str, int]) -> exp.Query:
    """The uncommitted claims of a topic (R6) as a relation of (producer, sequence_id)."""
    rows = [(exp.Literal.string(p), exp.convert(h)) for p, h in sorted(claims.items())]
    return exp.select("producer", "sequence_id").from_(
        exp.values(rows, alias="claims", columns=["producer", "sequence_id"]))


def _check_id_literal(value: exp.Expression, role: str) -> None:
    """Refuse a literal that is no sequence id (``'5'``, ``TRUE``, ``2.5``, ``-1``) before anything runs."""
    literal = value.this if isinstance(value, exp.Neg) else value
    if isinstance(literal, exp.Boolean) or (isinstance(literal, exp.Literal) and literal.is_string):
        raise InvalidEntryError(f"dup_status's {role} is {value.sql()}, not an integer{at(value)}: give {IDS}")
    if isinstance(literal, exp.Literal) and not literal.name.isdigit():
        raise InvalidEntryError(f"dup_status's {role} is {value.sql()}, not an integer{at(value)}: give {IDS}")
    if isinstance(value, exp.Neg) and isinstance(literal, exp.Literal) and int(literal.name):
        raise InvalidEntryError(f"dup_status's {role} is {value.sql()}{at(value)}: sequence ids are 0 or more")


def _checked_id(value: exp.Expression, role: str, integer_types: Iterable[str] | None) -> list[exp.If]:
    """Branches of the CASE that fail the query on a value that is no sequence id: one of a type that is no integer
    (known when the query runs, by ``typeof``), a negative one. As the Python API does, never an answer."""
    branches = []
    if integer_types is not None:
        kind = exp.Upper(this=exp.func("split_part", exp.func("replace", exp.Typeof(this=value.copy()),
                                                                 exp.Literal.string('"'), exp.Literal.string("")),
                                       exp.Literal.string("("), exp.convert(1)))
        branches.append(exp.If(
            this=exp.not_(kind.isin(*[exp.Literal.string(t.upper()) for t in sorted(integer_types)])),
            true=exp.func("raise_error", exp.Literal.string(f"dup_status's {role} must be {IDS}: CAST it to BIGINT"))))
    branches.append(exp.If(this=exp.cast(value.copy(), "bigint") < 0, true=exp.func(
        "raise_error", exp.Literal.string(f"dup_status's {role} must be 0 or more (sequence ids are signed 64-bit)"))))
    return branches


def _named(call: exp.Anonymous, expression: exp.Expression) -> exp.Expression:
    """A call that was a column of the result keeps its text as the column's name, not the expansion's."""
    if isinstance(call.parent, exp.Select) and call.arg_key == "expressions":
        return exp.alias_(expression, call.sql(normalize_functions=False), quoted=True)
    return expression


def expand_state_functions(tree: exp.Expression, state_for: StateFor, claims_for: ClaimsFor, *,
                           integer_types: Iterable[str] | None = None) -> exp.Expression:
    """Replace the state functions of a query with subqueries over the topic's recovered state.

    ``claims_for`` gives the ids uncommitted statements claim (R6): ``dup_status`` answers ``UNKNOWN`` for them.
    With ``integer_types`` (the engine's type names, upper case, as ``typeof`` gives them) a ``dup_status`` whose
    sequence id is of another type fails when the query runs.

    Example:
        >>> import sqlglot
        >>> state = lambda topic: sqlglot.parse_one("SELECT 'p1' AS producer, 5 AS sequence_id")
        >>> tree = expand_state_functions(sqlglot.parse_one("SELECT last_sequence_id('t', producer) FROM probes"),
        ...                               state, lambda topic: {})
        >>> tree.find(exp.Where).sql()      # the caller's producer: the state's columns took names nobody uses
        'WHERE __sd_s.__sd_producer1 = producer'
        >>> tree.selects[0].alias
        "last_sequence_id('t', producer)"
    """
    tree = tree.copy()
    names = _Names(tree)
    for table in list(tree.find_all(exp.Table)):
        if isinstance(table.this, exp.Anonymous) and table.this.name.lower() == "producer_state":
            topic = _topic_argument(table.this, "producer_state", (1,))
            table.replace(state_for(topic).subquery(table.alias or "producer_state"))
    for call in calls(tree, "last_sequence_id"):
        topic = _topic_argument(call, "last_sequence_id", (2,))
        mark = _lookup(state_for(topic), "producer", "sequence_id", call.expressions[1], names)
        call.replace(_named(call, exp.func("coalesce", mark, exp.convert(-1))))
    for call in calls(tree, "dup_status"):
        topic = _topic_argument(call, "dup_status", (3, 4))
        producer, sequence_id, *highest = call.expressions[1:]
        ids = [(sequence_id, "sequence_id")] + [(h, "highest_sequence_id") for h in highest]
        checks = []
        for value, role in ids:
            if isinstance(value, (exp.Literal, exp.Boolean, exp.Neg)):
                _check_id_literal(value, role)
            else:
                checks += _checked_id(value, role, integer_types)
        if checks:    # compared as BIGINT, so that the engine binds the CASE whatever the type the checks refuse
            sequence_id = exp.cast(sequence_id.copy(), "bigint")
        mark = exp.func("coalesce", _lookup(state_for(topic), "producer", "sequence_id", producer, names),
                        exp.convert(-1))
        claims = claims_for(topic)
        unknown = []
        if claims:
            pushed = _lookup(_claims(claims), "producer", "sequence_id", producer, names)
            unknown = [exp.If(this=exp.and_(sequence_id.copy() <= pushed, sequence_id.copy() > mark.copy()),
                              true=exp.Literal.string("UNKNOWN"))]
        call.replace(_named(call, exp.Case(ifs=[
            exp.If(this=exp.or_(producer.copy().is_(exp.null()), call.expressions[2].copy().is_(exp.null())),
                   true=exp.null()),
            *checks,
            *unknown,
            exp.If(this=sequence_id.copy() <= mark, true=exp.Literal.string("DUP")),
        ], default=exp.Literal.string("NOT_DUP"))))
    for name in ("is_not_dup",):
        if calls(tree, name):
            raise RewriteError(f"{name} works only in INSERT INTO <topic> SELECT ... WHERE {name}(...)")
    return tree
