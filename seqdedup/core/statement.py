"""Running one ``INSERT ... WHERE is_not_dup(...)``: the steps of ``sql.plan`` on an engine, in one commit.

The runner takes the topic's state from memory (``Writer.state``), keeps the state following its policies (R10
status, R11 purge), runs the engine's plan (``EngineAdapter.PLAN``; a statement the window plan cannot settle in
one pass runs the exceptions plan), writes the run log (R5) and a snapshot when one is due (R8), publishes, and
moves the state in memory forward. Nothing here touches a row in Python: the per-producer outcome is the only
thing that crosses to Python, one row per producer.
"""
from __future__ import annotations

import datetime as dt
import logging
import random
import re
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from seqdedup.catalog.names import HIGHEST, PRODUCER, RESERVED, SEQUENCE_ID
from seqdedup.catalog.schema import STATEMENTS, SYSTEM_COLUMNS, arrow_schema, catalog_table
from seqdedup.catalog.state import SnapshotHeader
from seqdedup.errors import (CommitConflict, EngineError, InvalidEntryError, RewriteError, SeqdedupError, TopicError,
                             at)
from seqdedup.sql import plan, rewrite

from . import compaction, leases
from .compaction import Compaction
from ..failpoints import failpoint
from .results import ProducerCount, StatementResult
from .topic_state import TopicState, marks_table, unmarked
from .turns import AFTER, Turns
from .writer import Commit, Scratch, Writer


#: The values that differ from one statement to the next are parameters (``EngineAdapter.parameters``), so that a
#: statement's SQL is built and generated once per shape: the base position, the commit, the time, the id.
BASE, COMMIT = (exp.Placeholder(this=name) for name in ("__sd_base", "__sd_commit"))
NOW = exp.cast(exp.Placeholder(this="__sd_now"), "timestamp")
#: The marks as a map, where a plan takes them so (``EngineAdapter.MARKS_AS_MAP``).
MARKS = exp.Placeholder(this="__sd_marks")
#: The trees of statements' steps, by (shape, step), kept from one statement to the next (at most KEPT of them).
_KEPT: OrderedDict[tuple, exp.Expression] = OrderedDict()
_KEPT_LOCK = threading.Lock()
KEPT = 512
#: Snapshots taken and what retention removes, one INFO line each, topic first.
_log = logging.getLogger("seqdedup.snapshots")

#: Why a statement whose source gave other rows on a second read is refused.
CHANGED = ("the statement's SELECT gave other entries when read a second time (a non-deterministic expression such as "
           "rand(), a sample, or a source that changed during the statement): seqdedup cannot decide entries that "
           "change under it. Materialize the SELECT into a table first. Nothing was written")
#: The words of an engine error about computing a value (not a full disk, a lost file or a lock).
COMPUTING = re.compile(r"overflow|out of range|cast|conver|divi|arithmetic|invalid input|numeric", re.IGNORECASE)
#: The outcome's columns as Arrow reads them (``sql.plan.OUTCOME``).
OUTCOME = pa.schema([("producer", pa.string()), ("sent", pa.int64()), ("written", pa.int64()),
                     ("duplicates", pa.int64()), ("first_position", pa.int64()), ("last_position", pa.int64()),
                     ("highest", pa.int64()), ("out_of_order", pa.int64())])


class _Unsettled(EngineError):
    """A plan's query failed while computing the entries: whose expression failed is told once the commit is rolled
    back (DuckDB reads nothing more in a transaction an error aborted)."""

    def __init__(self, error: EngineError):
        super().__init__(str(error))
        self.error = error


@dataclass
class Outcome:
    """What a plan did: per producer (``OUTCOME``), the log's new end, and the decision rounds it took."""

    producers: pa.Table
    end: int
    rounds: int
    table: exp.Table | None = None      # the outcome as an engine table, when the plan made one


class Run:
    """One statement on one topic (``run`` below is the whole of it)."""

    def __init__(self, session, statement: rewrite.DedupInsert):
        self.session, self.statement = session, statement
        self.written = statement        # the statement as written (``statement`` may read its rows from a table)
        self.writer: Writer = session.writer
        self.adapter = session.adapter
        self.ref = session.ref(statement.target)
        self.shape: tuple = ()      # what the steps' SQL depends on besides the parameters (see ``kept``)
        self.scratch: Scratch | None = None
        self.bound: dict = {}       # parameters a plan's steps bind besides the statement's (the marks as a map)
        self.published: tuple[TopicState, int] | None = None     # the state and number of the commit it published

    def kept(self, step: str, build) -> exp.Expression:
        """The tree of a step, built once per shape of statement and kept: a producer sending one entry after
        another, or a stream's micro-batches, run the same SQL text each time (only the parameters change)."""
        # (the scratch tables made so far are in the key: a step reads them by name, and which were made depends on
        # the path the statement took, a policy's snapshot or a plan's retry)
        key = (self.shape, step, tuple(self.scratch.names) if self.scratch else ())
        with _KEPT_LOCK:
            tree = _KEPT.get(key)
            if tree is not None:
                _KEPT.move_to_end(key)
                return tree
        tree = build()
        tree.meta["kept"] = True
        with _KEPT_LOCK:
            _KEPT[key] = tree
            while len(_KEPT) > KEPT:
                _KEPT.popitem(last=False)
        return tree

    # --- checks that need no rows ------------------------------------------------------------------------------

    def check(self, state: TopicState) -> tuple[list[str], list[str]]:
        """Types and shape, read from the SELECT without running it: the producer a string, ids integers, the
        values fitting the topic's columns, no column named like seqdedup's own. Returns (targets, value columns)."""
        statement, adapter = self.statement, self.adapter
        try:     # one look at the SELECT: the values, then is_not_dup's arguments as written (before any COALESCE)
            both = adapter.query_columns(self.described())
            count = len(statement.arguments.expressions)
            columns, types = both[:-count], dict(both[-count:])
        except EngineError:     # one part at a time, for the error about the part that fails
            columns, types = None, dict(self.describe(self.kept("arguments", lambda: statement.arguments)))
        ids = "an integer: CAST it to BIGINT (sequence ids are signed 64-bit, 0 to 9223372036854775807)"
        checks = ((rewrite.ARGUMENTS[0], "producer", adapter.STRING_TYPES, "a string: CAST it to STRING"),
                  (rewrite.ARGUMENTS[1], "sequence_id", adapter.INTEGER_TYPES, ids),
                  (rewrite.ARGUMENTS[2], "highest_sequence_id", adapter.INTEGER_TYPES, ids))
        for column, role, allowed, fix in checks:
            kind = types.get(column)
            if kind is None:
                continue
            base = re.split(r"[( ]", kind.strip('"'), maxsplit=1)[0].upper()    # STRING COLLATE UTF8_LCASE: STRING
            if base not in allowed | adapter.NULL_TYPES:
                raise InvalidEntryError(f"is_not_dup's {role} argument has type {kind.upper()}; it must be {fix}")
        if columns is None:
            columns = self.describe(self.kept("values", lambda: statement.values))
        names = [name for name, _ in columns]
        ours = {e.alias for e in statement.values.expressions if isinstance(e, exp.Alias)}
        clash = [n for n in names if (n.lower().startswith(RESERVED) and n not in ours) or names.count(n) > 1]
        if clash:
            raise RewriteError(f"the SELECT gives the column {clash[0]!r}; names starting with {RESERVED} are "
                               "seqdedup's own: rename it (AS ...)")
        values = [n for n in names if n not in statement.key_columns]
        return self._targets(state, values), values

    def described(self) -> exp.Select:
        """The statement's values, then is_not_dup's arguments as written: what ``check`` reads the types of."""
        return self.kept("described", lambda: self.statement.values.select(*self.statement.arguments.expressions))

    def describe(self, query: exp.Select) -> list[tuple[str, str]]:
        """The columns of a part of the statement, read without running it. The engine's error about it (a typo in
        a column or table name) speaks of the user's statement: its first sentence, where the name stands in the
        user's SQL, and that SQL; never the rewritten query, whose names the user never wrote."""
        try:
            return self.adapter.query_columns(query)
        except EngineError as error:
            lines = str(error).split("\n")
            said = lines[0]
            for noise in (" SQLSTATE", "; line "):
                said = said.split(noise)[0]
            hint = next((line.strip() for line in lines[1:3] if line.startswith(("Candidate", "Did you mean"))), "")
            words = set(re.findall(r"[\w$]+", said))
            named = [n for n in self.statement.source.find_all(exp.Column, exp.Table) if n.name in words]
            where = at(named[0]) if named else ""
            raise EngineError(f"{said.rstrip('.!')}{where}{' (' + hint.rstrip('.') + ')' if hint else ''}, in the "
                              f"statement: {self.statement.source.sql(dialect=self.session.dialect)}") from None

    def _targets(self, state: TopicState, values: list[str]) -> list[str]:
        topic, statement = state.topic, self.statement
        user_columns = [name for name, _ in topic.user_columns]
        if statement.columns is None:
            targets = user_columns
        else:
            lowered = {c.lower(): c for c in user_columns}
            unknown = [c for c in statement.columns if c.lower() not in lowered]
            if unknown:
                raise TopicError(f"topic {topic.ref.key} has no columns {unknown}; its columns are {user_columns} "
                                 f"(system columns {list(SYSTEM_COLUMNS)} are written by seqdedup)")
            targets = [lowered[c.lower()] for c in statement.columns]
            repeated = sorted({c for c in targets if targets.count(c) > 1})
            if repeated:
                raise TopicError(f"the INSERT lists the columns {repeated} more than once; list each column once")
        if len(values) != len(targets):
            raise TopicError(f"the SELECT gives {len(values)} values per entry but topic {topic.ref.key} takes "
                             f"{len(targets)} ({', '.join(targets)}); list the columns to write, in order")
        return targets

    def refuse_invalid(self) -> None:
        """R4: NULL producer or ids, negative ids, highest below lowest: an InvalidEntryError naming the first such
        entry (run when a plan found some; reads the keys again, which only an error pays for)."""
        p, s, h = (exp.column(c) for c in (PRODUCER, SEQUENCE_ID, HIGHEST))
        problems = [
            (p.is_(exp.null()), "a NULL producer", "give every entry a producer name"),
            (s.is_(exp.null()), "a NULL sequence_id", "give every entry a sequence id"),
            (exp.or_(s < 0, h < 0), "a negative sequence id", "sequence ids are 0 or more (64-bit signed)"),
            (exp.or_(s > plan.MAX_ID, h > plan.MAX_ID), "a sequence id above 9223372036854775807",
             "sequence ids are signed 64-bit"),
            (h < s, "highest_sequence_id below sequence_id",
             "a batch entry's highest id must be at least its lowest id"),
        ]
        keys = self.statement.keys.subquery("k")
        counts = self.adapter.fetchall(exp.select(*[exp.func("count_if", c.copy()) for c, _, _ in problems]).from_(
            keys.copy()))[0]
        for (condition, what, fix), count in zip(problems, counts):
            if count:
                example = self.adapter.fetchall(
                    exp.select(p, s, h).from_(keys.copy()).where(condition).order_by(p, s).limit(1))[0]
                raise InvalidEntryError(
                    f"{count} entr{'y has' if count == 1 else 'ies have'} {what} (first: producer={example[0]!r}, "
                    f"sequence_id={example[1]}, highest_sequence_id={example[2]}); {fix}. Nothing was written")
        raise InvalidEntryError("an entry is invalid (NULL producer or id, negative id, or highest below lowest), "
                                "but the source gave none when read again; materialize it first. Nothing was written")

    def failing(self, error: EngineError) -> EngineError:
        """An engine error while computing the entries (after the commit was rolled back): one of the user's
        expressions failing on some row (an overflow, a bad cast, a division by zero), and the error says where to
        look; or, where the user's expressions alone compute on every row, one of seqdedup's own, and the error says
        so (never "fix your arguments" for a valid statement)."""
        if not self.own_expressions_fail():
            if not COMPUTING.search(str(error)):     # the engine failed otherwise (a full disk): as it said
                return error
            return EngineError(
                f"seqdedup's own query failed on a valid statement: {str(error).rstrip('.!')}. This is a defect of "
                "seqdedup, not of the statement: please report it with this message. Nothing was written")
        return EngineError(
            f"could not compute the statement's entries: {str(error).rstrip('.!')}. Fix the expression that fails, "
            f"among is_not_dup's arguments{at(self.statement.call)}, the WHERE conditions and the ORDER BY (sequence "
            "ids must fit signed 64-bit: 0 to 9223372036854775807). Nothing was written")

    def own_expressions_fail(self) -> bool:
        """Whether the statement's own expressions (its values, is_not_dup's arguments, its WHERE and ORDER BY),
        computed alone on every row, fail: one aggregate that needs every column of every row (a hash of them)."""
        values = self.written.values
        columns = [exp.column(s.alias_or_name) for s in values.selects]
        try:
            self.adapter.fetchall(exp.select(exp.Max(this=exp.func(self.adapter.KEY_HASH, *columns))).from_(
                values.subquery("v")))
        except EngineError:
            return True
        return False

    # --- the plans ---------------------------------------------------------------------------------------------

    def window(self, state: TopicState, commit: Commit, targets: list[str], values: list[str],
               scratch: Scratch) -> Outcome | None:
        """The window plan (see sql/plan/window.py): one pass. None when a batch entry straddles (undecided)."""
        adapter, statement = self.adapter, self.statement
        checked = state.enabled
        marks, seen = self.marks(state, scratch, checked, inline=True)
        late = checked and statement.ordered     # (unordered, arrival is id order: nothing comes late)
        gather = adapter.fits_one_task(self.described())     # (its size: that of the values, a little more)
        # (a small statement's cost is its fixed costs, a large one's is per row: see EngineAdapter.constant)
        base = adapter.constant(BASE) if gather else BASE
        refuse = plan.refusal(adapter.RAISE_ERROR) if adapter.RAISE_ERROR else None

        def insert_for(rows: exp.Expression) -> exp.Insert:
            return plan.insert_rows(self.ref.table, targets, values, rows, NOW, COMMIT)

        def decide_and_write(source: exp.Select):
            decided = self.kept(f"window {source is statement.values} {gather} {marks is MARKS}", lambda:
                                plan.window_decisions(source, marks, statement.order, base=base,
                                                      partitions=adapter.PARTITIONS, number=adapter.row_number(),
                                                      checked=checked, late=late, seen=seen, gather=gather,
                                                      refuse=refuse))
            return adapter.write_decided(self.ref, decided, plan.ACCEPTED, insert_for, plan.window_metrics(seen),
                                         plan.window_outcome(late=late), plan.LAST, proceed=_settled,
                                         name=scratch.name("__sd_decided"))

        written = None
        try:
            with adapter.parameters(self.bound):
                written = decide_and_write(statement.values)
        except EngineError as error:
            adapter.discard_commit_rows(self.ref)
            if plan.REFUSED not in str(error):
                # Spark 4.3 fails to run some plans whole (a window over a cross join with a UNION ALL: "cannot
                # assign instance of DefaultSerializationProxy"): the statement's rows are read once into a scratch
                # table and decided from there; an error of the user's own expressions fails again, here, and is
                # reported.
                try:
                    rows = scratch.table("__sd_values", statement.values)
                    with adapter.parameters(self.bound):
                        written = decide_and_write(exp.select("*").from_(rows))
                except EngineError as again:
                    adapter.discard_commit_rows(self.ref)
                    if plan.REFUSED not in str(again):
                        raise _Unsettled(again) from again
        if written is None:     # the query met an invalid entry (``refuse``): counted and named here
            self.refuse_invalid()
        metrics = written.metrics
        if metrics.get("unseen"):
            adapter.discard_commit_rows(self.ref)
            raise EngineError(CHANGED)
        if metrics["invalid"]:
            adapter.discard_commit_rows(self.ref)
            self.refuse_invalid()
        if metrics["undecided"]:
            adapter.discard_commit_rows(self.ref)
            return None
        producers = _outcome_table(written.outcome)
        end = max(state.end, metrics["end"] or 0)
        return Outcome(producers, end, 1)

    def marks(self, state: TopicState, scratch: Scratch, checked: bool, *,
              inline: bool = False) -> tuple[exp.Expression | None, bool]:
        """The marks a plan joins as a relation (None: no producer has one), and whether they are only those of
        the producers a first read of the statement carried (``seen``: a semi-join of a large state; then a
        relation even when empty, so that an entry of a producer that read did not carry is caught). ``inline``
        (the window plan): a few marks come as a map, bound to the parameter ``__sd_marks`` (``MARKS_AS_MAP``)."""
        adapter = self.adapter
        above = adapter.SEMI_JOIN_ABOVE
        seen = checked and above is not None and state.marks.num_rows > above
        if not seen and not (checked and state.marks.num_rows):
            return None, False
        table = self.carried_marks(state) if seen else state.marks.table
        if inline and 0 < table.num_rows <= (adapter.MARKS_AS_MAP or 0):
            self.bound[MARKS.name] = adapter.marks_map(table)
            return MARKS, seen
        return scratch.relation("__sd_marks", table), seen

    def carried_marks(self, state: TopicState) -> pa.Table:
        """The marks of the producers the statement carries, and a row with no mark for each that has none: a
        semi-join of a large state, so that the engine gets the few marks the statement needs."""
        carried = self.adapter.fetch_arrow(self.kept("carried", lambda: plan.carried_producers(self.statement.keys)))
        names = carried.column(0).cast(pa.string())
        found = state.marks.lookup(names)
        return pa.concat_tables([found, unmarked(pc.filter(names, pc.invert(
            pc.is_in(names, value_set=found.column("producer")))))])

    def exceptions(self, state: TopicState, commit: Commit, targets: list[str], values: list[str],
                   scratch: Scratch) -> Outcome:
        """The exceptions plan (see sql/plan/exceptions.py): the statement's rows read once, the decision on their keys,
        then one filtered write.

        Every later step reads the rows of that one reading: a SELECT read again may give other rows (a sample,
        ``rand()`` or a Python function among its expressions, a file replaced meanwhile), and a write decided on one
        reading and made from another could write an id twice."""
        adapter, kept = self.adapter, self.kept
        try:
            rows = scratch.table("__sd_values", self.statement.values)
        except EngineError as error:
            raise _Unsettled(error) from error
        statement = self.statement = self.statement.over(rows)
        keys = statement.keys
        marks, seen = self.marks(state, scratch, state.enabled)
        producers = scratch.name("__sd_producers")
        try:
            producers = adapter.create_temp_table(producers, kept(f"producers {seen}", lambda: plan.producers(
                keys, marks, seen=seen)))
        except EngineError as error:
            raise _Unsettled(error) from error
        sums = ("__sd_invalid", "__sd_batches", "__sd_room") + ((plan.UNSEEN,) if seen else ())
        invalid, batches, room, *unseen, sparse = adapter.fetchall(kept(f"sums {seen}", lambda: exp.select(
            *[exp.func("coalesce", exp.Sum(this=exp.column(c)), exp.convert(0)) for c in sums],
            exp.func("count_if", exp.column("__sd_sparse"))).from_(producers.copy())))[0]
        if any(unseen):
            raise EngineError(CHANGED)
        if invalid:
            self.refuse_invalid()
        rounds = 1
        if not batches and not statement.ordered:
            exceptions = adapter.create_temp_table(scratch.name("__sd_exceptions"), kept(
                "repeats", lambda: plan.repeats(keys, producers)))
            counts = kept("repeat counts", lambda: plan.repeat_counts(keys, producers, exceptions))
        else:
            candidates = adapter.create_temp_table(scratch.name("__sd_candidates"), kept(
                "candidates", lambda: plan.candidates(keys, producers)))
            decisions, rounds = self.decide(candidates, bool(batches), scratch)
            exceptions = adapter.create_temp_table(scratch.name("__sd_exceptions"), kept(
                f"decided exceptions {rounds}", lambda: plan.decided_exceptions(decisions, statement.key_columns)))
            counts = kept(f"decided counts {rounds}", lambda: plan.decided_counts(decisions))
        outcome = adapter.create_temp_table(scratch.name("__sd_outcome"), kept(
            f"outcome {statement.ordered or bool(batches)} {rounds}",
            lambda: plan.outcome(producers, counts.subquery(), BASE)))
        kept_once = adapter.fetchall(kept("kept once", lambda: exp.select(
            exp.func("count_if", exp.column("__sd_kept").eq(1))).from_(exceptions.copy())))[0][0]
        windowed = bool(kept_once or sparse)
        try:
            adapter.write_topic(self.ref, kept(f"write {windowed}", lambda: plan.insert_rows(
                self.ref.table, targets, values, plan.write_rows(statement.values, producers, exceptions,
                                                                 statement.key_columns, values, base=BASE,
                                                                 windowed=windowed), NOW, COMMIT)))
        except EngineError as error:
            raise _Unsettled(error) from error
        table = adapter.fetch_arrow(kept("outcome rows", lambda: exp.select(*plan.OUTCOME).from_(
            outcome.copy()).order_by("producer")))
        return Outcome(_outcome_table(table), state.end + room, rounds, table=outcome)

    def rows(self, state: TopicState, commit: Commit, targets: list[str], values: list[str],
             scratch: Scratch) -> Outcome:
        """The row plan (see sql/plan/rows.py; an engine whose tables number their rows: ``PLAN`` "rows"): the
        statement's rows read once into a table with their producers' marks, the repeats and the entries that came late removed
        from it, then every candidate left written, its position its row's place in the table."""
        adapter, kept = self.adapter, self.kept
        statement = self.statement
        marked = state.marks.num_rows if state.enabled else 0
        large = adapter.SEMI_JOIN_ABOVE is not None and marked > adapter.SEMI_JOIN_ABOVE
        try:
            if large:       # the marks of the producers the rows carry, read from the rows (a semi-join)
                statement = self.statement = statement.over(scratch.table("__sd_values", statement.values))
                marks = scratch.relation("__sd_marks", self.carried_marks(state))
            else:
                marks = scratch.relation("__sd_marks", state.marks.table) if marked else None
            rows = adapter.create_temp_table(scratch.name("__sd_rows"), kept(
                f"rows {marks is None} {large}", lambda: plan.rows_once(statement.values, marks)))
        except EngineError as error:
            raise _Unsettled(error) from error
        first, last, invalid, batches = adapter.fetchall(kept("rows summary", lambda: plan.rows_summary(rows)))[0]
        if invalid:
            self.refuse_invalid()
        rounds, late = 1, statement.ordered or bool(batches)      # (out of order: a batch entry can overlap too)
        if not late:
            repeats = adapter.create_temp_table(scratch.name("__sd_repeats"), kept(
                "repeats", lambda: plan.row_repeats(rows)))
            adapter.execute(kept("drop repeats", lambda: plan.drop_repeats(rows, repeats)))
            dropped = kept("dropped repeats", lambda: plan.dropped_repeats(repeats))
        else:
            key_columns = [plan.ROW] + statement.key_columns
            candidates = adapter.create_temp_table(scratch.name("__sd_candidates"), kept(
                "row candidates", lambda: plan.row_candidates(rows, statement.key_columns)))
            decisions, rounds = self.decide(candidates, bool(batches), scratch, key_columns)
            adapter.execute(kept(f"drop rejected {rounds}", lambda: plan.drop_rejected(rows, decisions)))
            dropped = kept(f"dropped rejected {rounds}", lambda: plan.dropped_rejected(decisions))
        with adapter.parameters({plan.FIRST_ROW.name: first if first is not None else 0}):
            try:
                adapter.write_topic(self.ref, kept("write rows", lambda: plan.insert_rows(
                    self.ref.table, targets, values, plan.rows_written(rows, values, statement.key_columns, BASE),
                    NOW, COMMIT)), rows=0 if first is None else last - first + 1)
            except EngineError as error:
                raise _Unsettled(error) from error
            table = adapter.fetch_arrow(kept(f"row outcome {late} {rounds}", lambda: plan.row_outcome(
                rows, dropped, BASE, late=late).order_by("producer")))
        producers = _outcome_table(table)
        end = max([state.end] + [p for p in producers.column("last_position").to_pylist() if p is not None])
        return Outcome(producers, end, rounds)

    def decide(self, candidates: exp.Table, batches: bool, scratch: Scratch,
               key_columns: list[str] | None = None) -> tuple[exp.Table, int]:
        """The windowed decision of the candidates (their ``key_columns``: the statement's keys unless given), in
        rounds; after the first, only the producers with an undecided entry (a batch entry that straddles) take
        part."""
        key_columns, order = key_columns or self.statement.key_columns, self.statement.order
        decisions = self.adapter.create_temp_table(scratch.name("__sd_decisions"), self.kept(
            f"round 1 {batches}", lambda: plan.first_round(candidates, key_columns, order, batches=batches)))
        rounds = 1
        if not batches:
            return decisions, rounds
        pending_producers = scratch.table("__sd_pending", plan.undecided_producers(decisions))
        if not self.adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(pending_producers.copy()))[0][0]:
            return decisions, rounds
        pending = scratch.table("__sd_rounds", plan.rows_of(decisions, pending_producers, inside=True))
        while self.adapter.fetchall(exp.select(exp.Count(this=exp.Star())).from_(pending.copy()).where(
                exp.column(plan.ACCEPTED).is_(exp.null())))[0][0]:
            pending = scratch.table("__sd_rounds", plan.decision_round(pending, key_columns, order, batches=True))
            rounds += 1
        settled = exp.union(plan.rows_of(decisions, pending_producers, inside=False),
                            exp.select("*").from_(pending.copy()), distinct=False)
        return scratch.table("__sd_decided", settled), rounds

    # --- the whole statement -----------------------------------------------------------------------------------

    def __call__(self) -> StatementResult:
        writer, adapter, ref = self.writer, self.adapter, self.ref
        session = self.session
        with writer:
            try:
                state = writer.state(ref)            # an unknown topic is named before anything else
                self.shape = (writer.tag, self.statement.source.sql(), tuple(state.topic.user_columns),
                              adapter.PARTITIONS)
                targets, values = self.check(state)
                reading, statement_id = session.clock(), str(uuid.uuid4())
                now = state.stamp(reading)
                with writer.commit(ref, state.commit + 1) as commit, writer.scratch() as scratch:
                    self.scratch = scratch
                    before = state
                    state = follow_policies(self.session, state, commit, now, reading=reading)
                    self.shape += (scratch.depth, state.enabled, state.marks.num_rows > 0)
                    outcome = None
                    with adapter.parameters({"__sd_base": state.end, "__sd_commit": commit.number, "__sd_now": now}):
                        if adapter.PLAN == "window" or not state.enabled:
                            outcome = self.window(state, commit, targets, values, scratch)
                        if outcome is None:
                            outcome = (self.rows if adapter.PLAN == "rows" else self.exceptions)(
                                state, commit, targets, values, scratch)
                        # R14: no entry under a name a live producer holds (its next ids would fall on them)
                        leases.refuse_held_names(session, state.topic, outcome.producers.column("producer").to_pylist())
                        failpoint("after_topic_rows")
                        self.run_log(outcome, statement_id, now, commit)
                    written = pc.sum(outcome.producers.column("written")).as_py() or 0
                    delta = _delta(outcome.producers, now) if state.enabled else None
                    if state.enabled:       # R6: pushed, not yet persisted, until the commit is published
                        writer.pushed.claim(ref.key, dict(zip(delta.column("producer").to_pylist(),
                                                              delta.column("sequence_id").to_pylist())))
                    failpoint("after_run_log")
                    state = state.after(commit=commit.number, end=outcome.end, delta=delta,
                                        since_snapshot=state.since_snapshot + written)
                    snapshot_id, state = self.snapshot_if_due(state, commit, now)
                    if not outcome.producers.num_rows and state.header is before.header:
                        commit.abandon()        # no entry, no snapshot: nothing to publish (no empty commit)
                        state = before
                if not commit.abandoned:
                    writer.keep(ref, state)
                    self.published = (state, commit.number)
            except _Unsettled as failed:        # (told apart here, once the commit is rolled back)
                raise self.failing(failed.error) from failed.error
            finally:
                writer.pushed.release(ref.key)
        return StatementResult(
            topic=ref.key, statement_id=statement_id, snapshot_id=snapshot_id, rounds=outcome.rounds,
            commit=None if commit.abandoned else commit.number,
            producers=[ProducerCount(r["producer"], r["written"], r["duplicates"], r["first_position"],
                                     r["last_position"], r["out_of_order"]) for r in outcome.producers.to_pylist()])

    def compact_if_due(self) -> Compaction | None:
        """The topic's compaction, after a published commit whose number is a multiple of its
        ``compact_every_commits`` (where several drivers write, exactly one of them publishes that number). The
        statement is published whatever happens here: a compaction that fails is logged, and finished by the
        next."""
        if self.published is None or not self.adapter.TRACKS_COMMITS:
            return None
        state, commit = self.published
        if not compaction.due(state.topic.applied, commit):
            return None
        try:
            with self.writer:
                return compaction.compact(self.session, self.ref)
        except SeqdedupError as error:
            logging.getLogger("seqdedup").warning("could not compact %s after commit %s (the next compaction "
                                                  "finishes it): %s", self.ref.key, commit, error)
            return None

    def run_log(self, outcome: Outcome, statement_id: str, now: dt.datetime, commit: Commit) -> None:
        """R5: the per-producer counts, in the run log, in the statement's commit (from the outcome in memory: on
        Spark, with no job of its own)."""
        producers, schema = outcome.producers, arrow_schema(STATEMENTS)
        once = {"statement_id": statement_id, "topic": self.ref.key, "executed_at": now, "commit_id": commit.number,
                "attempt": self.adapter.attempt(self.ref)}
        rows = pa.table([pa.repeat(pa.scalar(once[f.name], f.type), producers.num_rows) if f.name in once
                         else producers.column(f.name) for f in schema], schema=schema)
        self.adapter.append_rows(catalog_table("seqdedup_statements"), rows)

    def snapshot_if_due(self, state: TopicState, commit: Commit, now: dt.datetime) -> tuple[int | None, TopicState]:
        """R8: every snapshot_interval_entries entries, or snapshot_interval_seconds after the last snapshot."""
        policies = state.topic.applied
        since = state.since_snapshot
        seconds = (now - state.header.taken_at).total_seconds()
        due = since >= policies.snapshot_interval_entries or (
            policies.snapshot_interval_seconds > 0 and since > 0 and seconds >= policies.snapshot_interval_seconds)
        if not due:
            return None, state
        state = take_snapshot(self.session, state, commit, kind="snapshot" if state.enabled else "disabled", now=now,
                              empty=not state.enabled)
        return state.header.snapshot_id, state


def take_snapshot(session, state: TopicState, commit: Commit, *, kind: str, now: dt.datetime,
                  empty: bool = False) -> TopicState:
    """Record ``state`` (``empty``: no producers, R10) in a snapshot at its end, in the open commit; the state
    with that snapshot as its last.

    A ``snapshot`` or ``purge`` is an increment of the last snapshot (the producers that changed since, and a
    tombstone for each one purged: ``TopicState.increment``) unless a full one is due: every
    ``full_snapshot_interval`` snapshots, when the chain's increments would hold more rows than the state has
    producers (so a chain never holds much more than twice the state), or with ``max_producers_in_snapshot`` set
    (the cap is on a whole snapshot, as Pulsar's). A full snapshot makes the older ones unneeded: they are removed
    with the commit (``snapshot_retention_minutes`` after they were taken), and so is the run log older than
    ``run_log_retention_minutes``."""
    policies, header = state.topic.applied, state.header
    increment = state.increment() if kind in ("snapshot", "purge") and not empty else None
    full = (increment is None or policies.max_producers_in_snapshot is not None
            or len(header.chain) >= policies.full_snapshot_interval
            or header.increment_rows + increment.num_rows > state.marks.num_rows)
    if full and kind == "snapshot" and header.purged:
        kind = "purge"      # a full snapshot after a purge: the state starts over from it (state.STARTS)
    elif not full and kind == "snapshot":
        kind = "increment"
    rows = None if empty else state.marks.table if full else increment
    cap = policies.max_producers_in_snapshot if full and kind in ("snapshot", "purge") else None
    snapshot_id = session.catalog.write_snapshot(
        state.topic.ref, rows, header=header, position=state.end, kind=kind, now=now, commit=commit.number,
        max_producers=cap, parent=None if full else header.snapshot_id)
    failpoint("after_snapshot_rows")
    written = 0 if rows is None else rows.num_rows if cap is None else min(rows.num_rows, cap)
    shape = f"{kind}, full" if full else f"increment of {header.snapshot_id}" if kind == "increment" else \
        f"{kind}, increment of {header.snapshot_id}"
    _log.info("[%s] took snapshot %s (%s, %s rows) at position %s in commit %s", state.topic.ref.key, snapshot_id,
              shape, f"{written:,}", f"{state.end:,}", commit.number)
    header = header.extended(snapshot_id, state.end, kind, now, commit.number, rows=0 if full else increment.num_rows,
                             full=full)
    if full:
        commit.removes(lambda: prune(session, state.topic.ref, header, policies, now))
    return state.after(commit=commit.number, header=header, since_snapshot=0,
                       marks=marks_table() if empty else None)


def prune(session, ref, header: SnapshotHeader, policies, now: dt.datetime) -> None:
    """What a full snapshot makes unneeded: the snapshots before it, and the run log past its retention. Not where
    several drivers write one catalog without transactions (Spark on a shared metastore): removing rows rewrites a
    whole catalog table, and would drop the rows another driver appends meanwhile."""
    if not session.adapter.SUPPORTS_TRANSACTIONS and not session.adapter.exclusive:
        return
    failpoint("before_prune")
    snapshots_before = now - dt.timedelta(minutes=policies.snapshot_retention_minutes)
    session.catalog.prune_snapshots(ref, header, snapshots_before)
    failpoint("during_prune")
    retention = policies.run_log_retention_minutes
    pruned = session.writer.database.run_log_pruned      # (topic -> when this process last pruned its run log)
    # at most once per tenth of the retention: the run log then holds at most 1.1 times it, and an engine whose
    # delete rewrites the table (Spark) does not rewrite it at every full snapshot
    run_log = ""
    if retention is not None and now - pruned.get(ref.key, dt.datetime.min) >= dt.timedelta(minutes=retention / 10):
        run_log_before = now - dt.timedelta(minutes=retention)
        session.catalog.prune_run_log(ref, run_log_before)
        pruned[ref.key] = now
        run_log = f" and the run log before {run_log_before:%Y-%m-%d %H:%M:%S}"
    start = header.start_id
    kept = f" (but snapshot {start}, where the state started over)" if start is not None and \
        start < header.snapshot_id else ""
    _log.info("[%s] pruned the snapshots before snapshot %s taken by %s%s%s", ref.key, header.snapshot_id,
              f"{snapshots_before:%Y-%m-%d %H:%M:%S}", kept, run_log)


def follow_policies(session, state: TopicState, commit: Commit, now: dt.datetime, *,
                    purge: bool = True, reading: dt.datetime | None = None, by_log: bool = True) -> TopicState:
    """The state follows its policies, in the open commit stamped ``now``. R10: disabling forgets, enabling starts
    empty at the log's end. R11 (with ``purge``): producers idle longer than the timeout leave the state, and a
    snapshot records it.

    A statement (``by_log``) judges idleness by the earlier of the clock's ``reading`` and the topic's latest
    publish time before this commit: both must say a producer has been idle past the timeout, so that one
    statement's clock, stepped forward, expires nobody (and a stamp it left, once the clock is back, neither). A
    purge asked for (``seqdedup snapshot``, ``purge_inactive``) judges by the clock it is asked at."""
    enabled = state.topic.applied.deduplication_enabled
    if state.header.enabled != enabled:
        state = take_snapshot(session, state, commit, kind="enabled" if enabled else "disabled", now=now,
                              empty=True)
    timeout = state.topic.applied.producer_inactivity_timeout      # None: never expire
    if purge and state.enabled and timeout is not None:
        judged = min(filter(None, (reading or now, state.published_at if by_log else None)))
        cutoff = judged - dt.timedelta(minutes=timeout)
        oldest = state.oldest_write()
        if oldest is not None and oldest < cutoff:
            marks = state.marks.table
            kept = marks.filter(pc.greater_equal(marks.column("last_publish_time"),
                                                 pa.scalar(cutoff, pa.timestamp("us"))))
            state = take_snapshot(session, state.after(commit=commit.number, marks=kept), commit, kind="purge",
                                  now=now)
    return state


def _settled(metrics: dict) -> bool:
    """Whether a window plan's rows may be written: no invalid entry and none undecided."""
    return not metrics["invalid"] and not metrics["undecided"] and not metrics.get("unseen")


def _outcome_table(table) -> pa.Table:
    """The outcome in its schema (engines return integer columns of several widths, or rows)."""
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pylist(list(table), schema=OUTCOME) if table else OUTCOME.empty_table()
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in OUTCOME], schema=OUTCOME).sort_by(
        "producer")


def _delta(producers: pa.Table, now: dt.datetime) -> pa.Table:
    """The marks a statement sets: each producer that wrote, at the highest id it wrote, written now."""
    wrote = producers.filter(pc.greater(producers.column("written"), 0))
    return marks_table(pa.table({"producer": wrote.column("producer"), "sequence_id": wrote.column("highest"),
                                 "last_publish_time": pa.repeat(pa.scalar(now, pa.timestamp("us")), wrote.num_rows)}))


#: How many times a statement decides again when another driver published its commit number first.
CONFLICT_RETRIES = 20


def run(session, tree: exp.Expression) -> StatementResult:
    """Run one ``INSERT ... WHERE is_not_dup(...)`` through ``session``. Where several drivers write a topic, the one
    whose commit number another took first decides again on the new state (optimistic, as Delta's commits); one that
    lost ``turns.AFTER`` race claims a turn, and the others wait for it; under steady contention a statement claims
    its turn before its first try (seqdedup/core/turns.py). The automatic compaction a commit may be due runs after the
    turn is given back."""
    tree = rewrite.expand_is_not_dup(tree, session.adapter.binary)
    turns = Turns.of(session, tree.target)
    # under steady contention, a turn claimed before the first try (seqdedup/core/turns.py)
    mine = turns.claim("before its first try, other drivers contending") if turns and turns.contended() else None
    try:
        for retry in range(CONFLICT_RETRIES + 1):
            if turns is not None:
                mine = turns.wait(mine)
            try:
                statement = Run(session, tree)
                result = replace(statement(), conflicts=retry)
                break
            except CommitConflict:
                if retry == CONFLICT_RETRIES:
                    raise
                if turns is not None:
                    turns.saw_contention()
                    if mine is None and retry + 1 >= AFTER:
                        mine = turns.claim()
                time.sleep(random.uniform(0, 0.05 * 2 ** min(retry, 5)))    # apart, so that the racers do not meet
    finally:
        if mine is not None:
            turns.release(mine)
    # (after the turn is given back: the other drivers need not wait for a compaction, which they write through)
    return replace(result, compaction=statement.compact_if_due())
