"""The reference model of the key window (R20; issue 44): ``is_new(key)`` for sources that cannot replay with the
same ids (webhooks redelivered, files exported again, a producer that restarts without its counter).

An entry is written when its key was not written within the topic's window, and dropped otherwise: the window is
the topic's last N entries (``entries``) or the entries published within the last T minutes (``minutes``). A key is
whatever identifies an entry: a column, a tuple of columns, or a hash of the row; the model compares keys whole,
and NULL parts of a tuple equal each other (as GROUP BY groups them), but a NULL key is refused.

The window's keys are state like the producers' marks (R7, R8): held in memory, snapshotted every
``snapshot_interval_entries`` written entries (the keys in the window then, each with its position and publish
time), and rebuilt after a crash from the last snapshot plus a replay of the entries written after it. They are
pruned as the window moves, so the state holds at most the window's keys whatever the topic's size. **A key seen
before the window is accepted again**: the window is what bounds the cost, as ClickHouse's and BigQuery's do.

A statement is judged against the window as it stands when the statement begins, and against its own entries: of
the copies of a key in one statement, the first in arrival order (the ORDER BY; else input order here, the
engine's pick on the engines) is written, the others are dropped as repeats. The statement's clock (``now``) never
goes back, as R11's clock does not. A window in minutes judges time as R11 judges a producer idle (by the earlier of
the clock and the topic's latest commit), and records a prune with a snapshot as R11 records a purge: on the engines
a key is a producer whose only id is 0 and the window the topic's ``producer_inactivity_timeout``
(``sql/key_window.py``; ``producer_of`` gives a key's producer name), and the tests check the two agree.

    >>> w = KeyWindow(WindowPolicy(entries=2))
    >>> w.apply_statement([("a", 1), ("b", 2), ("a", 3)]).reasons
    [None, None, 'repeat']
    >>> w.apply_statement([("c", 4)]).positions, w.apply_statement([("a", 5), ("c", 6)]).reasons
    ([3], [None, 'in_window'])
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Hashable

from seqdedup.errors import InvalidEntryError

#: Why ``is_new`` dropped an entry: its key was written within the window before the statement (``in_window``), or
#: by an earlier entry of the statement (``repeat``).
WINDOW_REASONS = ("in_window", "repeat")


@dataclass(frozen=True)
class WindowPolicy:
    """A topic's key window: the keys of its last ``entries`` entries, or of those published within the last
    ``minutes`` (exactly one); a snapshot of the window's keys every ``snapshot_interval_entries`` written entries,
    or ``snapshot_interval_seconds`` after the last one (as R8's: a snapshot moves the topic's time, which the
    window in minutes is judged by)."""

    entries: int | None = None
    minutes: float | None = None
    snapshot_interval_entries: int = 1000
    snapshot_interval_seconds: float = 120      # also a snapshot this long after the last, when entries came since (R8)

    def __post_init__(self) -> None:
        if (self.entries is None) == (self.minutes is None):
            raise ValueError("a key window is set in entries or in minutes: give exactly one of them")
        if (self.entries if self.entries is not None else self.minutes) <= 0:
            raise ValueError("a key window's size must be positive")


@dataclass(frozen=True)
class Written:
    """Where and when a key was written: its entry's position and publish time."""

    position: int
    publish_time: float


@dataclass(frozen=True)
class KeyedEntry:
    """One row of the topic log of a key-window topic."""

    position: int
    key: Hashable
    publish_time: float
    payload: object


@dataclass(frozen=True)
class WindowSnapshot:
    """The window's keys as of one log position; recovery starts from the latest."""

    position: int                   # covers every log entry with position <= this
    keys: dict[Hashable, Written]   # the keys in the window then
    taken_at: float


@dataclass
class WindowResult:
    """What one statement did: per input entry its position (None: dropped) and why it was dropped."""

    positions: list[int | None]
    reasons: list[str | None]
    snapshot: WindowSnapshot | None = None
    written: int = field(init=False)

    def __post_init__(self) -> None:
        self.written = sum(p is not None for p in self.positions)


class KeyWindow:
    """One key-window topic: its log, its snapshots and the window's keys in memory."""

    def __init__(self, policy: WindowPolicy, now: float = 0.0) -> None:
        self.policy = policy
        self.log: list[KeyedEntry] = []
        self.snapshots: list[WindowSnapshot] = [WindowSnapshot(0, {}, now)]
        self.keys: dict[Hashable, Written] = {}     # the window's keys, pruned at every statement
        self.since_snapshot = 0                      # entries written since the last snapshot
        self.published_at = now                      # the topic's latest publish time: a write, or a snapshot

    def holds(self, written: Written, judged: float) -> bool:
        """Whether an entry written so is within the window, with the log as it is and time judged at ``judged``."""
        if self.policy.entries is not None:
            return written.position > len(self.log) - self.policy.entries
        return written.publish_time >= judged - self.policy.minutes * 60

    def _prune(self, now: float) -> None:
        """The window as a statement at ``now`` begins. In minutes, time is judged as R11 judges a producer idle: by
        the earlier of ``now`` and the topic's latest publish time, so one statement whose clock was stepped forward
        empties no window; and a prune is recorded by a snapshot, as R11's purge is."""
        kept = {key: at for key, at in self.keys.items() if self.holds(at, min(now, self.published_at))}
        pruned = len(kept) < len(self.keys)
        self.keys = kept
        if pruned and self.policy.minutes is not None:
            self._snapshot(now)

    def _snapshot(self, now: float) -> WindowSnapshot:
        snapshot = WindowSnapshot(len(self.log), dict(self.keys), now)
        self.snapshots.append(snapshot)
        self.since_snapshot = 0
        self.published_at = max(self.published_at, now)
        return snapshot

    def apply_statement(self, entries: list[tuple[Hashable, object]], now: float = 0.0,
                        order: list[int] | None = None) -> WindowResult:
        """One ``INSERT ... WHERE is_new(key)``: ``entries`` are (key, payload); ``order`` their arrival order (the
        ORDER BY), else input order. Each is written unless its key is in the window or came earlier in the
        statement; one commit, and a snapshot at its end when due."""
        for index, (key, _) in enumerate(entries):
            if key is None:
                raise InvalidEntryError(f"entry {index}: the key is NULL; give every entry a key (a column, a tuple "
                                        "of columns, or a hash of the row). Nothing was written.")
        order = list(range(len(entries))) if order is None else order
        self._prune(now)                        # the window as the statement begins
        began = set(self.keys)
        positions: list[int | None] = [None] * len(entries)
        reasons: list[str | None] = [None] * len(entries)
        for i in order:
            key, payload = entries[i]
            if key in began:
                reasons[i] = "in_window"
            elif key in self.keys:              # (written earlier in this statement)
                reasons[i] = "repeat"
            else:
                positions[i] = len(self.log) + 1
                self.log.append(KeyedEntry(positions[i], key, now, payload))
                self.keys[key] = Written(positions[i], now)
        written = sum(p is not None for p in positions)
        self.since_snapshot += written
        if written:
            self.published_at = max(self.published_at, now)
        if self.policy.entries is not None:     # (memory: the window's keys only; in minutes, the next statement
            self._prune(now)                    # prunes, as R11 purges a producer at the first statement after)
        snapshot = None
        seconds = self.policy.snapshot_interval_seconds
        if self.since_snapshot and (self.since_snapshot >= self.policy.snapshot_interval_entries or (
                seconds > 0 and now - self.snapshots[-1].taken_at >= seconds)):
            snapshot = self._snapshot(now)
        return WindowResult(positions, reasons, snapshot)

    def recover(self) -> KeyWindow:
        """Crash and restart: a new window over the same log and snapshots, its keys those of the last snapshot and
        of the entries written after it (a later entry of a key replaces an earlier one); the next statement prunes
        what has left the window since."""
        last = self.snapshots[-1]
        window = KeyWindow(self.policy, now=last.taken_at)
        window.log, window.snapshots = list(self.log), list(self.snapshots)
        window.keys = dict(last.keys)
        for entry in self.log[last.position:]:
            window.keys[entry.key] = Written(entry.position, entry.publish_time)
        window.since_snapshot = len(self.log) - last.position
        window.published_at = max([last.taken_at, *(e.publish_time for e in self.log[last.position:])])
        return window


def producer_of(key: str | int | tuple | None) -> str | None:
    """The producer name the engines give a key (``sql/key_window.py``: on the engines, a key is a producer whose only
    id is 0), for keys whose parts are strings or integers (their text as the engines cast them); None for a NULL key
    of one part.

        >>> producer_of("a"), producer_of(("a", None)) == producer_of(("a", None)) != producer_of("a")
        ('key:44ba3e7c25cf988643a8dd3282b9b317', True)
    """
    parts = key if isinstance(key, tuple) else (key,)
    if not isinstance(key, tuple) and key is None:
        return None
    spelled = ["n" if part is None else f"v{len(str(part))}:{part}" for part in parts]
    return "key:" + hashlib.md5(",".join(spelled).encode()).hexdigest()
