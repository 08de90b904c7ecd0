"""A dbt model as a topic: its SELECT gives the entries, its YAML the columns, its config the policies.

A run of a ``seqdedup_topic`` model is one statement, ``INSERT INTO <topic> (<columns>) <the model's SELECT>``, and
the SELECT carries its own ``WHERE is_not_dup(producer, sequence_id)``: the materialization never guesses which
columns name the producer and the ids. The first run creates the topic, with the columns the model's YAML types
(``data_type``) or, for those it leaves out, the types the SELECT returns. This module is the same on every
target; a target (``Target``) says how to open a seqdedup session, how to read the types a query returns, and in
which dialect its engine runs SQL. Nothing here imports dbt.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from seqdedup.catalog import ids
from seqdedup.catalog.policies import normalize
from seqdedup.catalog.schema import SYSTEM_COLUMNS
from seqdedup.errors import RewriteError, SeqdedupError, TopicError
from seqdedup.sql.dialects import SparkAnsi
from seqdedup.sql.rewrite import DEDUP_CALLS


class DbtSpark(SparkAnsi):
    """Spark SQL as a dbt model is written for both targets: double quotes name identifiers, as backticks do.

    dbt-duckdb renders ``ref()`` as ``"db"."main"."stg_events"`` and dbt-spark as `` `analytics`.`stg_events` ``,
    so one model text reads the same on both only when double quotes are identifiers (Spark's
    ``spark.sql.ansi.doubleQuotedIdentifiers``); string literals take single quotes.

    Example:
        >>> sqlglot.parse_one('SELECT "a" FROM "db"."main"."t" WHERE b = \\'x\\'', read=DbtSpark).sql(SparkAnsi)
        "SELECT `a` FROM `db`.`main`.`t` WHERE b = 'x'"
    """

    class Tokenizer(SparkAnsi.Tokenizer):
        QUOTES = ["'"]
        IDENTIFIERS = ["`", '"']


#: How a user asks for a full refresh of a topic on purpose (``seqdedup_full_refresh`` in the config). Without it,
#: ``--full-refresh`` leaves a topic's marks alone and the model runs as usual (the materialization logs that).
FORGET_MARKS = "forget_marks"


@dataclass
class TopicModel:
    """What the materialization hands over for one run of a topic model."""

    schema: str                       # the relation's schema: the topic's namespace
    name: str                         # the relation's identifier: the topic's name
    sql: str                          # the model's compiled SELECT, with its WHERE is_not_dup(...)
    columns: dict[str, str | None] = field(default_factory=dict)   # YAML column -> data_type (None: inferred)
    policies: dict[str, object] = field(default_factory=dict)      # seqdedup_policies: topic-level policies
    full_refresh: bool = False        # dbt's should_full_refresh() for this run, unless the materialization skipped it
    full_refresh_mode: str | None = None   # seqdedup_full_refresh: forget_marks, a full refresh asked for on purpose
    id_parts: int | None = None       # seqdedup_id_parts: a topic of composite ids (R19), fixed when it is created
    unique_id: str = ""               # the dbt node, for messages

    @classmethod
    def from_request(cls, request: dict) -> "TopicModel":
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in request.items() if k in names})

    @property
    def topic(self) -> str:
        """The topic's name as seqdedup reads it: ``namespace.name``, quoted where needed."""
        return exp.table_(exp.to_identifier(self.name), db=exp.to_identifier(self.schema)).sql(SparkAnsi)


@dataclass
class Outcome:
    """What a run of a topic model did: dbt shows ``message`` and keeps the counts in run_results.json."""

    topic: str
    written: int
    duplicates: int
    commit: int | None
    producers: int            # producers the statement had entries of
    created: bool             # whether this run created the topic

    @property
    def message(self) -> str:
        """
        Example:
            >>> Outcome("main.events", 9, 4, 2, 3, False).message
            'INSERT 9 (duplicates 4, commit 2)'
        """
        return f"INSERT {self.written} (duplicates {self.duplicates}, commit {self.commit})"


def engine_type(column: str, kind: str, dialect) -> exp.DataType:
    """A type as the engine names it, as a sqlglot type; a TopicError that says how to give it otherwise.

    Example:
        >>> engine_type("payload", "STRUCT(a INTEGER)", "duckdb").sql("spark")
        'STRUCT<a: INT>'
    """
    try:
        return exp.DataType.build(kind, dialect=dialect)
    except Exception:
        raise TopicError(f"the model's column {column} has the type {kind}, which seqdedup cannot read; give the "
                         "column a data_type in the model's YAML (a Spark SQL type such as STRING)") from None


class Target:
    """How seqdedup reaches one dbt target's engine. The bridges (``duckdb``, ``spark``) fill it in."""

    #: The sqlglot dialect the engine runs (what a macro's SQL is rendered in).
    DIALECT: object = None

    @contextlib.contextmanager
    def session(self) -> Iterator:
        """A seqdedup session on the target's database, for one request."""
        raise NotImplementedError
        yield

    def describe(self, query: exp.Query) -> list[tuple[str, exp.DataType]]:
        """(name, type) of the columns a query returns, without running it."""
        raise NotImplementedError

    def handle(self, request: dict) -> object:
        """Serve one request of the dbt package: ``run`` a topic model (an Outcome), read ``producer_state`` (SQL
        text of a subquery) or ``last_sequence_id`` (an int)."""
        action = request.get("action")
        with self.session() as session:
            if action == "run":
                return run(session, TopicModel.from_request(request), self.describe)
            if action == "producer_state":
                return producer_state_sql(session, request["topic"], self.DIALECT)
            if action == "last_sequence_id":
                return session.last_sequence_id(request["topic"], request["producer"])
        raise SeqdedupError(f"unknown request {action!r} from the seqdedup dbt package; the package and the seqdedup "
                            "Python package must be of the same version")


def parse_select(text: str, model: str = "the model") -> exp.Query:
    """The model's SQL as one query that calls is_not_dup; a RewriteError that says what to write otherwise.

    Example:
        >>> parse_select('SELECT payload FROM "main"."stg" WHERE is_not_dup(producer, seq)').sql(SparkAnsi)
        'SELECT payload FROM `main`.`stg` WHERE IS_NOT_DUP(producer, seq)'
        >>> parse_select("SELECT payload FROM stg")
        Traceback (most recent call last):
        seqdedup.errors.RewriteError: the model's SELECT has no WHERE is_not_dup(producer, sequence_id)...
    """
    try:
        trees = [t for t in sqlglot.parse(text.strip().rstrip(";"), read=DbtSpark) if t is not None]
    except sqlglot.errors.ParseError as error:
        raise RewriteError(f"{model}'s SQL does not parse as Spark SQL: {error}") from None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise RewriteError(f"{model}'s SQL must be one SELECT, whose rows are the topic's entries; put other "
                           "statements in hooks")
    if not any(call.name.lower() in DEDUP_CALLS for call in trees[0].find_all(exp.Anonymous)):
        raise RewriteError(
            f"{model}'s SELECT has no WHERE is_not_dup(producer, sequence_id): a seqdedup_topic model says which "
            "columns name the producer and the sequence id; add the condition, for example "
            "WHERE is_not_dup(producer, seq), or WHERE is_new(key) for a source with no stable ids (R20)")
    return trees[0]


def calls_is_not_dup(sql: str, dialect) -> str | None:
    """The function of ``DEDUP_CALLS`` a statement calls (the name followed by a parenthesis, outside strings
    and comments), or None.

    Example:
        >>> calls_is_not_dup('create view v as (select a from t where is_not_dup(p, s))', "duckdb")
        'is_not_dup'
        >>> calls_is_not_dup("select count(*) from duckdb_functions() where function_name = 'is_new'", "duckdb")
    """
    lowered = sql.lower()
    if not any(name in lowered for name in DEDUP_CALLS):       # (most statements: no tokenizing)
        return None
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return None                            # the engine says what is wrong with it
    names = (TokenType.VAR, TokenType.IDENTIFIER)
    return next((token.text.lower() for token, after in zip(tokens, tokens[1:])
                 if token.token_type in names and token.text.lower() in DEDUP_CALLS
                 and after.token_type == TokenType.L_PAREN), None)


def plain_model_refusal(node: dict, function: str = "is_not_dup") -> str:
    """Why a statement of a model that is not a topic may not call is_not_dup (or ``function``, is_new), and what
    to write instead (``node``: dbt's node info of the statement, empty outside a node).

    Example:
        >>> plain_model_refusal({"unique_id": "model.p.v", "materialized": "view"})[:80]
        'model.p.v (materialized as view) calls is_not_dup(), which means something only '
    """
    what = (f"{node['unique_id']} (materialized as {node.get('materialized') or 'unknown'})"
            if node.get("unique_id") else "this statement")
    return (f"{what} calls {function}(), which means something only in a seqdedup topic model: seqdedup rewrites it "
            "there into each (producer, sequence id) written once against the topic's state. Anywhere else it would "
            "fail when read, or run with weaker semantics, so it is refused before it runs and nothing was created. "
            "Materialize the model as a topic: {{ config(materialized='seqdedup_topic') }} (docs/guides/dbt.md)")


def without_dedup(query: exp.Query) -> exp.Query:
    """The query with its is_not_dup(...) (or is_new(...)) condition read as TRUE: what describes the columns it
    returns.

    Example:
        >>> without_dedup(parse_select("SELECT a FROM t WHERE is_not_dup(p, s) AND a > 0")).sql(SparkAnsi)
        'SELECT a FROM t WHERE TRUE AND a > 0'
    """
    return query.copy().transform(
        lambda node: exp.true() if isinstance(node, exp.Anonymous) and node.name.lower() in DEDUP_CALLS else node)


def topic_columns(model: TopicModel, returned: list[tuple[str, exp.DataType]]) -> dict[str, object]:
    """The topic's columns: what the SELECT returns, typed by the YAML's data_type where it gives one.

    Example:
        >>> m = TopicModel("main", "events", "", columns={"payload": "STRING", "_position": None})
        >>> {k: str(v) for k, v in topic_columns(m, [("payload", exp.DataType.build("INT"))]).items()}
        {'payload': 'STRING'}
    """
    declared = {name.lower(): kind for name, kind in model.columns.items()
                if name.lower() not in SYSTEM_COLUMNS}
    names = {name.lower() for name, _ in returned}
    stray = sorted(name for name, kind in declared.items() if kind and name not in names)
    if stray:
        raise TopicError(f"{model.unique_id or model.name}'s YAML gives a data_type to {stray}, which its SELECT does "
                         f"not return (it returns {[n for n, _ in returned]}); fix the YAML or the SELECT")
    repeated = sorted({n for n, _ in returned if [m.lower() for m, _ in returned].count(n.lower()) > 1})
    if repeated:
        raise TopicError(f"{model.unique_id or model.name}'s SELECT returns {repeated} more than once; give each "
                         "column its own name")
    return {name: declared.get(name.lower()) or kind for name, kind in returned}


def run(session, model: TopicModel, describe) -> Outcome:
    """One run of a topic model: create the topic on its first run, apply the config's policies, write the entries."""
    query = parse_select(model.sql, model.unique_id or model.name)
    topic = model.topic
    if model.full_refresh_mode not in (None, FORGET_MARKS):
        raise TopicError(f"{model.unique_id or model.name}: seqdedup_full_refresh is {model.full_refresh_mode!r}; the "
                         f"one way to forget a topic's marks on purpose is seqdedup_full_refresh: {FORGET_MARKS}")
    existing = topic_or_none(session, topic)
    # A full refresh forgets the marks only when asked for on purpose; otherwise it is a run like any other.
    if model.full_refresh and existing is not None and model.full_refresh_mode == FORGET_MARKS:
        forget_marks(session, existing)
    returned = describe(without_dedup(query))
    if existing is None:
        session.create_topic(topic, topic_columns(model, returned), **model.policies, id_parts=model.id_parts)
    else:
        same_ids(model, existing)
        apply_policies(session, existing, model.policies)
    insert = exp.insert(query, exp.to_table(topic, dialect=SparkAnsi), columns=[name for name, _ in returned])
    result = session.run(insert)
    return Outcome(topic=result.topic, written=result.written, duplicates=result.duplicates, commit=result.commit,
                   producers=len(result.producers), created=existing is None)


def same_ids(model: TopicModel, topic) -> None:
    """Refuse a model whose ``seqdedup_id_parts`` says another id shape than its topic was created with (R19: the
    shape is fixed at creation); a model that does not say takes its topic's."""
    if model.id_parts is not None and model.id_parts != topic.id_parts:
        raise TopicError(f"{model.unique_id or model.name}: seqdedup_id_parts is {model.id_parts}, but topic "
                         f"{topic.ref.key} was created with {ids.shape(topic.id_parts)}; a topic's id shape is fixed "
                         "when it is created (R19): to change it, write the model into a new topic (another name), "
                         "or set seqdedup_id_parts back")


def topic_or_none(session, topic: str):
    """The registered topic, or None when there is none of that name yet."""
    try:
        return session.topic(topic)
    except TopicError:
        return None


def apply_policies(session, topic, policies: dict[str, object]) -> None:
    """Set the config's policies that differ from the topic's own settings (one commit, only when one differs).
    A policy the config no longer names keeps its value: unset it with ``seqdedup_policies: {name: none}``."""
    stored = topic.settings.get("topic", {})
    changed = {}
    for key, value in policies.items():
        name, text = normalize(key, None if str(value).lower() in ("none", "null") else value)
        if stored.get(name) != text:
            changed[name] = text
    if changed:
        session.alter_topic(topic.ref.key, **changed)


def forget_marks(session, topic) -> None:
    """R10 on purpose: disabling deduplication forgets every producer's mark, enabling it again starts empty at the
    log's end. The topic-level setting it had is put back (None: unset, so the namespace's or global one applies)."""
    if not topic.applied.deduplication_enabled:
        return
    before = topic.settings.get("topic", {}).get("deduplication_enabled")
    session.alter_topic(topic.ref.key, deduplication_enabled=False)
    session.alter_topic(topic.ref.key, deduplication_enabled=before)


#: The columns of ``producer_state``, typed as the catalog types them (sqlglot's own type names).
STATE_COLUMNS = {"producer": "text", "sequence_id": "bigint", "last_publish_time": "timestamp"}


def producer_state_sql(session, topic: str, dialect) -> str:
    """``producer_state(topic)`` as a subquery of literal rows, in the engine's dialect: a plain dbt model can read
    it (the state is read once, when dbt renders the model).

    Example:
        >>> class Fake:
        ...     def producer_state(self, topic):
        ...         import datetime, types
        ...         return types.SimpleNamespace(rows=[("p1", 5, datetime.datetime(2026, 1, 1))])
        >>> producer_state_sql(Fake(), "events", "duckdb")
        "(SELECT CAST(producer AS TEXT) AS producer, CAST(sequence_id AS BIGINT) AS sequence_id, CAST(last_publish_time AS TIMESTAMP) AS last_publish_time FROM (VALUES ('p1', 5, CAST('2026-01-01 00:00:00' AS TIMESTAMP))) AS s(producer, sequence_id, last_publish_time))"
    """
    rows = session.producer_state(topic).rows
    casts = [exp.cast(exp.column(name), exp.DataType.build(kind)).as_(name) for name, kind in STATE_COLUMNS.items()]
    if rows:
        values = exp.values([tuple(exp.convert(v) for v in row) for row in rows], alias="s",
                            columns=list(STATE_COLUMNS))
        query = exp.select(*casts).from_(values)
    else:
        empty = exp.select(*[exp.null().as_(name) for name in STATE_COLUMNS])
        query = exp.select(*casts).from_(empty.subquery("s")).where(exp.false())
    return f"({query.sql(dialect=dialect)})"
