"""A fuzz of the rewriter: statements generated from a small grammar of ``INSERT INTO events ... SELECT ... WHERE
is_not_dup(...)``, with the call at the top level of the WHERE or nested where it cannot mean anything, random
arguments, conditions, sources, arrival orders and clauses, run on staged entries that sometimes hold NULL, negative
or out-of-order ids.

Each statement also runs, in Python, on the same rows: its source, WHERE and ORDER BY evaluated with SQL's
three-valued logic, then the reference model (``SequenceTracker.apply_statement``). The engine must do what that
says: write exactly the model's entries (the payload of each is one of the rows tied with it in arrival order), with
the model's per-producer counts and marks; or raise the error the grammar predicts (a RewriteError for a misplaced
call or clause, an InvalidEntryError for an argument of the wrong type or an invalid entry, a TopicError for a
SELECT that does not fit the topic) and change nothing. Anything else fails: a raw engine exception, an
EngineError, a wrong result, a partial write.

One topic serves every example of a run; each example's producers carry a prefix of their own, so examples never
share marks.
"""
from __future__ import annotations

import itertools
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, note, settings
from sqlglot import exp

from seqdedup import InvalidEntryError, RewriteError, TopicError
from seqdedup.catalog.schema import catalog_table
from seqdedup.catalog.state import literal
from seqdedup.udfs import Entry, Policies, SequenceTracker

from ..engines import Harness

#: Examples per run: a statement on Spark is a handful of jobs, so it gets few. SEQDEDUP_FUZZ_EXAMPLES=n runs n on
#: DuckDB, for a longer hunt.
EXAMPLES = {"duckdb": int(os.environ.get("SEQDEDUP_FUZZ_EXAMPLES", 150)), "spark": 8, "connect": 8}
_examples = itertools.count()


# --- SQL's three-valued logic, for the Python side --------------------------------------------------------------

def _null(f):
    return lambda *a: None if any(v is None for v in a) else f(*a)


def _and(*values):
    return False if any(v is False for v in values) else (None if any(v is None for v in values) else True)


def _or(*values):
    return True if any(v is True for v in values) else (None if any(v is None for v in values) else False)


def _in(value, items):
    if value is None:
        return None
    return True if value in items else (None if None in items else False)


def _max(*values):     # greatest() skips NULLs on both engines
    present = [v for v in values if v is not None]
    return max(present) if present else None


@dataclass(frozen=True)
class Expr:
    """A piece of SQL (``{P}`` stands for the example's producer prefix) and what it computes for a row."""

    sql: str
    fn: Callable[[dict], object]
    bad_type: bool = False            # an is_not_dup argument of a type the statement must refuse

    def text(self, prefix: str) -> str:
        return self.sql.replace("{P}", prefix)


# --- the grammar ---------------------------------------------------------------------------------------------------

PRODUCERS = [Expr("producer", lambda r: r["producer"]), Expr("lower(producer)", lambda r: r["producer"]),
             Expr("coalesce(producer, '{P}z')", lambda r: r["producer"] if r["producer"] is not None else r["P"] + "z"),
             Expr("NULL", lambda r: None),
             Expr("seq", lambda r: r["seq"], bad_type=True), Expr("length(producer)", lambda r: 0, bad_type=True)]
SEQUENCE_IDS = [Expr("seq", lambda r: r["seq"]), Expr("seq + 1", lambda r: _null(lambda s: s + 1)(r["seq"])),
                Expr("seq * 2", lambda r: _null(lambda s: s * 2)(r["seq"])),
                Expr("abs(seq)", lambda r: _null(abs)(r["seq"])), Expr("CAST(seq AS INT)", lambda r: r["seq"]),
                Expr("3", lambda r: 3), Expr("NULL", lambda r: None), Expr("highest", lambda r: r["highest"]),
                Expr("CAST(seq AS DOUBLE)", lambda r: r["seq"], bad_type=True),
                Expr("CAST(seq AS STRING)", lambda r: r["seq"], bad_type=True),
                Expr("seq > 0", lambda r: r["seq"], bad_type=True)]
HIGHEST = [None, Expr("highest", lambda r: r["highest"]), Expr("seq + 2", lambda r: _null(lambda s: s + 2)(r["seq"])),
           Expr("highest + 1", lambda r: _null(lambda h: h + 1)(r["highest"])), Expr("NULL", lambda r: None),
           Expr("CAST(NULL AS BIGINT)", lambda r: None), Expr("seq - 1", lambda r: _null(lambda s: s - 1)(r["seq"])),
           Expr("greatest(seq, highest)", lambda r: _max(r["seq"], r["highest"])),
           Expr("'9'", lambda r: 9, bad_type=True), Expr("true", lambda r: 1, bad_type=True)]


def conditions():
    """Extra WHERE conditions on the entry's columns: comparisons, IN lists, BETWEEN, IS NULL, NOT, OR."""
    k = st.integers(-1, 9)
    return st.one_of(
        st.builds(lambda k, op: Expr(f"seq {op} {k}", lambda r: _null(OPS[op])(r["seq"], k)), k, st.sampled_from(list(OPS))),
        st.builds(lambda ks: Expr(f"seq IN ({', '.join(map(str, ks))})", lambda r: _in(r["seq"], ks)),
                  st.lists(k, min_size=1, max_size=3)),
        st.builds(lambda ks: Expr(f"seq NOT IN ({', '.join(map(str, ks))})",
                                  lambda r: _null(lambda v: not v)(_in(r["seq"], ks))), st.lists(k, min_size=1, max_size=3)),
        st.builds(lambda a, b: Expr(f"seq BETWEEN {a} AND {b}", lambda r: _null(lambda s: a <= s <= b)(r["seq"])), k, k),
        st.sampled_from([
            Expr("highest IS NULL", lambda r: r["highest"] is None),
            Expr("highest IS NOT NULL", lambda r: r["highest"] is not None),
            Expr("producer IS NOT NULL", lambda r: r["producer"] is not None),
            Expr("producer IN ('{P}a', '{P}b')", lambda r: _in(r["producer"], (r["P"] + "a", r["P"] + "b"))),
            Expr("payload <> 'r3'", lambda r: r["payload"] != "r3"),
            Expr("NOT (seq = 4)", lambda r: _null(lambda s: s != 4)(r["seq"])),
            Expr("(seq < 3 OR producer = '{P}a')",
                 lambda r: _or(_null(lambda s: s < 3)(r["seq"]), _null(lambda p: p == r["P"] + "a")(r["producer"]))),
            Expr("true", lambda r: True),
        ]),
    )


OPS = {">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<>": lambda a, b: a != b, "=": lambda a, b: a == b}

PROJECTIONS = [Expr("payload", lambda r: r["payload"]), Expr("upper(payload)", lambda r: r["payload"].upper()),
               Expr("concat(payload, '!')", lambda r: r["payload"] + "!"),
               Expr("CAST(seq AS STRING)", lambda r: _null(str)(r["seq"])), Expr("'k'", lambda r: "k")]


@dataclass(frozen=True)
class Source:
    """A FROM clause over the staged rows and what it makes of them."""

    sql: str
    fn: Callable[[list[dict]], list[dict]]


def _grouped(rows):
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["producer"], r["seq"]), []).append(r)
    return [{**g[0], "highest": _max(*[r["highest"] for r in g]), "arrival": min(r["arrival"] for r in g),
             "payload": min(r["payload"] for r in g)} for g in groups.values()]


SOURCES = [
    Source("staging", lambda rows: rows),
    Source("staging AS s", lambda rows: rows),
    Source("(SELECT * FROM staging WHERE seq IS NULL OR seq <> 5) AS sub",
           lambda rows: [r for r in rows if r["seq"] is None or r["seq"] != 5]),
    Source("staging CROSS JOIN (SELECT 1 AS k UNION ALL SELECT 2 AS k) AS m", lambda rows: rows + rows),
    Source("staging JOIN (SELECT DISTINCT producer AS jp FROM staging) AS d ON producer = jp",
           lambda rows: [r for r in rows if r["producer"] is not None]),
    Source("(SELECT producer, seq, max(highest) AS highest, min(arrival) AS arrival, min(payload) AS payload "
           "FROM staging GROUP BY producer, seq) AS g", _grouped),
    Source("c", lambda rows: rows),        # a CTE, defined by the statement's WITH
]

#: ORDER BY keys: SQL, the value, descending, NULLs first (Spark's defaults: first when ascending, else last).
ORDER_KEYS = [("arrival", "arrival", False, True), ("arrival DESC", "arrival", True, False),
              ("seq DESC", "seq", True, False), ("payload", "payload", False, True),
              ("highest NULLS LAST", "highest", False, False), ("highest DESC NULLS FIRST", "highest", True, True)]

#: Where is_not_dup may not stand ({call}: the call, {c}: a condition): each is a RewriteError.
MISPLACED = ["{call} OR {c}", "NOT {call}", "CASE WHEN {call} THEN true ELSE false END", "coalesce({call}, false)",
             "{call} = true", "true IN ({call}, false)", "seq IN (SELECT seq FROM staging WHERE {call})",
             "EXISTS (SELECT 1 FROM staging WHERE {call})", "(SELECT {call})"]
#: Whole statements that misplace it, or clauses it cannot have: RewriteErrors too.
MISSHAPEN = [
    "INSERT INTO events SELECT {projection} FROM staging GROUP BY {projection} HAVING {call}",
    "INSERT INTO events SELECT {projection} FROM staging JOIN staging AS t ON {call}",
    "INSERT INTO events SELECT {call} FROM staging",
    "INSERT INTO events SELECT {projection} FROM (SELECT * FROM staging WHERE {call}) AS sub",
    "INSERT INTO events WITH c AS (SELECT * FROM staging WHERE {call}) SELECT {projection} FROM c",
    "INSERT INTO events SELECT {projection} FROM staging UNION ALL SELECT {projection} FROM staging WHERE {call}",
    "INSERT INTO events SELECT {projection} FROM staging WHERE {call} GROUP BY {projection}",
    "INSERT INTO events SELECT {projection} FROM staging WHERE {call} ORDER BY arrival LIMIT 3",
    "INSERT INTO events SELECT DISTINCT {projection} FROM staging WHERE {call}",
    "INSERT INTO events SELECT {projection} FROM staging WHERE {call} SORT BY seq",
    "INSERT OVERWRITE TABLE events SELECT {projection} FROM staging WHERE {call}",
    "INSERT INTO events SELECT {projection} FROM staging WHERE {c}",          # no is_not_dup: a plain insert
]


@dataclass
class Statement:
    """A generated statement and everything needed to predict what it does."""

    projection: Expr
    source: Source
    args: list[Expr]                      # is_not_dup's arguments
    conditions: list[Expr]                # the other WHERE conditions, joined by AND
    order: list[tuple]                    # ORDER BY keys (see ORDER_KEYS), or "ordinal" / "alias" for the projection
    shape: str = "plain"                  # plain | misplaced | misshapen
    template: str = ""                    # the misplaced condition or misshapen statement
    star: bool = False                    # SELECT * (wider than the topic)
    columns: bool = False                 # INSERT INTO events (payload)
    with_first: bool = False              # WITH c AS (...) INSERT ... (else INSERT ... WITH c AS (...) SELECT)
    grouping: list[int] = field(default_factory=list)   # how the WHERE's conjuncts are parenthesized

    def call(self, prefix: str) -> str:
        return f"is_not_dup({', '.join(a.text(prefix) for a in self.args)})"

    def sql(self, prefix: str) -> str:
        call, c = self.call(prefix), (self.conditions[0].text(prefix) if self.conditions else "seq > 1")
        projection = self.projection.text(prefix)
        if self.shape == "misshapen":
            return self.template.format(call=call, c=c, projection=projection)
        conjuncts = [f"({call})" if 0 in self.grouping else call] + [x.text(prefix) for x in self.conditions]
        if self.shape == "misplaced":
            conjuncts[0] = self.template.format(call=call, c=c)
        if len(conjuncts) > 1 and 1 in self.grouping:       # ((a) AND (b)) AND c: the call inside nested ANDs
            conjuncts = [f"({conjuncts[0]} AND {conjuncts[1]})", *conjuncts[2:]]
        if 2 in self.grouping:
            conjuncts = conjuncts[1:] + conjuncts[:1]
        select = "*" if self.star else (f"{projection} AS x" if ("alias",) in self.order else projection)
        order = [o[0] if len(o) > 1 else {"ordinal": "1", "alias": "x"}[o[0]] for o in self.order]
        body = (f"SELECT {select} FROM {self.source.sql} WHERE {' AND '.join(conjuncts)}"
                + (f" ORDER BY {', '.join(order)}" if order else ""))
        target = "INSERT INTO events" + (" (payload)" if self.columns else "")
        if self.source.sql != "c":
            return f"{target} {body}"
        cte = "WITH c AS (SELECT * FROM staging)"
        return f"{cte} {target} {body}" if self.with_first else f"{target} {cte} {body}"

    @property
    def expected_error(self) -> type | None:
        """The error the statement must raise whatever the rows, or None when that depends on the rows."""
        if self.shape != "plain" or not 2 <= len(self.args) <= 3:
            return RewriteError
        if self.star and ("ordinal",) in self.order:       # ORDER BY 1 of SELECT *: no column to name
            return RewriteError
        if any(a.bad_type for a in self.args):
            return InvalidEntryError
        if self.star:
            return TopicError
        return None


orders = st.lists(st.one_of(st.sampled_from(ORDER_KEYS), st.sampled_from([("ordinal",), ("alias",)])),
                  max_size=2, unique=True)
well_typed = st.tuples(st.sampled_from(PRODUCERS[:4]), st.sampled_from(SEQUENCE_IDS[:8]),
                       st.sampled_from(HIGHEST[:8])).map(lambda t: [a for a in t if a is not None])
any_typed = st.tuples(st.sampled_from(PRODUCERS), st.sampled_from(SEQUENCE_IDS), st.sampled_from(HIGHEST)).map(
    lambda t: [a for a in t if a is not None])
mostly_valid = st.tuples(st.sampled_from(PRODUCERS[:3]), st.sampled_from(SEQUENCE_IDS[:5]),
                         st.sampled_from(HIGHEST[:4])).map(lambda t: [a for a in t if a is not None])
wrong_arity = st.sampled_from([0, 1, 4]).flatmap(lambda n: st.lists(st.sampled_from(SEQUENCE_IDS), min_size=n, max_size=n))


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, drawn with the given weights (one_of would merge equal branches)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


#: Mostly statements that can write; some that must fail.
arguments = weighted((5, mostly_valid), (2, well_typed), (1, any_typed), (1, wrong_arity))
shapes = weighted((8, st.just(("plain", ""))), (1, st.sampled_from(MISPLACED).map(lambda t: ("misplaced", t))),
                  (1, st.sampled_from(MISSHAPEN).map(lambda t: ("misshapen", t))))


@st.composite
def statements(draw) -> Statement:
    shape, template = draw(shapes)
    star = draw(st.integers(0, 15)) == 0
    order = draw(orders)
    if star or (("alias",) in order and ("ordinal",) in order):
        order = [o for o in order if o != ("alias",)]       # SELECT * has no alias to order by
    return Statement(projection=draw(st.sampled_from(PROJECTIONS)), source=draw(st.sampled_from(SOURCES)),
                     args=draw(arguments), conditions=draw(st.lists(conditions(), max_size=2)), order=order,
                     shape=shape, template=template, star=star, columns=draw(st.booleans()),
                     with_first=draw(st.booleans()), grouping=draw(st.lists(st.integers(0, 2), max_size=3)))


rows = weighted((9, st.lists(st.builds(
    lambda p, s, width: (p, s, None if width is None else (s + width if s is not None else None)),
    st.sampled_from(["a", "b", "c"] * 6 + [None]),
    weighted((12, st.integers(0, 9)), (1, st.just(None)), (1, st.just(-1))),
    weighted((6, st.none()), (5, st.integers(0, 3)), (1, st.just(-1))),
), min_size=1, max_size=8)), (1, st.just([])))
prefixes = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 9)), max_size=3)


# --- the prediction ----------------------------------------------------------------------------------------------

def _sort_key(keys: list[tuple]):
    """A key that orders rows as ORDER BY ``keys`` does, NULLs placed as each key says (sort in one pass)."""
    class Desc:
        def __init__(self, value):
            self.value = value

        def __lt__(self, other):
            return other.value < self.value

        def __eq__(self, other):
            return self.value == other.value

    def key(values):
        parts = []
        for (_, _, desc, nulls_first), v in zip(keys, values):
            rank = (0 if nulls_first else 1) if v is None else (1 if nulls_first else 0)
            parts.append((rank, (Desc(v) if desc else v) if v is not None else 0))
        return parts
    return key


def predict(statement: Statement, staged: list[dict], model: SequenceTracker):
    """What the statement must do: ("error", class) or ("ok", model result, the entries with their tie groups)."""
    error = statement.expected_error
    if error is not None:
        return "error", error, None
    keys = []
    for o in statement.order:
        if len(o) > 1:
            keys.append((o[0], lambda r, c=o[1]: r[c], o[2], o[3]))
        else:       # the projection, by ordinal or alias: a string, never NULL but for CAST(seq AS STRING)
            keys.append((o[0], statement.projection.fn, False, True))
    candidates = [r for r in statement.source.fn(staged)
                  if _and(*[c.fn(r) for c in statement.conditions]) is True]
    entries, ordered = [], []
    for r in candidates:
        p, s, *h = (a.fn(r) for a in statement.args)
        h = h[0] if h else None
        entries.append(Entry(p, s, h, payload=statement.projection.fn(r)))
        coalesced = s if h is None else h
        order_values = [k[1](r) for k in keys]
        ordered.append((order_values, s, coalesced))
    key = _sort_key(keys + [("s", None, False, True), ("h", None, False, True)])
    order = sorted(range(len(entries)), key=lambda i: key(ordered[i][0] + [ordered[i][1], ordered[i][2]])) \
        if keys else None
    try:
        result = model.apply_statement(entries, order=order)     # validates every entry before it changes anything
    except InvalidEntryError:
        return "error", InvalidEntryError, None
    ties = [(e.producer, repr(ordered[i][0]) if keys else "", e.sequence_id, e.highest) for i, e in enumerate(entries)]
    return "ok", result, (entries, ties)


# --- the test ------------------------------------------------------------------------------------------------------

def _topic(harness, prefix: str) -> list[tuple]:
    return sorted((r for r in harness.session.run(
        exp.select("_producer", "_sequence_id", "_highest_sequence_id", "payload").from_("events")).rows
        if r[0] is not None and r[0].startswith(prefix)), key=repr)


def _state(harness, prefix: str) -> dict[str, int]:
    return {p: s for p, s, _ in harness.session.producer_state("events").rows if p.startswith(prefix)}


def _everything(harness) -> tuple:
    """What an error must leave as it was: every topic row, snapshot row and run-log row, and the claimed marks."""
    key = literal(harness.key("events"))
    reads = [exp.select("*").from_("events"),
             exp.select("*").from_(catalog_table("producer_sequences")).where(exp.column("topic").eq(key)),
             exp.select("*").from_(catalog_table("seqdedup_statements")).where(exp.column("topic").eq(key.copy()))]
    return tuple(sorted(harness.session.run(r).rows, key=repr) for r in reads)


def test_the_rewriter_does_what_the_model_says_or_fails_cleanly(engine, tmp_path_factory):
    where = (tmp_path_factory.getbasetemp() / "spark-home" if engine.family == "spark"
             else tmp_path_factory.mktemp("fuzz") / "fuzz.duckdb")
    harness = Harness(engine, str(where))
    harness.topic(snapshot_interval_entries=2)
    topic = harness.key("events")

    @settings(max_examples=EXAMPLES[engine.name], deadline=None, derandomize=engine.family == "spark",
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(statement=statements(), staged=rows, before=prefixes)
    def check(statement, staged, before):
        prefix = f"e{next(_examples)}_"
        model = SequenceTracker(Policies(snapshot_interval_entries=2))
        if before:
            sent = [(prefix + p, s) for p, s in before]
            harness.send(sent)
            model.apply_statement([Entry(p, s, payload=f"{p}/{s}") for p, s in sent], order=list(range(len(sent))))
        staged = [{"producer": prefix + p if p is not None else None, "seq": s, "highest": h, "arrival": i,
                   "payload": f"r{i}", "P": prefix} for i, (p, s, h) in enumerate(staged)]
        harness.stage([(r["producer"], r["seq"], r["highest"], r["payload"]) for r in staged])
        text = statement.sql(prefix)
        note(f"statement: {text}\nstaged: {[(r['producer'], r['seq'], r['highest']) for r in staged]}")
        outcome, expected, entries = predict(statement, staged, model)
        if outcome == "error":
            unchanged = _everything(harness)
            try:
                harness.session.sql(text)
            except expected:
                pass
            else:
                raise AssertionError(f"{text}: expected {expected.__name__}, it succeeded")
            assert _everything(harness) == unchanged, text
            assert all(harness.session.pushed.get(topic, r["producer"]) is None for r in staged), text   # R6
            return
        result = harness.session.sql(text)
        counts = {p.producer: (p.written, p.duplicates) for p in result.producers if p.written or p.duplicates}
        names = set(expected.written) | set(expected.duplicates)
        assert counts == {p: (expected.written.get(p, 0), expected.duplicates.get(p, 0)) for p in names}, text
        assert _state(harness, prefix) == model.state(), text
        _check_rows(_topic(harness, prefix), model, expected, entries, text)

    try:
        check()
    finally:
        harness.close()


def _check_rows(found: list[tuple], model: SequenceTracker, result, entries, text: str) -> None:
    """The topic holds the model's entries; each payload the statement wrote is that of a row tied with the entry
    the model wrote (same producer, arrival-order values and ids: the engine may pick any of them)."""
    statement_entries, ties = entries
    written = {i for i, position in enumerate(result.positions) if position is not None}
    earlier = [(e.producer, e.sequence_id, e.highest_sequence_id, e.payload) for e in model.log[:len(model.log) - len(written)]]
    expected_keys = Counter([r[:3] for r in earlier]
                            + [(statement_entries[i].producer, statement_entries[i].sequence_id,
                                statement_entries[i].highest) for i in written])
    assert Counter(r[:3] for r in found) == expected_keys, text
    payloads = Counter(r[3] for r in found)
    for r in earlier:
        payloads[r[3]] -= 1
    groups: dict = {}
    for i, tie in enumerate(ties):
        groups.setdefault(tie, [[], 0])[0].append(statement_entries[i].payload)
        groups[tie][1] += i in written
    none_left = object()        # (not None: a NULL payload is a payload, written as any other)
    for members, count in sorted(groups.values(), key=lambda g: len(set(g[0]))):
        for _ in range(count):
            choice = next((p for p in set(members) if payloads[p] > 0), none_left)
            assert choice is not none_left, (text, members, payloads)
            payloads[choice] -= 1
    assert not +payloads, (text, payloads)


def test_the_row_check_takes_a_null_payload_for_a_payload():
    """``_check_rows`` once took a written NULL payload for "none left to match" (a generated statement writing
    ``CAST(seq AS STRING)`` of a NULL ``seq`` failed it on DuckDB, 2026-11-30)."""
    from types import SimpleNamespace as Of

    entry = Of(producer="a", sequence_id=3, highest=3, payload=None)
    _check_rows([("a", 3, 3, None)], Of(log=[entry]), Of(positions=[1]), ([entry], [0]), "a NULL payload")
    with pytest.raises(AssertionError):         # and a payload the statement did not write still fails it
        _check_rows([("a", 3, 3, "other")], Of(log=[entry]), Of(positions=[1]), ([entry], [0]), "another payload")
