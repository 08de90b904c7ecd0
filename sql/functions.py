"""Reading state from SQL: ``producer_state('topic')``, ``last_sequence_id('topic', producer)`` and
``dup_status('topic', producer, sequence_id[, highest_sequence_id])`` become subqueries over the recovered state."""
from __future__ import annotations

from typing import Callable

from sqlglot import exp

from seqdedup.errors import RewriteError, at

from .rewrite import calls

StateFor = Callable[[str], exp.Query]           # topic name -> query of (producer, sequence_id, last_publish_time)
PushedFor = Callable[[str, str], "int | None"]  # (topic, producer) -> uncommitted claim (R6)


def _topic_argument(call: exp.Anonymous, name: str, arity: tuple[int, ...]) -> str:
    if len(call.expressions) not in arity:
        raise RewriteError(f"{name} takes {' or '.join(map(str, arity))} arguments, got {len(call.expressions)}{at(call)}")
    topic = call.expressions[0]
    if not (isinstance(topic, exp.Literal) and topic.is_string):
        raise RewriteError(f"{name}'s first argument must be the topic's name as a string literal{at(topic)}")
    return topic.name


def _mark(state: exp.Query, producer: exp.Expression) -> exp.Subquery:
    return exp.select(exp.Max(this=exp.column("sequence_id", table="__sd_state"))).from_(
        state.subquery("__sd_state")).where(
        exp.column("producer", table="__sd_state").eq(producer.copy())).subquery()


def expand_state_functions(tree: exp.Expression, state_for: StateFor, pushed_for: PushedFor) -> exp.Expression:
    """Replace the state functions of a query with subqueries over the topic's recovered state.

    Example:
        >>> import sqlglot
        >>> state = lambda topic: sqlglot.parse_one("SELECT 'p1' AS producer, 5 AS sequence_id")
        >>> expand_state_functions(sqlglot.parse_one("SELECT last_sequence_id('t', 'p1')"), state,
        ...                        lambda t, p: None).sql()
        "SELECT COALESCE((SELECT MAX(__sd_state.sequence_id) FROM (SELECT 'p1' AS producer, 5 AS sequence_id) AS __sd_state WHERE __sd_state.producer = 'p1'), -1)"
    """
    tree = tree.copy()
    for table in list(tree.find_all(exp.Table)):
        if isinstance(table.this, exp.Anonymous) and table.this.name.lower() == "producer_state":
            topic = _topic_argument(table.this, "producer_state", (1,))
            table.replace(state_for(topic).subquery(table.alias or "producer_state"))
    for call in calls(tree, "last_sequence_id"):
        topic = _topic_argument(call, "last_sequence_id", (2,))
        call.replace(exp.func("coalesce", _mark(state_for(topic), call.expressions[1]), exp.convert(-1)))
    for call in calls(tree, "dup_status"):
        topic = _topic_argument(call, "dup_status", (3, 4))
        producer, sequence_id = call.expressions[1], call.expressions[2]
        mark = _mark(state_for(topic), producer)
        pushed = None
        if isinstance(producer, exp.Literal):
            pushed = pushed_for(topic, producer.name)
        unknown = [exp.If(this=exp.and_(sequence_id <= pushed, exp.or_(mark.is_(exp.null()), sequence_id > mark)),
                          true=exp.Literal.string("UNKNOWN"))] if pushed is not None else []
        call.replace(exp.Case(ifs=[
            exp.If(this=exp.or_(producer.is_(exp.null()), sequence_id.is_(exp.null())), true=exp.null()),
            *unknown,
            exp.If(this=sequence_id.copy() <= mark.copy(), true=exp.Literal.string("DUP")),
        ], default=exp.Literal.string("NOT_DUP")))
    for name in ("is_not_dup",):
        if calls(tree, name):
            raise RewriteError(f"{name} works only in INSERT INTO <topic> SELECT ... WHERE {name}(...)")
    return tree
