"""An entry's payload as a statement's plan reads it (R16, R18): its user columns as the write casts them from the
statement's values, or as a topic row holds them; and from them, its fingerprint (``EngineAdapter.fingerprint``)
and its columns as JSON (the ledger's ``entry``). Both are over every user column of the topic, in its order: a
column a statement does not write is NULL in its entries."""
from __future__ import annotations

from sqlglot import exp

from seqdedup.sql import plan

from .topic_state import TopicState


def _types(run, state: TopicState) -> list[tuple[str, exp.DataType]]:
    return [(name, exp.DataType.build(kind, dialect=run.adapter.DIALECT)) for name, kind in state.topic.user_columns]


def sent(run, state: TopicState, targets: list[str], values: list[str], table: str | None) -> list[exp.Expression]:
    """The user columns of an entry of the statement's rows (aliased ``table``): each value cast to its topic
    column's type, as the write casts it, or NULL."""
    by_target = {target.lower(): value for target, value in zip(targets, values)}
    return [exp.cast(exp.column(by_target[name.lower()], table=table) if name.lower() in by_target else exp.null(),
                     kind) for name, kind in _types(run, state)]


def stored(run, state: TopicState, table: str) -> list[exp.Expression]:
    """The user columns of a topic row (aliased ``table``)."""
    return [exp.column(exp.to_identifier(name, quoted=True), table=table) for name, _ in _types(run, state)]


def fingerprinted(state: TopicState) -> bool:
    """Whether the topic judges payload conflicts (R18): its entries have a fingerprint (``fingerprint``)."""
    return state.topic.applied.payload_conflicts != "ignore"


def kept_whole(state: TopicState) -> bool:
    """Whether the topic's ledger keeps the dropped entries' columns (``dropped_entries`` rows: ``entry``)."""
    return state.topic.applied.dropped_entries == "rows"


def fingerprint(run, state: TopicState, columns: list[exp.Expression]) -> exp.Expression | None:
    """The fingerprint of an entry of these user columns, where the topic judges payload conflicts (R18)."""
    if not fingerprinted(state):
        return None
    return run.adapter.fingerprint(list(zip(columns, [kind for _, kind in state.topic.user_columns])))


def entry(state: TopicState, targets: list[str], columns: list[exp.Expression]) -> exp.Expression | None:
    """The columns the statement writes as JSON, where the ledger keeps the entries (``dropped_entries`` rows)."""
    if not kept_whole(state):
        return None
    names = {name.lower(): (name, column) for (name, _), column in zip(state.topic.user_columns, columns)}
    return plan.ledger.entry_json([(target, names[target.lower()][1]) for target in targets])


def keys_only(state: TopicState) -> bool:
    """Whether what the statement keeps of a dropped entry is its keys alone: its payload neither judged (R18)
    nor kept in the ledger (R16's ``rows``)."""
    applied = state.topic.applied
    return applied.payload_conflicts == "ignore" and applied.ledger != "rows"


def judged(state: TopicState) -> bool:
    """Whether the statement sets its dropped entries apart: for a ledger of them (R16), or to judge their payloads
    (R18)."""
    applied = state.topic.applied
    return state.enabled and (applied.ledger is not None or applied.payload_conflicts != "ignore")
