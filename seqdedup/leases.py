"""R14 across processes: one live writer per producer name on a topic, through a lease the metastore arbitrates.

Inside a process ``seqdedup.producer`` refuses a second live producer of a name. That is the whole of R14 where no
other process can write the database while it is open (DuckDB locks its file, a local Spark home is locked by its
process). Where several Spark drivers share a Hive metastore, a producer with a name of the user's holds a *lease*
on (topic, name) in the adapter's ``lease_store`` (extensions/hive_leases.py):

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
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Protocol

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
                pause = self.seconds / 3
                log.warning("producer %r could not renew its lease on topic %s (%s); retrying in %g s",
                            self.producer, self.topic, error, pause)

    def _next_renewal(self) -> float:
        """Seconds until a third of the lease time has passed since the last renewal began (not since it ended: a
        renewal takes a while, longer on a busy metastore); none if that is past."""
        return max(self._deadline - self.seconds * 2 / 3 - time.monotonic(), 0)
