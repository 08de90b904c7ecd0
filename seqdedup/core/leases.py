"""R14: one live writer per producer name on a topic, in this process and, through a lease the metastore
arbitrates, across processes.

Inside a process, the producers connected are registered by (database, topic, name) (``connect``): a second live
producer of a name is refused, and so is a statement that writes under a name a live producer holds
(``refuse_held_names``, which the statement path runs before it publishes): the producer's next automatic ids would
fall on that statement's entries and be dropped as duplicates, with receipts that point at entries it never sent.
That is the whole of R14 where no other process can write the database while it is open (DuckDB locks its file, a
local Spark home is locked by its process). Where several Spark drivers share a Hive metastore, a producer with a
name of the user's also holds a *lease* on (topic, name) in the adapter's ``lease_store``
(extensions/spark/leases.py), which a statement of another driver reads too:

- **claim** (``Lease.acquire``): the lease's epochs are listed and the latest one read. If its holder renewed it
  within its lease time and has not released it, the claim is refused with a ProducerError naming that holder and
  when its lease expires. Otherwise the claimant registers the next epoch, a compare-and-set (the metastore admits
  one registration per epoch, as it admits one publish per commit): of two drivers claiming at once, one is refused.
- **renewal**: a daemon thread writes the time into its epoch every third of the lease time, then checks that no
  later epoch exists. The lease then holds for a lease time from the renewal's start, if the renewal ended before
  the lease would have expired; a renewal that ended later may have been read as expired by another driver, so the
  lease is claimed again like a newcomer's (next epoch, compare-and-set).
- **fencing**: a later epoch means another driver took the name after this one stopped renewing (a long pause, the
  metastore out of reach). The producer then refuses every send with a ProducerError, for good: the other driver may
  have written under the name, and this one's automatic ids would follow a stale mark.
- **release** (``Lease.close``): the epoch is marked released and the name is free at once. Epochs are never
  deleted, so none is given twice, and a fenced holder always sees the later one.

The send path reads only a deadline this process keeps (``Lease.check``): no metastore call per send while the
renewals keep up. Another driver judges the lease by the renewal time its holder wrote (the holder's wall clock at the
renewal's start, so the holder's own deadline never outlives what others read): drivers' clocks must agree to well
within the lease time. A send already running when the lease lapses still ends; its entries, as every entry, are
deduplicated by the topic, so two drivers under one name never write a duplicate, only R14's refusal can come late.
So can a statement's, across drivers: one that read the leases in the instant before another driver's producer claimed
the name, and publishes after that producer read its mark (inside a process the producer reads its mark under the
writer lock, after the statement has published).

A renewal that finds the engine's session stopped (``Store.stopped``: ``spark.stop()`` with the producer open) ends
the renewals: the lease expires by itself.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import hashlib
import json
import logging
import os
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Protocol

from seqdedup.errors import ProducerError

log = logging.getLogger("seqdedup.leases")


def lease_key(topic: str, producer: str) -> str:
    """The lease's key for a producer name on a topic: a hex digest, since a name may hold any character (quotes,
    slashes, unicode) and a key names a partition.

    Example:
        >>> lease_key("main.events", "n")
        'd6cb623e2559d573431b2f59be43e2a9'
        >>> lease_key("main.events", "n") != lease_key("main.other", "n") != lease_key("main.events", "n'/é")
        True
    """
    return hashlib.sha256(json.dumps([topic, producer]).encode()).hexdigest()[:32]


class Store(Protocol):
    """Where a database's leases live (``EngineAdapter.lease_store``): epochs per key, each registered at most once."""

    application: str        # the Spark application this driver runs (a Spark Connect client: its server's)

    def epochs(self, key: str) -> list[int]:
        """The epochs registered for ``key``."""

    def read(self, key: str, epoch: int) -> tuple[dict[str, str], float]:
        """The properties last written to an epoch, and when it was registered (seconds since the epoch)."""

    def register(self, key: str, epoch: int, at: float) -> bool:
        """Register an epoch, claimed at ``at``; False when another driver registered it first."""

    def write(self, key: str, epoch: int, properties: dict[str, str]) -> None:
        """Set properties of a registered epoch (the others stay)."""

    def latest(self, keys: Collection[str]) -> dict[str, int]:
        """The latest epoch of each of ``keys`` that has one, in one call (a statement's check)."""

    def unregister(self, key: str, epoch: int) -> None:
        """Remove an epoch (a turn, seqdedup/core/turns.py: producers' epochs are never removed); nothing if it is
        gone."""

    @property
    def stopped(self) -> bool:
        """Whether the engine's session this store calls through was stopped (no call can succeed any more)."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lease."""

    host: str
    pid: int
    application: str

    def __str__(self) -> str:
        return f"host {self.host}, process {self.pid}, Spark application {self.application}"


@dataclass(frozen=True)
class Record:
    """One epoch of a lease, as the store holds it.

    Example:
        >>> record = Record.of(3, {"host": "h", "pid": "7", "application": "app-1", "renewed_at": "1000000",
        ...                        "seconds": "30", "state": "held"}, claimed_at=990.0, seconds=5)
        >>> str(record.holder), record.expires_at, record.live(1029.9), record.live(1030.0)
        ('host h, process 7, Spark application app-1', 1030.0, True, False)
        >>> Record.of(3, {"renewed_at": "1000000", "state": "released"}, claimed_at=990.0, seconds=5).live(0.0)
        False

    Between its registration and its holder's first write, an epoch has only its registration time, and the lease
    time of whoever reads it:

        >>> record = Record.of(4, {}, claimed_at=990.0, seconds=5)
        >>> record.holder, record.expires_at
        (None, 995.0)
    """

    epoch: int
    holder: Holder | None       # None until the claimant has written who it is
    renewed_at: float           # when its holder last renewed it (its registration, before the first renewal)
    seconds: float              # the lease time its holder took it for
    released: bool              # its holder closed it: the name is free

    @classmethod
    def of(cls, epoch: int, properties: dict[str, str], *, claimed_at: float, seconds: float) -> "Record":
        holder = None
        if "pid" in properties:
            holder = Holder(properties.get("host", "?"), int(properties["pid"]), properties.get("application", "?"))
        renewed = int(properties["renewed_at"]) / 1000 if "renewed_at" in properties else claimed_at
        return cls(epoch, holder, renewed, float(properties.get("seconds", seconds)),
                   properties.get("state") == "released")

    @property
    def expires_at(self) -> float:
        return self.renewed_at + self.seconds

    def live(self, now: float) -> bool:
        """Whether its holder keeps the name at ``now``: not released (whatever the clocks say), and renewed within
        its lease time."""
        return not self.released and now < self.expires_at


def _when(seconds: float) -> str:
    """A wall-clock time in an error message.

    Example:
        >>> _when(1795700000.25)
        '2026-11-26 13:33:20.250 UTC'
    """
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


# --- R14 in this process, and the statements' check -----------------------------------------------------------

#: The producers connected in this process, by (database identity, topic key, name); dropped with the producer.
_connected: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_connected_lock = threading.Lock()
#: The producer whose send runs in this thread: its statement writes under its own name (``sending``).
_sending: contextvars.ContextVar = contextvars.ContextVar("seqdedup_sending", default=None)


def connect(key: tuple[str, str, str], producer) -> None:
    """Register ``producer`` under ``key`` (database, topic, name), or raise a ProducerError when a live producer is
    connected there."""
    with _connected_lock:
        if key in _connected:
            raise ProducerError(f"producer {key[2]!r} is already connected to topic {key[1]}; close it first "
                                "(producer.close()), or give this one another name")
        _connected[key] = producer


def disconnect(key: tuple[str, str, str], producer) -> None:
    """The name is free again (when ``producer`` is the one registered under ``key``)."""
    with _connected_lock:
        if _connected.get(key) is producer:
            del _connected[key]


def connected(which: Callable[[object], bool]) -> list:
    """The live producers of this process for which ``which`` is true."""
    with _connected_lock:
        return [producer for producer in _connected.values() if which(producer)]


@contextlib.contextmanager
def sending(producer):
    """While the block runs, this thread's statements are ``producer``'s sends: its own name is not refused."""
    token = _sending.set(producer)
    try:
        yield
    finally:
        _sending.reset(token)


def refuse_held_names(adapter, topic, producers: Iterable) -> None:
    """R14 for statements: a ProducerError when a live producer, other than the one whose send this is, holds one of
    the names ``producers`` (the names a statement writes under, as names or an Arrow column) on ``topic`` (a
    ``Topic``): in this process, or where the database has leases (``adapter.lease_store``), in another driver. Run
    before the statement publishes: nothing is written. Costs nothing where no producer is connected here and there
    are no leases; where there are, one call to the store for the names not connected here (none for a producer's
    own send), and one read per such name that has a lease.

    Example:
        >>> import seqdedup
        >>> session = seqdedup.connect(":memory:")
        >>> topic = session.create_topic("events", {"payload": "STRING"})
        >>> refuse_held_names(session.adapter, topic, ["x"])
        >>> producer = session.producer("events", name="x")
        >>> refuse_held_names(session.adapter, topic, ["y", "x"])
        Traceback (most recent call last):
        ...
        seqdedup.errors.ProducerError: producer 'x' is connected to topic main.events (a live Producer in this ...
        >>> with sending(producer):
        ...     refuse_held_names(session.adapter, topic, ["x"])
        >>> producer.close()
        >>> refuse_held_names(session.adapter, topic, ["x"])
    """
    ref, identity, store = topic.ref, adapter.identity, adapter.lease_store
    with _connected_lock:
        here = {key[2]: producer for key, producer in _connected.items() if key[:2] == (identity, ref.key)}
    if not here and store is None:
        return
    # (an Arrow column, as a statement gives them, becomes Python names only here: most statements return above)
    names = set(producers.to_pylist() if hasattr(producers, "to_pylist") else producers)
    sender = _sending.get()
    named = sorted(name for name, producer in here.items() if producer is not sender and name in names)
    if named:
        raise ProducerError(_statement_refused(named[0], ref.key, "a live Producer in this process"))
    if store is None:
        return
    # the names connected here are judged above (their leases are this process's): the others in the store
    keys = {lease_key(ref.key, name): name for name in sorted(names - here.keys())}
    if not keys:
        return
    own, now = Holder(socket.gethostname(), os.getpid(), store.application), time.time()
    for key, epoch in sorted(store.latest(keys).items(), key=lambda item: keys[item[0]]):
        properties, claimed_at = store.read(key, epoch)
        record = Record.of(epoch, properties, claimed_at=claimed_at, seconds=topic.applied.producer_lease_seconds)
        if record.live(now) and record.holder != own:     # (one of this process's own is closing)
            holder = record.holder or "a driver that is claiming it now"
            raise ProducerError(_statement_refused(
                keys[key], ref.key, f"a live Producer of another driver: {holder}; its lease expires at "
                f"{_when(record.expires_at)} unless renewed"))


def _statement_refused(name: str, topic: str, holder: str) -> str:
    return (f"producer {name!r} is connected to topic {topic} ({holder}): a statement may not write entries under a "
            "name a live producer holds (R14; Pulsar: 'Producer with name ... is already connected'), since that "
            "producer's next ids would fall on these entries and be dropped as duplicates. Send these entries through "
            "that producer, close it first (producer.close()), or write them under another producer name. Nothing "
            "was written")


class Lease:
    """A producer's lease on its name on a topic: ``acquire`` it, ``check`` it before each send, ``close`` it."""

    def __init__(self, store: Store, topic: str, producer: str, seconds: float):
        self.store = store
        self.topic = topic
        self.producer = producer
        self.seconds = seconds                  # the topic's producer_lease_seconds when the producer connected
        self.key = lease_key(topic, producer)
        self.holder = Holder(socket.gethostname(), os.getpid(), store.application)
        self.epoch: int | None = None           # the epoch this lease holds, once claimed (a new one per reclaim)
        self.claimed_at: float | None = None    # when (wall clock) it claimed that epoch: the time it judged by
        self._deadline = 0.0                    # time.monotonic() until which no other driver can hold the name
        self._fenced: str | None = None         # once another driver took the name: the error every send gets
        self._closed = False
        self._lock = threading.Lock()           # the renewal thread and the producer's threads
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        """Claim the name, or raise a ProducerError naming the driver that holds it; then keep it renewed."""
        with self._lock:
            self._claim()
        self._thread = threading.Thread(target=self._run, name=f"seqdedup-lease-{self.producer}"[:60], daemon=True)
        self._thread.start()

    def check(self) -> None:
        """Before a send: a ProducerError once another driver holds the name. While the renewals keep up this reads
        a deadline and calls nothing; after it lapsed (this process paused, or the metastore did not answer) the
        lease is renewed first, or claimed again."""
        if self._fenced is None and time.monotonic() < self._deadline:
            return
        if self._fenced is None:
            self.renew()
        if self._fenced is not None:
            raise ProducerError(self._fenced)

    def renew(self) -> None:
        with self._lock:
            if self._fenced is not None or self._closed:
                return
            wall, start = time.time(), time.monotonic()
            if start >= self._deadline:
                self._claim()
                return
            self._write(wall)
            latest = max(self.store.epochs(self.key))
            if latest > self.epoch:
                self._fence(latest)
            elif time.monotonic() < self._deadline:
                self._deadline = start + self.seconds
            else:       # written after the lease had expired: another driver may have read it expired
                self._claim()

    def close(self) -> None:
        """Release the name: another driver may claim it at once. A release the metastore does not take is logged,
        and the name is free when the lease expires."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.epoch is None or self._fenced is not None:
                return
            try:
                self._write(time.time(), released=True)
            except Exception as error:      # (closing must not fail: the lease expires by itself)
                log.warning("producer %r could not release its lease on topic %s (%s); the name stays held until "
                            "the lease expires, at most %s s from now", self.producer, self.topic, error, self.seconds)

    def abandon(self) -> None:
        """The producer was dropped without ``close``: release from a thread of its own (a garbage collection may
        run anywhere, also inside a Spark call)."""
        threading.Thread(target=self.close, name="seqdedup-lease-release", daemon=True).start()

    # --- the steps -------------------------------------------------------------------------------------------

    def _claim(self) -> None:
        """Register the next epoch, as a newcomer or to take the lease back after it lapsed (then the latest epoch
        must still be this lease's own, else it is fenced)."""
        wall, start = time.time(), time.monotonic()
        if self.epoch is not None:
            log.info("producer %r let its lease on topic %s lapse %.1f s ago (a renewal came late); claiming it "
                     "again", self.producer, self.topic, start - self._deadline)
        latest = max(self.store.epochs(self.key), default=0)
        if self.epoch is not None and latest != self.epoch:
            self._fence(latest)
            return
        if self.epoch is None and latest:
            record = self._record(latest)
            if record.live(wall):
                raise self._held(record, wall)
        if not self.store.register(self.key, latest + 1, wall):      # another driver claimed it first
            if self.epoch is not None:
                self._fence(latest + 1)
                return
            raise self._held(self._record(latest + 1), time.time())
        self.epoch, self.claimed_at = latest + 1, wall
        self._write(wall)
        self._deadline = start + self.seconds

    def _write(self, renewed_at: float, *, released: bool = False) -> None:
        self.store.write(self.key, self.epoch, {
            "host": self.holder.host, "pid": str(self.holder.pid), "application": self.holder.application,
            "renewed_at": str(round(renewed_at * 1000)), "seconds": str(self.seconds),
            "state": "released" if released else "held"})

    def _record(self, epoch: int) -> Record:
        properties, claimed_at = self.store.read(self.key, epoch)
        return Record.of(epoch, properties, claimed_at=claimed_at, seconds=self.seconds)

    def _held(self, record: Record, now: float) -> ProducerError:
        holder = record.holder or "a driver that is claiming it now"
        return ProducerError(
            f"producer {self.producer!r} is already connected to topic {self.topic} from another driver ({holder}); "
            f"its lease expires at {_when(record.expires_at)} (in {max(record.expires_at - now, 0):.1f} s) unless "
            f"that driver renews it, as it does every {record.seconds / 3:g} s while the producer is open. Close that "
            "producer (producer.close()) or wait: a driver that ended without closing it frees the name when its "
            "lease expires (the topic's producer_lease_seconds). Or give this producer another name")

    def _fence(self, epoch: int) -> None:
        """Another driver registered ``epoch``, after this one's: every send from now on is refused."""
        try:
            holder = self._record(epoch).holder or "a driver that is claiming it now"
        except Exception:     # (who it is only improves the message)
            holder = "another driver"
        self._fenced = (
            f"producer {self.producer!r} lost its name on topic {self.topic} to another driver ({holder}), which "
            f"claimed it after this driver did not renew its lease in time (producer_lease_seconds={self.seconds:g}: a "
            "long pause, or the metastore out of reach). This producer sends nothing more: close it, and connect "
            "a new one once the other has closed the name; it resumes after the topic's mark (entries either driver "
            "sent are deduplicated by the topic)")
        self._stop.set()
        log.warning("%s", self._fenced)

    def _run(self) -> None:
        pause = self._next_renewal()
        while not self._stop.wait(pause):
            try:
                self.renew()
                pause = self._next_renewal()
            except Exception as error:    # the next renewal tries again; a send after the deadline renews first
                if self._store_stopped():
                    log.warning("producer %r stops renewing its lease on topic %s: the engine's session it was "
                                "opened on is stopped (close producers before stopping it); the name is free when "
                                "the lease expires, at most %g s from now", self.producer, self.topic, self.seconds)
                    return
                pause = self.seconds / 3
                log.warning("producer %r could not renew its lease on topic %s (%s); retrying in %g s",
                            self.producer, self.topic, error, pause)

    def _store_stopped(self) -> bool:
        try:
            return bool(self.store.stopped)
        except Exception:        # (a store that cannot say is not known stopped)
            return False

    def _next_renewal(self) -> float:
        """Seconds until a third of the lease time has passed since the last renewal began (not since it ended: a
        renewal takes a while, longer on a busy metastore); none if that is past."""
        return max(self._deadline - self.seconds * 2 / 3 - time.monotonic(), 0)
