"""The reference model (the oracle): Pulsar's broker-side deduplication, ``MessageDeduplication``, in plain Python.

The engines must agree with it statement for statement. It keeps the topic log itself, so that a crash and a
recovery replay exactly as rule R7 says. It has two levels:

- the Pulsar primitives, one entry at a time (``is_duplicate``, ``record_persisted``, ``reset_pushed``,
  ``publish``), which replay the upstream tests S-P01 and S-P02 step by step, ``Unknown`` included;
- the seqdedup statement (``apply_statement``): validate every entry, decide each in arrival order against the
  persisted marks (R1, R2), write the new ones, and take at most one snapshot, at the end (one commit).

Where it departs from Pulsar, on purpose: marks are raised with ``max``, never overwritten (reference Q1); the
snapshot cap keeps the most recently active producers, ties by name, not hash order (Q3); and a snapshot records
disable, so that a restart knows the topic was disabled.
"""
from __future__ import annotations

import enum
import numbers
from dataclasses import dataclass, field, replace

from seqdedup.errors import InvalidEntryError, PayloadConflictError, SequenceGapError

MIN_ID, MAX_ID = -(2**63), 2**63 - 1   # ids are Java longs (R4)
#: A composite id (R19): a tuple of this many non-negative parts at most, each below 2^64 (an unsigned 64-bit
#: position, a PostgreSQL LSN), compared part by part; a source position such as (lsn, event index).
MAX_PARTS, PART_LIMIT = 3, 2**64


class DupStatus(str, enum.Enum):
    """What a producer is told about an entry (Pulsar ``MessageDupStatus``). Never collapse it to a boolean."""

    NOT_DUP = "NOT_DUP"   # definitely not a duplicate: it is written
    DUP = "DUP"           # definitely a duplicate: not written, acknowledged as success (R5)
    UNKNOWN = "UNKNOWN"   # an earlier write of it is in flight (persisted < s <= pushed): retry later (R6)


@dataclass(frozen=True)
class Entry:
    """One candidate entry: a single message ``(s)`` or a batch entry ``(s..h)``."""

    producer: str                            # the producer name: the key of the state
    sequence_id: int | tuple[int, ...]       # the lowest id of the entry: the only id the decision compares; a
                                             # tuple for a composite id (R19), compared part by part
    highest_sequence_id: int | None = None   # the highest id of a batch entry; None for a single message (h = s)
    payload: object = None                   # carried to the log untouched

    @property
    def highest(self) -> int:
        """Pulsar's ``max(highestSequenceId, sequenceId)``: the mark a written entry sets."""
        h = self.highest_sequence_id
        return self.sequence_id if h is None else max(h, self.sequence_id)


@dataclass
class Policies:
    """The applied (already resolved, R9) policies of one topic."""

    deduplication_enabled: bool = True            # whether a new tracker starts enabled (R10)
    snapshot_interval_entries: int = 1000         # entries recorded between entry-count snapshots (R8)
    snapshot_interval_seconds: int = 120          # seconds between time-based snapshots (R8); 0: off
    producer_inactivity_timeout: int | None = 360  # minutes without a write before a producer is purged (R11); None: never
    max_producers_in_snapshot: int | None = None  # None: no cap (seqdedup's default); an int caps like Pulsar (R12)
    # How snapshots are stored (R7), which the model's outcomes do not depend on: a full snapshot at least every
    # this many snapshots (the others hold only what changed), snapshots recovery no longer needs kept this many
    # minutes, and run log rows kept this many minutes (None: for ever).
    full_snapshot_interval: int = 100
    snapshot_retention_minutes: int = 0
    run_log_retention_minutes: int | None = 10080
    # How a topic's commits are stored, which the model does not depend on either: where each commit is a partition
    # (Spark), they are compacted every this many commits (None: never; seqdedup/core/compaction.py).
    compact_every_commits: int | None = 100
    # How long a producer's name stays held by a driver that stopped renewing it (R14 where several Spark drivers
    # share a metastore: seqdedup/core/leases.py); the model, one process, does not depend on it.
    producer_lease_seconds: int = 30
    # What is kept of the entries a statement drops (R16): nothing, the per-producer counts in the run log (counts),
    # or also a row per dropped entry in the ledger seqdedup_dropped, with its reason (keys), and its values (rows);
    # ledger rows are kept this many minutes (None: for ever). The model's outcomes do not depend on either: it
    # gives every dropped entry its reason (StatementResult.reasons) whatever is kept.
    dropped_entries: str = "counts"
    dropped_retention_minutes: int | None = 10080
    # A hole an entry leaves after its producer's mark (R17): allowed (Pulsar), recorded in seqdedup_gaps, or the
    # statement refused (Kafka and Fluss demand the next id).
    gap_policy: str = "allow"
    # A dropped entry whose (producer, sequence id) the topic holds with another payload (R18): ignored (Pulsar
    # compares ids only), recorded (its ledger reason is "conflict", and the run log counts it), or the statement
    # refused. Entries are compared with the topic's entries published within the last this many minutes (None: all
    # of them), the statement's own included: the bound that keeps the look-up cheap, as Kafka bounds its
    # per-producer cache of batches.
    payload_conflicts: str = "record"
    conflict_window_minutes: int | None = 1440
    # The key window in entries (R20, udfs/key_window.py): a key of ``is_new`` leaves the state once this many
    # entries were written after its own (None: the window is in time only, producer_inactivity_timeout). The model
    # of producers does not depend on it; KeyWindow(WindowPolicy(entries=N)) models it.
    key_window_entries: int | None = None

    @property
    def ledger(self) -> str | None:
        """What the topic's ledger of dropped entries keeps of each (R16): "keys", "rows", or None: no ledger."""
        return self.dropped_entries if self.dropped_entries in ("keys", "rows") else None


#: Why an entry was dropped (R16), in the ledger's ``reason`` column: at or below the producer's mark when the
#: statement began (a retry); a batch entry dropped whole though some of its ids were above that mark (R2); sent
#: again within the statement, its id written by an earlier entry (a repeat); or arrived after a higher id of its
#: producer, its own id never written (late). Any of these becomes a conflict where the topic holds an entry of its
#: (producer, sequence id) with another payload within the conflict window (R18), and conflicts are not ignored.
REASONS = ("retry", "straddles_mark", "repeat", "late", "conflict")


@dataclass(frozen=True)
class LogEntry:
    """One row of the topic log."""

    position: int              # the message id: from 1, strictly increasing in commit order
    producer: str              # who wrote it
    sequence_id: int           # its lowest id
    highest_sequence_id: int   # stored as max(h, s), what replay reads
    publish_time: float        # seconds, the ``now`` of the write
    payload: object            # the user's data


@dataclass(frozen=True)
class Snapshot:
    """The persisted marks as of one log position (R7); recovery starts from the latest."""

    snapshot_id: int                # 1, 2, 3 ... per tracker, in the order taken
    position: int                   # covers every log entry with position <= this
    marks: dict[str, int]           # producer -> persisted mark, capped by max_producers_in_snapshot
    last_publish: dict[str, float]  # producer -> last write time; the same keys as marks
    taken_at: float                 # the ``now`` it was taken at (time-based cadence)
    kind: str                       # why: "enabled", "snapshot", "purge" or "disabled" (then marks are empty)


@dataclass
class StatementResult:
    """What one statement did (R5): counts per producer, and per input entry its position and status."""

    written: dict[str, int]        # producer -> entries written (producers with none are absent)
    duplicates: dict[str, int]     # producer -> entries dropped as DUP (producers with none are absent)
    positions: list[int | None]    # per input entry, in input order: its position, or None for a duplicate
    statuses: list[DupStatus]      # per input entry, in input order
    snapshot: Snapshot | None      # the snapshot taken at the end of the statement, if one was due
    reasons: list[str | None] = field(default_factory=list)   # per input entry: why it was dropped (REASONS), or
                                                               # None for one written
    gaps: list[tuple[str, int, int]] = field(default_factory=list)  # R17: (producer, after, before) of each hole a
                                                                     # written entry left after its producer's mark
    conflicts: dict[str, int] = field(default_factory=dict)   # R18: producer -> dropped entries whose payload
                                                               # differs from the one the topic holds (not ignored)


def gap_refusal(producer: str, after: int, before: int) -> str:
    """Why a statement that leaves a hole is refused (R17, ``gap_policy`` refuse), naming its first hole.

    Example:
        >>> gap_refusal("p1", 4, 6)
        "producer 'p1' would skip id 5 (its mark is 4, the next id it sent 6), and the topic's gap_policy is refuse: send the missing ids first, or set gap_policy to record or allow. Nothing was written"
    """
    ids = f"id {after + 1}" if before - after == 2 else f"ids {after + 1} to {before - 1}"
    return (f"producer {producer!r} would skip {ids} (its mark is {after}, the next id it sent {before}), and the "
            "topic's gap_policy is refuse: send the missing ids first, or set gap_policy to record or allow. Nothing "
            "was written")


def conflict_refusal(producer: str, sequence_id: int, held: object, sent: object) -> str:
    """Why a statement that drops an entry of another payload is refused (R18, ``payload_conflicts`` refuse), naming
    the first such entry (by producer, then id) and both fingerprints (the engines'; the model's payloads).

    Example:
        >>> conflict_refusal("p1", 7, 1234, -99)
        "producer 'p1' sent id 7 again with another payload (fingerprint -99, where the topic holds 1234), and the topic's payload_conflicts is refuse: send the entry as it was, or give the new payload a new id. Nothing was written"
    """
    return (f"producer {producer!r} sent id {sequence_id} again with another payload (fingerprint {sent}, where the "
            f"topic holds {held}), and the topic's payload_conflicts is refuse: send the entry as it was, or give the "
            "new payload a new id. Nothing was written")


def _reason(entry: Entry, mark: int | None, written: set[tuple[str, int]]) -> str:
    """Why a dropped ``entry`` was dropped (``REASONS``), given its producer's ``mark`` when the statement began and
    the (producer, id) the statement wrote.

    Example:
        >>> [_reason(Entry("p", s, h), 5, {("p", 7)}) for s, h in [(3, None), (4, 8), (7, None), (6, None)]]
        ['retry', 'straddles_mark', 'repeat', 'late']
    """
    if mark is not None and entry.sequence_id <= mark:
        return "straddles_mark" if entry.highest > mark else "retry"
    return "repeat" if (entry.producer, entry.sequence_id) in written else "late"


def shape(sequence_id: int | tuple[int, ...]) -> int:
    """An id's shape (R19): 0 for an integer id, else its number of parts. A topic's ids all have one shape.

    Example:
        >>> shape(7), shape((7, 0)), (7, 2**64 - 1) < (8, 0)
        (0, 2, True)
    """
    return len(sequence_id) if isinstance(sequence_id, tuple) else 0


def _composite_problem(entry: Entry) -> str | None:
    """What is wrong with ``entry``'s composite id under R19, with the fix, or None."""
    parts = entry.sequence_id
    if not 1 <= len(parts) <= MAX_PARTS:
        return f"sequence_id {parts!r} has {len(parts)} parts; a composite id has 1 to {MAX_PARTS}"
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, numbers.Integral):
            return f"sequence_id {parts!r} has a part {part!r} that is not an integer"
        if not 0 <= part < PART_LIMIT:
            return (f"sequence_id {parts!r} has a part {part} outside 0 to 2^64 - 1; each part is an unsigned "
                    "64-bit position")
    if entry.highest_sequence_id is not None:
        return (f"a composite id {parts!r} has no batch entries (highest_sequence_id {entry.highest_sequence_id!r}); "
                "send each event with its own position")
    return None


def _problem(entry: Entry) -> str | None:
    """What is wrong with ``entry`` under R4 (R19 for a composite id), with the fix, or None."""
    if entry.producer is None:
        return "the producer is NULL; give every entry a producer name"
    if entry.sequence_id is None:
        return "sequence_id is NULL; give every entry a sequence id"
    if isinstance(entry.sequence_id, tuple):
        return _composite_problem(entry)
    ids = {"sequence_id": entry.sequence_id, "highest_sequence_id": entry.highest_sequence_id}
    for name, value in ids.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return f"{name} {value!r} is not an integer; sequence ids are BIGINT"
        if not MIN_ID <= value <= MAX_ID:
            return f"{name} {value} is outside signed 64-bit; ids go up to {MAX_ID}"
        if value < 0:
            return f"{name} {value} is negative; use ids >= 0, as Pulsar's client requires"
    if entry.highest_sequence_id is not None and entry.highest_sequence_id < entry.sequence_id:
        return (f"highest_sequence_id {entry.highest_sequence_id} is below sequence_id {entry.sequence_id}; "
                "a batch entry covers sequence_id..highest_sequence_id")
    return None


def validate(entry: Entry, index: int = 0, shaped: int | None = None) -> None:
    """R4: raise ``InvalidEntryError`` saying what is wrong with ``entry`` (input number ``index``) and how to fix it;
    R19: where the topic's ids have a ``shaped`` (``shape``), an id of another shape is refused.

    Example:
        >>> validate(Entry("p", 5, 2))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        seqdedup.errors.InvalidEntryError: entry 0 ('p', 5..2): highest_sequence_id 2 is below sequence_id 5; ...
        >>> validate(Entry("p", (5, 1)), shaped=3)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        seqdedup.errors.InvalidEntryError: entry 0 ('p', (5, 1)): sequence_id (5, 1) has 2 parts where the topic's ids have 3 parts; ...
    """
    problem = _problem(entry)
    if problem is None and shaped is not None and shape(entry.sequence_id) != shaped:
        kind = lambda n: "are integers" if n == 0 else f"have {n} parts"       # noqa: E731
        said = "is an integer" if not shape(entry.sequence_id) else f"has {shape(entry.sequence_id)} parts"
        problem = (f"sequence_id {entry.sequence_id!r} {said} where the topic's ids {kind(shaped)}; every id of a "
                   "topic has one shape")
    if problem is not None:
        s, h = entry.sequence_id, entry.highest_sequence_id
        span = f"{s}" if h is None else f"{s}..{h}"
        raise InvalidEntryError(f"entry {index} ({entry.producer!r}, {span}): {problem}. Nothing was written.")


class SequenceTracker:
    """One topic's deduplication state, exactly as Pulsar's ``MessageDeduplication``, plus the topic log itself."""

    def __init__(self, policies: Policies | None = None, now: float = 0.0) -> None:
        # The applied policies; set once, never changed by the tracker (disable/enable change ``enabled``).
        self.policies: Policies = policies if policies is not None else Policies()
        # Deduplication on: entries are checked and recorded. Off: everything is written and nothing recorded.
        # Starts from the policy; changed only by disable() and enable().
        self.enabled: bool = self.policies.deduplication_enabled
        # Pulsar highestSequencedPushed: the highest id accepted per producer. "Updated before the messages are
        # persisted" (is_duplicate, apply_statement); falls back to ``persisted`` on reset_pushed().
        self.pushed: dict[str, int] = {}
        # Pulsar highestSequencedPersisted: the highest id durably written per producer. Updated after the write
        # (record_persisted, apply_statement); the only map that snapshots hold.
        self.persisted: dict[str, int] = {}
        # Producer -> time of its last write (Pulsar's inactiveProducers, by write time); set with ``persisted``,
        # read by purge_inactive().
        self.last_publish: dict[str, float] = {}
        # The topic: every entry ever written, enabled or not, in position order. The truth recovery replays.
        self.log: list[LogEntry] = []
        # Every snapshot taken, oldest first; recovery starts from the last one.
        self.snapshots: list[Snapshot] = []
        # Pulsar snapshotCounter: entries recorded (while enabled) since the last snapshot; 0 after each snapshot.
        self.entries_since_snapshot: int = 0
        # Pulsar lastSnapshotTimestamp: when the last snapshot was taken, for time-based snapshots.
        self.last_snapshot_time: float = now
        self.take_snapshot(now, kind="enabled")   # a "disabled" one when the policy is off (see take_snapshot)

    # --- Pulsar primitives, one entry at a time -------------------------------------------------------------------

    def dup_status(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None) -> DupStatus:
        """What ``is_duplicate`` would answer, changing nothing: compares the lowest id with pushed, then persisted."""
        if not self.enabled:
            return DupStatus.NOT_DUP
        pushed = self.pushed.get(producer)
        if pushed is None or sequence_id > pushed:
            return DupStatus.NOT_DUP
        persisted = self.persisted.get(producer)
        return DupStatus.DUP if persisted is not None and sequence_id <= persisted else DupStatus.UNKNOWN

    def is_duplicate(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None) -> DupStatus:
        """Pulsar ``isDuplicateNormal``: ``NOT_DUP`` sets ``pushed[producer] = max(h, s)``; the others change nothing.

        Example:
            >>> t = SequenceTracker()
            >>> t.is_duplicate("p1", 0).value, t.is_duplicate("p1", 0).value   # the first is not persisted yet
            ('NOT_DUP', 'UNKNOWN')
            >>> _ = t.record_persisted("p1", 0)
            >>> t.is_duplicate("p1", 0).value, t.is_duplicate("p1", 1, 5).value, t.pushed
            ('DUP', 'NOT_DUP', {'p1': 5})
        """
        status = self.dup_status(producer, sequence_id)
        if status is DupStatus.NOT_DUP and self.enabled:
            self.pushed[producer] = Entry(producer, sequence_id, highest_sequence_id).highest
        return status

    def _append(self, entry: Entry, now: float) -> int:
        """Write ``entry`` at the log's end and, when enabled, record it as persisted. Returns its position."""
        position = len(self.log) + 1
        self.log.append(LogEntry(position, entry.producer, entry.sequence_id, entry.highest, now, entry.payload))
        if self.enabled:
            p, h = entry.producer, entry.highest
            self.persisted[p] = max(self.persisted.get(p, h), h)   # max, not Pulsar's put (Q1)
            self.last_publish[p] = now
            self.entries_since_snapshot += 1
        return position

    def record_persisted(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None,
                         payload: object = None, now: float = 0.0) -> int:
        """Pulsar ``recordMessagePersisted``: a durable write; every N-th recorded entry takes a snapshot."""
        position = self._append(Entry(producer, sequence_id, highest_sequence_id, payload), now)
        if self.enabled and self.entries_since_snapshot >= self.policies.snapshot_interval_entries:
            self.take_snapshot(now)
        return position

    def reset_pushed(self) -> None:
        """Pulsar ``resetHighestSequenceIdPushed``, after a failed write drains: pushed falls back to persisted."""
        if self.enabled:
            self.pushed = dict(self.persisted)

    def publish(self, producer: str, sequence_id: int, highest_sequence_id: int | None = None,
                payload: object = None, now: float = 0.0) -> tuple[DupStatus, int | None]:
        """One entry end to end: validate, ``is_duplicate``, and on ``NOT_DUP`` write it. Returns (status, position)."""
        validate(Entry(producer, sequence_id, highest_sequence_id), shaped=self.shaped)
        status = self.is_duplicate(producer, sequence_id, highest_sequence_id)
        if status is not DupStatus.NOT_DUP:
            return status, None
        return status, self.record_persisted(producer, sequence_id, highest_sequence_id, payload, now)

    # --- seqdedup statements ---------------------------------------------------------------------------------------

    def apply_statement(self, entries: list[Entry], now: float = 0.0,
                        order: list[int] | None = None) -> StatementResult:
        """One ``INSERT ... WHERE is_not_dup(...)``: validate all, decide each in arrival order (R1, R2), one commit.

        ``order`` lists the entries' indices in arrival order (the statement's ORDER BY); without it they arrive
        sorted by (producer, sequence_id, highest). A statement commits whole, so ``UNKNOWN`` never comes out.

        Example:
            >>> t = SequenceTracker()
            >>> r = t.apply_statement([Entry("p1", 1, 5), Entry("p1", 4, 8), Entry("p1", 6)], order=[0, 1, 2])
            >>> [s.value for s in r.statuses], r.positions, t.last_sequence_id("p1")
            (['NOT_DUP', 'DUP', 'NOT_DUP'], [1, None, 2], 6)
            >>> r = t.apply_statement([Entry("p1", 7), Entry("p2", 0), Entry("p1", 6), Entry("p1", 7)])
            >>> r.written, r.duplicates, r.positions
            ({'p1': 1, 'p2': 1}, {'p1': 2}, [3, 4, None, None])
        """
        shaped = self.shaped    # (R19: the topic's ids have one shape; a first statement's, that of its first id)
        if shaped is None and entries and entries[0].sequence_id is not None:
            shaped = shape(entries[0].sequence_id)
        for index, entry in enumerate(entries):
            validate(entry, index, shaped)
        if order is None:
            order = sorted(range(len(entries)), key=lambda i: (entries[i].producer, entries[i].sequence_id,
                                                               entries[i].highest))
        elif sorted(order) != list(range(len(entries))):
            raise ValueError(f"order must be a permutation of 0..{len(entries) - 1}, got {order!r}")
        written: dict[str, int] = {}
        duplicates: dict[str, int] = {}
        positions: list[int | None] = [None] * len(entries)
        statuses = [DupStatus.NOT_DUP] * len(entries)
        began = dict(self.persisted) if self.enabled else {}      # the marks the statement began with
        before = (len(self.log), dict(self.persisted), dict(self.pushed), dict(self.last_publish),
                  self.entries_since_snapshot)                 # (a refused statement leaves all as it was)
        gaps: list[tuple[str, int, int]] = []
        for i in order:
            entry = entries[i]
            p = entry.producer
            mark = self.persisted.get(p) if self.enabled else None   # H(p): the persisted mark
            if mark is not None and entry.sequence_id <= mark:
                statuses[i] = DupStatus.DUP
                duplicates[p] = duplicates.get(p, 0) + 1
                continue
            if not shaped and mark is not None and entry.sequence_id > mark + 1:
                # R17: ids mark+1 .. s-1 never sent (integer ids only: a composite id's next is not known, R19)
                gaps.append((p, mark, entry.sequence_id))
            if self.enabled:
                self.pushed[p] = max(self.pushed.get(p, entry.highest), entry.highest)
            positions[i] = self._append(entry, now)
            written[p] = written.get(p, 0) + 1
        if gaps and self.policies.gap_policy == "refuse":
            self._undo(before)
            raise SequenceGapError(gap_refusal(*min(gaps)))
        ids = {(e.producer, e.sequence_id) for e, at in zip(entries, positions) if at is not None}
        reasons = [None if at is not None else _reason(e, began.get(e.producer), ids)
                   for e, at in zip(entries, positions)]
        conflicts: dict[str, int] = {}
        if self.policies.payload_conflicts != "ignore":
            found = self._conflicts({i: e for i, (e, at) in enumerate(zip(entries, positions)) if at is None}, now)
            if found and self.policies.payload_conflicts == "refuse":
                self._undo(before)
                first = min(found, key=lambda i: (entries[i].producer, entries[i].sequence_id, i))
                entry = entries[first]
                raise PayloadConflictError(conflict_refusal(entry.producer, entry.sequence_id, found[first],
                                                            entry.payload))
            for i in found:
                reasons[i] = "conflict"
                conflicts[entries[i].producer] = conflicts.get(entries[i].producer, 0) + 1
        return StatementResult(written, duplicates, positions, statuses, self._snapshot_if_due(now), reasons,
                               sorted(gaps), conflicts)

    def _conflicts(self, dropped: dict[int, Entry], now: float) -> dict[int, object]:
        """R18: of the ``dropped`` entries (by input number), each whose (producer, sequence id) the topic holds with
        another payload, mapped to the payload it holds: that of the last entry written with the key (the highest
        position) among those published within the conflict window, this statement's included (published at
        ``now``). The model compares payloads whole; the engines compare a 64-bit fingerprint of the user's
        columns (a fingerprint collision, about one in 2^64 per pair, would go unseen)."""
        minutes = self.policies.conflict_window_minutes
        since = float("-inf") if minutes is None else now - minutes * 60
        wanted = {(e.producer, e.sequence_id) for e in dropped.values()}
        held: dict[tuple[str, int], object] = {}
        for entry in self.log:          # (position order: a later entry of a key replaces an earlier one)
            key = (entry.producer, entry.sequence_id)
            if key in wanted and entry.publish_time >= since:
                held[key] = entry.payload
        return {i: held[e.producer, e.sequence_id] for i, e in dropped.items()
                if (e.producer, e.sequence_id) in held and held[e.producer, e.sequence_id] != e.payload}

    def _undo(self, before: tuple) -> None:
        """Leave the tracker as it was before a refused statement (``before``: the log's length, the three maps and
        the entries since the last snapshot)."""
        del self.log[before[0]:]
        self.persisted, self.pushed, self.last_publish, self.entries_since_snapshot = before[1:]

    def _snapshot_if_due(self, now: float) -> Snapshot | None:
        """R8 at a statement's commit: every N entries, or after the interval when anything was written since."""
        if not self.enabled or self.entries_since_snapshot == 0:
            return None
        seconds = self.policies.snapshot_interval_seconds
        if (self.entries_since_snapshot >= self.policies.snapshot_interval_entries
                or (seconds > 0 and now - self.last_snapshot_time >= seconds)):
            return self.take_snapshot(now)
        return None

    # --- state, snapshots, lifecycle -------------------------------------------------------------------------------

    @property
    def shaped(self) -> int | None:
        """The shape of the topic's ids (R19: ``shape``), set by its first entry; None while it has none."""
        return shape(self.log[0].sequence_id) if self.log else None

    def last_sequence_id(self, producer: str) -> int | tuple[int, ...]:
        """R13: the producer's pushed mark (a tuple for composite ids, R19), or -1 when it has none or deduplication
        is disabled."""
        return self.pushed.get(producer, -1) if self.enabled else -1

    def state(self) -> dict[str, int]:
        """The persisted marks (a copy)."""
        return dict(self.persisted)

    def take_snapshot(self, now: float = 0.0, kind: str = "snapshot") -> Snapshot:
        """Snapshot the persisted marks at the log's end. With a cap, the most recently active producers are kept,
        ties by name (R12). A snapshot taken while disabled is of kind "disabled", whatever ``kind`` says."""
        names = sorted(self.persisted, key=lambda p: (-self.last_publish.get(p, float("-inf")), p))
        if self.policies.max_producers_in_snapshot is not None:
            names = names[: self.policies.max_producers_in_snapshot]
        names.sort()
        snapshot = Snapshot(
            snapshot_id=len(self.snapshots) + 1,
            position=len(self.log),
            marks={p: self.persisted[p] for p in names},
            last_publish={p: self.last_publish[p] for p in names if p in self.last_publish},
            taken_at=now,
            kind=kind if self.enabled else "disabled",
        )
        self.snapshots.append(snapshot)
        self.entries_since_snapshot = 0
        self.last_snapshot_time = now
        return snapshot

    def published_at(self) -> float:
        """The topic's latest publish time as its catalog says: the last write of a producer in the state, or the
        last snapshot (which recorded any purged since)."""
        return max([*self.last_publish.values(), self.last_snapshot_time])

    def purge_inactive(self, now: float, *, by_log: bool = False) -> list[str]:
        """R11: forget producers whose last write is strictly older than the timeout; a snapshot records the purge.
        Returns the purged names, sorted. ``by_log`` (a statement): idleness is judged by the earlier of ``now``
        and the topic's latest publish time before it, so one statement's clock, stepped forward, expires nobody
        (docs/semantics.md, "The clock"); a purge asked for judges by ``now``."""
        if self.policies.producer_inactivity_timeout is None:     # "never": producers do not expire
            return []
        judged = min(now, self.published_at()) if by_log else now
        cutoff = judged - self.policies.producer_inactivity_timeout * 60
        purged = sorted(p for p, t in self.last_publish.items() if t < cutoff)
        for p in purged:
            for marks in (self.pushed, self.persisted, self.last_publish):
                marks.pop(p, None)
        if purged:
            self.take_snapshot(now, kind="purge")
        return purged

    def snapshot_now(self, now: float) -> Snapshot | None:
        """A snapshot asked for (``Session.snapshot``, ``seqdedup snapshot``): idle producers purged, judged by
        ``now``, then a snapshot whenever anything was written since the last one, purge or not (R8). Its time is a
        publish time (R11: ``published_at``). Returns the last snapshot taken, if any."""
        if not self.enabled:
            return None
        taken = self.snapshots[-1] if self.purge_inactive(now) else None
        if self.entries_since_snapshot:
            taken = self.take_snapshot(now)
        return taken

    def _restart_empty(self, enabled: bool, now: float) -> None:
        """R10: forget every mark and start again at the log's end (Pulsar deletes or reopens ``pulsar.dedup``)."""
        self.enabled = enabled
        self.pushed, self.persisted, self.last_publish = {}, {}, {}
        self.take_snapshot(now, kind="enabled" if enabled else "disabled")

    def disable(self, now: float = 0.0) -> None:
        """R10: forget everything; entries written from now on are not checked."""
        self._restart_empty(False, now)

    def enable(self, now: float = 0.0) -> None:
        """R10: start empty at the log's end, so ids used before are accepted again."""
        self._restart_empty(True, now)

    def recover(self) -> SequenceTracker:
        """Crash and restart (R7): a new tracker with the same policies, log and snapshots, its state rebuilt from
        the latest snapshot plus a replay of the entries after it (max per producer). A "disabled" snapshot means
        a disabled, empty tracker."""
        last = self.snapshots[-1]
        tracker = SequenceTracker(replace(self.policies), now=last.taken_at)
        tracker.enabled = last.kind != "disabled"
        tracker.log, tracker.snapshots = list(self.log), list(self.snapshots)
        tracker.persisted, tracker.last_publish = dict(last.marks), dict(last.last_publish)
        replayed = self.log[last.position:] if tracker.enabled else []
        for entry in replayed:
            p, h, t = entry.producer, entry.highest_sequence_id, entry.publish_time
            tracker.persisted[p] = max(tracker.persisted.get(p, h), h)
            tracker.last_publish[p] = max(tracker.last_publish.get(p, t), t)
        tracker.pushed = dict(tracker.persisted)
        tracker.entries_since_snapshot = len(replayed)
        tracker.last_snapshot_time = last.taken_at
        return tracker
