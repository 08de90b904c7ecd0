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

from seqdedup.catalog import ids
from seqdedup.errors import InvalidEntryError, RewriteError, at

from . import rewrite
from .rewrite import calls

StateFor = Callable[[str], exp.Query]             # topic name -> query of (producer, sequence_id, last_publish_time)
ClaimsFor = Callable[[str], "dict[str, int]"]     # topic name -> producer -> highest id claimed, uncommitted (R6)
PartsFor = Callable[[str], "int | None"]          # topic name -> the parts of its composite ids (R19); None: integer

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


def _parts(text: exp.Expression, parts: int) -> exp.Expression:
    """A composite id's text (``catalog.ids``) as a STRUCT of its parts, ``part1`` ..., each a DECIMAL(20, 0)."""
    return exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(f"part{i + 1}"), expression=exp.cast(
        digits, exp.DataType.build("DECIMAL(20, 0)"))) for i, digits in enumerate(ids.part_digits(text, parts))])


def _composite_status(call: exp.Anonymous, state: exp.Query, parts: int, names: "_Names") -> exp.Expression:
    """``dup_status`` on a topic of composite ids (R19): the id as a statement writes it, ``(lsn, idx)`` (or a
    plain value on a topic of one-part ids). No batch entries, so no highest id; a part out of range fails the
    query. (Claims of uncommitted statements, R6, are not told apart: UNKNOWN is not given.)"""
    producer, sequence_id, *highest = call.expressions[1:]
    written = rewrite.written_parts(sequence_id, one_part=parts == 1)
    if highest or written is None or len(written) != parts:
        raise RewriteError(f"dup_status on a topic of composite ids of {parts} parts takes (topic, producer, id) "
                           f"with the id written as in its statements, a tuple of {parts}{at(call)}")
    encoded = ids.encode(written)
    mark = exp.func("coalesce", _lookup(state, "producer", "sequence_id", producer, names), exp.Literal.string(""))
    return exp.Case(ifs=[
        exp.If(this=exp.or_(producer.copy().is_(exp.null()), *[p.copy().is_(exp.null()) for p in written]),
               true=exp.null()),
        exp.If(this=encoded.copy().is_(exp.null()), true=exp.func("raise_error", exp.Literal.string(
            "dup_status's sequence_id has a part that is negative, not a whole number or above "
            f"{ids.PART_LIMIT - 1}"))),
        exp.If(this=encoded <= mark, true=exp.Literal.string("DUP"))], default=exp.Literal.string("NOT_DUP"))


def _named(call: exp.Anonymous, expression: exp.Expression) -> exp.Expression:
    """A call that was a column of the result keeps its text as the column's name, not the expansion's."""
    if isinstance(call.parent, exp.Select) and call.arg_key == "expressions":
        return exp.alias_(expression, call.sql(normalize_functions=False), quoted=True)
    return expression


def expand_state_functions(tree: exp.Expression, state_for: StateFor, claims_for: ClaimsFor, *,
                           integer_types: Iterable[str] | None = None,
                           parts_for: PartsFor = lambda topic: None) -> exp.Expression:
    """Replace the state functions of a query with subqueries over the topic's recovered state.

    ``claims_for`` gives the ids uncommitted statements claim (R6): ``dup_status`` answers ``UNKNOWN`` for them.
    With ``integer_types`` (the engine's type names, upper case, as ``typeof`` gives them) a ``dup_status`` whose
    sequence id is of another type fails when the query runs. On a topic of composite ids (``parts_for``, R19),
    ``last_sequence_id`` gives a STRUCT of the parts (NULL where there is none), ``dup_status`` takes the id as it
    is written in a statement (``(lsn, idx)``), and ``producer_state``'s ``sequence_id`` is a STRUCT.

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
            state, parts = state_for(topic), parts_for(topic)
            if parts is not None:
                state = exp.select("producer", exp.alias_(_parts(exp.column("sequence_id"), parts), "sequence_id"),
                                   "last_publish_time").from_(state.subquery(names("m")))
            table.replace(state.subquery(table.alias or "producer_state"))
    for call in calls(tree, "last_sequence_id"):
        topic = _topic_argument(call, "last_sequence_id", (2,))
        mark = _lookup(state_for(topic), "producer", "sequence_id", call.expressions[1], names)
        parts = parts_for(topic)
        call.replace(_named(call, exp.func("coalesce", mark, exp.convert(-1)) if parts is None else exp.Case(
            ifs=[exp.If(this=mark.copy().is_(exp.not_(exp.null())), true=_parts(mark, parts))])))
    for call in calls(tree, "dup_status"):
        topic = _topic_argument(call, "dup_status", (3, 4))
        producer, sequence_id, *highest = call.expressions[1:]
        parts = parts_for(topic)
        if parts is not None:
            call.replace(_named(call, _composite_status(call, state_for(topic), parts, names)))
            continue
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
