"""The reference model: Pulsar's broker-side deduplication (``MessageDeduplication``) in plain Python.

It is the oracle of the tests: the engines must agree with it, statement for statement. It keeps the topic's
log itself, so that a crash and a recovery can be replayed exactly as rule R7 describes. Two levels:

- the Pulsar primitives, per entry (``is_duplicate``, ``record_persisted``, ``reset_pushed``), which replay the
  upstream tests S-P01 and S-P02 step by step;
- the seqdedup statement (``apply_statement``): validate everything, then decide every entry in arrival order,
  write the new ones, and take at most one snapshot at the end.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from seqdedup.errors import InvalidEntryError

MAX_ID = 2**63 - 1


class DupStatus(str, enum.Enum):
    """What a producer is told about an entry (Pulsar ``MessageDupStatus``)."""

    NOT_DUP = "NOT_DUP"   # definitely not a duplicate: written
    DUP = "DUP"           # definitely a duplicate: not written, acknowledged as success
    UNKNOWN = "UNKNOWN"   # cannot be decided now (an earlier write of it is in flight): retry later, never assume


@dataclass(frozen=True)
class Entry:
    """One candidate entry: a single message, or a batch entry covering ``sequence_id..highest_sequence_id``."""

    producer: str
    sequence_id: int
    highest_sequence_id: int | None = None   # None: a single message
    payload: object = None

    @property
    def highest(self) -> int:
        """Pulsar's ``max(highestSequenceId, sequenceId)``: the mark a written entry sets."""
        return self.sequence_id if self.highest_sequence_id is None else max(self.highest_sequence_id, self.sequence_id)


@dataclass
class Policies:
    """The applied (already resolved, R9) policies of one topic."""

    deduplication_enabled: bool = True
    snapshot_interval_entries: int = 1000           # entries written between snapshots (R8)
    snapshot_interval_seconds: int = 120            # seconds between snapshots when anything was written; 0: off
    producer_inactivity_timeout: int = 360          # minutes without a write before a producer is purged (R11)
    max_producers_in_snapshot: int | None = None    # None: no cap (seqdedup's default); an int caps like Pulsar (R12)


@dataclass(frozen=True)
class LogEntry:
    """One row of the topic log."""

    position: int               # dense, from 1, strictly increasing
    producer: str
    sequence_id: int
    highest_sequence_id: int    # max(h, s)
    publish_time: float         # seconds, as given by the caller
    payload: object


@dataclass(frozen=True)
class Snapshot:
    """The persisted marks as of one log position (R7)."""

    snapshot_id: int
    position: int                   # covers every log entry with position <= this
    marks: dict[str, int]           # producer -> persisted mark
    last_publish: dict[str, float]  # producer -> last write time (same keys as marks)
    taken_at: float
    kind: str                       # enabled | disabled | snapshot | purge


@dataclass
class StatementResult:
    written: dict[str, int]              # producer -> entries written
    duplicates: dict[str, int]           # producer -> entries dropped as duplicates
    positions: list[int | None]          # per input entry, in input order: its position, or None for a duplicate
    statuses: list[DupStatus]            # per input entry, in input order
    snapshot: Snapshot | None            # the snapshot taken at the end of the statement, if one was due


def validate(entry: Entry) -> None:
    """R4: the checks Pulsar's broker and client make, as one clear error."""
    s, h = entry.sequence_id, entry.highest_sequence_id
    problem = None
    if entry.producer is None:
        problem = "a NULL producer"
    elif s is None:
        problem = "a NULL sequence_id"
    elif s < 0 or (h is not None and h < 0):
        problem = "a negative sequence id"
    elif s > MAX_ID or (h is not None and h > MAX_ID):
        problem = "a sequence id above 9223372036854775807"
    elif h is not None and h < s:
        problem = "highest_sequence_id below sequence_id"
    if problem:
        raise InvalidEntryError(f"an entry has {problem} ({entry!r}); nothing was written")


@dataclass
class SequenceTracker:
    """One topic's deduplication state, as Pulsar's ``MessageDeduplication``, plus the topic log itself."""

    policies: Policies = field(default_factory=Policies)
    now: float = 0.0
    # Deduplication on: entries are checked and recorded. Off: everything is written, nothing recorded.
    enabled: bool = field(init=False)
    # Pulsar highestSequencedPushed: the highest id accepted per producer, updated before the write is durable.
    pushed: dict[str, int] = field(init=False, default_factory=dict)
    # Pulsar highestSequencedPersisted: updated after the write is durable; the only map that is snapshotted.
    persisted: dict[str, int] = field(init=False, default_factory=dict)
    # The time of each producer's last write, for the inactivity purge (R11); same keys as persisted.
    last_publish: dict[str, float] = field(init=False, default_factory=dict)
    # The topic: every entry ever written, enabled or not. The truth that recovery replays.
    log: list[LogEntry] = field(init=False, default_factory=list)
    # Every snapshot taken, oldest first. Recovery uses the last.
    snapshots: list[Snapshot] = field(init=False, default_factory=list)
    # Entries recorded since the last snapshot (Pulsar snapshotCounter).
    entries_since_snapshot: int = field(init=False, default=0)
    # When the last snapshot was taken (Pulsar lastSnapshotTimestamp), for time-based snapshots.
    last_snapshot_time: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.enabled = self.policies.deduplication_enabled
        self.take_snapshot(self.now, kind="enabled" if self.enabled else "disabled")

    # --- Pulsar primitives -------------------------------------------------------------------------------------

    def is_duplicate(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None) -> DupStatus:
        """Pulsar ``isDuplicateNormal``: compares only the lowest id, against the pushed mark.

        Example:
            >>> t = SequenceTracker()
            >>> t.is_duplicate("p1", 0), t.is_duplicate("p1", 0)
            (<DupStatus.NOT_DUP: 'NOT_DUP'>, <DupStatus.UNKNOWN: 'UNKNOWN'>)
        """
        if not self.enabled:
            return DupStatus.NOT_DUP
        status = self.dup_status(producer, sequence_id, highest_sequence_id)
        if status is DupStatus.NOT_DUP:
            self.pushed[producer] = Entry(producer, sequence_id, highest_sequence_id).highest
        return status

    def dup_status(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None) -> DupStatus:
        """``is_duplicate`` without changing anything."""
        if not self.enabled:
            return DupStatus.NOT_DUP
        pushed = self.pushed.get(producer)
        if pushed is not None and sequence_id <= pushed:
            persisted = self.persisted.get(producer)
            return DupStatus.DUP if persisted is not None and sequence_id <= persisted else DupStatus.UNKNOWN
        return DupStatus.NOT_DUP

    def _append(self, entry: Entry, now: float) -> int:
        """Write an entry to the log and, when enabled, raise its producer's persisted mark (max, see Q1)."""
        position = len(self.log) + 1
        self.log.append(LogEntry(position, entry.producer, entry.sequence_id, entry.highest, now, entry.payload))
        if self.enabled:
            self.persisted[entry.producer] = max(self.persisted.get(entry.producer, entry.highest), entry.highest)
            self.last_publish[entry.producer] = now
            self.entries_since_snapshot += 1
        return position

    def record_persisted(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None,
                         payload: object = None, now: float = 0.0) -> int:
        """Pulsar ``recordMessagePersisted`` after a durable write: an entry-count snapshot after every N-th."""
        position = self._append(Entry(producer, sequence_id, highest_sequence_id, payload), now)
        if self.enabled and self.entries_since_snapshot >= self.policies.snapshot_interval_entries:
            self.take_snapshot(now)
        return position

    def reset_pushed(self) -> None:
        """Pulsar ``resetHighestSequenceIdPushed``, after a failed write: pushed falls back to persisted."""
        self.pushed = dict(self.persisted)

    def publish(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None,
                payload: object = None, now: float = 0.0) -> tuple[DupStatus, int | None]:
        """One entry end to end: validate, decide, and write it when it is new."""
        validate(Entry(producer, sequence_id, highest_sequence_id))
        status = self.is_duplicate(producer, sequence_id, highest_sequence_id)
        if status is not DupStatus.NOT_DUP:
            return status, None
        return status, self.record_persisted(producer, sequence_id, highest_sequence_id, payload, now)

    # --- seqdedup statements -----------------------------------------------------------------------------------

    def apply_statement(self, entries: list[Entry], now: float = 0.0, order: list[int] | None = None) -> StatementResult:
        """One ``INSERT ... WHERE is_not_dup(...)``: every entry decided in arrival order (R1, R2), one commit.

        ``order`` lists the entries' indices in arrival order (the statement's ORDER BY); without it entries arrive
        sorted by (producer, sequence id, highest sequence id).

        Example:
            >>> t = SequenceTracker()
            >>> r = t.apply_statement([Entry("p1", 1, 5), Entry("p1", 4, 8), Entry("p1", 6)], order=[0, 1, 2])
            >>> [s.value for s in r.statuses], t.last_sequence_id("p1")
            (['NOT_DUP', 'DUP', 'NOT_DUP'], 6)
        """
        for entry in entries:
            validate(entry)
        if order is None:
            order = sorted(range(len(entries)),
                           key=lambda i: (entries[i].producer, entries[i].sequence_id, entries[i].highest))
        statuses: list[DupStatus] = [DupStatus.NOT_DUP] * len(entries)
        positions: list[int | None] = [None] * len(entries)
        written: dict[str, int] = {}
        duplicates: dict[str, int] = {}
        for i in order:
            entry = entries[i]
            mark = self.persisted.get(entry.producer) if self.enabled else None
            if mark is not None and entry.sequence_id <= mark:
                statuses[i] = DupStatus.DUP
                duplicates[entry.producer] = duplicates.get(entry.producer, 0) + 1
                continue
            positions[i] = self._append(entry, now)
            written[entry.producer] = written.get(entry.producer, 0) + 1
        self.pushed = dict(self.persisted)   # the statement committed: nothing is in flight
        return StatementResult(written, duplicates, positions, statuses, self._snapshot_if_due(now, any(written)))

    def _snapshot_if_due(self, now: float, wrote: bool) -> Snapshot | None:
        """R8, once per statement: every N entries, or after the interval when anything was written since."""
        since_position = len(self.log) - self.snapshots[-1].position
        seconds = self.policies.snapshot_interval_seconds
        due = since_position >= self.policies.snapshot_interval_entries or (
            seconds > 0 and since_position > 0 and now - self.last_snapshot_time >= seconds)
        if not due:
            return None
        return self.take_snapshot(now, kind="snapshot" if self.enabled else "disabled")

    # --- state ---------------------------------------------------------------------------------------------------

    def last_sequence_id(self, producer: str) -> int:
        """R13: the producer's mark, or -1 (also -1 while deduplication is disabled)."""
        if not self.enabled:
            return -1
        return self.pushed.get(producer, self.persisted.get(producer, -1))

    def state(self) -> dict[str, int]:
        return dict(self.persisted)

    def take_snapshot(self, now: float = 0.0, kind: str = "snapshot") -> Snapshot:
        """The persisted marks at the log's end; with a cap, the most recently active producers are kept (R12)."""
        names = sorted(self.persisted, key=lambda p: (-self.last_publish.get(p, 0.0), p))
        if self.policies.max_producers_in_snapshot is not None:
            names = names[: self.policies.max_producers_in_snapshot]
        snapshot = Snapshot(len(self.snapshots) + 1, len(self.log), {p: self.persisted[p] for p in names},
                            {p: self.last_publish[p] for p in names}, now, kind)
        self.snapshots.append(snapshot)
        self.entries_since_snapshot = 0
        self.last_snapshot_time = now
        return snapshot

    def purge_inactive(self, now: float) -> list[str]:
        """R11: forget producers whose last write is older than the timeout; a snapshot records the purge."""
        cutoff = now - self.policies.producer_inactivity_timeout * 60
        purged = sorted(p for p, t in self.last_publish.items() if t < cutoff)
        for producer in purged:
            for marks in (self.pushed, self.persisted, self.last_publish):
                marks.pop(producer, None)
        if purged:
            self.take_snapshot(now, kind="purge")
        return purged

    def disable(self, now: float = 0.0) -> None:
        """R10: forget everything; entries written from now on are not checked."""
        self.enabled = False
        self.pushed, self.persisted, self.last_publish = {}, {}, {}
        self.take_snapshot(now, kind="disabled")

    def enable(self, now: float = 0.0) -> None:
        """R10: start empty at the log's end, so ids used before are accepted again."""
        self.enabled = True
        self.pushed, self.persisted, self.last_publish = {}, {}, {}
        self.take_snapshot(now, kind="enabled")

    def recover(self) -> "SequenceTracker":
        """A crash and a restart (R7): a new tracker with the same log and snapshots, its state rebuilt from the
        latest snapshot plus a replay of the entries after it (taking the max per producer)."""
        recovered = SequenceTracker.__new__(SequenceTracker)
        recovered.policies, recovered.now = replace(self.policies), self.now
        recovered.log, recovered.snapshots = list(self.log), list(self.snapshots)
        last = self.snapshots[-1]
        recovered.enabled = last.kind != "disabled"
        recovered.persisted, recovered.last_publish = dict(last.marks), dict(last.last_publish)
        replayed = self.log[last.position:] if recovered.enabled else []
        for entry in replayed:
            p = entry.producer
            recovered.persisted[p] = max(recovered.persisted.get(p, entry.highest_sequence_id), entry.highest_sequence_id)
            recovered.last_publish[p] = max(recovered.last_publish.get(p, entry.publish_time), entry.publish_time)
        recovered.pushed = dict(recovered.persisted)
        recovered.entries_since_snapshot = len(replayed)
        recovered.last_snapshot_time = last.taken_at
        return recovered
