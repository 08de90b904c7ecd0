"""The producer side of effectively-once (PIP 6): a named producer that resumes from its last sequence id.

A ``Producer`` writes to one topic under one name. Its entries carry sequence ids, automatic (the next after the
producer's mark, or after ``initial_sequence_id``) or explicit (a column of the data: an offset in a file, say).
``send`` is one ``INSERT ... WHERE is_not_dup(name, id)`` statement, so whatever the topic already holds comes back
as a duplicate. When a send fails in a way that leaves its outcome unknown (the engine failed mid-commit, the
connection dropped), the same entries are sent again with the same ids until they are settled: a retry never gets
new ids, which is how Pulsar clients with a send timeout end up writing twice.

``send_async`` queues one entry and returns a future; entries are grouped, each group one send
(seqdedup/clients/batching.py), as a Pulsar client batches. A ``send`` waits for the entries queued before it.

A producer may be shared by threads, as Pulsar's is: its sends run one at a time, in the order they take its lock,
each with its own receipts. Its name is its own on the topic (R14, seqdedup/core/leases.py): a second producer of the
name is refused, and so is a statement that writes under it; closing the session closes its producers.
"""
from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
import uuid
import warnings
import weakref
from dataclasses import dataclass

from sqlglot import exp

from seqdedup.catalog.ids import decoded_rows, encode
from seqdedup.catalog.names import ARRIVAL, HIGHEST, PRODUCER, SEQUENCE_ID
from seqdedup.catalog.state import literal
from seqdedup.errors import (CatalogError, InvalidEntryError, NotRewrittenError, OutcomeUnknownError, PolicyError,
                             ProducerError, RewriteError, SeqdedupWarning, TopicError)

from ..core import leases
from .batching import Batcher, Batching, EntryFuture
from ..core.leases import Lease
from .receipts import Receipts, receipts as read_receipts
from .staging import MAX_ID, id_columns, stage

log = logging.getLogger("seqdedup.producer")

#: The first automatic id of a send, a parameter of its statement (``EngineAdapter.parameters``).
FIRST_ID = exp.Placeholder(this="__sd_first_id")
#: Errors that say the statement was refused before anything was written: retrying cannot help.
DEFINITE = (InvalidEntryError, TopicError, RewriteError, PolicyError, CatalogError, NotRewrittenError, ProducerError)


_counter = itertools.count()


def generated_name() -> str:
    """A name unique to this producer: host, process and a random part (Pulsar: cluster and a counter)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


@dataclass
class _Send:
    """Entries staged for one send: their table, their ids' expression, and the commits that may hold them."""

    stage: exp.Table
    name: str                       # the staged table's temporary name
    sequence_id: exp.Expression     # the entry's id over the staged row, as is_not_dup takes it
    stored: exp.Expression          # the same as the topic stores it (a composite id's text, R19)
    count: int
    first_automatic: int | None     # the first automatic id given, to take back when the send is refused
    own_commits: set[int]


def close_producers(session) -> None:
    """Close the producers of ``session`` (``Session.close``, before its engine connection goes): their names free,
    their leases released and the threads that renew them stopped. One that cannot close cleanly is logged."""
    for producer in leases.connected(lambda producer: producer.session is session):
        try:
            producer.close()
        except Exception as error:      # (the others are closed all the same)
            log.warning("could not close producer %r of topic %s with its session: %s", producer.name,
                        producer.topic.ref.key, error)


class Producer:
    """Writes entries to one topic under one name; create it with ``session.producer(topic, ...)``."""

    def __init__(self, session, topic: str, *, name: str | None = None, initial_sequence_id: int | None = None,
                 send_timeout: float | None = 30.0, batching_max_messages: int = Batching.max_messages,
                 batching_max_bytes: int = Batching.max_bytes,
                 batching_max_publish_delay: float = Batching.max_publish_delay,
                 batching_max_pending_messages: int = Batching.max_pending_messages):
        batching = Batching(batching_max_messages, batching_max_bytes, batching_max_publish_delay,
                            batching_max_pending_messages)
        if name is not None and (not isinstance(name, str) or not name):
            raise ProducerError(f"a producer name must be a non-empty string, not {name!r}")
        if initial_sequence_id is not None and (isinstance(initial_sequence_id, bool) or not isinstance(
                initial_sequence_id, int) or not 0 <= initial_sequence_id < 2**63 - 1):
            raise InvalidEntryError(f"initial_sequence_id must be an integer from 0 to 2**63 - 2, not "
                                    f"{initial_sequence_id!r}")
        if send_timeout is not None and send_timeout <= 0:
            raise ProducerError("send_timeout must be positive, or None to retry until each entry is settled")
        self.session = session
        self.topic = session.topic(topic, fresh=True)      # (its lease time as set last, by any driver)
        if self.topic.id_parts is not None and initial_sequence_id is not None:
            raise ProducerError(f"topic {self.topic.ref.key} takes composite ids (R19), which have no next id: a "
                                "producer sends them explicitly (send(data, sequence_id=(columns...))), with no "
                                "initial_sequence_id")
        self.name = name or generated_name()
        self.send_timeout = send_timeout
        self._batcher = Batcher(self._send, batching, self.name)
        self._key = (session.adapter.identity, self.topic.ref.key, self.name)
        self._closed = False
        self._lock = threading.RLock()        # one send, flush or close at a time: threads may share a producer
        self._tag = f"{session.writer.tag}_{next(_counter)}"
        self._pending: list[_Send] = []
        self._explicit: bool | None = None    # decided by the first send: explicit ids or automatic ones
        self._lease: Lease | None = None      # held where other processes may write the database (R14)
        # R14 in this process (seqdedup/core/leases.py); where other processes may write the database too (Spark drivers
        # on a shared metastore), a named producer also holds a lease
        leases.connect(self._key, self)
        try:
            if name is not None:              # (a generated name is this producer's alone)
                self._lease = self._take_lease()
            # under the writer lock: a statement in flight under this name, which checked the name before this
            # producer connected, has published (or failed) by then, and the mark counts its entries
            with session.writer:
                mark = session.last_sequence_id(topic, self.name)
        except BaseException:
            self.close()
            raise
        self._last = mark
        self._next = None if self.topic.id_parts is not None else \
            mark + 1 if initial_sequence_id is None else initial_sequence_id + 1
        if initial_sequence_id is not None and initial_sequence_id < mark:   # stacklevel 3: session.producer's caller
            warnings.warn(SeqdedupWarning(
                f"producer {self.name!r} starts after id {initial_sequence_id} but the topic's mark for it is {mark}: "
                f"automatic ids {initial_sequence_id + 1}..{mark} will be dropped as duplicates (Pulsar does the "
                "same); leave initial_sequence_id out to continue after the mark"), stacklevel=3)

    @property
    def last_sequence_id(self) -> int:
        """The highest id this producer's topic holds for its name, as far as this producer knows (R13): the mark
        when it was created, then raised by every settled send. ``-1``: none."""
        return self._last

    @property
    def pending(self) -> int:
        """Entries sent whose outcome is not settled yet: queued by ``send_async``, or left by a send whose outcome
        was unknown (``OutcomeUnknownError``)."""
        return sum(s.count for s in self._pending) + self._batcher.pending

    def send(self, data, *, sequence_id: str | tuple[str, ...] | None = None) -> Receipts:
        """Write entries; returns each one's outcome (its position, or that it was a duplicate).

        ``data``: rows (dicts, or tuples in the topic's column order), a pandas DataFrame, a pyarrow Table, or a
        Spark DataFrame. ``sequence_id`` names the column that holds explicit ids (on a topic of composite ids, R19,
        the columns of their parts: ``("lsn", "idx")``); without it the producer numbers the entries itself, after
        its last id. Entries queued by ``send_async`` and entries still pending from a
        failed send go first. Threads may send through one producer: a send waits for the one in flight.
        """
        self._batcher.flush()
        return self._send(data, sequence_id)

    def send_async(self, row, *, sequence_id: str | None = None) -> EntryFuture:
        """Queue one entry (a dict, or a tuple in the topic's column order); a future of its ``Receipt``.

        The entry goes in the next group (see seqdedup/clients/batching.py): the future completes when the group's
        commit is durable, with the entry's position or that it was a duplicate, or fails with the error that refused
        the group (the whole group: one send, one outcome). ``sequence_id`` names the row's field that holds its
        explicit id; without it the id is automatic, given when the group is sent. Waits while
        ``batching_max_pending_messages`` entries are queued. ``flush()`` waits for every queued entry.
        """
        self._check_open()
        return self._batcher.add(row, sequence_id)

    def _send(self, data, sequence_id: str | None) -> Receipts:
        with self._lock:
            self._check_open()
            self.flush()
            with self.session.writer:      # staging runs on the writer's connection
                send = self._stage(data, sequence_id)
            if send is None:
                return Receipts([])
            self._pending.append(send)
            return self._settle(send)

    def flush(self) -> list[Receipts]:
        """Send the entries queued by ``send_async`` and wait for their futures; then settle the pending entries of
        earlier sends, in order, and return those sends' outcomes."""
        self._batcher.flush()
        with self._lock:
            return [self._settle(send) for send in list(self._pending)]

    def close(self) -> None:
        """Disconnect: the name can be used again, in any driver. Pending entries are dropped (their ids stay
        theirs). Entries queued by ``send_async`` are sent first, as Pulsar's ``close`` waits for pending messages.
        A send in flight in another thread ends first. Closing again does nothing."""
        if not self._closed:
            self._batcher.close()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._pending:
                    with self.session.writer:
                        for send in self._pending:
                            self.session.adapter.drop_temp_table(send.name)
            finally:
                self._pending.clear()
                leases.disconnect(self._key, self)
                if self._lease is not None:
                    self._abandoned.detach()
                    self._lease.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Producer({self.name!r}, topic={self.topic.ref.key!r}, last_sequence_id={self._last})"

    # --- the steps of a send ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerError(f"producer {self.name!r} is closed; create a new one to send")
        if self._lease is not None:
            self._lease.check()

    def _take_lease(self) -> Lease | None:
        """The lease on the name, where the database has leases (``EngineAdapter.lease_store``); released when the
        producer is closed, or dropped."""
        store = self.session.adapter.lease_store
        if store is None:
            return None
        lease = Lease(store, self.topic.ref.key, self.name, self.topic.applied.producer_lease_seconds)
        lease.acquire()
        self._abandoned = weakref.finalize(self, lease.abandon)
        self._abandoned.atexit = False         # (at exit the lease expires by itself)
        return lease

    def _stage(self, data, column: str | None) -> _Send | None:
        explicit = column is not None
        parts = id_columns(column)
        if self.topic.id_parts is not None and len(parts) != self.topic.id_parts:
            raise ProducerError(f"topic {self.topic.ref.key} takes composite ids of {self.topic.id_parts} parts (R19): "
                                f"name the columns of their parts, send(data, sequence_id=(...)), not {column!r}")
        if self.topic.id_parts is None and len(parts) > 1:
            raise ProducerError(f"topic {self.topic.ref.key} takes integer ids: name one column of ids, not {column!r} "
                                "(a topic of composite ids is created with id_parts)")
        if self._explicit is not None and explicit != self._explicit:
            raise ProducerError(
                f"producer {self.name!r} sends {'explicit' if self._explicit else 'automatic'} ids; mixing them with "
                f"{'explicit' if explicit else 'automatic'} ones lets an explicit id fall at or below an automatic "
                "one and be dropped. Use one kind per producer name")
        adapter = self.session.adapter
        taken = {send.name for send in self._pending}        # the first free slot: one name, send after send
        name = next(n for n in (f"__sd_send_{self._tag}_{i}" for i in range(len(taken) + 1)) if n not in taken)
        table, count = stage(adapter, self.topic, name, data, column)
        if count == 0:
            adapter.drop_temp_table(name)
            return None
        if not explicit and self._next + count - 1 > MAX_ID:      # issue 12: refused before anything is sent
            adapter.drop_temp_table(name)
            raise ProducerError(
                f"producer {self.name!r} has run out of automatic sequence ids: {count} entries would take ids "
                f"{self._next}..{self._next + count - 1}, past {MAX_ID} (ids are signed 64-bit; "
                f"{max(MAX_ID - self._next + 1, 0)} left). Nothing was sent; send under a new producer name")
        self._explicit = explicit
        if explicit:
            columns, first = [exp.column(part, quoted=True) for part in parts], None
            ids = exp.Tuple(expressions=columns) if len(columns) > 1 else columns[0]
        else:          # the first id is a parameter (FIRST_ID): the statement's SQL is the same, send after send
            ids, first = exp.column(ARRIVAL) + FIRST_ID, self._next
            self._next += count
        # (the id as the topic stores it, which the receipts look up: a composite id's text, R19)
        stored = encode(columns) if self.topic.id_parts is not None else exp.cast(ids.copy(), "bigint")
        return _Send(table, name, ids, stored, count, first, set())

    def _settle(self, send: _Send) -> Receipts:
        """Run the send's statement until its outcome is known; then read each entry's outcome."""
        session, ref = self.session, self.topic.ref
        deadline = None if self.send_timeout is None else time.monotonic() + self.send_timeout
        delay = 0.05
        while True:
            self._check_open()      # a retry may come long after the send began
            try:
                # (under the writer lock: the commit it attempted is known before another thread's statement begins)
                with session.writer, leases.sending(self), session.adapter.parameters(self._parameters(send)):
                    try:
                        result = session.run(self._statement(send))
                    except Exception:
                        # The statement may have committed before failing: its commit is among those to look in.
                        if ref.key in session.writer.attempted:
                            send.own_commits.add(session.writer.attempted[ref.key])
                        raise
                break
            except DEFINITE:
                self._pending.remove(send)
                with session.writer:
                    session.adapter.drop_temp_table(send.name)
                if send.first_automatic is not None and self._next == send.first_automatic + send.count:
                    self._next = send.first_automatic      # nothing was written: the ids are free again
                raise
            except Exception as error:
                if deadline is not None and time.monotonic() >= deadline:
                    raise OutcomeUnknownError(
                        f"{send.count} entries of producer {self.name!r} are not settled after {self.send_timeout} s "
                        f"({error}); they stay pending with their ids: send or flush again to retry them") from error
                log.warning("send of %d entries by %s failed (%s); retrying with the same ids", send.count,
                            self.name, error)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        send.own_commits.add(result.commit)
        rows = self._written_alone(send, result)
        with session.writer, session.adapter.parameters(self._parameters(send)):
            if rows is None:
                rows = read_receipts(session.adapter, ref.table, self._entries(send), send.own_commits)
            session.adapter.drop_temp_table(send.name)
        self._pending.remove(send)
        if self.topic.id_parts is not None:      # (R19: the ids as tuples; -1, none, is below every one)
            rows = decoded_rows(rows, [0, 1])
        receipts = Receipts(rows)
        highest = max(row[1] for row in rows)
        self._last = highest if self._last == -1 else max(self._last, highest)
        return receipts

    def _written_alone(self, send: _Send, result) -> list[tuple] | None:
        """The receipt of a send of one entry under an automatic id that the statement's result says it wrote, in
        the one attempt that may have (no earlier one committed): its id is known, and its position is the one its
        producer's count gives. None otherwise: the receipts are read from the topic (a query that takes about 4 ms
        of a 30 ms send of one entry on DuckDB)."""
        if send.count != 1 or send.first_automatic is None or send.own_commits != {result.commit}:
            return None
        count = result.by_producer().get(self.name)
        if count is None or count.written != 1 or count.first_position is None:
            return None
        return [(send.first_automatic, send.first_automatic, count.first_position, False)]

    @staticmethod
    def _parameters(send: _Send) -> dict:
        return {FIRST_ID.name: send.first_automatic} if send.first_automatic is not None else {}

    def _statement(self, send: _Send) -> exp.Insert:
        columns = [exp.to_identifier(c, quoted=True) for c, _ in self.topic.user_columns]
        call = exp.Anonymous(this="is_not_dup", expressions=[literal(self.name), send.sequence_id.copy()])
        select = exp.select(*[exp.column(c.copy()) for c in columns]).from_(send.stage.copy()).where(call)
        if self._explicit:      # explicit ids may come in any order: arrival decides, as in Pulsar
            select = select.order_by(exp.column(ARRIVAL))
        return exp.insert(select, self.topic.ref.table, columns=columns)

    def _entries(self, send: _Send) -> exp.Select:
        return exp.select(ARRIVAL, exp.alias_(literal(self.name), PRODUCER),
                          exp.alias_(send.stored.copy(), SEQUENCE_ID),
                          exp.alias_(send.stored.copy(), HIGHEST)).from_(send.stage.copy())

