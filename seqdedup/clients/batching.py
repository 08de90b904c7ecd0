"""A producer's batching, as Pulsar's client batches: ``send_async`` queues one entry and returns a future; the
entries are grouped by count, bytes and a delay, and each group is one send (one statement).

A future completes only once its entry's outcome is durable: with its ``Receipt`` (its position, or that it was a
duplicate), or with the error that refused its group. Groups are sent one at a time, in the order their entries were
given, by one thread per producer; while a group is in flight the next one fills, so a statement's fixed cost is paid
once per group, not per entry (group commit). A group whose outcome is unknown is retried under the same ids, as a
``send`` is (``Producer.send_timeout``).

Pulsar's defaults (1,000 messages, 128 KiB, 1 ms) suit a broker that appends in microseconds. A statement costs
milliseconds on DuckDB and a second or more on Spark, so the defaults here are larger: groups of up to 50,000 entries
or 16 MiB, opened for at most 10 ms. A group only grows that large while the one before it is in flight: a producer that
sends slowly gets small groups, each within 10 ms of its first entry.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass

from seqdedup.errors import ProducerError

from .receipts import Receipt

log = logging.getLogger("seqdedup.producer")


@dataclass(frozen=True)
class Batching:
    """How ``send_async`` groups entries (Pulsar's producer settings of the same names)."""

    #: the most entries in one group
    max_messages: int = 50_000
    #: the most bytes of values in one group (strings and bytes by length, anything else as 8)
    max_bytes: int = 16 * 1024 * 1024
    #: the longest a group waits for more entries once its first one came, in seconds
    max_publish_delay: float = 0.01
    #: entries queued and not yet sent, past which ``send_async`` waits (Pulsar's ``maxPendingMessages``, blocking)
    max_pending_messages: int = 200_000

    def __post_init__(self):
        for name in ("max_messages", "max_bytes", "max_pending_messages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ProducerError(f"batching_{name} must be a positive integer, not {value!r}")
        if isinstance(self.max_publish_delay, bool) or not isinstance(self.max_publish_delay, (int, float)) \
                or self.max_publish_delay < 0:
            raise ProducerError("batching_max_publish_delay must be a number of seconds, 0 or more, not "
                                f"{self.max_publish_delay!r}")
        if self.max_pending_messages < self.max_messages:
            raise ProducerError(f"batching_max_pending_messages ({self.max_pending_messages}) must be at least "
                                f"batching_max_messages ({self.max_messages}), or no group could fill")


def size(row) -> int:
    """The bytes a row counts for against ``Batching.max_bytes``: its values' lengths, 8 for a non-string value."""
    values = row.values() if isinstance(row, dict) else row
    return sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in values)


class _Group:
    """Entries sent together: their rows, and once sent, their receipts or the error that refused them."""

    __slots__ = ("rows", "bytes", "opened", "sequence_id", "sent", "receipts", "error", "callbacks", "lock")

    def __init__(self, sequence_id: str | None):
        self.rows: list = []
        self.bytes = 0
        self.opened = time.monotonic()
        self.sequence_id = sequence_id
        self.sent = threading.Event()
        self.receipts = None
        self.error: BaseException | None = None
        self.callbacks: list = []
        self.lock = threading.Lock()

    def settle(self, receipts, error: BaseException | None) -> None:
        with self.lock:
            self.receipts, self.error = receipts, error
            self.sent.set()
            callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            _call(callback)


def _call(callback) -> None:
    try:
        callback()
    except Exception:                  # (as concurrent.futures does: one callback's error stops no other)
        log.exception("a send_async callback raised")


class EntryFuture:
    """The outcome of one entry given to ``send_async``, as a ``concurrent.futures.Future`` gives it: ``result()``
    (its ``Receipt``), ``exception()``, ``done()``, ``add_done_callback(fn)``. It is not a ``Future`` itself: the
    entries of a group share one event, so that a future costs an entry about a microsecond (a ``Future`` per entry
    cost ten, most of a DuckDB group's time). ``Producer.flush()`` waits for all of them; a queued entry cannot be
    cancelled (its id may be taken already)."""

    __slots__ = ("_group", "_index")

    def __init__(self, group: _Group, index: int):
        self._group, self._index = group, index

    def done(self) -> bool:
        return self._group.sent.is_set()

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._group.sent.wait(timeout):
            raise TimeoutError(f"the entry's group was not settled within {timeout} s")
        return self._group.error

    def result(self, timeout: float | None = None) -> Receipt:
        error = self.exception(timeout)
        if error is not None:
            raise error
        return self._group.receipts[self._index]

    def add_done_callback(self, fn) -> None:
        """Call ``fn(future)`` once the entry is settled (at once if it is), in the thread that settles it."""
        with self._group.lock:
            if not self._group.sent.is_set():
                self._group.callbacks.append(lambda: fn(self))
                return
        _call(lambda: fn(self))

    def __repr__(self) -> str:
        state = "pending" if not self.done() else "failed" if self._group.error else "done"
        return f"<EntryFuture {state}>"


class Batcher:
    """The groups of one producer and the thread that sends them. ``send(rows, sequence_id)`` runs one group and
    returns its receipts, in order (``Producer._send``)."""

    def __init__(self, send, batching: Batching, name: str):
        self._send = send
        self.batching = batching
        self._name = name
        self._changed = threading.Condition()
        self._open: _Group | None = None
        self._sealed: collections.deque[_Group] = collections.deque()
        self._queued = 0             # entries in groups not yet sent
        self._in_flight = 0          # entries in the group being sent
        self._flushing = 0           # callers of flush waiting: send what is open at once
        self._closing = False
        self._thread: threading.Thread | None = None

    def add(self, row, sequence_id: str | None) -> EntryFuture:
        """Queue one entry; its future."""
        with self._changed:
            if self._closing:
                raise ProducerError(f"producer {self._name!r} is closed; create a new one to send")
            limit = self.batching.max_pending_messages
            while self._queued >= limit and not self._closing:
                self._changed.wait()
            group = self._open
            if group is not None and group.sequence_id != sequence_id:
                self._seal()
                group = None
            if group is None:
                group = self._open = _Group(sequence_id)
                self._start()
                self._changed.notify_all()      # the sender now has a delay to keep
            future = EntryFuture(group, len(group.rows))
            group.rows.append(row)
            group.bytes += size(row)
            self._queued += 1
            if len(group.rows) >= self.batching.max_messages or group.bytes >= self.batching.max_bytes:
                self._seal()
                self._changed.notify_all()
        return future

    @property
    def pending(self) -> int:
        """Entries given to ``add`` whose futures are not complete."""
        with self._changed:
            return self._queued + self._in_flight

    def flush(self) -> None:
        """Send every queued entry now and wait until each one's future is complete."""
        with self._changed:
            if self._thread is threading.current_thread():
                return            # (the sender's own send: its groups are already in order)
            self._flushing += 1
            self._changed.notify_all()
            try:
                while self._queued or self._in_flight:
                    self._changed.wait()
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Send what is queued, then stop the thread (Pulsar's ``close`` also waits for pending messages)."""
        self.flush()
        with self._changed:
            self._closing = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    # --- the sender ----------------------------------------------------------------------------------------------

    def _seal(self) -> None:
        if self._open is not None and self._open.rows:
            self._sealed.append(self._open)
        self._open = None

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"seqdedup-batching-{self._name}", daemon=True)
            self._thread.start()

    def _next_group(self) -> _Group | None:
        """The next group to send, once one is full, due or flushed; None when closing with nothing queued."""
        with self._changed:
            while True:
                if not self._sealed and self._open is not None:
                    due = self._open.opened + self.batching.max_publish_delay
                    if self._flushing or self._closing or time.monotonic() >= due:
                        self._seal()
                    else:
                        self._changed.wait(due - time.monotonic())
                        continue
                if self._sealed:
                    group = self._sealed.popleft()
                    self._queued -= len(group.rows)
                    self._in_flight = len(group.rows)
                    self._changed.notify_all()       # (room for an add waiting on max_pending_messages)
                    return group
                if self._closing:
                    return None
                self._changed.wait()

    def _run(self) -> None:
        while (group := self._next_group()) is not None:
            try:
                receipts = self._send(group.rows, group.sequence_id)
            except BaseException as error:       # every entry of the group learns why: one send, one outcome
                group.settle(None, error)
            else:
                group.settle(receipts, None)
            with self._changed:
                self._in_flight = 0
                self._changed.notify_all()
