"""The writer of one database in this process: everything that writes goes through it.

A ``Writer`` holds, for one session:

- the database's writer lock (``seqdedup.core.locks``): one write at a time per database, whichever session or thread;
- the claims of the statement in flight (R6, ``PushedMarks``), shared by every session of the database;
- the topics' states in memory (``seqdedup.core.topic_state``), shared by every session of the database while one is
  open, recovered on first use and checked before use where another process could have written;
- commits: ``with writer.commit(ref) as commit:`` opens a numbered commit of a table and publishes what was
  written inside it all at once (DuckDB: one transaction; Spark: one partition registration);
- scratch tables: ``with writer.scratch() as scratch:`` names temporary tables that are dropped at the end.

The statement path, producers, consumers, Kafka and file ingest, and the streaming sink all write through it.

Example:
    >>> import seqdedup
    >>> session = seqdedup.connect(":memory:")
    >>> _ = session.create_topic("events", {"payload": "STRING"})
    >>> writer = session.writer
    >>> with writer:
    ...     state = writer.state(session.ref("events"))
    >>> state.commit, state.end, state.marks.num_rows
    (1, 0, 0)
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator

from sqlglot import exp

from seqdedup.catalog.catalog import Catalog, TopicRef
from seqdedup.catalog.schema import CATALOG_TABLES, catalog_table, foreign_commits
from seqdedup.errors import CommitConflict, EngineError
from seqdedup.extensions.base import EngineAdapter

from ..failpoints import failpoint
from .locks import WriterLock, shared
from .topic_state import TopicState, catch_up, load

#: Commits lost to another driver, one INFO line each, topic first.
_log = logging.getLogger("seqdedup.commits")


class PushedMarks:
    """R6: ids accepted by statements that have not committed yet, per topic and producer.

    Pulsar's ``highestSequencedPushed`` minus its persisted twin: while a statement is in flight its ids are
    UNKNOWN to everyone else; when it commits they are persisted, and when it fails they fall back (are dropped).
    """

    def __init__(self) -> None:
        self._marks: dict[str, dict[str, int]] = {}   # topic -> producer -> highest id claimed, uncommitted
        self._lock = threading.Lock()

    def claim(self, topic: str, marks: dict[str, int]) -> None:
        with self._lock:
            self._marks[topic] = dict(marks)

    def release(self, topic: str) -> None:
        with self._lock:
            self._marks.pop(topic, None)

    def get(self, topic: str, producer: str) -> int | None:
        with self._lock:
            return self._marks.get(topic, {}).get(producer)

    def claims(self, topic: str) -> dict[str, int]:
        with self._lock:
            return dict(self._marks.get(topic, {}))


@dataclass
class Database:
    """What every session on one database in this process shares, besides the lock (``locks._Shared``)."""

    pushed: PushedMarks = field(default_factory=PushedMarks)
    states: dict[str, TopicState] = field(default_factory=dict)   # topic key -> its state, as of its last commit
    sessions: int = 0             # open sessions: the states are dropped with the last (another process may write)
    run_log_pruned: dict = field(default_factory=dict)   # (topic key, log) -> when the run log or the ledger
                                                         # was last pruned (retention)


_databases: dict[str, Database] = {}
_databases_lock = threading.Lock()


@dataclass
class Commit:
    """One open commit of a table."""

    ref: TopicRef
    number: int
    cleanups: list = field(default_factory=list)   # what the commit makes unneeded, removed with it (``removes``)
    abandoned: bool = False                         # nothing is published (``abandon``)

    def abandon(self) -> None:
        """Publish nothing: the commit wrote nothing a reader could tell (a statement without entries, which took no
        snapshot). Its topic rows are discarded and its number stays free for the next commit (a number left
        unpublished below a published one would count as a failed commit forever)."""
        self.abandoned = True

    def removes(self, cleanup) -> None:
        """Run ``cleanup`` (a function) with the commit: on an engine with transactions inside it, so that what
        the commit makes unneeded goes in the same commit; elsewhere once it is published (before, a crash would
        leave neither the old rows nor the new ones)."""
        self.cleanups.append(cleanup)


class Scratch:
    """Temporary tables of one piece of work, named apart from every other session's and dropped together.

    Names are the same from one piece of work to the next (the session's tag, how deep this scratch is nested in
    another of the session's, and the table's place in it), so that the SQL that reads them is too."""

    def __init__(self, adapter: EngineAdapter, tag: str, depth: int = 0):
        self.adapter, self.tag, self.depth = adapter, tag, depth
        self.names: list[str] = []

    def name(self, prefix: str) -> str:
        name = f"{prefix}_{self.tag}_{self.depth}_{len(self.names)}"
        self.names.append(name)
        return name

    def table(self, prefix: str, query: exp.Expression) -> exp.Table:
        """A temporary table of ``query``'s rows, computed once."""
        return self.adapter.create_temp_table(self.name(prefix), query)

    def relation(self, prefix: str, arrow_table) -> exp.Table:
        """A temporary relation of an Arrow table's rows."""
        return self.adapter.relation(self.name(prefix), arrow_table)

    def drop(self) -> None:
        self.adapter.drop_temp_tables(list(reversed(self.names)))
        self.names.clear()


class Writer:
    """The writer of one session's database (see the module's documentation)."""

    def __init__(self, adapter: EngineAdapter, catalog: Catalog, lock_timeout: float | None):
        self.adapter, self.catalog = adapter, catalog
        self.tag = uuid.uuid4().hex[:8]    # in the names of this session's temporary tables: sessions may share
                                           # a connection (DuckDB) or a SparkSession, whose temporary names are shared
        self.lock = WriterLock(adapter.identity, lock_timeout)
        self._shared = shared(adapter.identity)
        with _databases_lock:
            self.database = _databases.setdefault(adapter.identity, Database())
            self.database.sessions += 1
        self.pushed = self.database.pushed
        self.attempted: dict[str, int] = {}   # table key -> number of the last commit begun (a failed one too)
        self._looked: dict[str, float] = {}   # topic key -> when its state was last checked against the engine
        self._scratches = 0                   # scratches open now (nested ones name their tables apart)
        self._settings_checked = False        # the engine's settings were checked since this thread took the lock
        self._closed = False

    def __enter__(self) -> "Writer":
        self.lock.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.lock.__exit__(*exc)
        if not self.lock.held():
            self._settings_checked = False

    def check_settings(self) -> None:
        """The engine's settings allow seqdedup's own work (``EngineAdapter.check_settings``): checked once each
        time the lock is taken for work that reads or writes a topic's state, not for the user's own queries, whose
        settings are theirs."""
        if not self._settings_checked:
            self.adapter.check_settings()
            self._settings_checked = True

    def held(self) -> bool:
        """Whether this thread is the database's writer now."""
        return self.lock.held()

    # --- topic states ------------------------------------------------------------------------------------------

    def state(self, ref: TopicRef) -> TopicState:
        """The topic's state: recovered on first use, or when another process has published since. The caller
        holds the lock."""
        self.check_settings()
        adapter = self.adapter
        with adapter.storage.listed_once(ref):      # (one listing serves the check, the catch-up and a recovery)
            looked = time.monotonic()
            state = self.current(ref)
            if state is None:
                kept = self.database.states.get(ref.key)
                # where another process may have written, what this one read of the catalog before is stale
                adapter.storage.refresh(*[catalog_table(name) for name in CATALOG_TABLES], ref.table)
                state = (kept and catch_up(self.catalog, adapter, ref, kept,
                                          frozenset(adapter.storage.published_commits(ref)))) or \
                    load(self.catalog, adapter, ref)
                self.database.states[ref.key] = state
        self._looked[ref.key] = looked
        return state

    def current(self, ref: TopicRef) -> TopicState | None:
        """The topic's state in memory, if this process has it and it is still true: where another process may
        publish (``EngineAdapter.exclusive`` false), one read of the published commits checks it. None: recover.
        (Any thread may ask; it needs no lock.)"""
        state = self.database.states.get(ref.key)
        if state is None or self.adapter.exclusive or state.published is None:
            return state
        adapter = self.adapter
        with adapter.storage.listed_once(ref):      # (one listing for both)
            published = frozenset(adapter.storage.published_commits(ref))
            taken = foreign_commits(adapter.storage.foreign_partitions(ref))
        # another writer published (``state`` catches up), or another tool registered a partition, whose number
        # the next commit must pass over (a recovery counts it)
        return state if published == state.published and taken == state.taken else None

    def keep(self, ref: TopicRef, state: TopicState) -> None:
        """The topic's state after a published commit."""
        self.database.states[ref.key] = state

    def forget(self, ref: TopicRef | None = None) -> None:
        """Drop a topic's state (every topic's, with None): the next use recovers it from the catalog."""
        if ref is None:
            self.database.states.clear()
        else:
            self.database.states.pop(ref.key, None)

    # --- commits and scratch tables ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def commit(self, ref: TopicRef, number: int | None = None) -> Iterator[Commit]:
        """One commit of a table: what is written inside, with its number, becomes visible together or never.

        ``number`` is the commit's number when the caller knows it (a topic's state does); otherwise it is read
        from the catalog. If anything fails inside, the topic's state is dropped: whatever the engine did, the next
        use recovers what was published."""
        adapter = self.adapter
        self.check_settings()
        decided = number is not None        # (on a state: see _look_again_if_stale)
        try:
            with adapter.transaction():     # DuckDB publishes when this transaction commits
                if number is None:
                    number = self.catalog.next_commit(ref)
                if adapter.TRACKS_COMMITS and not adapter.contended:   # a failed attempt's rows stay ignored
                    number = max(number, self.attempted.get(ref.key, 0) + 1)
                self.attempted[ref.key] = number     # a producer whose send failed learns what it may have written
                adapter.storage.open_commit(ref, number)
                try:
                    commit = Commit(ref, number)
                    with adapter.parameters({"__sd_attempt": adapter.storage.attempt(ref)}):   # catalog.schema.ATTEMPT
                        yield commit
                    if commit.abandoned:
                        adapter.storage.discard_commit_rows(ref)
                        self.attempted[ref.key] = number - 1
                        return
                    failpoint("before_publish")
                    if decided:
                        self._look_again_if_stale(ref, number)
                    if adapter.SUPPORTS_TRANSACTIONS:
                        for cleanup in commit.cleanups:
                            cleanup()
                    adapter.storage.publish(ref)     # Spark publishes here (CommitConflict: another driver did first)
                finally:
                    adapter.storage.close_commit(ref)
            failpoint("after_publish")
        except CommitConflict:
            # another driver published this number first: the state kept is still true as of what it listed, and
            # the next use catches it up over the winners' commits (``state``)
            _log.info("[%s] lost commit %s to another driver, which published it first: nothing of it is published",
                      ref.key, number)
            raise
        except BaseException:
            self.forget(ref)
            raise
        if not adapter.SUPPORTS_TRANSACTIONS:
            for cleanup in commit.cleanups:
                try:
                    cleanup()
                except EngineError as error:    # published already: what was not removed goes next time
                    logging.getLogger("seqdedup").warning("could not remove what commit %s of %s made unneeded "
                                                          "(the next full snapshot retries): %s", number, ref.key, error)

    def _look_again_if_stale(self, ref: TopicRef, number: int) -> None:
        """Before a commit decided on the topic's state is published: where that state was checked longer ago than
        the engine vouches for (``EngineAdapter.listing_ttl``: another driver's compaction may have freed a number
        since), check it again; if another driver published meanwhile, the commit is lost as a race is."""
        ttl, looked = self.adapter.listing_ttl, self._looked.get(ref.key)
        if ttl is None or looked is None or time.monotonic() - looked < ttl:
            return
        now = time.monotonic()
        if self.current(ref) is None:
            raise CommitConflict(f"commit {number} of {ref.key} was decided on a state last checked "
                                 f"{now - looked:.0f} s ago, and other drivers published since: nothing of it is "
                                 "published (decide again on the new state)")
        self._looked[ref.key] = now

    @contextlib.contextmanager
    def scratch(self) -> Iterator[Scratch]:
        self._scratches += 1
        scratch = Scratch(self.adapter, self.tag, self._scratches)
        try:
            yield scratch
        except BaseException:
            # the work failed: its transaction (DuckDB) is aborted and takes its temporary tables with it when it
            # rolls back; a failure to drop them now must not hide why the work failed
            with contextlib.suppress(Exception):
                scratch.drop()
            raise
        finally:
            self._scratches -= 1
        scratch.drop()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _databases_lock:
            self.database.sessions -= 1
            if self.database.sessions <= 0:       # the last session: another process may write from now on
                self.database.states.clear()


__all__ = ["Writer", "PushedMarks", "Scratch", "Commit"]
